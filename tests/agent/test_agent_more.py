"""More of issue 13, by effect: require_plan, premature commands, replan and correct, limits,
``--json``, replay with the network off and the user's tree untouched, the pinned zone, the live
view, and usage errors. ``keel run`` against the fake Chat Completions server on 127.0.0.1.
"""

from __future__ import annotations

import hashlib
import json
import os
import pty
import re
import select
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import (
    KEEL_TOML,
    REPORT,
    data_of,
    headers_plan,
    replace_patch,
    run_json,
    sales_workspace,
    session_events,
)
from fake_chat import FakeChat, last_user, tool_texts

from _support import KEEL, keel, keel_env
from keel.core.calls import ToolCall
from keel.core.events import ToolResultPayload
from keel.guard import Guard

TASK = "report.py must print the total of the sales column of data/sales.csv"
FIXED = REPORT.replace('"sales"', '"revenue"')
ANSI = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07]*\x07|[@-Z\\-_])")


def _tree(root: Path) -> dict[str, tuple[int, str | None]]:
    """Every path under ``root`` (``.keel`` included): its mode and its bytes' hash.

    SQLite's ``-wal``/``-shm`` companions of the journal are left out: a reader may create
    them (empty); the journal itself (``journal.db``) is compared byte for byte.
    """
    found: dict[str, tuple[int, str | None]] = {}
    for path in sorted(root.rglob("*")):
        if path.name.endswith(("-wal", "-shm")) and path.parent.name == ".keel":
            continue
        st = path.lstat()
        digest = None
        if path.is_file() and not path.is_symlink():
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
        elif path.is_symlink():
            digest = os.readlink(path)
        found[str(path.relative_to(root))] = (st.st_mode, digest)
    return found


def _rules(root: Path, session: str) -> list[tuple[str | None, str, str]]:
    """The session's decisions: (tool-use id, decision, rule)."""
    return [
        (
            getattr(e.payload, "tool_use_id", None),
            getattr(e.payload, "decision", ""),
            getattr(e.payload, "rule", ""),
        )
        for e in session_events(root, session, "decision")
    ]


def _moves(root: Path, session: str) -> list[dict[str, Any]]:
    """The session's journaled phase transitions."""
    found = [data_of(e) for e in session_events(root, session, "plan")]
    return [d for d in found if d.get("event") == "agent.phase"]


class StepChat(FakeChat):
    """Scripted by keel's step number (in the state message): it survives summarised turns."""

    def turn_index(self, body: dict[str, Any]) -> int:
        found = re.search(r"^Phase: \w+\. Step (\d+) of", last_user(body), re.MULTILINE)
        assert found is not None, last_user(body)
        return int(found.group(1)) - 1


# -- 1. [agent] require_plan = false --------------------------------------------------------


@pytest.mark.parametrize("require_plan", [False, True], ids=["require_plan_false", "default"])
def test_require_plan_false_allows_a_write_after_understand_the_default_refuses_it(
    workdir: Path, require_plan: bool
) -> None:
    root = sales_workspace(workdir, gates=False)
    if not require_plan:
        (root / "keel.toml").write_text("[agent]\nrequire_plan = false\n")
    before = (root / "report.py").read_bytes()
    turns = [
        [("read_file", {"path": "report.py"})],
        [("write_file", {"path": "report.py", "content": FIXED})],
        [("finish", {"summary": "uses revenue"})],
    ]
    with FakeChat(turns) as fake:
        code, result, err = run_json(root, fake.url, TASK)
    assert code == 0, (result, err)
    written = tool_texts(fake.requests[2])[-1]
    rules = _rules(root, result["session_id"])
    if require_plan:
        assert (root / "report.py").read_bytes() == before
        assert "agent.premature_commitment" in written
        assert ("s2.0", "deny", "agent.premature_commitment") in rules
        assert result["files_changed"] == []
    else:
        assert (root / "report.py").read_text() == FIXED
        assert written.startswith("wrote ")
        assert result["files_changed"] == ["report.py"]
        assert all(rule != "agent.premature_commitment" for _, _, rule in rules)
        first = _moves(root, result["session_id"])[0]
        assert (first["from"], first["to"]) == ("understand", "implement")
        assert "require_plan = false" in first["why"]


# -- 2. premature commitment: write_file and file-changing commands --------------------------


