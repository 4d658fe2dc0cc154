"""ObserverClient, the one client of the nav and perception actions (evaluator, ``affectsim observe``,
the soak bench), against a real rclpy action server in this process: a rejected goal names the node
and action, and a goal whose result is given up on is cancelled before the error propagates."""

from __future__ import annotations

import threading

import pytest
import rclpy
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import MultiThreadedExecutor

from affectsim_core.ros.observer_client import GraphError, ObserverClient
from affectsim_core.ros.topics import SERVICES
from affectsim_interfaces.action import Recognize
from waiting import wait_until


@pytest.fixture
def graph():
    """A perception-like Recognize server that runs until cancelled (or rejects, when told), and an
    ObserverClient on another node; both spun by one multi-threaded executor."""
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    state = {"reject": False, "cancelled": threading.Event(), "stop": threading.Event()}
    executor = MultiThreadedExecutor(num_threads=4, context=ctx)
    try:
        server_node = rclpy.create_node("observer_client_test_server", context=ctx)
        group = ReentrantCallbackGroup()

        def execute(handle):
            while not handle.is_cancel_requested:
                if state["stop"].wait(0.01):  # the test is over (its cancel never came): free the thread
                    handle.abort()
                    return Recognize.Result(message="aborted")
            handle.canceled()
            state["cancelled"].set()
            return Recognize.Result(message="cancelled")

        ActionServer(server_node, Recognize, SERVICES["recognize"], execute_callback=execute,
                              goal_callback=lambda g: GoalResponse.REJECT if state["reject"] else GoalResponse.ACCEPT,
                              cancel_callback=lambda h: CancelResponse.ACCEPT, callback_group=group)
        client_node = rclpy.create_node("observer_client_test", context=ctx)
        observer = ObserverClient(client_node, timeout=30.0, callback_group=group)
        executor.add_node(server_node)
        executor.add_node(client_node)
        spinner = threading.Thread(target=executor.spin, daemon=True)
        spinner.start()
        wait_until(lambda: observer.ready("recognize"), 30, "the test's Recognize server discovered", 0.05)
        yield observer, state
    finally:
        state["stop"].set()
        executor.shutdown(timeout_sec=5)
        rclpy.shutdown(context=ctx)


def test_a_goal_whose_result_is_given_up_on_is_cancelled(graph):
    observer, state = graph
    with pytest.raises(TimeoutError, match="perception recognize result"):
        observer.send("recognize", Recognize.Goal(), timeout=1.0)
    assert state["cancelled"].wait(10), "the abandoned goal was not cancelled"


def test_cancel_then_result_gives_the_cancelled_result(graph):
    observer, state = graph
    handle = observer.start("recognize", Recognize.Goal())
    observer.cancel(handle, timeout=10.0, key="recognize")
    assert observer.result("recognize", handle, timeout=10.0).message == "cancelled"
    assert state["cancelled"].is_set()


def test_a_rejected_goal_names_the_node_and_action(graph):
    observer, state = graph
    state["reject"] = True
    with pytest.raises(GraphError, match="perception recognize: goal rejected"):
        observer.send("recognize", Recognize.Goal())
