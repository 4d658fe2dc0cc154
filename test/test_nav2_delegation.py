"""``execution: nav2``: the nav node hands a policy's point-to-point goals to Nav2's NavigateToPose,
in continuous time (the bridge in free_run, primitive actions through /cmd_vel).

Nav2 is not installable here, so the server is built in the test from Nav2's own action
definition (test/nav2_msgs, built by ``make setup`` where nav2_msgs is missing). Like Nav2 it
plans on ``/map`` (with the project's planner), localises with TF ``map -> base_link`` and drives
through ``/cmd_vel``, publishes feedback and honours cancels.
"""

import math
import threading

import numpy as np
import pytest
import rclpy
from action_msgs.msg import GoalStatus
from geometry_msgs.msg import Twist
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node

from affectsim_bridge.content.library import Library, build
from affectsim_core.ros import tf_tree
from affectsim_core.ros.action_client import ActionClient
from affectsim_core.ros.bridge_client import BridgeClient
from affectsim_core.ros.conversions import from_time
from affectsim_core.ros.env import ensure_loopback
from affectsim_interfaces.action import AcquireObservation
from affectsim_nav.planner import GridPlanner
from affectsim_nav.ros_robot import map_info
from affectsim_ros.launcher import GraphProcesses

NavigateToPose = pytest.importorskip("nav2_msgs.action").NavigateToPose


class FakeNav2(Node):
    """NavigateToPose server: a plan on /map, then pure pursuit through /cmd_vel at the odometry rate."""

    def __init__(self, client: BridgeClient) -> None:
        super().__init__("fake_nav2")
        self.io = client
        self.goals: list[tuple[str, float, float]] = []
        self.cancelled = 0
        self.changed = threading.Condition()  # notified when a goal arrives or is cancelled
        self.cmd = self.create_publisher(Twist, "/cmd_vel", 10)
        ActionServer(self, NavigateToPose, "navigate_to_pose", execute_callback=self._run,
                     goal_callback=lambda g: GoalResponse.ACCEPT, cancel_callback=lambda g: CancelResponse.ACCEPT,
                     callback_group=ReentrantCallbackGroup())

    def until(self, predicate, timeout: float) -> bool:
        """Wait until ``predicate()`` holds (checked whenever a goal arrives or is cancelled)."""
        with self.changed:
            return self.changed.wait_for(predicate, timeout)

    def _pose(self) -> tuple[float, float, float, float]:
        """(x, y, yaw) of base_link in map and the stamp, from the newest /tf."""
        tf = self.io.wait_for("tf", lambda m: bool(m.transforms), 10.0)
        base = tf_tree.buffer_of(None, tf).lookup("map", "base_link", from_time(tf.transforms[0].header.stamp))
        return (base.translation[0], base.translation[1], math.atan2(base.rotation[1, 0], base.rotation[0, 0]),
                from_time(tf.transforms[0].header.stamp))

    def _drive(self, v: float, w: float) -> None:
        msg = Twist()
        msg.linear.x, msg.angular.z = float(v), float(w)
        self.cmd.publish(msg)

    def _run(self, handle):
        p = handle.request.pose
        goal = (p.pose.position.x, p.pose.position.y)
        with self.changed:
            self.goals.append((p.header.frame_id, *goal))
            self.changed.notify_all()
        x, y, yaw, t = self._pose()
        planner = GridPlanner(map_info(self.io.wait_for("map", timeout=10.0), (x, y, yaw)))
        field = planner.plan_from((x, y))
        cell = planner.nearest_traversable(goal)
        path = field.path_to(cell) if field is not None and cell is not None else []
        t_end = t + 60.0  # s of sim time for one goal
        while path and t < t_end:
            if handle.is_cancel_requested:
                self._drive(0.0, 0.0)
                with self.changed:
                    self.cancelled += 1
                    self.changed.notify_all()
                handle.canceled()
                return NavigateToPose.Result()
            while len(path) > 1 and math.hypot(path[0][0] - x, path[0][1] - y) < 0.3:
                path.pop(0)
            if math.hypot(path[-1][0] - x, path[-1][1] - y) < 0.25:
                break
            err = math.atan2(path[0][1] - y, path[0][0] - x) - yaw
            err = math.atan2(math.sin(err), math.cos(err))
            self._drive(0.4 if abs(err) < 0.4 else 0.0, float(np.clip(2.0 * err, -1.0, 1.0)))
            fb = NavigateToPose.Feedback()
            fb.distance_remaining = float(math.hypot(goal[0] - x, goal[1] - y))
            handle.publish_feedback(fb)
            self.io.wait_for("tf", lambda m, t=t: bool(m.transforms) and from_time(m.transforms[0].header.stamp) > t, 10.0)
            x, y, yaw, t = self._pose()
        self._drive(0.0, 0.0)
        (handle.succeed if path else handle.abort)()
        return NavigateToPose.Result()


