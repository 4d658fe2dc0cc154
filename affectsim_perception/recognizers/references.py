"""Reference recognizers for the report, clearly not models of emotion.

- ``majority``: always the most frequent class of the train split (counts in its checkpoint) and,
  when its checkpoint has them, the train split's mean VAD of that class (a floor for VAD measures:
  a constant estimate has no correlation).
- ``uniform``: chance; uniform probabilities and a label drawn from the clip's hash (the same
  clip always gets the same label, different clips are independent draws).
"""

from __future__ import annotations

import zlib

import numpy as np

from affectsim_core.protocol import EMOTIONS
from affectsim_perception.recognizers.base import RECOGNIZERS, ClipInput, Prediction, Recognizer, load_checkpoint


@RECOGNIZERS.register("majority")
class Majority(Recognizer):
    def __init__(self, checkpoint: str = "majority") -> None:
        arrays = load_checkpoint(checkpoint, required=("class_counts",)).arrays
        counts = arrays["class_counts"].astype(float)
        self.probs = counts / counts.sum()
        self.label = EMOTIONS[int(np.argmax(counts))]
        self.vad = np.clip(arrays["class_vad"][int(np.argmax(counts))], -1, 1) if "class_vad" in arrays else None
        self.estimates_vad = self.vad is not None

    def predict(self, clip: ClipInput) -> Prediction:
        p = np.zeros(len(EMOTIONS))
        p[EMOTIONS.index(self.label)] = 1.0
        return Prediction(p, self.label, "ok", "train-split majority class", self.vad)


@RECOGNIZERS.register("uniform")
class Uniform(Recognizer):
    def predict(self, clip: ClipInput) -> Prediction:
        k = zlib.crc32(np.ascontiguousarray(clip.frames).tobytes()) % len(EMOTIONS)
        return Prediction(np.full(len(EMOTIONS), 1 / len(EMOTIONS)), EMOTIONS[k], "ok", "chance")
