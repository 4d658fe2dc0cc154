"""Observation-protocol benchmark (``affectsim bench nav``), measured in one run.

On a stratified subset of the test split (proportional to family x challenge), every episode
is observed in all four settings by two worker processes (both cores):

1. throughput: A-Obs episodes per minute (and full episodes with the three passive settings),
   with the time per stage: head-camera render, person detection, global planning, control
   (the rest of the policy and the executor) and the passive settings. Target >= 8 A-Obs/min.
2. execution diagnostics next to the paper's Table 6: stable handoff, mean path, share of the
   path before the handoff (pooled), budget exhaustion, clipped moves / attempted translations.
3. the visible-body fraction of the target in the 8 sampled frames of P-Init, P-Ref, P-Mon and
   A-Obs clips per family (P-Ref must be clearly higher than P-Init on observation-controlled).
"""

from __future__ import annotations

import math
import time
from collections import Counter, defaultdict
from multiprocessing import get_context
from pathlib import Path

import numpy as np

from affectsim_bridge.humans.library import DEFAULT_DIR as MOTIONS_DIR
from affectsim_bridge.humans.library import Library
from affectsim_bridge.scene import load_scene
from affectsim_bridge.scene_generator import SCENES_DIR
from affectsim_ros.core.atomic import write_json
from affectsim_ros.core.errors import InvalidInput
from affectsim_ros.dataset.episodes import DATASET_DIR, load_split

TABLE6 = {"handoff_pct": 47.73, "mean_path_m": 23.23, "path_before_handoff_pct": 97.4,
          "budget_exhausted_pct": 52.27, "clipped_pct": 14.10}
_W: dict = {}


def stratified_subset(episodes: list[dict], n: int, seed: int = 0) -> list[dict]:
    """``n`` episodes proportional to (family, challenge) strata (largest remainders, >= 1 per stratum)."""
    strata: dict[tuple, list[dict]] = defaultdict(list)
    for e in episodes:
        strata[(e["family"], e["challenge"] or "")].append(e)
    keys = sorted(strata)
    if n < len(keys):
        raise InvalidInput("episodes", n, f"at least one per stratum ({len(keys)})")
    rest = n - len(keys)  # one per stratum, the rest proportionally by largest remainders
    share = {k: rest * len(strata[k]) / len(episodes) for k in keys}
    take = {k: 1 + int(share[k]) for k in keys}
    for k in sorted(keys, key=lambda k: share[k] - int(share[k]), reverse=True)[: n - sum(take.values())]:
        take[k] += 1
    rng = np.random.default_rng(seed)
    out = []
    for k in keys:
        idx = rng.choice(len(strata[k]), size=min(take[k], len(strata[k])), replace=False)
        out += [strata[k][i] for i in sorted(idx)]
    return out


def _init(motions: str, scenes_dir: str) -> None:
    import affectsim_nav.baseline  # noqa: F401  (registers the baseline)
    from affectsim_bridge.backends.mujoco_backend import MujocoBackend
    from affectsim_nav.policy import POLICIES
    from affectsim_nav.timing import StageTimes, TimedDetector
    from affectsim_perception.person_model import BlazePose

    _W["lib"] = Library(Path(motions))
    _W["scenes_dir"] = Path(scenes_dir)
    _W["scenes"] = {}
    _W["backend"] = MujocoBackend()
    _W["times"] = StageTimes()
    _W["policy"] = POLICIES.create("baseline", detector=TimedDetector(BlazePose(), _W["times"]))


def _run(ep: dict) -> dict:
    from affectsim_nav.runner import observe_episode

    scenes = _W["scenes"]
    if ep["scene_id"] not in scenes:
        scenes.clear()  # one scene at a time per worker (episodes arrive grouped by scene)
        scenes[ep["scene_id"]] = load_scene(ep["scene_id"], _W["scenes_dir"])
    times = _W["times"]
    times.seconds.clear()
    t0 = time.perf_counter()
    obs = observe_episode(ep, _W["backend"], scenes[ep["scene_id"]], _W["lib"].load, _W["policy"], times=times)
    wall = time.perf_counter() - t0
    sec = dict(times.seconds)
    active = sec.get("policy", 0.0) + sec.get("apply", 0.0) + sec.get("render", 0.0)
    stages = {"render": sec.get("render", 0.0), "detection": sec.get("detection", 0.0),
              "planning": sec.get("planning", 0.0),
              "control": active - sec.get("render", 0.0) - sec.get("detection", 0.0) - sec.get("planning", 0.0),
              "passive": sec.get("passive", 0.0)}
    return {"episode_id": ep["episode_id"], "family": ep["family"], "challenge": ep["challenge"],
            "outcome": obs.active.outcome, "message": obs.active.message.splitlines()[0] if obs.active.message else "",
            "diagnostics": obs.active.log.diagnostics(), "visible": obs.visible, "seconds": stages,
            "a_obs_seconds": active, "wall": wall, "fallback": obs.clips["a_obs"].fallback}


