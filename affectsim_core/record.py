"""The paired record of one evaluated episode, typed (what the results store keeps per episode).

One record holds every setting's clip result for every recognizer, so settings are compared on
the same episodes (docs/protocol.md §8). Its JSON form (:meth:`EpisodeRecord.to_dict`, floats
rounded so records compare exactly across runs)::

    episode_id, scene_id, family, challenge, action, label      the episode (label: the emotion)
    predictions {recognizer: {setting: label | None}}           None: no label (unparseable/error)
    probs       {recognizer: {setting: [5 floats]}}             over EMOTIONS, at float32 precision
    outcomes    {recognizer: {setting: "ok" | "unparseable" | "error"}}
    a_obs       {outcome, message, fallback, path_length (m), diagnostics {Table 6 inputs},
                 trajectory [[x, y, yaw], ...] (map frame, m/rad, the start then one per action)}
    p_ref       {frame, distance (m), angle (rad)} | None       the reference observer's choice
    visible     {setting: visible-body fraction of the 8 sampled frames}
    d_star      {"1" | "3" | "5": m | None}                     E-SPL's d*(r); None: region empty/unreachable
    anchor      [x, y]                                          the target's anchor (map, m)
    start       [x, y, yaw]
    social      {min_gap_m, intimate_pct, personal_pct, contacts, people [...]}   reactive runs only
    streams     {start, end, times, segments, vad, labels, pred_vad}   evolving episodes only

A stored row adds the run fields :data:`RUN_FIELDS` (status, failure reason, wall time, worker,
seconds per stage), which differ between runs of the same episode and are not part of the record.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

from affectsim_core.affect import Segment, parse_segments
from affectsim_core.errors import InvalidInput
from affectsim_core.protocol import EMOTIONS, ESPL_RADII, SETTINGS, Outcome

PREDICTION_OUTCOMES = ("ok", "unparseable", "error")
RUN_FIELDS = ("status", "reason", "wall_s", "worker", "timing")
VOLATILE = ("wall_s", "worker", "timing")  # run fields that differ between runs of the same episode


def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


@dataclass(frozen=True)
class Diagnostics:
    """Per-episode inputs to the paper's Table 6 (A-Obs acquisition diagnostics): whether and after
    how many actions a stable handoff happened, translational path (m) in all and before the
    handoff, budget exhaustion, primitive actions and planner calls used, translations attempted and
    clipped by navigable space."""

    handoff: bool
    handoff_step: int | None
    path_length: float
    path_before_handoff: float
    budget_exhausted: bool
    actions: int
    planner_calls: int
    attempted_translations: int
    clipped_translations: int

    @staticmethod
    def from_dict(d: Any, where: str = "diagnostics") -> "Diagnostics":
        names = [f.name for f in fields(Diagnostics)]
        if not isinstance(d, dict) or set(d) != set(names):
            raise InvalidInput("diagnostics", sorted(d) if isinstance(d, dict) else d, f"the fields {names}", where)
        for k in ("handoff", "budget_exhausted"):
            if not isinstance(d[k], bool):
                raise InvalidInput(f"diagnostics.{k}", d[k], "true or false", where)
        step = d["handoff_step"]
        if step is not None and (not isinstance(step, int) or isinstance(step, bool) or step < 0):
            raise InvalidInput("diagnostics.handoff_step", step, "null or an action count >= 0", where)
        for k in ("path_length", "path_before_handoff"):
            if not (_num(d[k]) and math.isfinite(d[k]) and d[k] >= 0):
                raise InvalidInput(f"diagnostics.{k}", d[k], "metres >= 0", where)
        for k in ("actions", "planner_calls", "attempted_translations", "clipped_translations"):
            if not isinstance(d[k], int) or isinstance(d[k], bool) or d[k] < 0:
                raise InvalidInput(f"diagnostics.{k}", d[k], "a count >= 0", where)
        return Diagnostics(**d)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ActiveSummary:
    """The A-Obs part of a record: how acquisition ended (:class:`~affectsim_core.protocol.Outcome`
    value) and why, whether the clip fell back to P-Init, the path (m), the diagnostics and the
    trajectory (x m, y m, yaw rad in ``map``: the start, then one pose per action)."""

    outcome: str
    message: str
    fallback: bool
    path_length: float
    diagnostics: Diagnostics
    trajectory: tuple[tuple[float, float, float], ...]

    @staticmethod
    def from_dict(d: Any, where: str = "a_obs") -> "ActiveSummary":
        keys = {"outcome", "message", "fallback", "path_length", "diagnostics", "trajectory"}
        if not isinstance(d, dict) or set(d) != keys:
            raise InvalidInput("a_obs", sorted(d) if isinstance(d, dict) else d, f"the fields {sorted(keys)}", where)
        if d["outcome"] not in tuple(Outcome):
            raise InvalidInput("a_obs.outcome", d["outcome"], f"one of {[o.value for o in Outcome]}", where)
        if not isinstance(d["message"], str) or not isinstance(d["fallback"], bool):
            raise InvalidInput("a_obs.message/fallback", (d["message"], d["fallback"]), "a string and a bool", where)
        traj = d["trajectory"]
        if not isinstance(traj, list) or not all(isinstance(p, list) and len(p) == 3 and all(map(_num, p))
                                                 for p in traj):
            raise InvalidInput("a_obs.trajectory", traj if not isinstance(traj, list) else f"{len(traj)} poses",
                               "a list of [x, y, yaw] poses", where)
        if not _num(d["path_length"]):
            raise InvalidInput("a_obs.path_length", d["path_length"], "metres", where)
        return ActiveSummary(d["outcome"], d["message"], d["fallback"], d["path_length"],
                             Diagnostics.from_dict(d["diagnostics"], where), tuple(tuple(p) for p in traj))

    def to_dict(self) -> dict:
        return {"outcome": str(self.outcome), "message": self.message, "fallback": self.fallback,
                "path_length": self.path_length, "diagnostics": self.diagnostics.to_dict(),
                "trajectory": [list(p) for p in self.trajectory]}


@dataclass(frozen=True)
class ReferenceChoice:
    """The reference observer's relative configuration: frame ("body" or "axis"), distance (m),
    angle from the body's front (rad, + left)."""

    frame: str
    distance: float
    angle: float


