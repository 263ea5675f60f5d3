"""Control files: what a contained command may neither change nor plant.

A control file configures keel or makes some later, uncontained program run code: the ``deny``
entries of the protected-path table (``keel.core.protected``: keel's ``keel.toml`` and ``.keel/``,
the agents' settings, files that run on ``cd``, ``git status`` or opening the folder, CI and
pre-commit configuration unless ``[sandbox] protect_ci`` is off), inside the workspace's own
git directory (and each ``.git/modules/*``) the table's ``GIT_DIR`` entries (``config``,
``hooks/``, ``commondir``, ``info/``, ``objects/info/alternates``, ``worktrees/``...) and what
``core.hooksPath`` names inside the workspace, every other ``.git`` (a nested repository or a
gitdir pointer) as a whole, plus the workspace-relative globs of ``[sandbox] read_only``. The
table's ``ask`` entries (prompt files of future agent sessions) are not controls: the scan
fingerprints them (``Scan.prompts``) so that a run that changed one can be reported.

``scan_controls`` walks the whole workspace (``PRUNED`` directories such as ``node_modules``
and ``.venv`` are not entered). It opens every directory relative to its parent with
``O_NOFOLLOW``, so a concurrent swap of a directory for a symlink cannot redirect it, and can
keep an ``O_PATH`` descriptor of each control entry within ``[sandbox] control_depth`` levels:
bwrap binds those descriptors (``--ro-bind-fd``), never a path that could have changed since.
Deeper control entries are listed in ``Scan.deep``: the backend snapshots them before the run
and restores them afterwards (``snapshot``, ``restore``).

Existing control files are kept read-only by the backend. Ones that do not exist cannot be
mounted over (keel never creates mount points inside agent-controlled trees), so
``quarantine`` compares the scan after the run, when every process of the command is dead, with
the scan before it, and moves anything new (or replaced) into ``.keel/quarantine/<stamp>/``.
Where the backend cannot keep existing files read-only (Landlock), ``snapshot`` records their
content before the run and ``restore`` puts it back afterwards, quarantining the changed copy.

Every host-side operation on the workspace goes through directory descriptors with
``O_NOFOLLOW``: a symlink planted by the command is moved as a link, never followed.

Standard library only: ``keel exec`` runs this twice per command.
"""

from __future__ import annotations

import os
import stat
import time

from keel.core.frozen import Frozen
from keel.core.protected import GIT_DIR, NameTable
from keel.core.root import STATE_DIR
from keel.sandbox.os import _quiet
from keel.sandbox.os._registry import EXEC_DIR

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

MAX_LEVELS = 256
"""Directory levels below which the walk gives up (the run then counts as unchecked)."""
PROMPT_FILE_CAP = 1 << 20
PRUNED = frozenset(
    {
        "node_modules",
        ".venv",
        "venv",
        "__pycache__",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
    }
)
"""Directories the walk does not enter: large, rebuilt by tools, never read for configuration."""
QUARANTINE = f"{STATE_DIR}/quarantine"
SNAPSHOT_FILE_CAP = 4 << 20
SNAPSHOT_TOTAL_CAP = 64 << 20
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_PATH = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC


class ControlRules(Frozen):
    """How far to look and what counts, from ``[sandbox]``."""

    __slots__ = ("depth", "globs", "protect_ci", "show_secrets")
    depth: int
    """Levels below the root within which control entries are mounted read-only."""
    protect_ci: bool
    globs: tuple[str, ...]
    show_secrets: tuple[str, ...]
    """Workspace-relative globs of secret files contained commands may read after all."""

    def __init__(
        self,
        depth: int,
        protect_ci: bool,
        globs: tuple[str, ...] = (),
        show_secrets: tuple[str, ...] = (),
    ) -> None:
        self._init(depth=depth, globs=globs, protect_ci=protect_ci, show_secrets=show_secrets)


class Control(Frozen):
    """One control entry: its workspace-relative path, kind and identity."""

    __slots__ = ("dev", "ino", "kind", "rel")
    rel: str
    kind: str
    """``dir``, ``file``, ``link`` or ``other``."""
    dev: int
    ino: int

    def __init__(self, rel: str, kind: str, dev: int, ino: int) -> None:
        self._init(dev=dev, ino=ino, kind=kind, rel=rel)


