"""The cmd_vel executor's core: primitive actions driven from odometry under Fetch-like limits."""

import math

import numpy as np
import pytest

from affectsim_core.actions import Action
from affectsim_core.errors import InvalidInput
from affectsim_core.geometry import Pose2D, wrap_angle
from affectsim_core.protocol import FORWARD_M, TURN_RAD
from affectsim_nav.base_control import BaseLimits, Ending, PrimitiveController, free_ahead

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
