"""Obstacles the map does not show, seen in the head camera's depth image.

The static map holds walls, doors and furniture; people (and anything moved since the map was made) are
not on it. The built-in follower moves toward them until two moves are blocked (docs/observation.md).
:class:`UnmappedObstacles` looks, before a move, for depth points in the disc the base sweeps moving
:data:`~affectsim_core.protocol.FORWARD_M` straight ahead that lie off every map obstacle: a local check a
robot's costmap makes from the same camera. With the head level (1.1 m up, 46.8 deg vertical field of view)
the camera sees from about 0.85 to 1.35 m high half a metre ahead: a person's torso, not a low box; with
the head tilted down to frame someone, it sees lower.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import ndimage

from affectsim_core.observation import EpisodeInfo, Observation
from affectsim_core.protocol import FORWARD_M

DEPTH_STRIDE_PX = 4  # every 4th row and column of the depth image is looked at
SWEEP_MARGIN_M = 0.15  # m added to the robot's radius around the swept segment: a body reaches beyond its front
# as the camera sees it (arms swing; the simulator's people are 0.25 m discs around the pelvis, ~0.12 m behind it)
HEIGHT_RANGE_M = (0.05, 2.0)  # m above the floor where a depth point is an obstacle (not the floor itself)
MAP_TOLERANCE_M = 0.1  # m: a depth point nearer than this to an occupied or unknown map cell is on the map
MIN_POINTS = 5  # depth points (at the stride) needed before anything is believed to stand ahead


class UnmappedObstacles:
    """The depth check of one episode's map (``map`` frame, m)."""

    def __init__(self, info: EpisodeInfo) -> None:
        self.info = info
        self._off_map = ndimage.distance_transform_edt(info.occupancy == 0) * info.resolution  # m to a non-free cell

    def ahead(self, obs: Observation, reach: float = FORWARD_M) -> tuple[float, float] | None:
        """The nearest depth point (x, y; m, ``map``) off the map, :data:`HEIGHT_RANGE_M` above the floor
        (``map`` z = 0), within the robot's radius plus :data:`SWEEP_MARGIN_M` of the segment the base centre
        sweeps moving ``reach`` (m) straight ahead, ahead of the base centre and outside its footprint (where
        the robot's own body is); None when fewer than :data:`MIN_POINTS` such points are seen."""
        h, w = obs.depth.shape
        v, u = np.mgrid[DEPTH_STRIDE_PX // 2:h:DEPTH_STRIDE_PX, DEPTH_STRIDE_PX // 2:w:DEPTH_STRIDE_PX]
        p = obs.backproject(u.ravel(), v.ravel())
        p = p[np.isfinite(p).all(axis=1) & (p[:, 2] >= HEIGHT_RANGE_M[0]) & (p[:, 2] <= HEIGHT_RANGE_M[1])]
        x, y, yaw = obs.pose
        dx, dy = p[:, 0] - x, p[:, 1] - y
        fwd, side = dx * math.cos(yaw) + dy * math.sin(yaw), -dx * math.sin(yaw) + dy * math.cos(yaw)
        r = self.info.robot_radius
        swept = np.hypot(fwd - np.clip(fwd, 0.0, reach), side) < r + SWEEP_MARGIN_M
        p = p[(fwd > 0) & swept & (np.hypot(dx, dy) >= r)]  # the robot's own body lies within its footprint
        info = self.info
        i = np.floor((p[:, 1] - info.origin[1]) / info.resolution).astype(int)
        j = np.floor((p[:, 0] - info.origin[0]) / info.resolution).astype(int)
        inside = (i >= 0) & (i < info.occupancy.shape[0]) & (j >= 0) & (j < info.occupancy.shape[1])
        p, i, j = p[inside], i[inside], j[inside]
        p = p[self._off_map[i, j] >= MAP_TOLERANCE_M]
        if len(p) < MIN_POINTS:
            return None
        k = int(np.argmin(np.hypot(p[:, 0] - x, p[:, 1] - y)))
        return float(p[k, 0]), float(p[k, 1])
