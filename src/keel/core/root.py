"""The workspace root and its ``.keel/`` state directory: the one rule every process uses.

The root is the nearest ancestor holding ``keel.toml``, else the git work-tree root, else the
directory itself; ``--workspace DIR`` overrides all three. The hook process, the CLI and
``keel exec`` all ask ``find_root``, so they agree on which ``.keel/`` holds the journal, the
emergency stop and the exec records.

Only ``os`` at import (no ``pathlib``, no ``typing``): the hook process imports this on every
tool call.
"""

import os

TYPE_CHECKING = False  # typing and pathlib cost ms to import on the hook path
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

STATE_DIR = ".keel"
"""keel's state directory in the workspace root: journal, checkpoints, stop flag, hookd."""
CONFIG_NAME = "keel.toml"
"""The workspace's configuration file; its directory is the root."""
GIT_MARKER = ".git"

PROJECT_DIR_VARS = {
    "claude": ("KEEL_WORKSPACE", "CLAUDE_PROJECT_DIR"),
    "codex": ("KEEL_WORKSPACE",),
    "gemini": ("KEEL_WORKSPACE", "GEMINI_PROJECT_DIR", "CLAUDE_PROJECT_DIR"),
}
"""Where each client says its project is; Codex says nothing and runs hooks in the project."""


def find_root(start: "str | os.PathLike[str] | None" = None, override: "str | None" = None) -> str:
    """The workspace root of ``start`` (default: the current directory), absolute and resolved.

    ``override`` (``--workspace``) wins as it is (``~`` expanded, symlinks resolved). Else the
    nearest ancestor holding a ``keel.toml`` file, else the nearest git work tree, else
    ``start`` itself.

    A git work tree is found by git's own rule (``is_repository``): a ``.git`` directory, or a
    ``.git`` file (a worktree or submodule pointing elsewhere), symlinks followed. A dangling
    ``.git`` symlink is not a repository, as git itself does not stop there either; every
    keel process taking the same view is what makes them share one ``.keel/``.
    """
    if override:
        try:
            return os.path.realpath(os.path.expanduser(override))
        except (OSError, RuntimeError):  # a symlink loop: callers find it is no directory
            return os.path.abspath(os.path.expanduser(override))
    here = os.path.realpath(os.getcwd() if start is None else start)
    chain = [here]
    while os.path.dirname(chain[-1]) != chain[-1]:
        chain.append(os.path.dirname(chain[-1]))
    for candidate in chain:
        if os.path.isfile(os.path.join(candidate, CONFIG_NAME)):
            return candidate
    for candidate in chain:
        if is_repository(candidate):
            return candidate
    return here


def is_repository(directory: "str | os.PathLike[str]") -> bool:
    """Whether ``directory`` is a git work tree: its ``.git`` is a directory or a file.

    Symlinks are followed, so a dangling ``.git`` link (or one to a FIFO) is not a repository.
    """
    marker = os.path.join(directory, GIT_MARKER)
    return os.path.isdir(marker) or os.path.isfile(marker)


def hook_root(agent: str, workspace: "str | None", env: "Mapping[str, str] | None" = None) -> str:
    """The workspace of a hook call: ``--workspace``, else the client's project dir, else cwd.

    The project directory a client names (``PROJECT_DIR_VARS``) is a start for ``find_root``,
    not the root itself: a client started in a subdirectory finds the same root as the CLI.
    """
    if workspace:
        return find_root(override=workspace)
    environ = os.environ if env is None else env
    for var in PROJECT_DIR_VARS.get(agent, ("KEEL_WORKSPACE",)):
        value = environ.get(var)
        if value and os.path.isdir(value):
            return find_root(start=value)
    return find_root()


def state_path(root: "str | os.PathLike[str]", *names: str) -> str:
    """``<root>/.keel`` (or a path inside it: ``state_path(root, "exec")``), not created."""
    return os.path.join(root, STATE_DIR, *names)


def state_dir(root: "Path") -> "Path":
    """``<root>/.keel`` as a ``Path``, not created."""
    return root / STATE_DIR


def ensure_state_dir(root: "Path") -> "Path":
    """``<root>/.keel``, created if missing."""
    path = state_dir(root)
    path.mkdir(parents=True, exist_ok=True)
    return path
