"""One primitive action executed in continuous time by a velocity-controlled base (``/cmd_vel``).

ROS-free core of the nav node's ``cmd_vel`` execution mode (the adapter is
:class:`~affectsim_nav.ros_world.CmdVelWorld`). A primitive of PROTOCOL.md section 6 (FORWARD
0.25 m, TURN_LEFT / TURN_RIGHT 15 deg, STOP for 0.25 s) becomes a stream of (linear m/s, angular
rad/s) commands computed from the robot's own odometry (``odom`` frame poses and their stamps,
s): a trapezoidal speed profile under velocity and acceleration limits that ends within a
tolerance of the target, a heading hold while driving straight, a safety stop when the base
laser sees an obstacle closer than ``safety_distance`` ahead, and a per-action timeout. An action
that ends before its target (safety stop, no progress, timeout) is *clipped*, as a lockstep move
that navigable space cut short.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

import numpy as np

from affectsim_core.actions import Action
from affectsim_core.errors import InvalidInput
from affectsim_core.geometry import Pose2D, wrap_angle
from affectsim_core.protocol import FORWARD_M, STEP_SECONDS, TURN_RAD


EXECUTIONS = ("lockstep", "cmd_vel", "nav2")  # the nav node's execution modes (see affectsim_nav.nav_node)


class Ending(str, Enum):
    """How a primitive action ended."""

    DONE = "done"  # the target reached within tolerance (STOP: its 0.25 s held)
    BLOCKED = "blocked"  # the safety stop: an obstacle ahead, or no progress while commanded
    TIMEOUT = "timeout"  # the per-action timeout passed first


@dataclass(frozen=True)
class BaseLimits:
    """Velocity, acceleration and tolerance limits of the base (defaults: Fetch-like, below the
    Fetch's 1.0 m/s and its base controller's acceleration limits, as its navigation uses)."""

    max_linear: float = 0.6  # m/s
    max_angular: float = 1.2  # rad/s
    linear_accel: float = 1.0  # m/s^2
    angular_accel: float = 2.5  # rad/s^2
    position_tolerance: float = 0.005  # m
    angle_tolerance: float = math.radians(0.5)  # rad
    action_timeout: float = 4.0  # s of sim / robot time per primitive action
    safety_distance: float = 0.15  # m the base must be able to drive on before it touches what the laser sees
    stall_s: float = 1.0  # s commanded without progress (PROGRESS_M, PROGRESS_RAD): blocked

    BOUNDS = {"max_linear": (0.05, 1.0), "max_angular": (0.1, 3.0), "linear_accel": (0.1, 5.0),
              "angular_accel": (0.1, 10.0), "position_tolerance": (0.001, 0.05),
              "angle_tolerance": (0.001, 0.1), "action_timeout": (0.5, 60.0), "safety_distance": (0.0, 2.0),
              "stall_s": (0.2, 10.0)}

    def __post_init__(self) -> None:
        for name, (lo, hi) in self.BOUNDS.items():
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and lo <= v <= hi):
                raise InvalidInput(name, v, f"a number in [{lo}, {hi}]")


HEADING_GAIN = 2.0  # 1/s: angular command per rad of heading error while driving straight
PROGRESS_M, PROGRESS_RAD = 0.005, 0.01  # progress that resets the stall timer
SIDE_MARGIN_M = 0.05  # m of the footprint's sides where a laser point does not trigger the safety stop


class PrimitiveController:
    """Velocity commands for one primitive action from odometry; call :meth:`update` at every odometry
    message until it returns an :class:`Ending`."""

    def __init__(self, action: Action | int, start: Pose2D, t0: float, limits: BaseLimits = BaseLimits()) -> None:
        self.action, self.start, self.t0, self.lim = Action(int(action)), start, float(t0), limits
        self.cmd = (0.0, 0.0)  # the last command (m/s, rad/s)
        self._t = float(t0)
        self._progress, self._progress_t = 0.0, float(t0)  # best progress so far and when it last grew

    def progress(self, pose: Pose2D) -> float:
        """Distance (m) along the start heading for FORWARD, angle turned (rad, signed toward the turn)
        for a turn, 0 for STOP."""
        if self.action == Action.FORWARD:
            return (pose.x - self.start.x) * math.cos(self.start.yaw) + (pose.y - self.start.y) * math.sin(self.start.yaw)
        if self.action in (Action.TURN_LEFT, Action.TURN_RIGHT):
            sign = 1.0 if self.action == Action.TURN_LEFT else -1.0
            return sign * wrap_angle(pose.yaw - self.start.yaw)
        return 0.0

    def target(self) -> float:
        return {Action.FORWARD: FORWARD_M, Action.TURN_LEFT: TURN_RAD, Action.TURN_RIGHT: TURN_RAD}.get(self.action, 0.0)

    def update(self, pose: Pose2D, t: float, free_ahead: float = math.inf) -> tuple[float, float, Ending | None]:
        """Command (m/s, rad/s) for odometry ``pose`` at time ``t`` (s), ``free_ahead`` m of free space in
        front of the base (laser); the ending once the action is over (the command is then zero)."""
        dt = max(0.0, t - self._t)
        self._t = t
        lim, done = self.lim, None
        if self.action == Action.STOP:
            done = Ending.DONE if t - self.t0 >= STEP_SECONDS - 1e-9 else None
            return self._set(0.0, 0.0, done)
        prog = self.progress(pose)
        # what is left once the command in force has acted for one more odometry period (it applies until
        # the next command arrives): stopping on it keeps the overshoot of a late command small
        left = self.target() - prog - dt * (self.cmd[0] if self.action == Action.FORWARD else abs(self.cmd[1]))
        if prog > self._progress + (PROGRESS_M if self.action == Action.FORWARD else PROGRESS_RAD):
            self._progress, self._progress_t = prog, t
        tol = lim.position_tolerance if self.action == Action.FORWARD else lim.angle_tolerance
        if left <= tol:
            return self._set(0.0, 0.0, Ending.DONE)
        if t - self.t0 > lim.action_timeout:
            return self._set(0.0, 0.0, Ending.TIMEOUT)
        if t - self._progress_t > lim.stall_s:
            return self._set(0.0, 0.0, Ending.BLOCKED)
        if self.action == Action.FORWARD:
            if free_ahead < lim.safety_distance:
                return self._set(0.0, 0.0, Ending.BLOCKED)
            v = min(lim.max_linear, math.sqrt(2.0 * lim.linear_accel * left), self.cmd[0] + lim.linear_accel * max(dt, 0.02))
            heading = wrap_angle(self.start.yaw - pose.yaw)
            w = float(np.clip(HEADING_GAIN * heading, -lim.max_angular, lim.max_angular))
            return self._set(v, w, None)
        sign = 1.0 if self.action == Action.TURN_LEFT else -1.0
        w = min(lim.max_angular, math.sqrt(2.0 * lim.angular_accel * left),
                abs(self.cmd[1]) + lim.angular_accel * max(dt, 0.02))
        return self._set(0.0, sign * w, None)

    def _set(self, v: float, w: float, ending: Ending | None) -> tuple[float, float, Ending | None]:
        self.cmd = (v, w)
        return v, w, ending


def free_ahead(ranges: np.ndarray, angle_min: float, angle_increment: float, range_max: float,
               laser_x: float, radius: float, side_margin: float = SIDE_MARGIN_M) -> float:
    """How far (m) the base, a circle of ``radius`` m, can drive straight ahead before it touches a point
    of a planar scan taken ``laser_x`` m forward of its centre (laser frame aligned with ``base_link``):
    a point at lateral offset y (|y| < radius) is reached after x - sqrt(radius^2 - y^2). Points within
    ``side_margin`` of the footprint's sides are left to the base's sliding contact, as in lockstep
    (a door jamb brushed in passing does not stop the robot); invalid or out-of-range readings are
    free; inf when nothing is ahead."""
    r = np.asarray(ranges, float)
    a = angle_min + angle_increment * np.arange(len(r))
    ok = np.isfinite(r) & (r > 0.0) & (r < range_max)
    x, y = laser_x + r[ok] * np.cos(a[ok]), r[ok] * np.sin(a[ok])
    hit = (x > 0.0) & (np.abs(y) < radius - side_margin)
    return float((x[hit] - np.sqrt(radius ** 2 - y[hit] ** 2)).min()) if hit.any() else math.inf
