"""An evaluation: the runs of a suite x arms x repeats, carried out, streamed to a results file.

:func:`plan` checks everything before any run starts (the model of every (task, arm), its
script files, the keel.toml each run will read) and makes one :class:`RunSpec` per run, in
the order repeat, task, arm (so arms alternate). :func:`evaluate` carries them out locally or
on Ray and streams each record, as it comes, to ``OUT/results.jsonl`` (JSON lines: a header
``{"kind": "eval", ...}``, then ``{"kind": "run", ...}`` per run) and keeps each run's
workspace, journal included, under ``OUT/runs/TASK/ARM/REPEAT/workspace``.

**Models.** ``script:DIR`` (a directory) gives each task its own script, ``DIR/TASK.json``
(or ``.yaml``/``.yml``); ``script:FILE`` gives every task the same one. A script is read
and checked here and travels with the run (``model/`` of its directory). Other specs
(``openai:``, ``anthropic:``, ``local``) are passed to ``keel run`` as given.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from keel.core.errors import ModelError, UsageError, UserError
from keel.eval._arms import Arm, keel_toml_text, merged_config
from keel.eval._pool import run_local, run_ray
from keel.eval._report import Report, render_markdown
from keel.eval._runner import MODEL_DIR, RunOutput, RunRecord, RunSpec
from keel.eval._suite import Suite, Task, unpack

RESULTS_FILE = "results.jsonl"
REPORT_MD = "report.md"
REPORT_JSON = "report.json"
RUNS_DIR = "runs"
SCRIPT_SUFFIXES = (".json", ".yaml", ".yml")
FORMAT = 1
"""The results file's format version (its header's ``format``)."""


@dataclass(frozen=True, slots=True)
class Evaluation:
    """What will run: the suite, the arms, the model, the repeats, and one spec per run."""

    suite: Suite
    arms: tuple[Arm, ...]
    model: str
    """``--model`` as given ("" when every arm names its own)."""
    repeat: int
    specs: tuple[RunSpec, ...]

    def header(self, *, jobs: int, ray: str | None) -> dict[str, Any]:
        """The results file's first line."""
        from keel import __version__

        return {
            "kind": "eval",
            "format": FORMAT,
            "keel": __version__,
            "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "suite": str(self.suite.path),
            "suite_name": self.suite.name,
            "model": self.model,
            "arms": [{"name": a.name, "settings": a.text} for a in self.arms],
            "repeat": self.repeat,
            "jobs": jobs,
            "ray": ray,
            "tasks": [t.to_dict() for t in self.suite.tasks],
            "runs": len(self.specs),
        }


def plan(suite: Suite, arms: Sequence[Arm], model: str | None, repeat: int) -> Evaluation:
    """Check and lay out every run (see the module).

    Raises:
        UsageError: no model for an arm (``eval.model``), ``repeat`` below 1 (``eval.repeat``).
        UserError: a script is missing or unreadable (``eval.script``), or a run's keel.toml
            would be invalid (``eval.config``).
    """
    if repeat < 1:
        raise UsageError(f"--repeat must be 1 or more, not {repeat}", code="eval.repeat")
    missing = [a.name for a in arms if not (a.model or model)]
    if missing:
        raise UsageError(
            f"no model for arm {missing[0]!r}: pass --model SPEC or set model=SPEC in the arm",
            code="eval.model",
            arm=missing[0],
        )
    if model:
        _check_model(model)
    layout = {(t.id, a.name): run_layout(t, a, model or "") for t in suite.tasks for a in arms}
    carried = _carried(suite, arms)
    specs = tuple(
        _spec_of(task, arm, r, *layout[(task.id, arm.name)], carried)
        for r in range(repeat)
        for task in suite.tasks
        for arm in arms
    )
    return Evaluation(suite, tuple(arms), model or "", repeat, specs)


def _carried(suite: Suite, arms: Sequence[Arm]) -> tuple[tuple[str, str], ...]:
    """The model variables of this process's environment that every run gets.

    A Ray worker has its own environment: the providers' variables and each ``[model]
    api_key_env``'s travel with the run.
    """
    from keel.models import model_environment

    sections = [t.keel_toml.get("model") for t in suite.tasks]
    sections += [a.overrides.get("model") for a in arms]
    key_vars = {
        str(s["api_key_env"]) for s in sections if isinstance(s, dict) and "api_key_env" in s
    }
    return tuple(sorted(model_environment(os.environ, key_vars).items()))


def _check_model(model: str) -> None:
    from keel.models import parse_spec

    if parse_spec(model).provider == "replay":
        raise UsageError(
            f"--model {model!r}: a replay model answers one recorded session; use keel eval "
            "--replay RESULTS to replay an evaluation",
            code="eval.model",
        )


def run_layout(
    task: Task, arm: Arm, model: str
) -> tuple[str, tuple[tuple[str, bytes], ...], str | None]:
    """The run's model spec, its files, and its keel.toml (None: the repository's own)."""
    spec, files = model_for(arm.model or model, task.id, "model")
    overrides = {s: dict(v) for s, v in arm.overrides.items()}
    if task.max_steps is not None and "max_steps" not in overrides.get("agent", {}):
        overrides.setdefault("agent", {})["max_steps"] = task.max_steps
    if arm.judge is not None:
        judge, judge_files = (
            (spec, ()) if arm.judge == "on" else model_for(arm.judge, task.id, "judge")
        )
        overrides.setdefault("judge", {})["model"] = judge
        files += judge_files
    if not overrides:
        return spec, files, None
    data = merged_config(task.keel_toml, overrides)
    return spec, files, keel_toml_text(data, task=task.id, arm=arm.name)


