"""``rgb-clip``: a small video network on the 8 frames, trained from scratch (``affectsim train rgb-clip``).

Frames are resized to 64x64; a shared per-frame CNN (three 3x3 stride-2 convolutions with ReLU,
16/32/64 channels, global average pooling) gives a 64-d vector per frame; the clip vector is the
mean and standard deviation over frames plus the mean absolute frame-to-frame difference (192-d),
then a linear layer to the five classes, divided by a temperature fit on val. Inference is plain
numpy (the same arithmetic as the PyTorch model used for training, checked when training).
"""

from __future__ import annotations

import numpy as np
from PIL import Image

from affectsim_perception.recognizers.base import (
    RECOGNIZERS,
    ClipInput,
    Prediction,
    Recognizer,
    load_checkpoint,
    single_threaded_blas,
)
from affectsim_perception.recognizers.pose_temporal import softmax
from affectsim_perception.recognizers.vad_head import has_vad_head, vad_head

SIZE = 64
CHANNELS = (16, 32, 64)


def small_frames(frames: np.ndarray) -> np.ndarray:
    """(8, 224, 224, 3) uint8 -> (8, 64, 64, 3) uint8, bilinear."""
    return np.stack([np.asarray(Image.fromarray(f).resize((SIZE, SIZE), Image.BILINEAR)) for f in frames])


def _conv_s2(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """3x3 convolution, stride 2, padding 1: x (N, C, H, W), w (O, C, 3, 3) -> (N, O, H/2, W/2)."""
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))[:, :, ::2, ::2]  # N, C, H', W', 3, 3
    return np.einsum("nchwij,ocij->nohw", win, w, optimize=True) + b[None, :, None, None]


def clip_vector(weights: dict[str, np.ndarray], small: np.ndarray) -> np.ndarray:
    """(192,) clip vector (per-frame CNN, mean, deviation and mean change over frames) for (8, 64, 64, 3) uint8 frames."""
    x = (small.astype(np.float32) / 255.0 - weights["mean"]) / weights["std"]
    h = x.transpose(0, 3, 1, 2)
    for i in range(len(CHANNELS)):
        h = np.maximum(_conv_s2(h, weights[f"conv{i}.weight"], weights[f"conv{i}.bias"]), 0.0)
    f = h.mean(axis=(2, 3))  # (8, 64)
    return np.concatenate([f.mean(0), f.std(0), np.abs(np.diff(f, axis=0)).mean(0)])


def clip_logits(weights: dict[str, np.ndarray], small: np.ndarray) -> np.ndarray:
    """(5,) logits (before the temperature) for (8, 64, 64, 3) uint8 frames."""
    return clip_vector(weights, small) @ weights["fc.weight"].T + weights["fc.bias"]


@RECOGNIZERS.register("rgb-clip")
class RgbClip(Recognizer):
    def __init__(self, checkpoint: str = "rgb-clip") -> None:
        self.weights = load_checkpoint(checkpoint, required=("mean", "std", "conv0.weight", "conv0.bias", "fc.weight",
                                                             "fc.bias", "temperature")).arrays
        self.estimates_vad = has_vad_head(self.weights)

    def predict(self, clip: ClipInput) -> Prediction:
        return self.predict_small(small_frames(clip.frames))

    def predict_small(self, small: np.ndarray) -> Prediction:
        with single_threaded_blas():
            v = clip_vector(self.weights, small)
            z = (v @ self.weights["fc.weight"].T + self.weights["fc.bias"]) / float(self.weights["temperature"])
            vad = vad_head(self.weights, v[None])[0] if self.estimates_vad else None
        return Prediction.from_probs(softmax(z.astype(np.float64)), vad=vad)
