"""``keel ui``: the journal as a local web page, live, with the emergency stop at hand.

A page for people (sessions, a session's timeline, a checkpoint's diff, a plan's evidence
tree, the journal's integrity), served by Starlette under uvicorn on 127.0.0.1 only, with a
random token in the URL it prints and opens, as Jupyter does (``keel.ui._security``). Its only
writes are ``keel stop`` and ``keel resume`` (``keel.lifecycle``), journaled as the commands
journal them. The journal is agent-written, hostile text: the page inserts it as text only,
under a Content-Security-Policy that allows no inline script or style.

Importing this package imports neither Starlette nor uvicorn (``keel-guard[ui]``): ``serve``
checks for them and says how to install them (``ui.not_installed``). The reading side
(``session_rows``, ``build_items``, ``plan_evidence``) needs only keel.
"""

from keel.ui._evidence import EvidenceBranch, EvidenceNode, PlanEvidence, plan_evidence
from keel.ui._server import require_extra, serve
from keel.ui._sessions import SessionRow, SessionStatus, session_rows
from keel.ui._timeline import GROUPS, TimelineBuilder, TimelineItem, build_items, item_of

__all__ = [
    "GROUPS",
    "EvidenceBranch",
    "EvidenceNode",
    "PlanEvidence",
    "SessionRow",
    "SessionStatus",
    "TimelineBuilder",
    "TimelineItem",
    "build_items",
    "item_of",
    "plan_evidence",
    "require_extra",
    "serve",
    "session_rows",
]