class Scan:
    """The control entries of a workspace, and the git directories that hold some of them.

    With ``keep_fds`` the scan holds an ``O_PATH`` descriptor per entry within the mount depth
    (``fds``) and per git directory (``gitdir_fds``) until ``close``.
    """

    __slots__ = ("controls", "deep", "fds", "gitdir_fds", "gitdirs", "prompts", "secrets")

    def __init__(self) -> None:
        self.controls: dict[str, Control] = {}
        self.gitdirs: list[str] = []
        self.fds: dict[str, int] = {}
        self.gitdir_fds: dict[str, int] = {}
        self.secrets: list[str] = []
        """The workspace's own secret files (``.env``, keys): hidden from contained commands."""
        self.deep: set[str] = set()
        """Control entries below ``[sandbox] control_depth``: snapshotted and restored."""
        self.prompts: dict[str, object] = {}
        """Prompt files of future agent sessions (``ask`` entries) and their fingerprints."""

    def close(self) -> None:
        """Close every kept descriptor."""
        for fd in (*self.fds.values(), *self.gitdir_fds.values()):
            _close(fd)
        self.fds.clear()
        self.gitdir_fds.clear()

    def only(self, rels: set[str]) -> Scan:
        """A scan holding only the control entries ``rels`` (for ``snapshot``)."""
        part = Scan()
        part.controls = {r: c for r, c in self.controls.items() if r in rels}
        return part


def scan_controls(root: str, rules: ControlRules, *, keep_fds: bool = False) -> Scan:
    """Every control entry and prompt file of ``root`` (see the module docstring)."""
    root_fd = os.open(root, _DIR)
    try:
        walker = _Walker(root_fd, rules, keep_fds)
        walker.run()
    finally:
        _close(root_fd)
    return walker.scan


