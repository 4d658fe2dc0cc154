"""Offline runner (``affectsim eval``): episodes evaluated in worker processes (or Ray actors),
each record committed to the run's results store as soon as its episode finishes.

A run directory holds ``results.sqlite`` (the store, with the run's configuration), ``frames/``
(per episode a small JPEG of the middle sampled P-Init and A-Obs frames, for the report's
figures; written by the driver) and, once written, ``report.md``. Running again on the same directory resumes: only
episodes without a record are evaluated (failed ones too with ``retry_failed``), so a killed run
loses nothing it had finished. Workers are seeded by nothing but the episode: a record does
not depend on the worker, the order or the number of workers.
"""

from __future__ import annotations

import os
import socket
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Callable, Iterable, Iterator

import numpy as np

from affectsim_eval.store import ResultsStore
from affectsim_ros.core.errors import InvalidInput
from affectsim_ros.dataset.episodes import DATASET_DIR, load_split

DEFAULT_RECOGNIZERS = ("pose-temporal", "rgb-clip", "committee", "majority", "uniform")
DATA_DIR = DATASET_DIR.parent  # holds motions/, scenes/ and episodes/ (`make bench` builds them)
THUMB = 160  # px, side of each thumbnail frame


@dataclass(frozen=True)
class EvalConfig:
    """What defines a run's results (stored with the run; a resume must match it)."""

    split: str = "test"
    episodes: int = 0  # stratified subset size; 0 = the whole split
    seed: int = 0  # of the subset
    ids: tuple[str, ...] = ()  # explicit episode ids of the split (instead of a subset)
    recognizers: tuple[str, ...] = DEFAULT_RECOGNIZERS
    policy: str = "baseline"
    max_actions: int = 480
    max_planner_calls: int = 80

    def validate(self) -> "EvalConfig":
        from affectsim_nav.policy import POLICIES
        from affectsim_perception.recognizers.base import RECOGNIZERS

        import affectsim_nav.baseline  # noqa: F401  (registers the baseline)
        import affectsim_perception.recognizers  # noqa: F401  (registers the recognizers)

        if self.split not in ("train", "val", "test"):
            raise InvalidInput("split", self.split, "one of train, val, test")
        if self.ids and self.episodes:
            raise InvalidInput("episodes", self.episodes, "0 when episode ids are given (they are the subset)")
        if self.episodes < 0:
            raise InvalidInput("episodes", self.episodes, "0 (the whole split) or a positive subset size")
        if not self.recognizers:
            raise InvalidInput("recognizers", list(self.recognizers), "at least one recognizer name")
        for n in self.recognizers:
            if n not in RECOGNIZERS:
                raise InvalidInput("recognizers", n, f"names from {RECOGNIZERS.names()}")
        if self.policy not in POLICIES:
            raise InvalidInput("policy", self.policy, f"one of {POLICIES.names()}")
        if not (1 <= self.max_actions <= 100_000):
            raise InvalidInput("max_actions", self.max_actions, "1..100000")
        if not (0 <= self.max_planner_calls <= 100_000):
            raise InvalidInput("max_planner_calls", self.max_planner_calls, "0..100000")
        return self

    def as_dict(self) -> dict:
        return {"split": self.split, "episodes": self.episodes, "seed": self.seed, "ids": list(self.ids),
                "recognizers": list(self.recognizers), "policy": self.policy, "max_actions": self.max_actions,
                "max_planner_calls": self.max_planner_calls}


def select_episodes(cfg: EvalConfig, data: Path = DATA_DIR) -> list[dict]:
    """The run's episodes from ``data/episodes``: the split, or its stratified subset, grouped by
    scene (workers keep one scene loaded)."""
    from affectsim_ros.bench_nav import stratified_subset

    root = Path(data) / "episodes"
    if not (root / "manifest.json").is_file():
        raise InvalidInput("dataset", str(root), "a built dataset: run `affectsim scenes build && affectsim dataset build`")
    eps = load_split(cfg.split, root)
    if cfg.ids:
        by_id = {e["episode_id"]: e for e in eps}
        missing = [i for i in cfg.ids if i not in by_id]
        if missing:
            raise InvalidInput("episode ids", missing[:5], f"ids of the {cfg.split} split")
        eps = [by_id[i] for i in dict.fromkeys(cfg.ids)]
    elif cfg.episodes:
        eps = stratified_subset(eps, min(cfg.episodes, len(eps)), cfg.seed)
    return sorted(eps, key=lambda e: (e["scene_id"], e["episode_id"]))


