"""``keel exec``: one command contained in place in the workspace."""
