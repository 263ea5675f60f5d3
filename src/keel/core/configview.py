"""keel.toml on the hook path: the one config loader, and its one cache.

Validating keel.toml means tomllib and pydantic, about 100 ms of imports and model building,
on every hook process. ``config_view(root)`` pays that once per change of the file: when the
file validates, its ``model_dump()`` is cached with ``marshal`` (a built-in module: reading
it back costs no import) in ``<root>/.keel/cache/``, keyed by the file's path, inode, size
and mtime/ctime in nanoseconds, keel's version and the schema module (``keel/config.py``: its
size and mtime, so a new field invalidates every cache). A later process reads the dump back
into a :class:`ConfigView`. Only a file that validated is ever cached: an invalid keel.toml
raises ``ConfigError`` on every call, so the hook keeps failing closed. Without a keel.toml
the embedded defaults (``KeelConfig().model_dump()``) are cached the same way. The policy,
the guard, the monitor and ``keel policy check`` all read the config through here.

A :class:`ConfigView` has the attribute names of ``KeelConfig`` and its sections, read-only
and recursive (sections are views, lists are :class:`FrozenList`, which compares equal to a
list), but none of pydantic's methods (``model_dump``, ``model_copy``...). Both it and
``KeelConfig`` satisfy the typed protocol ``keel.core.settings.Settings``, which is what the
guard, the policy and the monitor are written against; code that needs pydantic's methods
calls ``keel.config.config_for`` instead.
"""

from __future__ import annotations

import marshal
import os
from stat import S_ISREG

from keel.core.root import CONFIG_NAME, state_path
from keel.core.settings import (
    AgentSettings,
    ConstraintSettings,
    GatesSettings,
    LimitsSettings,
    ModelSettings,
    MonitorSettings,
    PolicySettings,
    ProbesSettings,
    SandboxSettings,
    ScopeSettings,
    Settings,
)

TYPE_CHECKING = False  # typing costs 3 ms to import on the hook path
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any, NoReturn


CACHE_VERSION = 2
RACY_NS = 100_000_000
"""A keel.toml changed less than this long ago (ns) is validated but not cached yet."""


class FrozenList(list):
    """A list that refuses changes; equal to a ``list`` with the same items."""

    __slots__ = ()

    def _frozen(self, *_: object, **__: object) -> NoReturn:
        raise TypeError("a config list is read-only")

    append = extend = insert = remove = pop = clear = sort = reverse = _frozen  # pyright: ignore[reportAssignmentType]
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _frozen

    def __hash__(self) -> int:  # pyright: ignore[reportIncompatibleVariableOverride]
        """Hashable like a tuple, since it cannot change."""
        return hash(tuple(self))

    def __reduce__(self) -> tuple[Any, ...]:
        """Copy and pickle without the refused mutators."""
        return (FrozenList, (list(self),))


class ConfigView:
    """A read-only attribute view of a config section (a dict from ``model_dump()``)."""

    __slots__ = ("_data",)
    _data: dict[str, Any]

    def __init__(self, data: dict[str, Any]) -> None:
        """Wrap ``data``; nested dicts and lists become views and frozen lists."""
        object.__setattr__(self, "_data", {k: _freeze(v) for k, v in data.items()})

    def __getattr__(self, name: str) -> Any:
        """The value of field ``name``."""
        try:
            return self._data[name]
        except KeyError:
            raise AttributeError(f"config has no field {name!r}") from None

    def __setattr__(self, name: str, value: object) -> None:
        """Refuse: a config is read-only."""
        raise AttributeError(f"config is read-only (cannot set {name!r})")

    def __delattr__(self, name: str) -> None:
        """Refuse: a config is read-only."""
        raise AttributeError(f"config is read-only (cannot delete {name!r})")

    def __eq__(self, other: object) -> bool:
        """Equal to another view with the same data."""
        return isinstance(other, ConfigView) and self._data == other._data

    def __hash__(self) -> int:
        """Views are immutable, so hashable by their data."""
        return hash(tuple(sorted(self._data)))

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        """``(field, value)`` pairs, like a pydantic model."""
        return iter(self._data.items())

    def __repr__(self) -> str:
        """``ConfigView(field=value, ...)``."""
        inner = ", ".join(f"{k}={v!r}" for k, v in self._data.items())
        return f"ConfigView({inner})"

    def __reduce__(self) -> tuple[Any, ...]:
        """Copy and pickle through the plain data."""
        return (type(self), (self.to_dict(),))

    def to_dict(self) -> dict[str, Any]:
        """A plain, mutable copy of the data (the ``model_dump()`` it came from)."""
        return _thaw(self)


