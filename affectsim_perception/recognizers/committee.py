"""``committee``: calibrated weighted voting over the project's recognizers.

Each member's temperature-calibrated probabilities are averaged with weights fit on the val
split (``affectsim train committee``: the simplex grid point with the best val macro-F1), in the
spirit of E3mo-Score's agreement-weighted ensembles; so are the members' VAD estimates, when both
make one. Members share one BlazePose pass.
"""

from __future__ import annotations

import numpy as np

from affectsim_perception.person_model import BlazePose, clip_pose
from affectsim_perception.recognizers.base import RECOGNIZERS, ClipInput, Prediction, Recognizer, load_checkpoint
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
    name = "committee"

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
        pose, rgb = self.members
        preds = (pose.predict_pose(clip_pose(self.detector, clip.frames)), rgb.predict_small(small_frames(clip.frames)))
        probs = np.stack([p.probs for p in preds])
        vad = np.tensordot(self.weights, np.stack([p.vad for p in preds]), axes=1) if self.estimates_vad else None
        return Prediction.from_probs(np.tensordot(self.weights, probs, axes=1), vad=vad)

    def close(self) -> None:
        self.detector.close()
