"""The judge process: ``python -I <keel>/_launch.py judge ROOT --session ID ...``.

Started by :class:`keel.guard.judging.SubprocessJudging` (on a thread of ``keel hookd`` or
``keel run``, or inline in a hook process without the daemon), never imported by the hook.
It judges one window of one live session:

1. reads ``[judge]`` from the workspace's keel.toml and the session's events from its journal;
2. builds the window (:func:`keel.judge.window_of`: the task, the pinned constraints, the plan,
   the last ``window_steps`` calls, and the agent's claim when it is finishing);
3. asks the judge: the disk cache first (``.keel/judge/cache``), else one model call through
   keel's model client under ``[judge]``'s budget (its ``model.request``/``model.response``
   events, and any refusal, are journaled in the session as agent ``keel.judge``);
4. journals one ``judgement`` event (the verdict, its status, the window's hash, the prompt
   version, cost and latency; or the error's code), and
5. prints one JSON line: ``{"status", "journaled", "judged"}``, ``judged`` being the
   :class:`keel.core.judged.Judged` to deliver when the verdict is deliverable, else null.

It exits 0 whenever it printed its answer, 1 when it could not (the caller journals that).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from keel.core.errors import KeelError, ModelError
from keel.core.events import DataPayload, Event
from keel.core.judged import Judged

if TYPE_CHECKING:
    from keel.models.testing import ReplayModel

AGENT = "keel.judge"
"""The ``agent`` of everything the judge journals (its model calls, its judgements)."""
REPLAY = "replay:"
"""``replay:SESSION@ROOT``: the judge's recorded calls in ``ROOT``'s journal (``keel replay``)."""


def main(argv: list[str] | None = None) -> int:
    """Judge one session's window; print the answer as one JSON line."""
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        answer = judge_session(
            Path(args.root),
            args.session,
            step=args.step,
            triggers=tuple(args.trigger or ()),
            finishing=args.finish,
            model=args.model,
        )
    except KeelError as err:
        answer = {"status": "error", "journaled": False, "judged": None,
                  "error": err.code, "message": err.message}  # fmt: skip
    sys.stdout.write(json.dumps(answer, sort_keys=True) + "\n")
    sys.stdout.flush()
    return 0


def judge_session(
    root: Path,
    session_id: str,
    *,
    step: int,
    triggers: tuple[str, ...],
    finishing: bool = False,
    model: str | None = None,
) -> dict[str, Any]:
    """Judge the session's window now; the answer :func:`main` prints.

    Raises:
        KeelError: keel.toml, the journal or the model cannot be read or opened (nothing was
            journaled).
    """
    from keel.config import config_for
    from keel.journal import open_journal
    from keel.judge._judge import JudgeCache, judge_client, judge_for
    from keel.judge._window import window_of
    from keel.models import open_model

    config = config_for(root)
    settings = config.judge
    spec = model or settings.model
    if not spec:
        return {"status": "off", "journaled": False, "judged": None}
    with open_journal(root) as journal:
        events = journal.events(session_id=session_id)
        constraints = [c.text for c in config.constraints]
        window = window_of(events, last=settings.window_steps, constraints=constraints)
        record: dict[str, Any] = {"step": step, "triggers": list(triggers), "finish": finishing,
                                  "window_hash": window.hash}  # fmt: skip
        judged: Judged | None = None
        try:
            opened = (
                recorded_judge(spec)
                if spec.startswith(REPLAY)
                else open_model(spec, config.model, workspace=root)
            )
            client = judge_client(opened, settings, config.model, session_id=session_id,
                                  journal=journal)  # fmt: skip
            try:
                judge = judge_for(client, settings, cache=JudgeCache.for_workspace(root))
                judgement = judge.judge(window)
            finally:
                client.close()
        except KeelError as err:
            record.update(status="error", error=err.code, message=err.message)
        else:
            record.update(judgement.to_dict())
            verdict = judgement.verdict
            if judgement.deliverable and verdict.category is not None:
                judged = Judged(verdict.category, verdict.confidence, verdict.evidence,
                                verdict.suggestion, step, window.hash)  # fmt: skip
                record["judged"] = judged.to_dict()
        journal.append(Event("judgement", session_id, DataPayload(record), agent=AGENT))
    return {
        "status": record.get("status", "error"),
        "journaled": True,
        "judged": judged.to_dict() if judged is not None else None,
        "error": record.get("error"),
    }


def recorded_judge(spec: str) -> ReplayModel:
    """The judge's recorded calls of ``replay:SESSION@ROOT``, served by request hash.

    Only the calls journaled as agent ``keel.judge``, presented as the model that made them (so
    the same window asks the same request); a request that was never recorded is an error
    (``model.replay_diverged``), never a call to a model.

    Raises:
        ModelError: the spec names no session and root, or the journal cannot be read.
    """
    from keel.journal import read_journal
    from keel.models.testing import ReplayModel

    session, _, where = spec.removeprefix(REPLAY).partition("@")
    if not session or not where:
        raise ModelError(f"{spec}: expected replay:SESSION@ROOT", code="model.replay")
    kinds = ("model.request", "model.response")
    with read_journal(Path(where)) as journal:
        events = [e for e in journal.events(session_id=session, kinds=kinds) if e.agent == AGENT]
    recorded = ReplayModel.from_events(events)
    return ReplayModel(recorded.records, name=recorded.recorded_model)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="keel-judge", description="Judge a live session.")
    parser.add_argument("root")
    parser.add_argument("--session", required=True)
    parser.add_argument("--agent", default="keel")
    parser.add_argument("--step", type=int, default=0)
    parser.add_argument("--trigger", action="append")
    parser.add_argument("--finish", action="store_true")
    parser.add_argument("--model")
    return parser
