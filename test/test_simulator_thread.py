"""The simulator thread's free-running pace: after a stall (a long call on the thread) sim time goes
on at the requested pace from then on; it does not race to make up the wall time it lost."""

from __future__ import annotations

import threading
import time

from affectsim_bridge.simulator_thread import MAX_LAG_S, SimulatorThread
from waiting import wait_until

DT = 1.0 / 60.0  # sim s per tick, the bridge's default
STALL_S = 1.0  # the injected fault: the thread is busy for this long (wall s)
WINDOW_S = 0.3  # wall s after the stall over which the sim's advance is bounded


def test_after_a_stall_sim_time_is_paced_not_caught_up():
    ticks: list[tuple[float, float]] = []  # (wall s, sim s after the tick)
    lock = threading.Lock()

    def tick() -> float:
        with lock:
            ticks.append((time.monotonic(), (ticks[-1][1] if ticks else 0.0) + DT))
        return DT

    sim = SimulatorThread("test-sim")
    try:
        sim.set_free_run(tick, real_time_factor=1.0)
        wait_until(lambda: len(ticks) > 10, 30, "free-running ticks")
        ended: list[float] = []

        def stall() -> None:  # loading a world, rendering a passive clip
            time.sleep(STALL_S)
            ended.append(time.monotonic())  # on the simulator thread, before any tick that follows

        sim.call(stall, timeout=30)
        end = ended[0]
        wait_until(lambda: ticks[-1][0] > end + WINDOW_S, 30, "ticks after the stall")
        with lock:
            before = max(s for w, s in ticks if w <= end) if any(w <= end for w, _ in ticks) else 0.0
            after = max(s for w, s in ticks if w <= end + WINDOW_S)
        # a slow machine only advances less; racing would add the stall's whole second
        assert after - before <= WINDOW_S * 1.0 + MAX_LAG_S + 2 * DT, (after - before)
    finally:
        sim.stop()
