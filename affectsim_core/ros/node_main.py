"""One entry point for every node process: DDS on loopback, a clear message on bad parameters, and a
clean stop on SIGINT or SIGTERM at any moment, construction included.

rclpy's own signal handlers raise ``KeyboardInterrupt`` wherever the main thread is; during a node's
construction that leaves worker threads (the bridge's simulator thread, inside EGL) running while the
interpreter finalises, which crashed the bridge with SIGSEGV. Here a signal only sets a flag that
the main thread polls while another thread spins the node: a node being built is finished first,
then the context is shut down, the node destroyed (its threads stopped), and the process exits 0.
"""

from __future__ import annotations

import signal
import sys
import threading
from typing import Callable

import rclpy
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from affectsim_core.errors import AffectSimError
from affectsim_core.ros.env import ensure_loopback


def _spin(executor: MultiThreadedExecutor) -> None:
    try:
        executor.spin()
    except ExternalShutdownException:
        pass


def run_node(factory: Callable[[], Node], name: str, args: list[str] | None = None, threads: int = 3) -> None:
    """Create the node with ``factory`` and spin it on a multi-threaded executor until shutdown or a
    signal; a construction error (bad parameter, missing checkpoint) exits with status 2 and the reason."""
    ensure_loopback()
    stop = threading.Event()
    node = None
    with rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO):
        previous = {s: signal.signal(s, lambda _s, _f: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            try:
                node = factory()
            except (AffectSimError, ValueError, KeyError) as exc:
                print(f"[{name}] cannot start: {exc}", file=sys.stderr)
                sys.exit(2)
            executor = MultiThreadedExecutor(num_threads=threads)
            executor.add_node(node)
            spinner = threading.Thread(target=_spin, args=(executor,), name=f"{name}-spin", daemon=True)
            spinner.start()
            while not stop.wait(0.1) and rclpy.ok():  # the main thread stays free for the signal handler
                pass
            rclpy.try_shutdown()  # wakes the executor; a node may also have shut down itself (the evaluator)
            spinner.join(10.0)
            node.destroy_node()
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
    if getattr(node, "error", None):  # a node that ran a job (the evaluator) and failed
        sys.exit(1)
