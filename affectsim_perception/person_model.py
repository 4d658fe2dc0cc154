"""Frozen person models from ``mediapipe==0.10.14``, offline: BlazePose (detection, box and 33
landmarks with visibility; its TFLite models run by :mod:`affectsim_perception.blazepose`).

Only the ``full`` landmark model ships inside the wheel (``lite`` and ``heavy`` would be
downloaded at run time, which this project never does). Frames are RGB uint8 (H, W, 3); image outputs are in pixels of that image, world
landmarks in metres (BlazePose's own frame: origin between the hips, axes those of the camera
up to scale, so they carry the body's 3D posture whatever the viewpoint).
"""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict

import numpy as np

from affectsim_core.errors import InvalidInput
from affectsim_core.person_tracking import DETECTORS, PersonDetection
from affectsim_perception.blazepose import PoseGraph, roi_from_points

os.environ.setdefault("GLOG_minloglevel", "2")  # mediapipe's C++ start-up chatter
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


@DETECTORS.register("blazepose")
class BlazePose:
    """Single-person pose (:mod:`affectsim_perception.blazepose`). ``video=False``: every image on
    its own, the detector runs on each (results do not depend on order). ``video=True``: the person
    is tracked from frame to frame and the detector runs only when the track is lost; :meth:`reset`
    before each new sequence, as :func:`clip_pose` does, so a clip's result depends on that clip
    alone. ``threads``: CPU threads of each model (results do not depend on it); by default
    ``$OMP_NUM_THREADS`` where set (Ray sets it per worker, the evaluation and training pools to 1),
    otherwise up to 2."""

    def __init__(self, min_detection_confidence: float = 0.5, video: bool = False,
                 min_presence: float = 0.5, threads: int | None = None) -> None:
        if threads is None:
            env = os.environ.get("OMP_NUM_THREADS", "")
            if env and not (env.isdigit() and int(env) > 0):
                raise InvalidInput("OMP_NUM_THREADS", env, "a positive integer (CPU threads per model)")
            threads = int(env) if env else min(2, os.cpu_count() or 1)
        self.video = video
        self.min_presence = min_presence
        self._graph = PoseGraph(threads, min_detection_confidence)
        self._roi = None

    def reset(self) -> None:
        """Forget the tracked person (video mode)."""
        self._roi = None

    def detect(self, rgb: np.ndarray) -> PersonDetection | None:
        if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
            raise ValueError(f"image shape/dtype {rgb.shape}/{rgb.dtype} is invalid; expected (H, W, 3) uint8 RGB")
        rgb = np.ascontiguousarray(rgb)
        roi = self._roi if self.video else None
        if roi is None:
            roi = self._graph.detect(rgb)
        lm = self._graph.landmarks(rgb, roi) if roi is not None else None
        if lm is None or lm.presence < self.min_presence:
            self._roi = None
            return None
        if self.video:
            self._roi = roi_from_points(lm.points[33], lm.points[34])
        h, w = rgb.shape[:2]
        kp, vis = lm.points[:33], lm.visibility[:33]
        seen = kp[vis > 0.5] if (vis > 0.5).any() else kp
        x0, y0 = np.clip(seen.min(0), 0, [w, h])
        x1, y1 = np.clip(seen.max(0), 0, [w, h])
        return PersonDetection(kp, vis, (float(x0), float(y0), float(x1), float(y1)), lm.world[:33])

    def close(self) -> None:
        """Nothing to release (kept for callers that close their detectors)."""


POSE_COLUMNS = ("x", "y", "visibility", "wx", "wy", "wz")


_MEMO: "OrderedDict[tuple[bool, bytes], np.ndarray]" = OrderedDict()
_MEMO_SIZE = 8


def clear_pose_cache() -> None:
    """Forget memoised clip poses (benchmarks time the BlazePose pass itself)."""
    _MEMO.clear()


def clip_pose(detector: BlazePose, frames: np.ndarray) -> np.ndarray:
    """(N, 33, 6) pose of N frames, columns :data:`POSE_COLUMNS`: x, y normalised to [0, 1] of the
    frame, visibility, world landmarks (metres); zeros where nobody was found. A video-mode
    detector is reset first and tracks the person through the clip.

    The result depends on the frames and the mode only, so the last few clips' poses are
    memoised by their digest: recognizers that share BlazePose (pose-temporal, committee) run it
    once per clip. The returned array is read-only."""
    key = (bool(detector.video), hashlib.sha256(np.ascontiguousarray(frames).tobytes()).digest())
    if key in _MEMO:
        _MEMO.move_to_end(key)
        return _MEMO[key]
    out = np.zeros((len(frames), 33, len(POSE_COLUMNS)), np.float32)
    if detector.video:
        detector.reset()
    for i, f in enumerate(frames):
        det = detector.detect(f)
        if det is not None:
            out[i, :, :2] = det.keypoints / [f.shape[1], f.shape[0]]
            out[i, :, 2] = det.visibility
            out[i, :, 3:] = det.world
    out.setflags(write=False)
    _MEMO[key] = out
    while len(_MEMO) > _MEMO_SIZE:
        _MEMO.popitem(last=False)
    return out
