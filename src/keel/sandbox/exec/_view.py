"""What a contained command sees of the host: /etc, a fresh HOME, toolchains, writable paths.

Everything is derived from the invoking user's environment and ``[sandbox]``:

- ``/etc``: only ``ETC_ENTRIES`` (names, services, certificates, the loader cache, time zone...),
  never ``shadow``, ``sudoers``, ssh host keys or ``ssl/private``;
- HOME: an empty directory, into which read-only entries of the real HOME are put: git's user
  config (filtered of credentials), the toolchain roots the ``PATH`` needs (``~/.pyenv``,
  ``~/.nvm``, ``~/.cargo`` with ``~/.rustup``, ``~/.local/bin`` with the user site...) and
  ``[sandbox] home_read_only``. ``HOME_SECRETS`` are never bound: a configured entry that is, holds
  or sits in one is refused; one inside a toolchain root is masked;
- ``PATH`` entries outside HOME and ``/usr`` are bound read-only (their prefix for ``.../bin``);
- writable: the workspace and ``[sandbox] writable`` (never a system tree, HOME itself, a secret
  or keel's per-user state directory).

Standard library only: ``keel exec`` builds this on every run.
"""

from __future__ import annotations

import os
import stat

from keel.core.frozen import Frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from keel.core.errors import ViewError

ETC_ENTRIES = (
    "passwd",
    "group",
    "hosts",
    "hostname",
    "nsswitch.conf",
    "host.conf",
    "gai.conf",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "ssl/certs",
    "ssl/openssl.cnf",
    "ca-certificates",
    "pki/tls/certs",
    "pki/ca-trust",
    "os-release",
    "lsb-release",
    "debian_version",
    "localtime",
    "timezone",
    "alternatives",
    "mime.types",
    "protocols",
    "services",
    "networks",
    "shells",
    "gitconfig",
    "inputrc",
    "magic",
    "magic.mime",
    "manpath.config",
    "locale.alias",
    "perl",
    "mtab",
)
"""``/etc`` entries visible (read-only) inside; plus ``python3*`` and ``java-*`` directories."""
ETC_PREFIXES = ("python3", "java-")
HOME_SECRETS = (
    ".ssh",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".config/hub",
    ".config/op",
    ".config/git/credentials",
    ".netrc",
    ".docker",
    ".kube",
    ".gnupg",
    ".git-credentials",
    ".pypirc",
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    ".pgpass",
    ".password-store",
    ".vault-token",
    ".terraform.d",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".m2/settings.xml",
    ".m2/settings-security.xml",
    ".gradle/gradle.properties",
    ".local/share/keyrings",
    ".claude",
    ".claude.json",
    ".codex",
    ".gemini",
)
"""HOME-relative paths that hold credentials: never visible inside, whatever the config says."""
GENERIC_HOME_DIRS = frozenset({".config", ".cache", ".local"})
"""HOME children that hold many unrelated things: a ``PATH`` entry in one binds only its prefix."""
COMPANIONS = {".cargo": (".rustup",)}
SYSTEM_TREES = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
NEVER_WRITABLE = ("/usr", "/etc", "/boot", "/proc", "/sys", "/dev", *SYSTEM_TREES[1:])
GIT_SECRET_WORDS = ("extraheader", "password", "token", "secret", "helper", "cookiefile")


def _refused(message: str, code: str) -> ViewError:
    """``ViewError(message, code)``, to raise (``keel.core.errors`` is imported only then)."""
    from keel.core.errors import ViewError

    return ViewError(message, code)


class View(Frozen):
    """The host paths a contained command gets, besides the workspace and the system trees."""

    __slots__ = ("etc", "git_configs", "home", "masks", "read_only", "writable")
    etc: tuple[str, ...]
    """Existing ``/etc`` entries (absolute paths) to show read-only."""
    home: str
    """The invoking user's HOME: an empty directory inside (a tmpfs with bwrap)."""
    read_only: tuple[str, ...]
    """Absolute host paths shown read-only at the same path (toolchains, PATH, config)."""
    writable: tuple[str, ...]
    """Absolute host paths writable at the same path, the workspace first."""
    masks: tuple[str, ...]
    """Secrets inside a read-only tree, hidden (an empty file or directory) at the same path."""
    git_configs: tuple[tuple[str, bytes], ...]
    """``(path, filtered content)`` of git's user configs: credentials and helpers removed."""

    def __init__(
        self,
        etc: tuple[str, ...],
        home: str,
        read_only: tuple[str, ...],
        writable: tuple[str, ...],
        masks: tuple[str, ...],
        git_configs: tuple[tuple[str, bytes], ...],
    ) -> None:
        self._init(
            etc=etc,
            git_configs=git_configs,
            home=home,
            masks=masks,
            read_only=read_only,
            writable=writable,
        )


