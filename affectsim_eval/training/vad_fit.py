"""Fitting a recognizer's VAD head (``affectsim_perception.recognizers.vad_head``) on the train split.

Targets: each training clip's true valence, arousal and dominance, the motion library's per-clip
VAD of the episode's target (one-label clips hold theirs constant). Ridge regression on the
recognizer's own clip features, standardised with the train mean and deviation; the ridge
strength is the one of :data:`ALPHAS` with the best mean concordance (CCC) on val. numpy only.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from affectsim_core.affect import VAD_DIMENSIONS
from affectsim_eval.scoring.affect_metrics import ccc, pearson

ALPHAS = (0.1, 1.0, 10.0, 100.0, 1000.0, 10000.0)


def _ridge(z: np.ndarray, y: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    b = y.mean(0)
    w = np.linalg.solve(z.T @ z + alpha * np.eye(z.shape[1]), z.T @ (y - b))
    return w, b


def vad_quality(y: np.ndarray, p: np.ndarray) -> dict[str, dict[str, float | None]]:
    """{dimension: {ccc, pearson}} (rounded) of true ``y`` and predicted ``p`` (N, 3)."""
    out = {}
    for k, d in enumerate(VAD_DIMENSIONS):
        c, r = ccc(y[:, k], p[:, k]), pearson(y[:, k], p[:, k])
        out[d] = {"ccc": None if c is None else round(c, 4), "pearson": None if r is None else round(r, 4)}
    return out


def fit_vad_head(x: np.ndarray, y: np.ndarray, xv: np.ndarray, yv: np.ndarray,
                 log: Callable[[str], None] = print) -> tuple[dict[str, np.ndarray], dict]:
    """The head's arrays (``vad_mu``, ``vad_sd``, ``vad_w``, ``vad_b``) for train features ``x`` (N, F)
    and VAD ``y`` (N, 3), the ridge strength chosen on val (``xv``, ``yv``), and the fit's record."""
    mu, sd = x.mean(0), np.maximum(x.std(0), 1e-6)
    z, zv = (x - mu) / sd, (xv - mu) / sd
    best = None
    curve = {}
    for a in ALPHAS:
        w, b = _ridge(z, y, a)
        pv = np.clip(zv @ w + b, -1, 1)
        score = float(np.mean([ccc(yv[:, k], pv[:, k]) or 0.0 for k in range(3)]))
        curve[str(a)] = round(score, 4)
        if best is None or score > best[0]:
            best = (score, a, w, b)
    score, a, w, b = best
    log(f"[train] VAD head: ridge alpha {a}, val mean CCC {score:.3f}")
    arrays = {"vad_mu": mu.astype(np.float64), "vad_sd": sd.astype(np.float64), "vad_w": w, "vad_b": b}
    return arrays, {"alpha": a, "val_mean_ccc_by_alpha": curve}
