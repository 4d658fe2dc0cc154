"""The passive observation settings and the ground truth they need (privileged; docs/protocol.md §5).

From a dataset episode: its people (:func:`placements`, motions loaded), the robot's start pose, the
target's body track over the clip, and the views of P-Init (camera fixed at the start), P-Ref (the
reference observer's trajectory) and P-Mon (the room's monitor camera), all at the clip's times.
:func:`visible_fraction` measures how much of the target a view shows (evaluation only). Nothing
here reaches a policy: the active setting sees only :class:`~affectsim_core.observation.EpisodeInfo`
(:func:`episode_info`) and its sensors.
"""

from __future__ import annotations

import math

import numpy as np

from affectsim_bridge.backends.base import HumanPlacement, SimulatorBackend
from affectsim_bridge.humans.skeleton import forward_kinematics
from affectsim_bridge.views import View, render_views
from affectsim_core.camera import CameraIntrinsics
from affectsim_core.clips import Clip
from affectsim_core.episode import Episode
from affectsim_core.geometry import Pose2D, Transform, look_at_rotation
from affectsim_core.observation import EpisodeInfo
from affectsim_core.ros.topics import OPTICAL_FRAME
from affectsim_eval.episode.reference import BodyTrack, ReferencePlan, plan_reference, view_quality


# ------------------------------------------------------------------------------ the episode's world
def placements(ep: Episode, load_motion) -> list[HumanPlacement]:
    """The episode's people (privileged), motions loaded with ``load_motion(motion_id)``."""
    return [HumanPlacement(h.role, h.x, h.y, h.yaw, is_target=h.role == "target", motion=load_motion(h.motion_id),
                           phase=h.phase) for h in ep.humans]


def episode_info(ep: Episode, nav, resolution: float = 0.05) -> EpisodeInfo:
    """What a policy may know of an episode: map, start pose and (dyadic) the target's clothing."""
    grid, origin = nav.occupancy_grid(resolution)
    start = ep.start
    return EpisodeInfo.make(grid, origin, resolution, (start.x, start.y, start.yaw),
                            nav.radius, ep.target_description or None)


def body_track(backend: SimulatorBackend, times: np.ndarray) -> BodyTrack:
    """Ground-truth geometry of ``backend``'s target over ``times`` (privileged; for P-Ref and
    visibility): the scripted motion, or, for reactive people, the motion with its reaction."""
    k = next(i for i, p in enumerate(backend.humans) if p.is_target)
    body = backend.humans[k].body_shape()
    poses = [backend.human_pose(k, float(t)) for t in times]
    pos = np.stack([p[0] for p in poses])
    rot = np.stack([p[1] for p in poses])
    q = np.stack([p[2] for p in poses])
    pts, _ = forward_kinematics(body.height, pos, rot, q, body.joint_offsets())
    return BodyTrack(np.asarray(times, float), pts, pos[:, :2], rot[:, 0])


def visible_fraction(backend: SimulatorBackend, times: np.ndarray, camera_poses: np.ndarray,
                     intrinsics: CameraIntrinsics | None = None) -> float:
    """Mean visible-body fraction of the target in views taken at ``times`` from ``camera_poses``
    (N, 4, 4 optical frames in map) with ``intrinsics`` (default the head camera's): ground truth of
    ``backend``'s world, for evaluation only."""
    track = body_track(backend, np.asarray(times, float))
    k = intrinsics or backend.head_intrinsics
    return float(np.mean([view_quality(track.points[n], camera_poses[n], k, backend.line_of_sight)[0]
                          for n in range(len(times))]))


# ------------------------------------------------------------------------------ views of the three settings
def p_init_views(start: Pose2D, tilt: float, times: np.ndarray) -> list[View]:
    """Camera fixed at the robot's initial head-camera pose."""
    return [View(float(t), start, tilt) for t in times]


def p_mon_views(scene, start: Pose2D, tilt: float, room_id: str, times: np.ndarray) -> list[View]:
    """The room's monitor camera, with its own field of view at the head camera's resolution (a wide
    surveillance lens: the scenes declare 65 deg, the head camera has 46.8)."""
    room = next((r for r in scene.rooms if r.id == room_id), None)
    if room is None or room.monitor is None:
        raise ValueError(f"monitor_room={room_id!r} is invalid; expected a room of scene {scene.id!r} with a monitor")
    pos = np.asarray(room.monitor.position, float)
    cam = Transform(look_at_rotation(pos, np.asarray(room.monitor.look_at, float)), pos)
    return [View(float(t), start, tilt, cam, room.monitor.vfov) for t in times]


def p_ref_views(backend: SimulatorBackend, times: np.ndarray,
                render: np.ndarray | None = None) -> tuple[list[View], ReferencePlan]:
    """The reference observer's trajectory, planned over all clip ``times`` (privileged geometry of
    ``backend``: navigable space, line of sight, head height) and viewed at the indices ``render``
    (default all) from the robot's own head camera: the base stands at the planned point facing
    the body, the head tilts to centre it."""
    head = backend.link_transforms()[OPTICAL_FRAME].translation
    track = body_track(backend, times)
    plan = plan_reference(track, backend.navigable, backend.line_of_sight, float(head[2]), backend.head_intrinsics)
    views = []
    for n in (np.arange(len(times)) if render is None else np.asarray(render)):
        centre = track.points[n].mean(0)
        base = plan.base[n]
        yaw = math.atan2(centre[1] - base[1], centre[0] - base[0])
        horiz = max(0.3, float(np.hypot(*(centre[:2] - base))))
        views.append(View(float(times[n]), Pose2D(float(base[0]), float(base[1]), yaw),
                          math.atan2(float(head[2]) - float(centre[2]), horiz)))
    return views, plan


def monitor_room(ep: Episode, scene) -> str:
    """The room whose monitor films the episode: the dataset's choice, else the target's room."""
    return ep.monitor_room or scene.room_at((ep.target.x, ep.target.y)).id


def passive_views(ep: Episode, backend: SimulatorBackend, scene, full: np.ndarray,
                  render: np.ndarray) -> tuple[dict[str, list[View]], ReferencePlan]:
    """The views of P-Init, P-Ref and P-Mon at the clip frames ``full[render]`` (``full``: every
    full-rate frame time; P-Ref plans over all of them) for a ``backend`` loaded with the episode."""
    start, tilt = ep.start, backend.robot.head_tilt
    ref, plan = p_ref_views(backend, full, render)
    return {"p_init": p_init_views(start, tilt, full[render]), "p_ref": ref,
            "p_mon": p_mon_views(scene, start, tilt, monitor_room(ep, scene), full[render])}, plan


# ------------------------------------------------------------------------------ P-Ref clips (training data, benches)
def p_ref_clip(backend: SimulatorBackend, times: np.ndarray,
               render: np.ndarray | None = None) -> tuple[Clip, ReferencePlan]:
    """P-Ref's frames at ``times[render]`` (default all) as a clip, and the reference plan."""
    views, plan = p_ref_views(backend, times, render)
    frames, poses = render_views(backend, views)
    return Clip("p_ref", np.array([v.time for v in views]), frames, poses), plan
