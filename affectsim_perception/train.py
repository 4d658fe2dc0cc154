"""``affectsim train RECOGNIZER``: train on the train split only, select on val, freeze.

1. Render training clips (``training_data``) for a stratified, seeded subset of the train and
   val splits, and of the test split for the quality report only (never for fitting or
   selection); clips are cached under ``data/perception`` keyed by that subset. Subsets are drawn
   in tiers (:data:`SUBSET`), so adding a tier renders only the new episodes.
2. Fit (``pose-temporal``: an MLP on pose features, PyTorch on the CPU, fixed seeds and threads
   so that a rerun gives the same weights), select the epoch with the best val macro-F1 and fit a
   softmax temperature on val.
3. Write ``affectsim_perception/checkpoints/NAME/{weights.npz, manifest.json}``: weights SHA-256,
   the dataset splits' SHA-256, subset sizes and seed, val / test metrics per view, per-class
   recall, and the code version.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Callable

import numpy as np

from affectsim_bridge.humans.features import macro_f1
from affectsim_perception.recognizers.base import CHECKPOINT_DIR, EMOTIONS
from affectsim_perception.training_data import DATA_DIR, GENERATOR, VIEWS, load_clips, render_split
from affectsim_ros.core.atomic import staged_dir
from affectsim_ros.core.errors import InvalidInput
from affectsim_ros.dataset.episodes import DATASET_DIR, load_split

TRAINABLE = ("pose-temporal", "rgb-clip", "committee", "majority")
# Episodes rendered per split (two views each), in tiers: each tier is a stratified draw from the
# episodes the earlier tiers left, so the training set grows by adding a tier (earlier clips reused).
SUBSET = {"train": (5000, 5000), "val": (300,), "test": (400,)}
GOOD_VIEW = 0.7  # visible-body fraction from which a clip counts as a reference-like (good) view


def _subset(episodes: list[dict], n: int, seed) -> list[dict]:
    """``n`` episodes stratified by family and emotion (``seed``: a numpy seed)."""
    rng = np.random.default_rng(seed)
    groups: dict[tuple, list[dict]] = {}
    for e in episodes:
        groups.setdefault((e["family"], e["emotion"]), []).append(e)
    out = []
    for key in sorted(groups):
        g = groups[key]
        k = max(1, round(n * len(g) / len(episodes)))
        out += [g[i] for i in sorted(rng.choice(len(g), size=min(k, len(g)), replace=False))]
    return sorted(out, key=lambda e: e["episode_id"])[:n] if len(out) > n else out


def tiered_subset(episodes: list[dict], tiers: tuple[int, ...], seed: int) -> list[dict]:
    """Tier 0: ``_subset`` of ``tiers[0]`` episodes; tier k: a stratified draw of ``tiers[k]`` from
    the episodes not yet drawn (seeded by ``[seed, k]``). The tiers are concatenated in order."""
    out: list[dict] = []
    for k, n in enumerate(tiers):
        taken = {e["episode_id"] for e in out}
        rest = [e for e in episodes if e["episode_id"] not in taken]
        out += _subset(rest, n, seed if k == 0 else [seed, k])
    return out


def ensure_clips(split: str, tiers: tuple[int, ...], seed: int, root: Path = DATASET_DIR, data: Path = DATA_DIR,
                 log: Callable[[str], None] = print) -> dict:
    """Render the split's clip subset unless the cached one was rendered from the same episodes;
    clips of episodes in a cache of the same generator are reused, not rendered again."""
    eps = tiered_subset(load_split(split, root), tuple(tiers), seed)
    key = hashlib.sha256(f"generator {GENERATOR}:{','.join(e['episode_id'] for e in eps)}".encode()).hexdigest()
    stamp = Path(data) / split / "subset.json"
    old = json.loads(stamp.read_text()) if stamp.is_file() else {}
    if old.get("key") != key:
        reuse = load_clips(split, data) if old.get("generator") == GENERATOR else None
        log(f"[train] rendering {len(eps)} {split} episodes x {len(VIEWS)} views"
            + (f" (reusing the clips of the {old.get('episodes')} cached ones)" if reuse else ""))
        render_split(split, eps, data, reuse=reuse, log=log)
        stamp.write_text(json.dumps({"key": key, "episodes": len(eps), "seed": seed, "generator": GENERATOR}))
    return {"episodes": len(eps), "key": key, "tiers": list(tiers)}


def _code_version() -> str:
    """The git commit, with ``+dirty`` when tracked files differ from it."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=Path(__file__).parent,
                              timeout=10).stdout.strip()

    try:
        head = git("rev-parse", "--short", "HEAD")
        return (head + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")) if head else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _write(name: str, arrays: dict[str, np.ndarray], manifest: dict, out: Path) -> Path:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    blob = buf.getvalue()
    manifest = {"recognizer": name, "weights_sha256": hashlib.sha256(blob).hexdigest(), **manifest}
    with staged_dir(Path(out) / name, f".{name}-") as tmp:
        (tmp / "weights.npz").write_bytes(blob)
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return Path(out) / name


def _split_hashes(root: Path) -> dict:
    m = json.loads((Path(root) / "manifest.json").read_text())
    return {s: v["sha256"] for s, v in m["splits"].items()}


def _metrics(y: np.ndarray, p: np.ndarray) -> dict:
    recall = {e: float((p[y == k] == k).mean()) if (y == k).any() else float("nan") for k, e in enumerate(EMOTIONS)}
    return {"macro_f1": round(macro_f1(y, p), 4), "accuracy": round(float((y == p).mean()), 4), "n": int(len(y)),
            "recall": {k: round(v, 4) for k, v in recall.items()}}


def train(name: str, seed: int = 0, out: Path = CHECKPOINT_DIR, root: Path = DATASET_DIR, data: Path = DATA_DIR,
          subset: dict | None = None, log: Callable[[str], None] = print) -> dict:
    if name not in TRAINABLE:
        raise InvalidInput("recognizer", name, f"one of {TRAINABLE} (the others have no weights to train)")
    common = {"seed": seed, "dataset_splits_sha256": _split_hashes(root), "code_version": _code_version(),
              "command": f"affectsim train {name} --seed {seed}"}
    if name == "majority":
        counts = Counter(e["emotion"] for e in load_split("train", root))
        arr = np.array([counts[e] for e in EMOTIONS], np.int64)
        path = _write(name, {"class_counts": arr}, {**common, "class_counts": dict(zip(EMOTIONS, arr.tolist()))}, out)
        log(f"[train] majority: {dict(zip(EMOTIONS, arr.tolist()))} -> {path}")
        return json.loads((path / "manifest.json").read_text())
    sizes = {**SUBSET, **(subset or {})}
    subsets = {s: ensure_clips(s, tiers, seed, root, data, log) for s, tiers in sizes.items()}
    clips = {s: load_clips(s, data) for s in sizes}
    labels = {s: np.array([c["label"] for c in clips[s][2]]) for s in sizes}
    extra: dict = {}
    if name == "pose-temporal":
        from affectsim_perception.recognizers.pose_temporal import mirror_pose, net_logits, pose_features, softmax

        feats = {s: np.stack([pose_features(k) for k in clips[s][0]]) for s in sizes}
        x = np.concatenate([feats["train"], np.stack([pose_features(mirror_pose(k)) for k in clips["train"][0]])])
        y = np.concatenate([labels["train"], labels["train"]])
        weights, curve = fit_pose_ensemble(x, y, feats["val"], labels["val"], seed, log)
        extra["n_features"] = int(feats["train"].shape[1])
        probs = {s: softmax(net_logits(weights, feats[s])) for s in ("val", "test")}
    elif name == "rgb-clip":
        from affectsim_perception.recognizers.pose_temporal import softmax
        from affectsim_perception.recognizers.rgb_clip import clip_logits

        weights, curve = fit_rgb_clip(clips["train"][1], labels["train"], clips["val"][1], labels["val"], seed, log)
        probs = {s: softmax(np.stack([clip_logits(weights, f) for f in clips[s][1]]) / float(weights["temperature"]))
                 for s in ("val", "test")}
    else:  # committee over the shipped member checkpoints
        from affectsim_perception.recognizers.committee import MEMBERS, load_members, member_probs

        members = load_members()
        per = {s: member_probs(members, clips[s][0], clips[s][1]) for s in ("val", "test")}
        weights, curve = fit_committee(per["val"], labels["val"], log)
        probs = {s: np.tensordot(weights["weights"], per[s], axes=1) for s in ("val", "test")}
        extra["members"] = list(MEMBERS)
    metrics = {}
    for s in ("val", "test"):
        pred = probs[s].argmax(axis=1)
        metrics[s] = {"all": _metrics(labels[s], pred)}
        for view in VIEWS:
            sel = np.array([c["view"] == view for c in clips[s][2]])
            metrics[s][view] = _metrics(labels[s][sel], pred[sel])
        good = np.array([c["visible_fraction"] >= GOOD_VIEW for c in clips[s][2]])
        metrics[s]["good_view"] = _metrics(labels[s][good], pred[good])
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


def _fit_epochs(net, opt, batches, predict_val, yv: np.ndarray, epochs: int, log: Callable[[str], None], tag: str,
                every: int = 1) -> list[float]:
    """The epoch loop shared by the trainers: cross-entropy steps over ``batches()`` ((input, target)
    pairs), val macro-F1 after each epoch, progress with ETA every ``every`` epochs; leaves ``net``
    at its best val epoch in eval mode and returns the val macro-F1 per epoch."""
    import torch

    best, best_state, history = -1.0, None, []
    t0 = time.monotonic()
    for epoch in range(epochs):
        net.train()
        for inp, target in batches():
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(inp), target).backward()
            opt.step()
        net.eval()
        with torch.no_grad():
            f1 = macro_f1(yv, predict_val())
        history.append(round(f1, 4))
        if f1 > best:
            best, best_state = f1, {k: v.clone() for k, v in net.state_dict().items()}
        if (epoch + 1) % every == 0:
            el = time.monotonic() - t0
            log(f"[train] {tag} {epoch + 1}/{epochs}: val macro-F1 {f1:.3f} (best {best:.3f}), {el:.0f} s, "
                f"ETA {el / (epoch + 1) * (epochs - epoch - 1):.0f} s")
    net.load_state_dict(best_state)
    net.eval()
    return history


