"""``pose-temporal``: BlazePose keypoints of the 8 frames -> body-normalised pose and motion
features -> a small MLP (numpy inference; trained by ``affectsim train pose-temporal``).

Features per frame: 17 body keypoints (nose, shoulders, elbows, wrists, index fingers, hips,
knees, ankles, foot tips) relative to the hip centre in units of the torso length, their
visibilities and a found flag; over the clip: mean absolute frame-to-frame displacement and
standard deviation of each keypoint (movement quantity and range), and the share of frames with
a person.
"""

from __future__ import annotations

import numpy as np

from affectsim_perception.person_model import clip_keypoints
from affectsim_perception.recognizers.base import RECOGNIZERS, ClipInput, Prediction, Recognizer, load_checkpoint

POINTS = (0, 11, 12, 13, 14, 15, 16, 19, 20, 23, 24, 25, 26, 27, 28, 31, 32)
N_FEATURES = 8 * (len(POINTS) * 3 + 1) + len(POINTS) * 3 + 1


def pose_features(kp: np.ndarray) -> np.ndarray:
    """(F,) features of one clip's keypoints (8, 33, 3): x, y in [0, 1] of the frame, visibility."""
    kp = np.asarray(kp, np.float64)
    found = kp[:, :, 2].max(axis=1) > 0
    hip = kp[:, [23, 24], :2].mean(axis=1)
    shoulder = kp[:, [11, 12], :2].mean(axis=1)
    scale = np.maximum(np.linalg.norm(shoulder - hip, axis=1), 1e-3)
    rel = (kp[:, POINTS, :2] - hip[:, None]) / scale[:, None, None]
    rel[~found] = 0.0
    vis = kp[:, POINTS, 2]
    per_frame = np.concatenate([rel.reshape(len(kp), -1), vis, found[:, None].astype(float)], axis=1)
    sel = rel[found]
    if len(sel) >= 2:
        motion = np.abs(np.diff(sel, axis=0)).mean(axis=0).sum(axis=1)
        spread = sel.std(axis=0).ravel()
    else:
        motion, spread = np.zeros(len(POINTS)), np.zeros(2 * len(POINTS))
    return np.concatenate([per_frame.ravel(), motion, spread, [found.mean()]]).astype(np.float32)


def mlp_logits(weights: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """Standardise, then Linear-ReLU layers W0..Wn (the last without ReLU), divided by the temperature."""
    h = (x - weights["mu"]) / weights["sd"]
    n = sum(1 for k in weights if k.startswith("W"))
    for i in range(n):
        h = h @ weights[f"W{i}"] + weights[f"b{i}"]
        if i < n - 1:
            h = np.maximum(h, 0.0)
    return h / float(weights["temperature"])


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@RECOGNIZERS.register("pose-temporal")
class PoseTemporal(Recognizer):
    name = "pose-temporal"

    def __init__(self, checkpoint: str = "pose-temporal", detector=None) -> None:
        self.weights = load_checkpoint(checkpoint).arrays
        if self.weights["W0"].shape[0] != N_FEATURES:
            raise ValueError(f"checkpoint {checkpoint!r} expects {self.weights['W0'].shape[0]} features; "
                             f"this code computes {N_FEATURES}")
        if detector is None:
            from affectsim_perception.person_model import BlazePose

            detector = BlazePose()
        self.detector = detector

    def predict(self, clip: ClipInput) -> Prediction:
        return self.predict_keypoints(clip_keypoints(self.detector, clip.frames))

    def predict_keypoints(self, kp: np.ndarray) -> Prediction:
        """From precomputed (8, 33, 3) keypoints (the perception node shares them across recognizers)."""
        detail = "" if kp[:, :, 2].max() > 0 else "no person detected in any frame"
        return Prediction.from_probs(softmax(mlp_logits(self.weights, pose_features(kp)[None]))[0], detail)

    def close(self) -> None:
        self.detector.close()
