"""``affectsim train RECOGNIZER``: train on the train split only, select on val, freeze.

1. Render training clips (``training_data``) for a stratified, seeded subset of the train and
   val splits, and of the test split for the quality report only (never for fitting or
   selection); clips are cached under ``data/perception`` keyed by that subset. Subsets are drawn
   in tiers (:data:`SUBSET`), so adding a tier renders only the new episodes.
2. Fit (``pose-temporal``: an MLP on pose features, PyTorch on the CPU, fixed seeds and threads
   so that a rerun gives the same weights), select the epoch with the best val macro-F1 and fit a
   softmax temperature on val.
   pose-temporal and rgb-clip also fit a VAD head on their own clip features (ridge, strength
   chosen on val: ``affectsim_eval.training.vad_fit``); the committee combines its members' VAD with its
   weights; majority stores the train split's mean VAD per class.
3. Write ``affectsim_perception/checkpoints/NAME/{weights.npz, manifest.json}``: weights SHA-256,
   the dataset version and splits' SHA-256 (the evaluator refuses a checkpoint trained on another
   dataset version), subset sizes and seed, val / test metrics per view, per-class
   recall, and the code version.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections import Counter
from functools import cached_property
from pathlib import Path
from typing import Callable

import numpy as np

from affectsim_bridge.content.library import DEFAULT_DIR as MOTIONS_DIR
from affectsim_bridge.content.library import Library
from affectsim_core.atomic import staged_dir
from affectsim_core.classification import macro_f1
from affectsim_core.episode import Episode
from affectsim_core.errors import InvalidInput
from affectsim_core.protocol import EMOTIONS, PAPER_FAMILIES
from affectsim_core.provenance import code_version
from affectsim_core.readers import read_json
from affectsim_core.registry import Registry
from affectsim_eval.dataset.episodes import DATASET_DIR, load_split, read_manifest
from affectsim_eval.training.training_data import DATA_DIR, GENERATOR, VIEWS, load_clips, render_split
from affectsim_eval.training.vad_fit import fit_vad_head, vad_quality
from affectsim_perception.recognizers.base import CHECKPOINT_DIR
from affectsim_perception.recognizers.committee import MEMBERS, load_members, member_probs, member_vad
from affectsim_perception.recognizers.pose_temporal import (
    mirror_pose,
    net_logits,
    pose_features,
    softmax,
)
from affectsim_perception.recognizers.rgb_clip import clip_vector
from affectsim_perception.recognizers.vad_head import has_vad_head, vad_head

# Episodes rendered per split (two views each), in tiers: each tier is a stratified draw from the
# episodes the earlier tiers left, so the training set grows by adding a tier (earlier clips reused).
SUBSET = {"train": (5000, 5000), "val": (300,), "test": (400,)}
MAX_STAMP_BYTES = 2 ** 20  # a rendered subset's subset.json (~150 bytes)
GOOD_VIEW = 0.7  # visible-body fraction from which a clip counts as a reference-like (good) view


def _subset(episodes: list[Episode], n: int, seed) -> list[Episode]:
    """``n`` episodes stratified by family and emotion (``seed``: a numpy seed)."""
    rng = np.random.default_rng(seed)
    groups: dict[tuple, list[Episode]] = {}
    for e in episodes:
        groups.setdefault((e.family, e.emotion), []).append(e)
    out = []
    for key in sorted(groups):
        g = groups[key]
        k = max(1, round(n * len(g) / len(episodes)))
        out += [g[i] for i in sorted(rng.choice(len(g), size=min(k, len(g)), replace=False))]
    return sorted(out, key=lambda e: e.episode_id)[:n] if len(out) > n else out


def tiered_subset(episodes: list[Episode], tiers: tuple[int, ...], seed: int) -> list[Episode]:
    """Tier 0: ``_subset`` of ``tiers[0]`` episodes; tier k: a stratified draw of ``tiers[k]`` from
    the episodes not yet drawn (seeded by ``[seed, k]``). The tiers are concatenated in order."""
    out: list[Episode] = []
    for k, n in enumerate(tiers):
        taken = {e.episode_id for e in out}
        rest = [e for e in episodes if e.episode_id not in taken]
        out += _subset(rest, n, seed if k == 0 else [seed, k])
    return out


def _paper(episodes: list[Episode]) -> list[Episode]:
    """The episodes of the paper's families: the recognizers learn one label per clip (an evolving
    episode's label changes; its clips add nothing to the subset the tiers draw)."""
    return [e for e in episodes if e.family in PAPER_FAMILIES]


