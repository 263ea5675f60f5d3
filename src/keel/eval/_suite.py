"""A suite: a directory of tasks, each a repository, a task text and a success check.

The format (``examples/eval/README.md``)::

    SUITE/
      suite.toml              optional: name, description
      tasks/
        wrong-column/         the folder's name is the task's id
          task.toml           or task.json: the task text, the check, labels
          repo/               the repository the run starts from (or [repo] git + ref)
          check/              optional: files the check needs, copied in after the run

``task.toml``::

    task = "report.py crashes: make it sum the sales column"   # what keel run is asked
    check = "python3 .eval-check/check.py"   # exit 0 after the run: success
    assumption = "data/sales.csv has a sales column"   # trap tasks: what the text gets wrong
    labels = ["trap", "column"]              # free tags, shown in the report
    timeout_seconds = 600                    # the run is killed after this (default 900)
    max_steps = 20                           # keel run --max-steps (default [agent] max_steps)
    cpus = 1                                 # what one run needs (Ray schedules on it)
    memory_mb = 1024

    [repo]                                   # instead of repo/: a git repository and a ref
    git = "../../fixtures/app.git"           # a path (relative to the task folder) or a URL
    ref = "v1.2"

Everything is read and checked once, before any run starts; an invalid suite is a
``UserError`` (``eval.suite``) naming the file and the key. The repository and the check
files are packed into tar archives here, so a run carries everything it needs (a Ray worker
on another machine never reads the suite).
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from keel.core.errors import UserError
from keel.core.root import CONFIG_NAME, GIT_MARKER, STATE_DIR

TASKS_DIR = "tasks"
TASK_FILES = ("task.toml", "task.json")
SUITE_FILE = "suite.toml"
REPO_DIR = "repo"
CHECK_DIR = "check"
CHECK_COPY = ".eval-check"
"""Where the task's ``check/`` folder is copied in the workspace, after the run."""
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}$"
DEFAULT_TIMEOUT = 900.0
SKIPPED = (STATE_DIR, GIT_MARKER)
"""Never copied from a ``repo/`` folder: keel's state and git's."""


