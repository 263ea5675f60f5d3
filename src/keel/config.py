"""keel.toml: parsing and validating it against its one shape (``keel.core.schema``).

The sections, fields, defaults and bounds are declared once, as the frozen classes of
``keel.core.schema`` that the hook path reads without pydantic. This module builds a pydantic
validator from each of them (``extra="forbid"``, so a misspelt key is an error, not a silent
default) and turns its first error into a ``ConfigError`` naming the file, the line and the
key. The section classes are re-exported here: ``keel.config.KeelConfig`` is the public name.
"""

from __future__ import annotations

import functools
import re
import stat
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, get_args, get_origin, get_type_hints

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, create_model

from keel.core import schema
from keel.core.errors import ConfigError
from keel.core.root import CONFIG_NAME
from keel.core.schema import (
    AgentConfig,
    Constraint,
    ExportConfig,
    GatesConfig,
    JournalConfig,
    JudgeCategories,
    JudgeConfig,
    JudgeWhen,
    KeelConfig,
    LimitsConfig,
    ModelConfig,
    MonitorConfig,
    PolicyConfig,
    ProbesConfig,
    SandboxConfig,
    ScopeConfig,
    Section,
)

__all__ = [
    "PRESETS",
    "AgentConfig",
    "Constraint",
    "ExportConfig",
    "GatesConfig",
    "JournalConfig",
    "JudgeCategories",
    "JudgeConfig",
    "JudgeWhen",
    "KeelConfig",
    "LimitsConfig",
    "ModelConfig",
    "MonitorConfig",
    "PolicyConfig",
    "PresetName",
    "ProbesConfig",
    "SandboxConfig",
    "ScopeConfig",
    "config_for",
    "config_present",
    "load_config",
    "parse_config",
    "validate",
]

S = TypeVar("S", bound=Section)
PresetName = Literal["strict", "developer", "readonly"]
PRESETS: tuple[PresetName, ...] = get_args(PresetName)
"""The preset names (the same as ``keel.core.presets.PRESETS``'s keys: a test checks it)."""


def validate(cls: type[S], data: object) -> S:
    """Section ``cls`` from outside data (a dict as TOML or JSON gives it), checked.

    Raises:
        ConfigError: the first invalid value or unknown key (``config.schema``, its key named).
    """
    try:
        return cls.trusted(validate_data(cls, data))
    except ValidationError as exc:
        message, key = _first_error(exc)
        raise ConfigError(message, key=key, code="config.schema") from exc


def validate_data(cls: type[Section], data: object) -> dict[str, Any]:
    """Like ``validated`` but raising pydantic's ``ValidationError`` (to be located in a file)."""
    return _validator(cls).model_validate(_plain(data)).model_dump(mode="json")


def _plain(value: Any) -> Any:
    if isinstance(value, Section):
        return value.to_dict()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


@functools.cache
def _validator(cls: type[Section]) -> type[BaseModel]:
    """The pydantic model of section ``cls``: the same fields, types, defaults and bounds."""
    names = {"Literal": Literal, "PresetName": PresetName}
    hints = get_type_hints(cls, localns=names)
    fields: dict[str, Any] = {}
    for name in cls.field_names():
        declared = cls.setting_of(name)
        annotation = _model_type(hints[name])
        if declared.check is not None:
            check = functools.partial(_run_check, declared.check, name)
            annotation = Annotated[annotation, AfterValidator(check)]
        fields[name] = (annotation, _field(declared, hints[name]))
    config = ConfigDict(extra="forbid", frozen=True)
    return create_model(cls.__name__, __config__=config, **fields)


def _run_check(check: Any, field: str, value: Any) -> Any:
    return check(value, field)


def _model_type(annotation: Any) -> Any:
    """A section class becomes its validator, ``list[Section]`` a list of validators."""
    if isinstance(annotation, type) and issubclass(annotation, Section):
        return _validator(annotation)
    if get_origin(annotation) is list:
        (item,) = get_args(annotation)
        return list[_model_type(item)]
    return annotation


def _field(declared: schema.Setting, annotation: Any) -> Any:
    bounds = {
        key: value
        for key in ("ge", "gt", "le", "pattern")
        if (value := getattr(declared, key)) is not None
    }
    factory = declared.default_factory
    if isinstance(factory, type) and issubclass(factory, Section):
        factory = _validator(factory)
    if factory is not None:
        return Field(default_factory=factory, **bounds)
    if declared.required:
        return Field(**bounds)
    return Field(default=declared.default, **bounds)


