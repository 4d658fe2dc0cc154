"""Bootstrap intervals over independent units (episodes), for figures that support a claim.

A statistic of a benchmark run (a Macro-F1, a difference of two settings' Macro-F1 on the same
episodes) is recomputed on resamples of the units with replacement; the interval is the percentile
interval of those values. A paired comparison resamples the same units for both sides (the units
are the episodes both runs share). A statistic that is undefined on a resample (e.g. OGR when
P-Ref = P-Init) returns None or NaN there: the share of such resamples is reported, not hidden.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

RESAMPLES = 2000  # bootstrap resamples of a reported interval
LEVEL = 0.95  # coverage of a reported interval


@dataclass(frozen=True)
class Interval:
    """A percentile bootstrap interval: ``low``..``high`` of the statistic (its units), ``estimate`` on
    all units, ``undefined`` the share of resamples on which it was undefined, over ``units`` units."""

    estimate: float | None
    low: float | None
    high: float | None
    undefined: float
    units: int
    resamples: int
    level: float = LEVEL

    def contains(self, value: float) -> bool:
        """True when ``value`` lies in the interval (an interval that could not be computed contains all)."""
        return self.low is None or self.low <= value <= self.high

    def text(self, scale: float = 1.0, digits: int = 1) -> str:
        """``+8.1 [-1.9, +18.6]`` (values times ``scale``), or ``undetermined`` without an interval."""
        if self.estimate is None or self.low is None:
            return "undetermined"
        f = f"{{:+.{digits}f}}"
        return f"{f.format(scale * self.estimate)} [{f.format(scale * self.low)}, {f.format(scale * self.high)}]"


def _defined(value: float | None) -> bool:
    return value is not None and not math.isnan(value)


def bootstrap_interval(units: int, statistic: Callable[[np.ndarray], float | None], resamples: int = RESAMPLES,
                       seed: int = 0, level: float = LEVEL) -> Interval:
    """Interval of ``statistic(indices)`` (indices into the ``units`` units; all of them once for the
    estimate) over ``resamples`` resamples with replacement, seeded (the same seed, the same interval)."""
    if units < 1:
        raise ValueError(f"units={units} is invalid; expected at least one unit to resample")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level={level} is invalid; expected a coverage in (0, 1)")
    est = statistic(np.arange(units))
    rng = np.random.default_rng(seed)
    values = [statistic(rng.integers(0, units, units)) for _ in range(resamples)]
    ok = np.array([float(v) for v in values if _defined(v)])
    tail = 100.0 * (1.0 - level) / 2.0
    low, high = (float(v) for v in np.percentile(ok, [tail, 100.0 - tail])) if len(ok) else (None, None)
    return Interval(float(est) if _defined(est) else None, low, high, 1.0 - len(ok) / resamples, units, resamples,
                    level)
