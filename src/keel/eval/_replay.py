"""``keel eval --replay RESULTS [SUITE]``: every recorded run again, on today's code, no model.

The regression test of keel itself and of a suite: each run of a results file is replayed by
``keel replay`` (:mod:`keel.agent.replay`) over the workspace the evaluation kept
(``OUT/runs/TASK/ARM/REPEAT/workspace``, with its journal): recorded answer *k* is served only
to a request with recorded hash *k*, the tools run again in a scratch copy with the network
off, and the first observation that differs is the divergence.

- Without ``SUITE`` each run replays on its own first checkpoint: the repository and the
  keel.toml exactly as the run saw them. Anything that changes the run is today's keel.
- With ``SUITE`` (the suite of the evaluation, or a changed copy of it) each run replays on
  its task's repository as that suite holds it now, with its arm's keel.toml (``keel
  replay --on``): a changed file in a task shows as the first divergence of its runs.

Runs that kept no workspace (the harness could not carry them out) are listed as skipped.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from keel.core.errors import UsageError, UserError
from keel.core.isolated import launcher_argv
from keel.core.root import CONFIG_NAME
from keel.eval._arms import Arm, parse_arm
from keel.eval._eval import RESULTS_FILE, run_layout
from keel.eval._runner import MODEL_DIR, RunRecord, run_environment, run_process
from keel.eval._suite import Suite, load_suite, unpack

REPLAY_TIMEOUT = 900.0


@dataclass(frozen=True, slots=True)
class Replayed:
    """One recorded run, replayed."""

    run_id: str
    session_id: str | None
    status: str
    """``identical``, ``diverged``, ``skipped`` (no workspace kept) or ``error``."""
    divergence: dict[str, Any] | None = None
    model_calls: int = 0
    tool_calls: int = 0
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "run_id": self.run_id,
            "session_id": self.session_id,
            "status": self.status,
            "divergence": self.divergence,
            "model_calls": self.model_calls,
            "tool_calls": self.tool_calls,
            "detail": self.detail,
        }


def results_file(path: Path) -> Path:
    """``path`` itself, or ``path/results.jsonl`` for a results directory."""
    return path / RESULTS_FILE if path.is_dir() else path


def load_results(path: Path) -> tuple[dict[str, Any], list[RunRecord]]:
    """The header and the run records of a results file (or directory).

    Raises:
        UserError: it cannot be read or is not a ``keel eval`` results file (``eval.results``).
    """
    file = results_file(path)
    try:
        lines = [json.loads(line) for line in file.read_text("utf-8").splitlines() if line]
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UserError(
            f"{file}: cannot read the results: {exc}", code="eval.results", file=str(file)
        ) from exc
    if not lines or not isinstance(lines[0], dict) or lines[0].get("kind") != "eval":
        raise UserError(
            f"{file}: not a keel eval results file (its first line is not the eval header)",
            code="eval.results",
            file=str(file),
        )
    runs = [
        RunRecord.from_dict(d) for d in lines[1:] if isinstance(d, dict) and d.get("kind") == "run"
    ]
    return lines[0], runs


def replay_results(
    path: Path, suite_path: Path | None = None, *, jobs: int = 1
) -> tuple[dict[str, Any], list[Replayed]]:
    """Replay every run of the results at ``path`` (see the module); the header and verdicts.

    Raises:
        UserError: the results or the suite cannot be read (``eval.results``, ``eval.suite``).
    """
    header, records = load_results(path)
    base = results_file(path).resolve().parent
    suite = load_suite(suite_path) if suite_path is not None else None
    arms = {a["name"]: parse_arm(f"{a['name']}={a.get('settings') or ''}")
            for a in header.get("arms") or ()}  # fmt: skip
    model = str(header.get("model") or "")

    def one(record: RunRecord) -> Replayed:
        return _replay_one(record, base, suite, arms.get(record.arm), model)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return header, list(pool.map(one, records))


def _replay_one(
    record: RunRecord, base: Path, suite: Suite | None, arm: Arm | None, model: str
) -> Replayed:
    if not record.workspace or not record.session_id:
        return Replayed(record.run_id, record.session_id, "skipped",
                        detail="the evaluation kept no workspace of this run")  # fmt: skip
    workspace = base / record.workspace
    with tempfile.TemporaryDirectory(prefix="keel-eval-replay-") as tmp:
        on: list[str] = []
        if suite is not None:
            try:
                on = ["--on", str(_prepared(Path(tmp), suite, record, arm, model))]
            except (UsageError, UserError) as exc:
                return Replayed(record.run_id, record.session_id, "error", detail=exc.message)
        state = Path(tmp) / "state"
        state.mkdir(mode=0o700)
        argv = launcher_argv(
            "--workspace", str(workspace), "replay", record.session_id, *on, "--json"
        )
        code, out, err, _ = run_process(argv, workspace, run_environment(state), REPLAY_TIMEOUT)
    return _verdict(record, code, out, err)


def _prepared(tmp: Path, suite: Suite, record: RunRecord, arm: Arm | None, model: str) -> Path:
    """The task's repository as ``suite`` holds it now, with the arm's keel.toml."""
    task = suite.task(record.task)
    if task is None:
        raise UserError(f"the suite has no task {record.task!r} any more", code="eval.suite")
    if arm is None:
        raise UserError(f"the results name no arm {record.arm!r}", code="eval.results")
    tmp.chmod(0o755)
    where = tmp / "on"
    where.mkdir(mode=0o755)
    unpack(task.repo, where)
    _, _, keel_toml = run_layout(task, arm, model)
    if keel_toml is not None:
        (where / CONFIG_NAME).write_text(keel_toml.replace(MODEL_DIR, str(tmp)), "utf-8")
    return where


def _verdict(record: RunRecord, code: int | None, out: str, err: str) -> Replayed:
    try:
        data = json.loads(out)
    except ValueError:
        data = None
    if code not in (0, 1) or not isinstance(data, dict) or "identical" not in data:
        return Replayed(record.run_id, record.session_id, "error", detail=_error(code, err))
    return Replayed(
        record.run_id,
        record.session_id,
        "identical" if data["identical"] else "diverged",
        data.get("divergence"),
        int(data.get("model_calls") or 0),
        int(data.get("tool_calls") or 0),
    )


def _error(code: int | None, err: str) -> str:
    """What ``keel replay --json`` said went wrong (its ``{"error": ...}``), on one line."""
    last = (err.strip().splitlines() or [f"exit {code}"])[-1]
    try:
        error = json.loads(last)["error"]
        return f"{error['message']} [{error['code']}]"[:500]
    except (ValueError, KeyError, TypeError):
        return last[:500] if code is not None else f"keel replay did not end: {last[:400]}"


def replay_text(results: str, replayed: Sequence[Replayed]) -> str:
    """The replay as ``keel eval --replay`` prints it."""
    lines = []
    for r in replayed:
        if r.status == "identical":
            lines.append(f"identical  {r.run_id}: {r.model_calls} model calls, "
                         f"{r.tool_calls} tool calls")  # fmt: skip
        elif r.status == "diverged" and r.divergence is not None:
            d = r.divergence
            old, new = _shown(d.get("recorded"), d.get("new"))
            lines.append(
                f"diverged   {r.run_id}: step {d.get('step')} ({d.get('phase')}), "
                f"{d.get('what')} {d.get('pointer') or ''}"
            )
            lines += [f"    recorded: {old}", f"    now:      {new}"]
        else:
            lines.append(f"{r.status:<10} {r.run_id}: {r.detail}")
    counts = {s: sum(1 for r in replayed if r.status == s)
              for s in ("identical", "diverged", "error", "skipped")}  # fmt: skip
    lines.append(
        f"{results}: {counts['identical']} of {len(replayed)} runs identical, "
        f"{counts['diverged']} diverged, {counts['error']} errors, {counts['skipped']} skipped"
    )
    return "\n".join(lines) + "\n"


def _shown(recorded: Any, new: Any) -> tuple[str, str]:
    """Both values, strings around the first character where they differ."""
    from keel.agent.replay import focus

    if isinstance(recorded, str) and isinstance(new, str):
        a, b = focus(recorded, new, 100)
        return repr(a), repr(b)
    return _short(recorded), _short(new)


def _short(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"
