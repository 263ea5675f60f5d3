"""The code of an entry's modules in one file: ``keel exec`` imports ~30 modules per command.

Each import of a module costs the import system a search (a ``stat`` of the package's folder,
the name looked up, a spec built), an ``open``, ``fstat`` and ``read`` of its ``.pyc`` and a
``stat`` of its source: about 25 µs a module besides unmarshalling and running its code, most of
a millisecond of every contained command. ``install(entry, state_dir)`` puts a finder first on
``sys.meta_path`` that serves the modules the entry imported before from one file kept open,
``<state>/cache/code-<entry>.bin`` in keel's per-user state directory (which no sandbox sees):
an index (each module's source path, size and mtime, and where its code lies) read at once,
then each module's code, marshalled as in its ``.pyc``, read when the module is imported.

A module is served from the file only while its source still has the recorded size and mtime
(one ``stat``, the check the import system makes of a ``.pyc``, to the nanosecond); any other
module, and every module of another installation of keel or another Python, is imported as
usual. ``save()`` at the entry's end rewrites the file when a module was not served from it
(or there was none), with each module compiled from its source (~50 ms, once). The file is
written 0600 and read only when this user owns it and no one else may write it. Everything
falls back to the normal import: a missing, damaged or foreign file costs speed, never a
wrong module.

Standard library only: ``marshal``, ``os`` and ``sys``, loaded already at this point.
"""

from __future__ import annotations

import marshal
import os
import sys
from _frozen_importlib import ModuleSpec

TYPE_CHECKING = False
if TYPE_CHECKING:
    from importlib.abc import Loader
    from types import ModuleType

    Entry = tuple[str, bool, int, int, int, int]
    """Source path, is a package, source size, source mtime (ns), code offset (from the end of
    the index), code length."""
else:  # importlib.abc costs an import: what the import system calls is duck-typed
    Loader = object

FORMAT = 2
"""The layout of the file; a file of another layout is ignored (and rewritten)."""
PACKAGE = "keel"
_LENGTH = 8
"""The file starts with the index's length (little-endian), then the index, then the code."""
_ACTIVE: list[CodeCache] = []


