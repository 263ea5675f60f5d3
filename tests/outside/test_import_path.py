"""Issue 22, family 1: keel's own processes never load or run what the agent wrote.

The clients run hooks with the project as the current directory, and the agent writes there.
Before issue 22 the hook command was ``python -S -c PROGRAM`` (the current directory first on
``sys.path``), so a ``select.py`` the agent wrote ran inside keel's hook, outside any sandbox,
with the user's rights; the daemon (``python -c``) loaded a planted ``shlex.py`` the same way.

The attack is built at test time: ``python -X importtime`` of each entry (the registered hook
deciding in process, the hook relayed to ``keel hookd``, the daemon itself while it answers,
``keel exec -- true``, ``keel doctor``, ``keel status``) names every module keel imports; a
module of each top-level name (``select.py``, ``json/``, ``encodings/``, ``keel/``...) is
planted in the workspace and in a subdirectory, each writing a marker into a directory outside
the workspace. Then every entry runs exactly as it runs for real (the hook: the string
``keel init`` wrote into ``.claude/settings.local.json``, through ``/bin/sh -c``, a Claude Code
payload on stdin), from both directories, also with a hostile ``PYTHONPATH=.`` and
``PYTHONSTARTUP``. No marker may appear, and keel must still answer right (a dangerous call
denied, a harmless one allowed and contained).
"""

from __future__ import annotations

import itertools
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from _support import KEEL, make_workspace
from keel.core.isolated import launcher_argv
from keel.hook.install import HOOK_PROGRAM, command_words, install_hooks, registered_hooks
from keel.hook.relay import read_record
from keel.hook.server import daemon_running, stop_daemon
from keel.sandbox.exec.contain import LAUNCHER, exec_argv, exec_backend
from keel.sandbox.exec.line import command_of

DANGEROUS = "rm -rf /"
HARMLESS = "ls"
ENTRIES = ("hook", "relayed hook", "hookd", "exec", "doctor", "status")
"""The entries whose imports are measured (see the module)."""
STARTUP = ("sitecustomize", "usercustomize")
"""What site imports at every start, if it is there."""
ALWAYS = ("keel", "encodings", *STARTUP)
"""Planted whatever the measurement says: keel itself, and what site looks for."""
PACKAGES = ("keel", "encodings")


@dataclass(frozen=True)
class Imports:
    """The modules each entry imported, in import order."""

    by_entry: dict[str, list[str]]

    def top_level(self) -> set[str]:
        """Every top-level name any entry imported, and ``ALWAYS``."""
        names = {m.split(".")[0] for mods in self.by_entry.values() for m in mods}
        return names | set(ALWAYS)

    def packages(self) -> set[str]:
        """Top-level names imported as packages (a submodule of theirs was imported too)."""
        mods = [m for mods in self.by_entry.values() for m in mods]
        return {m.split(".")[0] for m in mods if "." in m} | set(PACKAGES)

    def before_main(self) -> set[str]:
        """Top-level names the ``keel`` console script imports before its ``main`` runs."""
        mods = self.by_entry["status"]
        first = mods[: mods.index("keel.cli._entry") + 1]
        return {m.split(".")[0] for m in first} | set(STARTUP)


# -- the workspace and the processes ---------------------------------------------------------


