"""``keel exec``: one command contained in place in the workspace.

``exec_backend`` lives here, importing only the backend choice: the hooks and ``keel policy
check`` ask it whether they contain what they allow, and need nothing else of ``keel exec``.
"""


def exec_backend(
    requested: str = "auto", *, refresh: bool = False, state_dir: str | None = None
) -> tuple[str | None, str]:
    """``(backend, reason)`` that ``keel exec`` uses here for ``requested``; ``None`` if none."""
    from keel.core.userstate import user_state_dir
    from keel.sandbox.exec._select import choose

    choice = choose(requested, state_dir or user_state_dir(), refresh=refresh)
    return choice.name, choice.reason
