"""What the pages ask of a workspace: reads of its journal and checkpoints, and two writes.

Every read opens the journal read-only for the request (``read_journal``: nothing is
written, migrated or recovered) and answers a JSON-ready dict; a workspace without a journal
yet has no sessions. The library functions are the CLI's: ``keel show``'s session resolver,
``keel diff``'s checkpoints, ``keel verify``'s check, and ``keel stop`` / ``keel resume``
(``keel.lifecycle``), so the page's stop is journaled exactly as the command's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from keel.core.errors import KeelError, UserError
from keel.core.events import Event
from keel.core.stop import stop_status
from keel.journal import Journal, SessionSummary, journal_health, journal_path, read_journal
from keel.journal.timeline import clip, render_problems, resolve_session
from keel.ui._evidence import is_plan_start, plan_evidence
from keel.ui._sessions import session_rows
from keel.ui._timeline import FOLDED_KINDS, TimelineBuilder, TimelineItem, build_items


@contextmanager
def reading(root: Path) -> Iterator[Journal | None]:
    """``root``'s journal, read-only; None when there is none yet."""
    if not journal_path(root).exists():
        yield None
        return
    with read_journal(root) as journal:
        yield journal


def overview(root: Path) -> dict[str, Any]:
    """The workspace, its emergency stop and the journal's head (``seq`` of the last event)."""
    return {
        "root": str(root),
        "stop": stop_status(root).to_dict(),
        "last_seq": journal_health(root).events,
    }


def sessions(root: Path) -> dict[str, Any]:
    """Every session (``SessionRow``), the most recently active first, and the overview."""
    from keel.lifecycle import monitor_stops

    holds = {h.session_id: h for h in monitor_stops(root)}
    with reading(root) as journal:
        rows = [] if journal is None else session_rows(journal, stop_status(root), holds)
    return {**overview(root), "sessions": [r.to_dict() for r in rows]}


def session_id(root: Path, session: str) -> str:
    """The id of the session ``session`` names (an id or a unique prefix).

    Raises:
        UserError: as :func:`session_events`.
    """
    with reading(root) as journal:
        if journal is None:
            raise _unknown(session)
        return resolve_session(journal, session).session_id


def _unknown(session: str) -> UserError:
    return UserError(
        f"no session matches {clip(session)!r}: the journal is empty",
        code="journal.session_unknown",
    )


def session_events(root: Path, session: str) -> tuple[SessionSummary, list[Event]]:
    """The session ``session`` names (an id or a unique prefix) and its events, in order.

    Raises:
        UserError: no session or several match (``journal.session_unknown``,
            ``journal.session_ambiguous``).
    """
    with reading(root) as journal:
        if journal is None:
            raise _unknown(session)
        summary = resolve_session(journal, session)
        return summary, list(journal.events(session_id=summary.session_id))


def timeline(root: Path, session: str) -> dict[str, Any]:
    """One session (an id or a unique prefix): its summary and every timeline item."""
    summary, events = session_events(root, session)
    return {
        "session": summary.to_dict(),
        "items": [i.to_dict() for i in build_items(events)],
        "last_seq": events[-1].seq if events else 0,
        "plans": sum(1 for e in events if is_plan_start(e)),
        "stop": stop_status(root).to_dict(),
    }


class LiveTimeline:
    """A session's new items since ``after``, for the page's live stream.

    The calls (and what was folded into them) up to ``after`` are read once, so a decision
    or result that arrives later updates its call's item instead of standing alone.
    """

    def __init__(self, root: Path, session_id: str, after: int) -> None:
        self.root, self.session_id, self.after = root, session_id, after
        self._builder = TimelineBuilder()
        with reading(root) as journal:
            if journal is not None:
                for event in journal.events(session_id=session_id, kinds=FOLDED_KINDS):
                    if event.seq > after:
                        break
                    self._builder.add(event)

    def poll(self) -> list[TimelineItem]:
        """The items added or updated since the last poll, in order."""
        with reading(self.root) as journal:
            if journal is None:
                return []
            events = list(journal.events(session_id=self.session_id, after_seq=self.after))
        found: dict[int, TimelineItem] = {}
        for event in events:
            item = self._builder.add(event)
            found[item.id] = item
            self.after = event.seq
        return list(found.values())


def checkpoint_diff(root: Path, checkpoint: str) -> dict[str, Any]:
    """What changed since ``checkpoint``, as ``keel diff CHECKPOINT --json`` reports it.

    Raises:
        UserError: not a checkpoint id, or no such checkpoint (``workspace.*``).
        WorkspaceError: the store lost the checkpoint's objects (``workspace.corrupt``).
    """
    from keel.core.protected import prompt_paths
    from keel.workspace.service import open_checkpoints

    cps = open_checkpoints(root, journal=False)
    target = cps.get(checkpoint)
    result = cps.diff(target, patch=True, in_scope=_scope(root))
    prompts = prompt_paths([c.path for c in result.changes])
    return {**result.to_dict(), "prompt_files": prompts}


def _scope(root: Path) -> Callable[[str], bool] | None:
    """``[scope]`` of ``root``; None when keel.toml cannot be read (the diff still shows)."""
    from keel.workspace.service import scope_checker

    try:
        return scope_checker(root)
    except KeelError:
        return None


def evidence(root: Path, session: str) -> dict[str, Any]:
    """The plan runs of one session, each as its evidence tree."""
    summary, events = session_events(root, session)
    runs = plan_evidence(events)
    return {"session": summary.to_dict(), "plans": [r.to_dict() for r in runs]}


def verify(root: Path) -> dict[str, Any]:
    """``keel verify --json``, with the text ``keel verify`` prints."""
    from keel.journal import verify_journal

    report = verify_journal(root)
    text = render_problems(report.problems, report.events, report.acknowledged)
    return {**report.to_dict(), "text": text}


def stop(root: Path, reason: str | None) -> dict[str, Any]:
    """``keel stop``: set the emergency stop, kill contained commands, journal it."""
    from keel.lifecycle import stop_workspace

    status, killed = stop_workspace(root, reason)
    return {"root": str(root), "stop": status.to_dict(), "killed": killed}


def resume(root: Path, session: str | None) -> dict[str, Any]:
    """``keel resume``: clear the emergency stop, or with ``session`` the monitor's hold."""
    from keel.lifecycle import emergency_resume, resume_session

    if session is not None:
        held = resume_session(root, session)
        return {"root": str(root), "session": held.to_dict() if held else None}
    return {"root": str(root), "cleared": emergency_resume(root)}
