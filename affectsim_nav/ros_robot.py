"""The robot over ROS as a :class:`~affectsim_nav.executor.Robot` for the nav node.

Observations come from the robot's own topics only, exactly as on the real Fetch:
``/head_camera/rgb/image_raw``, ``/head_camera/depth_registered/image_raw`` (+ camera_info),
``/tf`` and ``/tf_static`` (``map -> odom -> base_link -> ... -> head_camera_rgb_optical_frame``)
and the latched ``/map``; every wait has a timeout and raises ``TimeoutError`` naming what did
not arrive. Two ways to act (the nav node's ``execution`` parameter):

- :class:`LockstepRobot` (``lockstep``): each primitive action, with the head's tilt when the policy
  points it, goes through the bridge's ``/affectsim/apply_action`` (simulation only);
- :class:`CmdVelRobot` (``cmd_vel``, ``nav2``): each primitive action is driven in continuous time through
  ``/cmd_vel`` from ``/odom`` and ``/base_scan`` (:mod:`affectsim_nav.base_control`); it calls no
  ``/affectsim/*`` service and reads no ``/affectsim/*`` topic, so it runs unchanged on a robot.
  After a handoff it samples the clip from the camera stream at the protocol's 4 Hz times. Head
  commands go out at once on ``/head_controller/joint_trajectory`` (the nav node's publisher).
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Callable

import numpy as np

from affectsim_core.actions import Action, MoveResult
from affectsim_core.geometry import Pose2D
from affectsim_core.observation import EpisodeInfo, Observation
from affectsim_core.protocol import STEP_SECONDS
from affectsim_core.ros.bridge_client import BridgeClient
from affectsim_core.ros.conversions import from_time
from affectsim_core.ros.sensors import observation_from_msgs
from affectsim_core.ros.topics import OPTICAL_FRAME, SERVICES
from affectsim_core.sync import SYNC_SLOP_S
from affectsim_core.tf_buffer import TransformError
from affectsim_nav.base_control import BaseLimits, Ending, PrimitiveController, free_ahead_points

TOPICS = ("rgb", "depth", "rgb_info", "tf", "tf_static", "map")
CMD_VEL_TOPICS = (*TOPICS, "odom", "scan")
POLL_S = 1.0  # s a start frame's depth and TF are waited for before a newer frame is tried
ODOM_TIMEOUT_S = 0.3  # s without odometry while driving: the base is stopped and the goal aborts


class OdometryLost(RuntimeError):
    """Odometry stopped while the base was driven (the base has been told to stop)."""


def _stamp(m) -> float:
    return from_time(m.header.stamp)


class LockstepRobot:
    """Lockstep robot over the bridge's service and topics (see module docstring)."""

    def __init__(self, client: BridgeClient, timeout: float = 30.0, slop: float = SYNC_SLOP_S) -> None:
        self.client = client
        self.timeout, self.slop = timeout, slop
        self.stamp = current_frame(client, timeout, slop=slop).stamp  # the state the episode starts from
        self._head: float | None = None  # tilt (rad) to send with the next action

    def point_head(self, tilt: float) -> None:
        """The head's tilt goes with the next action's request (the bridge moves it during that step)."""
        self._head = float(tilt)

    def apply(self, action: Action) -> MoveResult:
        res = self.client.apply(int(action), self.timeout, head_tilt=self._head)
        self._head = None
        if not res.success:
            raise RuntimeError(f"{SERVICES['apply_action']} refused {Action(action).name}: {res.message}")
        self.stamp = from_time(res.stamp)
        p = res.pose
        return MoveResult(Pose2D(p.x, p.y, p.theta), bool(res.clipped), float(res.distance_moved), self.stamp)

    def observe(self, step: int) -> Observation:
        """The camera frame, depth and TF stamped with the current sim time."""
        rgb = self.client.wait_for("rgb", lambda m: abs(_stamp(m) - self.stamp) < 1e-6, self.timeout)
        return frame_observation(self.client, rgb, step, self.timeout, self.slop)

    def wait_moved(self, prev: Observation, ex, stop: Callable[[], bool]) -> Observation | None:
        """External motion (Nav2): the next frame at least one 0.25 s step after ``prev``, recorded as one
        step of the executor (trajectory, path length, budget); None once ``stop()`` (the navigator finished)."""
        deadline = time.monotonic() + self.timeout
        later = lambda m: _stamp(m) >= prev.stamp + STEP_SECONDS - 1e-6  # noqa: E731
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
        self.stamp = _stamp(newer)
        obs = self.observe(prev.step + 1)
        ex.record_external(obs.pose, obs.stamp)
        return obs

    def episode_info(self, target_description: str = "", robot_radius: float = 0.3) -> EpisodeInfo:
        """Non-privileged episode info: the latched /map and the current pose as the start."""
        grid = self.client.wait_for("map", timeout=self.timeout)
        return map_info(grid, self.observe(0).pose, robot_radius, target_description)


