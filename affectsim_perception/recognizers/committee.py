"""``committee``: calibrated weighted voting over the project's recognizers.

Each member's temperature-calibrated probabilities are averaged with weights fit on the val
split (``affectsim train committee``: the simplex grid point with the best val macro-F1), in the
spirit of E3mo-Score's agreement-weighted ensembles; so are the members' VAD estimates, when both
make one. Members share one BlazePose pass.
"""

from __future__ import annotations

import numpy as np

from affectsim_perception.person_model import BlazePose, clip_pose
from affectsim_core.protocol import CLIP_FRAMES
from affectsim_perception.recognizers.base import (
    RECOGNIZERS,
    ClipInput,
    Prediction,
    Recognizer,
    StreamInput,
    load_checkpoint,
)
from affectsim_perception.recognizers.pose_temporal import PoseTemporal
from affectsim_perception.recognizers.rgb_clip import RgbClip, small_frames

MEMBERS = ("pose-temporal", "rgb-clip")


def load_members(detector=None) -> tuple[Recognizer, Recognizer]:
    """The member recognizers (sharing ``detector``; without one, poses must be given)."""

    return PoseTemporal(detector=detector or _NoDetector()), RgbClip()


def member_probs(members, poses: np.ndarray, small: np.ndarray) -> np.ndarray:
    """(M, N, 5) member probabilities for N clips given their poses (N, 8, 33, 6) and 64x64 frames."""
    pose, rgb = members
    return np.stack([np.stack([pose.predict_pose(k).probs for k in poses]),
                     np.stack([rgb.predict_small(np.asarray(s)).probs for s in small])])


def member_vad(members, poses: np.ndarray, small: np.ndarray) -> np.ndarray:
    """(M, N, 3) member VAD estimates for N clips (members with VAD heads)."""
    pose, rgb = members
    return np.stack([np.stack([pose.predict_pose(k).vad for k in poses]),
                     np.stack([rgb.predict_small(np.asarray(s)).vad for s in small])])


class _NoDetector:
    def detect(self, rgb):
        raise RuntimeError("poses are precomputed here")

    def close(self) -> None:
        pass


@RECOGNIZERS.register("committee")
class Committee(Recognizer):
    combines = MEMBERS
    def __init__(self, checkpoint: str = "committee", detector=None) -> None:
        ck = load_checkpoint(checkpoint, required=("weights",))
        if tuple(ck.manifest.get("members", ())) != MEMBERS:
            raise ValueError(f"checkpoint {checkpoint!r} has members {ck.manifest.get('members')}; expected {MEMBERS}")
        self.weights = ck.arrays["weights"]
        if detector is None:
            detector = BlazePose(video=True)
        self.detector = detector
        self.members = load_members(detector)
        self.estimates_vad = all(m.estimates_vad for m in self.members)

    def predict(self, clip: ClipInput) -> Prediction:
        return self._vote(clip_pose(self.detector, clip.frames), clip.frames)

    def predict_stream(self, stream: StreamInput, stride: int = 1) -> list[tuple[float, Prediction]]:
        """As ``pose-temporal``'s: one BlazePose pass tracks the person through the whole stream."""
        pose = clip_pose(self.detector, stream.frames)
        return [(t, self._vote(pose[i:i + CLIP_FRAMES], stream.frames[i:i + CLIP_FRAMES]))
                for i, t in stream.starts(stride)]

    def _vote(self, window_pose: np.ndarray, frames: np.ndarray) -> Prediction:
        """The weighted vote on one window: its pose (8, 33, 6) and its frames (8, 224, 224, 3)."""
        pose, rgb = self.members
        preds = (pose.predict_pose(window_pose), rgb.predict_small(small_frames(frames)))
        probs = np.stack([p.probs for p in preds])
        vad = np.tensordot(self.weights, np.stack([p.vad for p in preds]), axes=1) if self.estimates_vad else None
        return Prediction.from_probs(np.tensordot(self.weights, probs, axes=1), vad=vad)

    def close(self) -> None:
        self.detector.close()
