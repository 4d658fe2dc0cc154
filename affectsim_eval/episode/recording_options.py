"""What a recording holds and how large it may grow (ROS-free; the recorder is
:mod:`affectsim_eval.episode.recording`, which needs rosbags: this module lets the evaluator and
``affectsim observe`` take the options without it)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from affectsim_core.errors import InvalidInput

DEFAULT_MAX_MB = 2000.0  # MB of messages (before compression) one recording may hold: docs/evaluation.md
MB = 1_000_000  # bytes in the MB of ``record_max_mb``


@dataclass(frozen=True)
class RecordingOptions:
    """``depth``: record the depth image and its camera_info; ``max_mb``: the size budget
    (:class:`SizeBudget`); ``ground_truth``: markers of the people's true poses (simulation only: they are
    privileged); ``best_effort_sensors``: subscribe to sensor data best-effort (a robot's drivers publish so)."""

    depth: bool = True
    max_mb: float = DEFAULT_MAX_MB
    ground_truth: bool = False
    best_effort_sensors: bool = False

    def __post_init__(self) -> None:
        SizeBudget(self.max_mb)  # refuses a bad size in one line naming it


class SizeBudget:
    """The bytes of one recording: every message counts; once ``max_mb`` (MB, before compression) is
    reached, the large topics (camera images) are no longer written, the others are."""

    def __init__(self, max_mb: float) -> None:
        if not (max_mb > 0 and math.isfinite(max_mb)):
            raise InvalidInput("record_max_mb", max_mb, "a size in MB > 0")
        self.max_bytes = int(max_mb * MB)
        self.written = 0
        self.dropped = 0  # messages of large topics left out
        self.exceeded = False

    def admit(self, nbytes: int, large: bool) -> bool:
        """Whether a message of ``nbytes`` is written (and counted); a large one only within the budget."""
        if large and self.written + nbytes > self.max_bytes:
            self.exceeded = True
            self.dropped += 1
            return False
        self.written += nbytes
        return True
