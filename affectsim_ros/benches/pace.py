"""Pace benchmark (``affectsim bench pace``): how much faster than real time continuous-time evaluation
may run before its outcomes change.

The same stratified test episodes run through the ROS graph in continuous time (bridge ``free_run``, the
nav node driving every action through ``/cmd_vel``) at real-time factor 1 twice (the run-to-run spread:
continuous time is not bit-exact) and once at each faster factor. For every run it prints the wall time,
the real-time factor achieved while the simulation ran (from ``/clock``, sampled by a node of this
process on the graph's domain; the pauses while the simulator loads a world or renders a passive clip
left out) and group A-Obs; for every run against the first at factor 1, the A-Obs difference with its
95 % paired bootstrap interval and the share of equal A-Obs outcomes. A factor is **within the spread**
when its difference interval contains 0 and its outcomes agree with the first run at least as often as
the second run at factor 1 does, less :data:`AGREEMENT_SLACK` or one episode, whichever is more: the
nodes keep up. A machine that cannot render as fast as requested runs slower than asked (the achieved
factor says how much; it is never faked), which costs time, not validity. The largest such factor
(below the first that is not) is the one ``bench transfer`` should use
(:data:`affectsim_ros.benches.transfer.DEFAULT_REAL_TIME_FACTOR`).
Each run is its own results store under the work directory: a killed benchmark resumes.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from affectsim_core.atomic import write_json
from affectsim_core.resampling import Interval
from affectsim_eval.run.config import EvalConfig, select_episodes
from affectsim_ros.benches import add_dataset_options, add_out, bench
from affectsim_ros.benches.transfer import (DEFAULT_REAL_TIME_FACTOR, agreement, group_a_obs, paired_difference,
                                            run_condition, stored_records)

AGREEMENT_SLACK = 0.05  # share of A-Obs outcomes a faster run may agree less with run 1 than run 2 does


def verdicts(res: dict, factors: list[float]) -> tuple[dict[str, bool], float]:
    """Per faster factor whether it is within the spread at factor 1, and the largest factor (1 or one of
    ``factors``) below the first that is not."""
    spread = res["runs"]["rtf_1_run_2"]["vs_run_1"]
    within: dict[str, bool] = {}
    for f in sorted(factors):
        r = res["runs"][f"rtf_{f:g}"]
        diff = Interval(**r["vs_run_1"]["a_obs_difference"])
        contains_0 = diff.low is not None and diff.high is not None and diff.low <= 0.0 <= diff.high
        slack = max(AGREEMENT_SLACK, 1.0 / max(1, r["n"]))
        within[f"{f:g}"] = contains_0 and r["vs_run_1"]["outcome_equal"] >= spread["outcome_equal"] - slack
    best = 1.0
    for f in sorted(factors):
        if not within[f"{f:g}"]:
            break
        best = f
    return within, best


def run(out: Path | None = None, episodes: int = 10, factors: tuple[float, ...] = (2.0, 3.0), split: str = "test",
        work: Path | None = None, log=print) -> dict:
    work = Path(work or "results/bench_pace")
    ids = [e.episode_id for e in select_episodes(EvalConfig(split=split, episodes=episodes))]
    names = {"rtf_1_run_1": 1.0, "rtf_1_run_2": 1.0, **{f"rtf_{f:g}": f for f in factors}}
    log(f"[bench pace] {len(ids)} stratified {split} episodes in continuous time at real-time factors "
        f"1 (twice), {', '.join(f'{f:g}' for f in factors)}; work directory {work} (resumes)")
    res: dict = {"episodes": len(ids), "agreement_slack": AGREEMENT_SLACK, "runs": {}}
    recs = {}
    for name, factor in names.items():
        res["runs"][name] = {"requested": factor, **run_condition(
            work / name, ids, {"mode": "free_run", "real_time_factor": str(factor)}, {}, log, "pace")}
        recs[name] = {i: r for i, r in stored_records(work / name).items() if i in set(ids)}
        r = res["runs"][name]
        r["n"], r["a_obs"] = len(recs[name]), group_a_obs(list(recs[name].values()))
        log(f"[bench pace] {name}: {r['n']} episodes in {r['wall_s']:.0f} s; achieved factor "
            f"{r['achieved']['running']:.2f} while running ({r['achieved']['overall']:.2f} overall); group A-Obs "
            f"{100 * r['a_obs']:.1f}")
    for name in names:
        if name != "rtf_1_run_1":
            a = agreement(recs["rtf_1_run_1"], recs[name])
            res["runs"][name]["vs_run_1"] = {
                "outcome_equal": a["outcome_equal"], "a_obs_predictions_equal": a["a_obs_predictions_equal"],
                "a_obs_difference": vars(paired_difference(recs["rtf_1_run_1"], recs[name]))}
    res["within_spread"], res["largest_within_spread"] = verdicts(res, list(factors))
    log(table(res))
    if out is not None:
        write_json(Path(out), res, indent=1)
        log(f"[bench pace] {out}")
    return res


def table(res: dict) -> str:
    """One Markdown row per run, then the verdicts."""
    lines = ["| run | requested | achieved (running) | wall s | group A-Obs | − run 1, 95 % CI (points) | "
             "outcomes equal to run 1 |", "|---|---:|---:|---:|---:|---|---:|"]
    for name, r in res["runs"].items():
        v = r.get("vs_run_1")
        diff = Interval(**v["a_obs_difference"]).text(100) if v else ""
        eq = f"{100 * v['outcome_equal']:.0f} %" if v else ""
        lines.append(f"| {name} | {r['requested']:g} | {r['achieved']['running']:.2f} | {r['wall_s']:.0f} | "
                     f"{100 * r['a_obs']:.1f} | {diff} | {eq} |")
    lines.append("Within the spread at factor 1: " + ", ".join(
        f"{f}: {'yes' if ok else 'no'}" for f, ok in res["within_spread"].items())
        + f"; largest factor within it: {res['largest_within_spread']:g} (bench transfer's default: "
          f"{DEFAULT_REAL_TIME_FACTOR:g})")
    return "\n".join(lines)


def factors(text: str) -> tuple[float, ...]:
    """argparse type: comma-separated real-time factors, each in (1, 10], sorted and without repeats."""
    try:
        values = tuple(sorted({float(x) for x in text.split(",") if x.strip()}))
    except ValueError:
        values = ()
    if not values or not all(1.0 < v <= 10.0 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r} is invalid; expected comma-separated real-time factors in (1, 10]")
    return values


def _arguments(p) -> None:
    add_out(p)
    add_dataset_options(p, episodes=10, mismatch=False)
    p.add_argument("--factors", type=factors, default=(2.0, 3.0), help="faster real-time factors to try, comma-separated, each in "
                   "(1, 10] (default: 2,3); factor 1 always runs twice")
    p.add_argument("--work", type=Path, default=None, metavar="DIR",
                   help="directory of the per-run stores, resumed (default: results/bench_pace)")


@bench("pace", _arguments)
def main(ns) -> int:
    """Continuous time faster than real time: the largest real-time factor whose outcomes stay within the spread at 1."""
    run(ns.out, ns.episodes, ns.factors, ns.split, ns.work)
    return 0