def test_writes_and_changing_commands_before_implement_are_refused_read_only_runs_are_not(
    workdir: Path,
) -> None:
    root = sales_workspace(workdir, gates=False)
    before = _tree(root)
    turns = [
        [("write_file", {"path": "early.txt", "content": "too early\n"})],
        [("run", {"command": "touch marker.txt"})],
        [("run", {"command": "echo hi > out.txt"})],
        [("run", {"command": "sed -i s/sales/revenue/ report.py"})],
        [("run", {"command": "ls"})],
        [("run", {"command": "cat data/sales.csv"})],
        [("run_plan", {"plan": headers_plan("sales")})],  # fails: stays in plan
        [("write_file", {"path": "early.txt", "content": "still too early\n"})],
        [("run", {"command": "rm report.py"})],
        [("finish", {"summary": "nothing to do"})],
    ]
    with FakeChat(turns) as fake:
        code, result, err = run_json(root, fake.url, TASK)
    assert code == 0, (result, err)
    after = _tree(root)
    assert {k: v for k, v in after.items() if not k.startswith(".keel")} == {
        k: v for k, v in before.items() if not k.startswith(".keel")
    }
    results = [tool_texts(body)[-1] for body in fake.requests[1:]]
    for index in (0, 1, 2, 3, 7, 8):  # each refused, telling the model to plan first
        assert results[index].startswith("keel denied this call [agent.premature_commitment]")
        assert "nothing was changed" in results[index] and "run_plan" in results[index]
    assert "phase 'plan'" in results[7] and "phase 'plan'" in results[8]
    assert results[4] == "check.py\ndata\nreport.py\n(exit code 0)\n"  # ls ran
    assert results[5] == "region,revenue\nnorth,10\nsouth,5\n(exit code 0)\n"  # and cat
    rules = _rules(root, result["session_id"])
    premature = [use for use, decision, rule in rules if rule == "agent.premature_commitment"]
    assert premature == ["s1.0", "s2.0", "s3.0", "s4.0", "s8.0", "s9.0"]
    assert all(decision == "deny" for _, decision, r in rules if r == "agent.premature_commitment")
    ran = {use for use, decision, _ in rules if decision == "allow"}
    assert {"s5.0", "s6.0"} <= ran
    outputs = [e.payload for e in session_events(root, result["session_id"], "tool.result")]
    assert {getattr(p, "tool_use_id", None) for p in outputs}.isdisjoint(premature)


# -- 3. monitor guidance: replan forces plan, correct is the denial's reason ----------------


def test_replan_forces_the_run_back_to_plan(workdir: Path) -> None:
    root = sales_workspace(workdir, gates=False)
    (root / "keel.toml").write_text("[monitor]\nalternation_steps = 4\n")
    a, b = ("read_file", {"path": "report.py"}), ("read_file", {"path": "data/sales.csv"})
    turns = [
        [("run_plan", {"plan": headers_plan("revenue")})],  # holds: implement
        [a],
        [b],
        [a],
        [b],  # A-B-A-B: the monitor asks for a new plan
        [("write_file", {"path": "early.txt", "content": "x\n"})],  # refused in plan
        [("run_plan", {"plan": headers_plan("revenue")})],  # a new plan: implement again
        [("write_file", {"path": "report.py", "content": FIXED})],
        [("finish", {"summary": "uses revenue"})],
    ]
    with FakeChat(turns) as fake:
        code, result, err = run_json(root, fake.url, TASK)
    assert code == 0, (result, err)
    assert last_user(fake.requests[4]).startswith("Phase: implement.")
    denied = tool_texts(fake.requests[5])[-1]
    assert denied.startswith("keel denied this call [monitor.alternation]")
    assert last_user(fake.requests[5]).startswith("Phase: plan.")
    assert "alternate" in last_user(fake.requests[5])  # the guidance, in the state message
    assert "agent.premature_commitment" in tool_texts(fake.requests[6])[-1]
    assert not (root / "early.txt").exists()
    assert last_user(fake.requests[7]).startswith("Phase: implement.")
    assert (root / "report.py").read_text() == FIXED
    moves = [(m["from"], m["to"]) for m in _moves(root, result["session_id"])]
    assert moves == [
        ("understand", "plan"),
        ("plan", "implement"),
        ("implement", "plan"),
        ("plan", "implement"),
        ("implement", "verify"),
        ("verify", "done"),
    ]
    forced = _moves(root, result["session_id"])[2]
    assert forced["step"] == 5 and "the monitor asked for a new plan" in forced["why"]


