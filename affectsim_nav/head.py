"""Pointing the head camera at a person: the tilt that frames the whole body.

With the head level, the Fetch's head camera (about 1.1 m up, 46.8° vertical field of view) cuts off
the feet of anyone nearer than about 2.5 m: on the val split, 15 % of the baseline's A-Obs body points
fell below the image (docs/observation.md). Tilting the head to centre the span from the floor (where
the feet stand) to the top of the person's head keeps a standing adult whole from about 2.2 m and a
seated one from about 1.6 m (:func:`fit_distance`).
"""

from __future__ import annotations

import math

import numpy as np

from affectsim_core.camera import FETCH_HEAD_VFOV_DEG
from affectsim_core.observation import Observation
from affectsim_core.person_tracking import INWARD, SHOULDERS, TORSO, PersonDetection
from affectsim_core.protocol import HEAD_TILT_LIMITS
from affectsim_nav.baseline import LOST_STEPS

BODY_TOP_M = 1.75  # m above the floor: the top of the head of a standing adult (people here: 1.45-2.0 m)
TOP_RANGE_M = (0.9, 2.1)  # m: a measured top outside this is clamped (a crouch .. the tallest adult)
SHOULDER_TO_TOP_M = 0.3  # m from the shoulders to the top of the head, upright or seated
FOOT_REACH_M = 0.15  # m the feet (and a seated person's knees) reach toward the camera from the located torso
TOP_MARGIN_RAD = math.radians(2.0)  # kept between the top of the head and the image's upper edge
RETARGET_RAD = math.radians(2.0)  # a new tilt differing less than this from the last command is not sent
HOLD_STEPS = LOST_STEPS  # steps a person out of sight stays framed where last seen (as the baseline looks for them)
HEAD_VFOV = math.radians(FETCH_HEAD_VFOV_DEG)  # rad: the Fetch head camera's vertical field of view


def body_top(det: PersonDetection, obs: Observation) -> float | None:
    """Height (m above the floor, ``map`` z) of the top of the detected person's head: the shoulders
    located by depth (sampled :data:`~affectsim_core.person_tracking.INWARD` of the way toward the
    torso's centre line, sideways only: not lower) plus :data:`SHOULDER_TO_TOP_M`, clamped to
    :data:`TOP_RANGE_M`. None when no shoulder is visible (visibility > 0.5) with depth."""
    seen = [k for k in SHOULDERS if det.visibility[k] > 0.5]
    if not seen:
        return None
    u, v = det.keypoints[seen, 0], det.keypoints[seen, 1]
    u = u + INWARD * (float(det.keypoints[list(TORSO), 0].mean()) - u)  # inward, not down: on the body
    z = obs.backproject(u, v)[:, 2]
    z = z[np.isfinite(z)]
    if len(z) == 0:
        return None
    lo, hi = TOP_RANGE_M
    return min(max(float(np.median(z)) + SHOULDER_TO_TOP_M, lo), hi)


def vertical_fov(obs: Observation) -> float:
    """The vertical field of view (rad) of the camera of ``obs``."""
    return 2.0 * math.atan2(obs.intrinsics[3], obs.intrinsics[1])


def _span(camera_z: float, d: float, top_m: float) -> tuple[float, float]:
    """Angles (rad below and above the horizontal) of the feet and of the head's top of a person ``d``
    m away (horizontal, camera to the located torso) seen from a camera ``camera_z`` m up."""
    return math.atan2(camera_z, max(0.1, d - FOOT_REACH_M)), math.atan2(top_m - camera_z, d)


def framing_tilt(camera_pose: np.ndarray, person_xy: tuple[float, float], top_m: float = BODY_TOP_M,
                 vfov: float = HEAD_VFOV) -> float:
    """Head tilt (rad, + looks down, within the Fetch limits) that centres the vertical span from the
    floor :data:`FOOT_REACH_M` in front of ``person_xy`` (m, map) to ``top_m`` (m) above it in the image
    of the head camera at ``camera_pose`` (4x4 optical frame in map; the camera's height is taken as it
    is, the tilt barely moves it), ``vfov`` rad high. A span that does not fit loses its feet: the top of
    the head stays :data:`TOP_MARGIN_RAD` inside the image (the detector finds people by their face)."""
    c = np.asarray(camera_pose, float)[:3, 3]
    d = max(0.3, math.dist((float(c[0]), float(c[1])), person_xy))  # m, horizontal
    below, above = _span(float(c[2]), d, top_m)
    lo, hi = HEAD_TILT_LIMITS
    return min(max(min((below - above) / 2.0, vfov / 2.0 - TOP_MARGIN_RAD - above), lo), hi)


def fit_distance(camera_z: float, top_m: float, vfov: float) -> float:
    """The least distance (m, horizontal, camera to the located torso) from which :func:`framing_tilt`
    keeps the feet in a camera ``vfov`` rad high (the span and :data:`TOP_MARGIN_RAD` fit); 6 m when
    even that is too near."""
    def fits(d: float) -> bool:
        return sum(_span(camera_z, d, top_m)) + TOP_MARGIN_RAD <= vfov

    lo, hi = 0.3, 6.0
    if not fits(hi):
        return hi
    for _ in range(30):  # bisection: the span shrinks with distance
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    return hi


class HeadPointer:
    """The head command of a policy that frames its person: :meth:`command` gives the tilt to send with
    this step's decision, or None when the head already points there (within :data:`RETARGET_RAD`).
    A person out of sight stays framed where last seen for ``hold_steps`` steps (the head levelled at
    once would lose a person the detector misses for a frame, and find them again level: a nod)."""

    def __init__(self, hold_steps: int = HOLD_STEPS) -> None:
        self.hold_steps = hold_steps
        self.sent: float | None = None  # rad, the last tilt sent (None: none yet this episode)
        self.framed: tuple[tuple[float, float], float, int] | None = None  # (map xy m, top m, step) framed

    def command(self, camera_pose: np.ndarray, step: int, person_xy: tuple[float, float] | None,
                top_m: float = BODY_TOP_M, vfov: float = HEAD_VFOV) -> float | None:
        """The tilt for observation ``step`` framing ``person_xy`` (m, map; None: nobody seen now) up to
        ``top_m`` (m above the floor) in a camera ``vfov`` rad high, or None when it is already commanded;
        level once nobody was seen for ``hold_steps`` steps."""
        if person_xy is not None:
            self.framed = ((float(person_xy[0]), float(person_xy[1])), top_m, step)
        elif self.framed is not None and step - self.framed[2] > self.hold_steps:
            self.framed = None
        tilt = 0.0 if self.framed is None else framing_tilt(camera_pose, self.framed[0], self.framed[1], vfov)
        if self.sent is not None and abs(tilt - self.sent) < RETARGET_RAD:
            return None
        self.sent = tilt
        return tilt
