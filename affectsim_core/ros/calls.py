"""Requests that survive a lost reply.

A node stalled for longer than the DDS participant lease (20 s; a paused process, a swapping
machine) drops its peers when it resumes and rediscovers them: a request it was answering then
never gets its reply, although the next request is answered at once. So a client never waits for
one reply: :func:`call` sends the request again when an attempt gets no answer (attempt windows
of :data:`FIRST_ATTEMPT_S`, doubling up to :data:`MAX_ATTEMPT_S`) until the total timeout, and
takes the first reply of any attempt. That is only correct for requests that may arrive twice:
``LoadWorld`` and ``ApplyAction`` carry a ``request_id`` the bridge answers once (a repeat gets
the same reply and changes nothing); ``RenderViews`` changes nothing. :func:`action_result` does
the same for an action's result, which the project's action servers keep :data:`RESULT_KEEP_S`
after the goal ends. All waits block the caller's thread; the node must be spun by another one.
"""

from __future__ import annotations

import secrets
import threading
import time
from itertools import count
from typing import Any, Iterator

from action_msgs.msg import GoalStatus
from rclpy.qos import QoSProfile, ReliabilityPolicy

FIRST_ATTEMPT_S = 5.0  # s, the first attempt's window; each further attempt doubles it ...
MAX_ATTEMPT_S = 30.0  # s, ... up to this
RESULT_KEEP_S = 60  # s an action server keeps a finished goal's result for a client that asks again (> MAX_ATTEMPT_S)
# an action server's goal, cancel and result services: requests queued while the executor is busy are kept
# (the default depth of 10 dropped the 11th goal of a burst unanswered); and its feedback: a reliable writer
# keeps this many messages for a reader that lags (with 10, a loaded client lost 2 of a goal's 80 feedbacks)
SERVER_QOS = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)


def server_qos() -> dict:
    """Keyword arguments of ``ActionServer`` for the project's servers (queues, feedback history, result
    retention). A client that wants every feedback message subscribes as deep (``feedback_sub_qos_profile``)."""
    return {"goal_service_qos_profile": SERVER_QOS, "cancel_service_qos_profile": SERVER_QOS,
            "result_service_qos_profile": SERVER_QOS, "feedback_pub_qos_profile": SERVER_QOS,
            "result_timeout": RESULT_KEEP_S}


def request_ids() -> Iterator[int]:
    """Unique nonzero ``request_id`` values for one client: a random 62-bit start, then consecutive."""
    return count(secrets.randbits(62) + 1)


def wait(future, timeout: float, what: str) -> Any:
    """The future's result, or ``TimeoutError`` naming ``what`` after ``timeout`` s (the future is cancelled)."""
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    if not done.wait(timeout):
        future.cancel()
        raise TimeoutError(f"{what} did not answer within {timeout:.0f} s")
    return future.result()


def _first_of(send, timeout: float, what: str, first_attempt: float, cancel_answered: bool = True) -> Any:
    """The first reply to ``send()``, sent again after each attempt window without a reply. Unanswered
    attempts are cancelled (their late replies dropped by the client) unless ``cancel_answered`` is
    False and a reply came: then they stay pending and take their replies, which are on their way."""
    deadline = time.monotonic() + timeout
    window, futures = first_attempt, []
    answered = threading.Event()
    reply = None
    try:
        while True:
            fut = send()
            fut.add_done_callback(lambda _f: answered.set())
            futures.append(fut)
            left = deadline - time.monotonic()
            if answered.wait(max(0.0, min(window, left))):
                reply = next(f for f in futures if f.done() and not f.cancelled()).result()
                return reply
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{what} did not answer within {timeout:.0f} s ({len(futures)} attempts)")
            window = min(2 * window, MAX_ATTEMPT_S)
    finally:
        if reply is None or cancel_answered:
            for f in futures:
                if not f.done():
                    f.cancel()


def call(client, request, timeout: float, what: str, first_attempt: float = FIRST_ATTEMPT_S) -> Any:
    """Reply to a request that may be sent more than once (see the module docstring)."""
    return _first_of(lambda: client.call_async(request), timeout, what, first_attempt)


def action_result(handle, timeout: float, what: str, first_attempt: float = FIRST_ATTEMPT_S) -> Any:
    """Result of an accepted goal (``handle``: its ``ClientGoalHandle``), asked for again when an attempt
    gets no answer; a goal that runs long is asked at growing intervals."""
    # a finished goal answers every request for its result: left pending, none is "unexpected" (rclpy warns)
    response = _first_of(handle.get_result_async, timeout, what, first_attempt, cancel_answered=False)
    if response.status == GoalStatus.STATUS_UNKNOWN:
        raise RuntimeError(f"{what}: the server no longer knows the goal (its result expired)")
    return response.result
