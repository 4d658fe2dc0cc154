"""The client of the observer's two actions: the nav node's ``AcquireObservation`` and the perception
node's ``Recognize`` (one object with blocking calls, as nav2_simple_commander's navigator is for Nav2).

Used by the evaluator (:class:`~affectsim_eval.episode.ros_eval_world.RosEvalWorld`), ``affectsim
observe`` on a robot and the soak bench, so that all three send goals, wait, retry lost result
replies and report failures the same way. A goal is sent once (a lost acceptance fails the request,
which the caller may retry); its result is asked for again when a reply is lost
(:func:`~affectsim_core.ros.calls.action_result`); a goal whose result is given up on (a timeout) is
cancelled, best effort, so the robot does not go on searching for nobody. All calls block the
caller's thread: the node must be spun by another one.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from action_msgs.msg import GoalStatus, GoalStatusArray
from action_msgs.srv import CancelGoal
from rclpy.node import Node
from rclpy.qos import qos_profile_action_status_default

from affectsim_core.errors import AffectSimError
from affectsim_core.protocol import Outcome
from affectsim_core.ros import calls
from affectsim_core.ros.action_client import ActionClient
from affectsim_core.ros.topics import SERVICES
from affectsim_interfaces.action import AcquireObservation, Recognize

ACTIONS = {"acquire_observation": ("nav", AcquireObservation), "recognize": ("perception", Recognize)}
ACTIVE = (GoalStatus.STATUS_ACCEPTED, GoalStatus.STATUS_EXECUTING, GoalStatus.STATUS_CANCELING)
FAILED = (Outcome.ABORTED, Outcome.CANCELLED, Outcome.POLICY_ERROR)  # acquisition outcomes without an observation
ABANDON_CANCEL_S = 5.0  # s the cancel of a goal given up on is waited for (the original error follows)


class GraphError(AffectSimError, RuntimeError):
    """A node of the graph refused or failed a request (the message says which node and why)."""


class ObserverClient:
    """Action clients of the nav and perception nodes on ``node``; ``timeout`` (s) bounds every wait."""

    def __init__(self, node: Node, timeout: float = 600.0, callback_group: Any = None) -> None:
        self.node, self.timeout = node, timeout
        self.clients = {key: ActionClient(node, typ, SERVICES[key], callback_group=callback_group)
                        for key, (_, typ) in ACTIONS.items()}
        self._cancel_all: dict[str, Any] = {}
        self._status: dict[str, GoalStatusArray] = {}  # last status array per server
        for key in ACTIONS:
            self._cancel_all[key] = node.create_client(CancelGoal, f"{SERVICES[key]}/_action/cancel_goal",
                                                       callback_group=callback_group)
            node.create_subscription(GoalStatusArray, f"{SERVICES[key]}/_action/status",
                                     lambda m, k=key: self._status.__setitem__(k, m),
                                     qos_profile_action_status_default, callback_group=callback_group)

    def ready(self, key: str) -> bool:
        """True once the server of ``key`` (``acquire_observation`` or ``recognize``) is discovered."""
        return self.clients[key].server_is_ready()

    def wait_for_servers(self, timeout: float, hint: str = "is the node running?") -> None:
        """Block until both servers are up; TimeoutError naming the missing node and ``hint``."""
        t_end = time.monotonic() + timeout
        for key, (node, _) in ACTIONS.items():
            while not self.ready(key):
                if time.monotonic() > t_end:
                    raise TimeoutError(f"{node} {SERVICES[key]} is not available after {timeout:.0f} s: {hint}")
                time.sleep(0.1)

    # ------------------------------------------------------------------ goals
    def start(self, key: str, goal: Any, feedback: Callable | None = None):
        """Send ``goal`` to the server of ``key``; the accepted goal's handle. GraphError if rejected."""
        node = ACTIONS[key][0]
        handle = calls.wait(self.clients[key].send_goal_async(goal, feedback_callback=feedback), self.timeout,
                            f"{node} {key} goal")
        if not handle.accepted:
            raise GraphError(f"{node} {key}: goal rejected")
        return handle

    def result(self, key: str, handle, timeout: float | None = None) -> Any:
        """The result of an accepted goal (asked for again if a reply is lost), waited for ``timeout`` s
        (default: the request timeout)."""
        return calls.action_result(handle, self.timeout if timeout is None else timeout,
                                   f"{ACTIONS[key][0]} {key} result")

    def cancel(self, handle, timeout: float | None = None, key: str = "") -> None:
        """Ask the server to cancel one goal (its result then says ``cancelled``); ``key`` names the action
        in a timeout."""
        what = f"{ACTIONS[key][0]} {key} cancel" if key else "cancel"
        calls.wait(handle.cancel_goal_async(), self.timeout if timeout is None else timeout, what)

    def send(self, key: str, goal: Any, feedback: Callable | None = None, timeout: float | None = None) -> Any:
        """:meth:`start` then :meth:`result` (waited for ``timeout`` s): the raw result, whatever its outcome.
        A goal whose result is given up on (an exception while waiting: a timeout, an interrupt) is
        cancelled first, best effort (waited for at most :data:`ABANDON_CANCEL_S`; its own failure is
        not reported); not once the node's context is shut down (a stopping node, Ctrl-C under rclpy's
        signal handler), which must leave at once and could not send it anyway."""
        handle = self.start(key, goal, feedback)
        try:
            return self.result(key, handle, timeout)
        except BaseException:
            if self.node.context.ok():  # not on a shutdown: a stopping node leaves at once (node_main's grace)
                try:
                    self.cancel(handle, ABANDON_CANCEL_S, key)
                except Exception:  # noqa: BLE001 - the error that made us give up is the one to report
                    pass
            raise

    def acquire(self, goal: AcquireObservation.Goal, feedback: Callable | None = None) -> AcquireObservation.Result:
        """An acquisition's result; GraphError when it ended without an observation (aborted, cancelled
        or a policy error with an empty trajectory)."""
        res = self.send("acquire_observation", goal, feedback)
        if res.outcome in FAILED and not res.trajectory:
            raise GraphError(f"nav acquire_observation: {res.outcome}: {res.message}")
        return res

    def recognize(self, goal: Recognize.Goal) -> Recognize.Result:
        """A recognition's result; GraphError when the node refused the clip (a message, no predictions)."""
        res = self.send("recognize", goal)
        if res.message and not res.predictions:
            raise GraphError(f"perception recognize{' (stream)' if goal.stream else ''}: {res.message}")
        return res

    def settle(self, timeout: float | None = None) -> None:
        """Cancel every goal of both servers and wait until none is active (at most ``timeout`` s, default
        the request timeout): after a failed request, a goal whose acceptance or result was lost may
        still be moving the robot."""
        timeout = self.timeout if timeout is None else timeout
        for key, cli in self._cancel_all.items():  # a zero goal id and stamp cancel all goals
            calls.call(cli, CancelGoal.Request(), timeout, f"{SERVICES[key]} cancel")
        t_end = time.monotonic() + timeout
        while active := [k for k, m in self._status.items() if any(s.status in ACTIVE for s in m.status_list)]:
            if time.monotonic() > t_end:
                raise TimeoutError(f"goals of {', '.join(active)} still run {timeout:.0f} s after they were cancelled")
            time.sleep(0.05)

    def destroy(self) -> None:
        for c in self.clients.values():
            c.destroy()
