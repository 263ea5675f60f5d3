"""``keel ui`` in headless Chromium: each view shows the scripted session as it happened.

A real server (``keel ui --no-browser``) on a real journal filled through the real hook;
the checks read the page as a person does. Every test also checks that the browser's console
logged no error, and keeps a screenshot of each view it opened (``conftest.ARTIFACTS``).
"""

from __future__ import annotations

import re

from ui_support import HOSTILE, SESSION, Server, Tab, Workspace


def _open(tab: Tab, server: Server, route: str = "") -> None:
    """The printed URL (token included), then a view of the page by its hash route."""
    tab.page.goto(server.url)
    tab.page.wait_for_selector("#sessions")
    if route:
        tab.page.goto(f"{server.base}/{route}")


def _row(tab: Tab, text: str) -> str:
    """The text of the timeline row that contains ``text``."""
    row = tab.page.locator("#timeline .item", has_text=text)
    assert row.count() == 1, f"{row.count()} rows contain {text!r}"
    return row.inner_text()


def test_the_sessions_page_lists_the_session_with_its_calls_denials_and_guidance(
    tab: Tab, server: Server, scripted: Workspace
) -> None:
    _open(tab, server)
    row = tab.page.locator(f'#sessions tr[data-session="{SESSION}"]')
    cells = row.locator("td").all_inner_texts()
    # session, agent, start, duration, calls, denials, guidance, model cost, status
    assert cells[0] == SESSION and cells[1] == "claude"
    assert cells[4:8] == ["5", "2", "1", "–"]
    assert cells[8].startswith("running")
    plan = tab.page.locator(f'#sessions tr[data-session="{scripted.plan_session}"]')
    assert plan.locator("td").nth(8).inner_text().startswith("ended")
    assert tab.page.locator("#stop-state").inner_text() == "no emergency stop"
    tab.shot("sessions")
    assert tab.errors == []


def test_the_timeline_shows_each_call_with_its_decision_rule_and_reason(
    tab: Tab, server: Server
) -> None:
    _open(tab, server, f"#/s/{SESSION}")
    tab.page.wait_for_selector("#timeline")
    denied = _row(tab, "rm -rf /")
    assert "deny" in denied and "risk.rm_recursive" in denied
    assert "a recursive delete of the workspace, home or system" in denied
    assert "delete the specific files or build directories you mean" in denied  # suggestion
    repeat = tab.page.locator("#timeline .item[data-group=call]", has_text="monitor.repeat")
    assert repeat.count() == 1 and "deny" in repeat.inner_text()
    guidance = tab.page.locator("#timeline .item[data-group=guidance]", has_text="guidance")
    assert guidance.count() == 1 and "correct" in guidance.inner_text()
    assert "allow" in _row(tab, "Write (write)")
    assert tab.page.locator("#timeline .item[data-group=checkpoint]").count() == 2
    tab.shot("timeline")
    assert tab.errors == []


def test_the_timeline_filters_by_decision_and_by_kind(tab: Tab, server: Server) -> None:
    _open(tab, server, f"#/s/{SESSION}")
    tab.page.wait_for_selector("#timeline")
    visible = "#timeline .item:not(.hidden)"
    tab.page.select_option("#filter-decision", "deny")
    shown = tab.page.locator(visible).all_inner_texts()
    assert len(shown) == 2 and all("deny" in text for text in shown)
    tab.page.select_option("#filter-decision", "all")
    tab.page.uncheck("input[data-filter-group=call]")
    groups = tab.page.locator(visible).evaluate_all("rows => rows.map(r => r.dataset.group)")
    assert "call" not in groups and {"checkpoint", "guidance"} <= set(groups)
    tab.shot("timeline-filtered")
    assert tab.errors == []


def test_a_checkpoint_diff_shows_what_changed_since_it(
    tab: Tab, server: Server, scripted: Workspace
) -> None:
    before = scripted.checkpoints[0]
    _open(tab, server, f"#/s/{SESSION}")
    tab.page.locator("a.diff-link", has_text=before).click()
    tab.page.wait_for_selector("#patch")
    assert "modified" in tab.page.locator("#changes").inner_text()
    assert "app.py" in tab.page.locator("#changes").inner_text()
    assert tab.page.locator("#patch span.del", has_text="x = 1").count() == 1
    assert tab.page.locator("#patch span.add", has_text="x = 2").count() == 1
    tab.shot("diff")
    assert tab.errors == []


def test_the_evidence_tree_shows_probes_facts_branches_and_actions(
    tab: Tab, server: Server, scripted: Workspace
) -> None:
    _open(tab, server, f"#/s/{scripted.plan_session}")
    tab.page.locator("a", has_text="evidence (1 plan run)").click()
    tab.page.wait_for_selector("ul.tree")
    look = tab.page.locator('li[data-step="look"]').first.inner_text()
    assert "ok" in look and "config.yaml exists" in look  # the probe and its fact
    branch = tab.page.locator('li[data-step="branch"]').first
    assert branch.locator(".branch.taken .branch-label").inner_text() == "if true (taken)"
    assert "done" in tab.page.locator('li[data-step="answer"]').inner_text()
    assert "not reached" in tab.page.locator('li[data-step="ask_first"]').inner_text()
    assert "config.yaml exists" in tab.page.locator("ul.facts").inner_text()
    tab.shot("evidence")
    assert tab.errors == []


def test_the_integrity_view_runs_the_journals_verify(tab: Tab, server: Server) -> None:
    _open(tab, server, "#/verify")
    tab.page.wait_for_selector("#verify-text")
    text = tab.page.locator("#verify-text").inner_text()
    assert re.search(r"journal intact: \d+ events, hmac-sha256 chain verified", text), text
    tab.shot("verify")
    assert tab.errors == []


def test_a_call_journaled_while_the_timeline_is_open_appears_live(
    tab: Tab, server: Server, scripted: Workspace
) -> None:
    assert scripted.bash("git status", session="live-1") == "allow"
    _open(tab, server, "#/s/live-1")
    tab.page.wait_for_selector("#timeline .item")
    assert tab.page.locator("#timeline .item[data-group=call]").count() == 1
    tab.page.wait_for_selector("#live:not([hidden])")
    assert scripted.bash("rm -rf ~", session="live-1") == "deny"
    appended = tab.page.locator("#timeline .item[data-group=call]", has_text="rm -rf ~")
    appended.wait_for()
    tab.page.wait_for_selector("#timeline .item.deny")  # the decision, folded in after
    assert tab.page.locator("#timeline .item[data-group=call]").count() == 2
    assert "risk.rm_recursive" in appended.inner_text()
    tab.shot("timeline-live")
    assert tab.errors == []


def test_journal_text_with_markup_is_shown_as_text(tab: Tab, server: Server) -> None:
    _open(tab, server, f"#/s/{SESSION}")
    tab.page.wait_for_selector("#timeline")
    assert HOSTILE.removeprefix("echo ") in _row(tab, "<script>")
    assert tab.page.locator("#view img").count() == 0
    assert tab.page.locator("#view script").count() == 0
    assert tab.page.title() == "keel ui"
    tab.shot("hostile-text")
    assert tab.errors == []
