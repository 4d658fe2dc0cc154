"""The bridge over ROS as a :class:`~affectsim_nav.executor.World` for the nav node.

Observations come from the robot's own topics only, exactly as on the real Fetch:
``/head_camera/rgb/image_raw``, ``/head_camera/depth_registered/image_raw`` (+ camera_info),
``/tf`` and ``/tf_static`` (``map -> odom -> base_link -> ... -> head_camera_rgb_optical_frame``)
and the latched ``/map``. Lockstep actions go through ``/affectsim/apply_action``; every wait
has a timeout and raises ``TimeoutError`` naming what did not arrive.
"""

from __future__ import annotations

import math
import time
from typing import Callable

import numpy as np

from affectsim_core.actions import Action, MoveResult
from affectsim_core.geometry import Pose2D
from affectsim_core.observation import EpisodeInfo, Observation
from affectsim_core.ros.bridge_client import BridgeClient
from affectsim_core.ros.conversions import from_time
from affectsim_core.ros.sensors import observation_from_msgs
from affectsim_core.ros.topics import SERVICES

TOPICS = ("rgb", "depth", "rgb_info", "tf", "tf_static", "map")


class RosWorld:
    """Lockstep world over the bridge's service and topics (see module docstring)."""

    def __init__(self, client: BridgeClient, timeout: float = 30.0) -> None:
        self.client = client
        self.timeout = timeout
        newest = client.wait_for("rgb", timeout=timeout)  # the state the episode starts from
        self.stamp = from_time(newest.header.stamp)

    def apply(self, action: Action) -> MoveResult:
        res = self.client.apply(int(action), self.timeout)
        if not res.success:
            raise RuntimeError(f"{SERVICES['apply_action']} refused {Action(action).name}: {res.message}")
        self.stamp = from_time(res.stamp)
        p = res.pose
        return MoveResult(Pose2D(p.x, p.y, p.theta), bool(res.clipped), float(res.distance_moved), self.stamp)

    def observe(self, step: int) -> Observation:
        """The camera frame, depth and TF stamped with the current sim time."""
        c, t = self.client, self.stamp
        match = lambda m: abs(from_time(m.header.stamp) - t) < 1e-6  # noqa: E731
        rgb = c.wait_for("rgb", match, self.timeout)
        depth = c.wait_for("depth", match, self.timeout)
        info = c.wait_for("rgb_info", match, self.timeout)
        dyn = c.wait_for("tf", lambda m: bool(m.transforms) and abs(from_time(m.transforms[0].header.stamp) - t) < 1e-6,
                         self.timeout)
        return observation_from_msgs(rgb, depth, info, c.wait_for("tf_static", timeout=self.timeout), dyn, step)

    def wait_moved(self, prev: Observation, ex, stop: Callable[[], bool]) -> Observation | None:
        """External motion (Nav2): the next frame at least one 0.25 s step after ``prev``, recorded as one
        step of the executor (trajectory, path length, budget); None once ``stop()`` (the navigator finished)."""
        deadline = time.monotonic() + self.timeout
        later = lambda m: from_time(m.header.stamp) >= prev.stamp + 0.25 - 1e-6  # noqa: E731
        while True:
            try:
                newer = self.client.wait_for("rgb", later, 0.1)
                break
            except TimeoutError:
                if stop():
                    return None
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no camera frame after t={prev.stamp:.2f} s within {self.timeout:.0f} s while "
                                       "the external navigator was moving") from None
        self.stamp = from_time(newer.header.stamp)
        obs = self.observe(prev.step + 1)
        ex.record_external(obs.pose, obs.stamp)
        return obs

    def episode_info(self, episode_id: str, target_description: str = "", robot_radius: float = 0.3) -> EpisodeInfo:
        """Non-privileged episode info: the latched /map and the current pose as the start."""
        grid = self.client.wait_for("map", timeout=self.timeout)
        g = grid.info
        yaw = math.atan2(2 * (g.origin.orientation.w * g.origin.orientation.z), 1 - 2 * g.origin.orientation.z ** 2)
        if abs(yaw) > 1e-9:
            raise ValueError(f"/map origin yaw={yaw!r} is invalid; expected an axis-aligned map (yaw 0)")
        occ = np.array(grid.data, np.int8).reshape(g.height, g.width)
        start = self.observe(0).pose
        resolution = round(float(g.resolution), 6)  # MapMetaData.resolution is float32: 0.05 arrives as 0.0500000007
        return EpisodeInfo.make(episode_id, occ, (g.origin.position.x, g.origin.position.y), resolution, start,
                                robot_radius, target_description or None)