def _spec_of(
    task: Task, arm: Arm, repeat: int, model: str, files: tuple[tuple[str, bytes], ...],
    keel_toml: str | None, carried: tuple[tuple[str, str], ...],
) -> RunSpec:  # fmt: skip
    return RunSpec(
        run_id=f"{task.id}/{arm.name}/{repeat}",
        task=task.id,
        arm=arm.name,
        repeat=repeat,
        text=task.text,
        check=task.check,
        trap=task.trap,
        repo=task.repo,
        check_files=task.check_files,
        keel_toml=keel_toml,
        model=model,
        model_files=files,
        timeout_seconds=task.timeout_seconds,
        cpus=task.cpus,
        memory_mb=task.memory_mb,
        environ=carried,
    )


def model_for(spec: str, task: str, role: str) -> tuple[str, tuple[tuple[str, bytes], ...]]:
    """The spec a run of ``task`` uses for ``spec`` (``role``: model or judge), and its files.

    Raises:
        UserError: a script is missing or is not a script (``eval.script``).
    """
    from keel.models import parse_spec

    parsed = parse_spec(spec)
    if parsed.provider == "local" and parsed.target:
        return f"local:{Path(parsed.target).expanduser().resolve()}", ()
    if parsed.provider != "script":
        return spec, ()
    file = _script_file(Path(parsed.target).expanduser(), task)
    from keel.models.testing import ScriptedModel

    try:
        ScriptedModel.from_file(file)
    except ModelError as exc:
        raise UserError(
            f"task {task!r}: {exc.message}", code="eval.script", task=task, file=str(file)
        ) from exc
    name = f"{role}-{task}{file.suffix}"
    return f"script:{MODEL_DIR}/{name}", ((name, file.read_bytes()),)


def _script_file(path: Path, task: str) -> Path:
    if path.is_dir():
        found = [path / f"{task}{s}" for s in SCRIPT_SUFFIXES if (path / f"{task}{s}").is_file()]
        if not found:
            raise UserError(
                f"task {task!r}: no script {path / (task + '.json')} (a script:DIR model gives "
                f"each task its own script, DIR/TASK.json)",
                code="eval.script",
                task=task,
                file=str(path / f"{task}.json"),
            )
        return found[0]
    if not path.is_file():
        raise UserError(
            f"script {str(path)!r} is neither a file nor a directory", code="eval.script",
            task=task, file=str(path),
        )  # fmt: skip
    return path


# -- carrying it out ------------------------------------------------------------------------------


def prepare_out(out: Path) -> Path:
    """The results directory, made; one that holds results already is refused.

    Raises:
        UsageError: ``OUT/results.jsonl`` exists (``eval.out``).
    """
    if (out / RESULTS_FILE).exists():
        raise UsageError(
            f"{out / RESULTS_FILE} exists: give another --out (results are never mixed)",
            code="eval.out",
        )
    out.mkdir(parents=True, exist_ok=True)
    return out


def evaluate(
    evaluation: Evaluation,
    out: Path,
    *,
    jobs: int,
    ray: str | None = None,
    on_record: Callable[[RunRecord], None] | None = None,
) -> list[RunRecord]:
    """Carry out every run, streaming records to ``OUT/results.jsonl``; the records.

    Raises:
        RunError: Ray is missing or cannot start (``eval.ray_missing``, ``eval.ray``).
    """
    records: list[RunRecord] = []
    with (prepare_out(out) / RESULTS_FILE).open("w", encoding="utf-8") as results:
        _line(results, evaluation.header(jobs=jobs, ray=ray))

        def take(output: RunOutput) -> None:
            record = output.record
            if output.archive:
                record.workspace = keep_workspace(out, record.run_id, output.archive)
            _line(results, record.to_dict())
            records.append(record)
            if on_record is not None:
                on_record(record)

        if ray is not None:
            run_ray(evaluation.specs, ray, jobs or None, take)
        else:
            run_local(evaluation.specs, jobs, take)
    return records


def keep_workspace(out: Path, run_id: str, archive: bytes) -> str:
    """Unpack a run's workspace under ``OUT/runs/RUN_ID/workspace``; its relative path."""
    where = out / RUNS_DIR / run_id / "workspace"
    where.mkdir(parents=True, exist_ok=True)
    unpack(archive, where)
    return str(where.relative_to(out))


def _line(handle: IO[str], value: dict[str, Any]) -> None:
    handle.write(json.dumps(value, ensure_ascii=False, sort_keys=False) + "\n")
    handle.flush()


def write_report(out: Path, report: Report) -> tuple[Path, Path]:
    """``OUT/report.md`` and ``OUT/report.json``."""
    md, js = out / REPORT_MD, out / REPORT_JSON
    md.write_text(render_markdown(report), encoding="utf-8")
    js.write_text(json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n", "utf-8")
    return md, js