def ensure_clips(split: str, tiers: tuple[int, ...], seed: int, root: Path = DATASET_DIR, data: Path = DATA_DIR,
                 log: Callable[[str], None] = print) -> dict:
    """Render the split's clip subset unless the cached one was rendered from the same episodes;
    clips of episodes in a cache of the same generator are reused, not rendered again."""
    eps = tiered_subset(_paper(load_split(split, root)), tuple(tiers), seed)
    key = hashlib.sha256(f"generator {GENERATOR}:{','.join(e.episode_id for e in eps)}".encode()).hexdigest()
    stamp = Path(data) / split / "subset.json"
    old = read_json(stamp, MAX_STAMP_BYTES, "subset.json") if stamp.is_file() else {}
    old = old if isinstance(old, dict) else {}  # a stamp of another shape: render again
    if old.get("key") != key:
        reuse = load_clips(split, data) if old.get("generator") == GENERATOR else None
        log(f"[train] rendering {len(eps)} {split} episodes x {len(VIEWS)} views"
            + (f" (reusing the clips of the {old.get('episodes')} cached ones)" if reuse else ""))
        render_split(split, eps, data, reuse=reuse, log=log)
        stamp.write_text(json.dumps({"key": key, "episodes": len(eps), "seed": seed, "generator": GENERATOR}))
    return {"episodes": len(eps), "key": key, "tiers": list(tiers)}


def _write(name: str, arrays: dict[str, np.ndarray], manifest: dict, out: Path) -> Path:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    blob = buf.getvalue()
    manifest = {"recognizer": name, "weights_sha256": hashlib.sha256(blob).hexdigest(), **manifest}
    with staged_dir(Path(out) / name, f".{name}-") as tmp:
        (tmp / "weights.npz").write_bytes(blob)
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return Path(out) / name


def _dataset(root: Path) -> dict:
    """What a checkpoint records of the dataset it was trained on: its version and split hashes."""
    m = read_manifest(root)
    return {"dataset_version": m["version"], "dataset_splits_sha256": {s: v["sha256"] for s, v in m["splits"].items()}}


def _metrics(y: np.ndarray, p: np.ndarray) -> dict:
    recall = {e: float((p[y == k] == k).mean()) if (y == k).any() else float("nan") for k, e in enumerate(EMOTIONS)}
    return {"macro_f1": round(macro_f1(y, p), 4), "accuracy": round(float((y == p).mean()), 4), "n": int(len(y)),
            "recall": {k: round(v, 4) for k, v in recall.items()}}


def _target_vad(episodes: list[Episode], lib: Library) -> np.ndarray:
    """(N, 3) the library's VAD of each episode's target clip (one-label clips hold it constant)."""
    missing = [e.target.motion_id for e in episodes if "vad" not in lib.entries[e.target.motion_id]]
    if missing:
        raise InvalidInput("motion library", f"{len(missing)} clips without VAD (e.g. {missing[0]})",
                           f"a library with VAD labels in {lib.root / 'manifest.json'} (rebuild: affectsim motions build)")
    return np.array([lib.entries[e.target.motion_id]["vad"] for e in episodes], float)