def build_view(
    root: str,
    *,
    home: str,
    path: str,
    writable: Sequence[str],
    home_read_only: Sequence[str],
    state_dir: str,
    extra_read_only: Sequence[str] = (),
) -> View:
    """The view for a workspace at ``root`` (a resolved path) for a user with ``home`` and ``path``.

    Raises:
        ViewError: the workspace is HOME or holds it, or a configured entry would expose a
            secret, keel's state directory or a system tree.
    """
    home = os.path.realpath(home)
    _check_workspace(root, home, state_dir)
    rw = (root, *_writable(writable, home, root, state_dir))
    configured = [_home_entry(e, home, state_dir) for e in home_read_only]
    roots = [*_toolchains(path, home), *_path_prefixes(path, home), *extra_read_only]
    secrets = tuple(os.path.join(home, s) for s in HOME_SECRETS)
    bindable = [r for r in dict.fromkeys(roots) if _bindable(r, home, state_dir, secrets)]
    ro = _minimal([*configured, *bindable])
    ro = [r for r in ro if not any(within(r, w) for w in rw)]
    masks = tuple(m for r in ro for m in _secrets_in(r, secrets, state_dir))
    return View(_etc(), home, tuple(ro), rw, masks, _git_configs(home))


def secret_of(path: str, home: str) -> str | None:
    """The secret (absolute) that ``path`` is, holds or sits in; ``None`` if there is none."""
    for rel in HOME_SECRETS:
        secret = os.path.join(home, rel)
        if within(path, secret) or within(secret, path):
            return secret
    return None


def _check_workspace(root: str, home: str, state_dir: str) -> None:
    if within(home, root):
        raise _refused(
            f"the workspace {root} is or holds your home directory: contain a project "
            "directory instead",
            "sandbox.workspace",
        )
    if within(state_dir, root):
        raise _refused(
            f"keel's state directory {state_dir} is inside the workspace {root}: set "
            "KEEL_STATE_DIR elsewhere",
            "sandbox.workspace",
        )
    secret = secret_of(root, home)
    if secret is not None:
        raise _refused(f"the workspace {root} overlaps the secret {secret}", "sandbox.secret")


def _writable(paths: Iterable[str], home: str, root: str, state_dir: str) -> list[str]:
    out: list[str] = []
    for raw in paths:
        full = os.path.realpath(_expand(raw, home))
        if not os.path.isdir(full) and not os.path.isfile(full):
            continue  # documented: a missing writable path is skipped
        if full == "/" or any(within(full, t) for t in NEVER_WRITABLE) or within(home, full):
            raise _refused(
                f"[sandbox] writable {raw!r} would make a system tree or your whole home writable",
                "sandbox.config",
            )
        _refuse_secret(raw, full, home, state_dir, "writable")
        if not within(full, root):
            out.append(full)
    return _minimal(out)


def _home_entry(raw: str, home: str, state_dir: str) -> str:
    full = os.path.normpath(_expand(raw if raw.startswith(("~", "/")) else f"~/{raw}", home))
    if not within(full, home) or full == home:
        raise _refused(
            f"[sandbox] home_read_only {raw!r} must name an entry inside your home directory",
            "sandbox.config",
        )
    _refuse_secret(raw, full, home, state_dir, "home_read_only")
    return full


def _refuse_secret(raw: str, full: str, home: str, state_dir: str, key: str) -> None:
    secret = secret_of(full, home) or secret_of(os.path.realpath(full), home)
    if secret is None and (within(full, state_dir) or within(state_dir, full)):
        secret = state_dir
    if secret is not None:
        raise _refused(
            f"[sandbox] {key} {raw!r} would expose {secret}: secrets and keel's state are "
            "never visible inside the sandbox",
            "sandbox.secret",
        )


