"""Transfer benchmark (``affectsim bench transfer``): what moving from lockstep to a robot's
continuous time, and to a robot's sensor and actuation noise, does to the benchmark's numbers.

The same stratified test episodes run through the ROS graph as

a. ``lockstep``: the paper's protocol (the bridge's ``apply_action``);
b. ``cmd_vel``: the bridge in ``free_run`` at ``real_time_factor``, the nav node driving every primitive
   action through ``/cmd_vel`` from odometry and laser, the clip sampled from the 15 Hz stream;
   repeated (continuous time is not bit-exact: the spread is part of the result);
c. ``cmd_vel + noise``: (b) with every noise model the free-running bridge has on at its default
   magnitude (depth, RGB and motion blur, laser, odometry drift, camera latency; the per-action
   actuation error is a lockstep model: in continuous time the executor closes the loop on odometry).

Printed side by side: Table 3 (group Macro-F1 of the trained recognizers per setting, OGR) and
Table 6 (handoff, path length, path before handoff, budget exhausted, clipped moves), the spread of
A-Obs over the repeats of (b), how often two repeats agree episode by episode, and each condition's group A-Obs
minus lockstep's (and repeat 2 minus repeat 1) with a 95 % paired bootstrap interval over the episodes. The passive
settings are rendered views (no noise, no motion), so their columns must agree across conditions.
Each condition is its own results store under the work directory: a killed benchmark resumes.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rosgraph_msgs.msg import Clock

from affectsim_bridge.bridge_node import NOISE_LOCKSTEP_ONLY
from affectsim_bridge.world.noise import CONFIG_PREFIX, ENABLED, NOISE_MODELS
from affectsim_core.atomic import write_json
from affectsim_core.errors import InvalidInput
from affectsim_core.protocol import SETTINGS
from affectsim_core.record import EpisodeRecord
from affectsim_core.ros.conversions import from_time
from affectsim_core.ros.env import ensure_loopback
from affectsim_core.ros.topics import TOPICS
from affectsim_eval.run.config import EvalConfig, select_episodes
from affectsim_core.resampling import Interval, bootstrap_interval
from affectsim_eval.scoring import markdown as md
from affectsim_eval.scoring.metrics import compute_all
from affectsim_eval.run.report import REFERENCES, summarize
from affectsim_eval.run.store import ResultsStore
from affectsim_ros.launcher import GraphProcesses
from affectsim_ros.benches import add_dataset_options, add_out, add_runs_options, bench, conditions_of, positive_int

# the continuous-time conditions' pace; `affectsim bench pace` measures the largest factor within the spread at 1
# (not yet decided: docs/sim_to_real.md)
DEFAULT_REAL_TIME_FACTOR = 1.0
PAUSE_S = 0.25  # wall s without a /clock message (one every tick) that counts as a pause of the simulation
# s, the evaluator's request timeout in continuous time: an acquisition that spends its 480-action budget
# takes ~500 s of sim time, more wall time when the machine cannot keep the pace (600 s timed out, load 7)
FREE_RUN_TIMEOUT_S = 3600.0
TABLE6_COLUMNS = ("handoff_pct", "mean_path_m", "path_before_handoff_pct", "budget_exhausted_pct", "clipped_pct")


def conditions(repeats: int, real_time_factor: float) -> dict[str, tuple[dict[str, str], dict]]:
    """Condition name -> (launch arguments, extra bridge parameters)."""
    free = {"mode": "free_run", "real_time_factor": str(real_time_factor)}
    out: dict[str, tuple[dict[str, str], dict]] = {"lockstep": ({"mode": "lockstep"}, {})}
    for k in range(1, repeats + 1):
        out[f"cmd_vel_{k}"] = (free, {})
    out["cmd_vel_noise"] = (free, {f"{CONFIG_PREFIX}{m}_{ENABLED}": True for m in NOISE_MODELS.names()
                                   if NOISE_MODELS.get(m).stream not in NOISE_LOCKSTEP_ONLY})
    return out


def stored_records(run: Path) -> dict[str, EpisodeRecord]:
    """The records a run directory's store holds as ok, by episode id."""
    with ResultsStore.open(run / "results.sqlite") as st:
        return {r["episode_id"]: EpisodeRecord.from_dict(r, str(run)) for r in st.records("ok")}


