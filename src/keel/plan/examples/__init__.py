"""The seed article's two plans, in its own JSON format: the config plan and the CSV report."""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any, Literal

ExampleName = Literal["config_plan", "csv_report_plan"]
EXAMPLES: tuple[ExampleName, ...] = ("config_plan", "csv_report_plan")


def example_text(name: ExampleName) -> str:
    """The JSON text of an example plan."""
    return files(__name__).joinpath(f"{name}.json").read_text(encoding="utf-8")


def load_example(name: ExampleName) -> dict[str, Any]:
    """An example plan, parsed."""
    return json.loads(example_text(name))
