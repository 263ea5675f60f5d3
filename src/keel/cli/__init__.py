"""The ``keel`` command line."""
