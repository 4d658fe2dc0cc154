"""The head: a decision's tilt, the backend's head at the Fetch head's speed, and the framing of a person."""

import math

import numpy as np
import pytest

from affectsim_bridge.backends import BACKENDS
from affectsim_bridge.bridge_node import head_goal
from affectsim_bridge.world.scene import load_scene
from affectsim_core.actions import Action
from affectsim_core.errors import InvalidInput
from affectsim_core.geometry import Pose2D
from affectsim_core.observation import EpisodeInfo
from affectsim_core.protocol import HEAD_SPEED, HEAD_TILT_LIMITS, STEP_SECONDS
from affectsim_eval.episode.worlds import SimulatedRobot
from affectsim_nav.active import ActiveEpisode
from affectsim_nav.head import BODY_TOP_M, HOLD_STEPS, RETARGET_RAD, HeadPointer, framing_tilt
from affectsim_nav.policy import Decision, Policy

START = Pose2D(1.5, 2.5, 0.0)  # living room of test_apartment, facing +x
PER_STEP = HEAD_SPEED * STEP_SECONDS  # rad the head turns in one lockstep action


def pitch(camera_pose: np.ndarray) -> float:
    """Tilt (rad, + looks down) of an optical frame (z forward, y down) in map."""
    return -math.asin(float(np.asarray(camera_pose)[2, 2]))


def camera(height: float, tilt: float) -> np.ndarray:
    """A camera at (0, 0, ``height``) looking along +x, pitched down by ``tilt``: optical x right, y down."""
    fwd = np.array([math.cos(tilt), 0.0, -math.sin(tilt)])
    right = np.array([0.0, -1.0, 0.0])
    m = np.eye(4)
    m[:3, :3] = np.stack([right, np.cross(fwd, right), fwd], 1)
    m[:3, 3] = (0.0, 0.0, height)
    return m


@pytest.fixture(scope="module")
def backend():
    b = BACKENDS.create("mujoco")
    b.load(load_scene("test_apartment"), START)
    yield b
    b.close()


@pytest.mark.parametrize("distance", [1.2, 2.0, 3.5, 6.0])
def test_the_framing_tilt_puts_the_floor_and_the_top_of_the_head_symmetric_about_the_image_centre(distance):
    level = camera(1.1, 0.0)
    tilt = framing_tilt(level, (distance, 0.0))
    rows = []
    for z in (0.0, BODY_TOP_M):  # the floor and the top of the head, below and above the optical axis
        local = (np.array([distance, 0.0, z]) - level[:3, 3]) @ camera(1.1, tilt)[:3, :3]
        rows.append(local[1] / local[2])  # image row offset from the centre over the focal length
    assert rows[0] == pytest.approx(-rows[1], abs=1e-9) and rows[0] > 0  # the floor below, the head above
    assert tilt > 0  # the camera (1.1 m) is above the middle of the body (0.875 m): it looks down
    assert framing_tilt(level, (distance + 1.0, 0.0)) < tilt  # farther: nearer level


def test_the_framing_tilt_stays_within_the_head_s_limits():
    assert framing_tilt(camera(0.0, 0.0), (0.3, 0.0), top_m=20.0) == HEAD_TILT_LIMITS[0]  # would be -0.78
    assert framing_tilt(camera(20.0, 0.0), (0.3, 0.0), top_m=0.0) == HEAD_TILT_LIMITS[1]  # would be 1.56
    assert framing_tilt(camera(1.1, 0.0), (0.0, 0.0)) == pytest.approx(math.atan2(1.1, 0.3) / 2
                                                                        - math.atan2(BODY_TOP_M - 1.1, 0.3) / 2)


def test_the_head_pointer_sends_a_new_tilt_only_when_it_differs_and_holds_a_person_lost_for_a_while():
    head, cam = HeadPointer(), camera(1.1, 0.0)
    first = head.command(cam, 0, (2.0, 0.0))
    assert first == pytest.approx(framing_tilt(cam, (2.0, 0.0)))
    assert head.command(cam, 1, (2.02, 0.0)) is None  # under RETARGET_RAD of change: nothing sent
    assert abs(framing_tilt(cam, (2.02, 0.0)) - first) < RETARGET_RAD
    assert head.command(cam, 2, (4.0, 0.0)) == pytest.approx(framing_tilt(cam, (4.0, 0.0)))
    for step in range(3, 3 + HOLD_STEPS - 1):  # out of sight: still framed where last seen
        assert head.command(cam, step, None) is None
    assert head.command(cam, 2 + HOLD_STEPS + 1, None) == 0.0  # then level
    assert head.command(cam, 2 + HOLD_STEPS + 2, None) is None
    assert HeadPointer().command(cam, 0, None) == 0.0  # the first command goes out even when it is level