# ------------------------------------------------------------------------------ worker side
class EpisodeWorker:
    """Backend, policy and recognizers of one process; :meth:`run` evaluates one episode."""

    def __init__(self, cfg: dict, data: str = str(DATA_DIR)) -> None:
        os.environ.setdefault("MUJOCO_GL", "egl")
        import affectsim_nav.baseline  # noqa: F401
        import affectsim_perception.recognizers  # noqa: F401
        from affectsim_bridge.backends.mujoco_backend import MujocoBackend
        from affectsim_bridge.humans.library import Library
        from affectsim_nav.policy import POLICIES
        from affectsim_nav.timing import StageTimes, TimedDetector
        from affectsim_perception.person_model import BlazePose
        from affectsim_perception.recognizers.base import RECOGNIZERS

        self.cfg = cfg
        self.lib = Library(Path(data) / "motions")
        self.scenes_dir = Path(data) / "scenes"
        self.scene = None
        self.backend = MujocoBackend()
        self.times = StageTimes()
        kw = {"detector": TimedDetector(BlazePose(), self.times)} if cfg["policy"] == "baseline" else {}
        self.policy = POLICIES.create(cfg["policy"], **kw)
        self.recognizers = {n: RECOGNIZERS.create(n) for n in cfg["recognizers"]}

    def run(self, ep: dict) -> dict:
        """The episode's record with ``status``, ``reason``, ``wall_s``, ``worker`` and ``timing``
        (seconds per stage) added; a failure is a record too (never raises)."""
        from affectsim_bridge.scene import load_scene
        from affectsim_eval.evaluate import evaluate_offline

        self.times.seconds.clear()
        t0 = time.perf_counter()
        try:
            if self.scene is None or self.scene.id != ep["scene_id"]:
                self.scene = load_scene(ep["scene_id"], self.scenes_dir)
            record, obs = evaluate_offline(ep, self.backend, self.scene, self.lib.load, self.policy, self.recognizers,
                                           self.cfg["max_actions"], self.cfg["max_planner_calls"], times=self.times)
            thumb = thumbnails(obs.clips["p_init"].sampled(), obs.clips["a_obs"].sampled())
            status, reason = "ok", ""
        except Exception as exc:  # noqa: BLE001 - one failing episode is recorded, the run goes on
            record = {"episode_id": ep["episode_id"], "family": ep.get("family"), "label": ep.get("emotion")}
            status, thumb, reason = "failed", b"", failure_reason(exc)
        return {**record, "status": status, "reason": reason, "wall_s": time.perf_counter() - t0,
                "worker": f"{socket.gethostname()}:{os.getpid()}",
                "timing": {k: round(v, 4) for k, v in self.times.seconds.items()}, THUMB_KEY: thumb}

    def close(self) -> None:
        for r in self.recognizers.values():
            r.close()


def failure_reason(exc: BaseException) -> str:
    """One line for the store: the exception and where it was raised (file:line)."""
    tb = traceback.extract_tb(exc.__traceback__)
    where = f"{Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else "?"
    return f"{type(exc).__name__}: {exc}".splitlines()[0] + f" @ {where}"


THUMB_KEY = "_thumbnail"  # JPEG bytes travelling with a result to the driver (not stored in the record)


