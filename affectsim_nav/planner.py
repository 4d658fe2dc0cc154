"""Global planner on the static occupancy map (the non-privileged map Nav2 would use) and a
discrete path follower.

The map is inflated by the robot radius (cells closer than ``radius`` to an occupied or
unknown cell are not traversable); plans are 8-connected Dijkstra on the 0.05 m map grid, shortened by
line-of-sight, so waypoints are corners. Every :meth:`GridPlanner.plan_from` is one counted
global planner call.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
from scipy import ndimage
from scipy.sparse import csr_matrix, diags
from scipy.sparse.csgraph import dijkstra

from affectsim_core.actions import Action
from affectsim_core.observation import EpisodeInfo
from affectsim_core.protocol import TURN_RAD
from affectsim_core.timing import NULL, StageTimes
from affectsim_nav.executor import heading_to

PLAN_RES = 0.05  # m per planning cell (the map resolution: narrower gaps than 0.1 m cells would close)


class GridPlanner:
    """Traversability, distance fields and shortest paths on the occupancy map (``map`` frame, m)."""

    def __init__(self, info: EpisodeInfo, count_call: Callable[[], None] = lambda: None, margin: float = 0.0,
                 times: StageTimes = NULL) -> None:
        occ = info.occupancy
        free = occ == 0
        # clearance of each map cell centre to the nearest non-free cell, metres
        clear = ndimage.distance_transform_edt(free) * info.resolution - info.resolution / 2
        stride = max(1, int(round(PLAN_RES / info.resolution)))
        self.res = info.resolution * stride
        self.origin = (info.origin[0], info.origin[1])
        # planning cell (i, j) is the map cell at (i * stride + stride // 2, j * stride + stride // 2)
        off = stride // 2
        sub = clear[off::stride, off::stride]
        self._offset = (off + 0.5) * info.resolution
        self.clearance = sub  # m from each planning cell's centre to the nearest occupied or unknown map cell
        self.traversable = sub >= info.robot_radius + margin
        self.free = free[off::stride, off::stride]
        self.count_call = count_call
        self.times = times
        h, w = self.traversable.shape
        idx = np.arange(h * w).reshape(h, w)
        rows, cols, wts = [], [], []
        for di, dj in ((0, 1), (1, 0), (1, 1), (1, -1)):  # each undirected 8-neighbour edge once
            i1, j0, j1 = h - di, max(0, -dj), w - max(0, dj)
            ok = self.traversable[:i1, j0:j1] & self.traversable[di:i1 + di, j0 + dj:j1 + dj]
            rows.append(idx[:i1, j0:j1][ok])
            cols.append(idx[di:i1 + di, j0 + dj:j1 + dj][ok])
            wts.append(np.full(int(ok.sum()), math.hypot(di, dj) * self.res))
        r, c, wv = np.concatenate(rows), np.concatenate(cols), np.concatenate(wts)
        self._graph = csr_matrix((np.concatenate([wv, wv]), (np.concatenate([r, c]), np.concatenate([c, r]))),
                                 shape=(h * w, h * w))
        self.shape = (h, w)
        self._last: DistanceField | None = None

    # ------------------------------------------------------------------ cells <-> metres
    def cell(self, xy) -> tuple[int, int]:
        j = int(math.floor((xy[0] - self.origin[0] - self._offset) / self.res + 0.5))
        i = int(math.floor((xy[1] - self.origin[1] - self._offset) / self.res + 0.5))
        return min(max(i, 0), self.shape[0] - 1), min(max(j, 0), self.shape[1] - 1)

    def centre(self, i: int, j: int) -> np.ndarray:
        return np.array([self.origin[0] + self._offset + j * self.res, self.origin[1] + self._offset + i * self.res])

    def centres(self) -> tuple[np.ndarray, np.ndarray]:
        """x, y (m) of every planning cell centre, each (H, W)."""
        h, w = self.shape
        return np.meshgrid(self.origin[0] + self._offset + np.arange(w) * self.res,
                           self.origin[1] + self._offset + np.arange(h) * self.res)

    def nearest_traversable(self, xy) -> tuple[int, int] | None:
        i, j = self.cell(xy)
        if self.traversable[i, j]:
            return i, j
        ii, jj = np.nonzero(self.traversable)
        if len(ii) == 0:
            return None
        k = int(np.argmin((ii - i) ** 2 + (jj - j) ** 2))
        return int(ii[k]), int(jj[k])

    # ------------------------------------------------------------------ planning
    def plan_from(self, xy, avoid: tuple[tuple[float, float, float], ...] = ()) -> "DistanceField | None":
        """One global planner call: path distances (m) from ``xy`` to every cell (inf if unreachable),
        keeping out of the discs ``avoid`` ((x, y, radius) m: obstacles seen but not on the map, such
        as a person).

        Asking again from the same start cell without ``avoid`` returns the latest plan from there
        without counting a new call (choosing a goal and following the path to it is one query)."""
        start = self.nearest_traversable(xy)
        if start is None:
            self.count_call()
            return None
        last = self._last
        if last is not None and last.start == start and (not avoid or last.avoid == tuple(avoid)):
            return last
        self.count_call()
        s = start[0] * self.shape[1] + start[1]
        graph = self._graph
        if avoid:
            gx, gy = self.centres()
            keep = np.ones(self.shape, bool)
            for x, y, r in avoid:
                keep &= np.hypot(gx - x, gy - y) > r
            keep[start] = True
            mask = diags(keep.ravel().astype(float))
            graph = (mask @ graph @ mask).tocsr()
        with self.times("planning"):
            dist, pred = dijkstra(graph, indices=s, return_predecessors=True)
        self._last = DistanceField(self, dist.reshape(self.shape), pred, start, tuple(avoid))
        return self._last

    def line_free(self, a: tuple[int, int], b: tuple[int, int]) -> bool:
        n = max(abs(b[0] - a[0]), abs(b[1] - a[1])) * 2 + 1
        ii = np.round(np.linspace(a[0], b[0], n)).astype(int)
        jj = np.round(np.linspace(a[1], b[1], n)).astype(int)
        return bool(self.traversable[ii, jj].all())


class DistanceField:
    """Result of one planner call: distances from a start cell and shortest paths to any goal."""

    def __init__(self, planner: GridPlanner, dist: np.ndarray, pred: np.ndarray, start: tuple[int, int],
                 avoid: tuple = ()) -> None:
        self.planner, self.dist, self._pred, self.start, self.avoid = planner, dist, pred, start, avoid

    def path_to(self, goal: tuple[int, int]) -> list[np.ndarray]:
        """Waypoints (m, map) from the start to ``goal`` (cell), corners only; [] if unreachable."""
        if not math.isfinite(self.dist[goal]):
            return []
        w = self.planner.shape[1]
        cells = [goal]
        k = goal[0] * w + goal[1]
        s = self.start[0] * w + self.start[1]
        while k != s:
            k = int(self._pred[k])
            cells.append((k // w, k % w))
        cells.reverse()
        keep = [cells[0]]  # line-of-sight shortening
        i = 0
        while i < len(cells) - 1:
            j = len(cells) - 1
            while j > i + 1 and not self.planner.line_free(cells[i], cells[j]):
                j -= 1
            keep.append(cells[j])
            i = j
        return [self.planner.centre(*c) for c in keep[1:]]


def follow_path(pose: tuple[float, float, float], waypoints: list[np.ndarray], reach: float = 0.15) -> Action | None:
    """Next primitive action toward the first waypoint not yet reached; pops reached ones; None at the end."""
    while waypoints and math.hypot(waypoints[0][0] - pose[0], waypoints[0][1] - pose[1]) < reach:
        waypoints.pop(0)
    if not waypoints:
        return None
    err = heading_to(pose, waypoints[0])
    if abs(err) > TURN_RAD / 2:
        return Action.TURN_LEFT if err > 0 else Action.TURN_RIGHT
    return Action.FORWARD