class TrainingSet:
    """What a trainer fits on, loaded on first use (a trainer that needs no clips renders none): the
    paper-family episodes of a split, the rendered clip subsets of every split in ``sizes`` (tiers;
    :func:`ensure_clips`) with their labels and target VAD, the seed and the log."""

    def __init__(self, seed: int, root: Path, data: Path, sizes: dict[str, tuple[int, ...]], lib: Library,
                 log: Callable[[str], None]) -> None:
        self.seed, self.root, self.data, self.sizes, self.lib, self.log = seed, root, data, sizes, lib, log

    def episodes(self, split: str) -> list[Episode]:
        """The split's episodes of the paper's families (one label per clip)."""
        return _paper(load_split(split, self.root))

    def target_vad(self, episodes: list[Episode]) -> np.ndarray:
        return _target_vad(episodes, self.lib)

    @cached_property
    def subsets(self) -> dict[str, dict]:
        """Per split: the rendered subset (episodes, key, tiers), rendered here unless cached."""
        return {s: ensure_clips(s, tiers, self.seed, self.root, self.data, self.log) for s, tiers in self.sizes.items()}

    @cached_property
    def clips(self) -> dict[str, tuple]:
        """Per split: (poses (N, 8, 33, 6), 64x64 frames (N, 8, 64, 64, 3), metadata) of its rendered clips."""
        self.subsets
        return {s: load_clips(s, self.data) for s in self.sizes}

    @cached_property
    def labels(self) -> dict[str, np.ndarray]:
        return {s: np.array([c["label"] for c in self.clips[s][2]]) for s in self.sizes}

    @cached_property
    def vad(self) -> dict[str, np.ndarray]:
        """Per split: (N, 3) the library VAD of each clip's target motion."""
        by_id = {s: {e.episode_id: e for e in load_split(s, self.root)} for s in self.sizes}
        return {s: self.target_vad([by_id[s][c["episode_id"]] for c in self.clips[s][2]]) for s in self.sizes}


class Trainer:
    """How one recognizer's checkpoint is fitted: registered in :data:`TRAINERS` under the name of the
    recognizer it trains (``affectsim train NAME`` writes ``checkpoints/NAME``).

    :meth:`fit` returns the checkpoint's arrays and its manifest entries; for a trainer that
    ``renders_clips``, :func:`train` then scores :meth:`probs` (and :meth:`vad`) of the fitted arrays on
    the val and test clips; the perception bench scores the shipped checkpoint's on the test clips.
    """

    name: str = ""  # the recognizer it trains, set by the registration
    renders_clips = True  # False: fitted from the episodes alone (no clip is rendered, no clip metrics)

    def fit(self, data: TrainingSet) -> tuple[dict[str, np.ndarray], dict]:
        """(checkpoint arrays, manifest entries: e.g. the training curve under ``training``)."""
        raise NotImplementedError

    def probs(self, weights: dict[str, np.ndarray], clips: tuple) -> np.ndarray:
        """(N, 5) probabilities of the checkpoint ``weights`` for a split's clips (:attr:`TrainingSet.clips`)."""
        raise NotImplementedError

    def vad(self, weights: dict[str, np.ndarray], clips: tuple) -> np.ndarray | None:
        """(N, 3) VAD estimates for the clips, or None for a recognizer without them."""
        return None


TRAINERS: Registry[Trainer] = Registry("trainer", name_attr="name")


