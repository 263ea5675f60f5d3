"""Arms: the keel settings an evaluation compares, ``NAME=KEY=VALUE[,KEY=VALUE...]``.

Each key sets one thing of keel.toml (applied over the task repository's own keel.toml) or
the run's model; nothing else can be set, so an arm reads as what it changes:

=================  ===============================  ====================================
key                values                           sets
=================  ===============================  ====================================
``guidance``       ``on`` | ``off``                 ``[monitor] enabled``
``judge``          ``off`` | ``on`` | a model spec  ``[judge] model`` (``on``: the run's)
``require_plan``   ``true`` | ``false``             ``[agent] require_plan``
``preset``         ``developer|strict|readonly``    ``[policy] preset``
``max_steps``      a whole number, 1 or more        ``[agent] max_steps``
``model``          a model spec                     the run's model instead of ``--model``
=================  ===============================  ====================================

``--arm keel`` (no settings) is keel as the repository configures it. Without ``--arm`` an
evaluation has one arm, ``default``. A malformed arm is a ``UsageError`` (``eval.arm``) that
names the arm, the key and what it accepts.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from keel.core.errors import ConfigError, UsageError, UserError

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$"
DEFAULT_ARM = "default"
TRUE = ("on", "true", "yes", "1")
FALSE = ("off", "false", "no", "0")
PRESETS = ("developer", "strict", "readonly")


@dataclass(frozen=True, slots=True)
class ArmKey:
    """One key an arm may set."""

    name: str
    accepts: str
    sets: str


ARM_KEYS: tuple[ArmKey, ...] = (
    ArmKey("guidance", "on | off", "[monitor] enabled"),
    ArmKey("judge", "off | on | a model spec", "[judge] model (on: the run's model)"),
    ArmKey("require_plan", "true | false", "[agent] require_plan"),
    ArmKey("preset", " | ".join(PRESETS), "[policy] preset"),
    ArmKey("max_steps", "a whole number >= 1", "[agent] max_steps"),
    ArmKey("model", "a model spec (openai:M, anthropic:M, local, script:FILE|DIR)", "the model"),
)
KEY_NAMES = tuple(k.name for k in ARM_KEYS)


@dataclass(frozen=True, slots=True)
class Arm:
    """One arm: a name, its settings as given, and what they change."""

    name: str
    settings: tuple[tuple[str, str], ...]
    model: str | None
    """The run's model, when the arm names one (else ``--model``)."""
    judge: str | None
    """``[judge] model``: a spec, ``on`` (the run's model) or None (as configured); ``off``
    is an empty override in ``overrides``."""
    overrides: dict[str, dict[str, Any]]
    """keel.toml sections and the values this arm sets in them."""

    @property
    def text(self) -> str:
        """The settings as ``KEY=VALUE,...`` (empty: keel as configured)."""
        return ",".join(f"{k}={v}" for k, v in self.settings)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"name": self.name, "settings": dict(self.settings), "model": self.model}


def arm_error(message: str, arm: str, key: str | None = None) -> UsageError:
    """An ``eval.arm`` usage error naming the arm (and the key)."""
    context: dict[str, Any] = {"arm": arm}
    if key is not None:
        context["key"] = key
    return UsageError(message, code="eval.arm", **context)


def parse_arms(texts: list[str] | tuple[str, ...]) -> tuple[Arm, ...]:
    """The arms of ``--arm`` options, in order; one arm ``default`` when there are none.

    Raises:
        UsageError: an arm is malformed or two share a name (``eval.arm``).
    """
    arms = tuple(parse_arm(t) for t in texts) or (Arm(DEFAULT_ARM, (), None, None, {}),)
    seen: set[str] = set()
    for arm in arms:
        if arm.name in seen:
            raise arm_error(f"arm {arm.name!r} is given twice: arm names must differ", arm.name)
        seen.add(arm.name)
    return arms


def parse_arm(text: str) -> Arm:
    """One ``NAME=KEY=VALUE[,KEY=VALUE...]`` (or a bare ``NAME``: keel as configured).

    Raises:
        UsageError: ``eval.arm``, naming the arm and the key.
    """
    name, _, rest = text.partition("=")
    name = name.strip()
    if not re.match(NAME_PATTERN, name):
        raise arm_error(
            f"--arm {text!r}: an arm is NAME=KEY=VALUE,...; NAME is letters, digits, '_', '-' "
            "(at most 40)",
            name,
        )
    settings: list[tuple[str, str]] = []
    overrides: dict[str, dict[str, Any]] = {}
    model: str | None = None
    judge: str | None = None
    for item in (p.strip() for p in rest.split(",")):
        if not item:
            continue
        key, eq, value = (s.strip() for s in item.partition("="))
        if key in (k for k, _ in settings):
            raise arm_error(f"arm {name!r}: {key!r} is set twice", name, key)
        if key not in KEY_NAMES:
            raise arm_error(
                f"arm {name!r}: unknown key {key!r}; an arm sets {', '.join(KEY_NAMES)}",
                name,
                key,
            )
        if not eq or not value:
            raise arm_error(f"arm {name!r}: {key} needs a value ({_accepts(key)})", name, key)
        settings.append((key, value))
        match key:
            case "model":
                model = _spec(name, key, value)
            case "judge":
                judge = _judge(name, value, overrides)
            case _:
                section, field, parsed = _setting(name, key, value)
                overrides.setdefault(section, {})[field] = parsed
    return Arm(name, tuple(settings), model, judge, overrides)