class ClockSampler:
    """(wall s, sim s) pairs of a graph's ``/clock``, received by a node of this process on ``domain_id``."""

    def __init__(self, domain_id: int) -> None:
        ensure_loopback(domain_id)
        self.samples: list[tuple[float, float]] = []
        self._ctx = rclpy.Context()
        rclpy.init(context=self._ctx, domain_id=domain_id)
        self._node = rclpy.create_node("bench_clock", context=self._ctx)
        self._node.create_subscription(Clock, TOPICS["clock"], self._on_clock, 100)
        self._exec = SingleThreadedExecutor(context=self._ctx)
        self._exec.add_node(self._node)
        self._thread = threading.Thread(target=self._exec.spin, name="bench-clock", daemon=True)
        self._thread.start()

    def _on_clock(self, msg: Clock) -> None:
        self.samples.append((time.monotonic(), from_time(msg.clock)))

    def close(self) -> None:
        self._exec.shutdown()
        self._node.destroy_node()
        rclpy.try_shutdown(context=self._ctx)
        self._thread.join(5.0)


def achieved_factor(samples: list[tuple[float, float]], pause_s: float = PAUSE_S) -> dict[str, float]:
    """Sim seconds per wall second while the clock ran (between consecutive samples at most ``pause_s``
    wall s apart: the simulator's pauses to load a world or render a passive clip are left out) and over
    the whole span (the clock's forward steps: a load sets it back); NaN where there is no such interval."""
    ran_wall = ran_sim = forward = 0.0
    for (w0, s0), (w1, s1) in zip(samples, samples[1:]):
        forward += max(0.0, s1 - s0)  # each episode's load sets the clock back to its start
        if 0.0 < w1 - w0 <= pause_s and s1 >= s0:
            ran_wall, ran_sim = ran_wall + (w1 - w0), ran_sim + (s1 - s0)
    span = samples[-1][0] - samples[0][0] if len(samples) > 1 else 0.0
    return {"running": ran_sim / ran_wall if ran_wall > 0 else float("nan"),
            "overall": forward / span if span > 0 else float("nan")}


def run_condition(run: Path, ids: list[str], args: dict[str, str], bridge: dict, log, who: str = "transfer") -> dict:
    """``ids`` through one bench graph with launch ``args`` and extra ``bridge`` parameters into ``run``
    (resumed): its wall time (s) and, in continuous time, the real-time factor it achieved."""
    t0 = time.perf_counter()
    args = {**args, "episodes": "0", "episode_ids": ",".join(ids), "output_dir": str(run)}
    extra: dict[str, dict] = {"bridge": bridge} if bridge else {}
    free = args.get("mode") == "free_run"
    if free:
        extra["evaluator"] = {"timeout_s": FREE_RUN_TIMEOUT_S}
    with GraphProcesses("bench", args=args, extra_params=extra or None, log_dir=run / "logs") as g:
        clock = ClockSampler(g.domain_id) if free else None
        try:
            while g.poll()["evaluator"] is None:
                time.sleep(0.5)
        finally:
            if clock is not None:
                clock.close()
        code = g.poll()["evaluator"]
    if code != 0:
        log(f"[bench {who}] {run.name}: the evaluator exited {code} (see {run / 'logs' / 'evaluator.log'})")
    return {"wall_s": time.perf_counter() - t0, "achieved": achieved_factor(clock.samples) if clock else None}


def _summary(records: dict[str, EpisodeRecord]) -> dict:
    s = summarize(list(records.values()))
    return {"n": s["n"], "group": s["group"], "group_ogr": s["group_ogr"],
            "table6": {k: s["table6"][k] for k in TABLE6_COLUMNS}}


def group_a_obs(records: list[EpisodeRecord]) -> float:
    """Group A-Obs Macro-F1 (fraction): the mean over the trained recognizers, as the report's Table 3."""
    f1 = compute_all(records, ["macro_f1"])["macro_f1"]
    return float(np.mean([f1[n]["a_obs"] for n in records[0].recognizers if n not in REFERENCES]))


