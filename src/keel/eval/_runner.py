"""One run of an evaluation: a (task, arm, repeat) as ``keel run`` in its own copy.

:func:`execute` is the unit of work, the same locally (a pool of them) and on Ray (one Ray
task each): a pure function of its :class:`RunSpec`, which carries everything (the
repository and the check files as archives, the keel.toml, the model and its script files),
so a worker on another machine reads nothing of the suite. It

1. makes a 0755 temporary directory (the sandbox's unprivileged uid must reach the
   workspace) with ``workspace/`` (the repository, the arm's keel.toml), ``state/`` (this
   run's ``KEEL_STATE_DIR``: its own journal key and chain heads) and ``model/`` (scripts);
2. runs ``keel run TASK --model SPEC --non-interactive --json`` there as a subprocess with
   ``KEEL_HOOKD=0`` (no daemon outlives the run): contained as ``keel run`` always is, with its
   own journal; killed with its process group after the task's ``timeout_seconds``;
3. copies the task's ``check/`` folder to ``.eval-check/`` (the agent never saw it) and runs
   the check command under ``keel exec`` in the workspace: its exit status 0 is success;
   then waits for ``keel exec``'s detached journal writers to be done (:func:`wait_for_writers`);
4. reads the run's figures from its journal (:mod:`keel.eval._measure`) and packs the
   workspace, with a consistent copy of the journal (SQLite's backup), as a tar archive for
   the results directory (``keel eval --replay`` replays it);
5. removes the directory.

A run that could not be carried out (keel crashed, the timeout) is a record with ``error``
set and ``success`` false, never an exception: one broken run does not end an evaluation.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import tarfile
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from keel.core.isolated import launcher_argv
from keel.core.root import CONFIG_NAME, STATE_DIR
from keel.eval._measure import LEVELS, measure, run_session
from keel.eval._suite import CHECK_COPY, unpack

MODEL_DIR = "@MODEL_DIR@"
"""Stands for the run's ``model/`` directory in a spec's model and keel.toml."""
CHECK_TIMEOUT = 300.0
WRITER_WAIT = 30.0
OUTPUT_CHARS = 2000
JOURNAL_SKIP = ("journal.db", "journal.db-wal", "journal.db-shm", "journal.lock")
_RUNNING: set[int] = set()
"""The process groups of the runs and checks going on in this process (``stop_running``)."""
_LOCK = threading.Lock()
STOPPING = threading.Event()
"""Set by ``stop_running``: a run that has not started its processes yet never does."""


@dataclass(frozen=True, slots=True)
class RunSpec:
    """Everything one run needs (picklable: a Ray task's argument)."""

    run_id: str
    """``TASK/ARM/REPEAT``: also where the run is kept under the results directory."""
    task: str
    arm: str
    repeat: int
    text: str
    check: str
    trap: bool
    repo: bytes
    check_files: bytes
    keel_toml: str | None
    """The workspace's keel.toml (None: the repository's own, untouched)."""
    model: str
    model_files: tuple[tuple[str, bytes], ...]
    """Files written to ``model/`` (scripts), by name."""
    timeout_seconds: float
    cpus: float = 1.0
    memory_mb: int | None = None
    environ: tuple[tuple[str, str], ...] = ()
    """The model's variables from the evaluating process's environment (a Ray worker on
    another node, or of a cluster started elsewhere, has its own): added to the run's."""


@dataclass(slots=True)
class RunRecord:
    """One run's result: a line of the results file."""

    run_id: str
    task: str
    arm: str
    repeat: int
    trap: bool
    success: bool = False
    """The check command exited 0 after the run."""
    session_id: str | None = None
    outcome: str = "error"
    """keel run's outcome (finished, failed, stopped, over_budget, needs_input) or ``error``."""
    exit_code: int | None = None
    reason: str = ""
    check_exit: int | None = None
    check_output: str = ""
    steps: int = 0
    tokens: int = 0
    cost_usd: float | None = 0.0
    wall_seconds: float = 0.0
    """keel run's wall-clock time (the check's not included)."""
    premature_refused: int = 0
    failed_conditions: int = 0
    assumption_caught: bool = False
    first_write_step: int | None = None
    guidance: dict[str, int] = field(default_factory=lambda: dict.fromkeys(LEVELS, 0))
    error: str | None = None
    """Why the run could not be carried out (the harness's failure, not the agent's)."""
    workspace: str | None = None
    """The kept workspace, relative to the results directory."""

    def to_dict(self) -> dict[str, Any]:
        """The results file's line (with ``kind: run``)."""
        return {"kind": "run", **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunRecord:
        """Rebuild from :meth:`to_dict` (unknown keys ignored)."""
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True, slots=True)
class RunOutput:
    """What a worker hands back: the record and the workspace as a tar archive."""

    record: RunRecord
    archive: bytes


def execute(spec: RunSpec) -> RunOutput:
    """Carry out one run (see the module); never raises for the run's own failures."""
    record = RunRecord(spec.run_id, spec.task, spec.arm, spec.repeat, spec.trap)
    try:
        return _execute(spec, record)
    except Exception as exc:  # the harness failed this run: recorded, the evaluation goes on
        record.error = f"the run could not be carried out: {type(exc).__name__}: {exc}"
        record.success = False
        return RunOutput(record, b"")


def _execute(spec: RunSpec, record: RunRecord) -> RunOutput:
    with _run_directory() as tmp:
        workspace, state, models = tmp / "workspace", tmp / "state", tmp / "model"
        for path in (workspace, models):
            path.mkdir()
            path.chmod(0o755)
        state.mkdir(mode=0o700)
        unpack(spec.repo, workspace)
        for name, data in spec.model_files:
            (models / name).write_bytes(data)
        if spec.keel_toml is not None:
            text = spec.keel_toml.replace(MODEL_DIR, str(models))
            (workspace / CONFIG_NAME).write_text(text, encoding="utf-8")
        env = run_environment(state, spec.environ)
        summary = _keel_run(spec, workspace, spec.model.replace(MODEL_DIR, str(models)), env,
                            record)  # fmt: skip
        _check(spec, workspace, env, record)
        wait_for_writers(tmp)
        _figures(workspace, summary, record)
        return RunOutput(record, pack_workspace(workspace, tmp / "journal-copy.db"))


def run_environment(state: Path, carried: Iterable[tuple[str, str]] = ()) -> dict[str, str]:
    """A run's keel processes' environment: this one's and ``carried``, own state, no daemon."""
    env = {k: v for k, v in os.environ.items() if k != "KEEL_WORKSPACE"}
    env.update(carried)
    env.update(KEEL_HOOKD="0", KEEL_STATE_DIR=str(state))
    return env


@contextlib.contextmanager
def _run_directory() -> Iterator[Path]:
    """A 0755 temporary directory, removed once no process works in it any more."""
    tmp = Path(tempfile.mkdtemp(prefix="keel-eval-"))
    tmp.chmod(0o755)
    try:
        yield tmp
    finally:
        wait_for_writers(tmp)
        for _ in range(100):
            shutil.rmtree(tmp, ignore_errors=True)
            if not tmp.exists():
                break
            time.sleep(0.05)


def wait_for_writers(directory: Path, timeout: float = WRITER_WAIT) -> None:
    """Wait (at most ``timeout`` s) while a process has its working directory in ``directory``.

    ``keel exec`` without a daemon journals each command from a detached fork of its own
    session after it exits (``keel.sandbox.exec._journal``): out of the run's process group,
    in the workspace. Until it is done, the journal may still grow, and a removed ``.keel``
    could be made again.
    """
    prefix = os.path.realpath(directory) + os.sep
    deadline = time.monotonic() + timeout
    while _working_in(prefix) and time.monotonic() < deadline:
        time.sleep(0.05)


def _working_in(prefix: str) -> bool:
    me = str(os.getpid())
    try:
        entries = [e.name for e in os.scandir("/proc") if e.name.isdigit() and e.name != me]
    except OSError:  # no /proc: nothing to wait for that can be seen
        return False
    for pid in entries:
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if (cwd + os.sep).startswith(prefix):
            return True
    return False


def run_process(
    argv: list[str], cwd: Path, env: dict[str, str], timeout: float
) -> tuple[int | None, str, str, float]:
    """Run ``argv``; (exit code or None on timeout, stdout, stderr, seconds).

    The process leads its own group, and the whole group is killed at the timeout.
    """
    if STOPPING.is_set():
        raise RuntimeError("the evaluation was interrupted")
    started = time.monotonic()
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    with _LOCK:
        _RUNNING.add(process.pid)
    try:
        out, err = process.communicate(timeout=timeout)
        code: int | None = process.returncode
    except subprocess.TimeoutExpired:
        _kill_group(process.pid)
        out, err = process.communicate()
        code = None
    except BaseException:  # an interrupt: the run must not outlive it
        _kill_group(process.pid)
        raise
    finally:
        with _LOCK:
            _RUNNING.discard(process.pid)
    elapsed = time.monotonic() - started
    return code, _text(out), _text(err), elapsed


def stop_running() -> None:
    """Kill the process group of every run and check this process has going, and start no more.

    For an interrupt; ``STOPPING.clear()`` allows runs again.
    """
    STOPPING.set()
    with _LOCK:
        pids = list(_RUNNING)
    for pid in pids:
        _kill_group(pid)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _keel_run(
    spec: RunSpec, workspace: Path, model: str, env: dict[str, str], record: RunRecord
) -> dict[str, Any]:
    argv = launcher_argv(
        "--workspace", str(workspace), "run", spec.text, "--model", model,
        "--non-interactive", "--json",
    )  # fmt: skip
    code, out, err, elapsed = run_process(argv, workspace, env, spec.timeout_seconds)
    record.wall_seconds = round(elapsed, 3)
    record.exit_code = code
    if code is None:
        record.error = f"keel run did not end within {spec.timeout_seconds:g} s: killed"
        return {}
    try:
        summary = json.loads(out)
    except ValueError:
        summary = None
    if not isinstance(summary, dict) or "outcome" not in summary:
        last = err.strip().splitlines()[-1:] or [f"exit {code}, no output"]
        record.error = f"keel run ended without a result (exit {code}): {last[0][:500]}"
        return {}
    record.outcome = str(summary["outcome"])
    record.reason = str(summary.get("reason") or "")
    record.session_id = summary.get("session_id")
    return summary


def _check(spec: RunSpec, workspace: Path, env: dict[str, str], record: RunRecord) -> None:
    """The check command, contained by ``keel exec`` in the workspace; 0 is success."""
    if spec.check_files:
        target = workspace / CHECK_COPY
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif target.exists() or target.is_symlink():
            target.unlink()
        target.mkdir()
        target.chmod(0o755)
        unpack(spec.check_files, target)
    argv = launcher_argv(
        "exec", "--workspace", str(workspace), "--timeout", f"{CHECK_TIMEOUT:g}", "--",
        "/bin/sh", "-c", spec.check,
    )  # fmt: skip
    code, out, err, _ = run_process(argv, workspace, env, CHECK_TIMEOUT + 60)
    record.check_exit = code
    text = (out + err).strip()
    record.check_output = text if len(text) <= OUTPUT_CHARS else "…" + text[-OUTPUT_CHARS:]
    record.success = code == 0 and record.error is None


def _figures(workspace: Path, summary: dict[str, Any], record: RunRecord) -> None:
    from keel.core.errors import KeelError
    from keel.journal import read_journal

    try:
        with read_journal(workspace) as journal:
            session = record.session_id or run_session(journal.events(kinds=("session.start",)))
            events = list(journal.events(session_id=session)) if session else []
    except KeelError as exc:
        record.error = record.error or f"the run's journal cannot be read: {exc.message}"
        return
    record.session_id = session
    figures = measure(events)
    record.steps = figures.steps
    record.tokens = figures.tokens
    record.cost_usd = None if figures.cost_usd is None else round(figures.cost_usd, 8)
    record.premature_refused = figures.premature_refused
    record.failed_conditions = figures.failed_conditions
    record.assumption_caught = figures.assumption_caught
    record.first_write_step = figures.first_write_step
    record.guidance = dict(figures.guidance)
    if not summary and record.error is None:
        record.error = "keel run gave no result"


# -- the kept workspace ------------------------------------------------------------------------


def pack_workspace(workspace: Path, scratch: Path) -> bytes:
    """The workspace as a gzip'd tar, its journal a consistent copy (SQLite's backup API).

    Sockets, fifos and files that vanish while it is read (a detached journal writer's) are
    left out.
    """
    journal = workspace / STATE_DIR / "journal.db"
    have_journal = journal.is_file() and _backup(journal, scratch)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as archive:
        for path in _walk(workspace):
            rel = path.relative_to(workspace)
            if rel.parts[:1] == (STATE_DIR,) and len(rel.parts) == 2 and rel.name in JOURNAL_SKIP:
                continue
            with contextlib.suppress(FileNotFoundError):
                info = archive.gettarinfo(path, arcname=str(rel))
                if info is None:  # a socket
                    continue
                if info.isfile():
                    with path.open("rb") as handle:
                        archive.addfile(info, handle)
                elif info.isdir() or info.issym():
                    archive.addfile(info)
        if have_journal:
            archive.add(scratch, arcname=f"{STATE_DIR}/journal.db")
    return buffer.getvalue()


def _walk(root: Path) -> Iterator[Path]:
    for top, dirs, files in os.walk(root):
        dirs.sort()
        for name in (*dirs, *sorted(files)):
            yield Path(top) / name


def _backup(source: Path, target: Path) -> bool:
    try:
        src = sqlite3.connect(f"file:{source}?mode=ro", uri=True, timeout=30)
        dst = sqlite3.connect(target)
        try:
            src.backup(dst)
            dst.execute("PRAGMA journal_mode=DELETE")
        finally:
            src.close()
            dst.close()
    except sqlite3.Error:
        return False
    return True
