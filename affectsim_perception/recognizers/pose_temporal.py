"""``pose-temporal``: BlazePose pose of the 8 frames -> body posture and motion features -> an
ensemble of small MLPs (numpy inference; trained by ``affectsim train pose-temporal``).

Features of a clip, over 17 body points (nose, shoulders, elbows, wrists, index fingers, hips,
knees, ankles, foot tips); frames where nobody was found are zero / left out:
- 3D posture (view-invariant): BlazePose world landmarks in a body frame (origin the hip
  centre, up the clip's mean hip-to-shoulder direction, right the hip line of each frame), in
  torso lengths: mean, standard deviation and mean absolute frame-to-frame change per coordinate;
- image posture: per frame the points relative to the hip centre in torso lengths, their
  visibilities and a found flag; per point the mean frame-to-frame displacement and spread;
- image motion: hip-centre displacement between frames in torso lengths (mean, max, net) and
  the change of apparent size (walking towards or away); the share of frames with a person and
  the mean visibility.
The clip's span in seconds is deliberately not used: it is twice the motion's duration by
protocol, a cue that would survive any viewpoint. Training mirrors clips left-right
(:func:`mirror_pose`) and averages the logits of several MLPs trained from different seeds.
"""

from __future__ import annotations

import numpy as np

from affectsim_perception.person_model import clip_pose
from affectsim_perception.recognizers.base import RECOGNIZERS, ClipInput, Prediction, Recognizer, load_checkpoint

POINTS = (0, 11, 12, 13, 14, 15, 16, 19, 20, 23, 24, 25, 26, 27, 28, 31, 32)
_N3 = len(POINTS) * 3
_N2 = 8 * (len(POINTS) * 3 + 1) + len(POINTS) * 3 + 1
N_FEATURES = 3 * _N3 + 5 + 2 + _N2
_PAIRS = ((1, 4), (2, 5), (3, 6), (7, 8), (9, 10), (11, 12), (13, 14), (15, 16), (17, 18), (19, 20), (21, 22),
          (23, 24), (25, 26), (27, 28), (29, 30), (31, 32))  # BlazePose left/right landmark pairs
MIRROR = np.arange(33)
for _a, _b in _PAIRS:
    MIRROR[_a], MIRROR[_b] = _b, _a


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-9)


def mirror_pose(pose: np.ndarray) -> np.ndarray:
    """The clip pose (8, 33, 6) of the left-right mirrored frames (training augmentation)."""
    p = np.array(pose, np.float64)[:, MIRROR]
    found = p[:, :, 2].max(axis=1) > 0
    p[:, :, 0] = np.where(found[:, None], 1.0 - p[:, :, 0], 0.0)
    p[:, :, 3] = -p[:, :, 3]
    return p


def _world_features(pose: np.ndarray, found: np.ndarray) -> np.ndarray:
    out = np.zeros(3 * _N3 + 5)
    if not found.any():
        return out
    p = pose[found]
    w = p[:, :, 3:]
    hip = w[:, [23, 24]].mean(axis=1)
    torso = w[:, [11, 12]].mean(axis=1) - hip
    size = max(float(np.median(np.linalg.norm(torso, axis=1))), 1e-3)
    up = _unit(torso.mean(axis=0))
    right = w[:, 23] - w[:, 24]
    right = _unit(right - (right @ up)[:, None] * up)
    fwd = np.cross(up, right)
    rel = (w[:, POINTS] - hip[:, None]) / size
    local = np.stack([np.einsum("fpc,fc->fp", rel, right), np.einsum("fpc,fc->fp", rel, fwd), rel @ up], -1)
    out[:_N3] = local.mean(axis=0).ravel()
    out[_N3:2 * _N3] = local.std(axis=0).ravel()
    if len(p) >= 2:
        out[2 * _N3:3 * _N3] = np.abs(np.diff(local, axis=0)).mean(axis=0).ravel()
        h2 = p[:, [23, 24], :2].mean(axis=1)
        s2 = np.maximum(np.linalg.norm(p[:, [11, 12], :2].mean(axis=1) - h2, axis=1), 1e-3)
        m2 = float(np.median(s2))
        step = np.linalg.norm(np.diff(h2, axis=0), axis=1) / m2
        out[3 * _N3:] = (step.mean(), step.max(), np.linalg.norm(h2[-1] - h2[0]) / m2, np.std(s2) / m2,
                         (s2[-1] - s2[0]) / m2)
    return out


