"""Point-to-point motion delegated to Nav2's ``NavigateToPose`` action (``execution: nav2``).

Used where a full ROS 2 install runs Nav2 (simulation in free-run mode, or the real robot). The
policy keeps seeing observations while Nav2 drives and may preempt the goal at any step. The
``nav2_msgs`` package is imported only when delegation is enabled.
"""

from __future__ import annotations

import math
import threading

from action_msgs.msg import GoalStatus
from rclpy.node import Node

from affectsim_core.errors import MissingDependency
from affectsim_core.ros.action_client import ActionClient


class Nav2Mover:
    """:class:`~affectsim_nav.active.GoalMover` over a ``nav2_msgs/action/NavigateToPose`` server."""

    def __init__(self, node: Node, action_name: str = "navigate_to_pose", timeout: float = 10.0) -> None:
        try:
            from nav2_msgs.action import NavigateToPose  # optional: only with execution nav2
        except ImportError as exc:
            raise MissingDependency("execution=nav2", "nav2_msgs", "install Nav2 (ros-<distro>-navigation2) or run "
                                    "`make setup`, which builds its NavigateToPose type for tests") from exc
        self._type = NavigateToPose
        self.node = node
        self.client = ActionClient(node, NavigateToPose, action_name)
        self.action_name = action_name
        self.timeout = timeout
        self._handle = None
        self._result = None
        self._done = threading.Event()

    def send(self, goal: tuple[float, float, float]) -> None:
        if not self.client.wait_for_server(timeout_sec=self.timeout):
            raise TimeoutError(f"Nav2 action server {self.action_name!r} not available within {self.timeout:.0f} s")
        msg = self._type.Goal()
        msg.pose.header.frame_id = "map"
        msg.pose.pose.position.x, msg.pose.pose.position.y = float(goal[0]), float(goal[1])
        msg.pose.pose.orientation.z = math.sin(goal[2] / 2)
        msg.pose.pose.orientation.w = math.cos(goal[2] / 2)
        self._done.clear()
        self._result = None
        accepted = threading.Event()
        fut = self.client.send_goal_async(msg)
        fut.add_done_callback(lambda f: (setattr(self, "_handle", f.result()), accepted.set()))
        if not accepted.wait(self.timeout):
            raise TimeoutError(f"Nav2 did not answer the goal within {self.timeout:.0f} s")
        if not self._handle.accepted:
            self._result, self._handle = False, None
            self._done.set()
            return
        self._handle.get_result_async().add_done_callback(self._on_result)

    def _on_result(self, fut) -> None:
        self._result = fut.result().status == GoalStatus.STATUS_SUCCEEDED
        self._done.set()

    def finished(self) -> bool | None:
        return self._result if self._done.is_set() else None

    def cancel(self) -> None:
        if self._handle is not None and not self._done.is_set():
            self._handle.cancel_goal_async()
        self._handle = None
