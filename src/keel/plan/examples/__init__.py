"""The seed article's two plans, in its own JSON format: the config plan and the CSV report.

``config_plan`` and ``csv_report_plan`` are the seed's plans exactly as published, with their
Chinese text; ``config_plan_en`` and ``csv_report_plan_en`` are the same plans, step for step,
with the text in English (what ``keel demo`` runs).
"""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any, Literal

ExampleName = Literal["config_plan", "csv_report_plan", "config_plan_en", "csv_report_plan_en"]
EXAMPLES: tuple[ExampleName, ...] = (
    "config_plan",
    "csv_report_plan",
    "config_plan_en",
    "csv_report_plan_en",
)


def example_text(name: ExampleName) -> str:
    """The JSON text of an example plan."""
    return files(__name__).joinpath(f"{name}.json").read_text(encoding="utf-8")


def load_example(name: ExampleName) -> dict[str, Any]:
    """An example plan, parsed."""
    return json.loads(example_text(name))
