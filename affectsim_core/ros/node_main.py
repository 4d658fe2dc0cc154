"""One entry point for every node process: DDS on loopback, a clear message on bad parameters."""

from __future__ import annotations

import sys
from typing import Callable

import rclpy
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node

from affectsim_core.errors import AffectSimError
from affectsim_core.ros.env import ensure_loopback


def run_node(factory: Callable[[], Node], name: str, args: list[str] | None = None, threads: int = 3) -> None:
    """Create the node with ``factory`` and spin it on a multi-threaded executor until shutdown;
    a construction error (bad parameter, missing checkpoint) exits with status 2 and the reason."""
    ensure_loopback()
    node = None
    try:
        with rclpy.init(args=args):
            try:
                node = factory()
            except (AffectSimError, ValueError, KeyError) as exc:
                print(f"[{name}] cannot start: {exc}", file=sys.stderr)
                sys.exit(2)
            executor = MultiThreadedExecutor(num_threads=threads)
            executor.add_node(node)
            try:
                executor.spin()
            finally:
                node.destroy_node()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    if getattr(node, "error", None):  # a node that ran a job (the evaluator) and failed
        sys.exit(1)
