"""Which views do the recognizers read best? Accuracy of each trained recognizer on the rendered
training clips of a split (``data/perception/SPLIT``: each episode's P-Ref view and a random
head-height view 1.2-6 m away), by the camera's angle around the person, its distance and the
visible-body fraction, with 95 % bootstrap intervals over episodes (an episode's two clips are not
independent). A view criterion for a policy (issue 30) is to be chosen on ``val``, never on ``test``.

    .venv/bin/python tools/view_readability.py [--split val] [--data data/perception]

Angle: 0 deg is the camera in front of the person (their facing at the clip's start), 180 behind;
distance: camera to the person's root (m); both at the clip's first frame.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from affectsim_core.resampling import group_interval  # noqa: E402
from affectsim_eval.training.train import TRAINERS  # noqa: E402
from affectsim_eval.training.training_data import load_clips  # noqa: E402
from affectsim_perception.recognizers import load_checkpoint  # noqa: E402

ANGLE_EDGES_DEG = (0, 30, 60, 90, 120, 150, 181)
DISTANCE_EDGES_M = (0.0, 2.0, 2.5, 3.0, 4.0, 7.0)
VISIBLE_EDGES = (0.0, 0.3, 0.6, 0.8, 0.9, 1.01)
SHOWN = ("pose-temporal", "committee", "rgb-clip")


def accuracy_interval(correct: np.ndarray, episodes: np.ndarray) -> tuple[float, float, float]:
    """Accuracy (%) of ``correct`` with its 95 % interval over resamples of whole episodes."""
    ci = group_interval(episodes, lambda s: 100.0 * float(correct[s].mean()))
    return ci.estimate, ci.low, ci.high


def table(title: str, values: np.ndarray, edges: tuple, unit: str, correct: dict, episodes: np.ndarray) -> list[str]:
    """Markdown rows: one per bin of ``values``, the clip count and every recognizer's accuracy."""
    rows = [f"### {title}", "", "| " + unit + " | clips | " + " | ".join(f"`{n}`" for n in correct) + " |",
            "|---|---:|" + "---:|" * len(correct)]
    for lo, hi in zip(edges[:-1], edges[1:]):
        sel = (values >= lo) & (values < hi)
        if not sel.any():
            continue
        cells = [("{:.1f} [{:.1f}, {:.1f}]".format(*accuracy_interval(c[sel], episodes[sel]))) for c in correct.values()]
        rows.append(f"| {lo:g}–{min(hi, edges[-1]):g} | {int(sel.sum())} | " + " | ".join(cells) + " |")
    return rows + [""]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", default="val", choices=("train", "val", "test"))
    ap.add_argument("--data", type=Path, default=ROOT / "data" / "perception")
    a = ap.parse_args(argv)
    try:
        clips = load_clips(a.split, a.data)
    except FileNotFoundError as exc:
        print(f"view_readability: {exc}", file=sys.stderr)
        return 2
    meta = clips[2]
    y = np.array([m["label"] for m in meta])
    episodes = np.array([m["episode_id"] for m in meta])
    correct = {n: TRAINERS.create(n).probs(load_checkpoint(n).arrays, clips).argmax(1) == y
               for n in SHOWN if n in TRAINERS.names()}
    angle = np.degrees([m["relative_orientation"] for m in meta])
    dist = np.array([m["distance"] for m in meta])
    vis = np.array([m["visible_fraction"] for m in meta])
    print(f"{a.split}: {len(meta)} clips of {len(np.unique(episodes))} episodes; accuracy (%) [95 % interval]\n")
    out = table("By the camera's angle around the person (0: in front)", angle, ANGLE_EDGES_DEG, "deg", correct, episodes)
    out += table("By distance", dist, DISTANCE_EDGES_M, "m", correct, episodes)
    out += table("By visible-body fraction", vis, VISIBLE_EDGES, "visible", correct, episodes)
    good = vis >= 0.8
    out += table("By angle, views showing >= 0.8 of the body", angle[good], ANGLE_EDGES_DEG, "deg",
                 {n: c[good] for n, c in correct.items()}, episodes[good])
    out += table("By distance, views showing >= 0.8 of the body", dist[good], DISTANCE_EDGES_M, "m",
                 {n: c[good] for n, c in correct.items()}, episodes[good])
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
