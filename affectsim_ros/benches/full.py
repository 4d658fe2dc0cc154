"""Full-protocol benchmark (``affectsim bench full``), measured in one run on the same stratified
test episodes (all four settings, every shipped recognizer):

1. in-process, one worker: episodes per hour and the time per stage (passive settings, head
   camera render, person detection, global planning, the rest of the policy, recognition, d*);
2. through the ROS graph (bridge, nav, perception, evaluator): per-episode time and its ratio to
   in-process;
3. Ray on 127.0.0.1 with 1 and with 2 workers: scaling efficiency ``(T1 / T2) / 2``;
4. the projected wall time of the full 3,941-episode test split (goal <= 8 h on this machine);
5. a cross-check that every path wrote identical records.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import numpy as np

from affectsim_core.atomic import write_json
from affectsim_core.record import comparable
from affectsim_eval.run.config import DATA_DIR, EvalConfig, select_episodes
from affectsim_eval.run.runner import run_eval
from affectsim_eval.run.store import ResultsStore
from affectsim_perception.recognizers import DEFAULT_RECOGNIZERS
from affectsim_ros.launcher import GraphProcesses
from affectsim_ros.benches import add_dataset_options, add_out, bench

FULL_TEST_SPLIT = 3941  # episodes (docs/protocol.md §4)
GOAL_HOURS = 8.0


def _load(run: Path) -> dict[str, dict]:
    with ResultsStore.open(run / "results.sqlite") as st:
        return {r["episode_id"]: r for r in st.records(None)}


def stage_seconds(records: list[dict]) -> dict[str, float]:
    """Seconds per stage summed over records (``timing``): the passive settings, head-camera render,
    person detection and global planning inside the policy, the rest of the policy and the executor
    (control), recognition of the four clips, d*(r)."""
    t = {k: sum(r.get("timing", {}).get(k, 0.0) for r in records)
         for k in ("passive", "render", "detection", "planning", "policy", "apply", "recognition", "d_star")}
    control = t["policy"] + t["apply"] - t["detection"] - t["planning"]
    return {"passive": t["passive"], "render": t["render"], "detection": t["detection"], "planning": t["planning"],
            "control": control, "recognition": t["recognition"], "d_star": t["d_star"]}


def _ros(run: Path, ids: list[str], log, allow_dataset_mismatch: bool = False) -> float:
    t0 = time.perf_counter()
    with GraphProcesses("bench", args={"episodes": "0", "episode_ids": ",".join(ids), "output_dir": str(run),
                                       "allow_dataset_mismatch": str(allow_dataset_mismatch).lower()},
                        log_dir=run / "logs") as g:
        while g.poll()["evaluator"] is None:
            time.sleep(0.5)
        if g.poll()["evaluator"] != 0:
            raise RuntimeError(f"the evaluator failed; see {run / 'logs' / 'evaluator.log'}")
    return time.perf_counter() - t0


def run(out: Path | None = None, episodes: int = 12, split: str = "test", log=print,
        allow_dataset_mismatch: bool = False) -> dict:
    work = Path(out).with_suffix("") if out else Path("results/bench_full")
    if work.exists():
        shutil.rmtree(work)  # fresh runs: a resumed one would time nothing
    ids = tuple(e.episode_id for e in select_episodes(EvalConfig(split=split, episodes=episodes)))
    cfg = EvalConfig(split=split, ids=ids, recognizers=DEFAULT_RECOGNIZERS)
    log(f"[bench full] {len(ids)} stratified {split} episodes, recognizers {', '.join(DEFAULT_RECOGNIZERS)}")
    walls, runs = {}, {}
    for name, kw in (("in_process", {"workers": 1}), ("ray_1", {"workers": 1, "ray_address": "local"}),
                     ("ray_2", {"workers": 2, "ray_address": "local"})):
        d = work / name
        t0 = time.perf_counter()
        run_eval(d, cfg, data=DATA_DIR, log=lambda m: None, allow_dataset_mismatch=allow_dataset_mismatch, **kw)
        walls[name], runs[name] = time.perf_counter() - t0, _load(d)
        log(f"[bench full] {name}: {walls[name]:.0f} s")
    walls["ros_graph"] = _ros(work / "ros_graph", list(ids), log, allow_dataset_mismatch)
    runs["ros_graph"] = _load(work / "ros_graph")
    log(f"[bench full] ros_graph: {walls['ros_graph']:.0f} s (graph start-up included)")

    local = runs["in_process"]
    per_ep = {k: float(np.mean([r["wall_s"] for r in v.values()])) for k, v in runs.items()}
    stages = stage_seconds(list(local.values()))
    total = sum(stages.values())
    eff = walls["ray_1"] / walls["ray_2"] / 2
    best_rate = 2 * eff / per_ep["in_process"]  # episodes/s with both cores
    res = {
        "episodes": len(ids), "wall_s": walls, "seconds_per_episode": per_ep,
        "episodes_per_hour": {"in_process_1_worker": 3600 / per_ep["in_process"],
                              "in_process_2_workers": 3600 * best_rate,
                              "ros_graph": 3600 / per_ep["ros_graph"]},
        "stage_seconds_per_episode": {k: v / len(local) for k, v in stages.items()},
        "stage_share": {k: v / total for k, v in stages.items()},
        "ros_vs_in_process": per_ep["in_process"] / per_ep["ros_graph"],
        "ray_scaling_efficiency_1_to_2": eff,
        "projected_full_test_split_hours": {"in_process_2_workers": FULL_TEST_SPLIT / best_rate / 3600,
                                            "ros_graph": FULL_TEST_SPLIT * per_ep["ros_graph"] / 3600},
        "records_identical": {k: all(comparable(v[i]) == comparable(local[i]) for i in ids)
                              for k, v in runs.items() if k != "in_process"},
    }
    log(f"[bench full] per episode: in-process {per_ep['in_process']:.1f} s, ROS graph {per_ep['ros_graph']:.1f} s "
        f"(ratio {res['ros_vs_in_process']:.2f})")
    log("[bench full] time per stage (in-process): " + ", ".join(
        f"{k} {v:.1f} s ({100 * res['stage_share'][k]:.0f} %)" for k, v in res["stage_seconds_per_episode"].items()))
    log("[bench full] episodes/hour: " + ", ".join(f"{k} {v:.0f}" for k, v in res["episodes_per_hour"].items()))
    log(f"[bench full] Ray 1 -> 2 workers: {walls['ray_1']:.0f} s -> {walls['ray_2']:.0f} s, efficiency {eff:.2f}")
    p = res["projected_full_test_split_hours"]
    log(f"[bench full] full test split ({FULL_TEST_SPLIT} episodes): {p['in_process_2_workers']:.1f} h in-process on "
        f"2 workers, {p['ros_graph']:.1f} h through the ROS graph (goal <= {GOAL_HOURS:.0f} h)")
    log(f"[bench full] records identical to in-process: {res['records_identical']}")
    if out is not None:
        write_json(Path(out), res, indent=1)
        log(f"[bench full] {out}")
    return res


def _arguments(p) -> None:
    add_out(p)
    add_dataset_options(p, episodes=12)


@bench("full", _arguments)
def main(ns) -> int:
    """Full-protocol throughput, ROS graph vs in-process, and the projection to the whole test split."""
    run(ns.out, ns.episodes, ns.split, allow_dataset_mismatch=ns.allow_dataset_mismatch)
    return 0
