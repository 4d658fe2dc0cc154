"""Does seeing a performance's other take in training help? Observation-controlled test episodes whose
clip has a twin in the train split (the same performer, scenario and emotion in another take) against
those without one, in one run.

Usage::

    PYTHONPATH=. python tools/performer_overlap.py results/bench [--data data]

Prints, for each trained recognizer and their group, Macro-F1 (%) per setting of the twinned and the
untwinned observation-controlled episodes of the run, each with its 95 % bootstrap interval (episodes
resampled within each of the two groups), and twinned minus untwinned with its interval.
docs/dataset.md ("Performer overlap") gives the measured table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from affectsim_bridge.content.library import Library  # noqa: E402
from affectsim_core.record import EpisodeRecord  # noqa: E402
from affectsim_core.resampling import interval_of, stratified_weights  # noqa: E402
from affectsim_eval.dataset.episodes import load_split  # noqa: E402
from affectsim_eval.dataset.inspect import twinned  # noqa: E402
from affectsim_eval.run.store import ResultsStore  # noqa: E402
from affectsim_eval.scoring.metrics import trained  # noqa: E402
from affectsim_eval.scoring.uncertainty import Paired  # noqa: E402

SETTINGS = ("p_init", "p_ref", "p_mon", "a_obs")
FAMILY = "observation_controlled"


def cell(values: np.ndarray, n: int) -> str:
    return interval_of(values * 100, n).text(signed=False)


def table(records: list[EpisodeRecord], twins: set[str]) -> list[str]:
    """Markdown rows: recognizer (and group) x setting, twinned | untwinned | difference."""
    groups = ["twinned" if r.episode_id in twins else "untwinned" for r in records]
    if len(set(groups)) < 2:
        raise SystemExit(f"performer_overlap: error: the run's {len(records)} {FAMILY} episodes are all {groups[0]}")
    mask = {g: np.array([x == g for x in groups]) for g in ("twinned", "untwinned")}
    drawn = Paired(records, stratified_weights(groups))  # each group resampled within itself
    paired = {g: drawn.subset(m) for g, m in mask.items()}
    models = trained(list(records[0].recognizers))
    n = {g: int(m.sum()) for g, m in mask.items()}
    lines = [f"| recognizer | setting | twinned ({n['twinned']}) | untwinned ({n['untwinned']}) | twinned − untwinned |",
             "|---|---|---:|---:|---:|"]
    for name in [*models, "group"]:
        for s in SETTINGS:
            if name == "group":
                v = {g: np.mean([p.macro_f1(m, s) for m in models], axis=0) for g, p in paired.items()}
            else:
                v = {g: p.macro_f1(name, s) for g, p in paired.items()}
            diff = interval_of((v["twinned"] - v["untwinned"]) * 100, len(records))
            lines.append(f"| {name} | {s} | {cell(v['twinned'], n['twinned'])} | {cell(v['untwinned'], n['untwinned'])} "
                         f"| {diff.text()} |")
    return lines


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="performer_overlap", description=__doc__.splitlines()[0])
    p.add_argument("run", type=Path, help="a run directory (its results.sqlite)")
    p.add_argument("--data", type=Path, default=ROOT / "data", help="the data directory the run used")
    ns = p.parse_args(argv)
    with ResultsStore.open(ns.run / "results.sqlite") as st:
        records = [EpisodeRecord.from_dict(r) for r in st.records("ok")]
    records = [r for r in records if r.family == FAMILY]
    if not records:
        raise SystemExit(f"performer_overlap: error: {ns.run} holds no {FAMILY} episode")
    split = load_split("test", ns.data / "episodes")
    ids = {r.episode_id for r in records}
    held = [e for e in split if e.episode_id in ids]
    if len(held) != len(ids):
        raise SystemExit(f"performer_overlap: error: {len(ids) - len(held)} of the run's episodes are not in "
                         f"{ns.data / 'episodes'}'s test split (another dataset version?)")
    train = [e for e in load_split("train", ns.data / "episodes") if e.family == FAMILY]
    print("\n".join(table(records, twinned(train, held, Library(ns.data / "motions")))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
