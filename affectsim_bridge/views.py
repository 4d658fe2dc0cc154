"""Privileged views of the current world, for the passive observation settings (P-Init, P-Ref, P-Mon).

A :class:`View` is a camera specification at a sim time; :func:`render_views` renders a list of them
from a backend and leaves the episode's state as it was. The bridge node's ``RenderViews`` service
and the in-process evaluation call the same function, so both give identical frames.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from affectsim_bridge.backends.base import SimulatorBackend
from affectsim_core.camera import CameraIntrinsics
from affectsim_core.clips import resize
from affectsim_core.geometry import Pose2D, Transform


@dataclass(frozen=True)
class View:
    """One privileged frame: sim ``time`` (s), robot base ``pose`` (map), head ``tilt`` (rad, + down)
    and an explicit optical-frame ``camera`` (map; the room monitor) or None for the robot's head camera;
    ``vfov`` (rad): the explicit camera's vertical field of view at the head camera's resolution (None:
    the head camera's)."""

    time: float
    pose: Pose2D
    tilt: float
    camera: Transform | None = None
    vfov: float | None = None

    def intrinsics(self, head: CameraIntrinsics) -> CameraIntrinsics:
        """The view's pinhole intrinsics, given the head camera's."""
        return head if self.vfov is None else CameraIntrinsics.from_vfov(head.width, head.height, self.vfov)


def render_views(backend: SimulatorBackend, views: list[View],
                 size: int | None = None) -> tuple[list[np.ndarray], np.ndarray]:
    """RGB frames (H, W, 3) uint8 and optical-frame poses (N, 4, 4, map) of ``views``, each frame resized
    to ``size`` x ``size`` as soon as it is rendered when ``size`` is given; the robot pose, head tilt and
    sim time are restored afterwards."""
    pose0, tilt0, t0 = backend.pose, backend.robot.head_tilt, backend.sim_time
    frames, poses = [], []
    try:
        for v in views:
            backend.set_head(tilt=v.tilt)
            backend.set_pose(v.pose)
            backend.set_time(v.time)
            f = (backend.render_head_camera() if v.camera is None
                 else backend.render_camera(v.camera, v.intrinsics(backend.head_intrinsics)))
            frames.append(f.rgb if size is None else resize(f.rgb, size))
            poses.append((f.pose if v.camera is None else v.camera).matrix())
    finally:
        backend.set_head(tilt=tilt0)
        backend.set_pose(pose0)
        backend.set_time(t0)
    return frames, np.stack(poses) if poses else np.zeros((0, 4, 4))