def train(name: str, seed: int = 0, out: Path = CHECKPOINT_DIR, root: Path = DATASET_DIR, data: Path = DATA_DIR,
          subset: dict | None = None, log: Callable[[str], None] = print, motions: Path = MOTIONS_DIR) -> dict:
    if name not in TRAINERS:
        raise InvalidInput("recognizer", name, f"one of {tuple(TRAINERS.names())} (the others have no weights to train)")
    trainer = TRAINERS.create(name)
    common = {"seed": seed, **_dataset(root), "code_version": code_version(),
              "command": f"affectsim train {name} --seed {seed}"}
    ds = TrainingSet(seed, root, data, {**SUBSET, **(subset or {})}, Library(motions), log)
    weights, extra = trainer.fit(ds)
    if not trainer.renders_clips:
        path = _write(name, weights, {**common, **extra}, out)
        log(f"[train] {name} -> {path}")
        return json.loads((path / "manifest.json").read_text())
    metrics = {}
    for s in ("val", "test"):
        clips, labels = ds.clips[s], ds.labels[s]
        pred = trainer.probs(weights, clips).argmax(axis=1)
        metrics[s] = {"all": _metrics(labels, pred)}
        for view in VIEWS:
            sel = np.array([c["view"] == view for c in clips[2]])
            metrics[s][view] = _metrics(labels[sel], pred[sel])
        good = np.array([c["visible_fraction"] >= GOOD_VIEW for c in clips[2]])
        metrics[s]["good_view"] = _metrics(labels[good], pred[good])
        vad_pred = trainer.vad(weights, clips)
        if vad_pred is not None:
            metrics[s]["vad"] = vad_quality(ds.vad[s], vad_pred)
    manifest = {**common, **extra, "subsets": {s: {**v, "clips": int(len(ds.labels[s]))} for s, v in ds.subsets.items()},
                "metrics": metrics}
    path = _write(name, weights, manifest, out)
    t = metrics["test"]
    log(f"[train] {name}: val macro-F1 {metrics['val']['all']['macro_f1']:.3f}; test macro-F1: good views (visible >= "
        f"{GOOD_VIEW}) {t['good_view']['macro_f1']:.3f}, reference {t['reference']['macro_f1']:.3f}, random "
        f"{t['random']['macro_f1']:.3f}, all {t['all']['macro_f1']:.3f} -> {path}")
    return json.loads((path / "manifest.json").read_text())


# ---------------------------------------------------------------------------------------------- shipped trainers
@TRAINERS.register("majority")
class MajorityTrainer(Trainer):
    """The train split's class counts and each class's mean target VAD."""

    renders_clips = False

    def fit(self, data):
        train_eps = data.episodes("train")
        counts = Counter(e.emotion for e in train_eps)
        arr = np.array([counts[e] for e in EMOTIONS], np.int64)
        vad = data.target_vad(train_eps)
        class_vad = np.array([vad[[e.emotion == k for e in train_eps]].mean(0) for k in EMOTIONS])
        data.log(f"[train] majority: {dict(zip(EMOTIONS, arr.tolist()))}")
        return {"class_counts": arr, "class_vad": class_vad}, {
            "class_counts": dict(zip(EMOTIONS, arr.tolist())),
            "class_vad": {k: [round(float(x), 4) for x in v] for k, v in zip(EMOTIONS, class_vad)}}

    def probs(self, weights, clips):
        p = np.zeros(len(EMOTIONS))
        p[int(np.argmax(weights["class_counts"]))] = 1.0  # the recognizer's one-hot answer
        return np.tile(p, (len(clips[2]), 1))


def _pose_feats(clips: tuple) -> np.ndarray:
    return np.stack([pose_features(k) for k in clips[0]])


@TRAINERS.register("pose-temporal")
class PoseTemporalTrainer(Trainer):
    """An MLP ensemble on pose features (train clips and their mirror images), and a VAD head."""

    def fit(self, data):
        from affectsim_eval.training import fitting  # torch: loaded only when a network is trained

        clips, labels, vad = data.clips, data.labels, data.vad
        feats = {s: _pose_feats(clips[s]) for s in ("train", "val")}
        x = np.concatenate([feats["train"], np.stack([pose_features(mirror_pose(k)) for k in clips["train"][0]])])
        y = np.concatenate([labels["train"], labels["train"]])
        weights, curve = fitting.fit_pose_ensemble(x, y, feats["val"], labels["val"], data.seed, data.log)
        head, vad_fit = fit_vad_head(x, np.concatenate([vad["train"], vad["train"]]), feats["val"], vad["val"],
                                     data.log)  # VAD does not change in the mirror
        weights.update(head)
        return weights, {"vad_head": vad_fit, "n_features": int(feats["train"].shape[1]), "training": curve}

    def probs(self, weights, clips):
        return softmax(net_logits(weights, _pose_feats(clips)))

    def vad(self, weights, clips):
        return vad_head(weights, _pose_feats(clips)) if has_vad_head(weights) else None


