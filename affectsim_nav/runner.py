"""Offline episode runner: the four observation settings of one episode, in-process.

The active loop (:mod:`affectsim_nav.active`) is the one the nav node runs too, over a different
:class:`~affectsim_nav.executor.World`; the privileged side (placing people, P-Ref's body
track, P-Mon's camera) stays here and never reaches a policy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from affectsim_bridge.backends.base import Action, HumanPlacement, MoveResult, SimulatorBackend
from affectsim_bridge.humans.skeleton import forward_kinematics
from affectsim_bridge.renderer import mujoco
from affectsim_nav.active import ActiveResult, run_active
from affectsim_nav.clips import SETTINGS, Clip, clip_steps, sample_indices
from affectsim_nav.policy import Policy
from affectsim_nav.reference import BodyTrack, ReferencePlan, plan_reference, view_quality
from affectsim_nav.timing import NULL, StageTimes
from affectsim_ros.core.geometry import Pose2D, Transform, look_at_rotation, yaw_from_quat
from affectsim_ros.core.observation import EpisodeInfo, Observation


# ------------------------------------------------------------------------------ worlds
def observation_from(rgb, depth, k, camera: Transform, pose: Pose2D, stamp: float, step: int) -> Observation:
    m = np.eye(4)
    m[:3, :3], m[:3, 3] = camera.rotation, camera.translation
    return Observation.make(rgb, depth, (k.fx, k.fy, k.cx, k.cy), m, (pose.x, pose.y, pose.yaw), stamp, step)


class OfflineWorld:
    """The in-process simulator as a :class:`World` (lockstep)."""

    def __init__(self, backend: SimulatorBackend, times: StageTimes = NULL) -> None:
        self.backend = backend
        self.times = times

    def apply(self, action: Action) -> MoveResult:
        return self.backend.apply_action(action)

    def observe(self, step: int) -> Observation:
        with self.times("render"):
            f = self.backend.render_head_camera()
        b = self.backend
        return observation_from(f.rgb, f.depth, f.intrinsics, f.pose, b.pose, b.sim_time, step)


# ------------------------------------------------------------------------------ passive settings
def body_track(people: list[HumanPlacement], times: np.ndarray) -> BodyTrack:
    """Ground-truth geometry of the target over ``times`` (privileged; for P-Ref only)."""
    target = next(p for p in people if p.is_target)
    m = target.motion
    poses = [target.pose_at(float(t)) for t in times]
    pos = np.stack([p[0] for p in poses])
    rot = np.stack([p[1] for p in poses])
    q = np.stack([p[2] for p in poses])
    pts, _ = forward_kinematics(m.body.height, pos, rot, q, m.body.joint_offsets())
    return BodyTrack(np.asarray(times, float), pts, pos[:, :2], rot[:, 0])


class RayCaster:
    """Straight-line visibility through static scene geometry (people and robot excluded)."""

    def __init__(self, backend) -> None:
        self.backend = backend
        self.group = np.array([1, 0, 0, 0, 0, 0], np.uint8)

    def __call__(self, cam: np.ndarray, pts: np.ndarray) -> np.ndarray:
        v = pts - cam
        dist = np.linalg.norm(v, axis=1)
        n = len(pts)
        hit, gid = np.empty(n), np.empty(n, np.int32)
        mujoco.mj_multiRay(self.backend.model, self.backend.data, np.asarray(cam, float), (v / dist[:, None]).ravel(),
                           self.group, 1, -1, gid, hit, None, n, float(dist.max()) + 1.0)
        return (hit < 0) | (hit >= dist - 0.03)


@dataclass(frozen=True)
class View:
    """One privileged frame of a passive setting: sim ``time`` (s), robot base ``pose`` (map),
    head ``tilt`` (rad, + down) and an explicit optical-frame ``camera`` (map; the room monitor)
    or None for the robot's head camera. The bridge's RenderViews service renders the same specs."""

    time: float
    pose: Pose2D
    tilt: float
    camera: Transform | None = None


def render_views(backend: SimulatorBackend, views: list[View]) -> tuple[list[np.ndarray], np.ndarray]:
    """RGB frames (H, W, 3) and optical-frame poses (N, 4, 4, map) of ``views``; the robot pose,
    head tilt and sim time are restored afterwards."""
    pose0, tilt0, t0 = backend.pose, backend.robot.head_tilt, backend.sim_time
    frames, poses = [], []
    try:
        for v in views:
            backend.set_head(tilt=v.tilt)
            backend.set_pose(v.pose)
            backend.set_time(v.time)
            f = (backend.render_head_camera() if v.camera is None
                 else backend.render_camera(v.camera, backend.head_intrinsics))
            frames.append(f.rgb)
            poses.append(pose_matrix(f.pose if v.camera is None else v.camera))
    finally:
        backend.set_head(tilt=tilt0)
        backend.set_pose(pose0)
        backend.set_time(t0)
    return frames, np.stack(poses) if poses else np.zeros((0, 4, 4))


def p_init_views(start: Pose2D, tilt: float, times: np.ndarray) -> list[View]:
    """Camera fixed at the robot's initial head-camera pose."""
    return [View(float(t), start, tilt) for t in times]


