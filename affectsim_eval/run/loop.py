"""The one episode loop of every benchmark run: ``affectsim eval`` (worker processes or Ray), the
evaluator node (through the ROS graph), ``bench nav`` and ``bench full``.

A run directory holds ``results.sqlite`` (the store, with the run's metadata), ``frames/`` (per
episode a small JPEG of the middle sampled P-Init and A-Obs frames, for the report's figures) and,
once written, ``report.md``. :func:`run_episodes` opens the store, skips the episodes it already
holds (failed ones too unless ``retry_failed``), hands the rest to an evaluator (any function that
turns episodes into :class:`EpisodeResult`, in any order) and commits each result as it arrives,
so a killed run loses nothing it had finished. :func:`evaluate_safely` is the worker side: one
episode, timed, retried a bounded number of times if asked, any failure turned into a failed result
(never raises).
"""

from __future__ import annotations

import io
import os
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
from PIL import Image

from affectsim_core.episode import Episode
from affectsim_core.errors import InvalidInput
from affectsim_core.names import inside
from affectsim_core.record import EpisodeRecord
from affectsim_core.timing import StageTimes
from affectsim_eval.run.config import DATASET_KEY, Shard
from affectsim_eval.episode.orchestrator import EvaluatedEpisode
from affectsim_eval.run.store import ResultsStore

THUMB = 160  # px, side of each thumbnail frame


@dataclass(frozen=True)
class EpisodeResult:
    """One episode's outcome as a worker returns it: the record (None if it failed, with ``reason``),
    wall time (s), the worker's name, seconds per stage, and the thumbnail JPEG (empty if failed)."""

    episode_id: str
    family: str
    label: str
    record: EpisodeRecord | None
    reason: str
    wall_s: float
    worker: str
    timing: dict[str, float]
    thumbnail: bytes = b""

    @property
    def status(self) -> str:
        return "ok" if self.record is not None else "failed"

    def stored(self) -> dict:
        """The store's row: the record (or the episode's id, family and label) plus the run fields."""
        base = self.record.to_dict() if self.record is not None else {
            "episode_id": self.episode_id, "family": self.family, "label": self.label}
        return {**base, "status": self.status, "reason": self.reason, "wall_s": self.wall_s, "worker": self.worker,
                "timing": self.timing}


def failure_reason(exc: BaseException) -> str:
    """One line for the store: the exception and where it was raised (file:line)."""
    tb = traceback.extract_tb(exc.__traceback__)
    where = f"{Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else "?"
    return f"{type(exc).__name__}: {exc}".splitlines()[0] + f" @ {where}"