def _accepts(key: str) -> str:
    return next(k.accepts for k in ARM_KEYS if k.name == key)


def _bad(arm: str, key: str, value: str) -> UsageError:
    return arm_error(f"arm {arm!r}: {key}={value!r}: expected {_accepts(key)}", arm, key)


def _flag(arm: str, key: str, value: str) -> bool:
    if value.lower() in TRUE:
        return True
    if value.lower() in FALSE:
        return False
    raise _bad(arm, key, value)


def _setting(arm: str, key: str, value: str) -> tuple[str, str, Any]:
    match key:
        case "guidance":
            return "monitor", "enabled", _flag(arm, key, value)
        case "require_plan":
            return "agent", "require_plan", _flag(arm, key, value)
        case "preset":
            if value not in PRESETS:
                raise _bad(arm, key, value)
            return "policy", "preset", value
        case _:  # max_steps
            if not value.isdigit() or int(value) < 1:
                raise _bad(arm, key, value)
            return "agent", "max_steps", int(value)


def _judge(arm: str, value: str, overrides: dict[str, dict[str, Any]]) -> str | None:
    if value.lower() in FALSE:
        overrides.setdefault("judge", {})["model"] = None
        return None
    if value.lower() in TRUE:
        return "on"
    return _spec(arm, "judge", value)


def _spec(arm: str, key: str, value: str) -> str:
    from keel.models import parse_spec

    try:
        spec = parse_spec(value)
    except UsageError as exc:
        raise arm_error(f"arm {arm!r}: {key}={value!r}: {exc.message}", arm, key) from exc
    if spec.provider == "replay":
        raise arm_error(
            f"arm {arm!r}: {key}={value!r}: a replay model answers one recorded session; "
            "use keel eval --replay RESULTS to replay an evaluation",
            arm,
            key,
        )
    return value


# -- keel.toml ------------------------------------------------------------------------------------


def merged_config(base: dict[str, Any], overrides: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``base`` (a keel.toml as data) with each section's values replaced by ``overrides``.

    A value of None removes the key (``judge=off`` unsets ``[judge] model``).
    """
    out: dict[str, Any] = {k: (dict(v) if isinstance(v, dict) else v) for k, v in base.items()}
    for section, values in overrides.items():
        table = out.setdefault(section, {})
        for key, value in values.items():
            if value is None:
                table.pop(key, None)
            else:
                table[key] = value
        if not table:
            out.pop(section)
    return out


def keel_toml_text(data: dict[str, Any], *, task: str, arm: str) -> str:
    """``data`` as keel.toml text, validated as keel would read it ("" for no settings).

    Raises:
        UserError: the arm's settings over the task's keel.toml are not a valid keel.toml
            (``eval.config``, naming the task, the arm and the key).
    """
    if not data:
        return ""
    text = to_toml(data)
    from keel.config import parse_config

    try:
        parse_config(text)
    except ConfigError as exc:
        raise UserError(
            f"task {task!r}, arm {arm!r}: the keel.toml of the run is invalid: {exc.message}",
            code="eval.config",
            task=task,
            arm=arm,
            key=exc.context.get("key"),
        ) from exc
    return text


def to_toml(data: dict[str, Any]) -> str:
    """A TOML document for keel.toml-shaped data: tables, arrays of tables, plain values."""
    lines: list[str] = []
    _table(data, (), lines)
    return "\n".join(lines).strip() + "\n"


def _table(data: dict[str, Any], path: tuple[str, ...], lines: list[str]) -> None:
    plain = {k: v for k, v in data.items() if not _is_table(v) and not _is_table_array(v)}
    if path and (plain or not data):
        lines += ["", f"[{'.'.join(_key(p) for p in path)}]"]
    lines += [f"{_key(k)} = {_value(v)}" for k, v in plain.items()]
    for key, value in data.items():
        if _is_table(value):
            _table(value, (*path, key), lines)
        elif _is_table_array(value):
            for item in value:
                lines += ["", f"[[{'.'.join(_key(p) for p in (*path, key))}]]"]
                lines += [f"{_key(k)} = {_value(v)}" for k, v in item.items()]


def _is_table(value: Any) -> bool:
    return isinstance(value, dict)


def _is_table_array(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _key(key: str) -> str:
    return key if re.match(r"^[A-Za-z0-9_-]+$", key) else json.dumps(key, ensure_ascii=False)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no TOML form for {type(value).__name__}")
