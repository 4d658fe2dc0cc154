"""Episode composer: place a performance in a scene, pick a robot start, measure the initial view.

Initial-view measures (what the validation re-checks):
- ``initial_distance``: metres from the head camera to the target's pelvis at the start phase;
- ``relative_orientation``: angle (rad) between the target's facing and the direction from the
  target to the robot (0 = robot in front, pi = robot behind);
- ``visible_fraction``: share of 41 body points (joints, sites, limb midpoints) that are inside the
  head camera's image (640x480, vfov 46.8 deg) and not occluded by the scene (the backend's line of sight);
- ``unoccluded_fraction``: the same ignoring the image bounds;
- ``geodesic`` / ``euclidean``: robot start to the target's pelvis (robot footprint, metres);
- ``rear_frames``: share of the P-Init clip's 8 sampled frames in which ``relative_orientation`` >= 135 deg;
- ``visible_frames``: share of those frames in which ``visible_fraction`` >= 0.3;
- ``occluded_frames``: share of those frames in which ``unoccluded_fraction`` lies in the
  partial-occlusion range [0.15, 0.6];
- ``min_distance``: the least metres from the head camera to the target's pelvis over every
  full-rate frame of the P-Init clip (a performer may walk towards the robot);
- ``detour_ratio`` (``obstacle_detour`` only): over the informative viewpoints (the reference
  observer's region: its distances, 1.8-3.5 m, at its angles within 60 deg of the body's facing,
  free for the robot, and seeing >= 0.7 of the body with the camera on it), the smallest ratio of shortest path to straight line
  from the start; None when none is reachable.

Challenge definitions (thresholds):
- action-grounded and dyadic: robot in the target's room, 1.2-5 m, ``visible_fraction`` >= 0.5;
- ``far_visible``: distance >= 4.5 m in every frame of the P-Init clip (``min_distance``), ``visible_fraction`` >= 0.5;
- ``rear_view``: ``relative_orientation`` >= 135 deg, ``rear_frames`` >= 0.75, 1.5-4.5 m, ``visible_fraction`` >= 0.5
  (in-place performances only: a pacing performer turns back every few seconds);
- ``partial_occlusion``: 1.5-5 m, target in front of the camera, 0.15 <= ``unoccluded_fraction`` <= 0.6
  at the start and in at least 75 % of the clip's sampled frames (``occluded_frames`` >= 0.75);
- ``obstacle_detour`` (navigational accessibility): the target is visible from the start
  (``visible_frames`` > 0.5) but every informative viewpoint is reachable only by a path at least
  1.5 x the straight line (``detour_ratio`` >= 1.5), because furniture or partitions block the way.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

import numpy as np

from affectsim_bridge.backends import BACKENDS, DEFAULT_BACKEND
from affectsim_bridge.backends.base import PERSON_RADIUS_M, HumanPlacement
from affectsim_bridge.humans.body import BOTTOMS, TOPS
from affectsim_bridge.humans.motion import Motion
from affectsim_bridge.humans.skeleton import JOINTS, POINTS, forward_kinematics
from affectsim_bridge.world.navigable import NavigableSpace
from affectsim_bridge.world.scene import Scene
from affectsim_core.camera import FETCH_HEAD_CAMERA
from affectsim_core.clips import clip_steps, clip_times, sample_indices
from affectsim_core.colours import colour_name
from affectsim_core.geometry import Pose2D, look_at_rotation, wrap_angle
from affectsim_core.ros.topics import OPTICAL_FRAME
from affectsim_eval.episode.reference import ANGLES, DISTANCES

HUMAN_RADIUS = 0.2  # m, clearance a performer's pelvis keeps from obstacles
REAR = math.radians(135)  # rad, relative orientation from which the robot sees the performer's back
REAR_FRAMES = 0.75  # rear_view: least share of the clip's sampled frames seen from behind
SEEN = 0.3  # visible fraction from which a frame counts as showing the target (visible_frames)
OCCLUDED = (0.15, 0.6)  # partial_occlusion: range of the unoccluded fraction
OCCLUDED_FRAMES = 0.75  # partial_occlusion: least share of the clip's sampled frames within OCCLUDED
FAR = 4.5  # m, far_visible: least camera-to-pelvis distance in every frame of the clip
INFORMATIVE = 0.7  # visible fraction of an informative viewpoint (camera on the body)
FRONT = math.radians(60)  # rad, informative viewpoints lie within this angle of the body's facing
DETOUR = 1.5  # obstacle_detour: least ratio of shortest path to straight line to every informative viewpoint
NEAR_VERTICES = 16  # graph vertices near a start tried for an upper bound on its paths (a fast rejection)
_SEGMENTS = [("shoulder_l", "elbow_l"), ("elbow_l", "wrist_l"), ("shoulder_r", "elbow_r"), ("elbow_r", "wrist_r"),
             ("hip_l", "knee_l"), ("knee_l", "ankle_l"), ("hip_r", "knee_r"), ("knee_r", "ankle_r"),
             ("spine_lower", "spine_upper"), ("spine_upper", "neck"), ("pelvis", "spine_lower"),
             ("neck", "head"), ("hip_l", "hip_r"), ("shoulder_l", "shoulder_r"), ("head", "head_top"),
             ("ankle_l", "toe_l"), ("ankle_r", "toe_r")]
_SEG_A = [POINTS.index(a) for a, _ in _SEGMENTS]
_SEG_B = [POINTS.index(b) for _, b in _SEGMENTS]


def describe(m: Motion) -> str:
    """Non-privileged description of a performer (clothing), for identifying a dyadic target."""
    return f"{colour_name(TOPS[m.body.top % len(TOPS)])} top, {colour_name(BOTTOMS[m.body.bottom % len(BOTTOMS)])} trousers"


@dataclass
class Measures:
    """The initial-view measures (module docstring): metres, radians and shares; NaN = not measured."""

    initial_distance: float
    relative_orientation: float
    visible_fraction: float
    unoccluded_fraction: float
    geodesic: float
    euclidean: float
    straight_blocked: bool
    rear_frames: float = math.nan
    visible_frames: float = math.nan
    detour_ratio: float = math.nan
    occluded_frames: float = math.nan
    min_distance: float = math.nan

    def as_dict(self) -> dict:
        """JSON form: floats to 4 decimals, NaN as None."""
        return {k: (None if isinstance(v, float) and math.isnan(v) else round(v, 4) if isinstance(v, float) else v)
                for k, v in self.__dict__.items()}


class SceneContext:
    """Per-scene state for composing: navigable space, a backend for line-of-sight queries, supports, doors."""

    def __init__(self, scene: Scene) -> None:
        self.scene = scene
        self.nav = NavigableSpace(scene)
        start = self.nav.sample(1, np.random.default_rng(0))[0]
        self.backend = BACKENDS.create(DEFAULT_BACKEND)
        self.backend.load(scene, Pose2D(float(start[0]), float(start[1]), 0.0))
        self.cam_offset = self.backend.link_transforms()[OPTICAL_FRAME].translation
        self._last_points: tuple[HumanPlacement, float, np.ndarray] | None = None

    def close(self) -> None:
        self.backend.close()

    # -------------------------------------------------------------- geometry of a performance
    def body_points(self, place: HumanPlacement, t: float) -> np.ndarray:
        """41 points (m, map) on the performer's body at time ``t`` (the last call is cached)."""
        if self._last_points is not None and self._last_points[0] is place and self._last_points[1] == t:
            return self._last_points[2]
        m = place.motion
        p, r, q = place.pose_at(t)
        pts, _ = forward_kinematics(m.body.height, p[None], r[None], q[None], m.body.joint_offsets())
        pts = pts[0]
        out = np.vstack([pts, (pts[_SEG_A] + pts[_SEG_B]) / 2])
        self._last_points = (place, t, out)
        return out

    def footprint_free(self, place: HumanPlacement, exclude: tuple[int, ...] = ()) -> bool:
        """The performer's path (pelvis every 0.2 s, both feet) stays in rooms and clear of obstacles."""
        m = place.motion
        pel_local, feet_local = _local_track(m)
        c, s = math.cos(place.yaw), math.sin(place.yaw)
        rot = np.array([[c, s], [-s, c]])
        pel = pel_local @ rot + [place.x, place.y]
        if not self.nav.in_rooms(pel).all():
            return False
        feet = feet_local @ rot + [place.x, place.y]
        feet_ok = bool((self.nav.clearance(feet, exclude=exclude) >= 0.06).all() and self.nav.in_rooms(feet).all())
        if m.action in ("seated", "sit_down", "knock"):  # pelvis over a seat / next to a door is expected
            return feet_ok
        return feet_ok and bool((self.nav.clearance(pel, exclude=exclude) >= HUMAN_RADIUS).all())

    # -------------------------------------------------------------- views
    def camera(self, robot: Pose2D) -> tuple[np.ndarray, np.ndarray]:
        """Head camera position (map) and rotation (optical frame) for a robot pose, head level."""
        c, s = math.cos(robot.yaw), math.sin(robot.yaw)
        o = self.cam_offset
        pos = np.array([robot.x + c * o[0] - s * o[1], robot.y + s * o[0] + c * o[1], o[2]])
        fwd, left = np.array([c, s, 0.0]), np.array([-s, c, 0.0])
        rot = np.stack([-left, np.array([0, 0, -1.0]), fwd], axis=1)  # x right, y down, z forward
        return pos, rot

    def _view(self, cam: np.ndarray, rot: np.ndarray, pts: np.ndarray) -> tuple[float, float]:
        """(visible, unoccluded) shares of ``pts`` from a camera at ``cam`` with optical rotation ``rot``."""
        local = (pts - cam) @ rot
        k = FETCH_HEAD_CAMERA
        with np.errstate(divide="ignore", invalid="ignore"):
            u = k.fx * local[:, 0] / local[:, 2] + k.cx
            v = k.fy * local[:, 1] / local[:, 2] + k.cy
        in_view = (local[:, 2] > 0.2) & (u >= 0) & (u <= k.width - 1) & (v >= 0) & (v <= k.height - 1)
        clear = self.backend.line_of_sight(cam, pts)
        return float((in_view & clear).mean()), float(clear.mean())

    def measure(self, robot: Pose2D, place: HumanPlacement, t: float, paths: bool = True,
                detour: bool = False) -> Measures:
        """The initial-view measures; with ``paths=False`` the path measures, ``visible_frames`` and
        ``occluded_frames`` are skipped (``geodesic`` NaN, ``straight_blocked`` False) for a cheap first
        test of a candidate; ``detour_ratio`` only with ``detour``."""
        pts = self.body_points(place, t)
        cam, rot = self.camera(robot)
        visible, unoccluded = self._view(cam, rot, pts)
        pelvis = pts[JOINTS.index(JOINTS[0])]
        root, rrot, _ = place.pose_at(t)
        rel = _relative_orientation(robot, root, rrot[0])
        times = t + _clip_samples(place.motion.duration)
        rear = float(np.mean([_relative_orientation(robot, *_root_yaw(place, s)) >= REAR for s in times]))
        views = np.array([self._view(cam, rot, self.body_points(place, s)) for s in times]) if paths else None
        seen = float(np.mean(views[:, 0] >= SEEN)) if paths else math.nan
        occluded = float(np.mean((views[:, 1] >= OCCLUDED[0]) & (views[:, 1] <= OCCLUDED[1]))) if paths else math.nan
        track = _root_track(place, t + clip_times(place.motion.duration)) if place.motion is not None else root[None]
        a, b = np.array([robot.x, robot.y]), root[:2]
        geo = self.nav.geodesic_distance(a, self._reachable_near(b)) if paths else math.nan
        blocked = paths and not bool(self.nav.segment_free(a, b)[0])
        return Measures(float(np.linalg.norm(pelvis - cam)), rel, visible, unoccluded, geo,
                        float(np.linalg.norm(b - a)), blocked, rear, seen,
                        self.detour_ratio(a, place, t) if detour else math.nan, occluded,
                        float(np.linalg.norm(track - cam, axis=1).min()))

    def informative_viewpoints(self, place: HumanPlacement, t: float) -> np.ndarray:
        """(N, 2) m map: the reference observer's candidate bases around the performer at ``t`` (its
        distances, at its angles within :data:`FRONT` of the body's facing) that are free for the robot and see at least
        :data:`INFORMATIVE` of the body with the camera on it (the last placement is cached)."""
        cached = getattr(self, "_informative", None)  # holds the placement itself: an id could be reused
        if cached is not None and cached[0] is place and cached[1] == t:
            return cached[2]
        root, rrot, _ = place.pose_at(t)
        pts = self.body_points(place, t)
        centre = pts.mean(0)
        ang = rrot[0] + np.array([a for a in ANGLES if abs(a) <= FRONT])
        cands = np.array([root[:2] + d * np.array([math.cos(a), math.sin(a)]) for d in DISTANCES for a in ang])
        out = []
        for c in cands[self.nav.is_free(cands)]:
            robot = Pose2D(float(c[0]), float(c[1]), math.atan2(root[1] - c[1], root[0] - c[0]))
            cam, _ = self.camera(robot)
            if self._view(cam, look_at_rotation(cam, centre), pts)[0] >= INFORMATIVE:
                out.append(c)
        self._informative = (place, t, np.array(out).reshape(-1, 2))
        return self._informative[2]

    def _path_bound(self, start: np.ndarray, place: HumanPlacement, t: float) -> np.ndarray:
        """(V,) m: for each informative viewpoint, the length of some free path from ``start`` to it (a
        straight move to one of the :data:`NEAR_VERTICES` nearest visibility-graph vertices, then the
        graph): an upper bound on the shortest path, inf where none of those vertices is in sight."""
        nav = self.nav
        verts = nav.vertices
        cached = getattr(self, "_via", None)  # per placement: graph vertex -> viewpoint path lengths
        if cached is None or cached[0] is not place or cached[1] != t:
            views = self.informative_viewpoints(place, t)
            via = np.full((len(views), len(verts)), np.inf)
            for i, v in enumerate(views):
                seen = nav._visible(v)
                if len(seen):
                    via[i] = (nav._dist[:, seen] + np.linalg.norm(verts[seen] - v, axis=1)[None, :]).min(axis=1)
            self._via = cached = (place, t, via)
        near = np.argsort(np.linalg.norm(verts - start, axis=1), kind="stable")[:NEAR_VERTICES]
        near = near[nav.segment_free(np.repeat(start[None], len(near), 0), verts[near])]
        if len(near) == 0:
            return np.full(len(cached[2]), np.inf)
        return (np.linalg.norm(verts[near] - start, axis=1)[None, :] + cached[2][:, near]).min(axis=1)

    def detour_ratio(self, start: np.ndarray, place: HumanPlacement, t: float, stop_below: float = 0.0) -> float:
        """Smallest shortest-path / straight-line ratio from ``start`` over the informative viewpoints
        reachable from it (1.0 as soon as one is in a straight free line); NaN when none is reachable.
        With ``stop_below``, the first ratio below it is returned (enough to reject a start)."""
        views = self.informative_viewpoints(place, t)
        if len(views) == 0:
            return math.nan
        if self.nav.segment_free(np.repeat(start[None], len(views), 0), views).any():
            return 1.0
        if stop_below > 0:  # an upper bound on the paths first: below the threshold, so is the shortest path
            bound = self._path_bound(start, place, t) / np.maximum(np.linalg.norm(views - start, axis=1), 1e-6)
            if (bound < stop_below).any():
                return float(bound.min())
        best = math.nan
        for v in views[np.argsort(np.linalg.norm(views - start, axis=1))]:
            ratio = self.nav.geodesic_distance(start, v) / max(1e-6, float(np.linalg.norm(v - start)))
            if math.isfinite(ratio) and not ratio >= best:
                best = ratio
                if ratio < stop_below:
                    break
        return best

    def _reachable_near(self, xy: np.ndarray) -> np.ndarray:
        """The performer stands where the robot cannot: the nearest free point around them (for geodesics)."""
        if self.nav.is_free(xy)[0]:
            return xy
        for r in (0.35, 0.5, 0.7, 0.9, 1.2):
            ang = np.linspace(0, 2 * math.pi, 16, endpoint=False)
            ring = xy + r * np.c_[np.cos(ang), np.sin(ang)]
            ok = ring[self.nav.is_free(ring)]
            if len(ok):
                return ok[np.argmin(np.linalg.norm(ok - xy, axis=1))]
        return xy


