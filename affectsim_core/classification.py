"""Classification scores over the five emotions (docs/protocol.md §8), defined once, ROS-free.

Labels are emotion names from :data:`EMOTIONS` or their indices 0..4. A prediction may also be
``None`` or ``-1``: no prediction (unparseable answer, failed recognizer). It is wrong for every
class: it adds a false negative to the true class and a false positive to none. Scores are
fractions in [0, 1].
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from affectsim_core.errors import InvalidInput
from affectsim_core.protocol import EMOTIONS

NO_PREDICTION = -1


def label_index(label: Any, field: str, allow_none: bool) -> int:
    """Class index 0..4 of ``label``; ``NO_PREDICTION`` for None / -1 when ``allow_none``."""
    if isinstance(label, str):
        if label in EMOTIONS:
            return EMOTIONS.index(label)
    elif isinstance(label, (int, np.integer)) and not isinstance(label, (bool, np.bool_)):
        if 0 <= label < len(EMOTIONS):
            return int(label)
        if allow_none and label == NO_PREDICTION:
            return NO_PREDICTION
    elif label is None and allow_none:
        return NO_PREDICTION
    expected = f"one of {EMOTIONS} or an index 0..{len(EMOTIONS) - 1}"
    raise InvalidInput(field, label, expected + (" (or None / -1: no prediction)" if allow_none else ""))


def label_indices(y_true: Sequence, y_pred: Sequence) -> tuple[np.ndarray, np.ndarray]:
    if len(y_true) != len(y_pred):
        raise InvalidInput("y_pred", f"{len(y_pred)} labels", f"as many labels as y_true ({len(y_true)})")
    if len(y_true) == 0:
        raise InvalidInput("y_true", list(y_true), "at least one label")
    return (np.array([label_index(y, "y_true", False) for y in y_true], int),
            np.array([label_index(y, "y_pred", True) for y in y_pred], int))


def per_class_f1(y_true: Sequence, y_pred: Sequence) -> dict[str, float]:
    """F1 per emotion, 2 TP / (2 TP + FP + FN); 0 where that is 0 / 0 (no true, no predicted sample)."""
    t, p = label_indices(y_true, y_pred)
    out = {}
    for k, name in enumerate(EMOTIONS):
        tp = int(((t == k) & (p == k)).sum())
        denom = 2 * tp + int(((t != k) & (p == k)).sum()) + int(((t == k) & (p != k)).sum())
        out[name] = 2 * tp / denom if denom else 0.0
    return out


def macro_f1(y_true: Sequence, y_pred: Sequence) -> float:
    """Unweighted mean of the five per-class F1 scores (fraction).

    The mean is always over all five classes; a class with F1 = 0 / 0 (absent from truth and
    prediction, or precision + recall = 0) counts as 0, as sklearn's
    ``f1_score(average="macro", labels=range(5), zero_division=0)``.
    """
    return float(np.mean(list(per_class_f1(y_true, y_pred).values())))
