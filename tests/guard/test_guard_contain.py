"""The guard and containment: commands that must run contained, a client that ignores it."""

from __future__ import annotations

from pathlib import Path

from keel.core.calls import ToolCall, ToolResult
from keel.guard import Guard, contained_command
from keel.journal import open_journal


def _guard(root: Path, contain: bool) -> Guard:
    guard = Guard.open(root, session_id="s", agent="claude", monitor=False, checkpoints=False)
    guard.contain = contain
    return guard


def _ran(guard: Guard, command: str, tid: str) -> None:
    call = ToolCall("Bash", "exec", command=command, tool_use_id=tid)
    guard.observe(ToolResult("Bash", "exec", True, tool_use_id=tid, call=call))


def test_a_command_that_ran_outside_the_sandbox_stops_later_shell_commands(
    workdir: Path,
) -> None:
    guard = _guard(workdir, contain=True)
    try:
        assert guard.decide(ToolCall("Bash", "exec", command="ls", tool_use_id="t1")).allowed
        _ran(guard, contained_command(str(workdir), "ls"), "t1")  # as rewritten: fine
        assert guard.decide(ToolCall("Bash", "exec", command="ls", tool_use_id="t2")).allowed
        _ran(guard, "ls", "t2")  # the client ran it as written: the rewrite was ignored
        later = guard.decide(ToolCall("Bash", "exec", command="ls", tool_use_id="t3"))
        assert (later.decision, later.rule) == ("deny", "sandbox.bypassed")
        read = guard.decide(ToolCall("Read", "read", paths=(str(workdir / "a"),)))
        assert read.allowed  # only shell commands depend on the sandbox
    finally:
        guard.close()
    with open_journal(workdir) as journal:
        errors = [e.payload.data for e in journal.events(kinds=["error"])]  # pyright: ignore[reportAttributeAccessIssue]
    assert [e["event"] for e in errors] == ["sandbox.bypassed"]
    again = Guard.open(workdir, session_id="s", monitor=False, checkpoints=False)
    try:  # the next hook process of the session remembers it
        again.contain = True
        assert again.decide(ToolCall("Bash", "exec", command="pwd")).rule == "sandbox.bypassed"
    finally:
        again.close()


def test_the_monitor_sees_the_command_as_the_agent_wrote_it(workdir: Path) -> None:
    (workdir / "keel.toml").write_text('[gates]\nrequired = ["pytest -q"]\n')
    guard = Guard.open(workdir, session_id="g", agent="claude", checkpoints=False)
    guard.contain = True
    try:
        assert guard.decide(ToolCall("Bash", "exec", command="pytest -q", tool_use_id="p")).allowed
        _ran(guard, contained_command(str(workdir), "pytest -q"), "p")
        assert guard.gate_finish() is None  # the gate ran, although as a keel exec line
    finally:
        guard.close()


def test_contain_always_without_a_sandbox_denies_shell_commands(workdir: Path) -> None:
    (workdir / "keel.toml").write_text('[sandbox]\ncontain = "always"\n')
    guard = _guard(workdir, contain=False)
    try:
        denied = guard.decide(ToolCall("Bash", "exec", command="ls"))
        assert (denied.decision, denied.rule) == ("deny", "sandbox.unavailable")
    finally:
        guard.close()


def test_contain_off_never_contains(workdir: Path) -> None:
    (workdir / "keel.toml").write_text('[sandbox]\ncontain = "off"\n')
    guard = Guard.open(workdir, session_id="o", monitor=False, checkpoints=False)
    try:
        assert guard.contain is False and guard.policy.contained is False
    finally:
        guard.close()


def _state(pid: int) -> str:
    raw = Path(f"/proc/{pid}/stat").read_bytes()
    return raw[raw.rindex(b")") + 2 :].split()[0].decode()


def _contained_children(root: Path) -> list[int]:
    from keel.sandbox.os._registry import records

    pids: list[int] = []
    for _, data in records(str(root)):
        pids += [p for p, _ in data.get("processes", [])]
    return pids


def test_a_background_contained_command_is_frozen_while_a_file_tool_acts(workdir: Path) -> None:
    import os
    import subprocess
    import sys
    import time

    from keel.sandbox.exec.contain import exec_argv

    (workdir / "keel.toml").write_text("[policy]\nnetwork_allow = []\n")
    (workdir / "real").mkdir()
    (workdir / "real" / "notes.txt").write_text("hello\n")
    flipper = (  # what an attacker leaves running: swap a directory for a symlink, forever
        "while true; do mv real real.d && ln -s /etc real; rm real && mv real.d real; done"
    )
    env = {**os.environ, "PATH": os.environ["PATH"]}
    proc = subprocess.Popen(
        exec_argv(workdir, ["bash", "-c", flipper], python=sys.executable),
        cwd=workdir,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        end = time.monotonic() + 30
        while not _contained_children(workdir) and time.monotonic() < end:
            time.sleep(0.05)
        assert _contained_children(workdir), "the contained command did not start"
        guard = _guard(workdir, contain=True)
        try:
            allowed = 0
            for n in range(20):
                tid = f"r{n}"
                path = str(workdir / "real" / "notes.txt")
                decision = guard.decide(ToolCall("Read", "read", paths=(path,), tool_use_id=tid))
                states = [_state(p) for p in _contained_children(workdir)]
                if decision.allowed:  # stopped while the client uses the path it judged
                    allowed += 1
                    assert states and all(st == "T" for st in states), states
                    real = os.path.realpath(path)
                    assert real.startswith(str(workdir.resolve()) + "/"), real
                    guard.observe(ToolResult("Read", "read", True, tool_use_id=tid))
                # a deny (the path led outside at that moment) never leaves anything stopped
                assert all(_state(p) != "T" for p in _contained_children(workdir))
            assert allowed > 0
        finally:
            guard.close()
    finally:
        from keel.sandbox import kill_contained

        kill_contained(str(workdir))
        proc.wait(timeout=30)
