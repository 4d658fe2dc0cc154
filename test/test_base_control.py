"""The cmd_vel executor's core: primitive actions driven from odometry under Fetch-like limits."""

import math

import numpy as np
import pytest

from affectsim_core.actions import Action
from affectsim_core.errors import InvalidInput
from affectsim_core.geometry import Pose2D, wrap_angle
from affectsim_core.protocol import FORWARD_M, TURN_RAD
from affectsim_nav.base_control import BaseLimits, Ending, PrimitiveController, free_ahead, free_ahead_points

DT = 0.02  # s, odometry at 50 Hz


def _drive(action, limits=BaseLimits(), wall_x=math.inf, start=Pose2D(1.0, 2.0, 0.7), slip=1.0):
    """A unicycle that applies each command one odometry period late (as the bridge does); a wall at
    ``wall_x`` along the start heading stops it. Returns the ending, final pose, time and commands."""
    ctrl = PrimitiveController(action, start, 0.0, limits)
    pose, t, cmd, cmds = start, 0.0, (0.0, 0.0), []
    for _ in range(2000):
        v, w = cmd
        yaw = pose.yaw + w * DT
        x, y = pose.x + slip * v * DT * math.cos(pose.yaw), pose.y + slip * v * DT * math.sin(pose.yaw)
        along = (x - start.x) * math.cos(start.yaw) + (y - start.y) * math.sin(start.yaw)
        if along > wall_x:
            x, y = pose.x, pose.y
        pose, t = Pose2D(x, y, wrap_angle(yaw)), t + DT
        gap = wall_x - along
        cmd_v, cmd_w, ending = ctrl.update(pose, t, gap)
        cmds.append((cmd_v, cmd_w))
        cmd = (cmd_v, cmd_w)
        if ending is not None:
            return ending, pose, t, np.array(cmds)
    raise AssertionError("the action never ended")


def test_forward_and_turns_reach_their_targets_within_tolerance_and_limits():
    lim = BaseLimits()
    start = Pose2D(1.0, 2.0, 0.7)
    ending, pose, t, cmds = _drive(Action.FORWARD, lim, start=start)
    moved = math.hypot(pose.x - start.x, pose.y - start.y)
    assert ending == Ending.DONE and abs(moved - FORWARD_M) <= lim.position_tolerance + 0.005
    assert abs(wrap_angle(pose.yaw - start.yaw)) < 1e-6  # straight: no heading drift
    assert cmds[:, 0].max() <= lim.max_linear + 1e-9 and cmds[-1].tolist() == [0.0, 0.0]
    assert np.diff(cmds[:, 0]).max() <= lim.linear_accel * DT + 1e-9  # accelerates within the limit
    assert 0.4 < t < 1.5  # about 0.25 m at 0.6 m/s with 1 m/s^2 ramps
    for action, sign in ((Action.TURN_LEFT, 1), (Action.TURN_RIGHT, -1)):
        ending, pose, _, cmds = _drive(action, lim, start=start)
        turned = wrap_angle(pose.yaw - start.yaw)
        assert ending == Ending.DONE and abs(turned - sign * TURN_RAD) <= lim.angle_tolerance + 0.01
        assert np.abs(cmds[:, 1]).max() <= lim.max_angular + 1e-9 and abs(math.hypot(pose.x - 1, pose.y - 2)) < 1e-9


def test_stop_holds_still_for_one_step():
    ending, pose, t, cmds = _drive(Action.STOP)
    assert ending == Ending.DONE and abs(t - 0.25) < DT + 1e-9 and not cmds.any()


def test_an_obstacle_ahead_stops_a_forward_move_early_as_blocked():
    lim = BaseLimits(safety_distance=0.2)
    ending, pose, _, cmds = _drive(Action.FORWARD, lim, wall_x=0.3)  # 0.1 m of travel before the safety margin
    moved = math.hypot(pose.x - 1.0, pose.y - 2.0)
    assert ending == Ending.BLOCKED and moved < 0.15 and cmds[-1].tolist() == [0.0, 0.0]
    ending, *_ = _drive(Action.FORWARD, lim, wall_x=0.1)  # already too close: no motion at all
    assert ending == Ending.BLOCKED