def _fit_temperature(logits, y: np.ndarray) -> float:
    """Softmax temperature minimising the val negative log-likelihood (calibration for committees)."""
    import torch

    temp = torch.ones(1, requires_grad=True)
    opt = torch.optim.LBFGS([temp], lr=0.1, max_iter=50)
    yt = torch.tensor(y, dtype=torch.long)

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(logits / temp.clamp(min=0.05), yt)
        loss.backward()
        return loss

    opt.step(closure)
    return float(temp.clamp(min=0.05).item())


def fit_pose_net(x: np.ndarray, y: np.ndarray, xv: np.ndarray, yv: np.ndarray, seed: int,
                 log: Callable[[str], None] = print, conv: int = 64, hidden: tuple[int, ...] = (128, 64),
                 epochs: int = 80, lr: float = 1e-3, weight_decay: float = 1e-3,
                 dropout: float = 0.3) -> tuple[dict, dict]:
    """Train one pose-temporal network (PyTorch, CPU, deterministic; layout in
    :func:`~affectsim_perception.recognizers.pose_temporal.net_logits`), keep the best val epoch,
    fit a temperature on val."""
    import torch

    from affectsim_perception.recognizers.pose_temporal import FRAMES, N_FRAME, N_STATIC, net_logits

    torch.manual_seed(seed)
    torch.set_num_threads(2)
    torch.use_deterministic_algorithms(True)
    mu, sd = x.mean(axis=0), x.std(axis=0) + 1e-6
    xt = torch.tensor((x - mu) / sd, dtype=torch.float32)
    yt = torch.tensor(y, dtype=torch.long)
    xvt = torch.tensor((xv - mu) / sd, dtype=torch.float32)

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.convs = torch.nn.ModuleList([torch.nn.Conv1d(N_FRAME, conv, 3, padding=1),
                                              torch.nn.Conv1d(conv, conv, 3, padding=1)])
            layers, d = [], 2 * conv + N_STATIC
            for h in hidden:
                layers += [torch.nn.Linear(d, h), torch.nn.ReLU(), torch.nn.Dropout(dropout)]
                d = h
            self.mlp = torch.nn.Sequential(*layers, torch.nn.Linear(d, len(EMOTIONS)))

        def forward(self, inp: torch.Tensor) -> torch.Tensor:
            f = inp[:, N_STATIC:].reshape(len(inp), FRAMES, N_FRAME).transpose(1, 2)
            for c in self.convs:
                f = torch.relu(c(f))
            return self.mlp(torch.cat([f.mean(2), f.amax(2), inp[:, :N_STATIC]], 1))

    net = Net()
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=weight_decay)
    gen = torch.Generator().manual_seed(seed)

    def batches():
        for idx in torch.randperm(len(xt), generator=gen).split(256):
            yield xt[idx], yt[idx]

    history = _fit_epochs(net, opt, batches, lambda: net(xvt).argmax(1).numpy(), yv, epochs, log, "epoch", every=10)
    with torch.no_grad():
        logits = net(xvt)
    weights = {"mu": mu.astype(np.float32), "sd": sd.astype(np.float32),
               "temperature": np.array(_fit_temperature(logits, yv), np.float32)}
    for i, c in enumerate(net.convs):
        weights[f"C{i}"] = c.weight.detach().numpy().copy()
        weights[f"c{i}"] = c.bias.detach().numpy().copy()
    for i, m in enumerate(m for m in net.mlp if isinstance(m, torch.nn.Linear)):
        weights[f"W{i}"] = m.weight.detach().numpy().T.copy()
        weights[f"b{i}"] = m.bias.detach().numpy().copy()
    mine = net_logits({**{f"m0_{k}": v for k, v in weights.items()}, "temperature": np.array(1.0)}, xv)
    if not np.allclose(mine, logits.numpy(), atol=1e-3):
        raise RuntimeError(f"numpy inference differs from PyTorch by {np.abs(mine - logits.numpy()).max():.2e}")
    return weights, {"epochs": epochs, "best_epoch": int(np.argmax(history)) + 1, "val_macro_f1_by_epoch": history,
                     "conv": conv, "hidden": list(hidden), "lr": lr, "weight_decay": weight_decay, "dropout": dropout,
                     "temperature": round(float(weights["temperature"]), 4)}