def _relative_orientation(robot: Pose2D, root: np.ndarray, facing: float) -> float:
    """Angle (rad, 0..pi) between the performer's facing and the direction from them to the robot."""
    return abs(wrap_angle(math.atan2(robot.y - root[1], robot.x - root[0]) - facing))


def _root_track(place: HumanPlacement, times: np.ndarray) -> np.ndarray:
    """(N, 3) m map: the performer's root (pelvis) at sim times ``times``."""
    p, _, _ = place.motion.sample(np.asarray(times) + place.phase)
    c, s = math.cos(place.yaw), math.sin(place.yaw)
    return np.c_[place.x + c * p[:, 0] - s * p[:, 1], place.y + s * p[:, 0] + c * p[:, 1], p[:, 2]]


def _root_yaw(place: HumanPlacement, t: float) -> tuple[np.ndarray, float]:
    root, rot, _ = place.pose_at(t)
    return root, float(rot[0])


@functools.lru_cache(maxsize=256)
def _clip_samples(duration: float) -> np.ndarray:
    """Times (s from the clip start) of the P-Init clip's sampled recognizer frames."""
    return clip_times(duration)[sample_indices(clip_steps(duration))]


@functools.lru_cache(maxsize=4096)
def _local_track(m: Motion) -> tuple[np.ndarray, np.ndarray]:
    """Pelvis (every 0.2 s) and toe (every 0.4 s) floor positions over one cycle, in the motion frame."""
    ts = np.arange(0, m.duration, 0.2)
    p, r, q = m.sample(ts)
    pts, _ = forward_kinematics(m.body.height, p, r, q, m.body.joint_offsets())
    toes = pts[::2][:, [POINTS.index("toe_l"), POINTS.index("toe_r")], :2].reshape(-1, 2)
    return p[:, :2], toes