def test_a_base_that_does_not_move_ends_blocked_and_a_slow_one_times_out():
    ending, _, t, _ = _drive(Action.FORWARD, BaseLimits(stall_s=0.5), slip=0.0)  # wheels spin, base stays
    assert ending == Ending.BLOCKED and t == pytest.approx(0.5, abs=0.05)
    ending, _, t, _ = _drive(Action.FORWARD, BaseLimits(action_timeout=1.0), slip=0.1)  # 10 % of the speed
    assert ending == Ending.TIMEOUT and t == pytest.approx(1.0, abs=0.05)


def test_limits_out_of_range_are_named():
    with pytest.raises(InvalidInput, match=r"max_linear=5.0 is invalid; expected a number in \[0.05, 1.0\]"):
        BaseLimits(max_linear=5.0)
    with pytest.raises(InvalidInput, match="safety_distance=nan"):
        BaseLimits(safety_distance=float("nan"))


def test_free_ahead_is_the_distance_the_round_base_can_drive_before_it_touches_a_point():
    angles = np.linspace(-math.pi / 2, math.pi / 2, 181)
    inc = angles[1] - angles[0]
    ranges = np.full(181, 30.0)
    ranges[90] = 1.0  # straight ahead of the laser (0.2 m forward of the centre): 1.2 - 0.3 m to drive
    assert free_ahead(ranges, angles[0], inc, 25.0, 0.2, 0.3) == pytest.approx(0.9)
    off = np.full(181, 30.0)
    off[90 + 9] = 1.0 / math.cos(math.radians(9))  # 1 m ahead of the laser, 0.158 m to the left
    y = math.tan(math.radians(9))
    assert free_ahead(off, angles[0], inc, 25.0, 0.2, 0.3) == pytest.approx(1.2 - math.sqrt(0.09 - y ** 2))
    jamb = np.full(181, 30.0)
    jamb[90 + 60] = 0.28 / math.sin(math.radians(60))  # 0.28 m to the side: brushed in passing, not a stop
    assert free_ahead(jamb, angles[0], inc, 25.0, 0.2, 0.3) == math.inf
    assert free_ahead(np.full(181, np.nan), angles[0], inc, 25.0, 0.2, 0.3) == math.inf


# ---------------------------------------------------------------- a base with latency, in continuous time
H = 0.001  # s: the plant's integration step; every time below is a whole number of steps


def _steps(seconds: float) -> int:
    return int(round(seconds / H))


