"""A compiled, plain-data form of the policy parts of keel.toml, cached per workspace.

Loading keel.toml means tomllib and pydantic (about 45 ms of imports); a hook pays that
once per change of the file. The snapshot (dicts, tuples, strings) is written with
``marshal`` to ``<root>/.keel/cache/`` keyed by the file's path, inode, size and mtime/ctime
in nanoseconds, so a later run reads it back without importing either.
"""

from __future__ import annotations

import marshal
import os
from stat import S_ISREG

TYPE_CHECKING = False  # typing costs 3 ms to import on the hook path
if TYPE_CHECKING:
    from typing import Any

    from keel.config import KeelConfig

SNAPSHOT_VERSION = 2
CONFIG_NAME = "keel.toml"
DEFAULT_MAX_INPUT = 1_000_000


def default_snapshot(preset: str = "developer") -> dict[str, Any]:
    """The snapshot of a workspace with no keel.toml."""
    return {
        "preset": preset,
        "allow": (),
        "ask": (),
        "deny": (),
        "network_allow": (),
        "protected": None,
        "read_outside": (),
        "unknown": None,
        "unparseable": None,
        "scope_include": ("**",),
        "scope_exclude": (),
        "constraints": (),
        "max_input_bytes": DEFAULT_MAX_INPUT,
        "source": None,
    }


def snapshot_from_config(config: KeelConfig, source: str | None = None) -> dict[str, Any]:
    """The plain-data snapshot of a validated config."""
    p = config.policy
    constraints = tuple(
        (c.id or str(i), c.text, tuple(c.protect), tuple(c.forbid))
        for i, c in enumerate(config.constraints)
    )
    return {
        "preset": p.preset,
        "allow": tuple(p.allow),
        "ask": tuple(p.ask),
        "deny": tuple(p.deny),
        "network_allow": tuple(p.network_allow),
        "protected": None if p.protected is None else tuple(p.protected),
        "read_outside": tuple(p.read_outside),
        "unknown": p.unknown,
        "unparseable": p.unparseable,
        "scope_include": tuple(config.scope.include),
        "scope_exclude": tuple(config.scope.exclude),
        "constraints": constraints,
        "max_input_bytes": config.limits.max_input_bytes,
        "source": source,
    }


def cache_path(root: str, config_path: str) -> str:
    """Where the snapshot of ``config_path`` is cached."""
    import zlib

    digest = zlib.crc32(config_path.encode("utf-8", "surrogateescape"))
    return os.path.join(root, ".keel", "cache", f"policy-{digest:08x}.marshal")


def load_snapshot(root: str, *, config_file: str | None = None) -> dict[str, Any]:
    """The snapshot for ``root`` (its keel.toml, or ``config_file``), from the cache if fresh.

    Raises:
        ConfigError: the file cannot be read or is not a valid keel.toml.
    """
    path = os.path.abspath(config_file or os.path.join(root, CONFIG_NAME))
    try:
        st = os.stat(path)
    except OSError as exc:
        missing = isinstance(exc, FileNotFoundError)
        if config_file is None and missing and not os.path.islink(path):
            return default_snapshot()
        from keel.errors import ConfigError

        why = "a symlink to a missing file" if missing and os.path.islink(path) else exc.strerror
        raise ConfigError(f"cannot read: {why}", file=path, code="config.read") from exc
    if config_file is None and not S_ISREG(st.st_mode):  # never the defaults for a broken file
        from keel.errors import ConfigError

        raise ConfigError("not a regular file", file=path, code="config.read")
    key = (SNAPSHOT_VERSION, path, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    cache = cache_path(root, path)
    try:
        with open(cache, "rb") as fh:
            cached = marshal.load(fh)
        if cached[0] == key:
            return cached[1]
    except (OSError, EOFError, ValueError, TypeError, IndexError):
        pass
    from pathlib import Path

    from keel.config import load_config

    snapshot = snapshot_from_config(load_config(Path(path)), source=path)
    _write_cache(cache, (key, snapshot))
    return snapshot


def _write_cache(cache: str, value: tuple[Any, ...]) -> None:
    """Best effort: an unwritable workspace only costs speed."""
    tmp = f"{cache}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        with open(tmp, "wb") as fh:
            marshal.dump(value, fh)
        os.replace(tmp, cache)
    except (OSError, ValueError):
        import contextlib

        with contextlib.suppress(OSError):
            os.unlink(tmp)
