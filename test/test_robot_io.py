"""What a real robot sends and how the robot graph is launched: both REP-118 depth encodings, colour
encodings, execution modes and topic remappings (ROS message types, no running graph)."""

import math
import py_compile
from pathlib import Path

import numpy as np
import pytest

from affectsim_core.errors import InvalidInput
from affectsim_core.ros.conversions import image_msg, to_time
from affectsim_core.ros.sensors import depth_metres, rgb_array
from affectsim_ros.graph import GRAPHS, SIM_ODOM_TIMEOUT_S, launch_remaps, validate_launch_args

ROOT = Path(__file__).resolve().parent.parent


def test_depth_in_millimetres_and_metres_gives_the_same_metres():
    mm = np.array([[0, 1000], [2500, 65535]], np.uint16)  # 0: no return
    raw = image_msg(mm, "16UC1", "cam", to_time(0.0))
    metres = depth_metres(raw)
    assert metres.dtype == np.float32 and math.isnan(metres[0, 0])
    assert metres[0, 1] == pytest.approx(1.0) and metres[1, 0] == pytest.approx(2.5)
    f = np.array([[np.nan, 1.0], [2.5, 65.535]], np.float32)
    assert np.array_equal(depth_metres(image_msg(f, "32FC1", "cam", to_time(0.0))), f, equal_nan=True)
    bad = image_msg(np.zeros((2, 2), np.uint8), "mono8", "cam", to_time(0.0))
    with pytest.raises(InvalidInput, match=r"depth encoding='mono8' is invalid; expected one of \('32FC1', '16UC1'\)"):
        depth_metres(bad)


def test_bgr_frames_are_turned_into_rgb_and_other_encodings_named():
    rgb = np.zeros((2, 3, 3), np.uint8)
    rgb[..., 0] = 200  # red
    bgr = image_msg(rgb[..., ::-1], "bgr8", "cam", to_time(0.0))
    assert np.array_equal(rgb_array(bgr), rgb)
    with pytest.raises(InvalidInput, match="colour encoding='mono8'"):
        rgb_array(image_msg(np.zeros((2, 2), np.uint8), "mono8", "cam", to_time(0.0)))


def test_execution_and_mode_agree_or_the_launch_is_refused():
    assert validate_launch_args({"mode": "free_run"})["nav"] == {"execution": "cmd_vel",  # one follows the other
                                                                 "odom_timeout": SIM_ODOM_TIMEOUT_S}
    assert validate_launch_args({"execution": "nav2"})["bridge"] == {"mode": "free_run"}
    with pytest.raises(InvalidInput, match="launch argument execution='cmd_vel' is invalid; expected lockstep"):
        validate_launch_args({"mode": "lockstep", "execution": "cmd_vel"})
    with pytest.raises(InvalidInput, match="launch argument execution='lockstep' is invalid; expected cmd_vel or nav2"):
        validate_launch_args({"mode": "free_run", "execution": "lockstep"})
    robot = validate_launch_args({}, "robot")  # no bridge: continuous time by default
    assert robot["nav"]["execution"] == "cmd_vel" and "bridge" not in robot
    assert [s.name for s in GRAPHS["robot"]] == ["nav", "perception"]


def test_stream_detections_are_off_in_a_bench_run_unless_something_reads_them():
    off = {"detect_rate_hz": 0.0}
    assert validate_launch_args({}).get("perception") == off  # the policy detects for itself
    assert "perception" not in validate_launch_args({"record": "true"})  # the recording holds them
    assert "perception" not in validate_launch_args({"detections": "on"})
    assert "perception" not in validate_launch_args({}, "stack") and "perception" not in validate_launch_args({}, "robot")
    assert validate_launch_args({"detections": "off"}, "robot")["perception"] == off
    with pytest.raises(InvalidInput, match="launch argument detections='yes' is invalid; expected one of auto, on, off"):
        validate_launch_args({"detections": "yes"})


def test_topic_remappings():
    assert launch_remaps({"depth_topic": "/head_camera/depth/image", "scan_topic": "/base_scan"}) == [
        ("/head_camera/depth_registered/image_raw", "/head_camera/depth/image")]  # the default name: no rule
    assert "depth_topic" not in str(validate_launch_args({"depth_topic": "/x"}))  # a remapping, not a parameter
    with pytest.raises(InvalidInput, match="launch argument scan_topic='scan' is invalid; expected an absolute topic"):
        validate_launch_args({"scan_topic": "scan"})


def test_robot_launch_file_compiles_and_uses_the_shared_graph():
    path = ROOT / "launch" / "robot.launch.py"
    py_compile.compile(str(path), doraise=True)
    text = path.read_text()
    assert 'GRAPHS["robot"]' in text and "validate_launch_args" in text and "launch_remaps" in text


def test_the_shipped_nav2_parameters_match_the_robot():
    import yaml

    from affectsim_core.ros.topics import TOPICS
    from affectsim_nav.base_control import BaseLimits

    p = yaml.safe_load((ROOT / "config" / "nav2_params.yaml").read_text())
    lim = BaseLimits()
    for costmap in ("local_costmap", "global_costmap"):
        c = p[costmap][costmap]["ros__parameters"]
        assert c["robot_base_frame"] == "base_link" and c["robot_radius"] == 0.3
        assert c["obstacle_layer"]["scan"]["topic"] == TOPICS["scan"]
    assert p["global_costmap"]["global_costmap"]["ros__parameters"]["static_layer"]["map_topic"] == TOPICS["map"]
    assert p["amcl"]["ros__parameters"]["scan_topic"] == TOPICS["scan"].lstrip("/")
    assert p["bt_navigator"]["ros__parameters"]["odom_topic"] == TOPICS["odom"]
    follow = p["controller_server"]["ros__parameters"]["FollowPath"]
    assert follow["desired_linear_vel"] <= lim.max_linear and follow["rotate_to_heading_angular_vel"] <= lim.max_angular
    smoother = p["velocity_smoother"]["ros__parameters"]
    assert smoother["max_velocity"][0] <= lim.max_linear and smoother["max_velocity"][2] <= lim.max_angular


@pytest.mark.parametrize("args, message", [
    (["--max-actions", "-1"], "--max-actions=-1 is invalid"),  # was a SystemError traceback
    (["--max-actions", "10000000000"], "--max-actions=10000000000 is invalid"),  # silently wrapped
    (["--timeout", "1e300"], "--timeout=1e+300 is invalid"),  # OverflowError
    (["--policy", "nope"], "--policy='nope' is invalid"),  # a RuntimeError traceback from the nav node
    (["--target-description", "x" * 300], "--target-description='300 characters' is invalid"),
    (["--record", "rec", "--record-max-mb", "nan"], "--record-max-mb=nan is invalid"),
    (["--record-no-depth"], "--record=None is invalid; expected a directory"),
])
def test_observe_refuses_bad_options_in_one_line_before_touching_the_graph(args, message):
    import subprocess
    import sys

    out = subprocess.run([str(Path(sys.executable).parent / "affectsim"), "observe", *args], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode != 0 and message in out.stderr and "Traceback" not in out.stderr, out.stderr
