"""File-system probes: existence, type, listing, stat, permissions, glob, text, hashes.

All are read-only. ``writable`` answers from metadata (``lstat``, ``access``) and never opens
the file; it runs on the host side because the probe sandbox mounts the workspace read-only
and maps uids, so only the host can say whether keel itself may write there.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from pathlib import Path
from typing import Any

from keel.probes._fs import (
    ProbeContext,
    contain,
    decode_text,
    is_within,
    kind_of,
    lstat_or_none,
    os_failure,
    read_bytes,
    relative,
)
from keel.probes._result import Failure

MAX_ENTRIES = 1000
HASH_CAP = 64 << 20


def exists(ctx: ProbeContext, path: str) -> bool:
    """Whether ``path`` exists (a dangling symlink does not)."""
    return lstat_or_none(contain(ctx, path)) is not None


def is_file(ctx: ProbeContext, path: str) -> bool:
    """Whether ``path`` is a regular file."""
    st = lstat_or_none(contain(ctx, path))
    return st is not None and stat.S_ISREG(st.st_mode)


def is_dir(ctx: ProbeContext, path: str) -> bool:
    """Whether ``path`` is a directory."""
    st = lstat_or_none(contain(ctx, path))
    return st is not None and stat.S_ISDIR(st.st_mode)


def list_dir(ctx: ProbeContext, path: str = ".") -> list[str]:
    """The sorted names in a directory (directories end in ``/``), at most 1000."""
    real = contain(ctx, path)
    st = lstat_or_none(real)
    if st is None:
        raise Failure("fs.not_found", f"{path!r} does not exist")
    if not stat.S_ISDIR(st.st_mode):
        raise Failure("fs.not_dir", f"{path!r} is a {kind_of(st.st_mode)}, not a directory")
    names: list[str] = []
    try:
        with os.scandir(real) as entries:
            for entry in entries:
                names.append(entry.name + ("/" if entry.is_dir(follow_symlinks=False) else ""))
    except OSError as exc:
        raise os_failure(exc, real) from exc
    names.sort()
    if len(names) > MAX_ENTRIES:
        ctx.note(f"{len(names)} entries; only the first {MAX_ENTRIES} are listed")
    return names[:MAX_ENTRIES]


def stat_path(ctx: ProbeContext, path: str) -> dict[str, Any] | None:
    """Type, size, mode and mtime of ``path`` itself (a symlink is not followed); null if absent."""
    real = contain(ctx, path, follow=False)
    st = lstat_or_none(real)
    if st is None:
        return None
    info: dict[str, Any] = {
        "type": kind_of(st.st_mode),
        "size": st.st_size,
        "mode": oct(stat.S_IMODE(st.st_mode)),
        "mtime": st.st_mtime,
    }
    if stat.S_ISLNK(st.st_mode):
        target = Path(os.path.realpath(real))
        info["target"] = relative(ctx, target) if is_within(target, ctx.workspace) else None
    return info


def readable(ctx: ProbeContext, path: str) -> bool:
    """Whether ``path`` is a regular file keel could read (within the read cap)."""
    real = contain(ctx, path)
    st = lstat_or_none(real)
    if st is None or not stat.S_ISREG(st.st_mode):
        return False
    if st.st_size > ctx.read_cap:
        ctx.note(f"{path!r} is larger than the read cap of {ctx.read_cap} bytes")
        return False
    return os.access(real, os.R_OK)


def writable(ctx: ProbeContext, path: str) -> bool:
    """Whether keel could write ``path``: an existing regular file, or a new one in a writable dir.

    Nothing is opened or created: the answer comes from ``lstat`` and ``access``.
    """
    real = contain(ctx, path)
    st = lstat_or_none(real)
    if st is not None:
        if not stat.S_ISREG(st.st_mode):
            ctx.note(f"{path!r} is a {kind_of(st.st_mode)}, not a regular file")
            return False
        ok = os.access(real, os.W_OK)
    else:
        parent = real.parent
        pst = lstat_or_none(parent)
        if pst is None or not stat.S_ISDIR(pst.st_mode):
            ctx.note(f"the directory of {path!r} does not exist")
            return False
        ok = os.access(parent, os.W_OK | os.X_OK)
        if ok:
            ctx.note(f"{path!r} does not exist yet; its directory is writable")
    if not ok:
        ctx.note(f"{path!r} is not writable (permissions or a read-only mount)")
    return ok


def glob(ctx: ProbeContext, pattern: str) -> list[str]:
    """Workspace-relative paths matching ``pattern`` (``*``, ``?``, ``**``), at most 1000.

    Symbolic links to directories are not followed, so a link cannot lead the walk outside.
    """
    if not pattern or pattern.startswith("/") or ".." in Path(pattern).parts or "\x00" in pattern:
        raise Failure("path.invalid", f"bad glob {pattern!r}: must be relative, without '..'")
    from keel.policy import glob_to_regex

    regex = re.compile(glob_to_regex(pattern, anchored_any_depth=False), re.DOTALL)
    root = ctx.workspace
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        base = Path(dirpath)
        for name in sorted([*dirnames, *filenames]):
            rel = (base / name).relative_to(root).as_posix()
            if regex.fullmatch(rel):
                found.append(rel)
                if len(found) >= MAX_ENTRIES:
                    ctx.note(f"stopped after {MAX_ENTRIES} matches")
                    return sorted(found)
    return sorted(found)


def read_text(ctx: ProbeContext, path: str, max_bytes: int | None = None) -> str:
    """The text of a file (UTF-8, or as its BOM says), at most the read cap.

    A secret (``.env``, a private key: the policy's secret globs) is refused (``fs.secret``).
    """
    _, data = read_bytes(ctx, path, max_bytes)
    text = decode_text(ctx, data, what=repr(path))
    if "\x00" in text:
        ctx.note(f"{path!r} contains {text.count(chr(0))} NUL characters")
    return text


def sha256(ctx: ProbeContext, path: str) -> str:
    """The SHA-256 of a regular file (up to 64 MiB), hex; a secret's hash too (not its text)."""
    cap = max(ctx.read_cap, HASH_CAP)
    widened = ProbeContext(ctx.workspace, cap, ctx.timeout, ctx.http_allow, ctx.notes)
    _, data = read_bytes(widened, path, cap, secrets=True)
    return hashlib.sha256(data).hexdigest()
