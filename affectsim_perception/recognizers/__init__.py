"""Emotion recognizers: one registry (:data:`RECOGNIZERS`), created by name.

Importing this package registers the shipped recognizers; heavy dependencies load only when a
recognizer that needs them is created.
"""

from affectsim_perception.recognizers import committee, pose_temporal, references, rgb_clip, vlm_openai  # noqa: F401
from affectsim_perception.recognizers.base import (CLIP_FRAMES, CLIP_SIZE, EMOTIONS, RECOGNIZERS, ClipInput,
                                                   Prediction, Recognizer, load_checkpoint)

__all__ = ["CLIP_FRAMES", "CLIP_SIZE", "EMOTIONS", "RECOGNIZERS", "ClipInput", "Prediction", "Recognizer",
           "load_checkpoint"]
