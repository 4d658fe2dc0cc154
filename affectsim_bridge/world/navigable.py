"""Navigable space of a scene for a round robot base (Fetch: radius 0.3 m), in the ``map`` frame.

A point is navigable when it lies inside a room and the robot disc centred there
touches no obstacle footprint (walls, door panels, furniture; all oriented
rectangles). Free space is therefore exact: clearance is the true distance to
the rectangles, not a raster.

Geodesics use a visibility graph over the obstacles inflated by the robot radius.
Each inflated corner (a quarter circle) is replaced by a polygon that encloses it
(vertices at ``radius / cos(15 deg)``), so a geodesic is never shorter than the
true one and at most a few millimetres longer per corner it wraps. A 1 m lattice of
free points joins the graph so that connectivity is defined in obstacle-free rooms too. All-pairs
distances between graph vertices are precomputed per scene; a query then only
tests which vertices the two end points see.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import ndimage
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path

from affectsim_bridge.world.scene import Scene

_EPS = 1e-6
_CORNER_STEPS = 3  # 90 deg per corner in 3 chords of 30 deg


@dataclass(frozen=True)
class StepResult:
    """Outcome of :meth:`NavigableSpace.try_step`: end point (m, map), whether the move was clipped."""

    end: np.ndarray
    clipped: bool


class NavigableSpace:
    """Free space, geodesics, sampling and occupancy export for one scene and robot radius."""

    def __init__(self, scene: Scene, robot_radius: float = 0.3) -> None:
        if not 0.05 <= robot_radius <= 1.0:
            raise ValueError(f"robot_radius={robot_radius!r} is invalid; expected metres in [0.05, 1.0]")
        self.scene = scene
        self.radius = float(robot_radius)
        rects = [r for _, r in scene.obstacles()]
        self.obstacle_ids = [i for i, _ in scene.obstacles()]
        # per-rect arrays: centre, half extents, rotation (cos, sin)
        self._c = np.array([[r.cx, r.cy] for r in rects]).reshape(-1, 2)
        self._h = np.array([[r.hx, r.hy] for r in rects]).reshape(-1, 2)
        self._cs = np.array([[math.cos(r.yaw), math.sin(r.yaw)] for r in rects]).reshape(-1, 2)
        self._rects = rects
        # room polygon edges (x1, y1, x2, y2) and a one-hot edge -> room matrix, for in_rooms
        edges = [(*a, *b, k) for k, room in enumerate(scene.rooms)
                 for a, b in zip(room.polygon, room.polygon[1:] + room.polygon[:1])]
        self._edges = np.array([e[:4] for e in edges], float).reshape(-1, 4)
        self._edge_room = np.eye(len(scene.rooms), dtype=np.int32)[[e[4] for e in edges]].reshape(-1, len(scene.rooms))
        self._visible_cache: dict[tuple[float, float], np.ndarray] = {}
        self._graph_ready = False  # the visibility graph is built on first use (free-space queries skip it)

    @property
    def vertices(self) -> np.ndarray:
        """Visibility-graph vertices (N, 2), m, map."""
        self._ensure_graph()
        return self._vertices

    def _ensure_graph(self) -> None:
        if not self._graph_ready:
            self._build_graph()
            self._graph_ready = True

    # ------------------------------------------------------------------ clearance
    def _to_local(self, pts: np.ndarray) -> np.ndarray:
        """(N, 2) map points -> (N, R, 2) coordinates in each rectangle's frame."""
        d = pts[:, None, :] - self._c[None, :, :]
        c, s = self._cs[None, :, 0], self._cs[None, :, 1]
        return np.stack([c * d[..., 0] + s * d[..., 1], -s * d[..., 0] + c * d[..., 1]], axis=-1)

    def clearance(self, pts: np.ndarray, discs: np.ndarray | None = None, exclude: tuple[int, ...] = ()) -> np.ndarray:
        """Distance (m) from each (N, 2) point to the nearest obstacle footprint (0 inside one).

        ``discs``: optional (K, 3) extra circular obstacles (x, y, radius), e.g. people;
        ``exclude``: indices into ``obstacle_ids`` to ignore (e.g. the seat a person sits on).
        """
        pts = np.atleast_2d(np.asarray(pts, float))
        if len(self._rects) == 0:
            out = np.full(len(pts), np.inf)
        else:
            q = np.linalg.norm(np.maximum(np.abs(self._to_local(pts)) - self._h[None], 0.0), axis=-1)
            if exclude:
                q[:, list(exclude)] = np.inf
            out = q.min(axis=1)
        if discs is not None and len(discs):
            dd = np.linalg.norm(pts[:, None, :] - discs[None, :, :2], axis=-1) - discs[None, :, 2]
            out = np.minimum(out, np.maximum(dd, 0.0).min(axis=1))
        return out

    def in_rooms(self, pts: np.ndarray) -> np.ndarray:
        """True where a point (N, 2) lies in some room (crossing number, as :meth:`Room.contains`)."""
        pts = np.atleast_2d(np.asarray(pts, float))
        x, y = pts[:, :1], pts[:, 1:2]
        x1, y1, x2, y2 = self._edges.T
        with np.errstate(divide="ignore", invalid="ignore"):
            xint = x1 + (y - y1) * (x2 - x1) / (y2 - y1)
        crossings = (((y1 > y) != (y2 > y)) & (x < xint)).astype(np.int32) @ self._edge_room
        return (crossings % 2 == 1).any(axis=1)

    def is_free(self, pts: np.ndarray, discs: np.ndarray | None = None) -> np.ndarray:
        """True where the robot disc fits: inside a room and clear of every obstacle."""
        pts = np.atleast_2d(np.asarray(pts, float))
        return self.in_rooms(pts) & (self.clearance(pts, discs) >= self.radius - _EPS)

    def is_navigable(self, pts: np.ndarray) -> np.ndarray:
        """Free and in the largest connected free region (the part of the scene the robot can roam).

        Connectivity comes from a 5 cm raster of free space (8-connected), dilated by one cell so
        that free points next to obstacles count; built once per scene.
        """
        pts = np.atleast_2d(np.asarray(pts, float))
        free = self.is_free(pts)
        mask, (ox, oy), res = self._main_region()
        i = np.clip(((pts[:, 1] - oy) / res).astype(int), 0, mask.shape[0] - 1)
        j = np.clip(((pts[:, 0] - ox) / res).astype(int), 0, mask.shape[1] - 1)
        return free & mask[i, j]

    def _main_region(self, res: float = 0.05):
        if getattr(self, "_region", None) is None:
            xmin, ymin, xmax, ymax = self.scene.bounds()
            xs, ys = np.arange(xmin, xmax, res) + res / 2, np.arange(ymin, ymax, res) + res / 2
            gx, gy = np.meshgrid(xs, ys)
            pts = np.stack([gx.ravel(), gy.ravel()], 1)
            free = np.zeros(len(pts), bool)
            for s0 in range(0, len(pts), 20000):
                free[s0:s0 + 20000] = self.is_free(pts[s0:s0 + 20000])
            labels, n = ndimage.label(free.reshape(gx.shape), structure=np.ones((3, 3)))
            main = (labels == int(np.argmax(np.bincount(labels.ravel())[1:])) + 1) if n else np.zeros_like(labels, bool)
            self._region = (ndimage.binary_dilation(main, np.ones((3, 3))), (xmin, ymin), res)
        return self._region

    # ------------------------------------------------------------------ segments
    def _segment_distance(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Distance from each segment a[i]-b[i] ((N, 2) each) to the nearest rectangle (N,)."""
        if len(self._rects) == 0:
            return np.full(len(a), np.inf)
        la, lb = self._to_local(a), self._to_local(b)  # (N, R, 2)
        h = self._h[None]
        # 1) does the segment cross the rectangle? (slab clipping)
        d = lb - la
        t0 = np.zeros(la.shape[:2])
        t1 = np.ones(la.shape[:2])
        with np.errstate(divide="ignore", invalid="ignore"):
            for k in range(2):
                inv = 1.0 / d[..., k]
                ta = (-h[..., k] - la[..., k]) * inv
                tb = (h[..., k] - la[..., k]) * inv
                lo, hi = np.minimum(ta, tb), np.maximum(ta, tb)
                par = d[..., k] == 0
                inside_slab = np.abs(la[..., k]) <= h[..., k]
                lo = np.where(par, np.where(inside_slab, -np.inf, np.inf), lo)
                hi = np.where(par, np.where(inside_slab, np.inf, -np.inf), hi)
                t0 = np.maximum(t0, lo)
                t1 = np.minimum(t1, hi)
        crosses = t0 <= t1
        # 2) otherwise min of endpoint-to-box and corner-to-segment distances
        def box_dist(p: np.ndarray) -> np.ndarray:
            return np.linalg.norm(np.maximum(np.abs(p) - h, 0.0), axis=-1)

        best = np.minimum(box_dist(la), box_dist(lb))
        dd = (d * d).sum(-1)
        for sx, sy in ((-1, -1), (1, -1), (1, 1), (-1, 1)):
            corner = np.stack([sx * h[..., 0], sy * h[..., 1]], -1)
            with np.errstate(divide="ignore", invalid="ignore"):
                t = np.clip(((corner - la) * d).sum(-1) / dd, 0.0, 1.0)
            t = np.where(dd > 0, t, 0.0)
            proj = la + t[..., None] * d
            best = np.minimum(best, np.linalg.norm(proj - corner, axis=-1))
        best = np.where(crosses, 0.0, best)
        return best.min(axis=1)

    def segment_free(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """True where the robot disc sweeping from a[i] to b[i] touches no obstacle."""
        a = np.atleast_2d(np.asarray(a, float))
        b = np.atleast_2d(np.asarray(b, float))
        return self._segment_distance(a, b) >= self.radius - _EPS

    # ------------------------------------------------------------------ visibility graph
    def _build_graph(self) -> None:
        r_out = self.radius / math.cos(math.pi / 4 / _CORNER_STEPS) + 1e-4
        verts = []
        for rect in self._rects:
            c, s = math.cos(rect.yaw), math.sin(rect.yaw)
            rot = np.array([[c, -s], [s, c]])
            for sx, sy in ((1, 1), (-1, 1), (-1, -1), (1, -1)):
                base = math.atan2(sy, sx) - math.pi / 4  # quadrant start angle in the rect frame
                for k in range(_CORNER_STEPS + 1):
                    a = base + k * (math.pi / 2) / _CORNER_STEPS
                    local = np.array([sx * rect.hx, sy * rect.hy]) + r_out * np.array([math.cos(a), math.sin(a)])
                    verts.append(rot @ local + [rect.cx, rect.cy])
        # plus a 1 m lattice inside the rooms, so that every free point sees some vertex even in an
        # empty convex room (corners of walls meeting there are not free); paths stay optimal
        xmin, ymin, xmax, ymax = self.scene.bounds()
        gx, gy = np.meshgrid(np.arange(xmin + 0.5, xmax, 1.0), np.arange(ymin + 0.5, ymax, 1.0))
        verts += list(np.stack([gx.ravel(), gy.ravel()], 1))
        v = np.array(verts).reshape(-1, 2)
        if len(v):
            v = v[self.is_free(v)]
            # merge duplicates (touching rectangles produce coincident vertices)
            v = np.unique(np.round(v, 6), axis=0)
        self._vertices = v
        n = len(v)
        if n == 0:
            self._dist = np.zeros((0, 0))
            self._pred = np.zeros((0, 0), int)
            return
        ii, jj = np.triu_indices(n, 1)
        free = np.zeros(len(ii), bool)
        chunk = max(1, 200_000 // max(1, len(self._rects)))
        for s0 in range(0, len(ii), chunk):
            sl = slice(s0, s0 + chunk)
            free[sl] = self.segment_free(v[ii[sl]], v[jj[sl]])
        ii, jj = ii[free], jj[free]
        w = np.linalg.norm(v[ii] - v[jj], axis=1)
        g = csr_matrix((np.concatenate([w, w]), (np.concatenate([ii, jj]), np.concatenate([jj, ii]))), shape=(n, n))
        self._dist, self._pred = shortest_path(g, method="D", directed=False, return_predecessors=True)

    def _visible(self, p: np.ndarray) -> np.ndarray:
        """Indices of graph vertices reachable from ``p`` by a straight free move (recent points cached:
        a batch of geodesics to one goal computes the goal's side once)."""
        key = (float(p[0]), float(p[1]))
        hit = self._visible_cache.get(key)
        if hit is not None:
            return hit
        if len(self.vertices) == 0:
            return np.zeros(0, int)
        pa = np.repeat(p[None], len(self.vertices), axis=0)
        out = np.nonzero(self.segment_free(pa, self.vertices))[0]
        if len(self._visible_cache) >= 64:
            self._visible_cache.pop(next(iter(self._visible_cache)))
        self._visible_cache[key] = out
        return out

    # ------------------------------------------------------------------ queries
    def geodesic_distance(self, a, b) -> float:
        """Shortest collision-free path length (m) from ``a`` to ``b``; ``inf`` if unreachable or not free."""
        return self._solve(a, b)[0]

    def shortest_path(self, a, b) -> list[np.ndarray]:
        """Waypoints (map, m) of a shortest path from ``a`` to ``b``, both ends included; [] if none."""
        return self._solve(a, b)[1]

    def _solve(self, a, b) -> tuple[float, list[np.ndarray]]:
        a = np.asarray(a, float)[:2]
        b = np.asarray(b, float)[:2]
        if not (self.is_free(a)[0] and self.is_free(b)[0]):
            return math.inf, []
        if self.segment_free(a, b)[0]:
            return float(np.linalg.norm(b - a)), [a, b]
        va, vb = self._visible(a), self._visible(b)
        if len(va) == 0 or len(vb) == 0:
            return math.inf, []
        da = np.linalg.norm(self.vertices[va] - a, axis=1)
        db = np.linalg.norm(self.vertices[vb] - b, axis=1)
        total = da[:, None] + self._dist[np.ix_(va, vb)] + db[None, :]
        k = int(np.argmin(total))
        best = float(total.flat[k])
        if not math.isfinite(best):
            return math.inf, []
        i, j = va[k // len(vb)], vb[k % len(vb)]
        chain = [j]
        while chain[-1] != i:
            chain.append(int(self._pred[i, chain[-1]]))
        return best, [a] + [self.vertices[c] for c in reversed(chain)] + [b]

    def sample(self, n: int, rng: np.random.Generator, max_tries: int = 200) -> np.ndarray:
        """``n`` points uniformly distributed over the main navigable region (m, map)."""
        xmin, ymin, xmax, ymax = self.scene.bounds()
        out: list[np.ndarray] = []
        for _ in range(max_tries):
            cand = rng.uniform([xmin, ymin], [xmax, ymax], size=(max(4 * n, 64), 2))
            out.extend(cand[self.is_navigable(cand)])
            if len(out) >= n:
                return np.array(out[:n])
        raise RuntimeError(f"could not sample {n} navigable points in scene {self.scene.id!r}")

    def try_step(self, start, end, slide: bool = True, discs: np.ndarray | None = None) -> StepResult:
        """Move the robot centre from ``start`` toward ``end`` (m, map), stopping at obstacles.

        The move stops at the last free point of the segment (to 0.1 mm); with ``slide``
        the rest of the displacement is projected on the blocking surface and tried
        once more. ``clipped`` is True when the end differs from ``end`` by > 1 mm.
        Never ends outside free space: a start that is not free does not move. A start overlapping
        one of ``discs`` (a person who stepped against the robot) may move, but gets no closer to
        them (:meth:`_touching`): otherwise robot and person would stay locked together.
        """
        start = np.asarray(start, float)[:2]
        end = np.asarray(end, float)[:2]
        discs = self._touching(start, discs)
        if not self.is_free(start, discs)[0]:
            return StepResult(start.copy(), bool(np.linalg.norm(end - start) > 1e-3))
        reached = self._advance(start, end, discs)
        rest = end - reached
        if slide and np.linalg.norm(rest) > 1e-3:
            normal = self._contact_normal(reached, discs)
            tangent = rest - (rest @ normal) * normal
            if np.linalg.norm(tangent) > 1e-3:
                reached = self._advance(reached, reached + tangent, discs)
        return StepResult(reached, bool(np.linalg.norm(end - reached) > 1e-3))

    def _touching(self, p: np.ndarray, discs: np.ndarray | None) -> np.ndarray | None:
        """``discs`` (x, y, radius; m) with each one that the robot disc at ``p`` overlaps shrunk until it just
        touches it, so that a move from ``p`` may keep or widen that gap but not narrow it."""
        if discs is None or not len(discs):
            return discs
        out = np.array(discs, float, copy=True).reshape(-1, 3)
        out[:, 2] = np.minimum(out[:, 2], np.linalg.norm(out[:, :2] - p, axis=1) - self.radius)
        return out

    def _sweep_free(self, a: np.ndarray, b: np.ndarray, discs: np.ndarray | None) -> bool:
        if not (self.segment_free(a, b)[0] and self.in_rooms(b)[0]):
            return False
        if discs is not None and len(discs):
            d = b - a
            dd = float(d @ d)
            t = np.clip(((discs[:, :2] - a) @ d) / dd, 0, 1) if dd > 0 else np.zeros(len(discs))
            near = np.linalg.norm(a + t[:, None] * d - discs[:, :2], axis=1) - discs[:, 2]
            return bool(near.min() >= self.radius - _EPS)
        return True

    def _advance(self, a: np.ndarray, b: np.ndarray, discs: np.ndarray | None) -> np.ndarray:
        if self._sweep_free(a, b, discs):
            return b.copy()
        lo, hi = 0.0, 1.0
        length = float(np.linalg.norm(b - a))
        while (hi - lo) * length > 1e-4:
            mid = (lo + hi) / 2
            if self._sweep_free(a, a + mid * (b - a), discs):
                lo = mid
            else:
                hi = mid
        return a + lo * (b - a)

    def _contact_normal(self, p: np.ndarray, discs: np.ndarray | None) -> np.ndarray:
        """Unit vector from the nearest obstacle surface point toward ``p``."""
        best, normal = math.inf, np.zeros(2)
        if len(self._rects):
            loc = self._to_local(p[None])[0]
            closest = np.clip(loc, -self._h, self._h)
            dist = np.linalg.norm(loc - closest, axis=1)
            k = int(np.argmin(dist))
            best = dist[k]
            n_local = (loc[k] - closest[k]) / max(dist[k], 1e-12)
            c, s = self._cs[k]
            normal = np.array([c * n_local[0] - s * n_local[1], s * n_local[0] + c * n_local[1]])
        if discs is not None and len(discs):
            dd = np.linalg.norm(discs[:, :2] - p, axis=1) - discs[:, 2]
            k = int(np.argmin(dd))
            if dd[k] < best:
                normal = (p - discs[k, :2]) / max(np.linalg.norm(p - discs[k, :2]), 1e-12)
        return normal

    # ------------------------------------------------------------------ export
    def occupancy_grid(self, resolution: float = 0.05, margin: float = 0.5) -> tuple[np.ndarray, tuple[float, float]]:
        """Occupancy raster (ROS convention: 100 occupied, 0 free, -1 unknown) and its origin (x, y) in m.

        Row ``i`` holds y = origin_y + (i + 0.5) * resolution (cell centres); obstacles
        are not inflated (Nav2 inflates by its own footprint).
        """
        xmin, ymin, xmax, ymax = self.scene.bounds()
        ox, oy = xmin - margin, ymin - margin
        w = int(math.ceil((xmax - xmin + 2 * margin) / resolution))
        h = int(math.ceil((ymax - ymin + 2 * margin) / resolution))
        xs = ox + (np.arange(w) + 0.5) * resolution
        ys = oy + (np.arange(h) + 0.5) * resolution
        gx, gy = np.meshgrid(xs, ys)
        pts = np.stack([gx.ravel(), gy.ravel()], 1)
        grid = np.full(len(pts), -1, np.int8)
        grid[self.in_rooms(pts)] = 0
        occ = np.zeros(len(pts), bool)
        for s0 in range(0, len(pts), 20000):
            occ[s0:s0 + 20000] = self.clearance(pts[s0:s0 + 20000]) <= resolution / 2
        grid[occ] = 100
        return grid.reshape(h, w), (ox, oy)
