"""The typed settings protocols list exactly the fields of keel.toml's pydantic schema."""

from __future__ import annotations

import ast
from pathlib import Path

from pydantic import BaseModel

from keel import config as schema
from keel.core.configview import SettingsView, config_view
from keel.core.settings import SECTIONS

SETTINGS = Path(__file__).resolve().parents[2] / "src" / "keel" / "core" / "settings.py"


def _protocol_fields() -> dict[str, set[str]]:
    """Each protocol class in settings.py and the properties it declares."""
    tree = ast.parse(SETTINGS.read_text())
    found: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            found[node.name] = {f.name for f in node.body if isinstance(f, ast.FunctionDef)}
    return found


def _model_for(section: str) -> type[BaseModel]:
    annotation = schema.KeelConfig.model_fields[section].annotation
    args = getattr(annotation, "__args__", None)
    return args[0] if args else annotation  # list[Constraint] -> Constraint


def test_every_section_protocol_has_exactly_the_schema_fields() -> None:
    protocols = _protocol_fields()
    assert protocols["Settings"] == set(schema.KeelConfig.model_fields) == set(SECTIONS)
    for section, protocol in SECTIONS.items():
        assert protocols[protocol] == set(_model_for(section).model_fields), section


def test_the_view_serves_every_protocol_field(workdir: Path) -> None:
    view = config_view(workdir)
    assert isinstance(view, SettingsView)
    for section, protocol in SECTIONS.items():
        value = getattr(view, section)
        items = value if isinstance(value, list) else [value]
        for item in items:
            for name in _protocol_fields()[protocol]:
                getattr(item, name)
