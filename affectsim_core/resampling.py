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
from typing import Callable, Sequence

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
    se: float | None = None  # standard deviation of the defined resamples (the bootstrap standard error)

    def contains(self, value: float) -> bool:
        """True when ``value`` lies in the interval (an interval that could not be computed contains all)."""
        return self.low is None or self.low <= value <= self.high

    def text(self, scale: float = 1.0, digits: int = 1, signed: bool = True) -> str:
        """``+8.1 [-1.9, +18.6]`` (values times ``scale``; ``signed``: with their sign), or
        ``undetermined`` without an interval."""
        if self.estimate is None or self.low is None:
            return "undetermined"
        f = f"{{:{'+' if signed else ''}.{digits}f}}"
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
    return _interval([est, *values], units, level)


def group_interval(groups: np.ndarray, statistic: Callable[[np.ndarray], float | None]) -> Interval:
    """:func:`bootstrap_interval` over whole groups (e.g. episodes, whose clips are not independent):
    ``statistic`` gets the indices of the items of the resampled groups, with repeats."""
    members = [np.flatnonzero(groups == g) for g in np.unique(groups)]
    return bootstrap_interval(len(members), lambda k: statistic(np.concatenate([members[i] for i in k])))


def _interval(values: Sequence[float | None], units: int, level: float) -> Interval:
    """values[0]: the estimate; values[1:]: the resamples (None or NaN where undefined)."""
    est, rest = values[0], values[1:]
    ok = np.array([float(v) for v in rest if _defined(v)])
    tail = 100.0 * (1.0 - level) / 2.0
    low, high = (float(v) for v in np.percentile(ok, [tail, 100.0 - tail])) if len(ok) else (None, None)
    return Interval(float(est) if _defined(est) else None, low, high, 1.0 - len(ok) / len(rest), units, len(rest),
                    level, float(ok.std(ddof=1)) if len(ok) > 1 else None)


def stratified_weights(strata: Sequence[str], resamples: int = RESAMPLES, seed: int = 0) -> np.ndarray:
    """How often each unit is drawn in each resample, ``(1 + resamples, units)``: row 0 is all ones
    (the estimate), row b the counts of resample b, which draws each stratum's units with replacement
    as many times as the stratum has units (e.g. episodes within each family: every resample keeps
    the run's family mix). Seeded: the same seed and strata give the same weights."""
    strata = list(strata)
    if not strata:
        raise ValueError("strata=[] is invalid; expected at least one unit to resample")
    if resamples < 1:
        raise ValueError(f"resamples={resamples} is invalid; expected at least 1")
    rng = np.random.default_rng(seed)
    w = np.zeros((1 + resamples, len(strata)))
    w[0] = 1.0
    for name in sorted(set(strata)):
        members = np.flatnonzero(np.array([s == name for s in strata]))
        draws = rng.integers(0, len(members), (resamples, len(members)))
        offset = np.arange(resamples)[:, None] * len(members)
        counts = np.bincount((draws + offset).ravel(), minlength=resamples * len(members))
        w[1:, members] = counts.reshape(resamples, len(members))
    return w


def interval_of(values: Sequence[float], units: int, level: float = LEVEL) -> Interval:
    """The :class:`Interval` of a statistic computed on the rows of :func:`stratified_weights` over
    ``units`` units: ``values[0]`` the estimate, ``values[1:]`` the resamples (NaN where undefined)."""
    return _interval(list(values), units, level)
