"""The guard and containment: commands that must run contained, a client that ignores it."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
from guard_helpers import events_of, open_guard

from keel.core.calls import ToolCall, ToolResult
from keel.core.events import DiagnosticPayload
from keel.guard import Guard, _as_written, containment  # pyright: ignore[reportPrivateUsage]
from keel.journal import open_journal
from keel.sandbox.exec.line import command_of, encode


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
        _ran(guard, encode(str(workdir), "ls"), "t1")  # as rewritten: fine
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
        _ran(guard, encode(str(workdir), "pytest -q"), "p")
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


def _always(workdir: Path) -> Guard:
    (workdir / "keel.toml").write_text('[sandbox]\ncontain = "always"\n')
    g = open_guard(workdir)
    g.contain, g.contain_reason = False, "no bwrap here"
    return g


def test_contain_always_without_a_sandbox_answers_exactly(workdir: Path) -> None:
    g = _always(workdir)
    try:
        got = g.decide(ToolCall("Bash", "exec", command="ls", tool_use_id="t1"))
        assert got.to_dict() == {
            "decision": "deny",
            "rule": "sandbox.unavailable",
            "reason": '[sandbox] contain = "always" but no sandbox works here: no bwrap here',
            "suggestion": "Run `keel sandbox check`, or set [sandbox] contain = "
            '"auto" in keel.toml.',
        }
        # only shell commands need the sandbox; a denied command keeps the policy's rule
        assert g.decide(ToolCall("Read", "read", paths=("a.txt",))).allowed
        denied = g.decide(ToolCall("Bash", "exec", command="git push --force origin main"))
        assert denied.decision == "deny" and denied.rule != "sandbox.unavailable"
        g.contain = True
        assert g.decide(ToolCall("Bash", "exec", command="ls")).allowed
    finally:
        g.close()


def test_contain_auto_without_a_sandbox_allows_shell_commands(guard: Guard) -> None:
    guard.contain = False
    assert guard.config.sandbox.contain == "auto"
    assert guard.decide(ToolCall("Bash", "exec", command="ls")).allowed


def test_a_bypassed_sandbox_answers_exactly(guard: Guard, workdir: Path) -> None:
    guard.contain = True
    long = "echo " + "x" * 300
    guard.observe(
        ToolResult(
            "Bash", "exec", True, tool_use_id="t0", call=ToolCall("Bash", "exec", command=long)
        )
    )
    assert guard.state.containment_broken == long[:200]
    got = guard.decide(ToolCall("Bash", "exec", command="ls", tool_use_id="t1"))
    assert got.to_dict() == {
        "decision": "deny",
        "rule": "sandbox.bypassed",
        "reason": "the client ran a shell command outside keel's sandbox in this session "
        f"({long[:200]}); every later shell command is denied",
        "suggestion": "Start a new session; check the client's version and keel doctor.",
    }
    denied = guard.decide(ToolCall("Bash", "exec", command="git push --force origin main"))
    assert denied.rule != "sandbox.bypassed"  # the policy's own deny comes first
    guard.close()
    errors = [e for e in events_of(workdir) if e.kind == "error"]
    assert [e.payload.data for e in errors] == [  # pyright: ignore[reportAttributeAccessIssue]
        {"event": "sandbox.bypassed", "command": long, "tool": "Bash"}
    ]
    again = open_guard(workdir)  # the next hook process of the session remembers it
    assert again.state.containment_broken == long[:200]
    again.close()


@pytest.mark.parametrize(
    ("rewrite", "result"),
    [
        (False, ToolResult("Bash", "exec", True, call=ToolCall("Bash", "exec", command="ls"))),
        (True, ToolResult("Bash", "exec", True)),
        (True, ToolResult("Bash", "exec", True, call=ToolCall("Bash", "exec", command=""))),
        (True, ToolResult("Read", "read", True, call=ToolCall("Bash", "exec", command="ls"))),
        (True, "contained"),
    ],
    ids=["not-rewriting", "no-call", "no-command", "not-exec", "contained"],
)
def test_no_bypass_is_seen_where_there_is_none(
    guard: Guard, workdir: Path, rewrite: bool, result: ToolResult | str
) -> None:
    guard.contain = rewrite
    if isinstance(result, str):
        line = encode(str(workdir), "ls")
        result = ToolResult("Bash", "exec", True, call=ToolCall("Bash", "exec", command=line))
    guard.observe(result)
    assert guard.state.containment_broken is None
    assert guard.decide(ToolCall("Bash", "exec", command="ls")).allowed


def test_inside_keel_wrap_nothing_is_a_bypass(guard: Guard) -> None:
    guard.contain, guard.inside_sandbox = True, True
    guard.observe(ToolResult("Bash", "exec", True, call=ToolCall("Bash", "exec", command="ls")))
    assert guard.state.containment_broken is None


def test_containment_off_and_auto() -> None:
    """``containment`` for a config: off never contains; otherwise the exec backend decides."""
    from keel.config import parse_config
    from keel.sandbox.exec.contain import exec_backend

    off = parse_config('[sandbox]\ncontain = "off"\n')
    assert containment(off) == (False, '[sandbox] contain = "off"')  # type: ignore[arg-type]
    for backend in ("auto", "landlock"):
        auto = parse_config(f'[sandbox]\nbackend = "{backend}"\n')
        name, reason = exec_backend(backend)
        assert containment(auto) == (name is not None, reason)  # type: ignore[arg-type]


def test_a_contained_command_round_trips(workdir: Path) -> None:
    from keel.sandbox.exec.contain import exec_argv

    for command in ("ls -la", "--", "a -- b", "echo 'x y'"):
        line = encode(str(workdir), command)
        assert shlex.split(line) == exec_argv(str(workdir), ["bash", "-c", command])
        assert command_of(line) == command
    timed = encode(str(workdir), "ls", timeout=5)
    assert shlex.split(timed) == exec_argv(str(workdir), ["bash", "-c", "ls"], timeout=5)
    assert command_of(timed) == "ls"


def test_other_lines_are_not_contained(workdir: Path) -> None:
    from keel.sandbox.exec.contain import LAUNCHER

    py, ws, li = sys.executable, str(workdir), ["-I", "-S", LAUNCHER]
    good = [py, *li, "exec", "--workspace", ws, "--", "bash", "-c", "ls"]
    assert command_of(shlex.join(good)) == "ls"
    bad = [
        [py, "-I", "-s", LAUNCHER, "exec", "--workspace", ws, "--", "bash", "-c", "ls"],
        [py, "-S", "-I", LAUNCHER, "exec", "--workspace", ws, "--", "bash", "-c", "ls"],
        [py, "-S", LAUNCHER, "exec", "--workspace", ws, "--", "bash", "-c", "ls"],
        [py, *li, "run", "--workspace", ws, "--", "bash", "-c", "ls"],
        [py, "-I", "-S", "/tmp/other.py", "exec", "--workspace", ws, "--", "bash", "-c", "ls"],
        [py, *li, "exec", "--workspace", ws, "--", "sh", "-c", "ls"],
        [py, *li, "exec", "--workspace", ws, "--", "bash", "-C", "ls"],
        [py, *li, "exec", "--workspace", ws, "--", "bash", "-c", "ls", "x"],
        [py, *li, "exec", "--workspace", ws, "bash", "-c", "ls", "x"],
        [py, *li, "exec", "--", "bash", "-c"],
        [*li, "exec", "--workspace", ws, "--", "bash", "-c", "ls"],
    ]
    for words in bad:
        assert command_of(shlex.join(words)) is None, words
    assert command_of("echo 'unclosed") is None
    short = [py, *li, "exec", "--", "bash", "-c", "ls"]  # nine words are enough
    assert command_of(shlex.join(short)) == "ls"


def test_a_result_is_seen_as_the_agent_wrote_it(workdir: Path) -> None:
    line = encode(str(workdir), "pytest -q")
    with_args = ToolCall("Bash", "exec", command=line, args={"command": line, "timeout": 5})
    got = _as_written(ToolResult("Bash", "exec", True, output="o", call=with_args))
    assert got.call is not None and got.call.command == "pytest -q"
    assert got.call.args == {"command": "pytest -q", "timeout": 5}
    assert (got.output, got.tool) == ("o", "Bash")
    no_args = ToolCall("Bash", "exec", command=line, args={"cmd": line})
    got = _as_written(ToolResult("Bash", "exec", True, call=no_args))
    assert got.call is not None and got.call.command == "pytest -q"
    assert got.call.args == {"cmd": line}
    plain = ToolResult("Bash", "exec", True, call=ToolCall("Bash", "exec", command="ls"))
    assert _as_written(plain) is plain
    bare = ToolResult("Bash", "exec", True)
    assert _as_written(bare) is bare
    empty = ToolResult("Bash", "exec", True, call=ToolCall("Bash", "exec", command=""))
    assert _as_written(empty) is empty


def test_what_a_contained_command_left_behind_is_journaled_and_told(workdir: Path) -> None:
    from keel.sandbox.exec._control import REPORTS, write_report

    report = {"quarantined": [".git/hooks/pre-commit"], "restored": [], "prompts": []}
    assert write_report(str(workdir), "0123abcd", json.dumps(report))
    guard = _guard(workdir, contain=True)
    try:
        line = encode(str(workdir), "make", report="0123abcd")
        call = ToolCall("Bash", "exec", command=line, tool_use_id="t1")
        told = guard.observe(ToolResult("Bash", "exec", True, tool_use_id="t1", call=call))
    finally:
        guard.close()
    assert told is not None
    assert (told.level, told.detector) == ("correct", "sandbox.left_behind")
    assert ".git/hooks/pre-commit" in told.message and "quarantine" in told.message
    assert told.evidence == {
        "quarantined": [".git/hooks/pre-commit"],
        "restored": [],
        "prompts": [],
    }
    assert not (workdir / REPORTS / "0123abcd.json").exists()  # read once
    events = events_of(workdir, "s")
    diagnostics = [e.payload for e in events if isinstance(e.payload, DiagnosticPayload)]
    assert [e.kind for e in events if e.kind == "diagnostic"] == ["diagnostic"]
    assert [(d.detector, d.level) for d in diagnostics] == [("sandbox.left_behind", "correct")]


@pytest.mark.parametrize(
    ("kind", "words"),
    [
        ("exec", "make"),  # no --report: nothing to read
        ("read", "make"),  # not a shell command's result
    ],
)
def test_a_report_is_read_only_for_the_exec_line_that_names_it(
    workdir: Path, kind: str, words: str
) -> None:
    from keel.sandbox.exec._control import REPORTS, write_report

    assert write_report(str(workdir), "0123abcd", json.dumps({"quarantined": ["x"]}))
    guard = _guard(workdir, contain=True)
    try:
        report = "0123abcd" if kind == "read" else None
        line = encode(str(workdir), words, report=report)
        call = ToolCall("Bash", kind, command=line, tool_use_id="t1")  # type: ignore[arg-type]
        told = guard.observe(ToolResult("Bash", kind, True, tool_use_id="t1", call=call))  # type: ignore[arg-type]
    finally:
        guard.close()
    assert told is None
    assert (workdir / REPORTS / "0123abcd.json").exists()
