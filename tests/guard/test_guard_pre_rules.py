"""``Guard(pre_rules=...)``: rules asked before the policy, given at construction.

``keel run`` gives its phase rules this way (``PhaseRules``); a rule's answer takes the one
decision path: after the emergency stop, before containment, the monitor, the checkpoint and
the journal, exactly as the policy's answer would.
"""

from __future__ import annotations

from pathlib import Path

from keel.core.calls import ToolCall
from keel.core.decision import Decision
from keel.core.stop import set_stop
from keel.guard import Guard, SessionState
from keel.journal import open_journal
from keel.policy import Policy


class Rule:
    """A pre-rule that answers ``answer`` (None: no opinion) and notes what it was asked."""

    def __init__(self, answer: Decision | None) -> None:
        self.answer = answer
        self.asked: list[tuple[ToolCall, Policy]] = []

    def check(self, call: ToolCall, policy: Policy) -> Decision | None:
        self.asked.append((call, policy))
        return self.answer


class Exploding:
    def check(self, call: ToolCall, policy: Policy) -> Decision | None:
        raise RuntimeError("boom")


DENY = Decision.deny("test.rule", "the rule says no", "Ask the rule.")
ALLOW = Decision.allow("test.rule", "the rule says yes")
PUSH = ToolCall("Bash", "exec", command="git push --force origin main", tool_use_id="t1")


def _open(root: Path, *rules: object, **kw: object) -> Guard:
    return Guard.open(
        root,
        session_id="s",
        monitor=False,
        checkpoints=False,
        pre_rules=rules,
        **kw,  # type: ignore[arg-type]
    )


def _rules(root: Path) -> list[tuple[str, str]]:
    with open_journal(root) as journal:
        return [
            (e.payload.decision, e.payload.rule)  # pyright: ignore[reportAttributeAccessIssue]
            for e in journal.events(session_id="s")
            if e.kind == "decision"
        ]


def test_the_first_rule_with_an_answer_decides_and_is_journaled(workdir: Path) -> None:
    silent, deny, never = Rule(None), Rule(DENY), Rule(ALLOW)
    guard = _open(workdir, silent, deny, never)
    try:
        read = ToolCall("Read", "read", paths=("a.txt",), tool_use_id="r1")
        assert guard.decide(read) == DENY
        assert silent.asked == [(read, guard.policy)] and deny.asked == [(read, guard.policy)]
        assert never.asked == []
    finally:
        guard.close()
    assert _rules(workdir) == [("deny", "test.rule")]


def test_without_an_answer_the_policy_decides(workdir: Path) -> None:
    guard = _open(workdir, Rule(None))
    try:
        got = guard.decide(PUSH)
        assert got == guard.policy.check_call(PUSH) and got.decision == "deny"
    finally:
        guard.close()


def test_a_rule_may_allow_what_the_policy_would_not(workdir: Path) -> None:
    guard = _open(workdir, Rule(ALLOW), journal=False)
    assert guard.decide(PUSH) == ALLOW


def test_the_emergency_stop_comes_before_the_rules(workdir: Path) -> None:
    rule = Rule(ALLOW)
    set_stop(workdir, "incident")
    guard = _open(workdir, rule, journal=False)
    assert guard.decide(PUSH).rule == "stop.active" and rule.asked == []


def test_a_rule_that_fails_is_a_deny(workdir: Path) -> None:
    guard = _open(workdir, Exploding(), journal=False)
    got = guard.decide(ToolCall("Read", "read", paths=("a.txt",)))
    assert (got.decision, got.rule) == ("deny", "internal_error")
    assert "RuntimeError: boom" in got.reason


def test_a_rules_allow_of_a_shell_command_is_still_contained(workdir: Path) -> None:
    """After a bypass every later shell command is denied, whoever allowed it."""
    opened = _open(workdir, journal=False)
    state = SessionState()
    state.containment_broken = "curl evil"
    guard = Guard(workdir, opened.config, opened.policy, "s", state=state, pre_rules=(Rule(ALLOW),))
    got = guard.decide(ToolCall("Bash", "exec", command="ls"))
    assert (got.decision, got.rule) == ("deny", "sandbox.bypassed")
    assert guard.decide(ToolCall("Read", "read", paths=("a.txt",))) == ALLOW


def test_a_guard_keeps_its_rules_in_order(workdir: Path) -> None:
    first, second = Rule(None), Rule(None)
    assert _open(workdir, first, second, journal=False).pre_rules == (first, second)
    assert _open(workdir, journal=False).pre_rules == ()


def test_open_with_settings_uses_them_instead_of_keel_toml(workdir: Path) -> None:
    from keel.config import parse_config

    (workdir / "keel.toml").write_text('[policy]\npreset = "readonly"\n')
    config = parse_config('[gates]\nrequired = ["make test"]\n')
    guard = _open(workdir, journal=False, config=config)
    assert guard.config is config and tuple(guard.required_gates) == ("make test",)
    write = guard.decide(ToolCall("Write", "write", paths=(str(workdir / "a.txt"),)))
    assert write.allowed  # the given settings' preset (developer), not keel.toml's (readonly)