class _Walker:
    """One walk of the workspace, directory descriptors all the way down."""

    def __init__(self, root_fd: int, rules: ControlRules, keep: bool) -> None:
        self.root_fd = root_fd
        self.rules = rules
        self.keep = keep
        self.scan = Scan()
        self.table = NameTable(rules.protect_ci)
        self.matcher = _glob_matcher(rules.globs)
        self.shown = _glob_matcher(rules.show_secrets)

    def run(self) -> None:
        stack: list[tuple[int, str, int]] = [(os.dup(self.root_fd), "", 0)]
        try:
            while stack:
                fd, rel, level = stack.pop()
                try:
                    stack.extend(self.visit(fd, rel, level))
                finally:
                    _close(fd)
        finally:
            for fd, _, _ in stack:
                _close(fd)

    def visit(self, fd: int, rel: str, level: int) -> list[tuple[int, str, int]]:
        """Record the control entries of one directory; the subdirectories to enter."""
        if level > MAX_LEVELS:
            raise OSError(f"the workspace is more than {MAX_LEVELS} directories deep at {rel}")
        with os.scandir(fd) as entries:
            children = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
        parent = rel.rstrip("/").rpartition("/")[2]
        names, pairs = self.table.names, self.table.pairs.get(parent.lower()) if rel else None
        prefixed = bool(self.table.prefixes)
        deeper: list[tuple[int, str, int]] = []
        for name, is_dir in children:
            child = f"{rel}{name}"
            if not is_dir and is_workspace_secret(name) and not (self.shown and self.shown(child)):
                self.scan.secrets.append(child)
            entry = names.get(name.lower())
            if entry is None and prefixed:
                entry = self.table.name(name)
            if entry is None and pairs is not None:
                entry = self.table.child(parent, name)
            if entry is not None and entry.verdict == "ask":
                self.prompt(fd, name, child)
            elif entry is not None or (self.matcher is not None and self.matcher(child)):
                self.add(fd, name, child, level)
            elif name == ".git":
                if rel == "" and is_dir:
                    self.gitdir(fd, name, child)
                else:  # a gitdir pointer, or another repository: read-only as a whole
                    self.add(fd, name, child, level)
            elif is_dir and name not in PRUNED:
                sub = _open_dir(name, fd)
                if sub is not None:
                    deeper.append((sub, f"{child}/", level + 1))
        return deeper

    def add(self, dir_fd: int, name: str, rel: str, level: int = 0) -> None:
        """Record ``name`` (below ``dir_fd``, at ``level``) as the control entry ``rel``."""
        scan = self.scan
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            return
        if rel in scan.controls:
            return
        scan.controls[rel] = Control(rel, _kind(st.st_mode), st.st_dev, st.st_ino)
        if level > self.rules.depth:
            scan.deep.add(rel)
        elif self.keep and not stat.S_ISLNK(st.st_mode):
            try:
                scan.fds[rel] = os.open(name, _PATH, dir_fd=dir_fd)
            except OSError:
                del scan.controls[rel]

    def prompt(self, dir_fd: int, name: str, rel: str) -> None:
        """Record the fingerprint of a prompt file (or directory of them)."""
        self.scan.prompts[rel] = _fingerprint(dir_fd, name)

    def gitdir(self, parent_fd: int, name: str, rel: str) -> None:
        """A git directory: its ``GIT_DIR`` entries, ``core.hooksPath``, submodules' gitdirs."""
        fd = _open_dir(name, parent_fd)
        if fd is None:
            return
        try:
            self.scan.gitdirs.append(rel)
            if self.keep:
                self.scan.gitdir_fds[rel] = os.open(name, _PATH, dir_fd=parent_fd)
            for entry in GIT_DIR:
                self.add_path(f"{rel}/{entry.path}")
            worktree = rel[: -len(name)]
            for target in _hooks_paths(fd):
                self.add_path(os.path.normpath(f"{worktree}{target}"))
            self.modules(fd, rel)
        finally:
            _close(fd)

    def modules(self, gitdir_fd: int, rel: str) -> None:
        """Submodules' git directories below ``modules/`` (a name may hold slashes)."""
        fd = _open_dir("modules", gitdir_fd)
        if fd is not None:
            try:
                self.submodules(fd, f"{rel}/modules", 0)
            finally:
                _close(fd)

    def submodules(self, fd: int, rel: str, level: int) -> None:
        with os.scandir(fd) as entries:
            subs = [e.name for e in entries if e.is_dir(follow_symlinks=False)]
        for sub in subs:
            inner = _open_dir(sub, fd)
            if inner is None:
                continue
            try:
                if _exists("HEAD", inner):
                    self.gitdir(fd, sub, f"{rel}/{sub}")
                elif level < MAX_LEVELS:  # a directory of a name with slashes
                    self.submodules(inner, f"{rel}/{sub}", level + 1)
            finally:
                _close(inner)

    def add_path(self, rel: str) -> None:
        """Record a workspace-relative path, if it stays inside (no ``..``, no symlinks)."""
        if rel.startswith(("..", "/")) or rel == ".":
            return
        parts = rel.split("/")
        with _opened_parent(self.root_fd, parts[:-1]) as parent:
            if parent is not None:
                self.add(parent, parts[-1], rel)


def is_workspace_secret(name: str) -> bool:
    """True if a file called ``name`` holds secrets by the policy's globs (``.env``, keys)."""
    if not _SECRETS:
        from keel.core.presets import SECRET_EXCEPTIONS, WORKSPACE_SECRETS

        for globs in (WORKSPACE_SECRETS, SECRET_EXCEPTIONS):
            _SECRETS.append(NameGlobs(tuple(g.removeprefix("**/") for g in globs)))
    lowered = name.lower()
    return _SECRETS[0].match(lowered) and not _SECRETS[1].match(lowered)


_SECRETS: list[NameGlobs] = []