class _RepoData(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    git: str = Field(min_length=1)
    ref: str = Field(min_length=1, pattern=r"^[^\s-][^\s]*$")


class _TaskData(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    task: str = Field(min_length=1)
    check: str = Field(min_length=1)
    assumption: str | None = None
    labels: list[str] = Field(default_factory=list[str])
    timeout_seconds: float = Field(default=DEFAULT_TIMEOUT, gt=0)
    max_steps: int | None = Field(default=None, ge=1)
    cpus: float = Field(default=1.0, gt=0)
    memory_mb: int | None = Field(default=None, ge=64)
    repo: _RepoData | None = None


class _SuiteData(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = None
    description: str | None = None


@dataclass(frozen=True, slots=True)
class Task:
    """One task of a suite, packed: everything a run of it needs."""

    id: str
    text: str
    check: str
    assumption: str | None
    labels: tuple[str, ...]
    timeout_seconds: float
    max_steps: int | None
    cpus: float
    memory_mb: int | None
    repo: bytes
    """The repository the run starts from, as a tar archive."""
    check_files: bytes
    """The task's ``check/`` folder as a tar archive (empty: none)."""
    keel_toml: dict[str, Any]
    """The repository's own keel.toml (empty: none); arms are applied over it."""
    source: str
    """Where the repository came from: ``repo/`` or ``git URL@REF``."""

    @property
    def trap(self) -> bool:
        """A trap task: its text gets an assumption wrong."""
        return self.assumption is not None

    def to_dict(self) -> dict[str, Any]:
        """What a results file records of the task."""
        return {
            "id": self.id,
            "task": self.text,
            "check": self.check,
            "assumption": self.assumption,
            "labels": list(self.labels),
            "source": self.source,
        }


@dataclass(frozen=True, slots=True)
class Suite:
    """A directory of tasks."""

    path: Path
    name: str
    description: str | None
    tasks: tuple[Task, ...]

    def task(self, task_id: str) -> Task | None:
        """The task ``task_id``, or None."""
        return next((t for t in self.tasks if t.id == task_id), None)


def suite_error(message: str, **context: Any) -> UserError:
    """An ``eval.suite`` error with its context (the file, the task, the key)."""
    return UserError(message, code="eval.suite", **context)


def load_suite(path: Path, only: tuple[str, ...] = ()) -> Suite:
    """Read, check and pack the suite at ``path`` (``only``: these task ids, in suite order).

    Raises:
        UserError: the suite or one of its tasks is invalid (``eval.suite``, naming the file,
            the task and the key).
    """
    root = path.resolve()
    if not root.is_dir():
        raise suite_error(f"{path}: the suite is not a directory", suite=str(path))
    meta = _suite_meta(root)
    tasks_dir = root / TASKS_DIR
    if not tasks_dir.is_dir():
        raise suite_error(
            f"{path}: a suite holds its tasks in {TASKS_DIR}/, one folder each",
            suite=str(path),
        )
    folders = sorted(p for p in tasks_dir.iterdir() if not p.name.startswith("."))
    known = {p.name for p in folders}
    unknown = [t for t in only if t not in known]
    if unknown:
        raise suite_error(
            f"{path}: no task {unknown[0]!r} (the tasks: {', '.join(sorted(known))})",
            suite=str(path),
            task=unknown[0],
        )
    chosen = [p for p in folders if not only or p.name in only]
    tasks = tuple(load_task(p) for p in chosen)
    if not tasks:
        raise suite_error(f"{path}: the suite has no tasks in {TASKS_DIR}/", suite=str(path))
    return Suite(root, meta.name or root.name, meta.description, tasks)


def _suite_meta(root: Path) -> _SuiteData:
    file = root / SUITE_FILE
    if not file.exists():
        return _SuiteData()
    data = _read_file(file, task=None)
    try:
        return _SuiteData.model_validate(data)
    except ValidationError as exc:
        key, message = _first(exc)
        raise suite_error(f"{file}: {key}: {message}", file=str(file), key=key) from exc


def load_task(folder: Path) -> Task:
    """Read, check and pack one task folder.

    Raises:
        UserError: ``eval.suite``, naming the file and the key.
    """
    task_id = folder.name
    if not folder.is_dir():
        raise suite_error(f"{folder}: a task is a folder", task=task_id, file=str(folder))
    if not re.match(ID_PATTERN, task_id):
        raise suite_error(
            f"{folder}: a task folder's name is its id: letters, digits, '_', '.', '-'",
            task=task_id,
            file=str(folder),
        )
    files = [folder / name for name in TASK_FILES if (folder / name).is_file()]
    if len(files) != 1:
        what = "both task.toml and task.json" if files else "no task.toml (or task.json)"
        raise suite_error(f"{folder}: the task has {what}", task=task_id, file=str(folder))
    file = files[0]
    try:
        data = _TaskData.model_validate(_read_file(file, task=task_id))
    except ValidationError as exc:
        key, message = _first(exc)
        raise suite_error(
            f"{file}: {key}: {message}", task=task_id, file=str(file), key=key
        ) from exc
    repo, source = _repository(folder, data, file)
    return Task(
        id=task_id,
        text=data.task,
        check=data.check,
        assumption=data.assumption,
        labels=tuple(data.labels),
        timeout_seconds=data.timeout_seconds,
        max_steps=data.max_steps,
        cpus=data.cpus,
        memory_mb=data.memory_mb,
        repo=repo,
        check_files=_pack_check(folder),
        keel_toml=_keel_toml(repo, task_id),
        source=source,
    )


def _read_file(file: Path, *, task: str | None) -> Any:
    try:
        text = file.read_text(encoding="utf-8")
        return json.loads(text) if file.suffix == ".json" else tomllib.loads(text)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise suite_error(f"{file}: cannot read it: {exc}", task=task, file=str(file)) from exc


def _first(exc: ValidationError) -> tuple[str, str]:
    first = exc.errors()[0]
    key = ".".join(str(p) for p in first["loc"]) or "task"
    message = first["msg"]
    if first["type"] == "missing":
        message = "is required"
    elif first["type"] == "extra_forbidden":
        message = "is not a known key"
    return key, message


def _repository(folder: Path, data: _TaskData, file: Path) -> tuple[bytes, str]:
    repo_dir = folder / REPO_DIR
    if data.repo is not None and repo_dir.exists():
        raise suite_error(
            f"{file}: [repo] names a git repository, and {REPO_DIR}/ is there too: keep one",
            task=folder.name,
            file=str(file),
            key="repo",
        )
    if data.repo is not None:
        return _git_archive(folder, data.repo, file), f"git {data.repo.git}@{data.repo.ref}"
    if not repo_dir.is_dir():
        raise suite_error(
            f"{folder}: the task has no {REPO_DIR}/ folder and no [repo] git + ref",
            task=folder.name,
            file=str(folder),
            key="repo",
        )
    return pack_directory(repo_dir), f"{REPO_DIR}/"


def _pack_check(folder: Path) -> bytes:
    check_dir = folder / CHECK_DIR
    return pack_directory(check_dir) if check_dir.is_dir() else b""


def pack_directory(directory: Path) -> bytes:
    """``directory``'s files as a gzip'd tar archive (modes kept; ``.keel`` and ``.git`` not)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as archive:
        for entry in sorted(directory.iterdir()):
            if entry.name in SKIPPED:
                continue
            archive.add(entry, arcname=entry.name, filter=_plain_member)
    return buffer.getvalue()


def _plain_member(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    if not (info.isfile() or info.isdir() or info.issym()):
        return None  # sockets, fifos, devices
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def unpack(data: bytes, into: Path) -> None:
    """Extract an archive made by ``pack_directory`` (or ``git archive``) into ``into``.

    Members that would land outside ``into`` (absolute or escaping links, ``..``) are left out.
    """
    if not data:
        return
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        archive.extractall(into, filter=_safe_member)


def _safe_member(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    """The ``data`` filter of tarfile, leaving out (not failing on) what it refuses.

    A kept workspace holds what the agent wrote: a link out of the workspace is dropped.
    """
    try:
        return tarfile.data_filter(member, dest)
    except tarfile.FilterError:
        return None


def _git_archive(folder: Path, repo: _RepoData, file: Path) -> bytes:
    """The tree of ``repo.ref`` as a tar archive (a local path, or a URL cloned bare first)."""
    git = shutil.which("git")
    if git is None:
        raise suite_error(f"{file}: [repo] git needs git on PATH", task=folder.name, key="repo")
    local = (folder / repo.git).resolve()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
    }
    with tempfile.TemporaryDirectory(prefix="keel-eval-git-") as tmp:
        if local.exists():
            git_dir = local / ".git" if (local / ".git").is_dir() else local
        else:
            git_dir = Path(tmp) / "clone.git"
            clone = ["clone", "--bare", "--quiet", repo.git, str(git_dir)]
            _git(git, clone, env, f"clone {repo.git}", folder, file)
        archive = [f"--git-dir={git_dir}", "archive", "--format=tar", f"{repo.ref}^{{tree}}"]
        return _git(git, archive, env, f"archive {repo.ref}", folder, file)


def _git(
    git: str, args: list[str], env: dict[str, str], what: str, folder: Path, file: Path
) -> bytes:
    done = subprocess.run(
        [git, "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", *args],
        capture_output=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        why = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["failed"]
        raise suite_error(
            f"{file}: [repo]: git {what}: {why[0]}",
            task=folder.name,
            file=str(file),
            key="repo",
        )
    return done.stdout


def _keel_toml(repo: bytes, task_id: str) -> dict[str, Any]:
    """The repository's own keel.toml as data ({} when it has none)."""
    with tarfile.open(fileobj=io.BytesIO(repo)) as archive:
        member = next(
            (m for m in archive.getmembers() if m.name.removeprefix("./") == CONFIG_NAME), None
        )
        handle = archive.extractfile(member) if member is not None and member.isfile() else None
        if handle is None:
            return {}
        text = handle.read().decode("utf-8", "replace")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise suite_error(
            f"task {task_id!r}: the repository's keel.toml is not valid TOML: {exc}",
            task=task_id,
            key=CONFIG_NAME,
        ) from exc
