"""One benchmark episode, evaluated: every setting's clip, every recognizer's prediction, the
A-Obs trajectory, d*(r) and the diagnostics, as one paired record (ROS-free core; the offline
runner calls it in-process, the evaluator node builds the same record from the ROS graph).

Record (JSON-serialisable; floats rounded so that records compare exactly across runs)::

    episode_id, scene_id, family, challenge, action, label      the episode (label: the emotion)
    predictions {recognizer: {setting: label | None}}           None: no label (unparseable/error)
    probs       {recognizer: {setting: [5 floats]}}             over EMOTIONS, at float32 precision (as in ROS)
    outcomes    {recognizer: {setting: "ok" | "unparseable" | "error"}}
    a_obs       {outcome, message, fallback, path_length (m), diagnostics {Table 6 inputs},
                 trajectory [[x, y, yaw], ...] (map frame, m/rad, the start then one per action)}
    p_ref       {frame, distance (m), angle (rad)}              the reference observer's choice
    visible     {setting: visible-body fraction of the 8 sampled frames}
    d_star      {"1" | "3" | "5": m | None}                     E-SPL's d*(r); None: region empty/unreachable
    anchor      [x, y]                                          the target's anchor (map, m)
    start       [x, y, yaw]

Settings are ``p_init``, ``p_ref``, ``p_mon`` and ``a_obs`` (PROTOCOL.md section 5); A-Obs falls
back to the paired P-Init clip without a stable handoff (``a_obs.fallback``).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from affectsim_eval.metrics import d_star
from affectsim_nav.active import ActiveResult
from affectsim_nav.runner import EpisodeObservations, observe_episode
from affectsim_nav.timing import NULL
from affectsim_perception.recognizers.base import ClipInput, Prediction, Recognizer
from affectsim_ros.core.geometry import yaw_from_quat

SETTINGS = ("p_init", "p_ref", "p_mon", "a_obs")
RADII = (1, 3, 5)  # m, E-SPL@r


def _r(x: float, nd: int = 6) -> float:
    return round(float(x), nd)


def recognize(recognizers: Mapping[str, Recognizer], frames: np.ndarray) -> dict[str, Prediction]:
    """Every recognizer on one clip's 8 sampled 224x224 frames; a failing one gives an "error"
    prediction with the reason (the others still run)."""
    inp = ClipInput(np.ascontiguousarray(frames))
    out = {}
    for name, rec in recognizers.items():
        try:
            out[name] = rec.predict(inp)
        except Exception as exc:  # noqa: BLE001 - recorded, the episode goes on
            out[name] = Prediction.failed("error", f"{type(exc).__name__}: {exc}")
    return out


def active_summary(active: ActiveResult) -> dict:
    """The A-Obs part of a record from an in-process run (the evaluator node builds the same from
    the AcquireObservation result)."""
    return {"outcome": active.outcome, "message": active.message,
            "diagnostics": active.log.diagnostics(),
            "trajectory": [(x, y, yaw) for _t, x, y, yaw in active.log.trajectory]}


def episode_record(ep: dict, predictions: Mapping[str, Mapping[str, Prediction]], active: dict, fallback: bool,
                   plan: dict | None, visible: Mapping[str, float], nav) -> dict:
    """The paired record of one episode: ``predictions[setting][recognizer]``, ``active`` as from
    :func:`active_summary`, ``plan`` the reference observer's choice (frame, distance, angle)."""
    target = next(h for h in ep["humans"] if h["role"] == "target")
    anchor = np.array([target["x"], target["y"]])
    start = np.array(ep["start_position"][:2], float)
    names = sorted(next(iter(predictions.values())))
    diag = {k: (_r(v) if isinstance(v, float) else v) for k, v in active["diagnostics"].items()}
    dstar = {}
    for r in RADII:
        d = d_star(nav, start, anchor, float(r))
        dstar[str(r)] = None if d is None else _r(d)
    return {
        "episode_id": ep["episode_id"], "scene_id": ep["scene_id"], "family": ep["family"],
        "challenge": ep.get("challenge") or "", "action": ep.get("action", ""), "label": ep["emotion"],
        "predictions": {n: {s: predictions[s][n].label for s in SETTINGS} for n in names},
        "probs": {n: {s: [_r(np.float32(v)) for v in predictions[s][n].probs] for s in SETTINGS} for n in names},
        "outcomes": {n: {s: predictions[s][n].outcome for s in SETTINGS} for n in names},
        "a_obs": {"outcome": active["outcome"], "message": active["message"].splitlines()[0] if active["message"] else "",
                  "fallback": bool(fallback), "path_length": diag["path_length"], "diagnostics": diag,
                  "trajectory": [[_r(x), _r(y), _r(yaw)] for x, y, yaw in active["trajectory"]]},
        "p_ref": None if plan is None else {"frame": plan["frame"], "distance": _r(plan["distance"]),
                                            "angle": _r(plan["angle"])},
        "visible": {s: _r(v, 4) for s, v in visible.items()},
        "d_star": dstar,
        "anchor": [_r(anchor[0]), _r(anchor[1])],
        "start": [_r(start[0]), _r(start[1]), _r(yaw_from_quat(*ep["start_rotation"]))],
    }


def evaluate_offline(ep: dict, backend, scene, load_motion, policy, recognizers: Mapping[str, Recognizer],
                     max_actions: int = 480, max_planner_calls: int = 80, times=NULL) -> tuple[dict, EpisodeObservations]:
    """Observe the episode in-process in every setting, recognise every clip, build the record."""
    obs = observe_episode(ep, backend, scene, load_motion, policy, max_actions=max_actions,
                          max_planner_calls=max_planner_calls, times=times)
    with times("recognition"):
        preds = {s: recognize(recognizers, obs.clips[s].sampled()) for s in SETTINGS}
    plan = obs.reference
    with times("d_star"):
        record = episode_record(ep, preds, active_summary(obs.active), obs.clips["a_obs"].fallback,
                                None if plan is None else {"frame": plan.frame, "distance": plan.distance,
                                                           "angle": plan.angle},
                                obs.visible, backend.navigable)
    return record, obs


VOLATILE = ("wall_s", "worker", "timing")  # run-specific fields the runners add to a record


def comparable(record: dict) -> dict:
    """The record without run-specific fields: equal for the same episode whoever evaluated it
    (ROS graph or in-process, Ray or local, any worker count)."""
    return {k: v for k, v in record.items() if k not in VOLATILE}
