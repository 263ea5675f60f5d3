"""The entry points the CLI and the demo use: read, validate and run a plan file."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from keel.core.errors import PlanError
from keel.core.schema import KeelConfig
from keel.plan._engine import ActionPolicy, EventSink, PlanEngine, Prompt
from keel.plan._report import PlanReport
from keel.plan._runners import ProbeRunner, SandboxedRunner
from keel.plan._validate import PlanLimits, ValidationResult, read_plan_text, validate_plan

MAX_PLAN_BYTES = 1_000_000


def limits_of(config: KeelConfig) -> PlanLimits:
    """The plan budgets of a config (``[limits] plan_max_steps``/``plan_max_depth``)."""
    return PlanLimits(config.limits.plan_max_steps, config.limits.plan_max_depth)


def read_plan_file(path: Path) -> Any:
    """The JSON of a plan file; ``PlanError`` ``plan.unreadable`` or ``plan.json`` otherwise."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_PLAN_BYTES + 1)
    except OSError as exc:
        raise PlanError(
            f"cannot read {str(path)!r}: {exc.strerror}", code="plan.unreadable"
        ) from exc
    if len(raw) > MAX_PLAN_BYTES:
        raise PlanError(
            f"{str(path)!r} is larger than {MAX_PLAN_BYTES} bytes", code="plan.unreadable"
        )
    return read_plan_text(raw)


def check_plan(data: Any, *, config: KeelConfig, workspace: Path | None) -> ValidationResult:
    """Validate a parsed plan with a config's limits and http allowlist."""
    return validate_plan(
        data,
        limits=limits_of(config),
        workspace=workspace,
        http_allow=config.probes.http_allow,
    )


def sandboxed_runner(config: KeelConfig, *, unsafe: bool = False) -> tuple[ProbeRunner, Any]:
    """A runner over the best sandbox here, and the sandbox; ``SandboxError`` if there is none."""
    from keel.sandbox import get_sandbox

    sandbox = get_sandbox(config.sandbox, unsafe=unsafe)
    return SandboxedRunner(sandbox), sandbox


def default_policy(config: KeelConfig, root: Path) -> ActionPolicy:
    """Keel's policy for ``root``."""
    from keel.policy import Policy

    return Policy.from_config(config, root)


def run_plan(
    data: Any,
    *,
    workspace: Path,
    config: KeelConfig | None = None,
    runner: ProbeRunner | None = None,
    policy: ActionPolicy | None = None,
    journal: EventSink | None = None,
    exec_sandbox: Any = None,
    answers: Mapping[str, Any] | None = None,
    prompt: Prompt | None = None,
    unsafe: bool = False,
    session_id: str | None = None,
    checkpoints: bool = True,
) -> PlanReport:
    """Validate and run a parsed plan; an invalid plan gives an ``invalid`` report, runs nothing.

    Without ``runner`` the best sandbox is used (``SandboxError`` when there is none and
    ``unsafe`` is false); that sandbox also runs ``command.run`` unless ``exec_sandbox`` is given.
    ``checkpoints``: a final action that writes is checkpointed before and after in the
    workspace's store (the plan's session), as an agent's call is.
    """
    cfg = config or KeelConfig()
    root = Path(os.path.realpath(workspace))
    if not root.is_dir():
        raise PlanError(
            f"the workspace {str(workspace)!r} is not a directory", code="plan.workspace"
        )
    validation = check_plan(data, config=cfg, workspace=root)
    if runner is None:
        runner, sandbox = sandboxed_runner(cfg, unsafe=unsafe)
        exec_sandbox = exec_sandbox if exec_sandbox is not None else sandbox
        unsafe = unsafe and runner.name == "none-unsafe"
    extra: dict[str, Any] = {"session_id": session_id} if session_id else {}
    engine = PlanEngine(
        validation, root, runner, cfg, policy, journal, exec_sandbox,
        dict(answers or {}), prompt, unsafe=unsafe, lazy_checkpoints=checkpoints, **extra,
    )  # fmt: skip
    return engine.run()