class PolicyView(ConfigView, PolicySettings):
    """``[policy]``, read-only."""

    __slots__ = ()


class ScopeView(ConfigView, ScopeSettings):
    """``[scope]``, read-only."""

    __slots__ = ()


class ConstraintView(ConfigView, ConstraintSettings):
    """One ``[[constraints]]`` entry, read-only."""

    __slots__ = ()


class LimitsView(ConfigView, LimitsSettings):
    """``[limits]``, read-only."""

    __slots__ = ()


class GatesView(ConfigView, GatesSettings):
    """``[gates]``, read-only."""

    __slots__ = ()


class MonitorView(ConfigView, MonitorSettings):
    """``[monitor]``, read-only."""

    __slots__ = ()


class ProbesView(ConfigView, ProbesSettings):
    """``[probes]``, read-only."""

    __slots__ = ()


class SandboxView(ConfigView, SandboxSettings):
    """``[sandbox]``, read-only."""

    __slots__ = ()


class ModelView(ConfigView, ModelSettings):
    """``[model]``, read-only."""

    __slots__ = ()


class AgentView(ConfigView, AgentSettings):
    """``[agent]``, read-only."""

    __slots__ = ()


_SECTION_VIEWS: dict[str, type[ConfigView]] = {
    "policy": PolicyView,
    "scope": ScopeView,
    "constraints": ConstraintView,
    "limits": LimitsView,
    "gates": GatesView,
    "monitor": MonitorView,
    "probes": ProbesView,
    "sandbox": SandboxView,
    "model": ModelView,
    "agent": AgentView,
}


class SettingsView(ConfigView, Settings):
    """The whole config, read-only: each section is its typed view."""

    __slots__ = ()

    def __init__(self, data: dict[str, Any]) -> None:
        """Wrap a ``KeelConfig.model_dump()``; sections become their views."""
        object.__setattr__(self, "_data", {k: _section(k, v) for k, v in data.items()})


def _section(name: str, value: Any) -> Any:
    view = _SECTION_VIEWS.get(name)
    if view is None:
        return _freeze(value)
    if isinstance(value, list):
        return FrozenList(view(v) for v in value)
    return view(value)


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return ConfigView(value)
    if isinstance(value, list):
        return FrozenList(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, ConfigView):
        return {k: _thaw(v) for k, v in value._data.items()}
    if isinstance(value, list):
        return [_thaw(v) for v in value]
    return value


def config_view(
    root: os.PathLike[str] | str,
    preset: str | None = None,
    *,
    config_file: os.PathLike[str] | str | None = None,
) -> Settings:
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
    data = config_data(os.fspath(root), None if config_file is None else os.fspath(config_file))
    if preset is not None:
        data = {**data, "policy": {**data["policy"], "preset": preset}}
    return SettingsView(data)


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


def config_data(root: str, config_file: str | None = None) -> dict[str, Any]:
    """The ``model_dump()`` of ``root``'s validated keel.toml (or of the defaults), cached.

    Raises:
        ConfigError: keel.toml (or ``config_file``) is unreadable or invalid, or
            ``config_file`` does not exist.
    """
    path = os.path.abspath(config_file or os.path.join(root, CONFIG_NAME))
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if config_file is None and not os.path.islink(path):
            return _cached(root, "config-defaults.marshal", (), None)
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
    return _cached(root, f"config-{name}.marshal", key, path)


def cache_name(data: bytes) -> str:
    """Eight hex digits naming a cache entry made from ``data`` (not a secure digest).

    ``data`` read as one number, modulo the largest 32-bit prime: computed in C without
    importing ``zlib`` (~0.3 ms on the hook and ``keel exec`` paths). Each cache keeps its
    full key inside, so two keys with one name only evict each other.
    """
    return f"{int.from_bytes(data, 'little') % 4294967291:08x}"


def _schema_key() -> list[Any]:
    """What the dump's shape depends on: keel's version and the schema module's file."""
    from keel import __version__

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        st = os.stat(os.path.join(here, "config.py"))
        schema: list[Any] = [st.st_size, st.st_mtime_ns]
    except OSError:
        schema = []
    return [CACHE_VERSION, __version__, *schema]


def _cached(root: str, name: str, file_key: tuple[Any, ...], path: str | None) -> dict[str, Any]:
    key = [*_schema_key(), *file_key]
    cache = state_path(root, "cache", name)
    try:
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
    """The dump of the validated file (pydantic is imported only here)."""
    from pathlib import Path

    from keel.config import KeelConfig, load_config

    config = KeelConfig() if path is None else load_config(Path(path))
    return config.model_dump(mode="json")


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
