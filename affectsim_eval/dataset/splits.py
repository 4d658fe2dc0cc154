"""Subsets of a split: stratified by family and challenge, so a small run keeps the split's mix."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from affectsim_core.episode import Episode
from affectsim_core.errors import InvalidInput


def stratified_subset(episodes: list[Episode], n: int, seed: int = 0) -> list[Episode]:
    """``n`` episodes of the (family, challenge) strata: one per stratum and the rest proportionally
    (largest remainders); ``n`` below the number of strata: one from each of the ``n`` largest."""
    if n < 1:
        raise InvalidInput("episodes", n, "a subset size >= 1")
    strata: dict[tuple, list[Episode]] = defaultdict(list)
    for e in episodes:
        strata[(e.family, e.challenge or "")].append(e)
    keys = sorted(strata)
    if n < len(keys):  # one episode from each of the n largest strata
        largest = sorted(keys, key=lambda k: -len(strata[k]))[:n]
        take = {k: int(k in largest) for k in keys}
    else:  # one per stratum, the rest proportionally
        rest = n - len(keys)
        share = {k: rest * len(strata[k]) / len(episodes) for k in keys}
        take = {k: 1 + int(share[k]) for k in keys}
        for k in sorted(keys, key=lambda k: share[k] - int(share[k]), reverse=True)[: n - sum(take.values())]:
            take[k] += 1
    rng = np.random.default_rng(seed)
    out = []
    for k in keys:
        if not take[k]:
            continue
        idx = rng.choice(len(strata[k]), size=min(take[k], len(strata[k])), replace=False)
        out += [strata[k][i] for i in sorted(idx)]
    return out