def _env(ws: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KEEL_HOOKD")}
    env.update(CLAUDE_PROJECT_DIR=str(ws), KEEL_HOOKD_IDLE="60", **extra)
    return env


def _dot_first() -> str:
    """``PYTHONPATH`` with the current directory first (and what it held before, after)."""
    before = os.environ.get("PYTHONPATH")
    return f".:{before}" if before else "."


def _hostile(ws: Path) -> dict[str, str]:
    """What a hostile environment adds: the workspace on the import path, a startup file."""
    return {
        "PYTHONPATH": _dot_first(),
        "PYTHONSTARTUP": str(ws / "startup.py"),
        "PYTHONUSERBASE": str(ws / "userbase"),
    }


def _new_workspace(base: Path, env: dict[str, str] | None = None) -> tuple[Path, str]:
    """A git workspace with ``keel init --agent claude``; the registered PreToolUse command."""
    ws = make_workspace(base / "ws", git=True)
    (ws / "sub").mkdir(mode=0o755)
    init = subprocess.run(
        [KEEL, "init", "--agent", "claude"], cwd=ws, env=env, capture_output=True, text=True
    )
    assert init.returncode == 0, init.stderr
    settings = json.loads((ws / ".claude" / "settings.local.json").read_text())
    (group,) = settings["hooks"]["PreToolUse"]
    return ws, group["hooks"][0]["command"]


def _payload(ws: Path, cwd: Path, command: str, n: int) -> str:
    return json.dumps(
        {
            "session_id": f"import-path-{n}",
            "transcript_path": str(ws / "transcript.jsonl"),
            "cwd": str(cwd),
            "permission_mode": "default",
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": command},
            "tool_use_id": f"toolu_import_path_{n:04d}",
        }
    )


_CALLS = itertools.count(100)
"""A fresh session and tool-use id per hook call."""


def _hook(
    registered: str, ws: Path, cwd: Path, env: dict[str, str], command: str
) -> subprocess.CompletedProcess[str]:
    """The registered command, run as Claude Code runs it: ``/bin/sh -c``, payload on stdin."""
    return subprocess.run(
        ["/bin/sh", "-c", registered],
        input=_payload(ws, cwd, command, next(_CALLS)),
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _answer(proc: subprocess.CompletedProcess[str]) -> tuple[str, dict[str, object]]:
    """Claude Code's reading of a PreToolUse answer: ``(decision, hookSpecificOutput)``."""
    assert proc.returncode in (0, 2), (proc.returncode, proc.stderr)
    if proc.returncode == 2:
        return "deny", {}
    spec = json.loads(proc.stdout)["hookSpecificOutput"]
    return spec["permissionDecision"], spec


def _timed(argv: list[str]) -> list[str]:
    """``argv``, a Python command, with ``-X importtime`` right after the interpreter."""
    return [argv[0], "-X", "importtime", *argv[1:]]


def _imported(stderr: str) -> list[str]:
    """The modules in ``-X importtime`` output, in import order."""
    names: list[str] = []
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name and name != "imported package":
                names.append(name)
    return list(dict.fromkeys(names))


def _wait_for_daemon(ws: Path, marks: Path | None = None) -> int:
    """The pid of the workspace's daemon, once it answers (it starts in the background)."""
    end = time.monotonic() + 60
    while not daemon_running(ws):
        assert marks is None or _ran(marks) == []  # a daemon that ran a plant may never start
        assert time.monotonic() < end, "keel hookd did not start"
        time.sleep(0.05)
    record = read_record(str(ws / ".keel"))
    assert record is not None
    return record[0]


def _require_sandbox(state: Path) -> None:
    backend, reason = exec_backend(state_dir=str(state))
    if backend is None:
        if os.environ.get("KEEL_REQUIRE_ALL") == "1":
            pytest.fail(f"no sandbox: {reason}")
        pytest.skip(f"no sandbox: {reason}")


# -- the attack ------------------------------------------------------------------------------


def _marker_code(path: Path) -> str:
    """Python that creates ``path``; it runs even before the interpreter has ``open``."""
    return (
        "import posix\n"
        f"posix.close(posix.open({os.fsencode(path)!r}, posix.O_WRONLY | posix.O_CREAT, 0o644))\n"
    )


def _plant(where: Path, names: set[str], packages: set[str], marks: Path) -> None:
    """A module of every name in ``where``: importing it writes ``marks/NAME``."""
    for name in names:
        code = _marker_code(marks / name)
        if name in packages:
            (where / name).mkdir(exist_ok=True)
            (where / name / "__init__.py").write_text(code)
        else:
            (where / f"{name}.py").write_text(code)


def _plant_everywhere(ws: Path, names: set[str], packages: set[str], marks: Path) -> None:
    """``names`` in the workspace and its subdirectory; a startup file; a user site."""
    for where in (ws, ws / "sub"):
        _plant(where, names, packages, marks)
    (ws / "startup.py").write_text(_marker_code(marks / "PYTHONSTARTUP"))
    if "usercustomize" in names:
        version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
        site = ws / "userbase" / "lib" / version / "site-packages"
        site.mkdir(parents=True)
        _plant(site, {"usercustomize"}, set(), marks)


def _ran(marks: Path) -> list[str]:
    return sorted(p.name for p in marks.iterdir())


@pytest.fixture
def marks(tmp_path: Path) -> Path:
    """Where a planted module leaves its marker: outside the workspace."""
    path = tmp_path / "marks"
    path.mkdir()
    return path


@pytest.fixture(scope="module")
def imports(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Imports]:
    """What each entry imports, measured now (``-X importtime``) in a workspace of its own."""
    state = tmp_path_factory.mktemp("keel-state")  # conftest's per-test variable is not set yet
    _require_sandbox(state)
    base = Path(tempfile.mkdtemp(prefix="keel-test-", dir="/tmp"))
    base.chmod(0o755)
    try:
        env = _env(base / "ws", KEEL_STATE_DIR=str(state))
        ws, registered = _new_workspace(base, env)
        found = Imports(_measure(ws, registered, env))
        _check_measured(found)
        yield found
    finally:
        stop_daemon(base / "ws")
        shutil.rmtree(base, ignore_errors=True)


def _measure(ws: Path, registered: str, env: dict[str, str]) -> dict[str, list[str]]:
    hook = _timed(command_words(registered))
    inproc = {**env, "KEEL_HOOKD": "0"}

    def run(argv: list[str], run_env: dict[str, str], stdin: str = "") -> list[str]:
        proc = subprocess.run(
            argv, input=stdin, cwd=ws, env=run_env, capture_output=True, text=True, timeout=300
        )
        assert proc.returncode in (0, 1, 2), proc.stderr[-2000:]  # 1: doctor found a problem
        return _imported(proc.stderr)

    found = {"hook": run(hook, inproc, _payload(ws, ws, DANGEROUS, 0))}
    log = ws.parent / "hookd.log"
    with log.open("w") as err:
        daemon = subprocess.Popen(
            _timed(launcher_argv("hookd", str(ws), site=False)), cwd=ws, env=env, stderr=err
        )
    try:
        _wait_for_daemon(ws)
        found["relayed hook"] = run(hook, env, _payload(ws, ws, HARMLESS, 1))
        run(hook, env, _payload(ws, ws, DANGEROUS, 2))
    finally:
        stop_daemon(ws)
        daemon.wait(60)
    found["hookd"] = _imported(log.read_text())
    found["exec"] = run(_timed(exec_argv(ws, ["true"])), inproc)
    for command in ("doctor", "status"):
        found[command] = run([sys.executable, "-X", "importtime", KEEL, command], inproc)
    return found


def _check_measured(imports: Imports) -> None:
    """The attack is only as good as its list: each entry's list holds what it really needs."""
    got = imports.by_entry
    assert set(got) == set(ENTRIES)
    assert {"select", "keel.hook.main", "keel.guard", "json"} <= set(got["hook"])
    assert "select" in got["relayed hook"] and "keel.guard" not in got["relayed hook"]
    assert {"keel.hook.server", "shlex", "json", "socket", "keel.guard"} <= set(got["hookd"])
    assert "keel.cli.exec" in got["exec"] or "keel.sandbox.exec._exec" in got["exec"]
    assert {"typer", "keel.doctor"} <= set(got["doctor"]) and "typer" in got["status"]
    assert {"select", "shlex", "json", "encodings", "keel"} <= imports.top_level()
    assert "keel.cli._entry" in got["status"] and "keel" in imports.before_main()


# -- the hook, the daemon, keel exec ---------------------------------------------------------


@pytest.mark.parametrize("hostile", [False, True], ids=["clean env", "hostile env"])
@pytest.mark.parametrize("mode", ["in process", "fresh daemon"])
def test_the_registered_hook_runs_nothing_the_agent_wrote(
    imports: Imports, workdir: Path, marks: Path, mode: str, hostile: bool
) -> None:
    ws, registered = _new_workspace(workdir)
    _plant_everywhere(ws, imports.top_level(), imports.packages(), marks)
    env = _env(ws, **({"KEEL_HOOKD": "0"} if mode == "in process" else {}))
    env.update(_hostile(ws) if hostile else {})
    try:
        for cwd in (ws / "sub", ws):  # the first call (from the subdirectory) starts the daemon
            denied = _hook(registered, ws, cwd, env, DANGEROUS)
            allowed = _hook(registered, ws, cwd, env, HARMLESS)
            if mode == "fresh daemon" and cwd == ws / "sub":
                pid = _wait_for_daemon(ws, marks)
                assert Path(f"/proc/{pid}/cwd").resolve() == (ws / ".keel").resolve()
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                assert cmdline[1:3] == [b"-I", b"-S"]
            assert _ran(marks) == []
            assert _answer(denied)[0] == "deny", denied.stdout
            decision, spec = _answer(allowed)
            assert decision == "allow", allowed.stdout
            line = spec["updatedInput"]["command"]  # pyright: ignore[reportIndexIssue]
            assert command_of(str(line)) == HARMLESS
            ran = subprocess.run(
                ["/bin/bash", "-c", str(line)], cwd=cwd, env=env, capture_output=True, text=True
            )
            assert ran.returncode == 0, ran.stderr
            assert "select.py" in ran.stdout  # `ls` ran, contained, in the client's directory
            assert _ran(marks) == []
        if mode == "fresh daemon":  # the calls were the daemon's to answer
            words = _timed(command_words(registered))
            proc = subprocess.run(
                words, input=_payload(ws, ws / "sub", DANGEROUS, 9), cwd=ws / "sub", env=env,
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            assert _answer(proc)[0] == "deny"
            assert "keel.guard" not in _imported(proc.stderr)  # relayed, not decided here
        assert _ran(marks) == []
    finally:
        stop_daemon(ws)


def test_keel_exec_runs_nothing_the_agent_wrote(
    imports: Imports, workdir: Path, marks: Path
) -> None:
    ws, _ = _new_workspace(workdir)
    _plant_everywhere(ws, imports.top_level(), imports.packages(), marks)
    for env in (_env(ws), _env(ws, **_hostile(ws))):
        for cwd in (ws, ws / "sub"):
            proc = subprocess.run(
                exec_argv(ws, ["/bin/sh", "-c", "pwd"]), cwd=cwd, env=env, capture_output=True,
                text=True, timeout=120,
            )  # fmt: skip
            assert proc.returncode == 0, proc.stderr
            assert proc.stdout.strip() == str(cwd)
    assert _ran(marks) == []


# -- keel's command line ---------------------------------------------------------------------


def test_keel_doctor_and_status_run_nothing_the_agent_wrote(
    imports: Imports, workdir: Path, marks: Path
) -> None:
    ws, _ = _new_workspace(workdir)
    _plant_everywhere(ws, imports.top_level(), imports.packages(), marks)
    env = _env(ws, KEEL_HOOKD="0")
    try:
        for cwd in (ws, ws / "sub"):
            doctor = subprocess.run(
                [KEEL, "doctor", "--json"], cwd=cwd, env=env, capture_output=True, text=True
            )
            assert _ran(marks) == []
            report = json.loads(doctor.stdout)
            assert doctor.returncode == 0 and report["ok"], doctor.stdout
            probe = [c for c in report["clients"][0]["checks"] if c["name"] == "probe"]
            assert probe[0]["status"] == "ok"
            status = subprocess.run([KEEL, "status"], cwd=cwd, env=env, capture_output=True)
            assert status.returncode == 0 and b"claude guarded" in status.stdout
        assert _ran(marks) == []
    finally:
        stop_daemon(ws)


def test_the_keel_command_restarts_isolated_under_a_hostile_pythonpath(
    imports: Imports, workdir: Path, marks: Path
) -> None:
    """``PYTHONPATH=.``: what keel imports once its ``main`` runs never comes from the workspace.

    What the interpreter imports before any of keel's code runs (``encodings``, ``keel``
    itself) is not planted: no program can defend that from inside; only the ``python -I`` of
    every command keel registers or starts does (the tests above plant those too).
    """
    ws, _ = _new_workspace(workdir)
    later = imports.top_level() - imports.before_main()
    assert {"typer", "json", "shlex"} <= later
    _plant_everywhere(ws, later, imports.packages(), marks)
    env = _env(ws, KEEL_HOOKD="0", PYTHONPATH=_dot_first(), PYTHONSTARTUP=str(ws / "startup.py"))
    for cwd in (ws, ws / "sub"):
        status = subprocess.run([KEEL, "status"], cwd=cwd, env=env, capture_output=True)
        check = subprocess.run(
            [KEEL, "policy", "check", "--json", "--", DANGEROUS], cwd=cwd, env=env,
            capture_output=True, text=True,
        )  # fmt: skip
        assert _ran(marks) == []
        assert status.returncode == 0 and b"claude guarded" in status.stdout, status.stderr
        assert json.loads(check.stdout)["decision"] == "deny", check.stdout
    assert _ran(marks) == []


# -- a registration of before issue 22 -------------------------------------------------------


def _old_registration(ws: Path) -> None:
    """Register keel's hooks as keel did before issue 22: ``python -S -c PROGRAM``."""
    parent = str(Path(LAUNCHER).parent.parent)
    program = f"import sys; sys.path.insert(0, {parent!r}); from keel.hook.main import main; main()"
    install_hooks(ws, "claude", keel_command=[sys.executable, "-S", "-c", program])


def test_doctor_reports_a_registration_of_before_issue_22_and_init_replaces_it(
    workdir: Path, marks: Path
) -> None:
    ws, _ = _new_workspace(workdir)
    _old_registration(ws)
    (old,) = [c for _, e, c in registered_hooks(ws, "claude") if e == "PreToolUse"]
    _plant(ws, {"select"}, set(), marks)
    env = _env(ws, KEEL_HOOKD="0")
    # the control: the old command runs the agent's select.py (the attack works)
    _hook(old, ws, ws, env, DANGEROUS)
    assert _ran(marks) == ["select"]
    (marks / "select").unlink()

    doctor = subprocess.run([KEEL, "doctor", "--json"], cwd=ws, env=env, capture_output=True)
    assert _ran(marks) == []  # doctor reports the command; it does not run it
    report = json.loads(doctor.stdout)
    checks = {c["name"]: c for c in report["clients"][0]["checks"]}
    assert doctor.returncode == 1 and not report["ok"]
    assert checks["command"]["status"] == "fail" and "sys.path" in checks["command"]["detail"]
    assert checks["command"]["fix"] == "keel init --agent claude"
    assert checks["probe"]["status"] == "fail" and "not run" in checks["probe"]["detail"]
    status = subprocess.run([KEEL, "status"], cwd=ws, env=env, capture_output=True, text=True)
    assert "claude NOT guarded" in status.stdout and "sys.path" in status.stdout

    subprocess.run([KEEL, "init", "--agent", "claude"], cwd=ws, env=env, check=True)
    commands = [c for _, _, c in registered_hooks(ws, "claude")]
    assert len(commands) == len(
        json.loads((ws / ".claude/settings.local.json").read_text())["hooks"]
    )
    assert all(command_words(c)[1:5] == ["-I", "-S", "-c", HOOK_PROGRAM] for c in commands)
    assert _answer(_hook(commands[0], ws, ws, env, DANGEROUS))[0] == "deny"
    assert _ran(marks) == []
    again = subprocess.run([KEEL, "doctor", "--json"], cwd=ws, env=env, capture_output=True)
    assert again.returncode == 0 and json.loads(again.stdout)["ok"]
    # and --remove finds an old registration as well
    _old_registration(ws)
    assert len(registered_hooks(ws, "claude")) == len(commands)
    subprocess.run([KEEL, "init", "--agent", "claude", "--remove"], cwd=ws, env=env, check=True)
    assert registered_hooks(ws, "claude") == []


# -- the post-tool check and a stale keel exec line ------------------------------------------


def test_a_keel_exec_line_of_before_issue_22_is_not_a_bypass(workdir: Path) -> None:
    """A call answered before an upgrade: ``python -S <keel>/sandbox/_launch.py exec ...``."""
    before = str(Path(LAUNCHER).parent / "sandbox" / "_launch.py")
    py, ws = sys.executable, str(workdir)
    old = [py, "-S", before, "exec", "--workspace", ws, "--timeout", "5", "--", "bash", "-c", "ls"]
    assert command_of(shlex.join(old)) == "ls"
    assert command_of(shlex.join([py, "-S", before, "exec", "--", "bash", "-c", "x"])) == "x"
    for words in (
        [py, "-s", before, "exec", "--", "bash", "-c", "ls"],
        [py, "-I", "-S", before, "exec", "--", "bash", "-c", "ls"],
        [py, "-S", before, "run", "--", "bash", "-c", "ls"],
        [py, "-S", before, "exec", "bash", "-c", "ls"],
        [py, "-S", before, "exec", "--", "sh", "-c", "ls"],
        [py, "-S", LAUNCHER, "exec", "--", "bash", "-c", "ls"],
    ):
        assert command_of(shlex.join(words)) is None, words
