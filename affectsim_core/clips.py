"""Recognition clips, sampled identically in every observation setting (docs/protocol.md §5 and §7).

A clip spans twice the target motion's duration at the lockstep rate (one frame per 0.25 s of sim
time, the full-rate frames are kept); the recognizer input is :data:`CLIP_FRAMES` uniformly
sampled frames resized to :data:`CLIP_SIZE` x :data:`CLIP_SIZE`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from PIL import Image

from affectsim_core.protocol import CLIP_FRAMES, CLIP_SIZE, STEP_SECONDS


def clip_steps(motion_duration: float) -> int:
    """Full-rate frames in a clip of twice ``motion_duration`` (s) at one frame per 0.25 s."""
    if not (math.isfinite(motion_duration) and motion_duration > 0):
        raise ValueError(f"motion_duration={motion_duration!r} is invalid; expected seconds > 0")
    return int(math.ceil(2.0 * motion_duration / STEP_SECONDS - 1e-9))


def clip_times(motion_duration: float) -> np.ndarray:
    """Sim times (s) of a clip's full-rate frames: from 0, one per 0.25 s, twice the motion."""
    return np.arange(clip_steps(motion_duration)) * STEP_SECONDS


def sample_indices(n: int, k: int = CLIP_FRAMES) -> np.ndarray:
    """``k`` uniformly spaced indices into ``n`` full-rate frames (first and last included)."""
    if n < 1:
        raise ValueError(f"n={n!r} is invalid; expected at least one frame")
    return np.round(np.linspace(0, n - 1, k)).astype(int)


def resize(rgb: np.ndarray, size: int = CLIP_SIZE) -> np.ndarray:
    """Bilinear resize of an (H, W, 3) uint8 frame to (size, size, 3)."""
    return np.asarray(Image.fromarray(rgb).resize((size, size), Image.BILINEAR))


@dataclass
class Clip:
    """Full-rate frames of one setting. ``times`` sim time (s) of each frame; ``camera_poses`` (N, 4, 4)
    optical frame in ``map``."""

    setting: str
    times: np.ndarray
    frames: list[np.ndarray]
    camera_poses: np.ndarray

    def sampled(self) -> np.ndarray:
        """(8, 224, 224, 3) uint8: the recognizer input."""
        return np.stack([resize(self.frames[i]) for i in sample_indices(len(self.frames))])
