"""Emotion recognizers: one registry (:data:`RECOGNIZERS`), created by name.

Importing this package registers the shipped recognizers; heavy dependencies load only when a
recognizer that needs them is created.
"""

from affectsim_perception.recognizers import committee, pose_temporal, references, rgb_clip, vlm_openai  # noqa: F401
from affectsim_perception.recognizers.base import RECOGNIZERS, ClipInput, Prediction, Recognizer, load_checkpoint

#: The recognizers a benchmark run uses by default (the perception node, the evaluator, ``affectsim eval``,
#: the launch argument): every shipped one that runs offline (``vlm-openai`` needs a server).
DEFAULT_RECOGNIZERS: tuple[str, ...] = ("pose-temporal", "rgb-clip", "committee", "majority", "uniform")

__all__ = ["DEFAULT_RECOGNIZERS", "RECOGNIZERS", "ClipInput", "Prediction", "Recognizer",
           "load_checkpoint"]
