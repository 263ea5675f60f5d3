"""The monitor's detectors, one module each, in the order their findings are reported.

Each is a ``Detector`` (``keel.monitor._context``): ``before`` a call, ``after`` its result,
``reset`` on a new user prompt. The controller (``keel.monitor._monitor``) runs them all on
every event; the monologue and unverified-finish detectors also answer messages, completion
claims and the Stop hook.
"""

from __future__ import annotations

from keel.monitor._context import Detector
from keel.monitor.detectors.alternation import Alternation
from keel.monitor.detectors.budget import Budget
from keel.monitor.detectors.drift import Drift
from keel.monitor.detectors.failure import Failure
from keel.monitor.detectors.monologue import Monologue
from keel.monitor.detectors.no_progress import NoProgress
from keel.monitor.detectors.repeat import Repeat
from keel.monitor.detectors.scope import Scope
from keel.monitor.detectors.unverified_finish import UnverifiedFinish
from keel.monitor.detectors.weakening import Weakening

MONOLOGUE = Monologue()
UNVERIFIED_FINISH = UnverifiedFinish()
PIPELINE: tuple[Detector, ...] = (
    Budget(),
    Repeat(),
    Alternation(),
    Failure(),
    Scope(),
    Weakening(),
    Drift(),
    NoProgress(),
    UNVERIFIED_FINISH,
    MONOLOGUE,
)
"""Every detector; findings of one event are reported in this order."""

__all__ = ["MONOLOGUE", "PIPELINE", "UNVERIFIED_FINISH", "Detector"]