def test_correct_guidance_denies_the_call_with_its_reason_in_the_next_request(
    workdir: Path,
) -> None:
    root = sales_workspace(workdir, gates=False)
    (root / "keel.toml").write_text(
        "[agent]\nrequire_plan = false\n\n[monitor]\nfailure_repeats = 2\n"
    )
    (root / "fail.py").write_text(
        'import sys\n\nopen("count.txt", "a").write("ran\\n")\nsys.exit(3)\n'
    )
    again = [("run", {"command": "python3 fail.py"})]
    with FakeChat([again, again, again, [("finish", {"summary": "gave up"})]]) as fake:
        code, result, err = run_json(root, fake.url, TASK)
    assert code == 0, (result, err)
    assert (root / "count.txt").read_text() == "ran\nran\n"  # the third call never ran
    assert "keel guidance (correct)" in tool_texts(fake.requests[2])[-1]
    denied = tool_texts(fake.requests[3])[-1]
    assert denied.startswith("keel denied this call [monitor.failure]")
    assert "`python3 fail.py` already failed 2 times in a row" in denied
    assert "already failed 2 times" in last_user(fake.requests[3])
    assert ("s3.0", "deny", "monitor.failure") in _rules(root, result["session_id"])


# -- 4. limits: --max-steps, and the per-call limit -----------------------------------------


def test_max_steps_ends_the_run_with_exit_1_and_the_reason(workdir: Path) -> None:
    root = sales_workspace(workdir, gates=False)
    reads = [[("read_file", {"path": p})] for p in ("report.py", "check.py", "data/sales.csv")]
    with FakeChat(reads) as fake:
        code, result, _ = run_json(root, fake.url, TASK, "--max-steps", "2")
        text = keel("run", TASK, "--model", "openai:fake", "--base-url", fake.url,
                    "--non-interactive", "--max-steps", "2", workspace=root)  # fmt: skip
    assert code == 1 and result["exit_code"] == 1
    assert result["outcome"] == "failed"
    assert result["reason"] == "the run reached --max-steps (2)"
    assert result["steps"] == 2 and len(fake.requests) == 4  # two per run, no third
    assert text.returncode == 1
    assert "the run reached --max-steps (2)" in text.stdout
    ends = [data_of(e) for e in session_events(root, result["session_id"], "session.end")]
    assert ends[-1]["reason"] == "the run reached --max-steps (2)"


def _running(marker: str) -> list[int]:
    """Processes whose command line mentions ``marker``."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            line = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if marker.encode() in line:
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("contain", ["auto", "off"])
def test_a_call_over_the_configured_limit_is_killed_and_reported(
    workdir: Path, contain: str
) -> None:
    root = sales_workspace(workdir, gates=False)
    (root / "keel.toml").write_text(
        f'[agent]\ntool_timeout_seconds = 1\n\n[sandbox]\ncontain = "{contain}"\n'
    )
    marker = "61.73"  # a sleep no other test runs
    turns = [[("run", {"command": f"sleep {marker}"})], [("finish", {"summary": "slow"})]]
    with FakeChat(turns) as fake:
        code, result, err = run_json(root, fake.url, TASK)
    assert code == 0, (result, err)
    told = tool_texts(fake.requests[1])[-1]
    assert "timed out after 1 s" in told, told
    ran = next(e.payload for e in session_events(root, result["session_id"], "tool.result"))
    assert isinstance(ran, ToolResultPayload)
    assert (ran.tool, ran.ok, ran.exit_code) == ("run", False, 124)
    assert ran.error == "timed out after 1 s"
    assert _running(f"sleep {marker}") == []  # killed, not left behind


# -- 5. --json: one final object -------------------------------------------------------------


def test_json_prints_exactly_one_final_object(workdir: Path) -> None:
    root = sales_workspace(workdir)
    (root / "keel.toml").write_text(
        KEEL_TOML + "\n[model]\ninput_price_per_mtok = 1.0\noutput_price_per_mtok = 2.0\n"
    )
    patch = replace_patch("report.py", '"sales"', '"revenue"', REPORT)
    turns = [
        [("run_plan", {"plan": headers_plan("revenue")})],
        [("apply_patch", {"patch": patch})],
        [("finish", {"summary": "report uses revenue"})],
    ]
    with FakeChat(turns) as fake:
        done = keel("run", TASK, "--model", "openai:fake", "--base-url", fake.url,
                    "--non-interactive", "--json", workspace=root)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("{")
    value, end = json.JSONDecoder().raw_decode(done.stdout)
    assert done.stdout[end:].strip() == ""  # one object, nothing before or after it
    assert "\x1b" not in done.stdout
    assert value["outcome"] == "finished" and value["exit_code"] == 0
    assert value["session_id"].startswith("run-")
    assert session_events(root, value["session_id"], "session.start")
    assert value["files_changed"] == ["report.py"] and (root / "report.py").read_text() == FIXED
    assert value["gates"] == [{"command": "python3 check.py", "passed": True, "exit_code": 0}]
    assert value["model_calls"] == 3 and value["tokens"] == 3 * 120  # the fake's usage
    assert value["cost_usd"] == pytest.approx(3 * (100 * 1.0 + 20 * 2.0) / 1e6)
    assert value["rollback"] == f"keel rollback --session {value['session_id']}"


# -- 6. replay: the network is off and the user's tree is never touched ---------------------


class Listener:
    """A TCP listener on 127.0.0.1:0 that counts connections and answers a tiny HTTP reply."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = int(self.sock.getsockname()[1])
        self.connections = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                conn.settimeout(5)
                try:
                    conn.recv(4096)
                    conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 8\r\n\r\nreached\n")
                except OSError:
                    pass

    def close(self) -> None:
        with suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept (close alone does not)
        self.sock.close()
        self._thread.join(timeout=10)


