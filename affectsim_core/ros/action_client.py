"""An action client whose goal requests cannot race their replies.

The rclpy of the pinned ROS 2 wheels registers a goal's future twice in ``send_goal_async``: once
under the client's lock, then again, outside it, with a second future that replaces the first. A
reply taken by the executor thread between the two completes the second future before it is known
to the client, and ``send_goal_async`` raises ``ValueError: list.remove(x): x not in list`` in the
sending thread (seen in this project's nav node test; upstream ros2/rclpy#1123 and its follow-ups).
:class:`ActionClient` registers the future once, under the lock that also guards taking replies, so
the reply can only complete a future the client already tracks. The same rclpy also adds a new
client to its node's waitables before creating that lock, so an executor spinning meanwhile raised
``AttributeError: 'ActionClient' object has no attribute '_lock'`` (seen once in the evaluator);
this client has its lock before it is added. Every action client of the project is this one.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable

from rclpy.action import ActionClient as _RclpyActionClient
from rclpy.task import Future


class ActionClient(_RclpyActionClient):
    """:class:`rclpy.action.ActionClient` with a race-free :meth:`send_goal_async`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._lock = threading.Lock()  # before the base class makes the client visible to a spinning executor
        super().__init__(*args, **kwargs)

    def send_goal_async(self, goal: Any, feedback_callback: Callable | None = None, goal_uuid: Any = None) -> Future:
        """Send ``goal``; the future completes with the goal handle when the server answers."""
        if not isinstance(goal, self._action_type.Goal):
            raise TypeError(f"goal of type {type(goal).__name__} is invalid; expected {self._action_type.Goal.__name__}")
        request = self._action_type.Impl.SendGoalService.Request()
        request.goal_id = self._generate_random_uuid() if goal_uuid is None else goal_uuid
        request.goal = goal
        if feedback_callback is not None:  # before the request: feedback may follow the acceptance at once
            self._feedback_callbacks[bytes(request.goal_id.uuid)] = feedback_callback
        future: Future = Future()
        # taking a reply holds this lock: none can complete the future before this block ends (an rclpy
        # without the lock, e.g. a sourced older distribution, has no second registration either)
        with getattr(self, "_lock", None) or contextlib.nullcontext():
            sequence = self._client_handle.send_goal_request(request)
            if sequence in self._pending_goal_requests:
                raise RuntimeError(f"goal request sequence {sequence} is already pending")
            self._pending_goal_requests[sequence] = future
            self._goal_sequence_number_to_goal_id[sequence] = request.goal_id
            self.add_future(future)
            future.add_done_callback(self._remove_pending_goal_request)
        return future
