"""ROS-free parts of an episode recording (:mod:`affectsim_eval.episode.recording`): the people and the
robot's path as marker descriptions, the robot's path thinned out, and the stamp at the head of a serialized
ROS 2 message.

Every position is in the ``map`` frame, metres; every time is the messages' own clock (sim time in
simulation, the robot's clock on a robot), nanoseconds where named ``_ns``, seconds otherwise.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

GROUND_TRUTH_NS = "ground_truth"  # the people's true poses (simulation only: privileged)
DETECTIONS_NS = "detections"  # the people the perception node located (every session)
PATH_NS = "robot_path"  # the robot's base in map, as it moved

PERSON_RADIUS_M = 0.25  # marker of a person: a cylinder this wide ...
PERSON_HEIGHT_M = 1.7  # ... and this tall, standing on the floor
DETECTION_SIZE_M = 0.3  # sphere at a located person's floor position
PATH_WIDTH_M = 0.04  # line width of the path
PATH_STEP_M = 0.05  # a new path point once the base moved this far from the last one
PATH_PERIOD_S = 0.5  # the path marker is written at most this often (and when the recording ends)
MAX_PATH_POINTS = 20_000  # a path longer than this keeps its newest points (1 km at PATH_STEP_M)

RGBA = tuple[float, float, float, float]
COLOURS: dict[str, RGBA] = {GROUND_TRUTH_NS: (0.1, 0.8, 0.2, 0.6), DETECTIONS_NS: (1.0, 0.55, 0.0, 0.9),
                            PATH_NS: (0.15, 0.45, 1.0, 1.0)}


@dataclass(frozen=True)
class MarkerSpec:
    """One marker: ``kind`` cylinder | sphere | line_strip; ``x, y, z`` (m, map) its centre, ``yaw``
    (rad) its heading, ``scale`` (m) its size along its axes (a line strip: the width first), ``points``
    (m, map) the vertices of a line strip."""

    ns: str
    id: int
    kind: str
    x: float = 0.0
    y: float = 0.0
    z: float = 0.0
    yaw: float = 0.0
    scale: tuple[float, float, float] = (1.0, 1.0, 1.0)
    rgba: RGBA = (1.0, 1.0, 1.0, 1.0)
    points: tuple[tuple[float, float, float], ...] = ()


def people_markers(ns: str, people: list[tuple[float, float, float]]) -> list[MarkerSpec]:
    """Markers of people at ``(x, y, yaw)`` (m, m, rad in map): cylinders for the ground truth, spheres on
    the floor for detections; people at a non-finite position (located nowhere) are left out."""
    out = []
    for k, (x, y, yaw) in enumerate(people):
        if not (math.isfinite(x) and math.isfinite(y)):
            continue
        if ns == DETECTIONS_NS:
            out.append(MarkerSpec(ns, k, "sphere", x, y, DETECTION_SIZE_M / 2, 0.0, (DETECTION_SIZE_M,) * 3,
                                  COLOURS[ns]))
        else:
            d = 2 * PERSON_RADIUS_M
            out.append(MarkerSpec(ns, k, "cylinder", x, y, PERSON_HEIGHT_M / 2, yaw if math.isfinite(yaw) else 0.0,
                                  (d, d, PERSON_HEIGHT_M), COLOURS[ns]))
    return out


class PathTrace:
    """The robot's path in map, one point per :data:`PATH_STEP_M` of motion; :meth:`due` says when the
    path marker is to be written again (every :data:`PATH_PERIOD_S` of message time while it grows)."""

    def __init__(self) -> None:
        self.points: list[tuple[float, float, float]] = []
        self._written_t = -math.inf
        self._changed = False

    def add(self, x: float, y: float) -> bool:
        """Add the base's position (m, map) if it moved far enough; whether a point was added."""
        if not (math.isfinite(x) and math.isfinite(y)):
            return False
        if self.points and math.hypot(x - self.points[-1][0], y - self.points[-1][1]) < PATH_STEP_M:
            return False
        self.points.append((x, y, 0.0))
        del self.points[:-MAX_PATH_POINTS]
        self._changed = True
        return True

    def due(self, t: float) -> bool:
        """Whether the marker should be written at message time ``t`` (s); marks it written if so."""
        if not self._changed or t - self._written_t < PATH_PERIOD_S:
            return False
        self._written_t, self._changed = t, False
        return True

    def marker(self) -> MarkerSpec:
        return MarkerSpec(PATH_NS, 0, "line_strip", scale=(PATH_WIDTH_M, 0.0, 0.0), rgba=COLOURS[PATH_NS],
                          points=tuple(self.points))


def header_stamp_ns(raw: bytes, offset: int = 0) -> int | None:
    """The ``builtin_interfaces/Time`` at the head of a CDR-serialized message (``offset``: bytes after the
    4-byte encapsulation header, e.g. 4 for a TFMessage's first transform, after its sequence length) in
    ns; None if ``raw`` is too short or the encapsulation is not plain CDR."""
    if len(raw) < 12 + offset or raw[0] != 0 or raw[1] not in (0, 1):
        return None
    endian = "<" if raw[1] == 1 else ">"
    sec, nsec = struct.unpack_from(f"{endian}iI", raw, 4 + offset)
    return sec * 1_000_000_000 + nsec