def _toolchains(path: str, home: str) -> list[str]:
    """The toolchain roots the ``PATH`` entries under HOME need."""
    out: list[str] = []
    for entry in _path_entries(path):
        if not within(entry, home) or entry == home:
            continue
        first = os.path.relpath(entry, home).split(os.sep)[0]
        if first == ".local":
            out.append(entry)
            out.extend(_user_sites(home))
        elif first in GENERIC_HOME_DIRS:
            out.append(_prefix(entry))
        else:
            out.append(os.path.join(home, first))
            out.extend(os.path.join(home, c) for c in COMPANIONS.get(first, ()))
    return [p for p in out if os.path.exists(p)]


def _user_sites(home: str) -> list[str]:
    """``~/.local/lib/pythonX.Y`` (the user site) and pipx's venvs, which ``~/.local/bin`` uses."""
    lib = os.path.join(home, ".local", "lib")
    try:
        names = os.listdir(lib)
    except OSError:
        names = []
    found = [os.path.join(lib, n) for n in names if n.startswith("python")]
    pipx = (os.path.join(home, ".local", "share", "pipx"), os.path.join(home, ".local", "pipx"))
    return [*found, *pipx]


def _path_prefixes(path: str, home: str) -> list[str]:
    """``PATH`` entries outside HOME and the system trees: the entry, or its prefix for ``bin``."""
    out: list[str] = []
    for entry in _path_entries(path):
        if within(entry, home) or any(within(entry, t) for t in SYSTEM_TREES):
            continue
        prefix = _prefix(entry)
        homes = os.path.dirname(prefix) == "/home" or prefix == "/root"
        out.append(entry if homes or prefix.count("/") < 2 else prefix)
    return [p for p in out if os.path.isdir(p)]


def _path_entries(path: str) -> list[str]:
    entries = [os.path.normpath(e) for e in path.split(":") if e.startswith("/")]
    return list(dict.fromkeys(entries))


def _prefix(entry: str) -> str:
    return os.path.dirname(entry) if os.path.basename(entry) in ("bin", "sbin") else entry


def _bindable(path: str, home: str, state_dir: str, secrets: Sequence[str]) -> bool:
    """Whether a derived (not configured) tree may be bound.

    Not when it is, holds or sits in HOME, ``/etc``, a secret or keel's state; secrets inside
    a toolchain root are masked instead. ``secrets``: the ``HOME_SECRETS`` under ``home``.
    """
    if any(within(p, path) for p in ("/etc", home, state_dir)) or within(path, state_dir):
        return False
    return not any(within(path, s) for s in secrets)


def _secrets_in(tree: str, secrets: Sequence[str], state_dir: str) -> list[str]:
    candidates = [*secrets, state_dir]
    return [c for c in candidates if c != tree and within(c, tree) and os.path.lexists(c)]


def _etc() -> tuple[str, ...]:
    found = [os.path.join("/etc", name) for name in ETC_ENTRIES]
    try:
        names = os.listdir("/etc")
    except OSError:
        names = []
    found += [os.path.join("/etc", n) for n in sorted(names) if n.startswith(ETC_PREFIXES)]
    return tuple(p for p in found if os.path.exists(p))


def _git_configs(home: str) -> tuple[tuple[str, bytes], ...]:
    out: list[tuple[str, bytes]] = []
    for rel in (".gitconfig", ".config/git/config"):
        full = os.path.join(home, rel)
        data = _read_small(full)
        if data is not None:
            out.append((full, filter_git_config(data)))
    return tuple(out)


def filter_git_config(data: bytes) -> bytes:
    """Git config text without credential helpers, extra headers, tokens or URL passwords."""
    kept: list[bytes] = []
    for line in data.splitlines(keepends=True):
        lower = line.lower()
        if any(w.encode() in lower for w in GIT_SECRET_WORDS) or _url_with_password(lower):
            continue
        kept.append(line)
    return b"".join(kept)


def _url_with_password(line: bytes) -> bool:
    scheme = line.find(b"://")
    if scheme < 0:
        return False
    at = line.find(b"@", scheme)
    return at > 0 and b":" in line[scheme + 3 : at]


def _read_small(path: str, cap: int = 1 << 20) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, cap)
    finally:
        os.close(fd)


def _expand(raw: str, home: str) -> str:
    if raw == "~" or raw.startswith("~/"):
        return home + raw[1:]
    return raw


def within(path: str, tree: str) -> bool:
    """``path`` is ``tree`` or below it (both absolute and normalised)."""
    return path == tree or path.startswith(tree.rstrip("/") + "/")