# ------------------------------------------------------------------------------ placement


def place_target(ctx: SceneContext, m: Motion, rng: np.random.Generator, tries: int = 60) -> tuple[HumanPlacement, dict] | None:
    """A placement of ``m`` that fits the scene (support, door, free floor), or None."""
    scene, nav = ctx.scene, ctx.nav
    if m.action in ("seated", "sit_down"):
        seat_h = float(m.provenance.get("seat_height", 0.45))
        sups = [s for s in scene.supports() if abs(s.height - seat_h) <= 0.06]
        for k in rng.permutation(len(sups))[:tries]:
            s = sups[k]
            fid = [i for i, (oid, _) in enumerate(scene.obstacles()) if oid == f"furniture:{s.furniture_id}"]
            off = float(rng.uniform(-0.6, 0.6)) * max(0.0, s.half_length - 0.3)
            x = s.x - math.sin(s.facing_yaw) * 0 + math.cos(s.facing_yaw + math.pi / 2) * off
            y = s.y + math.sin(s.facing_yaw + math.pi / 2) * off
            place = HumanPlacement("target", x, y, s.facing_yaw, motion=m, phase=0.0)
            if ctx.footprint_free(place, exclude=tuple(fid)):
                return place, {"support": s.furniture_id, "support_height": s.height}
        return None
    if m.action == "knock":
        doors = scene.doors()
        for k in rng.permutation(len(doors))[:tries] if doors else []:
            d = doors[k]
            fp = d.footprint
            n = np.array([-math.sin(fp.yaw), math.cos(fp.yaw)])
            side = float(rng.choice([-1.0, 1.0]))
            face = np.array([fp.cx, fp.cy]) + side * n * fp.hy
            yaw = math.atan2(-side * n[1], -side * n[0])  # facing the panel
            hand_y = -0.2  # right hand beside the body midline
            dx = float(m.provenance["door_plane_x"])
            c, s_ = math.cos(yaw), math.sin(yaw)
            ax, ay = face[0] - (c * dx - s_ * hand_y), face[1] - (s_ * dx + c * hand_y)
            place = HumanPlacement("target", ax, ay, yaw, motion=m, phase=0.0)
            door_idx = tuple(i for i, (oid, _) in enumerate(scene.obstacles()) if oid == f"door:{d.id}")
            if nav.in_rooms(np.array([[ax, ay]]))[0] and ctx.footprint_free(place, exclude=door_idx):
                return place, {"door": d.id, "door_side": side}
        return None
    walking = m.action == "walk" or m.provenance.get("scenario") == "pacing"
    points = nav.sample(tries * (3 if walking else 1), rng)
    for xy in points:
        # walks run along the room's axes (as along a corridor or a wall), other performances face anywhere
        yaw = (float(rng.integers(4)) * math.pi / 2 + float(rng.uniform(-0.15, 0.15))) if walking \
            else float(rng.uniform(-math.pi, math.pi))
        place = HumanPlacement("target", float(xy[0]), float(xy[1]), yaw, motion=m, phase=0.0)
        if ctx.footprint_free(place):
            return place, {}
    return None


