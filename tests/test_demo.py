"""`keel demo` runs every section end to end (each section raises if keel misbehaves)."""

from __future__ import annotations

import json
import re
from typing import Any

from _support import keel
from keel.demo import SECTIONS
from keel.plan.examples import ExampleName, load_example


def test_core_and_hooks_sections_run() -> None:
    out = keel("demo", "--section", "core", "--section", "hooks")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "2 section(s) ran as expected" in out.stdout
    assert "risk.git_force_push" in out.stdout and "stop.active" in out.stdout
    assert "hash chain intact" in out.stdout


def test_every_section_is_a_module_with_run() -> None:
    import importlib

    names = [name for name, _ in SECTIONS]
    assert names[0] == "core" and len(set(names)) == len(names)
    for name in names:
        assert callable(importlib.import_module(f"keel.demo.{name}").run)


def test_the_containment_section_shows_every_promise_held() -> None:
    out = keel("demo", "--section", "contain")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "1 section(s) ran as expected" in out.stdout
    assert out.stdout.count(" yes ") == 6 and " NO " not in out.stdout


CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")


def test_the_english_demo_is_english_throughout() -> None:
    """Every section, the seed's plans included, prints no Chinese text (as `make demo` runs)."""
    out = keel("demo", timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert f"{len(SECTIONS)} section(s) ran as expected" in out.stdout
    assert not CJK.findall(out.stdout + out.stderr), CJK.findall(out.stdout + out.stderr)
    assert "Database host: db.internal" in out.stdout
    assert "report.txt now holds: revenue total: 2841.5" in out.stdout


def _steps(steps: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Each step's id, type, function and output, branches included, in order."""
    found: list[tuple[Any, ...]] = []
    for step in steps:
        function = (step.get("action") or {}).get("function")
        found.append((step["id"], step["type"], function, step.get("output_to")))
        for branch in ("true_branch", "false_branch"):
            found.extend(_steps(step.get(branch) or []))
    return found


def test_the_seed_plans_stay_available_in_chinese() -> None:
    """The seed's plans ship unchanged; the demo's English ones are the same, step for step."""
    pairs: tuple[tuple[ExampleName, ExampleName], ...] = (
        ("config_plan", "config_plan_en"),
        ("csv_report_plan", "csv_report_plan_en"),
    )
    for name, english_name in pairs:
        seed = load_example(name)
        english = load_example(english_name)
        assert CJK.search(json.dumps(seed, ensure_ascii=False))
        assert not CJK.search(json.dumps(english, ensure_ascii=False))
        assert _steps(seed["steps"]) == _steps(english["steps"])
        assert len(_steps(seed["steps"])) > len(seed["steps"])  # the branches were walked


def test_the_draft_section_validates_after_one_round_of_feedback_and_runs() -> None:
    out = keel("demo", "--section", "draft", env={"COLUMNS": "200"})  # one line per message
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "1 section(s) ran as expected" in out.stdout
    assert "draft 1 (as content): 2 problem(s), sent back:" in out.stdout
    assert "plan.unknown_function" in out.stdout and "draft 2 (as tool_call): valid" in out.stdout
    assert "[say] output.result: database host: db.internal" in out.stdout
    assert "plan_draft.feedback@" in out.stdout and "2 model call(s)" in out.stdout
