"""What defines a benchmark run: its configuration, its episodes, its metadata and its data.

:class:`EvalConfig` is stored with every run (a resume must match it). :func:`select_episodes`
picks the run's episodes from ``data/episodes``; :class:`EvalData` opens the motion library and
scenes the episodes refer to (one scene kept loaded: episodes arrive grouped by scene).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from affectsim_bridge.backends import BACKENDS, DEFAULT_BACKEND
from affectsim_bridge.humans.library import Library
from affectsim_bridge.scene import Scene, load_scene
from affectsim_core.episode import Episode
from affectsim_core.errors import InvalidInput
from affectsim_core.protocol import MAX_ACTIONS, MAX_PLANNER_CALLS, SPLITS
from affectsim_core.provenance import code_version
from affectsim_eval.dataset.episodes import DATASET_DIR, load_split
from affectsim_eval.dataset.splits import stratified_subset
from affectsim_nav.base_control import EXECUTIONS
from affectsim_nav.policy import POLICIES
from affectsim_perception.recognizers import DEFAULT_RECOGNIZERS, RECOGNIZERS
from affectsim_perception.recognizers.base import CHECKPOINT_DIR

DATA_DIR = DATASET_DIR.parent  # holds motions/, scenes/ and episodes/ (`make bench` builds them)
MAX_BUDGET = 100_000  # upper bound of either budget a run may set
DATASET_KEY = "dataset_split_sha256"  # run metadata: the checksum of the split a run evaluates


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
        if not (1 <= self.max_actions <= MAX_BUDGET):
            raise InvalidInput("max_actions", self.max_actions, f"1..{MAX_BUDGET}")
        if not (0 <= self.max_planner_calls <= MAX_BUDGET):
            raise InvalidInput("max_planner_calls", self.max_planner_calls, f"0..{MAX_BUDGET}")
        return self

    def as_dict(self) -> dict:
        return {"split": self.split, "episodes": self.episodes, "seed": self.seed, "ids": list(self.ids),
                "recognizers": list(self.recognizers), "policy": self.policy, "max_actions": self.max_actions,
                "max_planner_calls": self.max_planner_calls, "backend": self.backend, "execution": self.execution}


def select_episodes(cfg: EvalConfig, data: Path = DATA_DIR) -> list[Episode]:
    """The run's episodes from ``data/episodes``: the split, or its stratified subset, grouped by
    scene (workers keep one scene loaded)."""
    root = Path(data) / "episodes"
    if not (root / "manifest.json").is_file():
        raise InvalidInput("dataset", str(root), "a built dataset: run `affectsim scenes build && affectsim dataset build`")
    eps = load_split(cfg.split, root)
    if cfg.ids:
        by_id = {e.episode_id: e for e in eps}
        missing = [i for i in cfg.ids if i not in by_id]
        if missing:
            raise InvalidInput("episode ids", missing[:5], f"ids of the {cfg.split} split")
        eps = [by_id[i] for i in dict.fromkeys(cfg.ids)]
    elif cfg.episodes:
        eps = stratified_subset(eps, min(cfg.episodes, len(eps)), cfg.seed)
    return sorted(eps, key=lambda e: (e.scene_id, e.episode_id))


def run_meta(cfg: EvalConfig, eps: list[Episode], data: Path = DATA_DIR) -> dict:
    """Run metadata: the configuration, code version, dataset and checkpoint checksums."""
    checkpoints = {}
    for n in cfg.recognizers:
        m = Path(CHECKPOINT_DIR) / n / "manifest.json"
        if m.is_file():
            checkpoints[n] = json.loads(m.read_text()).get("weights_sha256")
    manifest = json.loads((Path(data) / "episodes" / "manifest.json").read_text())
    return {"config": cfg.as_dict(), "code_version": code_version(), "checkpoints": checkpoints,
            "data_dir": str(Path(data).resolve()),
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
