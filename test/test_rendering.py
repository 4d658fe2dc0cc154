import math

import numpy as np
import pytest
from helpers import box_room

from affectsim_bridge.backends import BACKENDS
from affectsim_bridge.backends.base import HumanPlacement, LaserSpec
from affectsim_bridge.world.scene import load_scene
from affectsim_core.actions import Action
from affectsim_core.camera import CameraIntrinsics
from affectsim_core.errors import InvalidInput, MissingDependency
from affectsim_core.geometry import Pose2D, Transform, look_at_rotation

CAB = {"id": "cab", "type": "cabinet", "position": [4.0, 2.0], "size": [0.4, 1.0, 1.2], "material": "cabinet"}


@pytest.fixture(scope="module")
def box_backend():
    b = BACKENDS.create("mujoco")
    b.load(box_room(furniture=[CAB]), Pose2D(1.0, 1.0, 0.0))
    yield b
    b.close()


@pytest.mark.parametrize("k", [
    CameraIntrinsics.from_vfov(640, 480, math.radians(46.83)),
    CameraIntrinsics(320, 240, fx=300.0, fy=280.0, cx=150.0, cy=130.0),
])
def test_known_box_projects_where_camera_info_says(box_backend, k):
    cam = np.array([1.0, 2.0, 0.6])
    pose = Transform(look_at_rotation(cam, cam + [1.0, 0, 0]), cam)
    frame = box_backend.render_camera(pose, k)
    z = 3.8 - 1.0  # front face of the cabinet along the optical axis
    u_left, u_right = k.cx - k.fx * 0.5 / z, k.cx + k.fx * 0.5 / z
    v_top = k.cy - k.fy * (1.2 - 0.6) / z
    row = frame.depth[int(round(k.cy))]
    cols = np.nonzero(np.abs(row - z) < 0.02)[0]
    assert abs(cols.min() - u_left) <= 1.0 and abs(cols.max() - u_right) <= 1.0
    col = frame.depth[:, int(round(k.cx))]
    rows = np.nonzero(np.abs(col - z) < 0.02)[0]
    assert abs(rows.min() - v_top) <= 1.0
    assert abs(frame.depth[int(round(k.cy)), int(round(k.cx))] - z) < 0.01
    # the box is red in RGB where depth says it is
    r, g, b = frame.rgb[int(round(k.cy)), int(round(k.cx))].astype(int)
    assert r > g + 40 and r > b + 40


def test_head_camera_pose_and_depth_agree_with_wall_distance(box_backend):
    box_backend.load(box_backend.scene, Pose2D(1.0, 1.0, 0.0))
    frame = box_backend.render_head_camera()
    cam = box_backend.head_camera_pose()
    assert 1.0 < cam.translation[2] < 1.2  # Fetch head camera with the torso down
    assert np.allclose(cam.rotation[:, 2], [1, 0, 0], atol=1e-6)  # looks along the base heading
    expected = 5.95 - cam.translation[0]  # east wall inner face at x = 5.95
    k = frame.intrinsics
    assert abs(frame.depth[int(k.cy), int(k.cx)] - expected) < 0.01


def test_laser_scan_ranges(box_backend):
    box_backend.load(box_backend.scene, Pose2D(1.0, 1.0, 0.0))
    spec = LaserSpec()
    ranges = box_backend.laser_scan(spec)
    laser_x = 1.0 + box_backend.link_transforms()["laser_link"].translation[0]
    mid = spec.count // 2  # angle 0: straight ahead (the laser is mounted upside down; TF says so)
    assert abs(ranges[mid] - (3.8 - laser_x)) < 0.01 or abs(ranges[mid] - (5.95 - laser_x)) < 0.01
    assert np.isfinite(ranges).all() and (ranges > 0).all()


def test_same_actions_give_identical_poses_and_images():
    scene = load_scene("test_apartment")
    people = (HumanPlacement("p", 4.2, 2.8, math.pi, 3),)
    seq = [Action.FORWARD] * 5 + [Action.TURN_LEFT] * 4 + [Action.FORWARD] * 6 + [Action.TURN_RIGHT] * 2
    runs = []
    for _ in range(2):
        b = BACKENDS.create("mujoco")
        b.load(scene, Pose2D(1.0, 2.5, 0.0), people)
        poses, frames = [], []
        for a in seq:
            poses.append(b.apply_action(a).pose)
            if len(poses) % 4 == 0:
                f = b.render_head_camera()
                frames.append((f.rgb, f.depth))
        runs.append((poses, frames))
        b.close()
    assert runs[0][0] == runs[1][0]
    for (rgb0, d0), (rgb1, d1) in zip(runs[0][1], runs[1][1]):
        assert np.array_equal(rgb0, rgb1) and np.array_equal(d0, d1, equal_nan=True)


def test_backend_rejects_bad_input(box_backend):
    with pytest.raises(InvalidInput, match="robot_pose"):
        box_backend.load(box_backend.scene, Pose2D(0.1, 0.1, 0.0))  # inside the wall clearance
    with pytest.raises(InvalidInput, match="robot_pose"):
        box_backend.load(box_backend.scene, Pose2D(float("nan"), 1.0, 0.0))
    box_backend.load(box_backend.scene, Pose2D(1.0, 1.0, 0.0))
    with pytest.raises(InvalidInput, match="action"):
        box_backend.apply_action(7)
    with pytest.raises(InvalidInput, match="linear"):
        box_backend.integrate_velocity(float("inf"), 0.0, 0.1)


def test_velocity_integration_and_turns(box_backend):
    box_backend.load(box_backend.scene, Pose2D(1.0, 1.0, 0.0))
    for _ in range(10):
        r = box_backend.integrate_velocity(0.5, 0.0, 0.1)
    assert abs(r.pose.x - 1.5) < 1e-9 and abs(box_backend.sim_time - 1.0) < 1e-9
    r = box_backend.apply_action(Action.TURN_LEFT)
    assert abs(r.pose.yaw - math.radians(15)) < 1e-12 and abs(r.sim_time - 1.25) < 1e-9


def test_habitat_backend_fails_with_install_hint():
    with pytest.raises(MissingDependency, match="habitat-sim"):
        BACKENDS.create("habitat")
    with pytest.raises(KeyError, match="registered: habitat, mujoco"):
        BACKENDS.create("gazebo")