class NameGlobs:
    """``fnmatchcase`` of one name against any of some globs, without ``re`` for the usual ones.

    The walk asks this of every file name, and ``re`` (with ``fnmatch``) costs ``keel exec``
    ~5 ms to import: globs whose only wildcard is a leading or trailing ``*`` (all of the
    policy's secret globs) are a set lookup and two ``str`` prefix/suffix tests; any other
    glob is compiled with ``fnmatch.translate``.
    """

    __slots__ = ("exact", "other", "prefixes", "suffixes")

    def __init__(self, globs: tuple[str, ...]) -> None:
        """Sort ``globs`` by the test each needs."""
        self.exact: set[str] = set()
        prefixes: list[str] = []
        suffixes: list[str] = []
        other: list[str] = []
        for glob in globs:
            stars = glob.count("*")
            if "?" in glob or "[" in glob or stars > 1:
                other.append(glob)
            elif stars == 0:
                self.exact.add(glob)
            elif glob.endswith("*"):
                prefixes.append(glob[:-1])
            elif glob.startswith("*"):
                suffixes.append(glob[1:])
            else:
                other.append(glob)
        self.prefixes = tuple(prefixes)
        self.suffixes = tuple(suffixes)
        self.other: Callable[[str], object] | None = None
        if other:
            import re
            from fnmatch import translate

            self.other = re.compile("|".join(f"(?:{translate(g)})" for g in other)).match

    def match(self, name: str) -> bool:
        """True if ``name`` matches one of the globs (case as given)."""
        if name in self.exact or name.startswith(self.prefixes) or name.endswith(self.suffixes):
            return True
        return self.other is not None and self.other(name) is not None


def _hooks_paths(gitdir_fd: int) -> list[str]:
    """Worktree-relative targets of ``core.hooksPath`` in this gitdir's ``config``."""
    data = _read_at(gitdir_fd, "config", 1 << 20)
    if data is None:
        return []
    out: list[str] = []
    for line in data.decode("utf-8", "replace").splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key.strip().lower() == "hookspath":
            value = value.strip().strip('"')
            if value and not value.startswith(("/", "~")):
                out.append(value)
    return out


class _opened_parent:
    """Open ``parts`` below ``fd`` one directory at a time, never following a symlink."""

    def __init__(self, fd: int, parts: list[str]) -> None:
        self.fd = fd
        self.parts = parts
        self.opened: list[int] = []

    def __enter__(self) -> int | None:
        current = self.fd
        for part in self.parts:
            if part in ("", ".", ".."):
                return None
            nxt = _open_dir(part, current)
            if nxt is None:
                return None
            self.opened.append(nxt)
            current = nxt
        return current

    def __exit__(self, *_: object) -> None:
        for fd in self.opened:
            _close(fd)


def changed_prompts(before: Scan, after: Scan) -> list[str]:
    """Prompt files (``ask`` entries) the run created, changed or removed."""
    keys = {*before.prompts, *after.prompts}
    return sorted(k for k in keys if before.prompts.get(k) != after.prompts.get(k))


def _fingerprint(dir_fd: int, name: str, budget: list[int] | None = None) -> object:
    """What a prompt file holds: its kind and content digest (a directory: its entries').

    Reading is bounded (``PROMPT_FILE_CAP`` bytes per file, 256 entries per directory tree):
    beyond that only sizes count, which still shows most changes.
    """
    budget = [256] if budget is None else budget
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return None
    if stat.S_ISLNK(st.st_mode):
        try:
            return ("link", os.readlink(name, dir_fd=dir_fd))
        except OSError:
            return ("link", None)
    if stat.S_ISREG(st.st_mode):
        from _blake2 import blake2b  # the C module: hashlib would load OpenSSL

        data = _read_at(dir_fd, name, PROMPT_FILE_CAP) if st.st_size <= PROMPT_FILE_CAP else None
        digest = blake2b(data, digest_size=16).hexdigest() if data is not None else None
        return ("file", st.st_size, digest)
    if not stat.S_ISDIR(st.st_mode):
        return ("other", st.st_mode)
    fd = _open_dir(name, dir_fd)
    if fd is None:
        return ("dir", None)
    try:
        with os.scandir(fd) as entries:
            names = sorted(e.name for e in entries)
        out: list[object] = []
        for child in names:
            budget[0] -= 1
            if budget[0] < 0:
                out.append(("more", len(names)))
                break
            out.append((child, _fingerprint(fd, child, budget)))
        return ("dir", tuple(out))
    finally:
        _close(fd)


def new_controls(before: Scan, after: Scan) -> list[str]:
    """Control entries present after the run that were absent (or a different file) before.

    Only the top-most of nested new entries is listed: moving it moves the rest.
    """
    fresh: list[str] = []
    for rel in sorted(after.controls):
        old = before.controls.get(rel)
        now = after.controls[rel]
        if old is not None and (old.dev, old.ino, old.kind) == (now.dev, now.ino, now.kind):
            continue
        if not any(rel.startswith(f"{f}/") for f in fresh):
            fresh.append(rel)
    return fresh


