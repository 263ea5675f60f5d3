"""Which interpreter ``run_python`` starts inside the sandbox, and what it may import.

The host interpreter is often unreachable for the sandbox uid (a venv symlinked into
``/root/.pyenv`` while ``/root`` is 0700), so the layout falls back to a system interpreter
of the same ``X.Y`` (same ABI, so compiled extensions such as PyYAML's load) with keel's
source directory and the environment's site-packages bound read-only at the same paths and
put on ``PYTHONPATH``. Nothing here depends on where the repository was cloned: every path is
derived from ``keel.__file__``, ``sys`` and ``sysconfig``.
"""

from __future__ import annotations

import functools
import os
import stat
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import keel

SYSTEM_PREFIXES = ("/usr/",)
"""Host trees every sandbox binds read-only anyway."""


@dataclass(frozen=True, slots=True)
class PythonLayout:
    """An interpreter usable by the sandbox uid, and the host trees it needs."""

    executable: str
    version: str
    binds: tuple[str, ...]
    """Host directories to expose read-only at the same path (outside ``/usr``)."""
    pythonpath: tuple[str, ...]


def can_reach(path: Path | str, uid: int, gid: int, *, write: bool = False) -> bool:
    """Whether ``uid``/``gid`` can traverse to ``path`` and read it (mode bits only, no ACLs)."""
    if uid == 0:
        return True
    try:
        target = Path(os.path.realpath(path))
        for parent in reversed(target.parents):
            if not _allowed(os.stat(parent), uid, gid, 1):
                return False
        st = os.stat(target)
    except OSError:
        return False
    want = 4 | (1 if stat.S_ISDIR(st.st_mode) else 0) | (2 if write else 0)
    return _allowed(st, uid, gid, want)


def _allowed(st: os.stat_result, uid: int, gid: int, want: int) -> bool:
    if st.st_uid == uid:
        bits = (st.st_mode >> 6) & 7
    elif st.st_gid == gid:
        bits = (st.st_mode >> 3) & 7
    else:
        bits = st.st_mode & 7
    return bits & want == want


def import_roots() -> tuple[str, ...]:
    """The directories that make keel and its dependencies importable, keel's first."""
    roots = [str(Path(keel.__file__).resolve().parent.parent)]
    for key in ("purelib", "platlib"):
        roots.append(os.path.realpath(sysconfig.get_paths()[key]))
    return tuple(dict.fromkeys(r for r in roots if os.path.isdir(r)))


MIRROR_BASE = "/var/tmp/keel-sandbox-python"
"""Where a readable copy of keel (and PyYAML) goes when the checkout is not reachable."""
MIRRORED_PACKAGES = ("yaml", "_yaml")


def mirror_import_roots(base: str = MIRROR_BASE) -> str:
    """A 0755 copy of keel's package and PyYAML, for a checkout the sandbox uid cannot reach.

    A clone under a 0700 directory (``/root``, a ``mkdtemp``) would otherwise leave the
    sandbox without keel. The copy is keyed by the source files' sizes and mtimes, so an
    edited checkout gets a fresh mirror; it is built in a temporary directory and renamed into
    place, so concurrent processes never see half a copy.
    """
    import hashlib
    import shutil
    import tempfile

    package = Path(keel.__file__).resolve().parent
    sources = [package] + [
        Path(root) / name
        for root in import_roots()[1:]
        for name in MIRRORED_PACKAGES
        if (Path(root) / name).is_dir()
    ]
    digest = hashlib.sha256()
    for source in sources:
        for path in sorted(source.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                st = path.stat()
                digest.update(f"{path}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    target = Path(base) / digest.hexdigest()[:16]
    if target.is_dir():
        return str(target)
    Path(base).mkdir(mode=0o755, parents=True, exist_ok=True)
    os.chmod(base, 0o755)
    staging = Path(tempfile.mkdtemp(dir=base, prefix=".staging-"))
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for source in sources:
        shutil.copytree(source, staging / source.name, ignore=ignore)
    for path in [staging, *staging.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644 | (path.stat().st_mode & 0o111))
    try:
        os.rename(staging, target)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        if not target.is_dir():
            raise
    return str(target)


def _outside_system(paths: tuple[str, ...]) -> tuple[str, ...]:
    kept: list[str] = []
    for path in sorted(set(paths), key=len):
        if path.startswith(SYSTEM_PREFIXES) or path == "/usr":
            continue
        if any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            continue
        kept.append(path)
    return tuple(kept)


@functools.cache
def python_layout(uid: int, gid: int) -> PythonLayout | str:
    """The layout for ``uid``, or a string saying why no interpreter is usable."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    roots = import_roots()
    missing = [r for r in roots if not can_reach(r, uid, gid)]
    if missing:
        try:
            roots = (mirror_import_roots(),)
        except OSError as exc:
            return f"uid {uid} cannot read {', '.join(missing)} and no mirror could be made: {exc}"
        if not can_reach(roots[0], uid, gid):
            return f"uid {uid} cannot read {', '.join(missing)} (a parent directory is not 0755?)"
    host = os.path.realpath(sys.executable)
    base = os.path.realpath(sys.base_prefix)
    if can_reach(host, uid, gid) and can_reach(sysconfig.get_paths()["stdlib"], uid, gid):
        return PythonLayout(host, version, _outside_system((base, *roots)), roots)
    for candidate in (f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"):
        real = os.path.realpath(candidate)
        if os.path.isfile(real) and can_reach(real, uid, gid):
            return PythonLayout(real, version, _outside_system(roots), roots)
    return (
        f"uid {uid} cannot run {host} and no /usr/bin/python{version} exists "
        f"(install the distribution's python{version})"
    )