def map_info(grid, start: tuple[float, float, float], robot_radius: float = 0.3,
             target_description: str = "") -> EpisodeInfo:
    """:class:`EpisodeInfo` from a ``nav_msgs/OccupancyGrid`` (axis-aligned) and the start pose (map)."""
    g = grid.info
    yaw = math.atan2(2 * (g.origin.orientation.w * g.origin.orientation.z), 1 - 2 * g.origin.orientation.z ** 2)
    if abs(yaw) > 1e-9:
        raise ValueError(f"/map origin yaw={yaw!r} is invalid; expected an axis-aligned map (yaw 0)")
    occ = np.array(grid.data, np.int8).reshape(g.height, g.width)
    resolution = round(float(g.resolution), 6)  # MapMetaData.resolution is float32: 0.05 arrives as 0.0500000007
    return EpisodeInfo.make(occ, (g.origin.position.x, g.origin.position.y), resolution, start,
                            robot_radius, target_description or None)


def current_frame(client: BridgeClient, timeout: float, after: float = -math.inf,
                  slop: float = SYNC_SLOP_S) -> Observation:
    """The observation of the newest camera frame (stamped at or after ``after``) whose depth and TF
    are there. A frame whose TF never comes (received just before the bridge loaded a new world, or
    its TF overwritten unread in the subscription's history on a loaded machine) gives way to the
    next frame received."""
    deadline = time.monotonic() + timeout
    while True:
        rgb = client.wait_for("rgb", lambda m: _stamp(m) >= after - 1e-6, max(0.0, deadline - time.monotonic()))
        try:
            return frame_observation(client, rgb, 0, min(POLL_S, max(0.0, deadline - time.monotonic())), slop)
        except (TimeoutError, TransformError):
            if time.monotonic() >= deadline:
                raise


def frame_observation(client: BridgeClient, rgb, step: int, timeout: float, slop: float = SYNC_SLOP_S) -> Observation:
    """The observation of camera frame ``rgb``: the depth image and camera info stamped nearest it within
    ``slop`` s (approximate time sync: real drivers' stamps differ by a few ms), and the camera's and
    base's poses in ``map`` at its stamp from the client's TF buffer (waiting up to ``timeout`` s for
    transforms at that stamp: a robot's transforms arrive late and at their own rates)."""
    t = _stamp(rgb)
    depth = client.wait_near("depth", t, slop, timeout)
    info = client.wait_near("rgb_info", t, slop, timeout)
    return observation_from_msgs(rgb, depth, info, client.tf, step, timeout)