def fit_pose_ensemble(x: np.ndarray, y: np.ndarray, xv: np.ndarray, yv: np.ndarray, seed: int,
                      log: Callable[[str], None] = print, members: int = 5) -> tuple[dict, dict]:
    """``members`` networks (:func:`fit_pose_net`, seeds ``seed``..``seed + members - 1``) whose
    logits are averaged, with one temperature fit on val for the average."""
    import torch

    from affectsim_perception.recognizers.pose_temporal import net_logits

    weights: dict[str, np.ndarray] = {}
    curves = []
    for k in range(members):
        log(f"[train] ensemble member {k + 1}/{members}")
        w, c = fit_pose_net(x, y, xv, yv, seed + k, log)
        weights.update({f"m{k}_{name}": v for name, v in w.items() if name != "temperature"})
        curves.append(c)
    weights["temperature"] = np.array(1.0, np.float32)
    logits = torch.tensor(net_logits(weights, xv), dtype=torch.float32)
    weights["temperature"] = np.array(_fit_temperature(logits, yv), np.float32)
    return weights, {"members": curves, "augment": "left-right mirror", "temperature": round(float(weights["temperature"]), 4)}


def fit_rgb_clip(x: np.ndarray, y: np.ndarray, xv: np.ndarray, yv: np.ndarray, seed: int,
                 log: Callable[[str], None] = print, epochs: int = 12, lr: float = 2e-3,
                 weight_decay: float = 1e-3) -> tuple[dict, dict]:
    """Train the rgb-clip network (PyTorch, CPU, deterministic) on (N, 8, 64, 64, 3) uint8 clips with
    horizontal flips; keep the best val epoch; fit a temperature on val; check numpy inference."""
    import torch

    from affectsim_perception.recognizers.rgb_clip import CHANNELS, clip_logits

    torch.manual_seed(seed)
    torch.set_num_threads(2)
    torch.use_deterministic_algorithms(True)
    mean = np.asarray(x[:2000], np.float32).mean(axis=(0, 1, 2, 3)) / 255.0
    std = np.asarray(x[:2000], np.float32).std(axis=(0, 1, 2, 3)) / 255.0 + 1e-6

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            chans = (3, *CHANNELS)
            self.convs = torch.nn.ModuleList(torch.nn.Conv2d(chans[i], chans[i + 1], 3, stride=2, padding=1)
                                             for i in range(len(CHANNELS)))
            self.fc = torch.nn.Linear(3 * CHANNELS[-1], 5)

        def forward(self, clip: torch.Tensor) -> torch.Tensor:  # (B, 8, 3, 64, 64) normalised
            b, t = clip.shape[:2]
            h = clip.reshape(b * t, *clip.shape[2:])
            for conv in self.convs:
                h = torch.relu(conv(h))
            f = h.mean(dim=(2, 3)).reshape(b, t, -1)
            z = torch.cat([f.mean(1), f.std(1, unbiased=False), (f[:, 1:] - f[:, :-1]).abs().mean(1)], dim=1)
            return self.fc(z)

    def tensor(a: np.ndarray) -> torch.Tensor:
        t_ = torch.tensor(np.asarray(a), dtype=torch.float32) / 255.0
        t_ = (t_ - torch.tensor(mean)) / torch.tensor(std)
        return t_.permute(0, 1, 4, 2, 3).contiguous()

    net = Net()
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=weight_decay)
    gen = torch.Generator().manual_seed(seed)
    yt = torch.tensor(y, dtype=torch.long)
    xvt = tensor(xv)

    def batches():
        for idx in torch.randperm(len(y), generator=gen).split(64):
            batch = tensor(x[np.sort(idx.numpy())])
            target = yt[np.sort(idx.numpy())]
            flip = torch.rand(len(batch), generator=gen) < 0.5
            batch[flip] = batch[flip].flip(-1)
            yield batch, target

    history = _fit_epochs(net, opt, batches, lambda: net(xvt).argmax(1).numpy(), yv, epochs, log, "rgb-clip epoch")
    with torch.no_grad():
        logits = net(xvt)
    weights = {k.replace("convs.", "conv"): v.detach().numpy().copy() for k, v in net.state_dict().items()}
    weights.update(mean=mean.astype(np.float32), std=std.astype(np.float32),
                   temperature=np.array(_fit_temperature(logits, yv), np.float32))
    ref = logits[0].numpy()
    got = clip_logits(weights, np.asarray(xv[0]))
    if not np.allclose(ref, got, atol=1e-3):
        raise RuntimeError(f"numpy inference disagrees with the trained network: {ref} vs {got}")
    return weights, {"epochs": epochs, "best_epoch": int(np.argmax(history)) + 1, "val_macro_f1_by_epoch": history,
                     "lr": lr, "weight_decay": weight_decay, "augment": "horizontal flip",
                     "temperature": round(float(weights["temperature"]), 4)}