def _send(action, goal):
    done = threading.Event()
    fut = action.send_goal_async(goal)
    fut.add_done_callback(lambda f: done.set())
    assert done.wait(30)
    return fut.result()


def _result(handle, timeout=300):
    done = threading.Event()
    rf = handle.get_result_async()
    rf.add_done_callback(lambda f: done.set())
    assert done.wait(timeout)
    return rf.result()


@pytest.mark.slow  # > 30 s of real time: make test-all
def test_policy_goals_go_to_navigate_to_pose_in_continuous_time(tmp_path):
    lib_dir = tmp_path / "motions"
    build(lib_dir, seed=0, log=lambda s: None, ag_performers=1, ag_takes=1, oc_performances=5, oc_performers=1, dyadic=0,
          ev_performers=0)
    mid = sorted(i for i, e in Library(lib_dir).entries.items() if e["action"] == "standing")[0]
    humans = [{"id": "target", "x": 8.5, "y": 4.2, "yaw": math.pi, "appearance": 0, "is_target": True,
               "motion_id": mid, "phase": 0.3}]  # in the kitchen, out of view: the policy must search
    logs = tmp_path / "logs"
    with GraphProcesses("bench", nodes=("bridge", "nav"), args={"execution": "nav2"}, log_dir=logs,
                        extra_params={"bridge": {"motion_library": str(lib_dir)}}) as g:
        ensure_loopback(g.domain_id)
        rclpy.init()
        client = BridgeClient("nav2_test_client", topics=("rgb", "tf", "map"))
        fake = FakeNav2(client)
        executor = MultiThreadedExecutor(num_threads=3)
        executor.add_node(fake)
        spin = threading.Thread(target=executor.spin, daemon=True)
        spin.start()
        try:
            client.wait_for_bridge(90)
            acquire = ActionClient(client.node, AcquireObservation, "/affectsim/acquire_observation")
            assert acquire.wait_for_server(60)
            # a cancel while Nav2 drives cancels its goal too
            assert client.load("test_apartment", 1.5, 2.5, 1.57, humans=humans).success
            first = _send(acquire, AcquireObservation.Goal(episode_id="c", clip_frames=4, max_actions=60))
            assert fake.until(lambda: fake.goals, 120), (logs / "nav.log").read_text()
            first.cancel_goal_async()
            assert _result(first).status == GoalStatus.STATUS_CANCELED
            assert fake.until(lambda: fake.cancelled >= 1, 30) and fake.cancelled == 1
            # a newer goal preempts a running one, whose Nav2 goal is cancelled; the newer one runs to its end
            assert client.load("test_apartment", 1.5, 2.5, 1.57, humans=humans).success
            n_goals = len(fake.goals)
            old = _send(acquire, AcquireObservation.Goal(episode_id="p", clip_frames=4, max_actions=60))
            assert fake.until(lambda: len(fake.goals) > n_goals, 120)
            new = _send(acquire, AcquireObservation.Goal(episode_id="n2", clip_frames=4, max_actions=60))
            preempted = _result(old)
            assert preempted.status == GoalStatus.STATUS_ABORTED and "preempted" in preempted.result.message
            assert fake.until(lambda: fake.cancelled >= 2, 30) and fake.cancelled == 2
            res = _result(new).result
        finally:
            executor.shutdown()
            client.close()
            rclpy.shutdown()
    log = (logs / "nav.log").read_text()
    assert res.outcome in ("handoff", "budget_exhausted"), (res.message, log)
    assert all(frame == "map" for frame, _, _ in fake.goals)
    assert res.planner_calls >= 1 and res.path_length > 0.5, log  # the robot moved under the external navigator
    assert res.attempted_translations <= res.actions  # Nav2 steps are not primitive translations
    assert "service calls: load_world=2, apply_action=0, render_views=0" in (logs / "bridge.log").read_text()
