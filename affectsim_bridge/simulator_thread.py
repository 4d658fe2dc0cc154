"""One thread that owns the simulator backend (EGL renderers work only in their creating thread).

Callers on any thread hand it work with :meth:`SimulatorThread.call`, which waits with a
timeout. In free-running mode the thread also advances sim time in fixed ticks,
paced to ``real_time_factor`` x wall time; if rendering cannot keep up, sim time
falls behind and the measured real-time factor drops (it is never faked). Sim time never
races to make up for lost wall time: once it is more than :data:`MAX_LAG_S` behind its schedule
(a long call such as loading a world or rendering a passive clip, or slow ticks) the pace starts
again from now, as a robot's world does not hurry after a stall of its computer.
"""

from __future__ import annotations

import concurrent.futures as cf
import queue
import threading
import time
from typing import Any, Callable


MAX_LAG_S = 0.1  # wall s behind the paced schedule made up by ticking without waiting; beyond it, forgiven


class SimulatorThread:
    def __init__(self, name: str = "affectsim-simulator") -> None:
        self._queue: queue.Queue[tuple[Callable[[], Any], cf.Future] | None] = queue.Queue()
        self._tick: Callable[[], float] | None = None  # returns sim seconds advanced
        self._rtf = 1.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def call(self, fn: Callable[[], Any], timeout: float = 30.0) -> Any:
        """Run ``fn`` on the simulator thread and return its result (re-raising its exception)."""
        if self._stop.is_set():
            raise RuntimeError("simulator thread is stopped")
        fut: cf.Future = cf.Future()
        self._queue.put((fn, fut))
        try:
            return fut.result(timeout=timeout)
        except cf.TimeoutError:
            raise TimeoutError(f"simulator thread did not finish the request within {timeout:.1f} s") from None

    def set_free_run(self, tick: Callable[[], float] | None, real_time_factor: float = 1.0) -> None:
        """Enable (``tick`` given) or disable free-running ticks; thread-safe via the queue."""

        def apply() -> None:
            self._tick, self._rtf = tick, real_time_factor
            self._origin = None

        self.call(apply)

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._queue.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        self._origin: tuple[float, float] | None = None  # (wall at start, sim seconds ticked since)
        while not self._stop.is_set():
            wait = None
            if self._tick is not None:
                now = time.monotonic()
                if self._origin is None:
                    self._origin = (now, 0.0)
                due = self._origin[0] + self._origin[1] / self._rtf
                if now - due > MAX_LAG_S:  # behind: pace on from now instead of bursting to catch up
                    self._origin = (now, 0.0)
                    due = now
                wait = max(0.0, due - now)
            try:
                item = self._queue.get(timeout=wait) if wait != 0.0 else self._queue.get_nowait()
            except queue.Empty:
                item = ...
            if item is None:
                break
            if item is not ...:
                fn, fut = item
                if fut.set_running_or_notify_cancel():
                    try:
                        fut.set_result(fn())
                    except BaseException as exc:  # handed to the caller
                        fut.set_exception(exc)
                continue
            if self._tick is not None and self._origin is not None:
                advanced = self._tick()
                self._origin = (self._origin[0], self._origin[1] + advanced)
        # fail pending calls instead of leaving callers waiting
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[1].set_exception(RuntimeError("simulator thread stopped"))
