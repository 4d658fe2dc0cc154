"""Train a small observation policy with PPO (torch) on ``affectsim/ActiveObservation-v0`` (docs/gym.md).

The network sees compact features (:func:`examples.ppo_policy.features`: the frozen detector's
detection, handed off, last action) and picks one of the environment's five actions. Training runs
for a bounded number of environment steps on the train split in worker processes
(:func:`affectsim_eval.gym.env.make_vector_env`), then writes the policy network to
``examples/ppo_weights.npz`` (what the ``ppo`` plugin policy loads), the learning curve (PNG) and
its numbers (JSON). Evaluate it with the benchmark::

    PYTHONPATH=. nice -n 19 python examples/train_ppo.py --steps 6000
    AFFECTSIM_PLUGINS=examples.ppo_policy affectsim eval --policy ppo --split test --episodes 100

PPO (clipped surrogate, Schulman et al. 2017) with generalised advantage estimation; every
hyper-parameter is an option below.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: the project and examples/ importable

from affectsim_core.actions import Action  # noqa: E402
from affectsim_core.atomic import write_json  # noqa: E402
from affectsim_eval.gym.env import make_vector_env  # noqa: E402
from affectsim_eval.gym.spaces import N_ACTIONS  # noqa: E402
from examples.ppo_policy import LAYERS, N_FEATURES, WEIGHTS, features  # noqa: E402

HIDDEN = 64


class ActorCritic(nn.Module):
    """Policy (logits over the actions) and value heads on a shared two-layer tanh trunk."""

    def __init__(self) -> None:
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(N_FEATURES, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, HIDDEN), nn.Tanh())
        self.pi = nn.Linear(HIDDEN, N_ACTIONS)
        self.v = nn.Linear(HIDDEN, 1)
        nn.init.orthogonal_(self.pi.weight, 0.01)
        nn.init.zeros_(self.pi.bias)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.trunk(x)
        return self.pi(h), self.v(h).squeeze(-1)

    def arrays(self) -> dict[str, np.ndarray]:
        """The policy's layers as :data:`examples.ppo_policy.LAYERS` (x @ w + b)."""
        t = [self.trunk[0], self.trunk[2], self.pi]
        vals = [a for layer in t for a in (layer.weight.detach().numpy().T, layer.bias.detach().numpy())]
        return dict(zip(LAYERS, (np.ascontiguousarray(v, np.float32) for v in vals)))


def batch_features(obs: dict, last: np.ndarray) -> np.ndarray:
    return np.stack([features(obs["detection"][k], obs["status"][k][0] > 0.5, last[k]) for k in range(len(last))])


def save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write ``arrays`` to ``path`` through a temporary file and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-", suffix=".npz")
    with os.fdopen(fd, "wb") as f:
        f.write(buf.getvalue())
    os.chmod(tmp, 0o644)  # mkstemp makes it private; the weights are shipped
    os.replace(tmp, path)


def plot(curve: list[dict], path: Path, window: int) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = np.array([c["steps"] for c in curve])
    ret = np.array([c["return"] for c in curve])
    ok = np.array([c["correct"] for c in curve], float)
    smooth = lambda a: np.array([a[max(0, i - window + 1):i + 1].mean() for i in range(len(a))])  # noqa: E731
    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=100)
    ax.plot(steps, ret, ".", alpha=0.3, color="tab:blue", label="episode return")
    ax.plot(steps, smooth(ret), color="tab:blue", label=f"return, mean of last {window}")
    ax.plot(steps, smooth(ok), color="tab:green", label=f"recognised correctly, share of last {window}")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("return / share")
    ax.legend(fontsize=7, loc="best")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp.png")
    fig.savefig(tmp)
    os.replace(tmp, path)


