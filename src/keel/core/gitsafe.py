"""Every git keel runs, run so that nothing the agent wrote can make it run code.

keel runs git outside the sandbox (the checkpoints' shadow repository, whose work tree is the
workspace) and, without a sandbox, over the user's own repository (the ``git.*`` probes).
Everything in the workspace is the agent's: ``.git/config``, hooks, ``commondir``,
``objects/info/alternates``, a ``.git`` file pointing elsewhere, ``.gitattributes``,
``.gitmodules`` and nested repositories at any depth. This module is the one copy of the rule:

- the git binary comes from an absolute ``PATH`` entry outside the workspace
  (``git_executable``), and git itself gets the same ``PATH`` (``safe_path``);
- the environment is built from scratch (``environment``): explicit ``GIT_DIR`` and
  ``GIT_WORK_TREE``, no system, global or XDG config or attributes, and ``SAFE_CONFIG`` at
  command-line scope, which beats any config file git reads and is inherited by any child git
  (a submodule check), so fsmonitor, hooks, transports and signature checks stay off;
- a repository reached through an indirection (a symlink, a ``.git`` file, ``commondir``,
  ``objects/info/alternates``) is refused (``indirection``): git would read data, config or
  hooks from a place nobody chose;
- the user's repository is read through a keel-owned ``GIT_DIR`` (``borrowed_git_dir``) that
  holds a config with only data settings copied (parsed by ``git config --file``, never
  included or executed) and links to the user's refs, objects and index, so no config of
  theirs (drivers, fsmonitor, includes, aliases) is ever read by a git that runs;
- callers pass ``--ignore-submodules`` to ``status`` and ``diff-files`` on the command line
  (``.gitmodules`` can ask for more): only then git never starts a child inside a nested
  repository, whose own config that child would read.

Standard library only (and ``keel.core.errors``): the hook path and the sandboxed probe runner
import it.
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from keel.core.errors import WorkspaceError

SAFE_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", os.devnull),
    ("core.attributesFile", os.devnull),
    ("core.pager", "cat"),
    ("diff.ignoreSubmodules", "all"),
    ("diff.submodule", "short"),
    ("status.submoduleSummary", "false"),
    ("submodule.recurse", "false"),
    ("protocol.allow", "never"),
    ("log.showSignature", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
)
"""Set at command-line scope for every git keel runs: nothing a config file says overrides it."""

NEUTRAL_ATTRIBUTES = (
    "# written by keel: no attribute of the work tree converts content or names a driver\n"
    "* -text !eol -ident !working-tree-encoding !filter !diff !merge\n"
)
"""``info/attributes`` of a keel-owned ``GIT_DIR``; it beats every ``.gitattributes``."""

INDIRECTIONS = ("commondir", "objects/info/alternates")
"""Files in a git directory that make git read another directory's config, hooks or objects."""

_BORROWED = ("refs", "objects", "packed-refs", "shallow", "index")
_COPIED_KEYS = frozenset(
    {
        "core.repositoryformatversion",
        "extensions.objectformat",
        # data settings that change what status reports, never what runs
        "core.filemode",
        "core.symlinks",
        "core.ignorecase",
        "core.precomposeunicode",
        "core.trustctime",
        "core.checkstat",
        "core.autocrlf",
        "core.eol",
    }
)
_HEAD_CAP = 4096
CODE_INDIRECT = "workspace.git_indirect"
"""The error code of a repository keel's git refuses to follow."""
CODE_NOT_A_REPO = "workspace.not_a_repo"
"""The error code of a ``.git`` directory without ``HEAD``."""


@functools.lru_cache(maxsize=8)
def safe_path(path: str | None, workspace: str) -> str:
    """``path`` without the entries the agent could plant a program in.

    A relative or empty entry is searched from the current directory (the workspace, in a
    hook); an entry inside the workspace (an activated ``.venv/bin``) is the agent's.
    """
    root = os.path.realpath(workspace)
    kept: list[str] = []
    for entry in (path or os.defpath).split(os.pathsep):
        if not os.path.isabs(entry):
            continue
        real = os.path.realpath(entry)
        if real == root or real.startswith(root.rstrip("/") + "/"):
            continue
        kept.append(entry)
    return os.pathsep.join(kept)