def _image_features(pose: np.ndarray, found: np.ndarray) -> np.ndarray:
    hip = pose[:, [23, 24], :2].mean(axis=1)
    shoulder = pose[:, [11, 12], :2].mean(axis=1)
    scale = np.maximum(np.linalg.norm(shoulder - hip, axis=1), 1e-3)
    rel = (pose[:, POINTS, :2] - hip[:, None]) / scale[:, None, None]
    rel[~found] = 0.0
    per_frame = np.concatenate([rel.reshape(len(pose), -1), pose[:, POINTS, 2], found[:, None].astype(float)], axis=1)
    sel = rel[found]
    if len(sel) >= 2:
        motion = np.abs(np.diff(sel, axis=0)).mean(axis=0).sum(axis=1)
        spread = sel.std(axis=0).ravel()
    else:
        motion, spread = np.zeros(len(POINTS)), np.zeros(2 * len(POINTS))
    return np.concatenate([per_frame.ravel(), motion, spread, [found.mean()]])


def pose_features(pose: np.ndarray) -> np.ndarray:
    """(N_FEATURES,) features of one clip's pose (8, 33, 6), columns ``person_model.POSE_COLUMNS``."""
    pose = np.asarray(pose, np.float64)
    found = pose[:, :, 2].max(axis=1) > 0
    vis = pose[found][:, POINTS, 2].mean() if found.any() else 0.0
    return np.concatenate([_world_features(pose, found), [found.mean(), vis],
                           _image_features(pose, found)]).astype(np.float32)


def mlp_logits(weights: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """Mean over ensemble members ``m{k}_``: standardise, then Linear-ReLU layers W0..Wn (the last
    without ReLU); divided by the ensemble's temperature."""
    members = sorted({k.split("_", 1)[0] for k in weights if k.startswith("m") and "_" in k})
    out = []
    for m in members:
        h = (x - weights[f"{m}_mu"]) / weights[f"{m}_sd"]
        n = sum(1 for k in weights if k.startswith(f"{m}_W"))
        for i in range(n):
            h = h @ weights[f"{m}_W{i}"] + weights[f"{m}_b{i}"]
            if i < n - 1:
                h = np.maximum(h, 0.0)
        out.append(h)
    return np.mean(out, axis=0) / float(weights["temperature"])


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@RECOGNIZERS.register("pose-temporal")
class PoseTemporal(Recognizer):
    name = "pose-temporal"

    def __init__(self, checkpoint: str = "pose-temporal", detector=None) -> None:
        self.weights = load_checkpoint(checkpoint).arrays
        n_in = self.weights["m0_W0"].shape[0] if "m0_W0" in self.weights else None
        if n_in != N_FEATURES:
            raise ValueError(f"checkpoint {checkpoint!r} expects {n_in} features; this code computes {N_FEATURES} "
                             "(retrain: affectsim train pose-temporal)")
        if detector is None:
            from affectsim_perception.person_model import BlazePose

            detector = BlazePose(video=True)
        self.detector = detector

    def predict(self, clip: ClipInput) -> Prediction:
        return self.predict_pose(clip_pose(self.detector, clip.frames))

    def predict_pose(self, pose: np.ndarray) -> Prediction:
        """From a precomputed (8, 33, 6) clip pose (``person_model.clip_pose``)."""
        detail = "" if pose[:, :, 2].max() > 0 else "no person detected in any frame"
        return Prediction.from_probs(softmax(mlp_logits(self.weights, pose_features(pose)[None]))[0], detail)

    def close(self) -> None:
        self.detector.close()
