"""Approximate time pairing of two sensor streams (RGB and depth from unsynchronised drivers).

ROS-free; the idea of message_filters' ApproximateTimeSynchronizer for the two-stream case. Each
RGB frame is paired with the depth frame stamped nearest it within ``slop`` seconds, each depth
frame used once. A pairing is final once it cannot improve: the stamps are equal (the simulator),
or a depth frame stamped at or after the RGB frame has arrived (one stream's stamps grow, so no
nearer one can come). An RGB frame with no depth within ``slop`` once that is known is dropped.
"""

from __future__ import annotations

from collections import deque
from typing import Any

SYNC_SLOP_S = 0.02  # s: default pairing tolerance (drivers of one camera differ by a few ms)
SAME_S = 1e-9  # s: equal stamps


class ApproximatePairs:
    """Pairs (rgb, depth) messages by stamp; ``keep``: frames held per stream awaiting a partner."""

    def __init__(self, slop: float = SYNC_SLOP_S, keep: int = 8) -> None:
        if not 0.0 <= slop < 1.0:
            raise ValueError(f"slop={slop!r} is invalid; expected seconds in [0, 1)")
        self.slop = slop
        self._q: dict[str, deque[tuple[float, Any]]] = {"rgb": deque(maxlen=keep), "depth": deque(maxlen=keep)}
        self._newest = {"rgb": float("-inf"), "depth": float("-inf")}
        self.dropped = 0  # RGB frames that found no depth within the slop

    def add(self, kind: str, stamp: float, msg: Any) -> list[tuple[Any, Any]]:
        """Add a message of ``kind`` ("rgb" or "depth") stamped ``stamp`` (s); the pairs now final."""
        if stamp < self._newest[kind] - SAME_S:  # time went back (a new episode): older frames are of another
            self._q["rgb"].clear()
            self._q["depth"].clear()
            self._newest = {k: float("-inf") for k in self._newest}
        self._newest[kind] = stamp
        self._q[kind].append((stamp, msg))
        out = []
        rgb, depth = self._q["rgb"], self._q["depth"]
        while rgb:
            t, frame = rgb[0]
            near = [(abs(s - t), i) for i, (s, _) in enumerate(depth) if abs(s - t) <= self.slop + SAME_S]
            best = min(near) if near else None
            final = any(s >= t - SAME_S for s, _ in depth) or (best is not None and best[0] <= SAME_S)
            if not final:
                break
            rgb.popleft()
            if best is None:
                self.dropped += 1
                continue
            out.append((frame, depth[best[1]][1]))
            for _ in range(best[1] + 1):  # the chosen depth frame and the older ones are used up
                depth.popleft()
        return out