@contextmanager
def listening() -> Iterator[Listener]:
    listener = Listener()
    try:
        yield listener
    finally:
        listener.close()


def test_replay_runs_with_the_network_off_and_never_touches_the_users_tree(
    workdir: Path,
) -> None:
    root = sales_workspace(workdir, gates=False)
    copy = workdir.parent / (workdir.name + "-on")
    with listening() as listener:
        (root / "keel.toml").write_text(  # commands uncontained, so the recorded run reaches it
            '[agent]\nrequire_plan = false\n\n[sandbox]\ncontain = "off"\n\n[policy]\n'
            f'allow = ["curl"]\nnetwork_allow = ["127.0.0.1:{listener.port}"]\n'
        )
        fetch = f"curl -s http://127.0.0.1:{listener.port}/"
        turns = [[("run", {"command": fetch})], [("finish", {"summary": "fetched"})]]
        with FakeChat(turns) as fake:
            code, result, err = run_json(root, fake.url, TASK)
        assert code == 0, (result, err)
        assert tool_texts(fake.requests[1])[-1] == "reached\n(exit code 0)\n"
        assert listener.connections == 1
        session = result["session_id"]

        before = _tree(root)
        replayed = keel("replay", session, "--json", workspace=root)
        assert replayed.returncode == 1, replayed.stdout + replayed.stderr
        verdict = json.loads(replayed.stdout)["divergence"]
        assert (verdict["step"], verdict["what"]) == (1, "tool result")
        assert listener.connections == 1  # the replay's curl reached nothing
        assert _tree(root) == before

        shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".keel"))
        copy.chmod(0o755)
        try:
            on_before = _tree(copy)
            on = keel("replay", session, "--on", str(copy), "--json", workspace=root)
            assert on.returncode == 1, on.stdout + on.stderr
            diverged = json.loads(on.stdout)["divergence"]
            assert (diverged["step"], diverged["what"]) == (1, "tool result")
            assert listener.connections == 1
            assert _tree(copy) == on_before
            assert _tree(root) == before
        finally:
            shutil.rmtree(copy, ignore_errors=True)
    # what differs is the curl's result: it reached the listener when recorded, not replayed
    assert verdict["pointer"] in ("/ok", "/exit_code", "/error", "/output"), verdict
    assert verdict["recorded"] != verdict["new"]
    assert diverged == verdict


# -- 7. the pinned constraints, in every request, in one place -------------------------------


def test_pinned_constraints_are_in_the_same_place_of_every_request(workdir: Path) -> None:
    root = sales_workspace(workdir, gates=False)
    (root / "keel.toml").write_text(
        "[agent]\ncontext_tokens = 2000\n\n"
        '[[constraints]]\ntext = "Never change the data files."\nprotect = ["data/**"]\n\n'
        '[[constraints]]\ntext = "Keep report.py under 40 lines."\n'
    )
    for n in range(4):  # big enough that the window overflows into summaries
        (root / f"notes{n}.txt").write_text(f"note {n} " * 400)
    reads = [[("read_file", {"path": f"notes{n}.txt"})] for n in range(4)]
    turns = [
        *reads,
        [("write_file", {"path": "early.txt", "content": "x\n"})],  # denied
        [("run_plan", {"plan": headers_plan("sales")})],  # fails
        [("ask_user", {"question": "Which column?"})],
        [("run_plan", {"plan": headers_plan("revenue")})],
        [("write_file", {"path": "report.py", "content": FIXED})],
        [("finish", {"summary": "uses revenue"})],
    ]
    with StepChat(turns) as fake:
        code, result, _ = run_json(root, fake.url, TASK)
        assert code == 3
        resumed = keel("run", "--resume", result["session_id"], "--answer", "revenue", "--base-url",
                       fake.url, "--json", "--non-interactive", workspace=root)  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert len(fake.requests) == len(turns)
    assert any(
        "Earlier steps, summarised" in str(m.get("content")) for m in fake.requests[-1]["messages"]
    ), "the window never overflowed"
    constraints = ("Never change the data files.", "Keep report.py under 40 lines.")
    pinned = str(fake.requests[0]["messages"][1]["content"])
    zone = pinned[: pinned.index(constraints[1]) + len(constraints[1])]
    assert zone.startswith(f"Task:\n{TASK}\n")
    for body in fake.requests:
        messages = body["messages"]
        assert messages[1]["role"] == "user"
        assert str(messages[1]["content"]).startswith(zone)
        for text in constraints:
            where = [i for i, m in enumerate(messages) if text in str(m.get("content") or "")]
            assert where == [1], (text, where)


