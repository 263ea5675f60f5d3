"""Helpers for the plan tests: the sandboxed runner, the real policy, sample workspaces."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest

from keel.config import KeelConfig, SandboxConfig
from keel.plan import PlanReport, SandboxedRunner, run_plan
from keel.plan.examples import load_example


def skip_or_fail(reason: str) -> None:
    """Skip locally; fail when KEEL_REQUIRE_ALL=1."""
    if os.environ.get("KEEL_REQUIRE_ALL") == "1":
        pytest.fail(f"required in CI: {reason}")
    pytest.skip(reason)


def sandbox() -> Any:
    """The best real sandbox here, or a skip (a failure in CI)."""
    from keel.core.errors import SandboxError
    from keel.sandbox import get_sandbox

    try:
        return get_sandbox(SandboxConfig())
    except SandboxError as exc:
        skip_or_fail(f"no sandbox available: {exc.message}")
        raise


def policy(root: Path) -> Any:
    from keel.policy import Policy

    return Policy.from_config(KeelConfig(), root)


def run(plan: dict[str, Any], root: Path, **kwargs: Any) -> PlanReport:
    """Run a plan through the real sandbox with keel's real policy."""
    box = kwargs.pop("box", None) or sandbox()
    kwargs.setdefault("policy", policy(root))
    return run_plan(plan, workspace=root, runner=SandboxedRunner(box), exec_sandbox=box, **kwargs)


def example(name: str) -> dict[str, Any]:
    return copy.deepcopy(load_example(name))  # type: ignore[arg-type]


CSV_TEXT = "日期,产品,销量,营收\n2024-01-01,A,3,100\n2024-01-02,B,5,250.5\n2024-01-03,C,1,49.5\n"


def csv_repo(root: Path, text: str = CSV_TEXT) -> Path:
    (root / "data").mkdir(exist_ok=True)
    (root / "data" / "input.csv").write_text(text, encoding="utf-8")
    return root


def by_id(report: PlanReport) -> dict[str, Any]:
    return {r.step_id: r for r in report.records}
