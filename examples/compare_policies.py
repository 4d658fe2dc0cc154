"""Table 3 rows of two runs with different A-Obs policies on the same episodes, and the paired difference.

Usage (docs/gym.md)::

    PYTHONPATH=. python examples/compare_policies.py results/gym_baseline results/gym_ppo

Both runs' records must be of the same episodes (the same ``--split/--episodes/--seed``). Prints, per
trained recognizer and for their group: Macro-F1 (%) of P-Init, P-Ref, P-Mon and A-Obs of each run with
the A-Obs 95 % interval, Δgain (A-Obs − P-Init) with its interval, and A-Obs of the second run minus the
first's with its interval, all from one paired bootstrap over episodes drawn within each family
(:mod:`affectsim_eval.scoring.uncertainty`: the report's resamples and seed), plus each run's handoff
and budget-exhaustion shares.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from affectsim_core.record import EpisodeRecord  # noqa: E402
from affectsim_core.resampling import interval_of  # noqa: E402
from affectsim_eval.run.store import ResultsStore  # noqa: E402
from affectsim_eval.scoring.metrics import trained  # noqa: E402
from affectsim_eval.scoring.uncertainty import Paired  # noqa: E402

SETTINGS = ("p_init", "p_ref", "p_mon", "a_obs")


def records(run: Path) -> list[EpisodeRecord]:
    with ResultsStore.open(Path(run) / "results.sqlite") as st:
        return [EpisodeRecord.from_dict(r) for r in st.records("ok")]


def cell(values: np.ndarray, n: int, signed: bool = False) -> str:
    iv = interval_of(values * 100, n)
    f = "{:+.1f}" if signed else "{:.1f}"
    return f"{f.format(iv.estimate)} [{f.format(iv.low)}, {f.format(iv.high)}]"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__)
        return 2
    a, b = (records(Path(r)) for r in argv)
    ids_a, ids_b = [r.episode_id for r in a], [r.episode_id for r in b]
    if ids_a != ids_b:
        raise SystemExit(f"compare_policies: error: the runs hold different episodes ({len(ids_a)} vs {len(ids_b)}, "
                         f"{len(set(ids_a) ^ set(ids_b))} in one only)")
    pa = Paired.drawn(a)
    pb = Paired(b, pa.w)  # the same resamples of the same episodes
    n = len(a)
    models = trained(list(a[0].recognizers))
    rows = {m: ({s: pa.macro_f1(m, s) for s in SETTINGS}, {s: pb.macro_f1(m, s) for s in SETTINGS}) for m in models}
    rows["group"] = tuple({s: np.mean([rows[m][k][s] for m in models], axis=0) for s in SETTINGS} for k in (0, 1))
    names = [Path(r).name for r in argv]
    print(f"{n} episodes; 95 % paired bootstrap intervals, {pa.w.shape[0] - 1} resamples within families\n")
    print("| recognizer | run | P-Init | P-Ref | P-Mon | A-Obs | Δgain | A-Obs − first run's |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for m, (fa, fb) in rows.items():
        for k, (name, f) in enumerate(zip(names, (fa, fb))):
            other = cell(fb["a_obs"] - fa["a_obs"], n, True) if k else "–"
            print(f"| {m} | {name} | {f['p_init'][0] * 100:.1f} | {f['p_ref'][0] * 100:.1f} | {f['p_mon'][0] * 100:.1f} "
                  f"| {cell(f['a_obs'], n)} | {cell(f['a_obs'] - f['p_init'], n, True)} | {other} |")
    for name, recs in zip(names, (a, b)):
        hand = np.mean([r.a_obs.diagnostics.handoff for r in recs]) * 100
        budget = np.mean([r.a_obs.diagnostics.budget_exhausted for r in recs]) * 100
        path = np.mean([r.a_obs.path_length for r in recs])
        print(f"\n{name}: stable handoff {hand:.1f} %, budget exhausted {budget:.1f} %, mean path {path:.2f} m")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
