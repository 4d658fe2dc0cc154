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
from affectsim_core.observation import EpisodeInfo, Observation
from affectsim_core.person_tracking import PersonDetection
from affectsim_core.protocol import HEAD_SPEED, HEAD_TILT_LIMITS, STEP_SECONDS
from affectsim_eval.episode.worlds import SimulatedRobot
from affectsim_nav.active import ActiveEpisode
from affectsim_nav.head import (BODY_TOP_M, FOOT_REACH_M, HEAD_VFOV, HOLD_STEPS, RETARGET_RAD, SHOULDER_TO_TOP_M,
                                TOP_MARGIN_RAD, HeadPointer, body_top, fit_distance, framing_tilt, vertical_fov)
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


def image_row(cam_pose: np.ndarray, point) -> float:
    """Row offset (over the focal length, + below the centre) of a map ``point`` in a camera at ``cam_pose``."""
    local = (np.asarray(point, float) - cam_pose[:3, 3]) @ cam_pose[:3, :3]
    return float(local[1] / local[2])


@pytest.mark.parametrize("distance", [2.4, 3.5, 6.0])
def test_the_framing_tilt_puts_the_feet_and_the_top_of_the_head_symmetric_about_the_image_centre(distance):
    level = camera(1.1, 0.0)
    tilt = framing_tilt(level, (distance, 0.0))
    tilted = camera(1.1, tilt)
    feet = image_row(tilted, (distance - FOOT_REACH_M, 0.0, 0.0))
    top = image_row(tilted, (distance, 0.0, BODY_TOP_M))
    assert feet == pytest.approx(-top, abs=1e-9) and feet > 0  # the feet below the centre, the head above
    assert feet < math.tan(HEAD_VFOV / 2)  # both inside the image
    assert tilt > 0  # the camera (1.1 m) is above the middle of the body (0.875 m): it looks down
    assert framing_tilt(level, (distance + 1.0, 0.0)) < tilt  # farther: nearer level
    assert framing_tilt(level, (distance, 0.0), top_m=1.3) > tilt  # a seated person: lower


@pytest.mark.parametrize("distance", [0.8, 1.2, 1.8])
def test_a_body_too_near_to_fit_loses_its_feet_not_its_head(distance):
    """The detector finds a person by the face: nearer than the fit distance the top of the head stays
    TOP_MARGIN_RAD inside the upper edge of the image and the feet leave it."""
    tilt = framing_tilt(camera(1.1, 0.0), (distance, 0.0))
    tilted = camera(1.1, tilt)
    assert math.atan(-image_row(tilted, (distance, 0.0, BODY_TOP_M))) == pytest.approx(HEAD_VFOV / 2 - TOP_MARGIN_RAD)
    assert image_row(tilted, (distance - FOOT_REACH_M, 0.0, 0.0)) > math.tan(HEAD_VFOV / 2)


@pytest.mark.parametrize("top", [1.2, 1.75, 2.0])
def test_the_fit_distance_is_where_the_framed_span_just_fills_the_field_of_view(top):
    d = fit_distance(1.1, top, HEAD_VFOV)
    for at, fits in ((d + 0.01, True), (d - 0.01, False)):
        tilted = camera(1.1, framing_tilt(camera(1.1, 0.0), (at, 0.0), top))
        feet = image_row(tilted, (at - FOOT_REACH_M, 0.0, 0.0))
        assert (feet <= math.tan(HEAD_VFOV / 2)) == fits, (top, at)
    assert fit_distance(1.1, top - 0.2, HEAD_VFOV) < d  # a shorter (seated) person fits nearer
    assert fit_distance(1.1, top, math.radians(5.0)) == 6.0  # a narrow camera: nowhere within 6 m


