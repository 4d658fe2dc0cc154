"""``pose-temporal``: BlazePose pose of the 8 frames -> per-frame body points and clip-level
posture and motion features -> an ensemble of small temporal networks (numpy inference; trained
by ``affectsim train pose-temporal``).

Over 17 body points (nose, shoulders, elbows, wrists, index fingers, hips, knees, ankles, foot
tips); frames where nobody was found are zero / left out. Clip-level features:
- 3D posture (view-invariant): BlazePose world landmarks in a body frame (origin the hip
  centre, up the clip's mean hip-to-shoulder direction, right the hip line of each frame), in
  torso lengths: mean, standard deviation and mean absolute frame-to-frame change per coordinate;
- 3D body measures: elbow, knee, shoulder, hip and neck angles, hand-to-hand, hand-to-hip,
  hand-to-head, elbow-to-elbow and foot-to-foot distances (mean and spread over the clip), and
  the torso direction in the camera frame (lean);
- image posture: per frame the points relative to the hip centre in torso lengths, their
  visibilities and a found flag; per point the mean frame-to-frame displacement and spread;
- image motion: hip-centre displacement between frames in torso lengths (mean, max, net) and
  the change of apparent size (walking towards or away); the share of frames with a person and
  the mean visibility.
Per frame (the temporal branch): the body-frame 3D points, the image points relative to the
hips, their visibilities and the found flag. Network: two 1D convolutions (kernel 3) over the 8
frames, mean- and max-pooled over time, concatenated with the clip-level features, then a
two-layer MLP. The clip's span in seconds is deliberately not used: it is twice the motion's
duration by protocol, a cue that would survive any viewpoint. Training mirrors clips left-right
(:func:`mirror_pose`) and averages the logits of networks trained from different seeds.
"""

from __future__ import annotations

import numpy as np

from affectsim_core.errors import InvalidInput
from affectsim_perception.person_model import BlazePose, clip_pose
from affectsim_perception.recognizers.vad_head import has_vad_head, vad_head
from affectsim_perception.recognizers.base import (
    RECOGNIZERS,
    ClipInput,
    Prediction,
    Recognizer,
    StreamInput,
    load_checkpoint,
    single_threaded_blas,
)

POINTS = (0, 11, 12, 13, 14, 15, 16, 19, 20, 23, 24, 25, 26, 27, 28, 31, 32)
FRAMES = 8
_N3 = len(POINTS) * 3
_N2 = FRAMES * (len(POINTS) * 3 + 1) + len(POINTS) * 3 + 1
_NB = 3 + 2 * 10 + 2 * 7  # body measures: lean, 10 angles and 7 distances (mean, spread)
N_STATIC = 3 * _N3 + 5 + 2 + _N2 + _NB
N_FRAME = len(POINTS) * 6 + 1  # per frame: 3D points, image points, visibilities, found
N_FEATURES = N_STATIC + FRAMES * N_FRAME
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


def _body_frame(w: np.ndarray) -> np.ndarray:
    """World landmarks ``w`` (F, 33, 3) of the frames with a person -> the 17 points in the body
    frame (F, 17, 3: right, forward, up) in torso lengths."""
    hip = w[:, [23, 24]].mean(axis=1)
    torso = w[:, [11, 12]].mean(axis=1) - hip
    size = max(float(np.median(np.linalg.norm(torso, axis=1))), 1e-3)
    up = _unit(torso.mean(axis=0))
    right = w[:, 23] - w[:, 24]
    right = _unit(right - (right @ up)[:, None] * up)
    fwd = np.cross(up, right)
    rel = (w[:, POINTS] - hip[:, None]) / size
    return np.stack([np.einsum("fpc,fc->fp", rel, right), np.einsum("fpc,fc->fp", rel, fwd), rel @ up], -1)


def _world_features(pose: np.ndarray, found: np.ndarray, local: np.ndarray) -> np.ndarray:
    """``local``: :func:`_body_frame` of the frames with a person."""
    out = np.zeros(3 * _N3 + 5)
    if not found.any():
        return out
    p = pose[found]
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


