"""Frozen person models from ``mediapipe==0.10.14``, offline: BlazePose (detection, box and 33
landmarks with visibility) and person segmentation (a mask).

Only the ``full`` landmark model ships inside the wheel (``lite`` and ``heavy`` would be
downloaded at run time, which this project never does), so model complexity is fixed
to 1. Frames are RGB uint8 (H, W, 3); outputs are in pixels of that image.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from affectsim_ros.core.errors import MissingDependency

os.environ.setdefault("GLOG_minloglevel", "2")  # mediapipe's C++ start-up chatter
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


@dataclass(frozen=True)
class PersonDetection:
    """``keypoints`` (33, 2) pixels, ``visibility`` (33,) in [0, 1], ``box`` (x0, y0, x1, y1) pixels."""

    keypoints: np.ndarray
    visibility: np.ndarray
    box: tuple[float, float, float, float]


class BlazePose:
    """Single-person pose on still images (each frame independently, so results do not depend on order)."""

    def __init__(self, min_detection_confidence: float = 0.5) -> None:
        try:
            import mediapipe as mp
        except ImportError as exc:
            raise MissingDependency("BlazePose", "mediapipe==0.10.14", "run `make setup`") from exc
        self._pose = mp.solutions.pose.Pose(static_image_mode=True, model_complexity=1, enable_segmentation=False,
                                            min_detection_confidence=min_detection_confidence)

    def detect(self, rgb: np.ndarray) -> PersonDetection | None:
        if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
            raise ValueError(f"image shape/dtype {rgb.shape}/{rgb.dtype} is invalid; expected (H, W, 3) uint8 RGB")
        res = self._pose.process(np.ascontiguousarray(rgb))
        if res.pose_landmarks is None:
            return None
        h, w = rgb.shape[:2]
        lm = res.pose_landmarks.landmark
        kp = np.array([[p.x * w, p.y * h] for p in lm])
        vis = np.array([p.visibility for p in lm])
        seen = kp[vis > 0.5] if (vis > 0.5).any() else kp
        x0, y0 = np.clip(seen.min(0), 0, [w, h])
        x1, y1 = np.clip(seen.max(0), 0, [w, h])
        return PersonDetection(kp, vis, (float(x0), float(y0), float(x1), float(y1)))

    def close(self) -> None:
        self._pose.close()


class PersonSegmenter:
    """Person segmentation (mediapipe's bundled selfie-segmentation model, general variant)."""

    def __init__(self) -> None:
        try:
            import mediapipe as mp
        except ImportError as exc:
            raise MissingDependency("PersonSegmenter", "mediapipe==0.10.14", "run `make setup`") from exc
        self._seg = mp.solutions.selfie_segmentation.SelfieSegmentation(model_selection=0)

    def segment(self, rgb: np.ndarray) -> np.ndarray:
        """(H, W) float32 person probability in [0, 1] for an (H, W, 3) uint8 RGB frame."""
        if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
            raise ValueError(f"image shape/dtype {rgb.shape}/{rgb.dtype} is invalid; expected (H, W, 3) uint8 RGB")
        return np.asarray(self._seg.process(np.ascontiguousarray(rgb)).segmentation_mask, np.float32)

    def close(self) -> None:
        self._seg.close()


def clip_keypoints(detector: BlazePose, frames: np.ndarray) -> np.ndarray:
    """(N, 33, 3) keypoints of N frames: x, y normalised to [0, 1] of the frame, visibility; zeros
    where nobody was found."""
    out = np.zeros((len(frames), 33, 3), np.float32)
    for i, f in enumerate(frames):
        det = detector.detect(f)
        if det is not None:
            out[i, :, :2] = det.keypoints / [f.shape[1], f.shape[0]]
            out[i, :, 2] = det.visibility
    return out