def _minimal(paths: Iterable[str]) -> list[str]:
    """The paths without duplicates and without those inside another one."""
    kept: list[str] = []
    for path in sorted(set(paths), key=len):
        if not any(within(path, k) for k in kept):
            kept.append(path)
    return kept


SMALL_DIR = 8
"""A ``/etc`` directory of at most this many entries in all (itself included) is copied into the
mirror like a file; a larger one is bound over it (each bind costs bwrap ~60 µs on every run,
each copied entry ``keel exec`` an ``lstat``)."""


def etc_mirror(
    etc: tuple[str, ...], state_dir: str, etc_root: str = "/etc"
) -> tuple[str, tuple[str, ...]] | None:
    """A private copy of the small ``/etc`` files and directories, and the ones to bind over it.

    Binding ~35 entries one by one costs bwrap a mount each (about 5 ms); one read-only bind
    of this copy plus the few large directories costs a fraction. The copy lives in keel's
    state directory, keyed by every copied entry's inode, size and times (and each copied
    directory's list of names), and is rebuilt when one changes. ``None`` when it cannot be
    made (the caller then binds the entries one by one). ``etc_root``: where ``etc`` lies
    (tests).
    """
    files: list[tuple[str, os.stat_result]] = []
    dirs: list[str] = []
    try:
        for path in etc:
            st = os.lstat(path)
            if not stat.S_ISDIR(st.st_mode):
                files.append((path, st))
            elif (inside := _small_dir(path, st)) is not None:
                files += inside
            else:
                dirs.append(path)
        stamp = [(p, s.st_ino, s.st_size, s.st_mtime_ns, s.st_ctime_ns) for p, s in files]
        from keel.core.configview import cache_name

        key = cache_name(repr((stamp, dirs)).encode())
        base = os.path.join(state_dir, "etc-view")
        mirror = os.path.join(base, key)
        if not os.path.isdir(mirror):
            _build_mirror(base, mirror, files, dirs, etc_root)
    except OSError:
        return None
    return mirror, tuple(dirs)


def _small_dir(path: str, st: os.stat_result) -> list[tuple[str, os.stat_result]] | None:
    """The directory ``path`` and everything in it, if that is small (``SMALL_DIR``), else None.

    Listing stops at the first entry past the limit; a directory with more than one block of
    names is not listed at all: large ones are bound, not read on every run.
    """
    out: list[tuple[str, os.stat_result]] = []
    pending = [(path, st)]
    while pending:
        folder, folder_st = pending.pop()
        if folder_st.st_size > 4096:
            return None
        out.append((folder, folder_st))
        with os.scandir(folder) as entries:
            for entry in entries:
                found = entry.stat(follow_symlinks=False)
                if len(out) + len(pending) > SMALL_DIR or not _copyable(found):
                    return None
                if stat.S_ISDIR(found.st_mode):
                    pending.append((entry.path, found))
                else:
                    out.append((entry.path, found))
    return sorted(out)


def _copyable(st: os.stat_result) -> bool:
    """A link or directory, or a file everyone may read (the copy is world-readable)."""
    if stat.S_ISLNK(st.st_mode) or stat.S_ISDIR(st.st_mode):
        return True
    return stat.S_ISREG(st.st_mode) and st.st_mode & 0o444 == 0o444


def _build_mirror(
    base: str,
    mirror: str,
    files: list[tuple[str, os.stat_result]],
    dirs: list[str],
    etc_root: str,
) -> None:
    import shutil

    os.makedirs(base, mode=0o700, exist_ok=True)
    staging = f"{mirror}.{os.getpid()}.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    os.mkdir(staging, 0o755)
    for path, st in files:
        dest = os.path.join(staging, os.path.relpath(path, etc_root))
        os.makedirs(os.path.dirname(dest), mode=0o755, exist_ok=True)
        if stat.S_ISDIR(st.st_mode):  # a small directory (_small_dir): its entries follow
            os.makedirs(dest, mode=0o755, exist_ok=True)
        elif stat.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(path), dest)
        else:
            shutil.copyfile(path, dest)
            os.chmod(dest, 0o644 | st.st_mode & 0o111)
    for path in dirs:
        os.makedirs(os.path.join(staging, os.path.relpath(path, etc_root)), mode=0o755)
    try:
        os.rename(staging, mirror)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        if not os.path.isdir(mirror):
            raise
    for old in os.listdir(base):
        if os.path.join(base, old) != mirror and not old.endswith(".tmp"):
            shutil.rmtree(os.path.join(base, old), ignore_errors=True)