def _clip_vectors(weights: dict[str, np.ndarray], clips: tuple) -> np.ndarray:
    return np.stack([clip_vector(weights, f) for f in clips[1]])


@TRAINERS.register("rgb-clip")
class RgbClipTrainer(Trainer):
    """A small CNN on 64x64 frames with a linear layer and a temperature, and a VAD head on its clip vectors."""

    def fit(self, data):
        from affectsim_eval.training import fitting  # torch: loaded only when a network is trained

        clips, labels, vad = data.clips, data.labels, data.vad
        weights, curve = fitting.fit_rgb_clip(clips["train"][1], labels["train"], clips["val"][1], labels["val"],
                                              data.seed, data.log)
        vec = {s: _clip_vectors(weights, clips[s]) for s in ("train", "val")}
        head, vad_fit = fit_vad_head(vec["train"], vad["train"], vec["val"], vad["val"], data.log)
        weights.update(head)
        return weights, {"vad_head": vad_fit, "training": curve}

    def probs(self, weights, clips):
        vec = _clip_vectors(weights, clips)
        return softmax((vec @ weights["fc.weight"].T + weights["fc.bias"]) / float(weights["temperature"]))

    def vad(self, weights, clips):
        return vad_head(weights, _clip_vectors(weights, clips)) if has_vad_head(weights) else None


@TRAINERS.register("committee")
class CommitteeTrainer(Trainer):
    """Weights of the shipped members' calibrated probabilities, fit on val (:func:`fit_committee`)."""

    @cached_property
    def members(self):
        return load_members()

    def fit(self, data):
        weights, curve = fit_committee(member_probs(self.members, *data.clips["val"][:2]), data.labels["val"], data.log)
        return weights, {"members": list(MEMBERS), "training": curve}

    def probs(self, weights, clips):
        return np.tensordot(weights["weights"], member_probs(self.members, clips[0], clips[1]), axes=1)

    def vad(self, weights, clips):
        if not all(m.estimates_vad for m in self.members):
            return None
        return np.tensordot(weights["weights"], member_vad(self.members, clips[0], clips[1]), axes=1)


def fit_committee(member_probs: np.ndarray, y: np.ndarray, log: Callable[[str], None] = print,
                  step: float = 0.05) -> tuple[dict, dict]:
    """Weights (on a simplex grid) of the calibrated members' probabilities maximising val macro-F1
    (ties: higher val log-likelihood). ``member_probs`` (M, N, 5)."""
    m = member_probs.shape[0]
    grid = np.arange(0.0, 1.0 + 1e-9, step)
    best = (-1.0, -np.inf, None)
    for w in (np.array(c) for c in np.array(np.meshgrid(*[grid] * m)).reshape(m, -1).T):
        if abs(w.sum() - 1.0) > 1e-6:
            continue
        p = np.tensordot(w, member_probs, axes=1)
        f1 = macro_f1(y, p.argmax(1))
        ll = float(np.log(p[np.arange(len(y)), y] + 1e-9).mean())
        if (f1, ll) > best[:2]:
            best = (f1, ll, w)
    log(f"[train] committee weights {np.round(best[2], 2).tolist()}: val macro-F1 {best[0]:.3f}")
    return {"weights": best[2].astype(np.float64)}, {"grid_step": step, "val_macro_f1": round(best[0], 4),
                                                      "val_log_likelihood": round(best[1], 4)}