class CodeCache:
    """The finder (see the module) over the file open as ``fd`` (-1: none) with ``entries``."""

    def __init__(
        self,
        path: str,
        root: str,
        fd: int,
        entries: dict[str, Entry],
        base: int = 0,
        package: str = PACKAGE,
    ) -> None:
        """Serve ``entries`` of ``package`` at ``root`` from ``fd`` (the file ``path``).

        ``base``: where the code starts in the file (past the index).
        """
        self.path = path
        self.root = root
        self.package = package
        self.fd = fd
        self.entries = entries
        self.base = base
        self.imported: set[str] = set()
        """keel's modules imported since ``install``: what ``save`` writes."""
        self.missed = fd < 0
        """One of them was not served from the file: ``save`` rewrites it."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> ModuleSpec | None:
        """The spec of ``name`` served from the file, or None (the import system goes on)."""
        if name != self.package and not name.startswith(self.package + "."):
            return None
        self.imported.add(name)
        entry = self.entries.get(name)
        if entry is None or not _unchanged(entry):
            self.missed = True
            return None
        origin, is_package = entry[0], entry[1]
        spec = ModuleSpec(name, _Loader(self, entry), origin=origin, is_package=is_package)
        if is_package:
            spec.submodule_search_locations = [os.path.dirname(origin)]
        spec.has_location = True
        return spec

    def code(self, entry: Entry) -> bytes:
        """The marshalled code of ``entry``, read from the file.

        Raises:
            OSError: the file cannot be read (or ends early).
        """
        data = os.pread(self.fd, entry[5], self.base + entry[4])
        if len(data) != entry[5]:
            raise OSError(f"{self.path} ends early")
        return data

    def close(self) -> None:
        """Leave ``sys.meta_path`` and close the file."""
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        fd, self.fd = self.fd, -1
        if fd >= 0:
            _close(fd)


class _Loader(Loader):
    """Runs a module's cached code (``exec_module``), as the source's own loader would."""

    def __init__(self, cache: CodeCache, entry: Entry) -> None:
        self.cache = cache
        self.entry = entry

    def create_module(self, spec: ModuleSpec) -> None:
        """The default module object."""
        return None

    def exec_module(self, module: ModuleType) -> None:
        """Run the code in the module's namespace (the source's own, if the file fails now).

        A fork that closed every descriptor (``keel exec``'s detached journal) still imports.
        """
        try:
            code = marshal.loads(self.cache.code(self.entry))
        except (OSError, EOFError, ValueError, TypeError):
            from _frozen_importlib_external import SourceFileLoader

            self.cache.missed = True
            SourceFileLoader(module.__name__, self.entry[0]).exec_module(module)
            return
        exec(code, module.__dict__)  # keel's own code, checked against its source


def _unchanged(entry: Entry) -> bool:
    try:
        st = os.stat(entry[0])
    except OSError:
        return False
    return st.st_size == entry[2] and st.st_mtime_ns == entry[3]


def cache_path(entry: str, state_dir: str) -> str:
    """Where the file of ``entry`` lives in keel's per-user state directory ``state_dir``."""
    return os.path.join(state_dir, "cache", f"code-{entry}.bin")


def install(
    entry: str, state_dir: str, root: str | None = None, package: str = PACKAGE
) -> CodeCache:
    """Put the finder of ``entry``'s file first on ``sys.meta_path`` (see the module).

    ``root``: the folder holding ``package`` (by default the keel running). The finder serves
    nothing when the file is missing, damaged, of another layout, Python or installation, or
    not this user's alone; ``save`` then writes it.
    """
    if root is None:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = cache_path(entry, state_dir)
    fd, entries, base = _open(path, root, package)
    cache = CodeCache(path, root, fd, entries, base, package)
    sys.meta_path.insert(0, cache)
    _ACTIVE.append(cache)
    return cache


def _open(path: str, root: str, package: str) -> tuple[int, dict[str, Entry], int]:
    """The file's descriptor, index and where its code starts, or ``(-1, {}, 0)``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return -1, {}, 0
    try:
        st = os.fstat(fd)
        if st.st_uid == os.geteuid() and not st.st_mode & 0o022:  # else: never run it
            head = os.pread(fd, 1 << 16, 0)
            size = int.from_bytes(head[:_LENGTH], "little")
            if len(head) < _LENGTH + size:
                head += os.pread(fd, _LENGTH + size - len(head), len(head))
            index = marshal.loads(head[_LENGTH : _LENGTH + size])
            ok = (
                isinstance(index, tuple) and len(index) == 4 and index[:3] == _header(root, package)
            )
            if ok and isinstance(index[3], dict):
                return fd, index[3], _LENGTH + size
    except (OSError, EOFError, ValueError, TypeError):
        pass
    os.close(fd)
    return -1, {}, 0


def _header(root: str, package: str) -> tuple[int, bytes, str]:
    from _frozen_importlib_external import MAGIC_NUMBER

    return (FORMAT, MAGIC_NUMBER, os.path.join(root, package))


def save() -> None:
    """Close each installed cache, rewriting its file when it missed a module (see the module).

    Never raises: an unwritable state directory only costs the next run its speed.
    """
    while _ACTIVE:
        cache = _ACTIVE.pop()
        try:
            if cache.missed:
                _write(cache)
        except (OSError, ValueError, SyntaxError):
            pass
        finally:
            cache.close()


def _write(cache: CodeCache) -> None:
    """The file again: the modules imported now, and the ones it had that are still current."""
    codes: dict[str, tuple[str, bool, int, int, bytes]] = {}
    for name, entry in cache.entries.items():
        if name not in cache.imported and _unchanged(entry):
            codes[name] = (*entry[:4], cache.code(entry))
    codes.update(_imported(cache.root, cache.package, cache.imported))
    entries: dict[str, Entry] = {}
    offset = 0
    for name, (origin, is_package, size, mtime, code) in sorted(codes.items()):
        entries[name] = (origin, is_package, size, mtime, offset, len(code))
        offset += len(code)
    index = marshal.dumps((*_header(cache.root, cache.package), entries))
    blobs = b"".join(codes[name][4] for name in sorted(codes))
    from keel.core.files import write_atomic

    os.makedirs(os.path.dirname(cache.path), mode=0o700, exist_ok=True)
    write_atomic(cache.path, len(index).to_bytes(_LENGTH, "little") + index + blobs, mode=0o600)


def _imported(
    root: str, package: str, names: set[str]
) -> dict[str, tuple[str, bool, int, int, bytes]]:
    """What to cache of each module in ``names`` imported from ``package`` at ``root``."""
    out: dict[str, tuple[str, bool, int, int, bytes]] = {}
    prefix = os.path.join(root, package) + os.sep
    for name in names:
        spec = getattr(sys.modules.get(name), "__spec__", None)
        origin = getattr(spec, "origin", None)
        if not isinstance(origin, str) or not origin.endswith(".py"):
            continue
        if not origin.startswith(prefix):
            continue
        st = os.stat(origin)  # first: a later edit makes the entry stale, never wrong
        is_package = getattr(spec, "submodule_search_locations", None) is not None
        out[name] = (origin, is_package, st.st_size, st.st_mtime_ns, _code(origin))
    return out


def _code(origin: str) -> bytes:
    """The marshalled code of ``origin``, compiled from the source.

    Not the ``.pyc`` in ``__pycache__``: its header has the source's mtime in whole seconds, so
    an edit of the same size within that second leaves it stale (the import system runs it).
    """
    with open(origin, "rb") as fh:
        source = fh.read()
    return marshal.dumps(compile(source, origin, "exec", dont_inherit=True))


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:  # closed already (a fork let go of every descriptor)
        return