def quarantine(root: str, rels: list[str], stamp: str | None = None) -> list[str]:
    """Move each of ``rels`` into ``.keel/quarantine/<stamp>/``; returns those moved.

    Raises:
        OSError: the quarantine directory cannot be made (``.keel`` is not a real directory).
    """
    if not rels:
        return []
    stamp = stamp or time.strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}"
    root_fd = os.open(root, _DIR)
    moved: list[str] = []
    try:
        target = _make_dirs(root_fd, [*QUARANTINE.split("/"), stamp])
        try:
            for rel in rels:
                if _move(root_fd, rel, target):
                    moved.append(rel)
        finally:
            _close(target)
    finally:
        _close(root_fd)
    return moved


def _move(root_fd: int, rel: str, target_fd: int) -> bool:
    parts = rel.split("/")
    with _opened_parent(root_fd, parts[:-1]) as parent:
        if parent is None:
            return False
        dest = _make_dirs(target_fd, parts[:-1])
        try:
            os.rename(parts[-1], parts[-1], src_dir_fd=parent, dst_dir_fd=dest)
        except OSError:
            return False
        finally:
            _close(dest)
    return True


def _make_dirs(fd: int, parts: list[str]) -> int:
    """Open (creating as needed, 0700) ``parts`` below ``fd`` without following symlinks."""
    current = os.dup(fd)
    for part in parts:
        try:
            _quiet.mkdir(part, 0o700, dir_fd=current)
        except OSError:
            _close(current)
            raise
        try:
            nxt = os.open(part, _DIR, dir_fd=current)
        finally:
            _close(current)
        current = nxt
    return current


REPORTS: str = f"{EXEC_DIR}/reports"


def is_report_id(text: str) -> bool:
    """Whether ``text`` can name a report: 8 to 64 lower-case hex digits."""
    return 8 <= len(text) <= 64 and not set(text) - set("0123456789abcdef")


def write_report(root: str, report_id: str, text: str) -> bool:
    """Write ``text`` to ``.keel/exec/reports/<report_id>.json`` (no symlink followed).

    False if ``report_id`` is not one (``is_report_id``) or the write failed (the run's
    stderr says what happened either way).
    """
    if not is_report_id(report_id):
        return False
    root_fd = os.open(root, _DIR)
    try:
        target = _make_dirs(root_fd, REPORTS.split("/"))
    except OSError:
        return False
    finally:
        _close(root_fd)
    try:
        temp = f".{report_id}.tmp"
        fd = os.open(
            temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600, dir_fd=target
        )
        try:
            os.write(fd, text.encode())
        finally:
            _close(fd)
        os.rename(temp, f"{report_id}.json", src_dir_fd=target, dst_dir_fd=target)
    except OSError:
        return False
    finally:
        _close(target)
    return True


def take_report(root: str, report_id: str) -> str | None:
    """Read and remove the report ``report_id`` (``write_report``), if there is one."""
    if not is_report_id(report_id):
        return None
    parts = [*REPORTS.split("/"), f"{report_id}.json"]
    root_fd = os.open(root, _DIR)
    try:
        with _opened_parent(root_fd, parts[:-1]) as parent:
            if parent is None:
                return None
            data = _read_at(parent, parts[-1], 1 << 20)
            if data is not None:
                _quiet.call(os.unlink, parts[-1], dir_fd=parent)
    finally:
        _close(root_fd)
    return data.decode("utf-8", "replace") if data is not None else None


# -- content snapshots, for backends that cannot keep existing control files read-only ---------


class Snapshot:
    """The content of control entries before a run: ``rel -> (mode, bytes | link | None)``.

    A directory is recorded with ``None`` and each entry below it; content above the caps is
    recorded by size only (it is then compared, not restored).
    """

    __slots__ = ("items", "total")

    def __init__(self) -> None:
        self.items: dict[str, tuple[int, bytes | str | None]] = {}
        self.total = 0