def thumbnails(p_init: np.ndarray, a_obs: np.ndarray) -> bytes:
    """JPEG of the middle frame of the P-Init and the A-Obs clip (8, 224, 224, 3) side by side."""
    frames = [c[len(c) // 2] for c in (p_init, a_obs)]
    strip = np.concatenate([np.asarray(Image.fromarray(f).resize((THUMB, THUMB), Image.BILINEAR)) for f in frames], 1)
    buf = io.BytesIO()
    Image.fromarray(strip).save(buf, format="JPEG", quality=85)
    return buf.getvalue()


def evaluate_safely(ep: Episode, evaluate: Callable[[Episode], EvaluatedEpisode], worker: str,
                    times: StageTimes, attempts: int = 1, recover: Callable[[str], None] | None = None,
                    retry_on: tuple[type[Exception], ...] = (Exception,)) -> EpisodeResult:
    """Run ``evaluate(ep)`` with ``times`` cleared first; a failure is a result too (only what
    ``recover`` raises is raised). With ``attempts`` > 1 an episode that fails with one of ``retry_on``
    is evaluated again, after ``recover(reason)`` (the evaluator node waits there for the graph), up
    to ``attempts`` times in all."""
    for attempt in range(1, attempts + 1):
        times.seconds.clear()
        t0 = time.perf_counter()
        try:
            done = evaluate(ep)
            record, reason = done.record, ""
            thumb = thumbnails(done.frames["p_init"], done.frames["a_obs"])
            break
        except Exception as exc:  # noqa: BLE001 - one failing episode is recorded, the run goes on
            record, reason, thumb = None, failure_reason(exc), b""
            if attempts == 1 or not isinstance(exc, retry_on):
                break
            reason += f" (attempt {attempt} of {attempts})"
            if attempt < attempts and recover is not None:
                recover(reason)
    return EpisodeResult(ep.episode_id, ep.family, ep.emotion, record, reason, time.perf_counter() - t0, worker,
                         {k: round(v, 4) for k, v in times.seconds.items()}, thumb)


def save_thumbnail(path: Path, jpeg: bytes) -> None:
    """Write the JPEG atomically (the driver does, so Ray workers need no shared disk)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-", suffix=".jpg")
    with os.fdopen(fd, "wb") as f:
        f.write(jpeg)
    os.replace(tmp, path)


@dataclass
class RunSummary:
    """What a call to :func:`run_episodes` did: episodes of its shard, already stored, evaluated now,
    failed now; wall time (s), the seconds per stage summed over the evaluated episodes, at the end
    every episode of the shard the store holds as failed (``(episode_id, reason)``: this call's and
    earlier ones'), and whether the whole run is stored."""

    out: Path
    total: int
    skipped: int
    done: int = 0
    failed: int = 0
    wall: float = 0.0
    seconds: Counter = field(default_factory=Counter)
    failures: list[tuple[str, str]] = field(default_factory=list)
    complete: bool = False  # the store holds every episode of the whole run (every shard's), ok or failed
    run_ok: int = 0  # episodes of the whole run stored as ok


def run_episodes(out: Path, meta: dict, episodes: list[Episode],
                 evaluate: Callable[[list[Episode]], Iterable[EpisodeResult]], where: str,
                 retry_failed: bool = False, log: Callable[[str], None] = print,
                 shard: Shard = Shard()) -> RunSummary:
    """Evaluate the pending ``episodes`` of the run in ``out`` with ``evaluate`` (``where``: how, for the
    log) and commit every result to ``out/results.sqlite`` as it arrives (resuming a previous run).
    With a ``shard`` only its block of ``episodes`` is evaluated; other processes may write the other
    blocks into the same store at the same time (``meta`` is the whole run's in every one)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    split = meta.get("config", {}).get("split", "")
    run_ids = [e.episode_id for e in episodes]
    if shard.count > 1:
        where += f", shard {shard} of the run's {len(episodes)}"
        episodes = shard.of(episodes)
    with ResultsStore.open(out / "results.sqlite", meta) as store:
        started_on = store.meta().get(DATASET_KEY)
        if started_on is not None and meta.get(DATASET_KEY) != started_on:
            raise InvalidInput(DATASET_KEY, meta.get(DATASET_KEY), f"{started_on}, the {split} split this run was "
                               f"started on in {out} (resuming on another dataset would mix two): choose another "
                               "output directory", where=str(out / "results.sqlite"))
        pending = set(store.pending([e.episode_id for e in episodes], retry_failed=retry_failed))
        todo = [e for e in episodes if e.episode_id in pending]
        summary = RunSummary(out, len(episodes), len(episodes) - len(todo))
        log(f"[eval] {len(episodes)} {split} episodes, {summary.skipped} already in {out / 'results.sqlite'}, "
            f"{len(todo)} to run on {where}")
        t0 = time.perf_counter()
        for k, res in enumerate(evaluate(todo) if todo else ()):
            if res.thumbnail:
                save_thumbnail(inside(out / "frames", res.episode_id, ".jpg", "episode_id"), res.thumbnail)
            store.put(res.stored(), replace=retry_failed)
            summary.done += 1
            summary.failed += res.status == "failed"
            summary.seconds.update(res.timing)
            el = time.perf_counter() - t0
            eta = el / (k + 1) * (len(todo) - k - 1)
            note = f" FAILED ({res.reason})" if res.status == "failed" else ""
            log(f"[eval] {summary.skipped + k + 1}/{len(episodes)} {res.episode_id}{note}  {el:.0f} s, ETA {eta:.0f} s")
        summary.wall = time.perf_counter() - t0
        ids = {e.episode_id for e in episodes}
        summary.failures = [(i, why) for i, why in store.failures() if i in ids]
        summary.complete = not store.pending(run_ids)
        summary.run_ok = len(run_ids) - len(store.pending(run_ids, retry_failed=True))
    return summary
