"""Episodes sharded over a Ray cluster (``affectsim eval --ray ADDRESS``).

Each Ray actor is one worker (:class:`~affectsim_eval.run.runner.EpisodeWorker`) (backend, policy and
recognizers, one CPU); the driver hands the next pending episode to whichever actor is free and
writes every returned record into the run's store itself (one writer, so the store and its
resume logic are the same as for a local run, and workers need no shared disk). A record does
not depend on the worker that computed it, so results equal a single-process run.

``ADDRESS`` is a running cluster's ``host:port``, or ``local``: a private single-machine
cluster with ``workers`` CPUs whose every server listens on 127.0.0.1 only (checked with
``ss``: GCS, raylet, workers, runtime-env agent), stopped at the end. Usage statistics are off
and no dashboard is started, so nothing leaves the machine.
"""

from __future__ import annotations

import os
from typing import Callable, Iterator

from affectsim_core.episode import Episode
from affectsim_core.errors import InvalidInput, MissingDependency

LOOPBACK = "127.0.0.1"


# Ray >= 2.5x rewrites a 127.0.0.1 node address to the machine's external one (and then listens
# on every interface) unless multi-node clusters are disabled for the process tree.
LOCAL_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


def _start(address: str, workers: int):
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"  # no phoning home
    if address == "local":
        os.environ.update(LOCAL_ENV)  # before ray is imported: it reads them at import
    try:
        import ray  # optional at run time: only --ray runs need it
    except ImportError as exc:
        raise MissingDependency("eval --ray", "ray", "run `make setup`") from exc
    if address == "local":
        ray.init(num_cpus=workers, include_dashboard=False, _node_ip_address=LOOPBACK, log_to_driver=False,
                 configure_logging=False, runtime_env={"env_vars": LOCAL_ENV})
    else:
        if ":" not in address:
            raise InvalidInput("--ray", address, "host:port of a running Ray cluster, or 'local'")
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    return ray


def ray_map(worker: type, todo: list[Episode], cfg: dict, data: str, workers: int, address: str,
            log: Callable[[str], None] = print) -> Iterator:
    """Results of ``todo`` in completion order, computed by Ray actors of class ``worker`` (constructed
    as ``worker(cfg, data)``, with a ``run(episode)`` method; ``data``: the motions/scenes directory as
    seen from the workers)."""
    if not todo:
        return
    ray = _start(address, workers)
    try:
        actor_cls = ray.remote(num_cpus=1)(worker)
        n = max(1, min(len(todo), workers if address == "local" else int(ray.available_resources().get("CPU", 1))))
        actors = [actor_cls.remote(cfg, data) for _ in range(n)]
        log(f"[eval] Ray: {n} actor(s) on {address}")
        queue = list(todo)
        running = {}
        for a in actors:
            if queue:
                running[a.run.remote(queue.pop(0))] = a
        while running:
            done, _ = ray.wait(list(running), num_returns=1)
            actor = running.pop(done[0])
            yield ray.get(done[0])
            if queue:
                running[actor.run.remote(queue.pop(0))] = actor
    finally:
        ray.shutdown()