def _first_error(exc: ValidationError) -> tuple[str, str]:
    first = exc.errors()[0]
    key = ".".join(str(p) for p in first["loc"])
    message = first["msg"]
    if first["type"] == "extra_forbidden":
        message = f"unknown key {key!r}"
    elif first["type"] == "value_error" and "error" in (ctx := first.get("ctx", {})):
        message = f"{key}: {ctx['error']}"
    else:
        message = f"{key}: {message}"
    more = exc.error_count() - 1
    if more:
        message += f" (and {more} more error{'s' if more > 1 else ''})"
    return message, key


def parse_config(text: str, file: str = CONFIG_NAME) -> KeelConfig:
    """Parse and validate keel.toml text; a ``ConfigError`` names file, line and key.

    A file that sets nothing is an error (``config.empty``), not the defaults: an emptied
    keel.toml is most often a truncated save of a stricter one.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = _toml_error_line(str(exc))
        raise ConfigError(
            f"not valid TOML: {exc}", file=file, line=line, code="config.toml"
        ) from exc
    if not data:
        raise ConfigError(
            "sets nothing (empty, or only comments): a truncated save would silently widen the "
            "policy to the developer defaults, so keel refuses it; restore the file, write "
            '[policy] preset = "developer" to mean the defaults, or delete it',
            file=file,
            code="config.empty",
        )
    try:
        return KeelConfig.trusted(validate_data(KeelConfig, data))
    except ValidationError as exc:
        message, key = _first_error(exc)
        loc = tuple(exc.errors()[0]["loc"])
        raise ConfigError(
            message, file=file, line=_locate(text, loc), key=key, code="config.schema"
        ) from exc


def load_config(path: Path) -> KeelConfig:
    """Read and validate a keel.toml file."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"cannot read: {exc.strerror}", file=str(path), code="config.read"
        ) from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError("not UTF-8", file=str(path), line=line, code="config.encoding") from exc
    return parse_config(text, str(path))


def config_for(root: Path, preset: PresetName | None = None) -> KeelConfig:
    """The config of a workspace: its keel.toml if present, else the embedded defaults."""
    path = root / CONFIG_NAME
    if config_present(path):
        config = load_config(path)
        if preset is not None:
            config = config.replace(policy=config.policy.replace(preset=preset))
        return config
    return KeelConfig.for_preset(preset or "developer")


def config_present(path: Path) -> bool:
    """True if the workspace's keel.toml exists and is a regular file; False if there is none.

    Raises:
        ConfigError: something is there that cannot be a config (a directory, a FIFO, a
            symlink loop, no permission): an error, never a silent fall back to the defaults.
    """
    try:
        st = path.stat()
    except FileNotFoundError:
        if path.is_symlink():  # the config it points to is gone: not the same as no config
            raise ConfigError(
                "a symlink to a missing file", file=str(path), code="config.read"
            ) from None
        return False
    except OSError as exc:
        raise ConfigError(
            f"cannot read: {exc.strerror}", file=str(path), code="config.read"
        ) from exc
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError("not a regular file", file=str(path), code="config.read")
    return True


def _toml_error_line(message: str) -> int | None:
    match = re.search(r"line (\d+)", message)
    return int(match.group(1)) if match else None


_HEADER = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\-\"' ]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_\-\"']+)\s*=")


def _locate(text: str, loc: tuple[Any, ...]) -> int | None:
    """The line of the key at ``loc`` (e.g. ``("policy", "preset")``), best effort."""
    table: list[str] = []
    array_index: dict[str, int] = {}
    best: int | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header:
            name = header.group(2).strip().strip("\"'")
            if header.group(1) == "[[":
                array_index[name] = array_index.get(name, -1) + 1
                table = [name, str(array_index[name])]
            else:
                table = name.split(".")
            if _matches(table, loc):
                best = number
            continue
        key = _KEY.match(line)
        if key:
            path = [*table, key.group(1).strip("\"'")]
            if _matches(path, loc):
                return number
            if (
                best is None
                and _matches(path, loc[: len(path)])
                and len(path) == len(loc[: len(path)])
            ):
                best = number
    return best


def _matches(path: list[str], loc: tuple[Any, ...]) -> bool:
    return [str(p) for p in loc[: len(path)]] == path and len(path) <= len(loc)
