"""With ``use_nav2`` the nav node hands the policy's point-to-point goals to Nav2's NavigateToPose.

Nav2 is not installable here, so the server is built in the test from Nav2's own action
definition (test/nav2_msgs, built by ``make setup`` where nav2_msgs is missing). It drives the
robot through the bridge's lockstep service, publishes feedback and honours cancels.
"""

import math
import threading
import time

import pytest
import rclpy
from rclpy.action import ActionClient, ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node

from affectsim_bridge.humans.library import Library, build
from affectsim_core.actions import Action
from affectsim_core.ros.bridge_client import BridgeClient
from affectsim_core.ros.env import ensure_loopback
from affectsim_interfaces.action import AcquireObservation
from affectsim_ros.launcher import GraphProcesses

NavigateToPose = pytest.importorskip("nav2_msgs.action").NavigateToPose


class FakeNav2(Node):
    """NavigateToPose server: turn toward the goal, then forward, one lockstep action at a time."""

    def __init__(self, bridge: BridgeClient) -> None:
        super().__init__("fake_nav2")
        self.bridge = bridge
        self.goals: list[tuple[str, float, float]] = []
        self.cancelled = 0
        ActionServer(self, NavigateToPose, "navigate_to_pose", execute_callback=self._run,
                     goal_callback=lambda g: GoalResponse.ACCEPT, cancel_callback=lambda g: CancelResponse.ACCEPT,
                     callback_group=ReentrantCallbackGroup())

    def _run(self, handle):
        p = handle.request.pose
        self.goals.append((p.header.frame_id, p.pose.position.x, p.pose.position.y))
        pose = self.bridge.apply(int(Action.STOP)).pose
        for _ in range(120):
            if handle.is_cancel_requested:
                self.cancelled += 1
                handle.canceled()
                return NavigateToPose.Result()
            dx, dy = p.pose.position.x - pose.x, p.pose.position.y - pose.y
            if math.hypot(dx, dy) < 0.3:
                break
            err = math.atan2(dy, dx) - pose.theta
            err = math.atan2(math.sin(err), math.cos(err))
            act = Action.FORWARD if abs(err) < math.radians(10) else (Action.TURN_LEFT if err > 0 else Action.TURN_RIGHT)
            pose = self.bridge.apply(int(act)).pose
            fb = NavigateToPose.Feedback()
            fb.distance_remaining = float(math.hypot(dx, dy))
            handle.publish_feedback(fb)
            time.sleep(0.01)
        handle.succeed()
        return NavigateToPose.Result()


def test_policy_goals_go_to_navigate_to_pose(tmp_path):
    lib_dir = tmp_path / "motions"
    build(lib_dir, seed=0, log=lambda s: None, ag_performers=1, ag_takes=1, oc_performances=5, oc_performers=1, dyadic=0)
    mid = sorted(i for i, e in Library(lib_dir).entries.items() if e["action"] == "standing")[0]
    humans = [{"id": "target", "x": 8.5, "y": 4.2, "yaw": math.pi, "appearance": 0, "is_target": True,
               "motion_id": mid, "phase": 0.3}]  # in the kitchen, out of view: the policy must search
    with GraphProcesses("bench", nodes=("bridge", "nav"), args={"mode": "lockstep"}, log_dir=tmp_path / "logs",
                        extra_params={"bridge": {"motion_library": str(lib_dir)}, "nav": {"use_nav2": True}}) as g:
        ensure_loopback(g.domain_id)
        rclpy.init()
        client = BridgeClient("nav2_test_client", topics=("rgb",))
        fake = FakeNav2(client)
        executor = MultiThreadedExecutor(num_threads=3)
        executor.add_node(fake)
        spin = threading.Thread(target=executor.spin, daemon=True)
        spin.start()
        try:
            client.wait_for_bridge(90)
            assert client.load("test_apartment", 1.5, 2.5, 1.57, humans=humans).success
            acquire = ActionClient(client.node, AcquireObservation, "/affectsim/acquire_observation")
            assert acquire.wait_for_server(60)
            done = threading.Event()
            fut = acquire.send_goal_async(AcquireObservation.Goal(episode_id="n2", clip_frames=4, max_actions=60))
            fut.add_done_callback(lambda f: done.set())
            assert done.wait(30)
            rdone = threading.Event()
            rf = fut.result().get_result_async()
            rf.add_done_callback(lambda f: rdone.set())
            assert rdone.wait(300), (tmp_path / "logs" / "nav.log").read_text()
            res = rf.result().result
        finally:
            executor.shutdown()
            client.close()
            rclpy.shutdown()
    assert res.outcome in ("handoff", "budget_exhausted"), res.message
    assert fake.goals, "no NavigateToPose goal was sent"
    assert all(frame == "map" for frame, _, _ in fake.goals)
    assert res.planner_calls == len(fake.goals)  # one counted planner call per goal, as in built-in mode
    assert res.path_length > 0.5  # the robot moved under the external navigator
    assert res.attempted_translations <= res.actions  # Nav2 steps are not primitive translations
