"""Measures of evolving affect (segments, transitions) and of continuous VAD, ROS-free.

Segment measures follow DAR (Zhang et al., §5.1: segment-count accuracy, mean temporal IoU, emotion
accuracy at tIoU >= 0.5), VAD measures E3mo-Bench (its VAD assessment task: Spearman and Pearson
correlation; both in ``docs/protocol.md`` §9) plus Lin's concordance correlation coefficient, which also
penalises offset and scale. Inputs per episode: the true segments of the interval a setting
observed and the segments predicted from its window stream
(:func:`affectsim_core.affect.segments_from_windows`). Times are seconds; scores are fractions.

- **segment-count accuracy**: share of episodes whose predicted segment count equals the true one;
- **mean tIoU**: per episode the mean, over true segments, of the best temporal IoU with any
  predicted segment (whatever its emotion), then the mean over episodes;
- **segment emotion accuracy**: share of all true segments matched by a predicted segment of the
  same emotion with tIoU >= 0.5;
- **transition F1 (+-1 s)**: true and predicted transitions are the inner segment boundaries; per
  episode each predicted boundary matches at most one true boundary within the tolerance
  (closest pairs first); F1 = 2 TP / (2 TP + FP + FN) over all episodes, None without any
  boundary on either side;
- **detection delay**: mean of (predicted - true) time over matched transitions (s; negative:
  early), None without a match.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from affectsim_core.affect import VAD_DIMENSIONS, Segment
from affectsim_core.errors import InvalidInput

TIOU_MATCH = 0.5  # tIoU from which a predicted segment of the right emotion counts (DAR)
TRANSITION_TOLERANCE_S = 1.0


def tiou(a: Segment, b: Segment) -> float:
    """Temporal intersection over union of two segments' intervals."""
    inter = max(0.0, min(a.end, b.end) - max(a.start, b.start))
    union = max(a.end, b.end) - min(a.start, b.start)
    return inter / union if union > 0 else 0.0


def _pairs(true: Sequence[Sequence[Segment]], pred: Sequence[Sequence[Segment]]) -> list[tuple]:
    if len(true) != len(pred) or not true:
        raise InvalidInput("pred", f"{len(pred)} episodes", f"one segment list per episode ({len(true)}, at least 1)")
    for i, t in enumerate(true):
        if not t:
            raise InvalidInput(f"true[{i}]", list(t), "at least one true segment")
    return list(zip(true, pred))


def segment_count_accuracy(true: Sequence[Sequence[Segment]], pred: Sequence[Sequence[Segment]]) -> float:
    pairs = _pairs(true, pred)
    return sum(len(t) == len(p) for t, p in pairs) / len(pairs)


def mean_tiou(true: Sequence[Sequence[Segment]], pred: Sequence[Sequence[Segment]]) -> float:
    pairs = _pairs(true, pred)
    return float(np.mean([np.mean([max((tiou(s, q) for q in p), default=0.0) for s in t]) for t, p in pairs]))


def segment_emotion_accuracy(true: Sequence[Sequence[Segment]], pred: Sequence[Sequence[Segment]]) -> float:
    pairs = _pairs(true, pred)
    hits = [any(q.emotion == s.emotion and tiou(s, q) >= TIOU_MATCH for q in p) for t, p in pairs for s in t]
    return sum(hits) / len(hits)


def boundaries(segments: Sequence[Segment]) -> list[float]:
    """The transition times: where one segment ends and the next begins."""
    return [s.end for s in segments[:-1]]


def match_transitions(true: Sequence[float], pred: Sequence[float], tol: float = TRANSITION_TOLERANCE_S
                      ) -> list[tuple[float, float]]:
    """One-to-one (true, predicted) pairs within ``tol`` s, closest first."""
    cand = sorted((abs(p - t), i, j) for i, t in enumerate(true) for j, p in enumerate(pred) if abs(p - t) <= tol)
    used_t, used_p, out = set(), set(), []
    for _, i, j in cand:
        if i not in used_t and j not in used_p:
            used_t.add(i)
            used_p.add(j)
            out.append((true[i], pred[j]))
    return sorted(out)


def transition_scores(true: Sequence[Sequence[Segment]], pred: Sequence[Sequence[Segment]],
                      tol: float = TRANSITION_TOLERANCE_S) -> dict[str, float | int | None]:
    """{f1, precision, recall, delay_s, tp, fp, fn} pooled over episodes (see the module docstring)."""
    tp = fp = fn = 0
    delays = []
    for t, p in _pairs(true, pred):
        bt, bp = boundaries(t), boundaries(p)
        m = match_transitions(bt, bp, tol)
        tp += len(m)
        fp += len(bp) - len(m)
        fn += len(bt) - len(m)
        delays += [q - s for s, q in m]
    denom = 2 * tp + fp + fn
    return {"f1": 2 * tp / denom if denom else None, "precision": tp / (tp + fp) if tp + fp else None,
            "recall": tp / (tp + fn) if tp + fn else None,
            "delay_s": float(np.mean(delays)) if delays else None, "tp": tp, "fp": fp, "fn": fn}


# ------------------------------------------------------------------------------------------ VAD
def _xy(x: Sequence[float], y: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(x, float), np.asarray(y, float)
    if a.shape != b.shape or a.ndim != 1 or len(a) < 2:
        raise InvalidInput("y", f"shape {b.shape}", f"two equally long series of at least 2 values ({a.shape})")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise InvalidInput("values", "non-finite", "finite numbers")
    return a, b


def _constant(a: np.ndarray) -> bool:
    """All values equal (not std() == 0: numpy's mean of equal floats can be off by an ulp)."""
    return bool(a.min() == a.max())


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson correlation; None when either series is constant."""
    a, b = _xy(x, y)
    if _constant(a) or _constant(b):
        return None
    return float(((a - a.mean()) * (b - b.mean())).mean() / (a.std() * b.std()))


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman rank correlation (ties: average ranks); None when either series is constant."""
    from scipy.stats import rankdata  # here, not at the top: scipy.stats costs every process importing this ~0.7 s

    a, b = _xy(x, y)
    return pearson(rankdata(a), rankdata(b))


def ccc(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Lin's concordance correlation 2 cov / (var x + var y + (mean x - mean y)^2) (population
    moments); 0 when one series is constant, None when both are constant and equal."""
    a, b = _xy(x, y)
    denom = a.var() + b.var() + (a.mean() - b.mean()) ** 2
    if denom <= 0:
        return None
    if _constant(a) or _constant(b):
        return 0.0  # no covariance with a constant series (numpy's would be ±1e-18: "-0.00")
    return float(2 * ((a - a.mean()) * (b - b.mean())).mean() / denom)


def vad_scores(true: np.ndarray, pred: np.ndarray) -> dict[str, dict[str, float | None]]:
    """{dimension: {spearman, pearson, ccc}} of (N, 3) true and predicted VAD."""
    t, p = np.asarray(true, float), np.asarray(pred, float)
    if t.ndim != 2 or t.shape != p.shape or t.shape[1] != 3:
        raise InvalidInput("pred", f"shape {p.shape}", f"(N, 3) like the truth ({t.shape})")
    return {d: {"spearman": spearman(t[:, k], p[:, k]), "pearson": pearson(t[:, k], p[:, k]),
                "ccc": ccc(t[:, k], p[:, k])} for k, d in enumerate(VAD_DIMENSIONS)}
