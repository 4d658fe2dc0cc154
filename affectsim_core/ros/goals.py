"""Ending a goal and publishing its feedback on the project's action servers, so that a failed DDS
write of the status or feedback topic cannot take the goal's result with it.

rclpy's ``ServerGoalHandle.succeed()`` (``abort``, ``canceled``) changes the goal's state and then
publishes the server's status array. When that DDS write fails (``RCLError: Failed publish goal
status array: cannot publish data``: once in 420 hostile goals of a loaded 60-minute soak), the
exception leaves the transition after the state has changed, escapes the execute callback, and
rclpy answers the client with an *empty* result (no outcome, no message). The result does not need
the status topic: the client's result request carries the terminal status. So :func:`end_goal`
logs the failed publication, tells the server the goal is done (its result then expires after
``result_timeout`` as usual) and lets the callback return its result. The next status publication
of the server includes the goal's terminal status. :func:`publish_feedback` drops a feedback
message whose write fails, with a log line: feedback is progress, not the result.
"""

from __future__ import annotations

from typing import Any, Callable

from rclpy.action.server import RCLError, ServerGoalHandle

TERMINAL = ("succeed", "abort", "canceled")  # the ServerGoalHandle methods that end a goal


def end_goal(handle: ServerGoalHandle, how: str, log: Callable[[str], None]) -> None:
    """End the goal of ``handle`` as ``how`` (one of :data:`TERMINAL`); a failed status publication
    after the state changed is logged through ``log``, not raised. An invalid transition still raises."""
    if how not in TERMINAL:
        raise ValueError(f"how={how!r} is invalid; expected one of {TERMINAL}")
    before = handle.status
    try:
        getattr(handle, how)()
    except RCLError as exc:
        if handle.status == before:  # the state did not change: the transition itself failed
            raise
        log(f"goal {how}: the status array was not published ({exc}); the result carries the status")
        try:
            handle._action_server.notify_goal_done()  # what rclpy skipped after the failed publication
        except RCLError as gone:  # the server itself is destroyed (its node shuts down): no one to tell
            log(f"goal {how}: the action server is shut down ({gone})")


def publish_feedback(handle: ServerGoalHandle, feedback: Any, log: Callable[[str], None]) -> bool:
    """Publish ``feedback`` for the goal; a failed DDS write is logged and dropped. True if published."""
    try:
        handle.publish_feedback(feedback)
        return True
    except RCLError as exc:
        log(f"feedback not published ({exc}); the goal goes on")
        return False