def _angle(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Angle (rad) at ``b`` between ``a`` and ``c``, per row."""
    return np.arccos(np.clip((_unit(a - b) * _unit(c - b)).sum(-1), -1.0, 1.0))


def _body_measures(pose: np.ndarray, found: np.ndarray) -> np.ndarray:
    out = np.zeros(_NB)
    if not found.any():
        return out
    w = pose[found][:, :, 3:]
    hip, neck = w[:, [23, 24]].mean(axis=1), w[:, [11, 12]].mean(axis=1)
    torso = neck - hip
    size = max(float(np.median(np.linalg.norm(torso, axis=1))), 1e-3)
    out[:3] = _unit(torso).mean(axis=0)  # lean, in the camera's frame
    angles = np.stack([_angle(w[:, 11], w[:, 13], w[:, 15]), _angle(w[:, 12], w[:, 14], w[:, 16]),  # elbows
                       _angle(w[:, 23], w[:, 25], w[:, 27]), _angle(w[:, 24], w[:, 26], w[:, 28]),  # knees
                       _angle(w[:, 13], w[:, 11], w[:, 23]), _angle(w[:, 14], w[:, 12], w[:, 24]),  # shoulders
                       _angle(w[:, 25], w[:, 23], w[:, 11]), _angle(w[:, 26], w[:, 24], w[:, 12]),  # hips
                       _angle(w[:, 0], neck, hip),  # neck
                       np.arccos(np.clip((_unit(torso) * _unit(w[:, 0] - neck)).sum(-1), -1.0, 1.0))], 1)
    dist = np.stack([np.linalg.norm(w[:, a] - b, axis=1) for a, b in
                     ((15, w[:, 16]), (15, hip), (16, hip), (15, w[:, 0]), (16, w[:, 0]), (27, w[:, 28]),
                      (13, w[:, 14]))], 1) / size
    out[3:13], out[13:23] = angles.mean(axis=0), angles.std(axis=0)
    out[23:30], out[30:37] = dist.mean(axis=0), dist.std(axis=0)
    return out


def _frame_features(pose: np.ndarray, found: np.ndarray, local: np.ndarray) -> np.ndarray:
    out = np.zeros((len(pose), N_FRAME))
    if not found.any():
        return out
    p = pose[found]
    h2 = p[:, [23, 24], :2].mean(axis=1)
    s2 = np.maximum(np.linalg.norm(p[:, [11, 12], :2].mean(axis=1) - h2, axis=1), 1e-3)
    image = (p[:, POINTS, :2] - h2[:, None]) / s2[:, None, None]
    out[found] = np.concatenate([local.reshape(len(p), -1), image.reshape(len(p), -1), p[:, POINTS, 2],
                                 np.ones((len(p), 1))], axis=1)
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
    """(N_FEATURES,) features of one clip's pose (8, 33, 6), columns ``person_model.POSE_COLUMNS``:
    N_STATIC clip-level features, then FRAMES x N_FRAME per-frame features."""
    pose = np.asarray(pose, np.float64)
    if pose.shape != (FRAMES, 33, 6):
        raise ValueError(f"clip pose shape {pose.shape} is invalid; expected ({FRAMES}, 33, 6)")
    found = pose[:, :, 2].max(axis=1) > 0
    vis = pose[found][:, POINTS, 2].mean() if found.any() else 0.0
    local = _body_frame(pose[found][:, :, 3:]) if found.any() else np.zeros((0, len(POINTS), 3))
    return np.concatenate([_world_features(pose, found, local), [found.mean(), vis], _image_features(pose, found),
                           _body_measures(pose, found), _frame_features(pose, found, local).ravel()]).astype(np.float32)


def _conv1d(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """'Same' 1D convolution over time of every ensemble member at once: x (M, B, T, C_in), w
    (M, C_out, C_in, K) as in PyTorch, b (M, C_out) -> (M, B, T, C_out)."""
    m, batch, t, c = x.shape
    k = w.shape[3]
    xp = np.zeros((m, batch, t + k - 1, c), x.dtype)
    xp[:, :, k // 2:k // 2 + t] = x
    windows = np.concatenate([xp[:, :, i:i + t] for i in range(k)], axis=-1)  # (M, B, T, K x C_in)
    kernel = w.transpose(0, 3, 2, 1).reshape(m, k * c, -1)  # (M, K x C_in, C_out)
    return (windows.reshape(m, batch * t, k * c) @ kernel).reshape(m, batch, t, -1) + b[:, None, None]


class TemporalEnsemble:
    """The networks of a ``pose-temporal`` checkpoint, their weights stacked over the ensemble
    members ``m{k}_`` (all of one architecture) so that one array operation runs every member."""

    def __init__(self, weights: dict[str, np.ndarray]) -> None:
        members = sorted({k.split("_", 1)[0] for k in weights if k.startswith("m") and "_" in k})

        def stack(name: str) -> np.ndarray:
            return np.stack([weights[f"{m}_{name}"] for m in members])

        n_conv = sum(1 for k in weights if k.startswith(f"{members[0]}_C"))
        n_linear = sum(1 for k in weights if k.startswith(f"{members[0]}_W"))
        self.mu, self.sd = stack("mu"), stack("sd")
        self.convs = [(stack(f"C{i}"), stack(f"c{i}")) for i in range(n_conv)]
        self.linears = [(stack(f"W{i}"), stack(f"b{i}")) for i in range(n_linear)]
        self.temperature = float(weights["temperature"])

    def logits(self, x: np.ndarray) -> np.ndarray:
        """(B, 5) mean over members of: standardise; per-frame part -> 1D convolutions with ReLU ->
        mean and max over time; concatenated with the clip-level part -> Linear layers with ReLU
        (not after the last); divided by the ensemble's temperature. ``x`` (B, N_FEATURES)."""
        h = (np.asarray(x)[None] - self.mu[:, None]) / self.sd[:, None]  # (M, B, N)
        f = h[:, :, N_STATIC:].reshape(len(h), h.shape[1], FRAMES, N_FRAME)
        for w, b in self.convs:
            f = np.maximum(_conv1d(f, w, b), 0.0)
        h = np.concatenate([f.mean(axis=2), f.max(axis=2), h[:, :, :N_STATIC]], axis=2)
        for i, (w, b) in enumerate(self.linears):
            h = h @ w + b[:, None]
            if i < len(self.linears) - 1:
                h = np.maximum(h, 0.0)
        return h.mean(axis=0) / self.temperature


def net_logits(weights: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """(B, 5) logits of the checkpoint ``weights`` for features ``x`` (B, N_FEATURES)
    (:class:`TemporalEnsemble`)."""
    return TemporalEnsemble(weights).logits(x)


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@RECOGNIZERS.register("pose-temporal")
class PoseTemporal(Recognizer):
    def __init__(self, checkpoint: str = "pose-temporal", detector=None) -> None:
        self.weights = load_checkpoint(checkpoint, required=("m0_mu", "m0_sd", "m0_C0", "m0_c0", "m0_W0", "m0_b0",
                                                             "temperature")).arrays
        n_in = self.weights["m0_mu"].shape[0]
        if n_in != N_FEATURES:
            raise InvalidInput(f"checkpoint {checkpoint!r} m0_mu", f"{n_in} features",
                               f"the {N_FEATURES} this code computes (retrain: affectsim train pose-temporal)")
        if detector is None:
            detector = BlazePose(video=True)
        self.detector = detector
        self.net = TemporalEnsemble(self.weights)
        self.estimates_vad = has_vad_head(self.weights)

    def predict(self, clip: ClipInput) -> Prediction:
        return self.predict_pose(clip_pose(self.detector, clip.frames))

    def predict_stream(self, stream: StreamInput, stride: int = 1) -> list[tuple[float, Prediction]]:
        """Every window's prediction from one BlazePose pass over the whole stream: the person is
        tracked from frame to frame through the stream (not restarted per window, as
        :meth:`predict` of each window would), so every frame's pose is computed once."""
        pose = clip_pose(self.detector, stream.frames)
        return [(t, self.predict_pose(pose[i:i + FRAMES])) for i, t in stream.starts(stride)]

    def predict_pose(self, pose: np.ndarray) -> Prediction:
        """From a precomputed (8, 33, 6) clip pose (``person_model.clip_pose``)."""
        detail = "" if pose[:, :, 2].max() > 0 else "no person detected in any frame"
        x = pose_features(pose)[None]
        with single_threaded_blas():
            probs = softmax(self.net.logits(x))[0]
            vad = vad_head(self.weights, x)[0] if self.estimates_vad else None
        return Prediction.from_probs(probs, detail, vad)

    def close(self) -> None:
        self.detector.close()