def git_executable(workspace: str, path: str | None = None) -> str | None:
    """The git binary on ``path`` (default ``$PATH``) outside ``workspace``, or ``None``."""
    search = safe_path(os.environ.get("PATH") if path is None else path, workspace)
    return shutil.which("git", path=search) if search else None


def config_env(pairs: Sequence[tuple[str, str]]) -> dict[str, str]:
    """``GIT_CONFIG_COUNT``/``KEY_n``/``VALUE_n`` for ``pairs``, in order (a later pair wins)."""
    env = {"GIT_CONFIG_COUNT": str(len(pairs))}
    for i, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


def environment(
    *,
    git_dir: str,
    work_tree: str,
    index: str | None = None,
    config: Sequence[tuple[str, str]] = (),
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The whole environment of one of keel's git processes.

    ``base`` (default ``os.environ``) loses every ``GIT_*`` variable and its unsafe ``PATH``
    entries. ``config`` comes first in the command-line config, so its indexes are stable;
    ``SAFE_CONFIG`` follows and wins over it.
    """
    source = os.environ if base is None else base
    env = {k: v for k, v in source.items() if not k.startswith("GIT_")}
    env["PATH"] = safe_path(env.get("PATH"), work_tree)
    env.update(
        {
            "GIT_DIR": git_dir,
            "GIT_WORK_TREE": work_tree,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_SYSTEM": os.devnull,
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_ATTR_NOSYSTEM": "1",
            "GIT_NO_REPLACE_OBJECTS": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "LC_ALL": "C",
        }
    )
    if index is not None:
        env["GIT_INDEX_FILE"] = index
    env.update(config_env((*config, *SAFE_CONFIG)))
    return env


def indirection(git_dir: str) -> str | None:
    """Why git would reach past ``git_dir`` to another directory, or ``None`` if it would not.

    A missing ``git_dir`` is not an indirection (the caller says what absence means).
    """
    try:
        st = os.lstat(git_dir)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return f"{git_dir} is a symbolic link"
    if stat.S_ISREG(st.st_mode):
        return f"{git_dir} is a file pointing at another git directory (gitdir:)"
    if not stat.S_ISDIR(st.st_mode):
        return f"{git_dir} is not a directory"
    for name in INDIRECTIONS:
        if os.path.lexists(os.path.join(git_dir, name)):
            return f"{git_dir} has {name}, which points git at another directory"
    return None


def refuse_indirection(git_dir: str) -> None:
    """Raise ``WorkspaceError`` (``workspace.git_indirect``) when ``indirection`` finds one."""
    reason = indirection(git_dir)
    if reason is not None:
        raise WorkspaceError(
            f"keel's git does not follow it: {reason}", code=CODE_INDIRECT, git_dir=git_dir
        )


@contextmanager
def borrowed_git_dir(dot_git: str, git: str, *, timeout: float = 10.0) -> Iterator[str]:
    """A private ``GIT_DIR`` that reads the repository ``dot_git`` without its config or hooks.

    It holds a ``config`` with only the repository format and a few data settings of
    ``dot_git/config`` (file mode, symlinks, case, line endings), a copy of ``HEAD``, and links
    to ``refs``, ``objects``, ``packed-refs``, ``shallow``, ``index`` and ``info/exclude``, so
    git reads the user's state and nothing that names a program. Use it read-only, with
    ``environment`` (no ``index=``: the link is the index). Raises ``WorkspaceError``:
    ``workspace.git_indirect`` for an indirection (see ``indirection``; also a symlinked
    entry), ``workspace.not_a_repo`` without ``HEAD``, ``workspace.git`` when ``dot_git``
    cannot be read. The directory is removed on exit.
    """
    refuse_indirection(dot_git)
    overlay = tempfile.mkdtemp(prefix="keel-git-")
    try:
        try:
            settings = _data_settings(os.path.join(dot_git, "config"), git, overlay, timeout)
            with open(os.path.join(overlay, "config"), "w", encoding="ascii") as out:
                out.write(_render(settings))
            _borrow(dot_git, overlay)
        except OSError as exc:
            raise WorkspaceError(
                f"cannot read the git directory {dot_git}: {exc.strerror or exc}",
                code="workspace.git",
            ) from exc
        yield overlay
    finally:
        shutil.rmtree(overlay, ignore_errors=True)


def _borrow(dot_git: str, overlay: str) -> None:
    head = os.path.join(dot_git, "HEAD")
    _refuse_link(head)
    if not os.path.isfile(head):
        raise WorkspaceError(f"{dot_git} is not a git directory (no HEAD)", code=CODE_NOT_A_REPO)
    # no follow, no wait: a HEAD swapped for a link or a fifo since the checks is refused
    fd = os.open(head, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as src:
        data = src.read(_HEAD_CAP)
    with open(os.path.join(overlay, "HEAD"), "wb") as dst:
        dst.write(data)
    names = [*_BORROWED, *(n for n in os.listdir(dot_git) if n.startswith("sharedindex."))]
    for name in names:
        _link(os.path.join(dot_git, name), os.path.join(overlay, name))
    os.mkdir(os.path.join(overlay, "info"))
    _link(os.path.join(dot_git, "info", "exclude"), os.path.join(overlay, "info", "exclude"))


def _link(source: str, target: str) -> None:
    if os.path.lexists(source):
        _refuse_link(source)
        os.symlink(source, target)


def _refuse_link(path: str) -> None:
    # the agent can swap a directory it may write (objects, refs) for a link elsewhere
    if os.path.islink(path):
        raise WorkspaceError(
            f"keel's git does not follow it: {path} is a symbolic link", code=CODE_INDIRECT
        )


def _data_settings(config: str, git: str, cwd: str, timeout: float) -> dict[str, str]:
    """The copied keys of ``config``, parsed by git (includes not followed, nothing run).

    Remembered per file version (a plan's probes read the same config many times).
    """
    try:
        st = os.stat(config)
    except FileNotFoundError:
        return {}
    version = (config, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if version not in _SETTINGS:
        if len(_SETTINGS) >= 16:
            _SETTINGS.clear()
        _SETTINGS[version] = _parse_settings(config, git, cwd, timeout)
    return dict(_SETTINGS[version])


_SETTINGS: dict[tuple[object, ...], dict[str, str]] = {}


def _parse_settings(config: str, git: str, cwd: str, timeout: float) -> dict[str, str]:
    pattern = "^(" + "|".join(k.replace(".", "[.]") for k in sorted(_COPIED_KEYS)) + ")$"
    argv = [git, "config", "--file", config, "--no-includes", "-z", "--get-regexp", pattern]
    # GIT_DIR names no repository: git only parses the one file it is given
    env = environment(git_dir=os.devnull, work_tree=cwd, base={"PATH": os.defpath})
    try:
        done = subprocess.run(
            argv, cwd=cwd, env=env, capture_output=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise WorkspaceError(f"reading {config} took too long", code="workspace.git") from exc
    if done.returncode not in (0, 1):  # 1: none of the keys is set
        detail = done.stderr.decode("utf-8", "replace").strip()[:300]
        raise WorkspaceError(f"cannot read {config}: {detail}", code="workspace.git")
    settings: dict[str, str] = {}
    for item in done.stdout.decode("utf-8", "replace").split("\0"):
        key, newline, value = item.partition("\n")
        if key in _COPIED_KEYS:
            settings[key] = value if newline else "true"  # a bare key is a true boolean
    return settings


def _render(settings: dict[str, str]) -> str:
    """A config file of the settings whose value is a plain word (no path, no quoting)."""
    sections: dict[str, list[str]] = {"core": ["\tbare = false\n"]}
    for key, value in settings.items():
        if value.isascii() and value.isalnum() and len(value) <= 16:
            section, _, name = key.partition(".")
            sections.setdefault(section, []).append(f"\t{name} = {value}\n")
    return "".join(f"[{s}]\n" + "".join(lines) for s, lines in sections.items())
