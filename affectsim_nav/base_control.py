"""One primitive action executed in continuous time by a velocity-controlled base (``/cmd_vel``).

ROS-free core of the nav node's ``cmd_vel`` execution mode (the adapter is
:class:`~affectsim_nav.ros_robot.CmdVelRobot`). A primitive of docs/protocol.md §6 (FORWARD
0.25 m, TURN_LEFT / TURN_RIGHT 15 deg, STOP for 0.25 s) becomes a stream of (linear m/s, angular
rad/s) commands computed from the robot's own odometry (``odom`` frame poses, their stamps in s and,
where the odometry has it, the measured twist in ``base_link``).

The speed profile is one a real base can follow:

* acceleration limits hold in real time: consecutive commands differ by at most accel x the time
  between them (their odometry stamps), the first one included (the base is at rest at ``t0``);
* the base is planned from where it will be when the command reaches it: the pose at ``t``
  + ``latency`` predicted from the measured velocity and the commands still in flight;
* a discrete ``sqrt(2 a d)`` braking curve, aware that a command holds for one odometry period, brings
  the command to zero at the target, so the last command before the end is already ~0;
* DONE only once the base has settled: zero commanded for ``latency`` and the measured velocity below
  ``settle_linear`` / ``settle_angular`` (without a measured velocity: zero commanded for
  ``latency`` + one odometry period);
* a heading hold while driving straight, and a FORWARD move slows down for what the base laser sees
  so that it stops ``safety_distance`` short of it (ending BLOCKED once settled).

Exceptions to the acceleration limit, on purpose: the abnormal endings command zero at once, i.e. the
safety stop (an obstacle already closer than ``safety_distance``), no progress for ``stall_s`` while
commanded (BLOCKED) and the per-action timeout (TIMEOUT). An action that ends before its target
(safety stop, no progress, timeout) is *clipped*, as a lockstep move that navigable space cut short.
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

    DONE = "done"  # the target reached within tolerance and the base settled (STOP: its 0.25 s held)
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
    # s from an odometry stamp until the base acts on the command sent for it: odometry + command latency,
    # + half an odometry period if the base ramps to each command rather than stepping to it. Too high only
    # costs time (an early stop, then a creep); too low overshoots, unless the measured velocity shows it at
    # the start of the move (PrimitiveController.latency)
    latency: float = 0.05
    settle_linear: float = 0.01  # m/s: measured linear speed below which the base has settled
    settle_angular: float = 0.02  # rad/s: measured angular speed below which the base has settled

    BOUNDS = {"max_linear": (0.05, 1.0), "max_angular": (0.1, 3.0), "linear_accel": (0.1, 5.0),
              "angular_accel": (0.1, 10.0), "position_tolerance": (0.001, 0.05),
              "angle_tolerance": (0.001, 0.1), "action_timeout": (0.5, 60.0), "safety_distance": (0.0, 2.0),
              "stall_s": (0.2, 10.0), "latency": (0.0, 0.5), "settle_linear": (0.001, 0.2),
              "settle_angular": (0.001, 0.5)}

    def __post_init__(self) -> None:
        for name, (lo, hi) in self.BOUNDS.items():
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and lo <= v <= hi):
                raise InvalidInput(name, v, f"a number in [{lo}, {hi}]")


HEADING_GAIN = 2.0  # 1/s: angular command per rad of heading error while driving straight
PROGRESS_M, PROGRESS_RAD = 0.005, 0.01  # progress that resets the stall timer
SIDE_MARGIN_M = 0.05  # m of the footprint's sides where a laser point does not trigger the safety stop
STOP_FRACTION = 0.5  # the command goes to zero this fraction of the tolerance before the target
DEFAULT_PERIOD = 0.02  # s: the odometry period assumed before two stamps have been seen


def braking_speed(remaining: float, accel: float, period: float) -> float:
    """The highest speed (m/s or rad/s) that, held for one command ``period`` (s) and then lowered by
    ``accel`` x ``period`` at every following command, stops within ``remaining`` (m or rad): the
    discrete form of ``sqrt(2 a d)``, whose stopping distance is v^2 / (2 a) + v period / 2."""
    if remaining <= 0.0:
        return 0.0
    step = accel * period  # the speed change one command may make
    if remaining <= step * period:  # one command covers it, the next is zero
        return remaining / period
    return -step / 2.0 + math.sqrt(step * step / 4.0 + 2.0 * accel * remaining)


def _in_flight(v0: float, before: float, segments: list[tuple[float, float]], accel: float) -> float:
    """Distance (m or rad) a base measured at ``v0`` now covers over (duration s, command) ``segments``,
    the first one the command in force, ``before`` the one it replaced: the base follows the commands
    (steps, each within the acceleration limit of the one before it), and what ``v0`` lies outside
    [``before``, command in force] (a base lagging behind, slipping) fades at ``accel``."""
    horizon, now = sum(d for d, _ in segments), segments[0][1]
    lag = v0 - min(max(v0, min(before, now)), max(before, now))
    e = abs(lag)
    fade = e * e / (2.0 * accel) if e <= accel * horizon else e * horizon - 0.5 * accel * horizon ** 2
    return sum(d * c for d, c in segments) + math.copysign(fade, lag)


class PrimitiveController:
    """Velocity commands for one primitive action from odometry; call :meth:`update` at every odometry
    message until it returns an :class:`Ending` (then publish zero: the command returned with an
    ending is zero already)."""

    def __init__(self, action: Action | int, start: Pose2D, t0: float, limits: BaseLimits = BaseLimits()) -> None:
        self.action, self.start, self.t0, self.lim = Action(int(action)), start, float(t0), limits
        self.cmd = (0.0, 0.0)  # the last command (m/s, rad/s); the base is taken to be commanded zero at t0
        self._t = float(t0)  # stamp (s) of the last command
        self._period: float | None = None  # s between the last two odometry stamps
        self._sent: list[tuple[float, float, float]] = [(float(t0), 0.0, 0.0)]  # (stamp, v, w): in force, in flight
        self._before = self._sent[0]  # the command the one in force replaced
        self.latency = limits.latency  # s: the configured latency, raised to what the measured velocity shows
        self._first: float | None = None  # stamp (s) of the first command the base should show moving
        self._still: float | None = float(t0)  # last stamp the base read at rest before it first moved; None once it did
        self._zero_since: float | None = None  # stamp (s) since which zero has been commanded at the target
        self._progress, self._progress_t = 0.0, float(t0)  # best progress so far and when it last grew

    def progress(self, pose: Pose2D) -> float:
        """Distance (m) along the start heading for FORWARD, angle turned (rad, signed toward the turn)
        for a turn, 0 for STOP."""
        if self.action == Action.FORWARD:
            return (pose.x - self.start.x) * math.cos(self.start.yaw) + (pose.y - self.start.y) * math.sin(self.start.yaw)
        if self.action in (Action.TURN_LEFT, Action.TURN_RIGHT):
            return self._sign() * wrap_angle(pose.yaw - self.start.yaw)
        return 0.0

    def target(self) -> float:
        """The progress (m or rad) the action aims at."""
        return {Action.FORWARD: FORWARD_M, Action.TURN_LEFT: TURN_RAD, Action.TURN_RIGHT: TURN_RAD}.get(self.action, 0.0)

    def _sign(self) -> float:
        return -1.0 if self.action == Action.TURN_RIGHT else 1.0

    def predict(self, pose: Pose2D, t: float, velocity: tuple[float, float] | None) -> tuple[float, float]:
        """Progress (m or rad, as :meth:`progress`) and yaw (rad, ``odom``) the base will have at ``t`` +
        ``latency`` s, when a command sent now starts to act: from ``pose`` at ``t``, moving from the
        measured ``velocity`` (m/s, rad/s; None: the command in force) by the commands in flight."""
        lim, lat = self.lim, self.latency
        while len(self._sent) > 1 and self._sent[1][0] + lat <= t + 1e-9:  # in force at t: drop the older
            self._before = self._sent.pop(0)
        v0, w0 = velocity if velocity is not None else self._sent[0][1:]
        starts = [t] + [s + lat for s, _, _ in self._sent[1:]] + [t + lat]
        durations = [max(0.0, b - a) for a, b in zip(starts, starts[1:])]
        dist = _in_flight(v0, self._before[1], [(d, v) for d, (_, v, _) in zip(durations, self._sent)],
                          lim.linear_accel)
        turn = _in_flight(w0, self._before[2], [(d, w) for d, (_, _, w) in zip(durations, self._sent)],
                          lim.angular_accel)
        if self.action == Action.FORWARD:
            return self.progress(pose) + dist * math.cos(pose.yaw + turn / 2.0 - self.start.yaw), pose.yaw + turn
        return self.progress(pose) + self._sign() * turn, pose.yaw + turn

    def update(self, pose: Pose2D, t: float, free_ahead: float = math.inf, *,
               velocity: tuple[float, float] | None = None) -> tuple[float, float, Ending | None]:
        """Command (m/s, rad/s) for odometry ``pose`` (``odom``) stamped ``t`` (s), ``free_ahead`` m of free
        space in front of the base (laser, see :func:`free_ahead_points`) and the odometry's measured
        ``velocity`` (m/s along ``base_link`` x, rad/s; None if unknown); the ending once the action
        is over (the command is then zero)."""
        t = float(t)
        dt = max(0.0, t - self._t)
        self._t = t
        if dt > 0.0:
            self._period = dt
        if self.action == Action.STOP:
            return self._set(0.0, 0.0, t, Ending.DONE if t - self.t0 >= STEP_SECONDS - 1e-9 else None)
        lim, period = self.lim, self._period or DEFAULT_PERIOD
        forward = self.action == Action.FORWARD
        prog = self.progress(pose)
        tol = lim.position_tolerance if forward else lim.angle_tolerance
        self._learn_latency(t, velocity)
        pred, yaw = self.predict(pose, t, velocity)
        left = self.target() - pred  # what the command sent now has left to cover (m or rad)
        if forward and free_ahead < lim.safety_distance and left > tol:
            return self._set(0.0, 0.0, t, Ending.BLOCKED)  # the safety stop: zero at once
        if prog > self._progress + (PROGRESS_M if forward else PROGRESS_RAD):
            self._progress, self._progress_t = prog, t
        # slow down for the obstacle ahead too: stop safety_distance short of it
        gap = free_ahead - lim.safety_distance - (pred - prog) if forward else math.inf
        goal = min(left, gap)
        accel = lim.linear_accel if forward else lim.angular_accel
        top = lim.max_linear if forward else lim.max_angular
        speed = 0.0 if goal <= STOP_FRACTION * tol else min(top, braking_speed(goal, accel, period))
        prev_v, prev_w = self.cmd
        if forward:
            heading = HEADING_GAIN * wrap_angle(self.start.yaw - yaw) if speed > 0.0 else 0.0
            v = float(np.clip(speed, max(0.0, prev_v - accel * dt), prev_v + accel * dt))
            w = float(np.clip(np.clip(heading, -lim.max_angular, lim.max_angular),
                              prev_w - lim.angular_accel * dt, prev_w + lim.angular_accel * dt))
        else:
            sign, prev = self._sign(), self._sign() * prev_w
            v, w = 0.0, sign * float(np.clip(speed, max(0.0, prev - accel * dt), prev + accel * dt))
        if speed > 0.0 or v != 0.0 or w != 0.0:
            self._zero_since = None
        elif self._zero_since is None:  # at the goal, and the command has come down to zero
            self._zero_since = t
            self._progress_t = t  # the stall timer runs only while motion is commanded
        if self._zero_since is not None and self._settled(t, velocity, period):
            return self._set(0.0, 0.0, t, Ending.DONE if left <= tol else Ending.BLOCKED)
        if t - self.t0 > lim.action_timeout:
            return self._set(0.0, 0.0, t, Ending.TIMEOUT)
        if self._zero_since is None and t - self._progress_t > lim.stall_s:
            return self._set(0.0, 0.0, t, Ending.BLOCKED)
        return self._set(v, w, t, None)

    def _moving(self, v: float, w: float) -> bool:
        return abs(v) >= self.lim.settle_linear or abs(w) >= self.lim.settle_angular

    def _learn_latency(self, t: float, velocity: tuple[float, float] | None) -> None:
        """Raise :attr:`latency` when the base, at rest at the start, still read at rest at a stamp later
        than ``latency`` after the first command that should have moved it (a lower bound of the true one,
        to an odometry period: braking on too low a latency overshoots, on too high one it costs time)."""
        if velocity is None or self._still is None:
            return
        if not self._moving(*velocity):
            self._still = t
            return
        if self._first is not None:
            self.latency = max(self.latency, self._still - self._first)
        self._still = None  # moving: learnt, or it was moving before its first command (no estimate)

    def _settled(self, t: float, velocity: tuple[float, float] | None, period: float) -> bool:
        """Whether the base is at rest after zero commanded since ``_zero_since``."""
        held = t - self._zero_since
        if velocity is None:
            return held >= self.latency + period - 1e-9
        return held >= self.latency - 1e-9 and not self._moving(*velocity)

    def _set(self, v: float, w: float, t: float, ending: Ending | None) -> tuple[float, float, Ending | None]:
        self.cmd = (v, w)
        self._sent.append((t, v, w))
        if self._first is None and self._moving(v, w):
            self._first = t
        return v, w, ending


def free_ahead_points(xy: np.ndarray, radius: float, side_margin: float = SIDE_MARGIN_M) -> float:
    """How far (m) the base, a circle of ``radius`` m, can drive straight ahead before it touches one of
    the points ``xy`` ((N, 2) array, m, in ``base_link``): a point at lateral offset y (|y| < radius)
    ahead of the centre (x > 0; points behind it are ignored) is reached after x - sqrt(radius^2 - y^2).
    Points within ``side_margin`` of the footprint's sides are left to the base's sliding contact, as
    in lockstep (a door jamb brushed in passing does not stop the robot); non-finite points are free;
    inf when nothing is ahead."""
    p = np.asarray(xy, float)
    if p.ndim != 2 or p.shape[1] != 2:
        raise InvalidInput("xy", f"an array of shape {p.shape}", "an (N, 2) array of points in base_link (m)")
    p = p[np.isfinite(p).all(axis=1)]
    x, y = p[:, 0], p[:, 1]
    hit = (x > 0.0) & (np.abs(y) < radius - side_margin)
    return float((x[hit] - np.sqrt(radius ** 2 - y[hit] ** 2)).min()) if hit.any() else math.inf


def free_ahead(ranges: np.ndarray, angle_min: float, angle_increment: float, range_max: float,
               laser_x: float, radius: float, side_margin: float = SIDE_MARGIN_M) -> float:
    """:func:`free_ahead_points` of a planar scan taken ``laser_x`` m forward of the base's centre (laser
    frame aligned with ``base_link``); invalid or out-of-range readings are free."""
    r = np.asarray(ranges, float)
    a = angle_min + angle_increment * np.arange(len(r))
    ok = np.isfinite(r) & (r > 0.0) & (r < range_max)
    return free_ahead_points(np.column_stack([laser_x + r[ok] * np.cos(a[ok]), r[ok] * np.sin(a[ok])]),
                             radius, side_margin)
