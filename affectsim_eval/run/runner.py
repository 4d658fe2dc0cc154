"""In-process runs (``affectsim eval``): episodes evaluated in worker processes or Ray actors, through
the one episode loop (:func:`affectsim_eval.run.loop.run_episodes`).

Each worker holds a backend, a policy and the recognizers (:class:`EpisodeWorker`) and evaluates
one episode at a time with the orchestrator on an :class:`~affectsim_eval.episode.worlds.InProcessEvalWorld`.
Workers are seeded by nothing but the episode: a record does not depend on the worker, the order
or the number of workers.
"""

from __future__ import annotations

import os
import socket
from multiprocessing import get_context
from pathlib import Path
from typing import Callable, Iterable, Iterator

import numpy as np

from affectsim_bridge.backends import BACKENDS
from affectsim_core.episode import Episode
from affectsim_core.errors import InvalidInput
from affectsim_core.person_tracking import DETECTORS
from affectsim_core.plugins import load_plugins
from affectsim_core.protocol import PAPER_FAMILIES
from affectsim_core.timing import StageTimes, TimedDetector
from affectsim_core.workers import ignore_interrupts
from affectsim_eval.run.config import DATA_DIR, EvalConfig, EvalData, run_meta, select_episodes
from affectsim_eval.run.loop import EpisodeResult, RunSummary, evaluate_safely, run_episodes
from affectsim_eval.episode.orchestrator import evaluate_episode
from affectsim_eval.episode.passive_cache import OFF, open_cache
from affectsim_eval.run.ray_shards import ray_map
from affectsim_eval.episode.worlds import InProcessEvalWorld
from affectsim_nav.policy import LoopRecognizer, create_policy
from affectsim_perception.recognizers import RECOGNIZERS, ClipInput, Recognizer

DETECTOR = "blazepose"  # the person detector policies get in-process (the nav node's default too)


class _Consulted:
    """A registered recognizer as a policy consults it (:class:`~affectsim_nav.policy.LoopRecognizer`)."""

    def __init__(self, recognizer: Recognizer) -> None:
        self.recognizer = recognizer

    def probs_of(self, frames: np.ndarray) -> np.ndarray:
        return self.recognizer.predict(ClipInput(frames)).probs

    def close(self) -> None:
        self.recognizer.close()


def loop_recognizer(name: str) -> LoopRecognizer:
    """The recognizer registered as ``name``, for a policy with a recognizer in the loop: the ``recognizer``
    factory of :func:`~affectsim_nav.policy.create_policy`."""
    return _Consulted(RECOGNIZERS.create(name))


class EpisodeWorker:
    """Backend, policy and recognizers of one process; :meth:`run` evaluates one episode."""

    def __init__(self, cfg: dict, data: str = str(DATA_DIR)) -> None:
        os.environ.setdefault("MUJOCO_GL", "egl")
        load_plugins()  # a worker process (spawned, or a Ray actor) registers the users' plugins itself
        cfg = dict(cfg)
        cache = cfg.pop("passive_cache", OFF)  # where the run's passive settings are kept: not part of the run
        self.cfg = EvalConfig(**{**cfg, "ids": tuple(cfg.get("ids", ())), "recognizers": tuple(cfg["recognizers"]),
                                 "families": tuple(cfg.get("families", PAPER_FAMILIES))})
        self.data = EvalData(Path(data))
        self.times = StageTimes()
        self.policy = create_policy(self.cfg.policy, lambda: TimedDetector(DETECTORS.create(DETECTOR), self.times),
                                    loop_recognizer)  # a policy with a recognizer in the loop gets its own
        self.recognizers = {n: RECOGNIZERS.create(n) for n in self.cfg.recognizers}
        self.world = InProcessEvalWorld(BACKENDS.create(self.cfg.backend), self.policy, self.recognizers, self.times)
        self.name = f"{socket.gethostname()}:{os.getpid()}"
        self.cache = open_cache(cache, Path(data), self.cfg.recognizers, self.cfg.backend)

    def evaluate(self, ep: Episode):
        return evaluate_episode(ep, self.world, self.data.scene(ep.scene_id), self.data.load_motion,
                                self.cfg.max_actions, self.cfg.max_planner_calls, times=self.times,
                                humans=self.cfg.humans, cache=self.cache)

    def run(self, ep: Episode) -> EpisodeResult:
        """The episode's result; a failure is a result too (never raises)."""
        return evaluate_safely(ep, self.evaluate, self.name, self.times)

    def close(self) -> None:
        for r in self.recognizers.values():
            r.close()
        self.policy.close()
        self.world.backend.close()


_WORKER: list[EpisodeWorker] = []


def _pool_init(cfg: dict, data: str) -> None:
    ignore_interrupts()
    os.environ["OMP_NUM_THREADS"] = "1"  # one CPU per worker process, as Ray does for its actors
    _WORKER.append(EpisodeWorker(cfg, data))


def _pool_run(ep: Episode) -> EpisodeResult:
    return _WORKER[0].run(ep)


def local_map(todo: list[Episode], cfg: dict, data: str, workers: int) -> Iterator[EpisodeResult]:
    """Results of ``todo`` in completion order from ``workers`` local processes (one: this process)."""
    if workers == 1:
        w = EpisodeWorker(cfg, data)
        try:
            for ep in todo:
                yield w.run(ep)
        finally:
            w.close()
        return
    with get_context("spawn").Pool(min(workers, len(todo)), initializer=_pool_init, initargs=(cfg, data)) as pool:
        yield from pool.imap_unordered(_pool_run, todo, chunksize=1)


def run_eval(out: Path, cfg: EvalConfig, workers: int = 2, ray_address: str | None = None,
             retry_failed: bool = False, data: Path = DATA_DIR, log: Callable[[str], None] = print,
             allow_dataset_mismatch: bool = False, passive_cache: str = "off") -> RunSummary:
    """Evaluate the run's pending episodes into ``out/results.sqlite`` (resuming a previous run);
    ``data`` holds the motions, scenes and episodes. A checkpoint trained on another dataset version is
    refused unless ``allow_dataset_mismatch`` (:func:`~affectsim_eval.run.config.run_meta`).
    ``passive_cache``: where the passive settings are looked up and kept
    (:func:`~affectsim_eval.episode.passive_cache.open_cache`: "" the data directory's, "off" none)."""
    cfg.validate()
    if workers < 1:
        raise InvalidInput("workers", workers, "at least 1")
    eps = select_episodes(cfg, data)
    meta = run_meta(cfg, eps, data, allow_dataset_mismatch)
    worker_cfg = {**cfg.as_dict(), "passive_cache": passive_cache}

    def evaluate(todo: list[Episode]) -> Iterable[EpisodeResult]:
        if ray_address:
            return ray_map(EpisodeWorker, todo, worker_cfg, str(data), workers, ray_address, log)
        return local_map(todo, worker_cfg, str(data), workers)

    where = f"Ray {ray_address}" if ray_address else f"{workers} worker(s)"
    return run_episodes(out, meta, eps, evaluate, where, retry_failed, log)
