"""Waiting on state in tests: machines differ 2x in speed, so a test waits for what it needs to have
happened, with a timeout only as a safety net."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout: float, what: str, poll_s: float = 0.1) -> T:
    """The first truthy value of ``predicate()``, polled every ``poll_s`` s; AssertionError naming
    ``what`` if there is none within ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError(f"{what} within {timeout:.0f} s")