class CmdVelRobot(LockstepRobot):
    """Primitive actions driven through ``/cmd_vel`` in continuous time (see module docstring); external
    motion (Nav2) is followed as in :class:`LockstepRobot`, from the camera stream.

    ``limits``: the base's velocity, acceleration, tolerance, timeout and safety-stop settings;
    ``robot_radius`` (m): the base's front edge and the half-width of the corridor the laser must
    see free ahead of a FORWARD move."""

    def __init__(self, client: BridgeClient, publish_cmd: Callable[[float, float], None], limits: BaseLimits,
                 robot_radius: float = 0.3, timeout: float = 30.0, odom_timeout: float = ODOM_TIMEOUT_S,
                 slop: float = SYNC_SLOP_S, interrupted: Callable[[], bool] = lambda: False,
                 publish_head: Callable[[float], None] = lambda tilt: None) -> None:
        self.client, self.publish_cmd, self.limits = client, publish_cmd, limits
        self.publish_head = publish_head
        self.radius, self.timeout, self.odom_timeout, self.slop = robot_radius, timeout, odom_timeout, slop
        self.interrupted = interrupted  # checked at every odometry message: a cancel or a shutdown stops the base
        odom = client.wait_for("odom", timeout=timeout)  # no odometry: refused here, naming the topic
        self._last: Observation | None = current_frame(client, timeout, after=_stamp(odom), slop=slop)
        self.stamp = self._last.stamp
        client.wait_for("scan", timeout=timeout)
        self._clip_next: float | None = None  # protocol time (s) of the next clip frame once a clip runs
        self._clip: list[Observation] = []

    def point_head(self, tilt: float) -> None:
        """The head command goes out at once, to the robot's head controller."""
        self.publish_head(tilt)

    def _odom(self, after: float):
        """The next odometry message; none within ``odom_timeout``: the base is stopped at once, then
        :class:`OdometryLost` (the watchdog a base without one needs)."""
        try:
            return self.client.wait_for("odom", lambda m: _stamp(m) > after + 1e-9, self.odom_timeout)
        except TimeoutError:
            self.publish_cmd(0.0, 0.0)
            self.publish_cmd(0.0, 0.0)
            raise OdometryLost(f"no odometry on {self.client.topic('odom')} after t={after:.3f} s within "
                               f"{self.odom_timeout:.2f} s (odom_timeout); the base was stopped") from None

    def _free_ahead(self, t: float, pose: Pose2D) -> float:
        """Free distance (m) ahead of the base from the newest scan, less the travel since it was taken;
        0 (blocked) without a scan, or once that travel reaches the safety distance."""
        with self.client.lock:
            scan = self.client.msgs["scan"][-1] if self.client.msgs["scan"] else None
        if scan is None:
            return 0.0
        ts = _stamp(scan)
        try:
            then = self.client.tf.lookup("odom", "base_link", ts)
            mount = self.client.tf.lookup("base_link", scan.header.frame_id, ts)
        except TransformError:
            return 0.0  # the scan cannot be placed: it clears nothing
        dx, dy = pose.x - then.translation[0], pose.y - then.translation[1]
        travel = math.hypot(dx, dy)
        if travel >= self.limits.safety_distance:
            return 0.0
        r = np.asarray(scan.ranges, float)
        a = scan.angle_min + scan.angle_increment * np.arange(len(r))
        ok = np.isfinite(r) & (r > scan.range_min) & (r < scan.range_max)
        pts = mount.apply(np.stack([r[ok] * np.cos(a[ok]), r[ok] * np.sin(a[ok]), np.zeros(int(ok.sum()))], 1))
        return free_ahead_points(pts[:, :2], self.radius) - travel

    def apply(self, action: Action) -> MoveResult:
        """Drive one primitive action to its end (done, blocked, timeout, interrupted); the base is told
        to stop (zero, twice) whatever the end, an exception included."""
        odom = self.client.wait_for("odom", timeout=self.timeout)
        start, t = odom_pose(odom), _stamp(odom)
        ctrl = PrimitiveController(action, start, t, self.limits)
        try:
            while True:
                odom = self._odom(t)
                t, pose = _stamp(odom), odom_pose(odom)
                if self.interrupted():
                    ending = Ending.BLOCKED
                    break
                tw = odom.twist.twist
                v, w, ending = ctrl.update(pose, t, self._free_ahead(t, pose), velocity=(tw.linear.x, tw.angular.z))
                self.publish_cmd(v, w)
                self._sample_clip(wait=False)
                if ending is not None:
                    break
        finally:
            self.publish_cmd(0.0, 0.0)
            self.publish_cmd(0.0, 0.0)  # twice: a lossy link loses one
        self._last = current_frame(self.client, self.timeout, after=t, slop=self.slop)
        self.stamp = self._last.stamp
        self._sample_clip()
        moved = math.hypot(pose.x - start.x, pose.y - start.y)
        clipped = ending != Ending.DONE and Action(int(action)) != Action.STOP
        return MoveResult(Pose2D(*self._last.pose), clipped, moved, self.stamp, ending.value)

    def observe(self, step: int) -> Observation:
        """The first camera frame at or after the last action's end (the start: the newest frame)."""
        self._sample_clip()
        if self._last is None or self._last.stamp != self.stamp:
            self._last = current_frame(self.client, self.timeout, after=self.stamp, slop=self.slop)
        return replace(self._last, step=step)

    # ------------------------------------------------------------------ the clip, from the stream
    def start_clip(self, t0: float) -> None:
        """Collect clip frames from the camera stream at ``t0`` + k x 0.25 s from now on."""
        self._clip_next, self._clip = t0, []

    def clip_frames(self) -> list[Observation]:
        """The clip frames sampled since the last call (the first frame at or after each protocol time)."""
        self._sample_clip()
        out, self._clip = self._clip, []
        return out

    def _sample_clip(self, wait: bool = True) -> None:
        """Take the due clip frames from the stream; ``wait=False`` (inside the control loop): only
        frames whose transforms are already there, the others at a later call."""
        if self._clip_next is None:
            return
        with self.client.lock:
            frames = [m for m in self.client.msgs["rgb"] if _stamp(m) >= self._clip_next - 1e-6]
        for m in frames:
            if _stamp(m) >= self._clip_next - 1e-6:
                if not wait and not self.client.tf.can_transform("map", OPTICAL_FRAME, _stamp(m)):
                    return
                try:
                    obs = frame_observation(self.client, m, -1, POLL_S if wait else 0.0, self.slop)
                except (TimeoutError, TransformError):  # its depth or TF never came: the next frame serves
                    continue
                self._clip.append(obs)
                self._clip_next += STEP_SECONDS * (1 + math.floor((_stamp(m) - self._clip_next) / STEP_SECONDS + 1e-9))


def odom_pose(msg) -> Pose2D:
    """The base's pose (m, rad) in the ``odom`` frame from a ``nav_msgs/Odometry`` message."""
    p, q = msg.pose.pose.position, msg.pose.pose.orientation
    return Pose2D(p.x, p.y, math.atan2(2 * (q.w * q.z + q.x * q.y), 1 - 2 * (q.y ** 2 + q.z ** 2)))