CRITERIA = {
    None: lambda me, ctx: 1.2 <= me.initial_distance <= 5.0 and me.visible_fraction >= 0.5,
    "far_visible": lambda me, ctx: me.min_distance >= FAR and me.visible_fraction >= 0.5,
    "rear_view": lambda me, ctx: (me.relative_orientation >= REAR and me.rear_frames >= REAR_FRAMES
                                  and 1.5 <= me.initial_distance <= 4.5 and me.visible_fraction >= 0.5),
    "partial_occlusion": lambda me, ctx: (1.5 <= me.initial_distance <= 5.0
                                          and OCCLUDED[0] <= me.unoccluded_fraction <= OCCLUDED[1]
                                          and not me.occluded_frames < OCCLUDED_FRAMES),  # NaN: not measured yet
    "obstacle_detour": lambda me, ctx: me.visible_frames > 0.5 and me.detour_ratio >= DETOUR,  # NaN: not realised
}


def realised(challenge: str | None, me: Measures) -> bool:
    return bool(CRITERIA[challenge](me, None))


def robot_start(ctx: SceneContext, place: HumanPlacement, t: float, challenge: str | None, same_room: bool,
                rng: np.random.Generator, tries: int = 150, others: tuple[HumanPlacement, ...] = ()
                ) -> tuple[Pose2D, Measures] | None:
    """A navigable robot start realising ``challenge`` (None: target initially visible nearby), its base
    clear of the target and of ``others`` at time ``t`` (pelvis discs of :data:`PERSON_RADIUS_M`)."""
    nav, scene = ctx.nav, ctx.scene
    root = place.pose_at(t)[0][:2]
    room = scene.room_at(tuple(root))
    cands = nav.sample(tries, rng)
    if same_room and room is not None:
        cands = cands[room.contains(cands)]
    d = np.linalg.norm(cands - root, axis=1)
    lo, hi = {"far_visible": (FAR, 40.0), "obstacle_detour": (1.0, 8.0)}.get(challenge, (1.2, 5.0))
    cands = cands[(d >= lo) & (d <= hi)]
    for other in others:
        gap = np.linalg.norm(cands - other.pose_at(t)[0][:2], axis=1)
        cands = cands[gap >= nav.radius + PERSON_RADIUS_M]
    if challenge == "obstacle_detour":  # only starts that see no informative viewpoint in a straight free line
        views = ctx.informative_viewpoints(place, t)
        if len(views) == 0 or len(cands) == 0:
            return None
        a, b = np.repeat(cands, len(views), 0), np.tile(views, (len(cands), 1))
        cands = cands[~nav.segment_free(a, b).reshape(len(cands), len(views)).any(axis=1)]
    for xy in cands:
        bearing = math.atan2(root[1] - xy[1], root[0] - xy[0])
        yaw = wrap_angle(bearing + float(rng.uniform(-0.3, 0.3)))
        robot = Pose2D(float(xy[0]), float(xy[1]), yaw)
        first = ctx.measure(robot, place, t, paths=False)  # ray casts first, path measures only if they pass
        if challenge == "obstacle_detour":  # cheapest tests first: most candidates see a viewpoint straight ahead
            if first.visible_fraction < SEEN or not ctx.detour_ratio(xy, place, t, stop_below=DETOUR) >= DETOUR:
                continue
        elif not realised(challenge, replace(first, geodesic=0.0)):
            continue
        me = ctx.measure(robot, place, t, detour=challenge == "obstacle_detour")
        if not math.isfinite(me.geodesic) or not realised(challenge, me):
            continue
        return robot, me
    return None
