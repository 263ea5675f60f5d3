"""Checkpoints only for calls that can change files; ``Policy.is_read_only`` judges commands."""

from __future__ import annotations

from pathlib import Path

import pytest

from keel.core.calls import ToolCall, ToolResult
from keel.guard import Guard
from keel.policy import Policy

READ_ONLY = [
    "ls",
    "ls -la src",
    "cat a.txt | grep x | head -5",
    "cd src && ls",
    "grep -rn foo . > /dev/null 2>&1",
    "ls &>/dev/null",
    "echo $(ls)",
    "find . -name '*.py'",
    "find . -exec cat {} +",
    "timeout 5 ls",
    "env ls",
    "git status",
    "git diff HEAD~1",
    "git log --oneline -5",
    "sed -n 1,80p a.txt",
    "wc -l a.txt",
    "",
]
CHANGING = [
    "touch b.txt",
    "ls > out.txt",
    "ls 2>err.txt",
    "echo hi >> a.txt",
    "cat a.txt | tee b.txt",
    "ls; rm a.txt",
    "echo $(rm a.txt)",
    "find . -delete",
    "find . -exec rm {} +",
    "find . -fprint out",
    "sort -o out a.txt",
    "sort --compress-program=sh a.txt",
    "tree -o out",
    "uniq a.txt b.txt",
    "fd -x rm",
    "rg --pre ./evil foo",
    "sed -i s/a/b/ a.txt",
    "sed -n 1w\\ out a.txt",
    "awk '{print > \"x\"}' a.txt",
    "xxd a.txt b.txt",
    "git diff --output=x",
    "git branch -D main",
    "git -c core.pager=sh log",
    "FOO=1 ls",
    "PATH=. ls",
    "nohup ls",
    "xargs ls",
    "bash -c ls",
    "sudo ls",
    "/bin/ls",
    "./ls",
    "l$x",
    "python -c 'print(1)'",
    "make",
    "cat <<EOF > f\nhi\nEOF",
    'ls "unterminated',
]


@pytest.mark.parametrize("line", READ_ONLY)
def test_read_only_lines(workdir: Path, line: str) -> None:
    for preset in ("developer", "strict", "readonly"):
        assert Policy.for_preset(preset, workdir).is_read_only(line), (preset, line)


@pytest.mark.parametrize("line", CHANGING)
def test_lines_that_may_change_files_are_not_read_only(workdir: Path, line: str) -> None:
    assert not Policy.for_preset("developer", workdir).is_read_only(line)


def test_bad_input_is_not_read_only(workdir: Path) -> None:
    policy = Policy.for_preset("developer", workdir)
    assert not policy.is_read_only("ls\x00 -la")
    assert not policy.is_read_only("ls " + "a" * 2_000_000)
    assert not policy.is_read_only(None)  # pyright: ignore[reportArgumentType]


def _kinds(guard: Guard) -> list[tuple[str, str | None]]:
    from keel.workspace import Checkpoints

    return [(c.kind, c.tool_use_id) for c in Checkpoints(Path(guard.root)).history()]


def _run(guard: Guard, call: ToolCall) -> None:
    assert guard.decide(call).decision == "allow"
    guard.observe(ToolResult(tool=call.tool, kind=call.kind, ok=True, tool_use_id=call.tool_use_id))


def test_only_calls_that_can_change_files_are_checkpointed(workdir: Path) -> None:
    (workdir / "keel.toml").write_text('[policy]\npreset = "developer"\n')
    (workdir / "a.txt").write_text("a\n")
    guard = Guard.open(workdir, session_id="s", monitor=False)
    _run(guard, ToolCall("Bash", "exec", command="ls -la", tool_use_id="t1"))
    _run(guard, ToolCall("Read", "read", paths=(str(workdir / "a.txt"),), tool_use_id="t2"))
    _run(guard, ToolCall("Grep", "read", paths=(str(workdir),), tool_use_id="t3"))
    assert guard.checkpoints is None  # the checkpoint store was never even opened
    _run(guard, ToolCall("Bash", "exec", command="touch b.txt", tool_use_id="t4"))
    _run(guard, ToolCall("Write", "write", paths=(str(workdir / "c.txt"),), tool_use_id="t5"))
    guard.close()
    assert _kinds(guard) == [("before", "t4"), ("after", "t4"), ("before", "t5"), ("after", "t5")]


def test_after_call_is_taken_in_another_process_only_for_checkpointed_calls(
    workdir: Path,
) -> None:
    (workdir / "keel.toml").write_text('[policy]\npreset = "developer"\n')
    pre = Guard.open(workdir, session_id="s", monitor=False)
    assert pre.decide(ToolCall("Bash", "exec", command="touch x", tool_use_id="w")).allowed
    assert pre.decide(ToolCall("Bash", "exec", command="ls", tool_use_id="r")).allowed
    pre.close()
    post = Guard.open(workdir, session_id="s", monitor=False)  # the post-tool hook process
    for tid in ("r", "w", "w"):  # a repeated result of "w" takes no second after checkpoint
        post.observe(ToolResult(tool="Bash", kind="exec", ok=True, tool_use_id=tid))
    post.close()
    assert _kinds(post) == [("before", "w"), ("after", "w")]


def test_denied_calls_are_not_checkpointed(workdir: Path) -> None:
    guard = Guard.open(workdir, session_id="s", monitor=False)
    assert guard.decide(ToolCall("Bash", "exec", command="rm -rf /", tool_use_id="d")).decision == (
        "deny"
    )
    guard.observe(ToolResult(tool="Bash", kind="exec", ok=False, tool_use_id="d"))
    guard.close()
    assert guard.checkpoints is None


def test_open_calls_whose_result_never_came_are_pruned(workdir: Path) -> None:
    from keel.guard import OPEN_CALL_TTL

    guard = Guard.open(workdir, session_id="s", monitor=False)
    assert guard.decide(ToolCall("Bash", "exec", command="touch x", tool_use_id="old")).allowed
    assert set(guard.state.open_calls) == {"old"}
    guard.state.open_calls["old"] -= OPEN_CALL_TTL + 1  # its result never came, long ago
    assert guard.decide(ToolCall("Bash", "exec", command="touch y", tool_use_id="new")).allowed
    guard.close()
    again = Guard.open(workdir, session_id="s", monitor=False)
    try:
        assert set(again.state.open_calls) == {"new"}  # the store kept only the live one
    finally:
        again.close()
