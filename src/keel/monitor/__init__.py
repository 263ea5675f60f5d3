"""The monitor: loops, repeated failures, drift, budgets and gates, with a guidance ladder.

``Monitor`` judges one session's calls as they happen (``before_call`` / ``after_call``) or
from journal events (``observe``); ``MonitorState`` is its bounded memory, persisted between
hook processes with ``to_dict()`` / ``from_dict()`` (or ``to_json()`` / ``from_json()``). The
detectors live in ``keel.monitor.detectors``, one module each. ``keel.monitor.scan`` runs them
over a recorded run (a keel journal, a Claude Code transcript, a Codex rollout, a
mini-swe-agent or SWE-agent trajectory); it is imported on demand.

Standard library only at import time: the monitor runs inside hook processes.
"""

from keel.monitor._monitor import Monitor
from keel.monitor._state import DETECTORS, CallEntry, DetectorName, Diagnostic, MonitorState

__all__ = ["DETECTORS", "CallEntry", "DetectorName", "Diagnostic", "Monitor", "MonitorState"]
