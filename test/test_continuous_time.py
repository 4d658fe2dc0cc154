"""Continuous time: the cmd_vel executor against the free-running bridge, and a robot stand-in (the
bridge publishing a robot's topics, its services unused) under the robot graph."""

import math
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import rclpy
from geometry_msgs.msg import Twist
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from affectsim_bridge.content.library import Library, build
from affectsim_core.actions import Action
from affectsim_core.protocol import FORWARD_M, STEP_SECONDS, TURN_RAD
from affectsim_core.ros.action_client import ActionClient
from affectsim_core.ros.bridge_client import BridgeClient
from affectsim_core.ros.conversions import from_time
from affectsim_core.ros.env import ensure_loopback
from affectsim_core.ros.topics import SERVICES
from affectsim_interfaces.action import AcquireObservation
from affectsim_nav.base_control import BaseLimits
from affectsim_nav.ros_robot import CMD_VEL_TOPICS, CmdVelRobot, OdometryLost, current_frame
from affectsim_ros.graph import SIM_ODOM_TIMEOUT_S
from affectsim_ros.launcher import GraphProcesses
from waiting import wait_until

SCENE = "test_apartment"
CAMERA_PERIOD = 1.0 / 15.0  # s, the bridge's free-run camera rate


def _publisher(client: BridgeClient):
    pub = client.node.create_publisher(Twist, "/cmd_vel", 10)

    def publish(v: float, w: float) -> None:
        msg = Twist()
        msg.linear.x, msg.angular.z = float(v), float(w)
        pub.publish(msg)

    return publish


@pytest.mark.serial  # the overshoot is the executor's wall-clock latency: not beside other tests' processes
def test_cmd_vel_executor_drives_the_free_running_bridge(tmp_path):
    # at half real time: the tolerances below hold on a 2-core machine running other tests beside this one (at
    # real time, there, a move overshot by 4.5 cm); `affectsim bench pace` measures the pace a machine keeps
    with GraphProcesses("bench", nodes=("bridge",), args={"mode": "free_run", "real_time_factor": "0.5"},
                        log_dir=tmp_path) as g:
        ensure_loopback(g.domain_id)
        rclpy.init()
        client = BridgeClient("cmd_vel_test", topics=CMD_VEL_TOPICS)
        try:
            client.wait_for_bridge(90)
            assert client.load(SCENE, 1.5, 2.5, 0.0).success
            robot = CmdVelRobot(client, _publisher(client), BaseLimits(), 0.3, timeout=30.0, odom_timeout=SIM_ODOM_TIMEOUT_S)
            res = robot.apply(Action.FORWARD)  # within 3 cm: a command acts until the next one (latency)
            assert res.ending == "done" and not res.clipped
            assert abs(res.distance_m - FORWARD_M) <= 0.03 and abs(res.pose.x - (1.5 + FORWARD_M)) < 0.03, res
            assert abs(res.pose.y - 2.5) < 0.01, res
            t = res.sim_time
            res = robot.apply(Action.TURN_LEFT)
            assert res.ending == "done" and abs(res.pose.yaw - TURN_RAD) <= math.radians(3), res
            assert res.sim_time > t  # continuous time: the turn took sim time of its own
            t = res.sim_time
            res = robot.apply(Action.STOP)
            assert res.ending == "done" and STEP_SECONDS - 1e-6 <= res.sim_time - t <= STEP_SECONDS + 2 * CAMERA_PERIOD
            obs = robot.observe(3)
            assert obs.stamp == res.sim_time and obs.pose == pytest.approx((res.pose.x, res.pose.y, res.pose.yaw))
            # the head, through the topic of a joint trajectory controller, as a user's node would send it
            head = client.node.create_publisher(JointTrajectory, "/head_controller/joint_trajectory", 10)
            for names, positions in ((["head_tilt_joint"], [1.6]),  # beyond the limit: refused, logged
                                     (["head_tilt_joint", "head_pan_joint"], [0.5, 0.0])):
                head.publish(JointTrajectory(joint_names=names, points=[JointTrajectoryPoint(positions=positions)]))
            pitch = lambda: -math.asin(float(current_frame(client, 10.0).camera_pose[2, 2]))  # noqa: E731
            wait_until(lambda: abs(pitch() - 0.5) < 1e-3, 30, "the camera looking 0.5 rad down")
            assert "head_tilt=1.6 is invalid" in (tmp_path / "bridge.log").read_text()
            # facing the west wall 0.35 m away (0.05 m from the front edge): inside the safety distance, no motion
            assert client.load(SCENE, 0.85, 2.5, math.pi).success
            robot = CmdVelRobot(client, _publisher(client), BaseLimits(), 0.3, timeout=30.0, odom_timeout=SIM_ODOM_TIMEOUT_S)
            res = robot.apply(Action.FORWARD)
            assert res.ending == "blocked" and res.clipped and res.distance_m < 0.02, res
            g.stop()  # the robot goes away: the next action ends naming the missing odometry, within its timeout
            robot.timeout = 2.0
            with pytest.raises(OdometryLost, match="no odometry on /odom"):
                robot.apply(Action.FORWARD)
        finally:
            client.close()
            rclpy.shutdown()