def paired_difference(a: dict[str, EpisodeRecord], b: dict[str, EpisodeRecord]) -> Interval:
    """Group A-Obs (a fraction) of ``b`` minus ``a`` on the episodes both hold, with its 95 % paired bootstrap
    interval over those episodes."""
    ids = sorted(set(a) & set(b))
    return bootstrap_interval(len(ids), lambda k: group_a_obs([b[ids[i]] for i in k]) - group_a_obs([a[ids[i]] for i in k]))


def agreement(a: dict[str, EpisodeRecord], b: dict[str, EpisodeRecord]) -> dict[str, float]:
    """Episode by episode between two runs: the fraction of (episode, recognizer) A-Obs predictions that
    are equal, of episodes with the same A-Obs outcome, and of identical trajectories."""
    ids = sorted(set(a) & set(b))
    if not ids:
        return {"episodes": 0}
    same_pred = [a[i].predictions[n]["a_obs"] == b[i].predictions[n]["a_obs"] for i in ids for n in a[i].predictions]
    return {"episodes": len(ids), "a_obs_predictions_equal": float(np.mean(same_pred)),
            "outcome_equal": float(np.mean([a[i].a_obs.outcome == b[i].a_obs.outcome for i in ids])),
            "trajectory_equal": float(np.mean([a[i].a_obs.trajectory == b[i].a_obs.trajectory for i in ids]))}


def run(out: Path | None = None, episodes: int = 60, repeats: int = 2, real_time_factor: float = DEFAULT_REAL_TIME_FACTOR,
        split: str = "test", work: Path | None = None, only: tuple[str, ...] = (), log=print,
        allow_dataset_mismatch: bool = False) -> dict:
    """Run the conditions (``only``: those of them; the table covers every condition with a store)."""
    work = Path(work or "results/bench_transfer")
    ids = [e.episode_id for e in select_episodes(EvalConfig(split=split, episodes=episodes))]
    conds = {name: ({**args, "allow_dataset_mismatch": str(allow_dataset_mismatch).lower()}, bridge)
             for name, (args, bridge) in conditions(repeats, real_time_factor).items()}
    unknown = sorted(set(only) - set(conds))
    if unknown:
        raise InvalidInput("--conditions", unknown, f"names from {', '.join(conds)}")
    log(f"[bench transfer] {len(ids)} stratified {split} episodes; conditions {', '.join(conds)}; "
        f"noise models {', '.join(NOISE_MODELS.names())}; work directory {work} (resumes)")
    res: dict = {"episodes": len(ids), "real_time_factor": real_time_factor, "conditions": {}, "wall_s": {},
                 "achieved_real_time_factor": {}}
    runs: dict[str, dict[str, EpisodeRecord]] = {}
    for name, (args, bridge) in conds.items():
        if not only or name in only:
            ran = run_condition(work / name, ids, args, bridge, log)
            res["wall_s"][name] = ran["wall_s"]
            if ran["achieved"] is not None:
                res["achieved_real_time_factor"][name] = ran["achieved"]
        elif not (work / name / "results.sqlite").is_file():
            continue
        runs[name] = {i: r for i, r in stored_records(work / name).items() if i in set(ids)}
        res["conditions"][name] = _summary(runs[name])
        g = res["conditions"][name]["group"]
        log(f"[bench transfer] {name}: {len(runs[name])} episodes in {res['wall_s'].get(name, 0):.0f} s; group A-Obs "
            f"{100 * g['a_obs']:.1f}, P-Init {100 * g['p_init']:.1f}")
    cv = [n for n in runs if n.startswith("cmd_vel_") and n[-1].isdigit()]
    a_obs = [res["conditions"][n]["group"]["a_obs"] for n in cv]
    res["cmd_vel_spread"] = {"a_obs_mean": float(np.mean(a_obs)), "a_obs_min": min(a_obs), "a_obs_max": max(a_obs),
                             "a_obs_std": float(np.std(a_obs)),
                             "agreement": agreement(runs[cv[0]], runs[cv[1]]) if len(cv) > 1 else None} if cv else None
    res["lockstep_vs_cmd_vel"] = agreement(runs["lockstep"], runs[cv[0]]) if "lockstep" in runs and cv else None
    pairs = [(n, "lockstep") for n in runs if n != "lockstep" and "lockstep" in runs] + \
        ([(cv[1], cv[0])] if len(cv) > 1 else [])
    res["a_obs_differences"] = {f"{b} - {a}": vars(paired_difference(runs[a], runs[b])) for b, a in pairs}
    log(table(res))
    if out is not None:
        write_json(Path(out), res, indent=1)
        log(f"[bench transfer] {out}")
    return res