def _plant(action, limits, cmd_latency=0.0, odom_hz=50.0, odom_latency=0.01, base_accel=None, gain=1.0,
           measured=True, start=Pose2D(1.0, 2.0, 0.7), wall_x=math.inf):
    """Run one primitive on a unicycle in continuous time: odometry sampled at ``odom_hz`` reaches the
    controller ``odom_latency`` s after its stamp, the command it answers acts ``cmd_latency`` s later and
    holds until the next one acts; the base reaches ``gain`` x the command at once or, with
    ``base_accel`` (m/s^2; x 2.5 rad/s^2), at that acceleration. Odometry's twist is the base's true
    velocity (``measured``) or absent. ``wall_x``: an obstacle that far along the start heading.
    Returns the ending, the commands as (time s, v, w) in the order sent (the caller's final zero
    included), the base's true speed when the ending came and its progress then and at rest 1 s later."""
    ctrl = PrimitiveController(action, start, 0.0, limits)
    x, y, yaw, vb, wb, applied = start.x, start.y, start.yaw, 0.0, 0.0, (0.0, 0.0)
    period, lo, lc = _steps(1.0 / odom_hz), _steps(odom_latency), _steps(cmd_latency)
    odom, queue, cmds, end = [], [], [], None

    def along() -> float:
        return (x - start.x) * math.cos(start.yaw) + (y - start.y) * math.sin(start.yaw)

    def progress() -> float:  # m along the start heading, or rad turned
        return along() if action == Action.FORWARD else wrap_angle(yaw - start.yaw)

    for n in range(_steps(limits.action_timeout + 3.0)):
        if end is None and n % period == 0:
            odom.append((n + lo, n * H, Pose2D(x, y, yaw), (vb, wb)))
        while end is None and odom and odom[0][0] == n:
            _, stamp, pose, vel = odom.pop(0)
            v, w, ending = ctrl.update(pose, stamp, wall_x - along(), velocity=vel if measured else None)
            cmds.append((n * H, v, w))
            queue.append((n + lc, v, w))
            if ending is not None:
                cmds.append((n * H, 0.0, 0.0))  # the caller stops the base after the action
                queue.append((n + lc, 0.0, 0.0))
                end = (ending, (vb, wb), progress(), n)
        while queue and queue[0][0] == n:
            applied = queue.pop(0)[1:]
        if base_accel is None:
            vb, wb = gain * applied[0], gain * applied[1]
        else:
            vb += float(np.clip(gain * applied[0] - vb, -base_accel * H, base_accel * H))
            wb += float(np.clip(gain * applied[1] - wb, -2.5 * base_accel * H, 2.5 * base_accel * H))
        mid = yaw + 0.5 * wb * H
        x, y, yaw = x + vb * H * math.cos(mid), y + vb * H * math.sin(mid), yaw + wb * H
        if along() > wall_x:
            x, y = x - vb * H * math.cos(mid), y - vb * H * math.sin(mid)
        if end is not None and n >= end[3] + _steps(1.0):
            break
    assert end is not None, "the action never ended"
    ending, speed, at_end, n_end = end
    return ending, np.array(cmds), speed, at_end, progress(), n_end * H


GRID = [(lat, hz) for lat in (0.0, 0.05, 0.1) for hz in (10.0, 20.0, 50.0)]


def _check_profile(cmds, lim):
    """Accelerations between consecutive commands (their own times) within the limits, no step to zero."""
    dt, dv, dw = np.diff(cmds[:, 0]), np.abs(np.diff(cmds[:, 1])), np.abs(np.diff(cmds[:, 2]))
    assert (dv <= lim.linear_accel * dt + 1e-9).all(), f"linear steps {dv.max():.3f} m/s in {dt.min():.3f} s"
    assert (dw <= lim.angular_accel * dt + 1e-9).all(), f"angular steps {dw.max():.3f} rad/s"
    moving = np.flatnonzero(np.abs(cmds[:, 1:]).max(axis=1) > 0.0)
    last = cmds[moving[-1]]  # the last non-zero command, and the zero after it
    after = cmds[moving[-1] + 1]
    assert after[1] == after[2] == 0.0 and after[0] > last[0]
    assert abs(last[1]) <= lim.linear_accel * (after[0] - last[0]) + 1e-9
    assert abs(last[2]) <= lim.angular_accel * (after[0] - last[0]) + 1e-9


@pytest.mark.parametrize("latency,hz", GRID)
def test_forward_under_latency_ends_at_its_target_settled_within_the_acceleration_limit(latency, hz):
    lim = BaseLimits(latency=latency + 0.01)  # configured: command latency + the plant's odometry latency
    ending, cmds, speed, at_end, final, t = _plant(Action.FORWARD, lim, latency, hz)
    assert ending == Ending.DONE and abs(final - FORWARD_M) <= 0.003, (final, t)
    assert abs(speed[0]) < lim.settle_linear and abs(final - at_end) < 0.001  # at rest when DONE came
    _check_profile(cmds, lim)
    assert t < 1.5  # 0.25 m at <= 0.6 m/s with 1 m/s^2 ramps is ~0.75 s; settling and creeping add little


