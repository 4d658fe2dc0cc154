"""Simulator backend interface: the world the bridge node publishes.

A backend owns one loaded scene, the Fetch robot and the people in it, renders
RGB-D from the head camera or any camera pose, casts the base laser, and reports
ground truth. Motion is kinematic and shared by every backend (this base class):
discrete actions and velocity commands move the base through
:class:`~affectsim_bridge.world.navigable.NavigableSpace`, so every backend clips moves
identically and runs are repeatable bit for bit.

Frames: ``map`` (z up, floor at z = 0); camera poses are ROS optical frames
(z forward, x right, y down). Units: metres, radians, seconds of sim time.
"""

from __future__ import annotations

import abc
import math
from dataclasses import dataclass

import numpy as np

from affectsim_bridge.humans.body import BodyShape
from affectsim_bridge.humans.motion import Motion
from affectsim_bridge.humans.reactive import HUMANS_MODES, PERSON_RADIUS_M, Reactions
from affectsim_bridge.humans.skeleton import DOF_INDEX, DOFS, PELVIS_HEIGHT
from affectsim_bridge.world.navigable import NavigableSpace
from affectsim_bridge.world.scene import Scene
from affectsim_core.actions import Action, MoveResult
from affectsim_core.camera import CameraIntrinsics
from affectsim_core.episode import MAX_PHASE_S
from affectsim_core.errors import InvalidInput
from affectsim_core.geometry import Pose2D, Transform, wrap_angle
from affectsim_core.protocol import FORWARD_M, HEAD_PAN_LIMITS, HEAD_SPEED, HEAD_TILT_LIMITS, STEP_SECONDS, TURN_RAD
from affectsim_core.ros.topics import OPTICAL_FRAME

REST_POSE = np.zeros(len(DOFS))  # standing, arms relaxed at the sides
for _name, _deg in (("shoulder_l_abd", 8), ("shoulder_r_abd", 8), ("elbow_l_flex", 12), ("elbow_r_flex", 12)):
    REST_POSE[DOF_INDEX[_name]] = math.radians(_deg)


