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
from affectsim_perception.recognizers.vad_head import vad_head

TRAINABLE = ("pose-temporal", "rgb-clip", "committee", "majority")
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


def train(name: str, seed: int = 0, out: Path = CHECKPOINT_DIR, root: Path = DATASET_DIR, data: Path = DATA_DIR,
          subset: dict | None = None, log: Callable[[str], None] = print, motions: Path = MOTIONS_DIR) -> dict:
    if name not in TRAINABLE:
        raise InvalidInput("recognizer", name, f"one of {TRAINABLE} (the others have no weights to train)")
    common = {"seed": seed, **_dataset(root), "code_version": code_version(),
              "command": f"affectsim train {name} --seed {seed}"}
    lib = Library(motions)
    if name == "majority":
        train_eps = _paper(load_split("train", root))
        counts = Counter(e.emotion for e in train_eps)
        arr = np.array([counts[e] for e in EMOTIONS], np.int64)
        vad = _target_vad(train_eps, lib)
        class_vad = np.array([vad[[e.emotion == k for e in train_eps]].mean(0) for k in EMOTIONS])
        path = _write(name, {"class_counts": arr, "class_vad": class_vad},
                      {**common, "class_counts": dict(zip(EMOTIONS, arr.tolist())),
                       "class_vad": {k: [round(float(x), 4) for x in v] for k, v in zip(EMOTIONS, class_vad)}}, out)
        log(f"[train] majority: {dict(zip(EMOTIONS, arr.tolist()))} -> {path}")
        return json.loads((path / "manifest.json").read_text())
    from affectsim_eval.training import fitting  # torch: loaded only when a network is trained

    sizes = {**SUBSET, **(subset or {})}
    subsets = {s: ensure_clips(s, tiers, seed, root, data, log) for s, tiers in sizes.items()}
    clips = {s: load_clips(s, data) for s in sizes}
    labels = {s: np.array([c["label"] for c in clips[s][2]]) for s in sizes}
    by_id = {s: {e.episode_id: e for e in load_split(s, root)} for s in sizes}
    vad = {s: _target_vad([by_id[s][c["episode_id"]] for c in clips[s][2]], lib) for s in sizes}
    extra: dict = {}
    if name == "pose-temporal":
        feats = {s: np.stack([pose_features(k) for k in clips[s][0]]) for s in sizes}
        x = np.concatenate([feats["train"], np.stack([pose_features(mirror_pose(k)) for k in clips["train"][0]])])
        y = np.concatenate([labels["train"], labels["train"]])
        weights, curve = fitting.fit_pose_ensemble(x, y, feats["val"], labels["val"], seed, log)
        head, extra["vad_head"] = fit_vad_head(x, np.concatenate([vad["train"], vad["train"]]), feats["val"],
                                               vad["val"], log)  # VAD does not change in the mirror
        weights.update(head)
        extra["n_features"] = int(feats["train"].shape[1])
        probs = {s: softmax(net_logits(weights, feats[s])) for s in ("val", "test")}
        vad_pred = {s: vad_head(weights, feats[s]) for s in ("val", "test")}
    elif name == "rgb-clip":
        weights, curve = fitting.fit_rgb_clip(clips["train"][1], labels["train"], clips["val"][1], labels["val"], seed, log)
        vec = {s: np.stack([clip_vector(weights, f) for f in clips[s][1]]) for s in sizes}
        head, extra["vad_head"] = fit_vad_head(vec["train"], vad["train"], vec["val"], vad["val"], log)
        weights.update(head)
        probs = {s: softmax((vec[s] @ weights["fc.weight"].T + weights["fc.bias"]) / float(weights["temperature"]))
                 for s in ("val", "test")}
        vad_pred = {s: vad_head(weights, vec[s]) for s in ("val", "test")}
    else:  # committee over the shipped member checkpoints
        members = load_members()
        per = {s: member_probs(members, clips[s][0], clips[s][1]) for s in ("val", "test")}
        weights, curve = fit_committee(per["val"], labels["val"], log)
        probs = {s: np.tensordot(weights["weights"], per[s], axes=1) for s in ("val", "test")}
        extra["members"] = list(MEMBERS)
        vad_pred = {s: np.tensordot(weights["weights"], member_vad(members, clips[s][0], clips[s][1]), axes=1)
                    for s in ("val", "test")} if all(m.estimates_vad for m in members) else {}
    metrics = {}
    for s in ("val", "test"):
        pred = probs[s].argmax(axis=1)
        metrics[s] = {"all": _metrics(labels[s], pred)}
        for view in VIEWS:
            sel = np.array([c["view"] == view for c in clips[s][2]])
            metrics[s][view] = _metrics(labels[s][sel], pred[sel])
        good = np.array([c["visible_fraction"] >= GOOD_VIEW for c in clips[s][2]])
        metrics[s]["good_view"] = _metrics(labels[s][good], pred[good])
        if vad_pred:
            metrics[s]["vad"] = vad_quality(vad[s], vad_pred[s])
    manifest = {**common, **extra, "subsets": {s: {**v, "clips": int(len(labels[s]))} for s, v in subsets.items()},
                "training": curve, "metrics": metrics}
    path = _write(name, weights, manifest, out)
    t = metrics["test"]
    log(f"[train] {name}: val macro-F1 {metrics['val']['all']['macro_f1']:.3f}; test macro-F1: good views (visible >= "
        f"{GOOD_VIEW}) {t['good_view']['macro_f1']:.3f}, reference {t['reference']['macro_f1']:.3f}, random "
        f"{t['random']['macro_f1']:.3f}, all {t['all']['macro_f1']:.3f} -> {path}")
    return json.loads((path / "manifest.json").read_text())


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
