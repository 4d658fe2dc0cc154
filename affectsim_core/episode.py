"""A benchmark episode, typed: ``e = C(m, S, p_h, x0, c)`` (docs/protocol.md §1) as a replayable configuration.

:meth:`Episode.from_dict` validates the JSON form of the dataset files (``affectsim-episodes/1``)
and names the episode and the field of any problem; :meth:`Episode.to_dict` gives the same JSON
back, key for key, so a dataset round-trips byte for byte::

    {"episode_id": "test_3f9c2a71b04e", "scene_id": "scene_012",
     "start_position": [x, y, 0.0], "start_rotation": [w, x, y, z],       # robot x0, map frame
     "family": "observation_controlled", "challenge": "rear_view",       # challenge: null unless OC
     "emotion": "sad", "action": "standing", "group": "oc_OC07_...",      # label and split group
     "seed": 123, "monitor_room": "living_room_0",
     "humans": [{"role": "target", "motion_id": "...", "x": .., "y": .., "yaw": .., "phase": s,
                 "description": "red top, dark trousers"}],
     "placement": {...}, "measures": {"initial_distance": m, ...},
     "counterfactual_of": "test_3f9c2a71b04e"}                            # only on counterfactuals

Positions are metres and angles radians in the ``map`` frame; ``phase`` is seconds into the motion.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from affectsim_core.errors import InvalidInput
from affectsim_core.geometry import Pose2D, yaw_from_quat
from affectsim_core.names import check_name
from affectsim_core.protocol import CHALLENGES, EMOTIONS, FAMILIES

ROLES = ("target", "partner")
MAX_HUMANS = 2
MAX_PHASE_S = 1e5  # a motion's starting phase; beyond it the clock loses sub-millisecond resolution


def _finite(xs) -> bool:
    return all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in xs)


@dataclass(frozen=True)
class EpisodeHuman:
    """One performer: ``role`` (target or partner), the motion clip replayed cyclically from ``phase``
    seconds in a frame anchored at (``x``, ``y``, ``yaw``), and a clothing ``description`` (non-privileged,
    for identifying a dyadic target)."""

    role: str
    motion_id: str
    x: float
    y: float
    yaw: float
    phase: float
    description: str = ""

    @staticmethod
    def from_dict(d: Any, where: str, i: int) -> "EpisodeHuman":
        if not isinstance(d, dict):
            raise InvalidInput(f"humans[{i}]", type(d).__name__, "a mapping", where=where)
        for key in ("x", "y", "yaw", "phase"):
            if not _finite([d.get(key)]):
                raise InvalidInput(f"humans[{i}].{key}", d.get(key), "a finite number", where=where)
        if abs(d["phase"]) > MAX_PHASE_S:  # the bridge refuses it too (LoadWorld)
            raise InvalidInput(f"humans[{i}].phase", d["phase"], f"seconds within +-{MAX_PHASE_S:g}", where=where)
        if d.get("role") not in ROLES:
            raise InvalidInput(f"humans[{i}].role", d.get("role"), f"one of {ROLES}", where=where)
        check_name(f"humans[{i}].motion_id", d.get("motion_id"), where)
        desc = d.get("description", "")
        if not isinstance(desc, str):
            raise InvalidInput(f"humans[{i}].description", desc, "a string", where=where)
        unknown = set(d) - {"role", "motion_id", "x", "y", "yaw", "phase", "description"}
        if unknown:
            raise InvalidInput(f"humans[{i}]", sorted(unknown), "only the fields of an episode's person", where=where)
        return EpisodeHuman(d["role"], d["motion_id"], d["x"], d["y"], d["yaw"], d["phase"], desc)

    def to_dict(self) -> dict:
        return {"role": self.role, "motion_id": self.motion_id, "x": self.x, "y": self.y, "yaw": self.yaw,
                "phase": self.phase, "description": self.description}


@dataclass(frozen=True)
class Episode:
    """One dataset episode (see the module docstring). Immutable; build new ones with ``dataclasses.replace``."""

    episode_id: str
    scene_id: str
    start_position: tuple[float, float, float]
    start_rotation: tuple[float, float, float, float]
    family: str
    challenge: str | None
    emotion: str
    action: str
    group: str
    seed: int
    monitor_room: str | None
    humans: tuple[EpisodeHuman, ...]
    placement: dict = field(default_factory=dict)
    measures: dict = field(default_factory=dict)
    counterfactual_of: str | None = None

    # ------------------------------------------------------------------ derived views
    @property
    def target(self) -> EpisodeHuman:
        return next(h for h in self.humans if h.role == "target")

    @property
    def start(self) -> Pose2D:
        """The robot's start pose x0 (map)."""
        return Pose2D(self.start_position[0], self.start_position[1], yaw_from_quat(*self.start_rotation))

    @property
    def target_description(self) -> str:
        """Clothing description of the target in dyadic episodes (two people), else ""."""
        return self.target.description if len(self.humans) > 1 else ""

    # ------------------------------------------------------------------ JSON
    @staticmethod
    def from_dict(d: Any, where: str = "episode") -> "Episode":
        """Validate the JSON form; raises :class:`InvalidInput` naming the episode and the field."""
        if not isinstance(d, dict):
            raise InvalidInput("episode", type(d).__name__, "a mapping", where=where)
        w = f"{where}: episode {d.get('episode_id', '<no id>')}"

        def need(key: str, typ, ok=lambda v: True, expected: str = ""):
            if key not in d:
                raise InvalidInput(key, None, "a value (field is required)", where=w)
            v = d[key]
            if not isinstance(v, typ) or isinstance(v, bool) and typ is not bool or not ok(v):
                raise InvalidInput(key, v, expected or getattr(typ, "__name__", str(typ)), where=w)
            return v

        check_name("episode_id", d.get("episode_id"), where)
        check_name("scene_id", d.get("scene_id"), w)
        need("start_position", list, lambda v: len(v) == 3 and _finite(v), "[x, y, z] finite metres")
        need("start_rotation", list, lambda v: len(v) == 4 and _finite(v) and abs(sum(x * x for x in v) - 1) < 1e-6,
             "a unit quaternion [w, x, y, z]")
        need("family", str, lambda v: v in FAMILIES, f"one of {FAMILIES}")
        need("emotion", str, lambda v: v in EMOTIONS, f"one of {EMOTIONS}")
        ch = d.get("challenge")
        if ch is not None and ch not in CHALLENGES:
            raise InvalidInput("challenge", ch, f"null or one of {CHALLENGES}", where=w)
        if (d["family"] == "observation_controlled") != (ch is not None):
            raise InvalidInput("challenge", ch, "a challenge exactly for observation-controlled episodes", where=w)
        raw = need("humans", list, lambda v: 1 <= len(v) <= MAX_HUMANS, f"1 to {MAX_HUMANS} people")
        humans = tuple(EpisodeHuman.from_dict(h, w, i) for i, h in enumerate(raw))
        roles = [h.role for h in humans]
        if roles.count("target") != 1:
            raise InvalidInput("humans[].role", roles, "exactly one 'target'", where=w)
        need("seed", int)
        for key in ("action", "group"):
            if not isinstance(d.get(key, ""), str):
                raise InvalidInput(key, d.get(key), "a string", where=w)
        room = d.get("monitor_room")
        if room is not None and not isinstance(room, str):
            raise InvalidInput("monitor_room", room, "null or a room id", where=w)
        for key in ("placement", "measures"):
            if not isinstance(d.get(key, {}), dict):
                raise InvalidInput(key, d.get(key), "a mapping", where=w)
        for key, v in d.get("measures", {}).items():
            if not (v is None or isinstance(v, bool) or _finite([v])):
                raise InvalidInput(f"measures.{key}", v, "a finite number, true/false or null (not measured)", where=w)
        cf = d.get("counterfactual_of")
        if cf is not None:
            check_name("counterfactual_of", cf, w)
        unknown = set(d) - set(Episode.__dataclass_fields__)
        if unknown:
            raise InvalidInput("episode", sorted(unknown), "only the fields of affectsim-episodes/1", where=w)
        return Episode(d["episode_id"], d["scene_id"], tuple(d["start_position"]), tuple(d["start_rotation"]),
                       d["family"], ch, d["emotion"], d.get("action", ""), d.get("group", ""), d["seed"], room, humans,
                       dict(d.get("placement", {})), dict(d.get("measures", {})), cf)

    def to_dict(self) -> dict:
        """The JSON form, keys in the dataset files' order."""
        out = {"episode_id": self.episode_id, "scene_id": self.scene_id, "start_position": list(self.start_position),
               "start_rotation": list(self.start_rotation), "family": self.family, "challenge": self.challenge,
               "emotion": self.emotion, "action": self.action, "group": self.group, "seed": self.seed,
               "monitor_room": self.monitor_room, "humans": [h.to_dict() for h in self.humans],
               "placement": dict(self.placement), "measures": dict(self.measures)}
        if self.counterfactual_of is not None:
            out["counterfactual_of"] = self.counterfactual_of
        return out