def save(a: argparse.Namespace, net: ActorCritic, curve: list[dict], updates: list[dict], steps: int,
         t0: float) -> None:
    """The weights, the curve's numbers and its plot, each written to a temporary name and renamed."""
    save_npz(a.out, net.arrays())
    write_json(a.log, {"args": {k: str(v) for k, v in vars(a).items()}, "wall_s": round(time.perf_counter() - t0, 1),
                       "steps": steps, "episodes": curve, "updates": updates}, indent=1)
    if curve:
        plot(curve, a.curve, window=min(20, len(curve)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=6000, help="environment steps in all (all workers)")
    ap.add_argument("--wall-s", type=float, default=900.0, help="stop after the update that passes this wall time (s)")
    ap.add_argument("--envs", type=int, default=2, help="worker processes")
    ap.add_argument("--rollout", type=int, default=128, help="steps per worker between updates")
    ap.add_argument("--max-actions", type=int, default=120, help="acquisition budget of the training episodes")
    ap.add_argument("--reward", default="correct+view_quality", help="rewards of REWARDS joined by '+'")
    ap.add_argument("--split", default="train")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--gamma", type=float, default=0.99)
    ap.add_argument("--lam", type=float, default=0.95, help="GAE lambda")
    ap.add_argument("--clip", type=float, default=0.2, help="PPO clip range")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--minibatch", type=int, default=64)
    ap.add_argument("--entropy", type=float, default=0.01, help="entropy bonus weight")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=WEIGHTS, help="the policy's weights (.npz)")
    ap.add_argument("--curve", type=Path, default=ROOT / "docs" / "img" / "gym_ppo_curve.png")
    ap.add_argument("--log", type=Path, default=ROOT / "results" / "ppo_train.json", help="the curve's numbers")
    a = ap.parse_args(argv)
    torch.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)
    net = ActorCritic()
    opt = torch.optim.Adam(net.parameters(), lr=a.lr)
    venv = make_vector_env(a.envs, autoreset_mode="SameStep", split=a.split, reward=a.reward,
                           max_actions=a.max_actions, image_size=(16, 12))
    t0, steps, curve, updates = time.perf_counter(), 0, [], []
    ret_acc = np.zeros(a.envs)
    last = np.full(a.envs, int(Action.STOP))
    try:
        obs, _ = venv.reset(seed=a.seed)
        x = batch_features(obs, last)
        while steps < a.steps and time.perf_counter() - t0 < a.wall_s:
            buf = {k: [] for k in ("x", "a", "logp", "v", "r", "done")}
            for _ in range(a.rollout):
                with torch.no_grad():
                    lg, v = net(torch.as_tensor(x))
                dist = torch.distributions.Categorical(logits=lg)
                act = dist.sample()
                obs, r, term, trunc, info = venv.step(act.numpy())
                done = term | trunc
                for k, e in (("x", x), ("a", act.numpy()), ("logp", dist.log_prob(act).numpy()), ("v", v.numpy()),
                             ("r", r), ("done", done)):
                    buf[k].append(np.asarray(e))
                steps += a.envs
                ret_acc += r
                last = np.where(done, int(Action.STOP), act.numpy())
                final = info.get("final_info", {})  # SameStep autoreset: the ended episodes' last info
                for k in np.nonzero(done)[0]:
                    curve.append({"steps": steps, "return": float(ret_acc[k]), "outcome": str(final["outcome"][k]),
                                  "correct": bool(final["prediction"][k] == final["label"][k])})
                    ret_acc[k] = 0.0
                x = batch_features(obs, last)  # SameStep autoreset: a finished worker's obs is its next episode's
            with torch.no_grad():
                _, v_next = net(torch.as_tensor(x))
            arr = {k: np.stack(v) for k, v in buf.items()}  # (T, envs)
            adv = np.zeros_like(arr["r"], dtype=np.float32)
            gae = np.zeros(a.envs, np.float32)
            nxt = v_next.numpy()
            for t in reversed(range(a.rollout)):  # a truncated episode is bootstrapped as ended (budget: no future)
                nonterm = 1.0 - arr["done"][t]
                delta = arr["r"][t] + a.gamma * nxt * nonterm - arr["v"][t]
                gae = delta + a.gamma * a.lam * nonterm * gae
                adv[t], nxt = gae, arr["v"][t]
            ret = adv + arr["v"]
            X = torch.as_tensor(arr["x"].reshape(-1, N_FEATURES))
            A = torch.as_tensor(arr["a"].reshape(-1))
            LP = torch.as_tensor(arr["logp"].reshape(-1))
            ADV = torch.as_tensor(adv.reshape(-1))
            ADV = (ADV - ADV.mean()) / (ADV.std() + 1e-8)
            RET = torch.as_tensor(ret.reshape(-1), dtype=torch.float32)
            for _ in range(a.epochs):
                for mb in np.array_split(rng.permutation(len(X)), max(1, len(X) // a.minibatch)):
                    lg, v = net(X[mb])
                    d = torch.distributions.Categorical(logits=lg)
                    ratio = torch.exp(d.log_prob(A[mb]) - LP[mb])
                    pg = -torch.min(ratio * ADV[mb], torch.clamp(ratio, 1 - a.clip, 1 + a.clip) * ADV[mb]).mean()
                    loss = pg + 0.5 * ((v - RET[mb]) ** 2).mean() - a.entropy * d.entropy().mean()
                    opt.zero_grad()
                    loss.backward()
                    nn.utils.clip_grad_norm_(net.parameters(), 0.5)
                    opt.step()
            n = len(curve)
            updates.append({"steps": steps, "wall_s": round(time.perf_counter() - t0, 1), "episodes": n})
            recent = curve[-20:]
            mean = np.mean([c["return"] for c in recent]) if recent else float("nan")
            print(f"[ppo] {steps}/{a.steps} steps, {n} episodes, mean return of last {len(recent)} {mean:.3f}, "
                  f"{time.perf_counter() - t0:.0f} s", flush=True)
            save(a, net, curve, updates, steps, t0)  # after every update: a stopped run keeps what it learned
    finally:
        venv.close()
    save(a, net, curve, updates, steps, t0)
    print(f"[ppo] {steps} steps in {time.perf_counter() - t0:.0f} s: {a.out}, {a.curve}, {a.log}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