@dataclass(frozen=True)
class HumanPlacement:
    """A person in the scene: anchor on the floor (m, map), heading yaw (rad), who and what they perform.

    ``motion`` replays cyclically from ``phase`` seconds, in a frame anchored at (x, y, yaw);
    without one the person stands still. The body is ``body``, else the motion's performer,
    else drawn from the ``appearance`` seed.
    """

    id: str
    x: float
    y: float
    yaw: float
    appearance: int = 0
    is_target: bool = True
    body: BodyShape | None = None
    motion: Motion | None = None
    phase: float = 0.0

    def body_shape(self) -> BodyShape:
        if self.body is not None:
            return self.body
        if self.motion is not None:
            return self.motion.body
        return BodyShape.random(np.random.default_rng(self.appearance))

    def pose_at(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Root position (m, map), root yaw-pitch-roll (rad, map) and DoFs (rad) at sim time ``t``."""
        if self.motion is None:
            h = self.body_shape().height
            return np.array([self.x, self.y, PELVIS_HEIGHT * h]), np.array([self.yaw, 0.0, 0.0]), REST_POSE.copy()
        p, r, q = self.motion.sample(t + self.phase)
        c, s = math.cos(self.yaw), math.sin(self.yaw)
        pos = np.array([self.x + c * p[0] - s * p[1], self.y + s * p[0] + c * p[1], p[2]])
        return pos, np.array([r[0] + self.yaw, r[1], r[2]]), q


@dataclass(frozen=True)
class LaserSpec:
    """Base laser (Fetch: SICK TIM571). Angles (rad) in ``laser_link``; ranges in metres."""

    angle_min: float = -1.92
    angle_max: float = 1.92
    angle_increment: float = math.radians(1.0 / 3.0)
    range_min: float = 0.05
    range_max: float = 25.0

    @property
    def count(self) -> int:
        return int(round((self.angle_max - self.angle_min) / self.angle_increment)) + 1


@dataclass
class RGBD:
    """One camera frame: ``rgb`` (H, W, 3) uint8 and ``depth`` (H, W) float32 metres along the optical axis
    (NaN where nothing is within range); ``pose`` is the optical frame in ``map``."""

    rgb: np.ndarray
    depth: np.ndarray
    intrinsics: CameraIntrinsics
    pose: Transform


@dataclass
class RobotConfig:
    """Kinematic state of the Fetch's body parts that the benchmark controls."""

    radius: float = 0.3
    torso_lift: float = 0.0386  # m, Fetch range 0.0386..0.3861
    head_pan: float = 0.0  # rad, +left
    head_tilt: float = 0.0  # rad, +down (Fetch convention)
    max_linear: float = 1.0  # m/s
    max_angular: float = 1.5  # rad/s
    slide: bool = True  # slide along obstacles instead of stopping


def check_people(nav: NavigableSpace, scene_id: str, robot: Pose2D, humans: tuple[HumanPlacement, ...],
                 min_gap: float | None = None) -> None:
    """Raise :class:`InvalidInput` unless the cast is possible: unique ids, exactly one target (when there
    are people), and every pelvis at sim time 0 inside a room of ``nav``'s scene, not inside a wall, and at
    least ``min_gap`` m (default: the robot radius, i.e. not on the base) from the robot's centre."""
    ids = [h.id for h in humans]
    if len(set(ids)) != len(ids):
        raise InvalidInput("humans[].id", ids, "unique ids")
    if humans and sum(bool(h.is_target) for h in humans) != 1:
        raise InvalidInput("humans[].is_target", [h.is_target for h in humans], "exactly one target")
    min_gap = nav.radius if min_gap is None else min_gap
    not_walls = tuple(i for i, oid in enumerate(nav.obstacle_ids) if not oid.startswith("wall"))
    for h in humans:
        xy = h.pose_at(0.0)[0][:2]
        where = (round(float(xy[0]), 3), round(float(xy[1]), 3))
        if not nav.in_rooms(xy[None])[0]:
            raise InvalidInput(f"humans[{h.id}] position", where, f"a point inside a room of {scene_id!r}")
        if nav.clearance(xy[None], exclude=not_walls)[0] <= 0.0:
            raise InvalidInput(f"humans[{h.id}] position", where, "a point not inside a wall")
        gap = float(np.hypot(*(xy - robot.xy)))
        if gap < min_gap:
            raise InvalidInput(f"humans[{h.id}] position", where,
                               f"a point off the robot's base, at least {min_gap:.2f} m from its centre "
                               f"({gap:.2f} m)")


def check_head(joint: str, value: float, clip: bool = False) -> float:
    """``value`` (rad) of head joint ``joint`` ("head_pan" or "head_tilt") as a float; raises
    :class:`InvalidInput` naming it unless finite and (without ``clip``) within the joint's limits."""
    lo, hi = HEAD_PAN_LIMITS if joint == "head_pan" else HEAD_TILT_LIMITS
    v = float(value)
    if not math.isfinite(v) or (not clip and not lo <= v <= hi):
        raise InvalidInput(joint, value, f"a finite angle in rad{'' if clip else f' within [{lo}, {hi}]'}")
    return v


class SimulatorBackend(abc.ABC):
    """Abstract world. Subclasses implement loading, rendering, ray casting and link poses."""

    max_humans = 2

    def __init__(self, robot: RobotConfig | None = None) -> None:
        self.robot = robot or RobotConfig()
        self.head_home = (self.robot.head_pan, self.robot.head_tilt)  # rad: the head at every episode's start
        self.head_goal: tuple[float, float] | None = None  # rad (pan, tilt) the head moves toward; None: still
        self.scene: Scene | None = None
        self.navigable: NavigableSpace | None = None
        self.pose = Pose2D(0.0, 0.0, 0.0)
        self.humans: tuple[HumanPlacement, ...] = ()
        self.reactions: Reactions | None = None  # humans="reactive": people respond to the robot
        self.sim_time = 0.0

    # ---------------------------------------------------------------- abstract primitives
    @abc.abstractmethod
    def _load_scene(self, scene: Scene) -> None:
        """Build the scene's world (called only when the scene changes)."""

    @abc.abstractmethod
    def _sync(self) -> None:
        """Push ``self.pose``, robot joints and ``self.humans`` into the simulator state."""

    @abc.abstractmethod
    def render_head_camera(self) -> RGBD:
        """RGB-D from the robot's head camera at the current state."""

    @abc.abstractmethod
    def render_camera(self, pose: Transform, intrinsics: CameraIntrinsics, top_down: bool = False) -> RGBD:
        """RGB-D from an arbitrary optical-frame pose in ``map``; ``top_down`` hides ceilings."""

    @abc.abstractmethod
    def laser_scan(self, spec: LaserSpec) -> np.ndarray:
        """Ranges (m) of the base laser; ``inf`` where nothing is within ``range_max``."""

    @abc.abstractmethod
    def line_of_sight(self, origin: np.ndarray, points: np.ndarray) -> np.ndarray:
        """(N,) bool: True where the straight segment from ``origin`` (3,) to each of ``points``
        (N, 3), metres in ``map``, meets no static scene geometry (walls, furniture, doors; people and
        the robot do not occlude) closer than 3 cm before the point. The one visibility query of
        the world: the reference observer, the visible-body fraction and the dataset composer use it."""

    @abc.abstractmethod
    def link_transforms(self) -> dict[str, Transform]:
        """Pose of each robot link in ``base_link`` (names as on the real Fetch)."""

    @property
    @abc.abstractmethod
    def head_intrinsics(self) -> CameraIntrinsics:
        """Intrinsics of the head camera."""

    # ---------------------------------------------------------------- shared behaviour
    def load(self, scene: Scene, robot_pose: Pose2D, humans: tuple[HumanPlacement, ...] = (),
             humans_mode: str = "scripted", reaction_seed: int = 0) -> None:
        """Instantiate a world state; raises :class:`InvalidInput` naming the field on an off-navigable
        robot pose or an impossible cast of people (see :func:`check_people`). ``humans_mode``
        "scripted" replays the motions; "reactive" lets people notice the robot and respond
        (:mod:`affectsim_bridge.humans.reactive`, random draws from ``reaction_seed``)."""
        if humans_mode not in HUMANS_MODES:
            raise InvalidInput("humans", humans_mode, f"one of {', '.join(HUMANS_MODES)}")
        if not robot_pose.is_finite():
            raise InvalidInput("robot_pose", robot_pose, "finite x, y (m) and yaw (rad)")
        if len(humans) > self.max_humans:
            raise InvalidInput("humans", len(humans), f"at most {self.max_humans} people")
        for h in humans:
            if not all(math.isfinite(v) for v in (h.x, h.y, h.yaw)):
                raise InvalidInput(f"humans[{h.id}]", (h.x, h.y, h.yaw), "finite x, y (m) and yaw (rad)")
            if not (math.isfinite(h.phase) and abs(h.phase) <= MAX_PHASE_S):
                raise InvalidInput(f"humans[{h.id}].phase", h.phase, f"seconds within +-{MAX_PHASE_S:g}")
        if self.scene is None or self.scene is not scene:
            nav = NavigableSpace(scene, self.robot.radius)
            self._load_scene(scene)
            self.scene, self.navigable = scene, nav
        assert self.navigable is not None
        if not self.navigable.is_navigable(robot_pose.xy)[0]:
            clearance = float(self.navigable.clearance(robot_pose.xy)[0])
            raise InvalidInput(
                "robot_pose", (robot_pose.x, robot_pose.y),
                f"a navigable point of scene {scene.id!r} (clearance {clearance:.2f} m, robot radius "
                f"{self.robot.radius} m, must be inside a room and connected to the main region)",
            )
        check_people(self.navigable, scene.id, robot_pose, humans)
        self.pose = Pose2D(robot_pose.x, robot_pose.y, wrap_angle(robot_pose.yaw))
        self.robot.head_pan, self.robot.head_tilt = self.head_home
        self.head_goal = None
        self.humans = tuple(humans)
        self.sim_time = 0.0
        self.reactions = (Reactions(self.humans, self.navigable, self.line_of_sight, self.pose, int(reaction_seed))
                          if humans_mode == "reactive" else None)
        self._sync()

    def human_pose(self, k: int, t: float | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Person ``k``'s root position (m, map), yaw-pitch-roll (rad) and DoFs (rad) at sim time ``t``
        (default now): the scripted motion, or with its reaction to the robot blended on."""
        t = self.sim_time if t is None else t
        return self.humans[k].pose_at(t) if self.reactions is None else self.reactions.pose(k, t)

    def _human_discs(self) -> np.ndarray:
        """People as round obstacles for the base (x, y, radius :data:`PERSON_RADIUS_M`) at the current sim time."""
        return np.array([[*self.human_pose(k)[0][:2], PERSON_RADIUS_M] for k in range(len(self.humans))]).reshape(-1, 3)

    def _advance_people(self) -> None:
        """Reactions follow the robot to the current sim time (no-op for scripted people)."""
        if self.reactions is not None:
            self.reactions.advance(self.sim_time, self.pose)

    def apply_action(self, action: Action | int, realised: tuple[float, float] | None = None) -> MoveResult:
        """Apply one discrete action (lockstep): advances sim time by 0.25 s. ``realised`` (translation m
        along the heading at mid-step, rotation rad) replaces the action's nominal motion (FORWARD_M, or
        +-TURN_RAD) when given: actuation noise (:class:`affectsim_bridge.world.noise.ActuationNoise`)."""
        self._require_loaded()
        try:
            action = Action(int(action))
        except ValueError:
            raise InvalidInput("action", action, "0 STOP, 1 FORWARD, 2 TURN_LEFT or 3 TURN_RIGHT") from None
        if realised is not None:
            return self._move(*realised)
        clipped, dist = False, 0.0
        p = self.pose
        if action == Action.FORWARD:
            target = p.xy + FORWARD_M * np.array([math.cos(p.yaw), math.sin(p.yaw)])
            res = self.navigable.try_step(p.xy, target, slide=self.robot.slide, discs=self._human_discs())
            dist = float(np.linalg.norm(res.end - p.xy))
            clipped = res.clipped
            self.pose = Pose2D(float(res.end[0]), float(res.end[1]), p.yaw)
        elif action in (Action.TURN_LEFT, Action.TURN_RIGHT):
            sign = 1.0 if action == Action.TURN_LEFT else -1.0
            self.pose = Pose2D(p.x, p.y, wrap_angle(p.yaw + sign * TURN_RAD))
        self.sim_time += STEP_SECONDS
        self._move_head(STEP_SECONDS)
        self._advance_people()
        self._sync()
        return MoveResult(self.pose, clipped, dist, self.sim_time)

    def _move(self, translation: float, rotation: float) -> MoveResult:
        """One lockstep step of ``translation`` m along the mid-step heading and ``rotation`` rad, clipped
        by navigable space like a nominal action; advances sim time by 0.25 s."""
        if not (math.isfinite(translation) and math.isfinite(rotation)):
            raise InvalidInput("realised motion", (translation, rotation), "finite metres and radians")
        p, clipped, end = self.pose, False, self.pose.xy
        if translation != 0.0:
            yaw_mid = p.yaw + 0.5 * rotation
            target = p.xy + translation * np.array([math.cos(yaw_mid), math.sin(yaw_mid)])
            res = self.navigable.try_step(p.xy, target, slide=self.robot.slide, discs=self._human_discs())
            clipped, end = res.clipped, res.end
        dist = float(np.linalg.norm(end - p.xy))
        self.pose = Pose2D(float(end[0]), float(end[1]), wrap_angle(p.yaw + rotation))
        self.sim_time += STEP_SECONDS
        self._move_head(STEP_SECONDS)
        self._advance_people()
        self._sync()
        return MoveResult(self.pose, clipped, dist, self.sim_time)

    def integrate_velocity(self, linear: float, angular: float, dt: float) -> MoveResult:
        """Unicycle motion for ``dt`` s at ``linear`` m/s and ``angular`` rad/s (clamped to limits)."""
        self._require_loaded()
        for name, v in (("linear", linear), ("angular", angular), ("dt", dt)):
            if not math.isfinite(v):
                raise InvalidInput(name, v, "a finite number")
        if dt <= 0 or dt > 1.0:
            raise InvalidInput("dt", dt, "a time step in (0, 1] s")
        v = max(-self.robot.max_linear, min(self.robot.max_linear, linear))
        w = max(-self.robot.max_angular, min(self.robot.max_angular, angular))
        p = self.pose
        yaw_mid = p.yaw + 0.5 * w * dt
        target = p.xy + v * dt * np.array([math.cos(yaw_mid), math.sin(yaw_mid)])
        clipped, end = False, p.xy
        if abs(v) > 0:
            res = self.navigable.try_step(p.xy, target, slide=self.robot.slide, discs=self._human_discs())
            clipped, end = res.clipped, res.end
        dist = float(np.linalg.norm(end - p.xy))
        self.pose = Pose2D(float(end[0]), float(end[1]), wrap_angle(p.yaw + w * dt))
        self.sim_time += dt
        self._move_head(dt)
        self._advance_people()
        self._sync()
        return MoveResult(self.pose, clipped, dist, self.sim_time)

    def set_time(self, t: float) -> None:
        """Jump sim time to ``t`` (s) without moving the robot: people take their pose at ``t``
        (used to render passive clips; reacting people are then as they were at ``t``, or, for a
        later instant, as they would be with the robot standing where it physically is)."""
        self._require_loaded()
        if not (math.isfinite(t) and t >= 0):
            raise InvalidInput("sim_time", t, "seconds >= 0")
        self.sim_time = float(t)
        self._sync()

    def set_pose(self, pose: Pose2D) -> None:
        """Place the robot at a navigable ``pose`` without advancing time (passive reference views)."""
        self._require_loaded()
        if not (pose.is_finite() and self.navigable.is_free(pose.xy)[0]):
            raise InvalidInput("robot_pose", (pose.x, pose.y), f"a free point of scene {self.scene.id!r}")
        self.pose = Pose2D(pose.x, pose.y, wrap_angle(pose.yaw))
        self._sync()

    def set_head(self, pan: float | None = None, tilt: float | None = None) -> None:
        """Put the head at once (rad; clipped to the Fetch joint limits): privileged views. A robot's
        head moves through :meth:`point_head`."""
        if pan is not None:
            self.robot.head_pan = min(max(check_head("head_pan", pan, clip=True), HEAD_PAN_LIMITS[0]), HEAD_PAN_LIMITS[1])
        if tilt is not None:
            self.robot.head_tilt = min(max(check_head("head_tilt", tilt, clip=True), HEAD_TILT_LIMITS[0]),
                                       HEAD_TILT_LIMITS[1])
        if self.scene is not None:
            self._sync()

    def point_head(self, pan: float | None = None, tilt: float | None = None) -> None:
        """Command the head toward ``pan`` / ``tilt`` (rad, within the Fetch limits; None keeps that joint's
        present goal): it moves at :data:`HEAD_SPEED` as sim time advances (at most 0.39 rad per
        lockstep action). Raises :class:`InvalidInput` naming the joint for a value outside its limits."""
        goal = self.head_goal or (self.robot.head_pan, self.robot.head_tilt)
        self.head_goal = (goal[0] if pan is None else check_head("head_pan", pan),
                          goal[1] if tilt is None else check_head("head_tilt", tilt))

    def _move_head(self, dt: float) -> None:
        """Advance the head ``dt`` s toward :attr:`head_goal` at :data:`HEAD_SPEED`."""
        if self.head_goal is None:
            return
        step, r = HEAD_SPEED * dt, self.robot

        def toward(now: float, goal: float) -> float:
            return goal if abs(goal - now) <= step else now + math.copysign(step, goal - now)

        r.head_pan, r.head_tilt = toward(r.head_pan, self.head_goal[0]), toward(r.head_tilt, self.head_goal[1])
        if (r.head_pan, r.head_tilt) == self.head_goal:
            self.head_goal = None

    def head_camera_pose(self) -> Transform:
        """Head camera optical frame in ``map``."""
        return Transform.from_pose2d(self.pose).compose(self.link_transforms()[OPTICAL_FRAME])

    def _require_loaded(self) -> None:
        if self.scene is None or self.navigable is None:
            raise RuntimeError("no world is loaded: call load() first")

    def close(self) -> None:
        """Release rendering resources."""
