"""What defines a benchmark run: its configuration, its episodes, its metadata and its data.

:class:`EvalConfig` is stored with every run (a resume must match it). :func:`select_episodes`
picks the run's episodes from ``data/episodes``; :class:`EvalData` opens the motion library and
scenes the episodes refer to (one scene kept loaded: episodes arrive grouped by scene).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from affectsim_bridge.backends import BACKENDS, DEFAULT_BACKEND
from affectsim_bridge.content.library import Library
from affectsim_bridge.humans.reactive import HUMANS_MODES
from affectsim_bridge.world.scene import Scene, load_scene
from affectsim_core.episode import Episode
from affectsim_core.errors import InvalidInput
from affectsim_core.protocol import FAMILIES, MAX_ACTIONS, MAX_PLANNER_CALLS, PAPER_FAMILIES, SPLITS
from affectsim_core.provenance import code_version
from affectsim_eval.dataset.episodes import DATASET_DIR, GET_A_DATASET, dataset_version, load_split, read_manifest
from affectsim_eval.dataset.splits import stratified_subset
from affectsim_nav.base_control import EXECUTIONS
from affectsim_nav.policy import POLICIES
from affectsim_perception.recognizers import DEFAULT_RECOGNIZERS, RECOGNIZERS
from affectsim_perception.recognizers.base import CHECKPOINT_DIR
from affectsim_perception.recognizers.base import read_manifest as read_checkpoint_manifest

DATA_DIR = DATASET_DIR.parent  # holds motions/, scenes/ and episodes/ (`make bench` builds them)
MAX_BUDGET = 100_000  # upper bound of either budget a run may set
DATASET_KEY = "dataset_split_sha256"  # run metadata: the checksum of the split a run evaluates
# the bench graph's (and `make bench`'s) stratified test subset: the most episodes a fresh clone on an idle
# 2-core machine runs within 15 minutes, setup included (docs/evaluation.md, "Where the time of make bench goes")
DEFAULT_EPISODES = 160
MAX_SHARDS = 64  # most parts a run may be split into (``shard:=k/N``, ``graphs:=N``)


@dataclass(frozen=True)
class Shard:
    """Part ``index`` of ``count`` of a run: every ``count``-th of the run's episodes from the ``index``-th
    (they are sorted by scene, so a part still meets each scene's episodes one after the other; and the
    parts get alike mixes of scenes and families, so they finish at about the same time: contiguous
    blocks of 50 of ``make bench``'s 100 episodes finished 96 s apart in a 395-s run). Every part writes
    into the same results store; the run's metadata, resume and report are those of the whole run."""

    index: int = 0
    count: int = 1

    @classmethod
    def parse(cls, text: str, field: str = "shard") -> "Shard":
        """``"k/N"`` (0 <= k < N <= :data:`MAX_SHARDS`); InvalidInput naming ``field`` otherwise."""
        k, sep, n = str(text).strip().partition("/")
        if not (sep and k.isdigit() and n.isdigit() and 0 <= int(k) < int(n) <= MAX_SHARDS):
            raise InvalidInput(field, text, f"k/N with 0 <= k < N <= {MAX_SHARDS} (part k of N, counted from 0)")
        return cls(int(k), int(n))

    def of(self, episodes: list[Episode]) -> list[Episode]:
        """This part's episodes of ``episodes``, in their order (the parts' sizes differ by one at most)."""
        return episodes[self.index::self.count]

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass(frozen=True)
class EvalConfig:
    """What defines a run's results (stored with the run; a resume must match it)."""

    split: str = "test"
    episodes: int = 0  # stratified subset size; 0 = the whole split
    seed: int = 0  # of the subset
    ids: tuple[str, ...] = ()  # explicit episode ids of the split (instead of a subset)
    recognizers: tuple[str, ...] = DEFAULT_RECOGNIZERS
    policy: str = "baseline"
    max_actions: int = MAX_ACTIONS
    max_planner_calls: int = MAX_PLANNER_CALLS
    backend: str = DEFAULT_BACKEND
    execution: str = "lockstep"  # how the nav node moves the robot (continuous time: cmd_vel, nav2)
    humans: str = "scripted"  # scripted (the paper's protocol) or reactive (people respond to the robot)
    families: tuple[str, ...] = PAPER_FAMILIES  # the episode families a subset is drawn from (or "evolving")

    def validate(self) -> "EvalConfig":
        if self.split not in SPLITS:
            raise InvalidInput("split", self.split, f"one of {', '.join(SPLITS)}")
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
        if self.backend not in BACKENDS:
            raise InvalidInput("backend", self.backend, f"one of {BACKENDS.names()}")
        if self.execution not in EXECUTIONS:
            raise InvalidInput("execution", self.execution, f"one of {', '.join(EXECUTIONS)}")
        if self.humans not in HUMANS_MODES:
            raise InvalidInput("humans", self.humans, f"one of {', '.join(HUMANS_MODES)}")
        if not self.families or not set(self.families) <= set(FAMILIES):
            raise InvalidInput("families", list(self.families), f"a non-empty list of {', '.join(FAMILIES)}")
        if not (1 <= self.max_actions <= MAX_BUDGET):
            raise InvalidInput("max_actions", self.max_actions, f"1..{MAX_BUDGET}")
        if not (0 <= self.max_planner_calls <= MAX_BUDGET):
            raise InvalidInput("max_planner_calls", self.max_planner_calls, f"0..{MAX_BUDGET}")
        return self

    def as_dict(self) -> dict:
        """The stored form; ``humans`` only when reactive and ``families`` only when not the paper's, so
        runs stored before those options existed resume under the defaults."""
        out = {"split": self.split, "episodes": self.episodes, "seed": self.seed, "ids": list(self.ids),
               "recognizers": list(self.recognizers), "policy": self.policy, "max_actions": self.max_actions,
               "max_planner_calls": self.max_planner_calls, "backend": self.backend, "execution": self.execution}
        out = out if self.humans == "scripted" else {**out, "humans": self.humans}
        return out if self.families == PAPER_FAMILIES else {**out, "families": list(self.families)}


def select_episodes(cfg: EvalConfig, data: Path = DATA_DIR) -> list[Episode]:
    """The run's episodes from ``data/episodes``: the split, or its stratified subset, grouped by
    scene (workers keep one scene loaded)."""
    root = Path(data) / "episodes"
    if not (root / "manifest.json").is_file():
        raise InvalidInput("dataset", str(root), f"a built dataset: {GET_A_DATASET}")
    eps = load_split(cfg.split, root)
    if cfg.ids:
        by_id = {e.episode_id: e for e in eps}
        missing = [i for i in cfg.ids if i not in by_id]
        if missing:
            raise InvalidInput("episode ids", missing[:5], f"ids of the {cfg.split} split")
        eps = [by_id[i] for i in dict.fromkeys(cfg.ids)]
    else:
        eps = [e for e in eps if e.family in cfg.families]
        if not eps:
            raise InvalidInput("families", list(cfg.families), f"families with episodes in the {cfg.split} split")
        if cfg.episodes:
            eps = stratified_subset(eps, min(cfg.episodes, len(eps)), cfg.seed)
    return sorted(eps, key=lambda e: (e.scene_id, e.episode_id))


def trained_on(recognizers: tuple[str, ...], checkpoints: Path = CHECKPOINT_DIR) -> dict[str, dict]:
    """Recognizer -> its checkpoint's weights SHA-256, dataset version and split hashes, for the
    recognizers that have a checkpoint (a manifest from before versions were recorded gets its version
    computed from its split hashes)."""
    out = {}
    for n in recognizers:
        if not (Path(checkpoints) / n / "manifest.json").is_file():
            continue
        m = read_checkpoint_manifest(n, checkpoints)
        splits = m.get("dataset_splits_sha256") or {}
        out[n] = {"weights_sha256": m.get("weights_sha256"), "splits": splits,
                  "dataset_version": m.get("dataset_version") or dataset_version(splits)}
    return out


def _short(splits: dict[str, str]) -> str:
    return ", ".join(f"{s} {splits.get(s, '?')[:6]}…" for s in SPLITS)


def run_meta(cfg: EvalConfig, eps: list[Episode], data: Path = DATA_DIR, allow_dataset_mismatch: bool = False,
             checkpoints: Path = CHECKPOINT_DIR) -> dict:
    """Run metadata: the configuration, code version, dataset version and checksums, and the checkpoints
    with the dataset version each was trained on.

    Refuses (naming both versions and their split hashes) when a checkpoint was trained on another
    dataset version than the one evaluated, unless ``allow_dataset_mismatch``: the metadata then lists
    those checkpoints under ``dataset_mismatch`` and the report's validity section states it."""
    manifest = read_manifest(Path(data) / "episodes")
    version, splits = manifest["version"], {s: v["sha256"] for s, v in manifest["splits"].items()}
    ckpts = trained_on(cfg.recognizers, checkpoints)
    mismatch = {n: c["dataset_version"] for n, c in ckpts.items() if c["dataset_version"] != version}
    if mismatch and not allow_dataset_mismatch:
        n = sorted(mismatch)[0]
        raise InvalidInput(f"checkpoints.{n}.dataset_version", mismatch[n],
                           f"{version!r}, the version of {Path(data) / 'episodes'} ({_short(splits)}); the checkpoint "
                           f"was trained on {_short(ckpts[n]['splits'])}"
                           + (f" (also mismatched: {', '.join(sorted(mismatch)[1:])})" if len(mismatch) > 1 else "")
                           + f". Retrain it (`affectsim train {n}`) or run with --allow-dataset-mismatch "
                           "(allow_dataset_mismatch:=true), which the report states")
    return {"config": cfg.as_dict(), "code_version": code_version(),
            "checkpoints": {n: c["weights_sha256"] for n, c in ckpts.items()},
            "checkpoint_dataset_versions": {n: c["dataset_version"] for n, c in ckpts.items()},
            "dataset_mismatch": mismatch, "data_dir": str(Path(data).resolve()), "dataset_version": version,
            DATASET_KEY: manifest["splits"][cfg.split]["sha256"],
            "episode_ids": [e.episode_id for e in eps]}


class EvalData:
    """The motion library and scenes of a data directory (``motions/``, ``scenes/``): motions loaded on
    demand, the last scene kept loaded."""

    def __init__(self, root: Path = DATA_DIR) -> None:
        self.root = Path(root)
        self.library = Library(self.root / "motions")
        self.scenes_dir = self.root / "scenes"
        self._scene: Scene | None = None

    def load_motion(self, motion_id: str):
        return self.library.load(motion_id)

    def scene(self, scene_id: str) -> Scene:
        if self._scene is None or self._scene.id != scene_id:
            self._scene = load_scene(scene_id, self.scenes_dir)
        return self._scene