PERSON_SUMMARY = ("id", "emotion", "noticed_at", "reacting_s", "path_m", "max_shift_m", "blocked_steps")


@dataclass(frozen=True)
class SocialSummary:
    """Social measures of one A-Obs acquisition among reactive people, over the robot's whole
    trajectory (gaps surface to surface, m: the robot's round footprint to a person's disc):
    the smallest gap, the percentage of poses within the intimate zone (< 0.45 m) and the personal
    zone (0.45-1.2 m) of someone, poses touching someone (gap < 1 cm), and per person (world order)
    the fields :data:`PERSON_SUMMARY`: when the robot was noticed (s, or None), seconds spent
    reacting, the length (m) and largest extent (m) of the displacement the robot caused, and
    displacement steps refused by walls, furniture, the robot or the other person."""

    min_gap_m: float
    intimate_pct: float
    personal_pct: float
    contacts: int
    people: tuple[dict, ...]

    @staticmethod
    def from_dict(d: Any, where: str = "social") -> "SocialSummary":
        keys = ("min_gap_m", "intimate_pct", "personal_pct", "contacts", "people")
        if not isinstance(d, dict) or set(d) != set(keys):
            raise InvalidInput("social", sorted(d) if isinstance(d, dict) else d, f"the fields {list(keys)}", where)
        for k in keys[:3]:
            if not _num(d[k]):
                raise InvalidInput(f"social.{k}", d[k], "a number", where)
        if not isinstance(d["contacts"], int) or isinstance(d["contacts"], bool) or d["contacts"] < 0:
            raise InvalidInput("social.contacts", d["contacts"], "a count >= 0", where)
        people = d["people"]
        if not (isinstance(people, list) and all(isinstance(x, dict) and set(x) == set(PERSON_SUMMARY) for x in people)):
            raise InvalidInput("social.people", people, f"a list of {{{', '.join(PERSON_SUMMARY)}}}", where)
        return SocialSummary(d["min_gap_m"], d["intimate_pct"], d["personal_pct"], d["contacts"],
                             tuple(dict(x) for x in people))

    def to_dict(self) -> dict:
        return {"min_gap_m": self.min_gap_m, "intimate_pct": self.intimate_pct, "personal_pct": self.personal_pct,
                "contacts": self.contacts, "people": [dict(x) for x in self.people]}


MAX_WINDOWS = 2400  # windows of one stream (10 min at 4 Hz)


def _vad3(v: Any) -> bool:
    return isinstance(v, list) and len(v) == 3 and all(_num(x) and -1.0 <= x <= 1.0 for x in v)


