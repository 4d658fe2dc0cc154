"""A recognizer's valence-arousal-dominance head: ridge regression on its own clip features.

Trained on the train split only by ``affectsim train`` (``affectsim_eval.training.vad_fit.fit_vad_head``:
features standardised with the train mean and deviation, the ridge strength chosen on val by mean
concordance), stored in the recognizer's checkpoint as :data:`VAD_ARRAYS`; a checkpoint without
them makes no VAD estimate. Outputs are clipped to [-1, 1].
"""

from __future__ import annotations

import numpy as np

VAD_ARRAYS = ("vad_mu", "vad_sd", "vad_w", "vad_b")  # (F,), (F,), (F, 3), (3,)


def has_vad_head(weights: dict[str, np.ndarray]) -> bool:
    return all(k in weights for k in VAD_ARRAYS)


def vad_head(weights: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """(B, 3) valence, arousal, dominance in [-1, 1] for features ``x`` (B, F)."""
    z = (np.asarray(x, float) - weights["vad_mu"]) / weights["vad_sd"]
    return np.clip(z @ weights["vad_w"] + weights["vad_b"], -1.0, 1.0)
