"""Fitting the recognizers' networks with PyTorch (CPU, deterministic): the pose-temporal ensemble
and rgb-clip, each kept at its best validation epoch and calibrated by a temperature on val.
Used by :func:`affectsim_eval.training.train.train`; the shipped recognizers run the fitted weights in numpy.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np
import torch

from affectsim_core.classification import macro_f1
from affectsim_core.protocol import EMOTIONS
from affectsim_perception.recognizers.pose_temporal import FRAMES, N_FRAME, N_STATIC, net_logits
from affectsim_perception.recognizers.rgb_clip import CHANNELS, clip_logits


def _fit_epochs(net, opt, batches, predict_val, yv: np.ndarray, epochs: int, log: Callable[[str], None], tag: str,
                every: int = 1) -> list[float]:
    """The epoch loop shared by the trainers: cross-entropy steps over ``batches()`` ((input, target)
    pairs), val macro-F1 after each epoch, progress with ETA every ``every`` epochs; leaves ``net``
    at its best val epoch in eval mode and returns the val macro-F1 per epoch."""

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
