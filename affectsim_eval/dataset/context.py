"""Does the dyadic context give the target's emotion away?

A dyadic episode shows a target and a partner. If the partner's emotion, the pair's distance or the
interaction type predicted the target's emotion, a recognizer could score on the dyadic family
without reading the target's body. :func:`context_shortcut` measures it: a classifier that sees only
that context (no body motion) is fit on the train split and scored on the test split by Macro-F1.

The classifier is the strongest simple one for three categorical-ish features: the most frequent
train label in the episode's cell (interaction, partner emotion, distance in :data:`DISTANCE_BIN_M`
bins), backing off to (interaction, partner emotion), to the interaction, then to the train
majority. Any deterministic mapping from context to label scores 1.0; a context independent of
the label scores about chance (0.20). ``affectsim dataset validate`` fails above :data:`MAX_CONTEXT_F1`.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Sequence

import numpy as np

from affectsim_bridge.content.library import Library
from affectsim_core.classification import macro_f1
from affectsim_core.episode import Episode
from affectsim_core.protocol import EMOTIONS

MAX_CONTEXT_F1 = 0.35  # Macro-F1 on test of the context-only classifier (chance: 0.20)
DISTANCE_BIN_M = 0.1  # m, width of the distance cells

Context = tuple[str, str, float]  # interaction type, partner emotion, target-partner distance (m)


def context(ep: Episode, lib: Library) -> Context:
    """What a dyadic episode shows besides the target's body: interaction, partner emotion, distance (m)."""
    seqs = {d["id"]: d for d in lib.manifest.get("dyadic", [])}
    target = next(h for h in ep.humans if h.role == "target")
    partner = next(h for h in ep.humans if h.role != "target")
    return (seqs[ep.group]["interaction"], lib.entries[partner.motion_id]["emotion"],
            math.hypot(partner.x - target.x, partner.y - target.y))


def _cells(c: Context) -> tuple[tuple, ...]:
    """The cells of a context, most specific first."""
    kind, emotion, dist = c
    return ((kind, emotion, int(dist // DISTANCE_BIN_M)), (kind, emotion), (kind,), ())


class ContextClassifier:
    """Most frequent train label per context cell, with back-off to coarser cells."""

    def __init__(self, contexts: Sequence[Context], labels: Sequence[str]) -> None:
        self.counts: dict[tuple, Counter] = {}
        for c, y in zip(contexts, labels):
            for cell in _cells(c):
                self.counts.setdefault(cell, Counter())[y] += 1

    def predict(self, c: Context) -> str:
        for cell in _cells(c):
            if cell in self.counts:  # ties broken by class order, deterministically
                best = max(self.counts[cell].values())
                return next(e for e in EMOTIONS if self.counts[cell][e] == best)
        return EMOTIONS[0]


def context_shortcut(train: Sequence[Episode], test: Sequence[Episode], lib: Library) -> dict:
    """Macro-F1 on ``test`` of the context-only classifier fit on ``train`` (dyadic episodes of each)."""
    tr = [e for e in train if e.family == "dyadic"]
    te = [e for e in test if e.family == "dyadic"]
    if not tr or not te:
        return {"macro_f1": None, "train": len(tr), "test": len(te)}
    clf = ContextClassifier([context(e, lib) for e in tr], [e.emotion for e in tr])
    y = np.array([EMOTIONS.index(e.emotion) for e in te])
    p = np.array([EMOTIONS.index(clf.predict(context(e, lib))) for e in te])
    return {"macro_f1": float(macro_f1(y, p)), "train": len(tr), "test": len(te)}
