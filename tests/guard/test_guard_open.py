"""Building a guard: by hand with safe defaults, and ``Guard.open`` from a workspace."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from guard_helpers import SESSION, events_of, open_guard

from keel.core.calls import ToolCall
from keel.guard import INSIDE_WRAP, Guard, SessionState, containment
from keel.journal import open_journal


def test_a_guard_built_by_hand_has_safe_defaults(workdir: Path) -> None:
    opened = open_guard(workdir, journal=False)
    g = Guard(workdir, opened.config, opened.policy, "sid")
    assert g.root == str(workdir) and isinstance(g.root, str)
    assert (g.agent, g.session_id) == ("keel", "sid")
    assert g.config is opened.config and g.policy is opened.policy
    assert (g.journal, g.monitor, g.checkpoints) == (None, None, None)
    assert g.lazy_checkpoints is False and g.owns_journal is True
    assert g.state_version == 0 and g.state.to_dict() == SessionState().to_dict()
    assert g.inside_sandbox is False
    assert g.contain is opened.policy.contained
    assert g.contain_reason == ("contained" if g.contain else "not contained")


def test_a_guard_keeps_the_parts_it_is_given(workdir: Path) -> None:
    from keel.monitor import Monitor
    from keel.workspace import Checkpoints

    opened = open_guard(workdir, journal=False)
    with open_journal(workdir) as journal:
        monitor = Monitor(opened.config)
        store = Checkpoints(workdir, journal=journal)
        g = Guard(
            workdir,
            opened.config,
            opened.policy,
            "sid",
            "agent-x",
            journal=journal,
            monitor=monitor,
            checkpoints=store,
            lazy_checkpoints=True,
            owns_journal=False,
        )
        assert (g.journal, g.monitor, g.checkpoints) == (journal, monitor, store)
        assert (g.agent, g.lazy_checkpoints, g.owns_journal) == ("agent-x", True, False)
        g.decide(ToolCall("Write", "write", paths=("a.txt",), tool_use_id="w"))
        g.close()
        assert [e.kind for e in journal.events()] == ["tool.call", "checkpoint", "decision"]


@pytest.mark.parametrize("contained", [True, False])
def test_the_contain_reason_follows_the_policy(workdir: Path, contained: bool) -> None:
    from keel.policy import Policy

    opened = open_guard(workdir, journal=False)
    policy = Policy.from_config(opened.config, str(workdir), contained=contained)
    g = Guard(workdir, opened.config, policy, "sid")
    assert g.contain is contained
    assert g.contain_reason == ("contained" if contained else "not contained")


def test_open_defaults_journal_monitor_and_lazy_checkpoints(workdir: Path) -> None:
    g = Guard.open(workdir, session_id=SESSION)
    try:
        assert g.agent == "keel" and g.root == str(workdir)
        assert g.journal is not None and g.owns_journal is True
        assert g.monitor is not None
        assert g.lazy_checkpoints is True and g.checkpoints is None
        assert g.inside_sandbox is False
        contain, why = containment(g.config)
        assert (g.contain, g.contain_reason) == (contain, why)
        assert g.policy.contained is contain
        g.decide(ToolCall("Read", "read", paths=("a.txt",), tool_use_id="t1"))
    finally:
        g.close()
    call, decision = events_of(workdir)
    assert call.agent == decision.agent == "keel"


def test_open_inside_the_sandbox_contains_without_rewriting(workdir: Path) -> None:
    (workdir / "keel.toml").write_text('[sandbox]\ncontain = "off"\n')
    g = open_guard(workdir, inside_sandbox=True, journal=False)
    assert (g.contain, g.contain_reason) == (True, INSIDE_WRAP)
    assert g.policy.contained is True
    assert g.inside_sandbox is True and g.rewrite is False


def test_open_reads_the_preset_and_root(workdir: Path) -> None:
    g = open_guard(workdir, preset="readonly", journal=False)
    assert g.root == str(workdir)
    write = g.decide(ToolCall("Write", "write", paths=(str(workdir / "a.txt"),)))
    assert write.decision == "deny"
    assert (
        open_guard(workdir, journal=False)
        .decide(ToolCall("Write", "write", paths=(str(workdir / "a.txt"),)))
        .allowed
    )


def test_open_without_a_journal_records_nothing(workdir: Path) -> None:
    g = open_guard(workdir, journal=False)
    assert g.journal is None and g.is_current() is True
    assert g.decide(ToolCall("Bash", "exec", command="ls")).allowed
    g.close()
    assert not (workdir / ".keel" / "journal.db").exists() or events_of(workdir) == []


def test_open_with_a_deadline_still_opens_the_journal(workdir: Path) -> None:
    g = open_guard(workdir, wait_until=time.monotonic() + 30)
    try:
        assert g.journal is not None
        assert g.decide(ToolCall("Bash", "exec", command="ls", tool_use_id="t1")).allowed
    finally:
        g.close()
    assert [e.kind for e in events_of(workdir)] == ["tool.call", "decision"]


def test_a_shared_journal_is_not_closed_by_the_guard(workdir: Path) -> None:
    with open_journal(workdir) as journal:
        g = open_guard(workdir, journal=journal)
        assert g.journal is journal and g.owns_journal is False
        g.decide(ToolCall("Bash", "exec", command="ls", tool_use_id="t1"))
        g.close()
        assert [e.kind for e in journal.events()] == ["tool.call", "decision"]


def test_close_closes_an_owned_journal(workdir: Path) -> None:
    g = open_guard(workdir)
    journal = g.journal
    assert journal is not None
    g.close()
    from keel.core.errors import JournalError

    with pytest.raises(JournalError, match="is closed"):
        list(journal.events())
    open_guard(workdir, journal=False).close()  # no journal: nothing to close
