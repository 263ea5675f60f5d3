"""keel.toml has one shape: the classes of keel.core.schema, which the validator is built from."""

from __future__ import annotations

import ast
import pickle
from pathlib import Path
from typing import Any, get_args

import pytest

from keel import config
from keel.core import presets, schema
from keel.core.errors import ConfigError
from keel.core.schema import KeelConfig, Section

SRC = Path(__file__).resolve().parents[2] / "src" / "keel"
SECTIONS: list[type[Section]] = [
    cls for cls in vars(schema).values() if isinstance(cls, type) and issubclass(cls, Section)
]
SECTIONS.remove(Section)


def test_no_second_declaration_of_the_fields_anywhere() -> None:
    """No pydantic model, protocol or view class spells out keel.toml's fields again."""
    fields = {f for cls in SECTIONS for f in cls.field_names()}
    for path in SRC.rglob("*.py"):
        if path == SRC / "core" / "schema.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            declared = {
                n.target.id
                for n in node.body
                if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
            } | {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
            shared = declared & fields
            # a class sharing most of a section's fields is a second copy of it (a preset's rule
            # table, PresetData, shares two thirds of [policy]: another fact, kept)
            for cls in SECTIONS:
                own = set(cls.field_names())
                overlap = len(own & shared) / len(own)
                assert overlap < 0.8 or len(own) < 3, f"{path}:{node.name} copies {cls.__name__}"


@pytest.mark.parametrize("cls", SECTIONS, ids=lambda c: c.__name__)
def test_the_validator_has_the_same_fields_and_defaults(cls: type[Section]) -> None:
    validator = config._validator(cls)  # pyright: ignore[reportPrivateUsage]
    assert list(validator.model_fields) == list(cls.field_names())
    if any(cls.setting_of(f).required for f in cls.field_names()):
        with pytest.raises(ConfigError, match="Field required"):
            config.validate(cls, {})
        return
    # the defaults are valid by construction: validating nothing gives exactly them
    assert config.validate(cls, {}) == cls()
    assert config.validate(cls, {}).to_dict() == cls().to_dict()


def _bounded() -> list[tuple[type[Section], str, str, float]]:
    found = []
    for cls in SECTIONS:
        for name in cls.field_names():
            declared = cls.setting_of(name)
            for bound in ("ge", "gt", "le"):
                value = getattr(declared, bound)
                if value is not None:
                    found.append((cls, name, bound, value))
    return found


@pytest.mark.parametrize(
    ("cls", "name", "bound", "value"),
    _bounded(),
    ids=lambda v: v.__name__ if isinstance(v, type) else str(v),
)
def test_every_bound_is_enforced_at_its_edge(
    cls: type[Section], name: str, bound: str, value: float
) -> None:
    inside, outside = {
        "ge": (value, value - 1),
        "gt": (value + 0.5, value),
        "le": (value, value + 1),
    }[bound]
    extra: dict[str, Any] = {"text": "t"} if cls is schema.Constraint else {}
    assert getattr(config.validate(cls, {**extra, name: inside}), name) == inside
    with pytest.raises(ConfigError) as err:
        config.validate(cls, {**extra, name: outside})
    assert err.value.key == name and err.value.code == "config.schema"


def test_errors_in_a_file_name_the_file_the_line_and_the_key() -> None:
    text = '[policy]\npreset = "strict"\n\n[sandbox]\nmemory_mb = 1\n'
    with pytest.raises(ConfigError) as err:
        config.parse_config(text, "/w/keel.toml")
    assert (err.value.file, err.value.line, err.value.key) == (
        "/w/keel.toml",
        5,
        "sandbox.memory_mb",
    )
    with pytest.raises(ConfigError) as err:
        config.parse_config(
            '[[constraints]]\ntext = "a"\n\n[[constraints]]\ntext = "b"\nnope = 1\n'
        )
    assert (err.value.line, err.value.key) == (6, "constraints.1.nope")
    assert "unknown key" in str(err.value)


def test_the_checks_run_on_nested_sections_and_lists() -> None:
    parsed = config.parse_config(
        '[policy]\nallow = ["Bash(npm test:*)"]\n[[constraints]]\ntext = "t"\n'
        'forbid = ["Bash(git push:*)"]\n'
    )
    assert parsed.policy.allow == ["npm test"]
    assert parsed.constraints[0].forbid == ["git push"]
    with pytest.raises(ConfigError, match="unbalanced brackets") as err:
        config.parse_config('[[constraints]]\ntext = "t"\nprotect = ["a[b"]\n')
    assert err.value.key == "constraints.0.protect"
    with pytest.raises(ConfigError, match="neither a command pattern"):
        config.parse_config('[policy]\ndeny = ["Bash(npm"]\n')


def test_preset_names_are_the_preset_table() -> None:
    assert set(config.PRESETS) == set(presets.PRESETS)
    assert set(get_args(config.PresetName)) == set(presets.PRESETS)


def test_values_are_frozen_comparable_and_picklable() -> None:
    parsed = config.parse_config('[scope]\ninclude = ["src/**"]\n')
    assert parsed == pickle.loads(pickle.dumps(parsed)) and hash(parsed) == hash(
        KeelConfig.trusted(parsed.to_dict())
    )
    with pytest.raises(AttributeError):
        parsed.scope.include = []  # pyright: ignore[reportAttributeAccessIssue]
    with pytest.raises(TypeError):
        parsed.scope.include.append("x")
    changed = parsed.replace(scope=parsed.scope.replace(include=["lib/**"]))
    assert changed.scope.include == ["lib/**"] and parsed.scope.include == ["src/**"]
    with pytest.raises(TypeError, match="no field 'nope'"):
        parsed.replace(nope=1)
    with pytest.raises(TypeError, match="needs 'text'"):
        schema.Constraint()  # pyright: ignore[reportCallIssue]


def test_trusted_data_must_have_exactly_the_fields() -> None:
    data = KeelConfig().to_dict()
    del data["limits"]["max_steps"]
    with pytest.raises(KeyError):
        KeelConfig.trusted(data)
    data = KeelConfig().to_dict()
    data["limits"]["bogus"] = 1
    with pytest.raises(KeyError, match="bogus"):
        KeelConfig.trusted(data)


def test_the_schema_imports_no_pydantic() -> None:
    tree = ast.parse((SRC / "core" / "schema.py").read_text(encoding="utf-8"))
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        (node.module or "").split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
    }
    assert imported <= {"__future__", "collections", "typing", "keel"}