def table6(records: list[dict]) -> dict:
    """The paper's acquisition diagnostics over episode records (percentages and metres)."""
    d = [r["diagnostics"] for r in records]
    n = max(1, len(d))
    path = sum(x["path_length"] for x in d)
    return {"handoff_pct": 100 * sum(x["handoff"] for x in d) / n,
            "mean_path_m": path / n,
            "path_before_handoff_pct": 100 * sum(x["path_before_handoff"] for x in d) / path if path else math.nan,
            "budget_exhausted_pct": 100 * sum(x["budget_exhausted"] for x in d) / n,
            "clipped_pct": 100 * sum(x["clipped_translations"] for x in d) / max(1, sum(x["attempted_translations"]
                                                                                        for x in d))}


def run(out: Path | None = None, episodes: int = 100, workers: int = 2, split: str = "test", seed: int = 0,
        root: Path = DATASET_DIR, motions: Path = MOTIONS_DIR, scenes_dir: Path = SCENES_DIR, log=print) -> dict:
    if not (Path(root) / "manifest.json").is_file():
        raise InvalidInput("dataset", str(root), "a built dataset: run `affectsim scenes build && affectsim dataset build`")
    subset = sorted(stratified_subset(load_split(split, root), episodes, seed), key=lambda e: (e["scene_id"], e["episode_id"]))
    log(f"[bench nav] {len(subset)} {split} episodes, strata {dict(Counter(e['family'] for e in subset))}, "
        f"{workers} workers")
    records = []
    t0 = time.perf_counter()
    with get_context("spawn").Pool(workers, initializer=_init, initargs=(str(motions), str(scenes_dir))) as pool:
        for r in pool.imap_unordered(_run, subset, chunksize=2):
            records.append(r)
            if len(records) % 10 == 0:
                log(f"[bench nav] {len(records)}/{len(subset)} episodes, {time.perf_counter() - t0:.0f} s")
    wall = time.perf_counter() - t0
    records.sort(key=lambda r: r["episode_id"])
    stage = {k: sum(r["seconds"][k] for r in records) for k in ("render", "detection", "planning", "control", "passive")}
    a_obs_total = sum(r["a_obs_seconds"] for r in records)
    res = {
        "episodes": len(records), "workers": workers, "wall_s": wall,
        "a_obs_per_min": 60 * len(records) / (a_obs_total / workers),
        "full_episodes_per_min": 60 * len(records) / wall,
        "stage_seconds": stage,
        "stage_share": {k: v / sum(stage.values()) for k, v in stage.items()},
        "actions_per_s": sum(r["diagnostics"]["actions"] for r in records) / a_obs_total,
        "table6": table6(records), "table6_paper": TABLE6,
        "outcomes": dict(Counter(r["outcome"] for r in records)),
        "visible": {fam: {s: float(np.mean([r["visible"][s] for r in records if r["family"] == fam]))
                          for s in ("p_init", "p_ref", "p_mon", "a_obs")}
                    for fam in sorted({r["family"] for r in records})},
        "records": records,
    }
    log(f"[bench nav] A-Obs: {res['a_obs_per_min']:.1f} episodes/min ({workers} workers; target >= 8), "
        f"{res['actions_per_s']:.1f} actions/s per worker; all four settings: {res['full_episodes_per_min']:.1f} episodes/min")
    log("[bench nav] time per stage: " + ", ".join(f"{k} {v:.0f} s ({100 * res['stage_share'][k]:.0f} %)"
                                                  for k, v in stage.items()))
    log(f"[bench nav] {'diagnostic':26s} {'ours':>8s} {'paper':>8s}")
    for k, v in res["table6"].items():
        log(f"[bench nav] {k:26s} {v:8.2f} {TABLE6[k]:8.2f}")
    log(f"[bench nav] outcomes: {res['outcomes']}")
    log(f"[bench nav] visible-body fraction of the 8 sampled frames: {'family':24s} P-Init  P-Ref  P-Mon  A-Obs")
    for fam, v in res["visible"].items():
        log(f"[bench nav]   {fam:24s} {v['p_init']:6.2f} {v['p_ref']:6.2f} {v['p_mon']:6.2f} {v['a_obs']:6.2f}")
    if out is not None:
        write_json(out, res, indent=1, default=float)
        log(f"[bench nav] {out}")
    return res
