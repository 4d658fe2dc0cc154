"""Wall-clock time per stage (render, detection, planning, control), for benchmarks."""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager
from typing import Iterator


class StageTimes:
    """Accumulates seconds per stage name: ``with times("render"): ...``."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    @contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        t = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[stage] += time.perf_counter() - t


class TimedDetector:
    """Wraps a person detector so its calls count as ``detection``."""

    def __init__(self, detector, times: StageTimes) -> None:
        self.detector, self.times = detector, times

    def detect(self, rgb):
        with self.times("detection"):
            return self.detector.detect(rgb)

    def close(self) -> None:
        self.detector.close()


NULL = StageTimes()  # default sink when nobody measures
