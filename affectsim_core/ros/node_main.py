"""One entry point for every node process: DDS on loopback, a clear message on bad parameters, and a
clean stop on SIGINT or SIGTERM at any moment, construction included.

rclpy's own signal handlers raise ``KeyboardInterrupt`` wherever the main thread is; during a node's
construction that leaves worker threads (the bridge's simulator thread, inside EGL) running while the
interpreter finalises, which crashed the bridge with SIGSEGV. Here the first signal only sets a flag
that the main thread polls while another thread spins the node: a node being built is finished
first, then a node that runs a job is asked to stop it (``stop_job``), the context is shut down, the
executor's threads end, the node is destroyed, and the process exits 0 (a job that has not stopped
a few seconds after the shutdown is abandoned: the process exits at once, without finalisation).
A second signal ends the process at once (the default action). A callback that raises out of the executor ends the process
with status 1 and the traceback (it would otherwise serve nothing and never exit). A step of the shutdown that raises ends it with
status 1 and the traceback at once (the job's thread would otherwise hold the interpreter's exit open).

A node may own ``side_nodes`` (made by :func:`side_node`): nodes that take high-rate topics, each spun by a
single-threaded executor and thread of its own, and destroyed just before it. rclpy's multi-threaded
executor rebuilds its wait set in Python for every message (every service, publisher event and parameter
service of the node) and hands each callback to a thread pool; at a controller's 50 Hz of ``/cmd_vel``
that work kept the bridge's simulator thread waiting for the GIL, and sim time fell to a third of wall
time with stalls of 2 s. A side node with a few subscriptions costs one small wake per message.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import traceback
from typing import Callable

import rclpy
from rclpy.executors import Executor, ExternalShutdownException, MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from affectsim_core.errors import AffectSimError
from affectsim_core.ros.env import ensure_loopback

JOB_GRACE_S = 1.0  # s a node's job may take to stop (an unfinished one is abandoned, nothing half-stored)
STOP_GRACE_S = 3.0  # s for the executor's threads to end; both within the launcher's 5 s before SIGTERM
MMAP_THRESHOLD_BYTES = 256 * 1024  # blocks from this size up are mapped and unmapped one by one (glibc)
_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number (malloc.h)


def return_large_blocks() -> bool:
    """Have glibc map every block of :data:`MMAP_THRESHOLD_BYTES` or more on its own, so that freeing
    it returns the memory to the system. glibc's default threshold rises to 32 MiB after the first
    large free, after which camera frames and replies (about 1 MB each) stay in the per-thread arenas:
    the bridge kept 1.1 GB after one 256 MiB RenderViews reply. Returns False where the C library is
    not glibc (nothing changed)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        return bool(libc is not None and libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))
    except (OSError, AttributeError):
        return False


def side_node(owner: Node, suffix: str) -> Node:
    """A node named ``<owner's name><suffix>`` in the owner's namespace and context, without parameter
    services, for the owner's high-rate subscriptions; list it in the owner's ``side_nodes``."""
    return rclpy.create_node(f"{owner.get_name()}{suffix}", namespace=owner.get_namespace(), context=owner.context,
                             start_parameter_services=False)


def run_node(factory: Callable[[], Node], name: str, args: list[str] | None = None, threads: int = 3) -> None:
    """Create the node with ``factory`` and spin it on a multi-threaded executor until shutdown or a
    signal; a construction error (bad parameter, missing checkpoint) exits with status 2 and the reason."""
    ensure_loopback(robot=True)  # what the launcher (or the user's shell, on a robot) chose; a bad profile is refused
    return_large_blocks()
    stop = threading.Event()
    crashed: list[str] = []

    def on_signal(signum: int, _frame) -> None:
        if stop.is_set():  # the second one: no more grace
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
        stop.set()

    def spin(executor: Executor) -> None:
        try:
            executor.spin()
        except ExternalShutdownException:
            pass
        except BaseException:  # noqa: BLE001 - reported, and the process ends with status 1
            crashed.append(traceback.format_exc())
        finally:
            stop.set()

    node = None
    with rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO):
        previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            try:
                node = factory()
            except (AffectSimError, ValueError, KeyError) as exc:
                print(f"[{name}] cannot start: {exc}", file=sys.stderr)
                sys.exit(2)
            executors: list[tuple[str, Executor]] = []
            for n, e in ((node, MultiThreadedExecutor(num_threads=threads)),
                         *((side, SingleThreadedExecutor()) for side in getattr(node, "side_nodes", ()))):
                e.add_node(n)
                executors.append((n.get_name(), e))
            spinners = [threading.Thread(target=spin, args=(e,), name=f"{n}-spin", daemon=True) for n, e in executors]
            for spinner in spinners:
                spinner.start()
            while not stop.wait(0.1) and rclpy.ok():  # the main thread stays free for the signal handler
                pass
            try:
                # a job is stopped before the shutdown (it must not record a failure the shutdown causes)
                stop_job = getattr(node, "stop_job", None)
                job_ended = stop_job(JOB_GRACE_S) if stop_job is not None else True
                rclpy.try_shutdown()  # wakes the executor and the job's waits; a node may have shut down itself
                if not job_ended and not stop_job(STOP_GRACE_S):
                    # the job is still inside a request or the simulator: leave now, not at interpreter exit
                    # (where its thread would run on into freed handles); it stored nothing half-done
                    print(f"[{name}] stopped with its job unfinished", file=sys.stderr, flush=True)
                    sys.stdout.flush()
                    os._exit(1 if crashed else 0)
                for spinner, (_n, e) in zip(spinners, executors):
                    spinner.join(STOP_GRACE_S)
                    e.shutdown(timeout_sec=STOP_GRACE_S)
                for side in getattr(node, "side_nodes", ()):
                    side.destroy_node()
                node.destroy_node()
            except Exception:  # noqa: BLE001 - reported; the job's thread must not hold the exit open
                print(f"[{name}] shutdown failed\n{traceback.format_exc()}", file=sys.stderr, flush=True)
                os._exit(1)
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
    if crashed:
        print(f"[{name}] stopped: a callback raised\n{crashed[0]}", file=sys.stderr)
        sys.exit(1)
    if getattr(node, "error", None):  # a node that ran a job (the evaluator) and failed
        sys.exit(1)
