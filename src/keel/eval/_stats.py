"""Seeded bootstrap intervals over tasks, and paired differences between arms.

The unit of resampling is the **task**: the repeats of one task share its repository and its
trap, so they are not independent draws. A resample draws as many tasks as the suite has,
with replacement, and takes every run of each drawn task. The same resamples (one seed) serve
every statistic and every arm, so intervals of two arms are computed over the same draws.

A 95% interval is the 2.5th and 97.5th percentile of the statistic over the resamples where
it is defined (a rate over trap runs is undefined in a draw with no trap task).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")
LEVEL = 0.95


@dataclass(frozen=True, slots=True)
class Interval:
    """A 95% bootstrap interval; None bounds when the statistic was never defined."""

    low: float | None
    high: float | None

    def to_dict(self) -> dict[str, float | None]:
        """A JSON-ready dict."""
        return {"low": self.low, "high": self.high}


NO_INTERVAL = Interval(None, None)


def resamples(count: int, n: int, seed: int) -> list[list[int]]:
    """``count`` draws of ``n`` indices in ``range(n)`` with replacement, from ``seed``."""
    rng = random.Random(seed)
    return [[rng.randrange(n) for _ in range(n)] for _ in range(count)] if n else []


def interval(
    groups: Sequence[T],
    draws: list[list[int]],
    statistic: Callable[[list[T]], float | None],
) -> Interval:
    """The percentile interval of ``statistic`` over the draws of ``groups``."""
    values = sorted(v for draw in draws if (v := statistic([groups[i] for i in draw])) is not None)
    if not values:
        return NO_INTERVAL
    tail = (1 - LEVEL) / 2
    low = values[math.floor(tail * (len(values) - 1))]
    high = values[math.ceil((1 - tail) * (len(values) - 1))]
    return Interval(round(low, 6), round(high, 6))


def ratio(part: float, whole: float) -> float | None:
    """``part / whole``, None when ``whole`` is 0."""
    return None if whole == 0 else part / whole


def mean(values: Sequence[float]) -> float | None:
    """The mean, None for no values."""
    return ratio(sum(values), len(values))


def rounded(value: float | None, digits: int = 6) -> float | None:
    """``value`` rounded (JSON figures stay short and reproducible)."""
    return None if value is None else round(value, digits)


def summary(value: float | None, ci: Interval, **more: Any) -> dict[str, Any]:
    """``{"value", "ci", **more}`` for a report."""
    return {"value": rounded(value), "ci": ci.to_dict(), **more}