def p_mon_views(scene, start: Pose2D, tilt: float, room_id: str, times: np.ndarray) -> list[View]:
    """The room's monitor camera (head-camera intrinsics: every setting shares them)."""
    room = next((r for r in scene.rooms if r.id == room_id), None)
    if room is None or room.monitor is None:
        raise ValueError(f"monitor_room={room_id!r} is invalid; expected a room of scene {scene.id!r} with a monitor")
    pos = np.asarray(room.monitor.position, float)
    cam = Transform(look_at_rotation(pos, np.asarray(room.monitor.look_at, float)), pos)
    return [View(float(t), start, tilt, cam) for t in times]


def p_ref_views(backend, people: list[HumanPlacement], times: np.ndarray,
                render: np.ndarray | None = None) -> tuple[list[View], ReferencePlan]:
    """The reference observer's trajectory, planned over all clip ``times`` (privileged geometry of
    ``backend``: navigable space, ray casts, head height) and viewed at the indices ``render``
    (default all) from the robot's own head camera: the base stands at the planned point facing
    the body, the head tilts to centre it."""
    head = backend.link_transforms()["head_camera_rgb_optical_frame"].translation
    track = body_track(people, times)
    plan = plan_reference(track, backend.navigable, RayCaster(backend), float(head[2]), backend.head_intrinsics)
    views = []
    for n in (np.arange(len(times)) if render is None else np.asarray(render)):
        centre = track.points[n].mean(0)
        base = plan.base[n]
        yaw = math.atan2(centre[1] - base[1], centre[0] - base[0])
        horiz = max(0.3, float(np.hypot(*(centre[:2] - base))))
        views.append(View(float(times[n]), Pose2D(float(base[0]), float(base[1]), yaw),
                          math.atan2(float(head[2]) - float(centre[2]), horiz)))
    return views, plan


def clip_of(setting: str, views: list[View], rendered: tuple[list[np.ndarray], np.ndarray], **meta) -> Clip:
    frames, poses = rendered
    return Clip(setting, np.array([v.time for v in views]), frames, poses, meta=meta)


def p_init_clip(backend: SimulatorBackend, start: Pose2D, times: np.ndarray) -> Clip:
    views = p_init_views(start, backend.robot.head_tilt, times)
    return clip_of("p_init", views, render_views(backend, views))


def p_mon_clip(backend, start: Pose2D, room_id: str, times: np.ndarray) -> Clip:
    views = p_mon_views(backend.scene, start, backend.robot.head_tilt, room_id, times)
    return clip_of("p_mon", views, render_views(backend, views))


def p_ref_clip(backend, people: list[HumanPlacement], start: Pose2D, times: np.ndarray,
               render: np.ndarray | None = None) -> tuple[Clip, ReferencePlan]:
    views, plan = p_ref_views(backend, people, times, render)
    clip = clip_of("p_ref", views, render_views(backend, views), frame=plan.frame, distance=plan.distance,
                   angle=plan.angle)
    return clip, plan


def pose_matrix(t: Transform) -> np.ndarray:
    """4x4 homogeneous matrix of a transform (rotation, translation in metres)."""
    m = np.eye(4)
    m[:3, :3], m[:3, 3] = t.rotation, t.translation
    return m


def clip_times(motion_duration: float) -> np.ndarray:
    """Sim times (s) of a passive clip's full-rate frames: from 0, one per 0.25 s, twice the motion."""
    return np.arange(clip_steps(motion_duration)) * 0.25