@dataclass(frozen=True)
class AffectStreams:
    """The window streams of an evolving episode, the same windows in every setting (paired):
    the observed interval ``[start, end)`` and window centre ``times`` (s, episode clock); the true
    ``segments`` over the interval and the true ``vad`` at each window; per recognizer and setting
    the predicted label per window (``labels``, None: no label) and, for recognizers that estimate
    it, the predicted VAD per window (``pred_vad``, None where a window has none)."""

    start: float
    end: float
    times: tuple[float, ...]
    segments: tuple[Segment, ...]
    vad: tuple[tuple[float, float, float], ...]
    labels: dict[str, dict[str, tuple[str | None, ...]]]
    pred_vad: dict[str, dict[str, tuple[tuple[float, float, float] | None, ...]]]

    @staticmethod
    def from_dict(d: Any, where: str = "streams") -> "AffectStreams":
        keys = ("start", "end", "times", "segments", "vad", "labels", "pred_vad")
        if not isinstance(d, dict) or set(d) != set(keys):
            raise InvalidInput("streams", sorted(d) if isinstance(d, dict) else d, f"the fields {list(keys)}", where)
        if not (_num(d["start"]) and _num(d["end"]) and d["start"] < d["end"]):
            raise InvalidInput("streams.start/end", (d["start"], d["end"]), "seconds with start < end", where)
        times = d["times"]
        if not (isinstance(times, list) and 0 < len(times) <= MAX_WINDOWS and all(map(_num, times))
                and all(a < b for a, b in zip(times, times[1:])) and d["start"] <= times[0] and times[-1] <= d["end"]):
            raise InvalidInput("streams.times", times if not isinstance(times, list) else f"{len(times)} values",
                               f"1 to {MAX_WINDOWS} increasing seconds within [start, end]", where)
        n = len(times)
        segs = parse_segments(d["segments"], None, f"{where}: streams")
        if abs(segs[0].start - d["start"]) > 1e-3 or abs(segs[-1].end - d["end"]) > 1e-3:
            raise InvalidInput("streams.segments", [segs[0].start, segs[-1].end], "to cover [start, end]", where)
        if not (isinstance(d["vad"], list) and len(d["vad"]) == n and all(map(_vad3, d["vad"]))):
            raise InvalidInput("streams.vad", f"{len(d['vad']) if isinstance(d['vad'], list) else d['vad']}",
                               f"{n} [valence, arousal, dominance] in [-1, 1]", where)
        labels, pred = d["labels"], d["pred_vad"]
        if not isinstance(labels, dict) or not labels or not isinstance(pred, dict) or not set(pred) <= set(labels):
            raise InvalidInput("streams.labels/pred_vad", sorted(labels) if isinstance(labels, dict) else labels,
                               "recognizers with labels; pred_vad for some of them", where)
        for rec, by in labels.items():
            ok = isinstance(by, dict) and set(by) <= set(SETTINGS) and all(
                isinstance(v, list) and len(v) == n and all(x is None or x in EMOTIONS for x in v) for v in by.values())
            if not ok:
                raise InvalidInput(f"streams.labels[{rec!r}]", "malformed", f"{{setting: {n} labels or null}}", where)
            p = pred.get(rec, {})
            if not isinstance(p, dict) or not set(p) <= set(by) or not all(
                    isinstance(v, list) and len(v) == n and all(x is None or _vad3(x) for x in v) for v in p.values()):
                raise InvalidInput(f"streams.pred_vad[{rec!r}]", "malformed", f"{{setting: {n} VAD or null}}", where)
        return AffectStreams(float(d["start"]), float(d["end"]), tuple(times), segs, tuple(map(tuple, d["vad"])),
                             {r: {s: tuple(v) for s, v in by.items()} for r, by in labels.items()},
                             {r: {s: tuple(None if x is None else tuple(x) for x in v) for s, v in by.items()}
                              for r, by in pred.items()})

    def to_dict(self) -> dict:
        return {"start": self.start, "end": self.end, "times": list(self.times),
                "segments": [s.to_list() for s in self.segments], "vad": [list(v) for v in self.vad],
                "labels": {r: {s: list(v) for s, v in by.items()} for r, by in self.labels.items()},
                "pred_vad": {r: {s: [None if x is None else list(x) for x in v] for s, v in by.items()}
                             for r, by in self.pred_vad.items()}}