@pytest.mark.parametrize("latency,hz", GRID)
def test_turns_under_latency_end_at_15_deg_settled_within_the_acceleration_limit(latency, hz):
    lim = BaseLimits(latency=latency + 0.01)
    for action, sign in ((Action.TURN_LEFT, 1.0), (Action.TURN_RIGHT, -1.0)):
        ending, cmds, speed, at_end, final, t = _plant(action, lim, latency, hz)
        assert ending == Ending.DONE and abs(final - sign * TURN_RAD) <= math.radians(0.5), (math.degrees(final), t)
        assert abs(speed[1]) < lim.settle_angular and abs(final - at_end) < math.radians(0.1)
        _check_profile(cmds, lim)
        assert t < 1.5


@pytest.mark.parametrize("hz", (10.0, 20.0, 50.0))
def test_without_measured_velocity_or_with_a_lagging_base_the_ending_still_waits_for_rest(hz):
    """No twist in the odometry; or a base that ramps to each command at its own limit (the controller's)
    and reaches 97 % of it: it acts half an odometry period later on average, which ``latency`` includes."""
    for kw, lim in (({"measured": False}, BaseLimits(latency=0.06)),
                    ({"base_accel": 1.0, "gain": 0.97}, BaseLimits(latency=0.06 + 0.5 / hz))):
        ending, cmds, speed, at_end, final, t = _plant(Action.FORWARD, lim, 0.05, hz, **kw)
        assert ending == Ending.DONE and abs(final - FORWARD_M) <= 0.005 and abs(speed[0]) < 0.02, (kw, final)
        _check_profile(cmds, lim)


@pytest.mark.parametrize("real", (0.0, 0.02, 0.05, 0.1))
def test_the_default_latency_suits_the_simulator_and_a_robot(real):
    """The project's simulator acts on a command at once and holds it to the next (latency ~0-20 ms); a
    robot's longer latency shows in the measured velocity at the start, and the controller adopts it."""
    lim = BaseLimits()
    for action, target in ((Action.FORWARD, FORWARD_M), (Action.TURN_LEFT, TURN_RAD)):
        ending, cmds, _, _, final, t = _plant(action, lim, real, 50.0, odom_latency=0.0)
        tol = 0.003 if action == Action.FORWARD else math.radians(0.5)
        assert ending == Ending.DONE and abs(final - target) <= tol and t < 1.5, (action, final, t)


def test_an_obstacle_ahead_is_approached_gently_and_the_move_ends_blocked_at_rest():
    lim = BaseLimits(safety_distance=0.2, latency=0.06)
    ending, cmds, speed, at_end, final, _ = _plant(Action.FORWARD, lim, 0.05, 20.0, wall_x=0.3)
    assert ending == Ending.BLOCKED and 0.09 < final < 0.1 + 1e-3 and speed[0] == 0.0  # stopped 0.2 m short
    _check_profile(cmds, lim)


def test_the_first_command_and_a_repeated_stamp_respect_the_acceleration_limit():
    ctrl = PrimitiveController(Action.FORWARD, Pose2D(0, 0, 0), 10.0, BaseLimits())
    assert ctrl.update(Pose2D(0, 0, 0), 10.0)[:2] == (0.0, 0.0)  # no time since t0: no speed yet
    assert ctrl.update(Pose2D(0, 0, 0), 10.001)[0] == pytest.approx(0.001)  # a fast loop: 1 mm/s in 1 ms
    assert ctrl.update(Pose2D(0, 0, 0), 10.001)[0] == pytest.approx(0.001)


def test_free_ahead_points_takes_points_in_base_link():
    pts = np.array([[1.2, 0.0], [-0.5, 0.0], [0.9, 0.28], [np.nan, 0.0]])  # ahead, behind, a jamb, invalid
    assert free_ahead_points(pts, 0.3) == pytest.approx(0.9)
    assert free_ahead_points(pts[1:], 0.3) == math.inf and free_ahead_points(np.zeros((0, 2)), 0.3) == math.inf
    with pytest.raises(InvalidInput, match=r"xy=.*expected an \(N, 2\) array"):
        free_ahead_points(np.zeros(4), 0.3)