def thumbnails(p_init: np.ndarray, a_obs: np.ndarray) -> bytes:
    """JPEG of the middle frame of the P-Init and the A-Obs clip (8, 224, 224, 3) side by side."""
    import io

    from PIL import Image

    frames = [c[len(c) // 2] for c in (p_init, a_obs)]
    strip = np.concatenate([np.asarray(Image.fromarray(f).resize((THUMB, THUMB), Image.BILINEAR)) for f in frames], 1)
    buf = io.BytesIO()
    Image.fromarray(strip).save(buf, format="JPEG", quality=85)
    return buf.getvalue()


def save_thumbnail(path: Path, jpeg: bytes) -> None:
    """Write the JPEG atomically (the driver does, so Ray workers need no shared disk)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-", suffix=".jpg")
    with os.fdopen(fd, "wb") as f:
        f.write(jpeg)
    os.replace(tmp, path)


_WORKER: list[EpisodeWorker] = []


def _pool_init(cfg: dict, data: str) -> None:
    os.environ["OMP_NUM_THREADS"] = "1"  # one CPU per worker process, as Ray does for its actors
    _WORKER.append(EpisodeWorker(cfg, data))


def _pool_run(ep: dict) -> dict:
    return _WORKER[0].run(ep)


# ------------------------------------------------------------------------------ driver side
@dataclass
class RunSummary:
    """What a call to :func:`run_eval` did."""

    out: Path
    total: int
    skipped: int
    done: int = 0
    failed: int = 0
    wall: float = 0.0
    seconds: Counter = field(default_factory=Counter)


def run_eval(out: Path, cfg: EvalConfig, workers: int = 2, ray_address: str | None = None,
             retry_failed: bool = False, data: Path = DATA_DIR, log: Callable[[str], None] = print) -> RunSummary:
    """Evaluate the run's pending episodes into ``out/results.sqlite`` (resuming a previous run);
    ``data`` holds the motions, scenes and episodes."""
    cfg.validate()
    if workers < 1:
        raise InvalidInput("workers", workers, "at least 1")
    eps = select_episodes(cfg, data)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    meta = run_meta(cfg, eps, data)
    with ResultsStore.open(out / "results.sqlite", meta) as store:
        pending = set(store.pending([e["episode_id"] for e in eps], retry_failed=retry_failed))
        todo = [e for e in eps if e["episode_id"] in pending]
        summary = RunSummary(out, len(eps), len(eps) - len(todo))
        log(f"[eval] {len(eps)} {cfg.split} episodes, {summary.skipped} already in {out / 'results.sqlite'}, "
            f"{len(todo)} to run on {'Ray ' + ray_address if ray_address else f'{workers} worker(s)'}")
        t0 = time.perf_counter()
        if ray_address:
            from affectsim_eval.ray_shards import ray_map

            results = ray_map(todo, cfg.as_dict(), str(data), workers, ray_address, log)
        else:
            results = _pool_map(todo, cfg.as_dict(), str(data), workers)
        for k, res in enumerate(results):
            thumb = res.pop(THUMB_KEY, b"")
            if thumb:
                save_thumbnail(out / "frames" / f"{res['episode_id']}.jpg", thumb)
            store.put(res, replace=retry_failed)
            summary.done += 1
            summary.failed += res["status"] == "failed"
            summary.seconds.update(res["timing"])
            el = time.perf_counter() - t0
            eta = el / (k + 1) * (len(todo) - k - 1)
            note = f" FAILED ({res['reason']})" if res["status"] == "failed" else ""
            log(f"[eval] {summary.skipped + k + 1}/{len(eps)} {res['episode_id']}{note}  {el:.0f} s, ETA {eta:.0f} s")
        summary.wall = time.perf_counter() - t0
    return summary


def run_meta(cfg: EvalConfig, eps: list[dict], data: Path = DATA_DIR) -> dict:
    """Run metadata: the configuration, code version, dataset and checkpoint checksums."""
    import json

    from affectsim_perception.recognizers.base import CHECKPOINT_DIR
    from affectsim_perception.train import _code_version

    checkpoints = {}
    for n in cfg.recognizers:
        m = Path(CHECKPOINT_DIR) / n / "manifest.json"
        if m.is_file():
            checkpoints[n] = json.loads(m.read_text()).get("weights_sha256")
    manifest = json.loads((Path(data) / "episodes" / "manifest.json").read_text())
    return {"config": cfg.as_dict(), "code_version": _code_version(), "checkpoints": checkpoints,
            "data_dir": str(Path(data).resolve()),
            "dataset_split_sha256": manifest["splits"][cfg.split]["sha256"],
            "episode_ids": [e["episode_id"] for e in eps]}


def _pool_map(todo: list[dict], cfg: dict, data: str, workers: int) -> Iterator[dict]:
    if not todo:
        return iter(())
    return _serial(todo, cfg, data) if workers == 1 else _pooled(todo, cfg, data, workers)


def _serial(todo: Iterable[dict], cfg: dict, data: str) -> Iterator[dict]:
    w = EpisodeWorker(cfg, data)
    try:
        for ep in todo:
            yield w.run(ep)
    finally:
        w.close()


def _pooled(todo: list[dict], cfg: dict, data: str, workers: int) -> Iterator[dict]:
    with get_context("spawn").Pool(min(workers, len(todo)), initializer=_pool_init, initargs=(cfg, data)) as pool:
        yield from pool.imap_unordered(_pool_run, todo, chunksize=1)