def table3_6(runs: dict[str, dict], first: str = "condition") -> list[str]:
    """Markdown lines of Table 3 (group Macro-F1 per setting, OGR) beside Table 6, one row per run of
    ``runs`` (name -> {n, group, group_ogr, table6})."""
    head = [first, "n", *(s.replace("_", "-").upper() for s in SETTINGS), "OGR %", "handoff %", "path m",
            "before handoff %", "budget out %", "clipped %"]
    rows = []
    for name, c in runs.items():
        t6 = c["table6"]
        rows.append([name, c["n"], *(md.pct(c["group"][s]) for s in SETTINGS), md.pct(c["group_ogr"]),
                     *(md.num(t6[k], 2 if k == "mean_path_m" else 1) for k in TABLE6_COLUMNS)])
    return md.table(head, rows).split("\n")


def table(res: dict) -> str:
    """Table 3 and Table 6 side by side, one row per condition (Markdown)."""
    out = table3_6(res["conditions"])
    sp = res["cmd_vel_spread"] or {"agreement": None}
    if "a_obs_mean" in sp:
        out.append(f"\nA-Obs group Macro-F1 over the cmd_vel repeats: mean {100 * sp['a_obs_mean']:.1f}, range "
                   f"{100 * sp['a_obs_min']:.1f}–{100 * sp['a_obs_max']:.1f}, std {100 * sp['a_obs_std']:.1f}")
    if sp["agreement"]:
        a = sp["agreement"]
        out.append(f"Two cmd_vel repeats, episode by episode: A-Obs predictions equal {100 * a['a_obs_predictions_equal']:.0f} %, "
                   f"outcomes equal {100 * a['outcome_equal']:.0f} %, trajectories equal {100 * a['trajectory_equal']:.0f} %")
    for name, d in res.get("a_obs_differences", {}).items():
        out.append(f"Group A-Obs {name}: {Interval(**d).text(100)} points (95 % paired bootstrap over "
                   f"{d['units']} episodes)")
    if res.get("achieved_real_time_factor"):
        out.append(f"Real-time factor achieved while the simulation ran (requested {res['real_time_factor']:g}): " +
                   ", ".join(f"{n} {v['running']:.2f}" for n, v in res["achieved_real_time_factor"].items()))
    a = res["lockstep_vs_cmd_vel"]
    if a:
        out.append(f"Lockstep vs cmd_vel, episode by episode: A-Obs predictions equal "
                   f"{100 * a['a_obs_predictions_equal']:.0f} %, outcomes equal {100 * a['outcome_equal']:.0f} %")
    return "\n".join(out)


def _arguments(p) -> None:
    add_out(p)
    add_dataset_options(p, episodes=60)
    p.add_argument("--repeats", type=positive_int, default=2, help="runs of the continuous-time condition (default 2)")
    p.add_argument("--real-time-factor", type=float, default=DEFAULT_REAL_TIME_FACTOR,
                   help="the free-running bridge's pace (0.1..10, default %(default)s: `affectsim bench pace`)")
    add_runs_options(p, ", ".join(conditions(2, 1.0)))


@bench("transfer", _arguments)
def main(ns) -> int:
    """Lockstep vs continuous time vs noise through the graph: the paper's Tables 3 and 6."""
    if not 0.1 <= ns.real_time_factor <= 10.0:
        raise InvalidInput("--real-time-factor", ns.real_time_factor, "a pace in [0.1, 10]")
    run(ns.out, ns.episodes, ns.repeats, ns.real_time_factor, ns.split, ns.work, conditions_of(ns),
        allow_dataset_mismatch=ns.allow_dataset_mismatch)
    return 0
