"""Does the dyadic context give the target's emotion away?

A dyadic episode shows a target and a partner. If the partner's emotion, the pair's distance or the
interaction type predicted the target's emotion, a recognizer could score on the dyadic family
without reading the target's body. :func:`context_shortcut` measures it: a classifier that sees only
that context (no body motion) is scored by Macro-F1, leaving one interaction sequence out at a
time: fit on the episodes of every other sequence (of every split), predict the held-out
sequence's episodes, and score the pooled predictions of all dyadic episodes. A train -> test fit
alone rests on the test split's 7 sequences and has no power (under random 34/7/7 sequence splits
its 95th percentile on a context independent of the label is 0.33); leaving each of the 48
sequences out uses every episode once. The same score with the labels permuted (seeded) is
reported beside it as the chance level the check is judged against.

The classifier is the strongest simple one for three categorical-ish features: the most frequent
train label in the episode's cell (interaction, partner emotion, distance in :data:`DISTANCE_BIN_M`
bins), backing off to (interaction, partner emotion), to the interaction, then to the train
majority. Any deterministic mapping from context to label scores 1.0; a context independent of
the label scores about chance (0.20). ``affectsim dataset validate`` fails above :data:`MAX_CONTEXT_F1`
(chance + 0.05).
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

MAX_CONTEXT_F1 = 0.25  # leave-one-sequence-out Macro-F1 of the context-only classifier (chance 0.20, + 0.05)
PERMUTATIONS = 20  # label permutations of the chance level
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


def context_shortcut(episodes: Sequence[Episode], lib: Library, permutations: int = PERMUTATIONS,
                     seed: int = 0) -> dict:
    """:func:`leave_one_sequence_out` over the dyadic ``episodes`` (every split's), with their counts."""
    eps = [e for e in episodes if e.family == "dyadic"]
    out = leave_one_sequence_out([context(e, lib) for e in eps], [e.emotion for e in eps], [e.group for e in eps],
                                 permutations, seed)
    return {**out, "episodes": len(eps), "sequences": len(set(e.group for e in eps))}


def leave_one_sequence_out(contexts: Sequence[Context], labels: Sequence[str], groups: Sequence[str],
                           permutations: int = PERMUTATIONS, seed: int = 0) -> dict:
    """``macro_f1``: the pooled Macro-F1 of the context-only classifier, each sequence (``groups``)
    predicted by a fit on all the others; ``chance_p95``: the 95th percentile of the same score over
    ``permutations`` seeded permutations of the sequences' labels (each sequence's episodes take the
    most frequent label of another sequence: the structure within a sequence is kept). Both None with
    fewer than two sequences."""
    names = sorted(set(groups))
    if len(names) < 2:
        return {"macro_f1": None, "chance_p95": None}
    y = np.array([EMOTIONS.index(e) for e in labels])
    fold = np.array([names.index(g) for g in groups])

    def score(truth: np.ndarray) -> float:
        pred = np.empty_like(truth)
        for g in range(len(names)):
            held = fold == g
            clf = ContextClassifier([c for c, h in zip(contexts, held) if not h], [EMOTIONS[k] for k in truth[~held]])
            pred[held] = [EMOTIONS.index(clf.predict(c)) for c, h in zip(contexts, held) if h]
        return float(macro_f1(truth, pred))

    own = np.array([np.bincount(y[fold == g], minlength=len(EMOTIONS)).argmax() for g in range(len(names))])
    rng = np.random.default_rng([seed, 27])
    null = [score(rng.permutation(own)[fold]) for _ in range(permutations)]
    return {"macro_f1": score(y), "chance_p95": float(np.quantile(null, 0.95)) if null else None}
