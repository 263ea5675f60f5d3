"""Carrying out the agent's tools, once the guard allowed them.

Each tool reuses keel's own machinery: files are read and written through the probes' safe
file access (no symlink escapes, secrets refused), patches through ``keel.workspace.patch``
(atomic), plans through the plan engine (probes sandboxed), and commands through ``keel
exec`` when a sandbox works here (``Guard.contain``), else directly, under the stricter
uncontained policy. Every tool has a wall-clock limit. Outputs name the workspace as ``.``,
so a run and its replay in another directory see the same text.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from keel.agent._repomap import walk
from keel.core.schema import KeelConfig

MAX_MATCHES = 200
MAX_LISTED = 500
MAX_READ_BYTES = 1_000_000


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a tool did: the text the model gets, and whether it worked."""

    ok: bool
    output: str
    error: str | None = None
    exit_code: int | None = None


def failed(message: str, exit_code: int | None = None, output: str = "") -> Outcome:
    """A failed tool call."""
    return Outcome(False, output or f"error: {message}", message, exit_code)


def normalised(root: Path, text: str) -> str:
    """``text`` with the workspace's absolute path written as ``.``."""
    return text.replace(f"{root}/", "").replace(str(root), ".")


# -- reading ----------------------------------------------------------------------------------


def read_file(root: Path, args: dict[str, Any]) -> Outcome:
    """The file's lines, numbered, optionally ``start_line``..``end_line``."""
    from keel.probes import Failure, ProbeContext
    from keel.probes.fs import read_text

    path = str(args["path"])
    try:
        text = read_text(ProbeContext(root, read_cap=MAX_READ_BYTES), path)
    except Failure as exc:
        return failed(exc.issue.describe())
    lines = text.splitlines()
    start = int(args.get("start_line") or 1)
    end = min(int(args.get("end_line") or len(lines)), len(lines))
    if start > max(len(lines), 1):
        return failed(f"{path} has {len(lines)} lines; start_line {start} is past the end")
    body = "".join(f"{n:>5}  {lines[n - 1]}\n" for n in range(start, end + 1))
    return Outcome(True, body or f"({path} is empty)\n")


def _inside(root: Path, raw: str) -> Path | None:
    from keel.probes import Failure, ProbeContext
    from keel.probes._fs import contain

    try:
        return contain(ProbeContext(root), raw or ".")
    except Failure:
        return None


def list_files(root: Path, args: dict[str, Any]) -> Outcome:
    """The files under ``path`` (default the workspace), relative to the workspace."""
    raw = str(args.get("path") or ".")
    base = _inside(root, raw)
    if base is None or not base.is_dir():
        return failed(f"{raw!r} is not a directory of the workspace")
    names = [os.path.relpath(base / rel, root) for rel, _ in walk(base)]
    shown = names[:MAX_LISTED]
    more = f"... and {len(names) - len(shown)} more\n" if len(names) > len(shown) else ""
    return Outcome(True, "".join(f"{n}\n" for n in shown) + more or "(no files)\n")


def search(root: Path, args: dict[str, Any], timeout: float) -> Outcome:
    """Lines matching ``pattern`` as ``path:line: text`` (ripgrep when installed)."""
    pattern, raw = str(args["pattern"]), str(args.get("path") or ".")
    base = _inside(root, raw)
    if base is None:
        return failed(f"{raw!r} is not inside the workspace")
    rg = shutil.which("rg")
    if rg is not None:
        return _ripgrep(rg, root, base, pattern, timeout)
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        return failed(f"bad regular expression: {exc}")
    found: list[str] = []
    files = [(base, None)] if base.is_file() else [(base / rel, st) for rel, st in walk(base)]
    for path, _ in files:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if compiled.search(line):
                found.append(f"{os.path.relpath(path, root)}:{number}: {line[:200]}")
                if len(found) >= MAX_MATCHES:
                    return Outcome(True, "\n".join(found) + f"\n(first {MAX_MATCHES} matches)\n")
    return Outcome(True, "\n".join(found) + "\n" if found else "(no matches)\n")


def _ripgrep(rg: str, root: Path, base: Path, pattern: str, timeout: float) -> Outcome:
    argv = [
        rg,
        "-n",
        "--no-heading",
        "--color",
        "never",
        "--max-columns",
        "200",
        "-e",
        pattern,
        "--",
        os.path.relpath(base, root),
    ]
    done = run_argv(argv, root, timeout)
    if done.exit_code == 1:
        return Outcome(True, "(no matches)\n")
    if done.exit_code != 0:
        return failed(f"ripgrep failed (exit {done.exit_code})", done.exit_code, done.output)
    lines = done.output.splitlines()
    tail = f"(first {MAX_MATCHES} matches)\n" if len(lines) > MAX_MATCHES else ""
    return Outcome(True, "\n".join(lines[:MAX_MATCHES]) + "\n" + tail)


# -- running ----------------------------------------------------------------------------------