def snapshot(root: str, scan: Scan) -> Snapshot:
    """Record every control entry of ``scan`` (files, directories and links, recursively)."""
    snap = Snapshot()
    root_fd = os.open(root, _DIR)
    try:
        for rel in sorted(scan.controls):
            if rel == STATE_DIR:
                continue
            parts = rel.split("/")
            with _opened_parent(root_fd, parts[:-1]) as parent:
                if parent is not None:
                    _record(snap, parent, parts[-1], rel)
    finally:
        _close(root_fd)
    return snap


def _record(snap: Snapshot, dir_fd: int, name: str, rel: str) -> None:
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return
    if stat.S_ISLNK(st.st_mode):
        snap.items[rel] = (st.st_mode, os.readlink(name, dir_fd=dir_fd))
    elif stat.S_ISREG(st.st_mode):
        room = min(SNAPSHOT_FILE_CAP, SNAPSHOT_TOTAL_CAP - snap.total)
        data = _read_at(dir_fd, name, room + 1) if st.st_size <= room else None
        snap.items[rel] = (st.st_mode, data if data is not None and len(data) <= room else None)
        snap.total += len(data or b"")
    elif stat.S_ISDIR(st.st_mode):
        snap.items[rel] = (st.st_mode, None)
        fd = _open_dir(name, dir_fd)
        if fd is None:
            return
        try:
            with os.scandir(fd) as entries:
                names = sorted(e.name for e in entries)
            for child in names:
                _record(snap, fd, child, f"{rel}/{child}")
        finally:
            _close(fd)


def restore(root: str, before: Snapshot, after: Snapshot, stamp: str | None = None) -> list[str]:
    """Put back what changed between two snapshots; the changed copies go to quarantine.

    Returns the workspace-relative paths that were changed, added or removed.
    """
    changed = [
        r
        for r in sorted({*before.items, *after.items})
        if before.items.get(r) != after.items.get(r)
    ]
    tops = [r for r in changed if not any(r.startswith(f"{t}/") for t in changed if t != r)]
    if not tops:
        return []
    moved_away = {r for r in tops if r in after.items}
    quarantine(root, sorted(moved_away), stamp)
    root_fd = os.open(root, _DIR)
    try:
        for rel in sorted(
            r for r in before.items if any(r == t or r.startswith(f"{t}/") for t in tops)
        ):
            _put_back(root_fd, rel, before.items[rel])
    finally:
        _close(root_fd)
    return changed


def _put_back(root_fd: int, rel: str, item: tuple[int, bytes | str | None]) -> None:
    mode, content = item
    parts = rel.split("/")
    with _opened_parent(root_fd, parts[:-1]) as parent:
        if parent is None:
            return
        name = parts[-1]
        try:
            if stat.S_ISDIR(mode):
                os.mkdir(name, stat.S_IMODE(mode), dir_fd=parent)
            elif stat.S_ISLNK(mode) and isinstance(content, str):
                os.symlink(content, name, dir_fd=parent)
            elif isinstance(content, bytes):
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
                fd = os.open(name, flags, stat.S_IMODE(mode), dir_fd=parent)
                try:
                    os.write(fd, content)
                    os.fchmod(fd, stat.S_IMODE(mode))
                finally:
                    _close(fd)
        except OSError:
            pass  # reported by the caller: the path is in the changed list


# -- helpers -------------------------------------------------------------------------------------


def _glob_matcher(globs: tuple[str, ...]) -> Callable[[str], bool] | None:
    if not globs:
        return None
    from keel.policy import GlobSet

    matcher = GlobSet(globs)
    return lambda rel: matcher.match(rel) is not None


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISLNK(mode):
        return "link"
    return "other"


def _exists(name: str, dir_fd: int) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return False
    return True


def _open_dir(name: str, dir_fd: int) -> int | None:
    try:
        return os.open(name, _DIR, dir_fd=dir_fd)
    except OSError:
        return None


def _read_at(dir_fd: int, name: str, cap: int) -> bytes | None:
    try:
        fd = os.open(
            name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd
        )
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks: list[bytes] = []
        size = 0
        while size < cap and (chunk := os.read(fd, min(1 << 20, cap - size))):
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        _close(fd)


_close = _quiet.close