# -- 8. the live view ------------------------------------------------------------------------


def _on_a_terminal(argv: list[str], cwd: Path) -> tuple[int, str]:
    """Run ``argv`` with stdout and stderr on a pseudo-terminal: exit code and what it showed."""
    master, slave = pty.openpty()
    env = {**keel_env(), "TERM": "xterm-256color", "COLUMNS": "100", "LINES": "40"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave
    )
    os.close(slave)
    chunks: list[bytes] = []
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 120)
            if not ready:
                break  # a safety net against a hang, not a timing assertion
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the terminal's other side closed
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
        code = proc.wait(timeout=120)
    return code, b"".join(chunks).decode("utf-8", "replace")


def test_the_live_view_shows_phase_and_step_on_a_terminal_and_no_ansi_off_it(
    workdir: Path,
) -> None:
    root = sales_workspace(workdir, gates=False)
    turns = [
        [("list_files", {})],
        [("write_file", {"path": "early.txt", "content": "x\n"})],
        [("run_plan", {"plan": headers_plan("revenue")})],
        [("finish", {"summary": "checked"})],
    ]
    with FakeChat(turns) as fake:
        argv = [KEEL, "--workspace", str(root), "run", TASK, "--model", "openai:fake",
                "--base-url", fake.url, "--non-interactive"]  # fmt: skip
        code, shown = _on_a_terminal(argv, root)
        off = subprocess.run(
            argv,
            cwd=root,
            env={**keel_env(), "TERM": "xterm-256color"},
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=300,
        )
    assert code == 0, shown
    assert "\x1b[" in shown  # drawn in place on the terminal
    plain = ANSI.sub("", shown)
    assert "keel run" in plain
    for phase in ("understand", "plan", "implement"):
        assert re.search(rf"phase\s+{phase}\b", plain), (phase, plain)
    for step in (1, 2, 3, 4):
        assert re.search(rf"step\s+{step}\b", plain), (step, plain)
    assert "deny [agent.premature_commitment]" in plain  # the last call with keel's decision
    assert "outcome: finished" in plain

    assert off.returncode == 0, off.stderr
    assert not ANSI.search(off.stdout) and "\x1b" not in off.stdout
    assert "outcome: finished" in off.stdout
    assert "step 1 [understand] list_files" in off.stderr  # one plain line per call
    assert "step 2 [understand] write_file" in off.stderr
    assert "\x1b" not in off.stderr


# -- 9. usage errors exit 2 ------------------------------------------------------------------


def test_usage_errors_exit_2(workdir: Path) -> None:
    root = sales_workspace(workdir, gates=False)
    other = "claude-0123"  # a session of a hooked client, not of keel run
    guard = Guard.open(root, session_id=other, agent="claude")
    try:
        read = ToolCall("Read", "read", paths=("report.py",), tool_use_id="t1",
                        session_id=other, agent="claude", cwd=str(root))  # fmt: skip
        assert guard.decide(read).allowed
    finally:
        guard.close()
    cases = [
        (("run",), "usage.run"),
        (("run", "   "), "usage.run"),
        (("run", "--resume", other), "usage.run"),  # no --answer
        (("run", "--resume", "run-000000000000", "--answer", "x"), "journal.session_unknown"),
        (("run", "--resume", other, "--answer", "x"), "usage.resume"),
        (("replay", other), "usage.replay"),
        (("replay", "run-000000000000"), "journal.session_unknown"),
    ]
    for args, code in cases:
        done = keel(*args, workspace=root)
        assert done.returncode == 2, (args, done.returncode, done.stderr)
        assert f"[{code}]" in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr and done.stdout == ""
    as_json = keel("replay", other, "--json", workspace=root)
    assert as_json.returncode == 2
    assert json.loads(as_json.stderr)["error"]["code"] == "usage.replay"
    assert _rules(root, other) == [("t1", "allow", "path.read")]  # nothing else was journaled
