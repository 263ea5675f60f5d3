"""Safe file access for probes: containment, no symlink escapes, no fifos or devices, size caps.

Every path a probe touches goes through :func:`contain`: the path is resolved (symlinks
included) and must stay inside the workspace. Files are read through :func:`read_bytes`, which
refuses the workspace's secrets (``.env``, private keys: the policy's secret globs, on the path
as named and as resolved), ``lstat``s first so a fifo or device is never opened (opening a fifo
blocks), opens with ``O_NOFOLLOW | O_NONBLOCK``, re-checks with ``fstat`` and reads at most the
cap.

Standard library only: the sandboxed runner imports this.
"""

from __future__ import annotations

import codecs
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from keel.probes._result import Failure

MAX_PATH = 4096


@dataclass(frozen=True, slots=True)
class ProbeContext:
    """What a probe may see: the workspace, caps, the http allowlist; and its notes."""

    workspace: Path
    """The workspace root, already resolved (``/workspace`` inside the sandbox)."""
    read_cap: int = 1_000_000
    """Largest file a probe reads, in bytes."""
    timeout: float = 10.0
    """Wall-clock budget of the probe, for the subprocesses it starts."""
    http_allow: tuple[str, ...] = ()
    """Host globs the http probes may reach; empty means off."""
    notes: list[str] = field(default_factory=list[str])
    """Findings the probe reports next to its value (mutable on purpose)."""

    def note(self, text: str) -> None:
        """Add a finding."""
        if len(self.notes) < 50:
            self.notes.append(text)


def contain(ctx: ProbeContext, raw: object, *, follow: bool = True) -> Path:
    """The absolute path of ``raw`` inside the workspace, or a ``path.*`` failure.

    With ``follow=False`` the last component is not resolved, so a symlink itself can be
    inspected (``fs.stat``); its parent still must resolve inside the workspace.
    """
    if not isinstance(raw, str) or not raw:
        raise Failure("path.invalid", "a path must be a non-empty string")
    if "\x00" in raw or len(raw) > MAX_PATH:
        raise Failure("path.invalid", "the path contains a NUL byte or is too long")
    root = ctx.workspace
    candidate = Path(raw) if os.path.isabs(raw) else root / raw
    if follow:
        real = Path(os.path.realpath(candidate))
    else:
        normal = Path(os.path.normpath(candidate))
        real = normal if normal == root else Path(os.path.realpath(normal.parent)) / normal.name
    if not is_within(real, root):
        raise Failure("path.outside_workspace", f"{raw!r} resolves outside the workspace")
    return real


def is_within(path: Path, root: Path) -> bool:
    """True when ``path`` is ``root`` or below it (both absolute and normalised)."""
    return path == root or root in path.parents


def relative(ctx: ProbeContext, path: Path) -> str:
    """``path`` relative to the workspace, POSIX style."""
    try:
        rel = path.relative_to(ctx.workspace).as_posix()
    except ValueError:
        return path.as_posix()
    return rel or "."


def kind_of(mode: int) -> str:
    """A file type name for ``st_mode``."""
    for test, name in (
        (stat.S_ISREG, "file"),
        (stat.S_ISDIR, "dir"),
        (stat.S_ISLNK, "symlink"),
        (stat.S_ISFIFO, "fifo"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "char_device"),
        (stat.S_ISBLK, "block_device"),
    ):
        if test(mode):
            return name
    return "other"


def lstat_or_none(path: Path) -> os.stat_result | None:
    """``lstat`` that answers ``None`` for a missing path; other errors are failures."""
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise os_failure(exc, path) from exc


def os_failure(exc: OSError, path: Path | str) -> Failure:
    """Translate an ``OSError`` into a structured ``fs.*`` failure."""
    name = Path(path).name or str(path)
    if isinstance(exc, FileNotFoundError | NotADirectoryError):
        return Failure("fs.not_found", f"{name!r} does not exist")
    if isinstance(exc, PermissionError):
        return Failure("fs.permission", f"{name!r} is not readable")
    if isinstance(exc, IsADirectoryError):
        return Failure("fs.is_dir", f"{name!r} is a directory")
    return Failure("fs.error", f"{name!r}: {exc.strerror or exc}")


def secret_glob(ctx: ProbeContext, raw: str, real: Path) -> str | None:
    """The secret glob ``raw`` (as named, or resolved to ``real``) matches, if any."""
    from keel.core.presets import SECRET_EXCEPTIONS, WORKSPACE_SECRETS
    from keel.policy import GlobSet

    secrets = GlobSet(WORKSPACE_SECRETS, ignore_case=True)
    allowed = GlobSet(SECRET_EXCEPTIONS, ignore_case=True)
    named = os.path.normpath(raw if os.path.isabs(raw) else os.path.join(ctx.workspace, raw))
    for path in (named, str(real)):
        rel = os.path.relpath(path, ctx.workspace)
        glob = secrets.match(rel)
        if glob is not None and allowed.match(rel) is None:
            return glob
    return None


def read_bytes(
    ctx: ProbeContext, raw: object, cap: int | None = None, *, secrets: bool = False
) -> tuple[Path, bytes]:
    """The contents of a regular file inside the workspace, at most ``cap`` bytes.

    A secret (``.env``, ``id_rsa``...) is refused with ``fs.secret`` unless ``secrets``: the
    caller (a hash, the key names of a dotenv file) returns nothing of its content.
    """
    limit = min(cap or ctx.read_cap, ctx.read_cap)
    path = contain(ctx, raw)
    glob = None if secrets or not isinstance(raw, str) else secret_glob(ctx, raw, path)
    if glob is not None:
        raise Failure(
            "fs.secret",
            f"{raw!r} holds secrets (it matches {glob!r}); probes never read secrets",
        )
    st = lstat_or_none(path)
    if st is None:
        raise Failure("fs.not_found", f"{raw!r} does not exist")
    if not stat.S_ISREG(st.st_mode):
        raise Failure("fs.not_regular", f"{raw!r} is a {kind_of(st.st_mode)}, not a regular file")
    if st.st_size > limit:
        raise Failure("fs.too_large", f"{raw!r} has {st.st_size} bytes; the cap is {limit}")
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise os_failure(exc, path) from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Failure("fs.not_regular", f"{raw!r} changed into a non-regular file")
        chunks: list[bytes] = []
        total = 0
        while total <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as exc:
        raise os_failure(exc, path) from exc
    finally:
        os.close(fd)
    if total > limit:
        raise Failure("fs.too_large", f"{raw!r} grew past the cap of {limit} bytes")
    return path, b"".join(chunks)


_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def sniff_bom(data: bytes) -> tuple[str | None, int]:
    """The encoding a byte-order mark announces, and the mark's length."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            return name, len(bom)
    return None, 0


def decode_text(ctx: ProbeContext, data: bytes, *, what: str = "file", utf16: bool = True) -> str:
    """Strict text decoding: a BOM is honoured and noted; invalid bytes are a failure."""
    encoding, skip = sniff_bom(data)
    if encoding is not None and encoding != "utf-8" and not utf16:
        raise Failure(
            "encoding.unsupported", f"the {what} starts with a {encoding} byte-order mark"
        )
    if encoding is not None:
        ctx.note(f"the {what} starts with a {encoding} byte-order mark")
    try:
        return data[skip:].decode(encoding or "utf-8")
    except UnicodeDecodeError as exc:
        offset = skip + exc.start
        line = data[:offset].count(b"\n") + 1
        column = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
        raise Failure(
            "encoding.invalid",
            f"the {what} is not valid {encoding or 'UTF-8'}: bad byte at offset {offset}",
            line=line,
            column=column,
        ) from exc
