"""Observation-protocol benchmark (``affectsim bench nav``), measured in one run.

On a stratified subset of the test split (proportional to family x challenge), every episode is
evaluated in all four settings by the one episode loop (``affectsim eval``'s, two worker
processes, both cores) with the trivial ``majority`` recognizer, so the time goes to observation:

1. throughput: A-Obs episodes per minute (and full episodes with the three passive settings),
   with the time per stage: head-camera render, person detection, global planning, control
   (the rest of the policy and the executor) and the passive settings. Target >= 8 A-Obs/min.
2. execution diagnostics next to the paper's Table 6: stable handoff, mean path, share of the
   path before the handoff (pooled), budget exhaustion, clipped moves / attempted translations.
3. the visible-body fraction of the target in the 8 sampled frames of P-Init, P-Ref, P-Mon and
   A-Obs clips per family (P-Ref must be clearly higher than P-Init on observation-controlled).
"""

from __future__ import annotations

import shutil
import time
from collections import Counter
from pathlib import Path

import numpy as np

from affectsim_core.atomic import write_json
from affectsim_core.protocol import SETTINGS
from affectsim_core.record import EpisodeRecord
from affectsim_eval.run.config import DATA_DIR, EvalConfig
from affectsim_eval.scoring.metrics import table6
from affectsim_eval.scoring import paper
from affectsim_eval.run.runner import run_eval
from affectsim_eval.run.store import ResultsStore
from affectsim_ros.benches import add_dataset_options, add_out, bench

STAGES = ("render", "detection", "planning", "control", "passive")


def stages(timing: dict[str, float]) -> dict[str, float]:
    """Seconds per reported stage of one episode from its ``timing`` (the loop's stage names)."""
    active = timing.get("policy", 0.0) + timing.get("apply", 0.0) + timing.get("render", 0.0)
    return {"render": timing.get("render", 0.0), "detection": timing.get("detection", 0.0),
            "planning": timing.get("planning", 0.0),
            "control": active - timing.get("render", 0.0) - timing.get("detection", 0.0) - timing.get("planning", 0.0),
            "passive": timing.get("passive", 0.0)}


def run(out: Path | None = None, episodes: int = 100, workers: int = 2, split: str = "test", seed: int = 0,
        data: Path = DATA_DIR, work: Path = Path("results/bench_nav"), log=print,
        allow_dataset_mismatch: bool = False) -> dict:
    cfg = EvalConfig(split=split, episodes=episodes, seed=seed, recognizers=("majority",))
    if work.exists():
        shutil.rmtree(work)  # a fresh run: a resumed one would time nothing
    t0 = time.perf_counter()
    summary = run_eval(work, cfg, workers=workers, data=data, log=lambda m: None,
                       allow_dataset_mismatch=allow_dataset_mismatch)
    wall = time.perf_counter() - t0
    with ResultsStore.open(work / "results.sqlite") as store:
        rows = store.records(None)
    ok = [r for r in rows if r["status"] == "ok"]
    records = [EpisodeRecord.from_dict(r) for r in ok]
    log(f"[bench nav] {len(rows)} {split} episodes ({summary.failed} failed), "
        f"strata {dict(Counter(r.family for r in records))}, {workers} workers")
    per_ep = [stages(r["timing"]) for r in ok]
    stage = {k: sum(s[k] for s in per_ep) for k in STAGES}
    a_obs = [r["timing"].get("policy", 0.0) + r["timing"].get("apply", 0.0) + r["timing"].get("render", 0.0)
             for r in ok]
    a_obs_total = sum(a_obs)
    res = {
        "episodes": len(records), "failed": summary.failed, "workers": workers, "wall_s": wall,
        "a_obs_per_min": 60 * len(records) / (a_obs_total / workers),
        "full_episodes_per_min": 60 * len(records) / wall,
        "stage_seconds": stage,
        "stage_share": {k: v / sum(stage.values()) for k, v in stage.items()},
        "actions_per_s": sum(r.a_obs.diagnostics.actions for r in records) / a_obs_total,
        "table6": table6([r.a_obs.diagnostics for r in records]),
        "table6_paper": {k: paper.value(v) for k, v in paper.TABLE6.items()},
        "outcomes": dict(Counter(r.a_obs.outcome for r in records)),
        "visible": {fam: {s: float(np.mean([r.visible[s] for r in records if r.family == fam])) for s in SETTINGS}
                    for fam in sorted({r.family for r in records})},
        "records": [{"episode_id": r.episode_id, "family": r.family, "challenge": r.challenge,
                     "outcome": r.a_obs.outcome, "message": r.a_obs.message,
                     "diagnostics": r.a_obs.diagnostics.to_dict(), "visible": r.visible, "seconds": s,
                     "a_obs_seconds": a, "wall": row["wall_s"], "fallback": r.a_obs.fallback}
                    for r, s, a, row in zip(records, per_ep, a_obs, ok)],
    }
    log(f"[bench nav] A-Obs: {res['a_obs_per_min']:.1f} episodes/min ({workers} workers; target >= 8), "
        f"{res['actions_per_s']:.1f} actions/s per worker; all four settings: {res['full_episodes_per_min']:.1f} episodes/min")
    log("[bench nav] time per stage: " + ", ".join(f"{k} {v:.0f} s ({100 * res['stage_share'][k]:.0f} %)"
                                                  for k, v in stage.items()))
    log(f"[bench nav] {'diagnostic':26s} {'ours':>8s} {'paper':>8s}")
    for k, v in res["table6"].items():
        log(f"[bench nav] {k:26s} {v:8.2f} {paper.TABLE6[k]:>8s}")
    log(f"[bench nav] outcomes: {res['outcomes']}")
    log(f"[bench nav] visible-body fraction of the 8 sampled frames: {'family':24s} P-Init  P-Ref  P-Mon  A-Obs")
    for fam, v in res["visible"].items():
        log(f"[bench nav]   {fam:24s} {v['p_init']:6.2f} {v['p_ref']:6.2f} {v['p_mon']:6.2f} {v['a_obs']:6.2f}")
    if out is not None:
        write_json(out, res, indent=1, default=float)
        log(f"[bench nav] {out}")
    return res


def _arguments(p) -> None:
    add_out(p)
    add_dataset_options(p, episodes=100, workers=2)


@bench("nav", _arguments)
def main(ns) -> int:
    """A-Obs throughput in-process and through the graph, with the paper's Table 6."""
    run(ns.out, ns.episodes, ns.workers, ns.split, allow_dataset_mismatch=ns.allow_dataset_mismatch)
    return 0