@pytest.mark.parametrize("tilt", [math.nan, math.inf, HEAD_TILT_LIMITS[1] + 0.01, HEAD_TILT_LIMITS[0] - 0.01, "0.2"])
def test_a_decision_with_an_impossible_tilt_is_refused_naming_the_field(tilt):
    with pytest.raises(ValueError, match=r"Decision\.head_tilt=.*expected None or rad in \[-0\.76, 1\.45\]"):
        Decision(Action.STOP, head_tilt=tilt)


def test_the_backend_s_head_moves_at_the_head_s_speed_and_every_episode_starts_level(backend):
    scene = backend.scene
    backend.load(scene, START)
    assert pitch(backend.head_camera_pose().matrix()) == pytest.approx(0.0, abs=1e-9)
    backend.point_head(tilt=0.6)
    backend.apply_action(Action.STOP)
    assert backend.robot.head_tilt == pytest.approx(PER_STEP)  # 0.39 rad in one 0.25 s action
    assert pitch(backend.head_camera_pose().matrix()) == pytest.approx(PER_STEP, abs=1e-6)
    backend.apply_action(Action.TURN_LEFT)
    assert backend.robot.head_tilt == pytest.approx(0.6) and backend.head_goal is None
    backend.point_head(tilt=0.5)
    backend.integrate_velocity(0.0, 0.0, 0.02)  # continuous time: 0.0314 rad in 20 ms
    assert backend.robot.head_tilt == pytest.approx(0.6 - HEAD_SPEED * 0.02)
    for bad in (2.0, math.nan):
        with pytest.raises(InvalidInput, match=r"head_tilt.*expected a finite angle in rad within \[-0\.76, 1\.45\]"):
            backend.point_head(tilt=bad)
    backend.load(scene, START)  # a new episode: the head as configured (level), no goal left over
    assert backend.robot.head_tilt == 0.0 and backend.head_goal is None


class _Nod(Policy):
    """Looks down by 0.5 rad with its first decision, then only waits."""

    def reset(self, info, planner):
        self.n = 0

    def act(self, obs):
        self.n += 1
        return Decision(Action.STOP, head_tilt=0.5 if self.n == 1 else None)


def test_a_policy_s_head_tilt_reaches_the_camera_it_observes_through(backend):
    backend.load(backend.scene, START)
    grid, origin = backend.navigable.occupancy_grid(0.05)
    info = EpisodeInfo.make(grid, origin, 0.05, (START.x, START.y, START.yaw), 0.3, None)
    ep = ActiveEpisode(SimulatedRobot(backend), info, _Nod())
    seen = [pitch(ep.obs.camera_pose)]
    for _ in range(3):
        ep.step("handoff")
        seen.append(pitch(ep.obs.camera_pose))
    assert seen == pytest.approx([0.0, PER_STEP, 0.5, 0.5], abs=1e-6)


@pytest.mark.parametrize("names, last, n, field", [
    ([], [[]], 1, "joint_names"),
    (["head_tilt_joint", "torso_lift_joint"], [[0.3, 0.1]], 1, "joint_names"),
    (["head_tilt_joint", "head_tilt_joint"], [[0.3, 0.3]], 1, "joint_names"),
    (["head_tilt_joint"], [[0.3, 0.1]], 1, r"points\[-1\]\.positions"),
    (["head_tilt_joint"], [], 0, "points=0"),
    (["head_tilt_joint"], [[0.3]], 101, "points=101"),
    (["head_pan_joint", "head_tilt_joint"], [[0.0, -0.8]], 1, "head_tilt=-0.8"),
    (["head_pan_joint"], [[math.nan]], 1, "head_pan=nan"),
])
def test_a_bad_head_command_is_refused_naming_the_field(names, last, n, field):
    with pytest.raises(InvalidInput, match=field):
        head_goal(names, last, n)


def test_a_head_command_s_goal_is_its_last_point_by_joint_name():
    assert head_goal(["head_tilt_joint", "head_pan_joint"], [[0.4, -0.2]], 3) == (-0.2, 0.4)
    assert head_goal(["head_tilt_joint"], [[0.4]], 1) == (None, 0.4)  # the pan keeps its goal
