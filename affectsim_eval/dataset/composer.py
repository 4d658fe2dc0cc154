"""Episode composer: place a performance in a scene, pick a robot start, measure the initial view.

Initial-view measures (what the validation re-checks):
- ``initial_distance``: metres from the head camera to the target's pelvis at the start phase;
- ``relative_orientation``: angle (rad) between the target's facing and the direction from the
  target to the robot (0 = robot in front, pi = robot behind);
- ``visible_fraction``: share of 41 body points (joints, sites, limb midpoints) that are inside the
  head camera's image (640x480, vfov 46.8 deg) and not occluded by the scene (the backend's line of sight);
- ``unoccluded_fraction``: the same ignoring the image bounds;
- ``geodesic`` / ``euclidean``: robot start to the target's pelvis (robot footprint, metres).

Challenge definitions (thresholds):
- action-grounded and dyadic: robot in the target's room, 1.2-5 m, ``visible_fraction`` >= 0.5;
- ``far_visible``: distance >= 4.5 m, ``visible_fraction`` >= 0.5;
- ``rear_view``: ``relative_orientation`` >= 135 deg, 1.5-4.5 m, ``visible_fraction`` >= 0.5;
- ``partial_occlusion``: 1.5-5 m, target in front of the camera, 0.15 <= ``unoccluded_fraction`` <= 0.6;
- ``obstacle_detour``: the straight move to the target is blocked, geodesic >= 1.4 x euclidean and
  >= euclidean + 1.5 m, and a navigable viewpoint within 3 m of the target sees >= 0.7 of the body.
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
from affectsim_bridge.navigable import NavigableSpace
from affectsim_bridge.scene import Scene
from affectsim_core.camera import FETCH_HEAD_CAMERA
from affectsim_core.colours import colour_name
from affectsim_core.geometry import Pose2D, wrap_angle
from affectsim_core.ros.topics import OPTICAL_FRAME

HUMAN_RADIUS = 0.2  # m, clearance a performer's pelvis keeps from obstacles
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
    initial_distance: float
    relative_orientation: float
    visible_fraction: float
    unoccluded_fraction: float
    geodesic: float
    euclidean: float
    straight_blocked: bool

    def as_dict(self) -> dict:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


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

    def measure(self, robot: Pose2D, place: HumanPlacement, t: float, paths: bool = True) -> Measures:
        """The initial-view measures; with ``paths=False`` the path measures are skipped
        (``geodesic`` is NaN, ``straight_blocked`` False) for a cheap first test of a candidate."""
        pts = self.body_points(place, t)
        cam, rot = self.camera(robot)
        local = (pts - cam) @ rot
        k = FETCH_HEAD_CAMERA
        with np.errstate(divide="ignore", invalid="ignore"):
            u = k.fx * local[:, 0] / local[:, 2] + k.cx
            v = k.fy * local[:, 1] / local[:, 2] + k.cy
        in_view = (local[:, 2] > 0.2) & (u >= 0) & (u <= k.width - 1) & (v >= 0) & (v <= k.height - 1)
        clear = self.backend.line_of_sight(cam, pts)
        pelvis = pts[JOINTS.index(JOINTS[0])]
        root, rrot, _ = place.pose_at(t)
        to_robot = math.atan2(robot.y - root[1], robot.x - root[0])
        rel = abs(wrap_angle(to_robot - rrot[0]))
        a, b = np.array([robot.x, robot.y]), root[:2]
        geo = self.nav.geodesic_distance(a, self._reachable_near(b)) if paths else math.nan
        blocked = paths and not bool(self.nav.segment_free(a, b)[0])
        return Measures(float(np.linalg.norm(pelvis - cam)), rel, float((in_view & clear).mean()),
                        float(clear.mean()), geo, float(np.linalg.norm(b - a)), blocked)

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
    "far_visible": lambda me, ctx: me.initial_distance >= 4.5 and me.visible_fraction >= 0.5,
    "rear_view": lambda me, ctx: (me.relative_orientation >= math.radians(135) and 1.5 <= me.initial_distance <= 4.5
                                  and me.visible_fraction >= 0.5),
    "partial_occlusion": lambda me, ctx: 1.5 <= me.initial_distance <= 5.0 and 0.15 <= me.unoccluded_fraction <= 0.6,
    "obstacle_detour": lambda me, ctx: (me.straight_blocked and math.isfinite(me.geodesic)
                                        and me.geodesic >= max(1.4 * me.euclidean, me.euclidean + 1.5)),
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
    lo, hi = {"far_visible": (4.5, 40.0), "obstacle_detour": (1.0, 8.0)}.get(challenge, (1.2, 5.0))
    cands = cands[(d >= lo) & (d <= hi)]
    for other in others:
        gap = np.linalg.norm(cands - other.pose_at(t)[0][:2], axis=1)
        cands = cands[gap >= nav.radius + PERSON_RADIUS_M]
    for xy in cands:
        bearing = math.atan2(root[1] - xy[1], root[0] - xy[0])
        yaw = wrap_angle(bearing + float(rng.uniform(-0.3, 0.3)))
        robot = Pose2D(float(xy[0]), float(xy[1]), yaw)
        if challenge == "obstacle_detour":
            if nav.segment_free(xy, root)[0]:
                continue
        elif not realised(challenge, replace(ctx.measure(robot, place, t, paths=False), geodesic=0.0)):
            continue  # ray casts first, path measures only for candidates that pass them
        me = ctx.measure(robot, place, t)
        if not math.isfinite(me.geodesic) or not realised(challenge, me):
            continue
        if challenge == "obstacle_detour" and not _better_view_reachable(ctx, place, t, rng):
            return None
        return robot, me
    return None


def _better_view_reachable(ctx: SceneContext, place: HumanPlacement, t: float, rng: np.random.Generator) -> bool:
    root = place.pose_at(t)[0][:2]
    ang = rng.uniform(0, 2 * math.pi, 24)
    r = rng.uniform(1.2, 3.0, 24)
    pts = root + np.c_[r * np.cos(ang), r * np.sin(ang)]
    for p in pts[ctx.nav.is_navigable(pts)][:8]:
        robot = Pose2D(float(p[0]), float(p[1]), math.atan2(root[1] - p[1], root[0] - p[0]))
        if ctx.measure(robot, place, t).visible_fraction >= 0.7:
            return True
    return False
