"""Pointing the head camera at a person: the tilt that frames the whole body.

With the head level, the Fetch's head camera (about 1.1 m up, 46.8° vertical field of view) cuts off
the feet of anyone nearer than about 2.5 m: on the val split, 15 % of the baseline's A-Obs body points
fell below the image (docs/observation.md). Tilting the head to centre the span from the floor to the
top of the head keeps a standing adult whole from about 2 m.
"""

from __future__ import annotations

import math

import numpy as np

from affectsim_core.protocol import HEAD_TILT_LIMITS
from affectsim_nav.baseline import LOST_STEPS

BODY_TOP_M = 1.75  # m above the floor: the top of the head of a standing adult (people here: 1.45-2.0 m)
RETARGET_RAD = math.radians(2.0)  # a new tilt differing less than this from the last command is not sent
HOLD_STEPS = LOST_STEPS  # steps a person out of sight stays framed where last seen (as the baseline looks for them)


def framing_tilt(camera_pose: np.ndarray, person_xy: tuple[float, float], top_m: float = BODY_TOP_M) -> float:
    """Head tilt (rad, + looks down, within the Fetch limits) that centres the vertical span from the
    floor to ``top_m`` (m) above ``person_xy`` (m, map) in the image of the head camera at ``camera_pose``
    (4x4 optical frame in map; the camera's height is taken as it is, the tilt barely moves it)."""
    c = np.asarray(camera_pose, float)[:3, 3]
    d = max(0.3, math.dist((float(c[0]), float(c[1])), person_xy))  # m, horizontal
    below, above = math.atan2(float(c[2]), d), math.atan2(top_m - float(c[2]), d)  # rad from the horizontal
    lo, hi = HEAD_TILT_LIMITS
    return min(max((below - above) / 2.0, lo), hi)


class HeadPointer:
    """The head command of a policy that frames its person: :meth:`command` gives the tilt to send with
    this step's decision, or None when the head already points there (within :data:`RETARGET_RAD`).
    A person out of sight stays framed where last seen for ``hold_steps`` steps (the head levelled at
    once would lose a person the detector misses for a frame, and find them again level: a nod)."""

    def __init__(self, hold_steps: int = HOLD_STEPS) -> None:
        self.hold_steps = hold_steps
        self.sent: float | None = None  # rad, the last tilt sent (None: none yet this episode)
        self.framed: tuple[tuple[float, float], int] | None = None  # (map xy m, step) of the person framed

    def command(self, camera_pose: np.ndarray, step: int, person_xy: tuple[float, float] | None) -> float | None:
        """The tilt for observation ``step`` framing ``person_xy`` (m, map; None: nobody seen now), or
        None when it is already commanded; level once nobody was seen for ``hold_steps`` steps."""
        if person_xy is not None:
            self.framed = ((float(person_xy[0]), float(person_xy[1])), step)
        elif self.framed is not None and step - self.framed[1] > self.hold_steps:
            self.framed = None
        tilt = 0.0 if self.framed is None else framing_tilt(camera_pose, self.framed[0])
        if self.sent is not None and abs(tilt - self.sent) < RETARGET_RAD:
            return None
        self.sent = tilt
        return tilt
