"""keel.toml on the hook path: the one config loader, and its one cache.

Validating keel.toml means tomllib and pydantic, about 100 ms of imports and model building,
on every hook process. ``config_view(root)`` pays that once per change of the file: when the
file validates, its plain data (``KeelConfig.to_dict()``) is cached with ``marshal`` (a
built-in module: reading it back costs no import) in ``<root>/.keel/cache/``, keyed by the
file's path, inode, size and mtime/ctime in nanoseconds, keel's version and the schema's
modules (``keel/core/schema.py`` and ``keel/config.py``: their size and mtime, so a new field
invalidates every cache). A later process rebuilds the frozen ``KeelConfig`` from it with
``KeelConfig.trusted`` (``keel.core.schema``: the same classes, no pydantic). Only a file that
validated is ever cached: an invalid keel.toml raises ``ConfigError`` on every call, so the
hook keeps failing closed. Without a keel.toml the embedded defaults are cached the same way.
The policy, the guard, the monitor and ``keel policy check`` all read the config through here.
"""

from __future__ import annotations

import marshal
import os
from stat import S_ISREG

from keel.core.root import CONFIG_NAME, state_path
from keel.core.schema import KeelConfig

TYPE_CHECKING = False  # typing costs 3 ms to import on the hook path
if TYPE_CHECKING:
    from typing import Any


CACHE_VERSION = 3
RACY_NS = 100_000_000
"""A keel.toml changed less than this long ago (ns) is validated but not cached yet."""


def config_view(
    root: os.PathLike[str] | str,
    preset: str | None = None,
    *,
    config_file: os.PathLike[str] | str | None = None,
) -> KeelConfig:
    """The config of the workspace at ``root`` without pydantic when the cache is fresh.

    ``config_file`` reads another file than ``<root>/keel.toml`` (it must exist);
    ``preset`` overrides ``[policy] preset`` as in ``config_for``.

    Raises:
        ConfigError: the file is unreadable or invalid (never cached, so raised every time).
        UsageError: ``preset`` is not a known preset.
    """
    if preset is not None:
        from keel.core.presets import check_preset

        check_preset(preset)
    where = (os.fspath(root), None if config_file is None else os.fspath(config_file))
    try:
        return _built(config_data(*where), preset)
    except (KeyError, TypeError, AttributeError, ValueError):  # a cache of another shape
        return _built(config_data(*where, fresh=True), preset)


def _built(data: dict[str, Any], preset: str | None) -> KeelConfig:
    if preset is not None:
        data = {**data, "policy": {**data["policy"], "preset": preset}}
    return KeelConfig.trusted(data)


def config_source(
    root: os.PathLike[str] | str, config_file: os.PathLike[str] | str | None = None
) -> str | None:
    """The file ``config_view`` reads for ``root``, or None for the embedded defaults."""
    path = os.path.abspath(config_file or os.path.join(os.fspath(root), CONFIG_NAME))
    return path if config_file is not None or os.path.lexists(path) else None


def config_stamp(root: os.PathLike[str] | str) -> tuple[int, ...] | None:
    """What ``root``'s keel.toml looks like on disk (None: there is none).

    Long-lived holders of a policy (``keel hookd``'s guards and proxy) rebuild it when this
    changes.
    """
    try:
        st = os.stat(os.path.join(os.fspath(root), CONFIG_NAME))
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def config_data(
    root: str, config_file: str | None = None, *, fresh: bool = False
) -> dict[str, Any]:
    """The plain data of ``root``'s validated keel.toml (or of the defaults), cached.

    ``fresh`` validates again instead of reading the cache (and rewrites it).

    Raises:
        ConfigError: keel.toml (or ``config_file``) is unreadable or invalid, or
            ``config_file`` does not exist.
    """
    path = os.path.abspath(config_file or os.path.join(root, CONFIG_NAME))
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if config_file is None and not os.path.islink(path):
            return _cached(root, "config-defaults.marshal", (), None, fresh)
        from keel.core.errors import ConfigError

        why = "a symlink to a missing file" if os.path.islink(path) else "no such file"
        raise ConfigError(f"cannot read: {why}", file=path, code="config.read") from None
    except OSError as exc:
        from keel.core.errors import ConfigError

        raise ConfigError(f"cannot read: {exc.strerror}", file=path, code="config.read") from exc
    if not S_ISREG(st.st_mode):  # a directory or a FIFO named keel.toml: never the defaults
        from keel.core.errors import ConfigError

        raise ConfigError("not a regular file", file=path, code="config.read")
    key = (path, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    name = cache_name(path.encode("utf-8", "surrogateescape"))
    return _cached(root, f"config-{name}.marshal", key, path, fresh)


def cache_name(data: bytes) -> str:
    """Eight hex digits naming a cache entry made from ``data`` (not a secure digest).

    ``data`` read as one number, modulo the largest 32-bit prime: computed in C without
    importing ``zlib`` (~0.3 ms on the hook and ``keel exec`` paths). Each cache keeps its
    full key inside, so two keys with one name only evict each other.
    """
    return f"{int.from_bytes(data, 'little') % 4294967291:08x}"


def _schema_key() -> list[Any]:
    """What the data's shape depends on: keel's version and the files of the schema."""
    from keel import __version__

    here = os.path.dirname(os.path.abspath(__file__))
    schema: list[Any] = []
    for module in (os.path.join(here, "schema.py"), os.path.join(here, "..", "config.py")):
        try:
            st = os.stat(module)
            schema += [st.st_size, st.st_mtime_ns]
        except OSError:
            schema.append(None)
    return [CACHE_VERSION, __version__, *schema]


def _cached(
    root: str, name: str, file_key: tuple[Any, ...], path: str | None, fresh: bool
) -> dict[str, Any]:
    key = [*_schema_key(), *file_key]
    cache = state_path(root, "cache", name)
    try:
        if fresh:
            raise FileNotFoundError(cache)
        with open(cache, "rb") as fh:
            cached = marshal.load(fh)
        if cached["key"] == key and isinstance(cached["config"], dict):
            return cached["config"]
    except (OSError, EOFError, ValueError, TypeError, KeyError):
        pass
    data = _validated(path)
    if path is None or _unchanged(path, file_key):
        _write(cache, {"key": key, "config": data})
    return data


def _validated(path: str | None) -> dict[str, Any]:
    """The plain data of the validated file (pydantic is imported only here)."""
    if path is None:  # the defaults are valid by construction
        return KeelConfig().to_dict()
    from pathlib import Path

    from keel.config import load_config

    return load_config(Path(path)).to_dict()


def _unchanged(path: str, file_key: tuple[Any, ...]) -> bool:
    """True if the file still has the stat it had before it was read, and that stat is safe.

    A file changed within the last ``RACY_NS`` could change again within the same tick of the
    file system's clock, keeping its size and times: it is not cached until it is older.
    """
    import time

    try:
        st = os.stat(path)
    except OSError:
        return False
    same = (path, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns) == file_key
    return same and time.time_ns() - st.st_mtime_ns > RACY_NS


def _write(cache: str, value: dict[str, Any]) -> None:
    """Best effort: an unwritable workspace only costs speed."""
    from keel.core.files import write_atomic

    try:
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        write_atomic(cache, marshal.dumps(value))
    except (OSError, ValueError, TypeError):
        pass
