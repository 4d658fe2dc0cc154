"""Subsets of a split: stratified by family and challenge, so a small run keeps the split's mix."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from affectsim_core.episode import Episode
from affectsim_core.errors import InvalidInput


def stratified_subset(episodes: list[Episode], n: int, seed: int = 0) -> list[Episode]:
    """``n`` episodes proportional to (family, challenge) strata (largest remainders, >= 1 per stratum)."""
    strata: dict[tuple, list[Episode]] = defaultdict(list)
    for e in episodes:
        strata[(e.family, e.challenge or "")].append(e)
    keys = sorted(strata)
    if n < len(keys):
        raise InvalidInput("episodes", n, f"at least one per stratum ({len(keys)})")
    rest = n - len(keys)  # one per stratum, the rest proportionally by largest remainders
    share = {k: rest * len(strata[k]) / len(episodes) for k in keys}
    take = {k: 1 + int(share[k]) for k in keys}
    for k in sorted(keys, key=lambda k: share[k] - int(share[k]), reverse=True)[: n - sum(take.values())]:
        take[k] += 1
    rng = np.random.default_rng(seed)
    out = []
    for k in keys:
        idx = rng.choice(len(strata[k]), size=min(take[k], len(strata[k])), replace=False)
        out += [strata[k][i] for i in sorted(idx)]
    return out