@dataclass(frozen=True)
class EpisodeRecord:
    """The paired record of one episode (see the module docstring)."""

    episode_id: str
    scene_id: str
    family: str
    challenge: str
    action: str
    label: str
    predictions: dict[str, dict[str, str | None]]
    probs: dict[str, dict[str, list[float]]]
    outcomes: dict[str, dict[str, str]]
    a_obs: ActiveSummary
    p_ref: ReferenceChoice | None
    visible: dict[str, float]
    d_star: dict[str, float | None]
    anchor: tuple[float, float]
    start: tuple[float, float, float]
    social: SocialSummary | None = None  # reactive people only (absent from scripted records)
    streams: AffectStreams | None = None  # evolving episodes only

    @property
    def recognizers(self) -> list[str]:
        return sorted(self.predictions)

    @staticmethod
    def from_dict(d: Any, where: str = "record") -> "EpisodeRecord":
        """Validate the JSON form (run fields :data:`RUN_FIELDS` are allowed and ignored)."""
        names = [f.name for f in fields(EpisodeRecord)]
        if not isinstance(d, dict):
            raise InvalidInput("record", type(d).__name__, "a mapping", where)
        w = f"{where}: {d.get('episode_id', '<no id>')}"
        missing = [n for n in names if n not in d and n not in ("social", "streams")]
        unknown = sorted(set(d) - set(names) - set(RUN_FIELDS))
        if missing or unknown:
            raise InvalidInput("record fields", {"missing": missing, "unknown": unknown},
                               f"exactly the fields {names} (plus run fields {list(RUN_FIELDS)})", w)
        for k in ("episode_id", "scene_id", "family", "challenge", "action"):
            if not isinstance(d[k], str):
                raise InvalidInput(k, d[k], "a string", w)
        if d["label"] not in EMOTIONS:
            raise InvalidInput("label", d["label"], f"one of {EMOTIONS}", w)
        preds, probs, outs = d["predictions"], d["probs"], d["outcomes"]
        if not isinstance(preds, dict) or not preds or not isinstance(probs, dict) or not isinstance(outs, dict) \
                or set(preds) != set(probs) or set(preds) != set(outs):
            raise InvalidInput("predictions/probs/outcomes", sorted(preds) if isinstance(preds, dict) else preds,
                               "the same recognizers in all three, at least one", w)
        for rec, by_setting in preds.items():
            if not isinstance(by_setting, dict) or not set(by_setting) <= set(SETTINGS) \
                    or set(by_setting) != set(probs[rec]) or set(by_setting) != set(outs[rec]):
                raise InvalidInput(f"predictions[{rec!r}]", by_setting, f"settings from {SETTINGS}, the same in "
                                   "predictions, probs and outcomes", w)
            for s, label in by_setting.items():
                if label is not None and label not in EMOTIONS:
                    raise InvalidInput(f"predictions[{rec!r}][{s!r}]", label, f"null or one of {EMOTIONS}", w)
                p = probs[rec][s]
                if not (isinstance(p, list) and len(p) == len(EMOTIONS) and all(map(_num, p))):
                    raise InvalidInput(f"probs[{rec!r}][{s!r}]", p, f"{len(EMOTIONS)} probabilities", w)
                if outs[rec][s] not in PREDICTION_OUTCOMES:
                    raise InvalidInput(f"outcomes[{rec!r}][{s!r}]", outs[rec][s], f"one of {PREDICTION_OUTCOMES}", w)
        ref = d["p_ref"]
        if ref is not None and not (isinstance(ref, dict) and set(ref) == {"frame", "distance", "angle"}):
            raise InvalidInput("p_ref", ref, "null or {frame, distance, angle}", w)
        if not isinstance(d["visible"], dict) or not set(d["visible"]) <= set(SETTINGS) \
                or not all(_num(v) for v in d["visible"].values()):
            raise InvalidInput("visible", d["visible"], f"{{setting: fraction}} for settings from {SETTINGS}", w)
        radii = {str(r) for r in ESPL_RADII}
        if not isinstance(d["d_star"], dict) or set(d["d_star"]) != radii \
                or not all(v is None or _num(v) for v in d["d_star"].values()):
            raise InvalidInput("d_star", d["d_star"], f"{{radius: m or null}} for radii {sorted(radii)}", w)
        for k, n in (("anchor", 2), ("start", 3)):
            if not (isinstance(d[k], list) and len(d[k]) == n and all(map(_num, d[k]))):
                raise InvalidInput(k, d[k], f"{n} numbers", w)
        return EpisodeRecord(d["episode_id"], d["scene_id"], d["family"], d["challenge"], d["action"], d["label"],
                             preds, probs, outs, ActiveSummary.from_dict(d["a_obs"], w),
                             None if ref is None else ReferenceChoice(**ref), dict(d["visible"]), dict(d["d_star"]),
                             tuple(d["anchor"]), tuple(d["start"]),
                             None if d.get("social") is None else SocialSummary.from_dict(d["social"], w),
                             None if d.get("streams") is None else AffectStreams.from_dict(d["streams"], w))

    def to_dict(self) -> dict:
        """The JSON form stored in the results store."""
        return {"episode_id": self.episode_id, "scene_id": self.scene_id, "family": self.family,
                "challenge": self.challenge, "action": self.action, "label": self.label,
                "predictions": self.predictions, "probs": self.probs, "outcomes": self.outcomes,
                "a_obs": self.a_obs.to_dict(), "p_ref": None if self.p_ref is None else asdict(self.p_ref),
                "visible": self.visible, "d_star": self.d_star, "anchor": list(self.anchor), "start": list(self.start),
                **({} if self.social is None else {"social": self.social.to_dict()}),
                **({} if self.streams is None else {"streams": self.streams.to_dict()})}


def comparable(stored: dict) -> dict:
    """A stored row without its volatile run fields: equal for the same episode whoever evaluated it
    (ROS graph or in-process, Ray or local, any worker count)."""
    return {k: v for k, v in stored.items() if k not in VOLATILE}