# ------------------------------------------------------------------------------ episodes
def placements(ep: dict, load_motion) -> list[HumanPlacement]:
    """The episode's people (privileged), motions loaded with ``load_motion(motion_id)``."""
    return [HumanPlacement(h["role"], h["x"], h["y"], h["yaw"], is_target=h["role"] == "target",
                           motion=load_motion(h["motion_id"]), phase=h["phase"]) for h in ep["humans"]]


def start_pose(ep: dict) -> Pose2D:
    return Pose2D(ep["start_position"][0], ep["start_position"][1], yaw_from_quat(*ep["start_rotation"]))


def episode_info(ep: dict, nav, resolution: float = 0.05) -> EpisodeInfo:
    """What a policy may know of an episode: map, start pose and (dyadic) the target's clothing."""
    grid, origin = nav.occupancy_grid(resolution)
    start = start_pose(ep)
    desc = next(h["description"] for h in ep["humans"] if h["role"] == "target") if len(ep["humans"]) > 1 else None
    return EpisodeInfo.make(ep["episode_id"], grid, origin, resolution, (start.x, start.y, start.yaw),
                            nav.radius, desc)


@dataclass
class EpisodeObservations:
    """Every setting's clip of one episode (frames sampled identically: ``Clip.sampled()`` gives the
    same 8 clip-relative instants everywhere). ``clips["a_obs"]`` is the paired P-Init clip marked
    ``fallback`` when the policy made no stable handoff; ``visible`` is the mean visible-body
    fraction of the target over each clip's 8 sampled frames (ground truth, for evaluation only)."""

    clips: dict[str, Clip]
    active: ActiveResult | None
    reference: ReferencePlan | None
    visible: dict[str, float]


def observe_episode(ep: dict, backend: SimulatorBackend, scene, load_motion, policy: Policy | None,
                    settings: tuple[str, ...] = SETTINGS, max_actions: int = 480, max_planner_calls: int = 80,
                    full_rate: bool = False, times: StageTimes = NULL) -> EpisodeObservations:
    """Render the passive settings and run the active one for an episode. Passive clips hold the 8
    sampled frames (all full-rate frames with ``full_rate``); A-Obs keeps every frame it acted on."""
    unknown = set(settings) - set(SETTINGS)
    if unknown:
        raise ValueError(f"settings={sorted(unknown)} are invalid; expected a subset of {SETTINGS}")
    people = placements(ep, load_motion)
    start = start_pose(ep)
    target = next(p for p in people if p.is_target)
    full = clip_times(target.motion.duration)
    render = np.arange(len(full)) if full_rate else sample_indices(len(full))
    backend.load(scene, start, tuple(people))
    clips: dict[str, Clip] = {}
    plan = None
    with times("passive"):
        if "p_init" in settings or "a_obs" in settings:
            clips["p_init"] = p_init_clip(backend, start, full[render])
        if "p_ref" in settings:
            clips["p_ref"], plan = p_ref_clip(backend, people, start, full, render)
        if "p_mon" in settings:
            room = ep.get("monitor_room") or scene.room_at((target.x, target.y)).id
            clips["p_mon"] = p_mon_clip(backend, start, room, full[render])
    active = None
    if "a_obs" in settings:
        backend.load(scene, start, tuple(people))  # time and pose back to the episode start
        active = run_active(OfflineWorld(backend, times), episode_info(ep, backend.navigable), policy,
                            len(full), max_actions, max_planner_calls, times=times)
        p = clips["p_init"]
        clips["a_obs"] = active.clip if active.clip is not None else Clip("a_obs", p.times, p.frames, p.camera_poses,
                                                                          fallback=True)
    visible = {}
    for name, clip in clips.items():
        idx = sample_indices(len(clip.frames))
        visible[name] = visible_fraction(backend, people, clip.times[idx], clip.camera_poses[idx])
    return EpisodeObservations(clips, active, plan, visible)


def visible_fraction(backend, people: list[HumanPlacement], times: np.ndarray, camera_poses: np.ndarray) -> float:
    """Mean visible-body fraction of the target in views taken at ``times`` from ``camera_poses``
    (N, 4, 4 optical frames in map): ground truth of ``backend``'s world, for evaluation only."""
    rays = RayCaster(backend)
    track = body_track(people, np.asarray(times, float))
    return float(np.mean([view_quality(track.points[n], camera_poses[n], backend.head_intrinsics, rays)[0]
                          for n in range(len(times))]))