def run_argv(
    argv: Sequence[str], cwd: Path, timeout: float, env: dict[str, str] | None = None
) -> Outcome:
    """Run ``argv`` with stdout and stderr together; its process group is killed on timeout."""
    try:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
    except OSError as exc:
        return failed(f"cannot run {argv[0]!r}: {exc.strerror}", 127)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        out, _ = proc.communicate()
        text = out.decode("utf-8", "replace")
        return failed(
            f"timed out after {timeout:g} s", 124, text + f"\n(timed out after {timeout:g} s)"
        )
    text = out.decode("utf-8", "replace")
    code = proc.returncode
    return Outcome(code == 0, text, None if code == 0 else f"exit code {code}", code)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(OSError):  # already gone
        os.killpg(pid, signal.SIGKILL)


def run_command(
    root: Path, command: str, *, timeout: float, contained: bool, prefix: Sequence[str] = ()
) -> Outcome:
    """Run a shell command line: inside ``keel exec`` when ``contained``; exit code shown."""
    argv: list[str] = ["bash", "-c", command]
    limit = timeout
    if contained:  # the words of the line the guard is told ran (``Agent._as_ran``)
        from keel.sandbox.exec.line import shell_argv

        argv = shell_argv(root, command, timeout=timeout)
        limit += 5  # ``keel exec`` enforces ``timeout`` itself; this only backs it up
    done = run_argv([*prefix, *argv], root, limit)
    text = normalised(root, done.output)
    if done.exit_code == 124:
        return failed(f"timed out after {timeout:g} s", 124, text)
    summary = f"(exit code {done.exit_code})\n"
    return Outcome(
        done.ok,
        text + ("" if text.endswith("\n") or not text else "\n") + summary,
        done.error,
        done.exit_code,
    )


# -- writing ----------------------------------------------------------------------------------


def write_file(root: Path, args: dict[str, Any]) -> Outcome:
    """Write a whole file (never through a symlink, never outside the workspace)."""
    from keel.plan._commit import write_file as write
    from keel.probes import Failure

    path, content = str(args["path"]), str(args["content"])
    try:
        written = write(root, path, content, append=False)
    except Failure as exc:
        return failed(exc.issue.describe())
    return Outcome(True, f"wrote {written} bytes to {path}\n")


def apply_patch(
    root: Path, args: dict[str, Any], policy: Any, journal: Any, session: str, tool_use_id: str
) -> Outcome:
    """Apply a unified diff or Codex patch, all or nothing."""
    from keel.core.errors import PatchError
    from keel.workspace.patch import apply_patch as apply

    try:
        result = apply(
            root,
            str(args["patch"]),
            policy=policy,
            journal=journal,
            session_id=session,
            tool_use_id=tool_use_id,
        )
    except PatchError as exc:
        return failed(f"{exc.message} [{exc.code}]; nothing was changed")
    changed = ", ".join(result.paths) or "nothing"
    return Outcome(True, f"applied: {changed}\n")


# -- plans ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PlanOutcome:
    """A plan's run: the tool outcome, whether its conditions held, and its evidence report."""

    outcome: Outcome
    held: bool
    report: str


def run_plan(
    root: Path, args: dict[str, Any], config: KeelConfig, journal: Any, session: str
) -> PlanOutcome:
    """Validate and run an evidence plan; it holds when every probe worked and condition held."""
    from keel.plan import ACTIONS, ActionRecord, BranchRecord, ProbeRecord, render_text
    from keel.plan import run_plan as run

    plan = args["plan"]
    writing = {a.name for a in ACTIONS if a.effect != "none"} | {
        alias for a in ACTIONS if a.effect != "none" for alias in a.aliases
    }
    for step in _steps(plan):
        function = str((step.get("action") or {}).get("function") or "")
        if step.get("type") == "final_action" and function in writing:
            why = (
                f"step {step.get('id')!r} ({function}) changes files: in keel run a plan only "
                "gathers evidence; change files with apply_patch or write_file in implement"
            )
            return PlanOutcome(failed(why), False, why)
    from keel.core.errors import KeelError

    try:
        report = run(plan, workspace=root, config=config, journal=journal, session_id=session)
    except KeelError as exc:
        return PlanOutcome(failed(f"{exc.message} [{exc.code}]"), False, exc.message)
    text = normalised(root, render_text(report))
    if report.state == "invalid":
        return PlanOutcome(failed("the plan is invalid", output=text), False, text)
    probes_ok = all(r.status == "ok" for r in report.records if isinstance(r, ProbeRecord))
    branches = [r for r in report.records if isinstance(r, BranchRecord)]
    skipped = [r for r in report.records if isinstance(r, ActionRecord) and r.status == "skipped"]
    held = probes_ok and all(b.value is True for b in branches) and not skipped
    if not branches and not any(
        isinstance(r, ActionRecord) and r.status == "done" for r in report.records
    ):
        held = False
        text += "The plan states no condition: add a conditional step that checks an assumption.\n"
    return PlanOutcome(Outcome(True, text), held, text)


def _steps(plan: Any) -> list[dict[str, Any]]:
    """Every step of a plan, nested branches included (for a shape check before validation)."""
    found: list[dict[str, Any]] = []
    pending: list[Any] = list(plan.get("steps") or []) if isinstance(plan, dict) else []
    while pending:
        step = pending.pop(0)
        if isinstance(step, dict):
            found.append(step)
            pending.extend(step.get("true_branch") or [])
            pending.extend(step.get("false_branch") or [])
    return found


def shown(value: Any, limit: int = 160) -> str:
    """A value on one line, clipped (for summaries)."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