@pytest.mark.slow  # > 30 s of real time: make test-all
def test_a_robot_stand_in_acquires_through_the_robots_own_topics_only(tmp_path):
    """The bridge in free_run without ground truth, its depth remapped to the Fetch's other depth topic;
    ``affectsim launch robot`` (nav + perception, cmd_vel) on top, remapped the same way."""
    lib_dir = tmp_path / "motions"
    build(lib_dir, seed=0, log=lambda s: None, ag_performers=1, ag_takes=1, oc_performances=5, oc_performers=1,
          dyadic=0, ev_performers=0)
    mid = sorted(i for i, e in Library(lib_dir).entries.items() if e["action"] == "standing")[0]
    person = {"id": "target", "x": 4.0, "y": 2.8, "yaw": math.pi, "appearance": 0, "is_target": True,
              "motion_id": mid, "phase": 0.3}
    remap = {"depth_topic": "/head_camera/depth/image"}
    logs = tmp_path / "logs"
    with GraphProcesses("bench", nodes=("bridge",), args={"mode": "free_run", **remap}, log_dir=logs / "sim",
                        extra_params={"bridge": {"motion_library": str(lib_dir), "publish_ground_truth": False}}) as sim:
        ensure_loopback(sim.domain_id)
        rclpy.init()
        client = BridgeClient("stand_in_test", topics=("rgb",))
        try:
            client.wait_for_bridge(90)
            assert client.load(SCENE, 1.5, 2.5, 0.0, humans=[person]).success  # the experimenter sets the scene
            with GraphProcesses("robot", args=remap, domain_id=sim.domain_id, log_dir=logs / "robot",  # the simulator
                                extra_params={"nav": {"odom_timeout": SIM_ODOM_TIMEOUT_S}}) as robot:  # may stall
                acquire = ActionClient(client.node, AcquireObservation, SERVICES["acquire_observation"])
                assert acquire.wait_for_server(90), (logs / "robot" / "nav.log").read_text()
                done = threading.Event()
                fut = acquire.send_goal_async(AcquireObservation.Goal(episode_id="stand_in", clip_frames=12,
                                                                      max_actions=80))
                fut.add_done_callback(lambda f: done.set())
                assert done.wait(60)
                got = threading.Event()
                result = fut.result().get_result_async()
                result.add_done_callback(lambda f: got.set())
                assert got.wait(300), (logs / "robot" / "nav.log").read_text()
                res = result.result().result
                run = tmp_path / "session"  # the same robot, observed and stored as an experimenter would
                obs = subprocess.run([str(Path(sys.executable).parent / "affectsim"), "observe", "--label", "neutral",
                                      "--out", str(run), "--episode-id", "s1", "--clip-frames", "12",
                                      "--max-actions", "80", *(f"{k}:={v}" for k, v in remap.items())],
                                     env=robot.env, capture_output=True, text=True, timeout=600)
                assert robot.poll() == {"nav": None, "perception": None}
        finally:
            client.close()
            rclpy.shutdown()
    nav_log = (logs / "robot" / "nav.log").read_text()
    assert res.outcome == "handoff", (res.message, nav_log)
    stamps = np.array([from_time(t) for t in res.clip_stamps])
    gaps = np.diff(stamps)  # the clip sampled from the 15 Hz stream at the protocol's 4 Hz times
    assert len(stamps) == 12 and np.all(np.abs(gaps - STEP_SECONDS) <= CAMERA_PERIOD + 1e-6), stamps
    assert len(res.clip_frames) == 8 and "execution=cmd_vel" in nav_log
    assert obs.returncode == 0, obs.stdout + obs.stderr
    assert "A-Obs outcome " in obs.stdout and "pose-temporal: p_init" in obs.stdout, obs.stdout
    report = subprocess.run([str(Path(sys.executable).parent / "affectsim"), "report", str(run)],
                            capture_output=True, text=True, timeout=300)
    assert report.returncode == 0, report.stderr
    text = (run / "report.md").read_text()
    assert "1 episodes of the robot split" in text and "| recognizer | P-Init | A-Obs | Δgain |" in text, text
    assert "Observed on a robot: no dataset episode was evaluated" in text and "not recorded" not in text, text
    bridge_log = (logs / "sim" / "bridge.log").read_text()
    assert "service calls: load_world=1, apply_action=0, render_views=0" in bridge_log, bridge_log


def test_the_pace_of_a_free_running_bridge_is_read_from_its_clock(tmp_path):
    """``bench pace``'s clock sampler on a real free-running bridge at factor 2: sim time advances, and
    never faster than requested (it does not race after the bridge's start-up stalls)."""
    from affectsim_ros.benches.transfer import ClockSampler, achieved_factor

    with GraphProcesses("stack", nodes=("bridge",), args={"mode": "free_run", "real_time_factor": "2.0"},
                        log_dir=tmp_path / "logs") as g:
        clock = ClockSampler(g.domain_id)
        try:
            wait_until(lambda: len(clock.samples) > 1 and clock.samples[-1][0] - clock.samples[0][0] > 2.0, 120,
                       "2 s of /clock")
        finally:
            clock.close()
    pace = achieved_factor(list(clock.samples))
    assert 0.0 < pace["running"] <= 2.0 * 1.05 + 0.1, pace  # a slow machine achieves less, never more
