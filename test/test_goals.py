"""A goal's result reaches the client when the server's status publication fails (seen in the
soak: ``Failed publish goal status array: cannot publish data`` made rclpy answer an empty result).

A real rclpy action server and a plain rclpy client in one process; the fault is a DDS write that
fails once, injected by wrapping the server's rcl handle for the duration of the transition only
(the execute callback runs on the single executor thread, so nothing else uses the handle then)."""

from __future__ import annotations

import threading

import pytest
import rclpy
from action_msgs.msg import GoalStatus
from rclpy.action import ActionClient, ActionServer
from rclpy.action.server import RCLError
from rclpy.executors import SingleThreadedExecutor

from affectsim_core.ros.goals import end_goal
from affectsim_interfaces.action import Recognize


class _FailingPublish:
    """The server's rcl handle, whose ``publish_status`` fails as a DDS write that cannot publish."""

    def __init__(self, inner) -> None:
        self._inner = inner

    def publish_status(self) -> None:
        raise RCLError("Failed publish goal status array: cannot publish data (injected)")

    def __getattr__(self, name):
        return getattr(self._inner, name)


def _result_through_a_failed_publication(end) -> tuple[int, Recognize.Result, list[str]]:
    """Send one goal to a server whose execute callback ends the goal with ``end(handle)`` while the
    status publication fails; returns (status, result, server log lines)."""
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    logged: list[str] = []
    try:
        node = rclpy.create_node("goal_end_test", context=ctx)
        server_box = {}

        def execute(handle):
            res = Recognize.Result()
            res.message = "the result the client must get"
            server = server_box["server"]
            real = server._handle
            server._handle = _FailingPublish(real)
            try:
                end(handle)
            finally:
                server._handle = real
            return res

        server_box["server"] = ActionServer(node, Recognize, "/goal_end_test/recognize", execute_callback=execute)
        client = ActionClient(node, Recognize, "/goal_end_test/recognize")
        executor = SingleThreadedExecutor(context=ctx)
        executor.add_node(node)
        spinner = threading.Thread(target=executor.spin, daemon=True)
        spinner.start()
        assert client.wait_for_server(timeout_sec=30)
        done = threading.Event()
        box = {}

        def got_result(fut):
            box["response"] = fut.result()
            done.set()

        def accepted(fut):
            fut.result().get_result_async().add_done_callback(got_result)

        client.send_goal_async(Recognize.Goal()).add_done_callback(accepted)
        assert done.wait(30), "no result within 30 s"
        executor.shutdown(timeout_sec=5)
        return box["response"].status, box["response"].result, logged
    finally:
        rclpy.shutdown(context=ctx)


def test_a_failed_status_publication_leaves_the_result_intact():
    logged: list[str] = []
    status, result, _ = _result_through_a_failed_publication(lambda h: end_goal(h, "succeed", logged.append))
    assert status == GoalStatus.STATUS_SUCCEEDED
    assert result.message == "the result the client must get"
    assert len(logged) == 1 and "status array was not published" in logged[0] and "cannot publish data" in logged[0]


def test_without_it_rclpy_answers_an_empty_result():
    """The failure mode itself, so that the test above can fail: the plain transition raises and the
    client gets the empty result of rclpy's exception path."""
    status, result, _ = _result_through_a_failed_publication(lambda h: h.succeed())
    assert status == GoalStatus.STATUS_SUCCEEDED  # the state changed before the publication failed
    assert result.message == ""


def test_an_invalid_transition_still_raises():
    """Only a failed publication after the state changed is absorbed, not a transition rcl refuses."""
    seen = {}

    def twice(handle):
        end_goal(handle, "succeed", lambda s: None)
        with pytest.raises(RCLError):
            end_goal(handle, "abort", lambda s: None)
        seen["raised"] = True

    _result_through_a_failed_publication(twice)
    assert seen.get("raised")