@pytest.mark.parametrize("shoulders_m", [1.0, 1.45])
def test_the_top_of_the_head_is_measured_from_the_shoulders_depth(shoulders_m):
    """A level camera 1.1 m up, a person 2 m ahead whose shoulders are ``shoulders_m`` high: depth at the
    shoulders' pixels gives their height, and the top of the head lies SHOULDER_TO_TOP_M above."""
    fx = fy = 500.0
    cx, cy = 320.0, 240.0
    row = cy - fy * (shoulders_m - 1.1) / 2.0  # the shoulders' image row at 2 m
    kp = np.zeros((33, 2))
    kp[[11, 12]] = (cx + 40, row), (cx - 40, row)  # the shoulders
    kp[[23, 24]] = (cx + 25, row + 120), (cx - 25, row + 120)  # the hips below
    vis = np.zeros(33)
    vis[[11, 12, 23, 24]] = 0.9
    det = PersonDetection(kp, vis, (cx - 60, row - 60, cx + 60, row + 200), np.zeros((33, 3)))
    depth = np.full((480, 640), 2.0, np.float32)
    obs = Observation.make(np.zeros((480, 640, 3), np.uint8), depth, (fx, fy, cx, cy), camera(1.1, 0.0),
                           (0.0, 0.0, 0.0), 0.0, 0)
    assert body_top(det, obs) == pytest.approx(shoulders_m + SHOULDER_TO_TOP_M, abs=0.02)
    assert vertical_fov(obs) == pytest.approx(2 * math.atan(240 / 500))
    hidden = PersonDetection(kp, np.where(np.arange(33) < 23, 0.0, vis), det.box, det.world)
    assert body_top(hidden, obs) is None  # no shoulder seen
    no_depth = Observation.make(obs.rgb, np.full((480, 640), np.nan, np.float32), obs.intrinsics, obs.camera_pose,
                                obs.pose, 0.0, 0)
    assert body_top(det, no_depth) is None


def test_the_framing_tilt_stays_within_the_head_s_limits():
    assert framing_tilt(camera(0.0, 0.0), (0.3, 0.0), top_m=20.0) == HEAD_TILT_LIMITS[0]  # would be far up
    assert framing_tilt(camera(20.0, 0.0), (1.0, 0.0), top_m=0.0) == HEAD_TILT_LIMITS[1]  # would be 1.5
    below, above = math.atan2(1.1, 1.0 - FOOT_REACH_M), math.atan2(BODY_TOP_M - 1.1, 1.0)  # too near to fit
    assert framing_tilt(camera(1.1, 0.0), (1.0, 0.0)) == pytest.approx(HEAD_VFOV / 2 - TOP_MARGIN_RAD - above)
    assert HEAD_VFOV / 2 - TOP_MARGIN_RAD - above < 0.0 < (below - above) / 2  # up, where centring looks down


def test_the_head_pointer_sends_a_new_tilt_only_when_it_differs_and_holds_a_person_lost_for_a_while():
    head, cam = HeadPointer(), camera(1.1, 0.0)
    first = head.command(cam, 0, (1.2, 0.0))
    assert first == pytest.approx(framing_tilt(cam, (1.2, 0.0)))
    assert head.command(cam, 1, (1.22, 0.0)) is None  # under RETARGET_RAD of change: nothing sent
    assert abs(framing_tilt(cam, (1.22, 0.0)) - first) < RETARGET_RAD
    assert head.command(cam, 2, (4.0, 0.0)) == pytest.approx(framing_tilt(cam, (4.0, 0.0)))
    for step in range(3, 3 + HOLD_STEPS - 1):  # out of sight: still framed where last seen
        assert head.command(cam, step, None) is None
    assert head.command(cam, 2 + HOLD_STEPS + 1, None) == 0.0  # then level
    assert head.command(cam, 2 + HOLD_STEPS + 2, None) is None
    assert HeadPointer().command(cam, 0, None) == 0.0  # the first command goes out even when it is level
    seated = HeadPointer()  # a person's measured top and the camera's field of view are used; the top is held
    tilt = seated.command(cam, 0, (1.6, 0.0), top_m=1.3, vfov=1.0)
    assert tilt == pytest.approx(framing_tilt(cam, (1.6, 0.0), 1.3, 1.0))
    assert seated.command(camera(1.1, 0.3), 1, None) is None  # the head turned, the framing is the same


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
