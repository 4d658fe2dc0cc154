"""The motion library: built deterministically from a seed, stored as clips plus a manifest.

Layout of a library directory::

    manifest.json          version, seed, counts, one entry per clip (id, file, labels, group, sha256)
    clips/<id>.npz         one clip each (see motion.py)

Contents (paper scale, docs/protocol.md §4):
- action-grounded: 12 performers x {walk, sit_down, seated, knock} x 5 emotions x 2 takes;
  ``group`` = performer (splits are performer-disjoint);
- observation-controlled: 837 standing scenario performances by 22 other performers;
  ``group`` = the source performance (performer, scenario and emotion: its takes share it);
- dyadic: 60 two-person sequences (target + partner clip and the partner's placement
  relative to the target; the paper has 48: 60 give val and test two sequences per target
  emotion each); ``group`` = the sequence;
- evolving (beyond the paper): 400 in-place performances by 20 more performers whose emotion
  changes once or twice in response to an event (``evolving.py``); each performer performs every
  ordered pair of emotions once as the last change, the scenario from a Latin square over the pairs
  (:func:`evolving_scenario`), the events independent of the emotions; ``group`` = performer.

Every clip carries per-frame valence-arousal-dominance; the manifest gives each clip's mean VAD
and its emotion segments.

The build writes into a temporary directory and renames it into place, so an
interrupted build never leaves a partial library.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from affectsim_bridge.backends.base import HumanPlacement
from affectsim_bridge.humans.evolving import EVENTS, IN_PLACE, evolving
from affectsim_bridge.humans.generator import generate
from affectsim_bridge.humans.motion import Motion, check_clip_limits, load_motion, save_motion
from affectsim_bridge.humans.styles import Performer
from affectsim_core.atomic import staged_dir
from affectsim_core.errors import InvalidInput
from affectsim_core.names import check_name
from affectsim_core.protocol import EMOTIONS
from affectsim_core.readers import read_json

LIBRARY_FORMAT = "affectsim-motion-library/1"
MAX_MANIFEST_BYTES = 64 * 2 ** 20  # the library manifest (1,733 clips: 0.9 MB)
DEFAULT_DIR = Path(__file__).resolve().parents[2] / "data" / "motions"
AG_ACTIONS = ("walk", "sit_down", "seated", "knock")
SCENARIOS = ("gestures", "weight_shift", "self_touch", "arms_crossed", "pacing")
#: Dyadic staging: interaction type -> (partner-target distance range in m, the partner's possible
#: reactions). Crossed with every target emotion, and the partner's reaction drawn independently of
#: it, so that the context (interaction, partner emotion, distance) does not predict the target's
#: emotion (``affectsim dataset validate`` measures it).
INTERACTIONS = {"confrontation": ((1.0, 1.4), ("angry", "fearful", "neutral")),
                "comforting": ((0.7, 0.9), ("neutral", "sad", "happy")),
                "approach_retreat": ((1.2, 1.6), ("angry", "fearful", "happy")),
                "conversation": ((1.1, 1.5), ("neutral", "happy", "sad"))}


@dataclass(frozen=True)
class Plan:
    """One clip to build: id, family, action, emotion, performer, take, group, parameters."""

    id: str
    family: str
    action: str
    emotion: str
    performer: Performer
    take: int
    group: str
    params: dict


#: Evolving clips: ordered emotion pairs (first, second), each equally often.
PAIRS = tuple((a, b) for a in EMOTIONS for b in EMOTIONS if a != b)


def plan(seed: int = 0, ag_performers: int = 12, ag_takes: int = 2, oc_performances: int = 837,
         oc_performers: int = 22, dyadic: int = 60, ev_performers: int = 20,
         ev_clips: int = len(PAIRS)) -> tuple[list[Plan], list[dict]]:
    """Every clip of the library and the dyadic sequences, in a fixed order."""
    rng = np.random.default_rng(seed)
    plans: list[Plan] = []
    ag = [Performer.sample(f"AG{i + 1:02d}", rng) for i in range(ag_performers)]
    for p in ag:
        for action in AG_ACTIONS:
            for emotion in EMOTIONS:
                for take in range(1, ag_takes + 1):
                    plans.append(Plan(f"ag_{p.id}_{action}_{emotion}_t{take}", "action_grounded", action, emotion, p,
                                      take, p.id, {}))
    oc = [Performer.sample(f"OC{i + 1:02d}", rng) for i in range(oc_performers)]
    for n in range(oc_performances):  # round-robin: balanced emotions, performers and scenarios
        block = oc_performers * len(EMOTIONS)
        emotion = EMOTIONS[n % len(EMOTIONS)]
        p = oc[(n // len(EMOTIONS)) % oc_performers]
        scenario = SCENARIOS[(n // block) % len(SCENARIOS)]
        take = n // (block * len(SCENARIOS)) + 1
        performance = f"oc_{p.id}_{scenario}_{emotion}"  # its takes are one group: they land in one split
        plans.append(Plan(f"{performance}_t{take}", "observation_controlled", "standing", emotion, p, take, performance,
                          {"scenario": scenario}))
    dy = [Performer.sample(f"DY{i + 1:02d}", rng) for i in range(2 * 12)]
    sequences = []
    kinds = list(INTERACTIONS)
    for n in range(dyadic):  # every (interaction, target emotion) pair before any repeats
        emotion = EMOTIONS[n % len(EMOTIONS)]
        kind = kinds[(n // len(EMOTIONS)) % len(kinds)]
        (lo, hi), reactions = INTERACTIONS[kind]
        reaction = reactions[int(rng.integers(len(reactions)))]
        target, partner = dy[(2 * n) % len(dy)], dy[(2 * n + 1) % len(dy)]
        sid = f"dy{n + 1:02d}_{kind}_{emotion}"
        scen_t = "gestures" if kind != "approach_retreat" else "pacing"
        plans.append(Plan(f"{sid}_target", "dyadic", "standing", emotion, target, n + 1, sid, {"scenario": scen_t}))
        plans.append(Plan(f"{sid}_partner", "dyadic", "standing", reaction, partner, n + 1, sid,
                          {"scenario": "gestures"}))
        dist = float(rng.uniform(lo, hi))
        sequences.append({"id": sid, "interaction": kind, "emotion": emotion, "target": f"{sid}_target",
                          "partner": f"{sid}_partner",
                          # partner placement in the target's motion frame: facing the target
                          "partner_pose": [dist, float(rng.uniform(-0.3, 0.3)), math.pi]})
    ev = [Performer.sample(f"EV{i + 1:02d}", rng) for i in range(ev_performers)]
    events = list(EVENTS)
    for i, p in enumerate(ev):
        for n in range(ev_clips):
            pair = PAIRS[n % len(PAIRS)]
            emotions = pair
            evs = (events[(n + i) % len(events)],)
            if n % 4 == 2:  # once per first emotion of the pairs, an earlier change from another emotion (each
                # emotion once per performer: first emotions stay balanced), after any other event
                k = EMOTIONS.index(pair[0])
                emotions = (EMOTIONS[(k + 1 + i % (len(EMOTIONS) - 1)) % len(EMOTIONS)], *pair)
                evs = (events[(events.index(evs[0]) + 1 + int(rng.integers(len(events) - 1))) % len(events)], *evs)
            mid = f"ev_{p.id}_{'-'.join(emotions)}_t{n + 1}"
            plans.append(Plan(mid, "evolving", "standing", emotions[-1], p, n + 1, p.id,
                              {"emotions": emotions, "events": evs, "scenario": evolving_scenario(pair, i)}))
    return plans, sequences


def evolving_scenario(pair: tuple[str, str], performer: int) -> str:
    """The in-place scenario of an evolving clip whose last change is ``pair`` (from, to), by its
    performer's index: a Latin square over the ordered pairs, so that every scenario comes with every
    emotion before and every emotion after the last change equally often, for each performer (the
    scenario gives neither away; ``affectsim dataset validate`` measures it)."""
    k = len(EMOTIONS)
    a, b = EMOTIONS.index(pair[0]), EMOTIONS.index(pair[1])
    return IN_PLACE[((b - a - 1) % k + performer) % len(IN_PLACE)]


_VERIFIED: set[tuple[str, str]] = set()  # (clip file, SHA-256) checked in this process


def _sha256(path: Path) -> str:
    """SHA-256 of a file, read in chunks (never the whole file in memory)."""
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def build(out: Path = DEFAULT_DIR, seed: int = 0, log: Callable[[str], None] = print, **sizes) -> dict:
    """Generate the library into ``out`` (replaced atomically); returns the manifest."""
    plans, sequences = plan(seed, **sizes)
    t0 = time.monotonic()
    with staged_dir(Path(out), ".motions-") as tmp:
        entries = []
        for i, p in enumerate(plans):
            intensity = float(np.random.default_rng([seed, i]).uniform(0.7, 1.2))
            if p.family == "evolving":
                m = evolving(p.id, p.performer, p.take, intensity=intensity, **p.params)
            else:
                m = generate(p.id, p.action, p.emotion, p.performer, p.take, intensity=intensity, **p.params)
            scenario = {"scenario": p.params["scenario"]} if "scenario" in p.params else {}
            m.provenance.update({"family": p.family, "group": p.group, "seed": seed, **scenario})
            path = tmp / "clips" / f"{p.id}.npz"
            save_motion(m, path)
            entries.append({"id": p.id, "file": f"clips/{p.id}.npz", "family": p.family, "action": p.action,
                            "emotion": p.emotion, "performer": p.performer.id, "take": p.take, "group": p.group,
                            "duration": round(m.duration, 4), "frames": m.frames, "intensity": m.intensity,
                            **scenario, **_labels(m), "sha256": _sha256(path)})
            if (i + 1) % 200 == 0 or i + 1 == len(plans):
                el = time.monotonic() - t0
                log(f"[motions] {i + 1}/{len(plans)} clips, {el:.0f} s elapsed, ETA {el / (i + 1) * (len(plans) - i - 1):.0f} s")
        manifest = {"format": LIBRARY_FORMAT, "seed": seed, "generator": "affectsim procedural v1",
                    "counts": _counts(entries), "clips": entries, "dyadic": sequences}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1))
    log(f"[motions] built {len(entries)} clips and {len(sequences)} dyadic sequences in "
        f"{time.monotonic() - t0:.1f} s -> {out}")
    return manifest


def _labels(m: Motion) -> dict:
    """A clip's labels for the manifest: mean VAD, and for an evolving clip its segments
    ([start s, end s, emotion]), events and the frame its held cycle starts at."""
    out = {"vad": [round(float(v), 4) for v in m.frame_vad.mean(0)]}
    if m.segments:
        out.update(segments=[s.to_list() for s in m.segments], events=m.provenance.get("events", []),
                   loop_start=m.loop_start)
    return out


def _counts(entries: list[dict]) -> dict:
    counts: dict = {}
    for e in entries:
        fam = counts.setdefault(e["family"], {"total": 0, "emotions": {}})
        fam["total"] += 1
        fam["emotions"][e["emotion"]] = fam["emotions"].get(e["emotion"], 0) + 1
    return counts


def _check_dyadic(seqs: object, where: str) -> None:
    """Refuse a manifest's ``dyadic`` table unless it is a list of sequences with names, an emotion and
    a finite partner pose, as :func:`build` writes it."""
    if not isinstance(seqs, list):
        raise InvalidInput("manifest.dyadic", type(seqs).__name__, "a list of dyadic sequences", where=where)
    for i, d in enumerate(seqs):
        w = f"{where}: dyadic[{i}]"
        if not isinstance(d, dict):
            raise InvalidInput("entry", type(d).__name__, "a mapping", where=w)
        for key in ("id", "target", "partner"):
            check_name(key, d.get(key), w)
        if d.get("emotion") not in EMOTIONS or not isinstance(d.get("interaction"), str):
            raise InvalidInput("emotion/interaction", (d.get("emotion"), d.get("interaction")),
                               f"one of {EMOTIONS} and an interaction name", where=w)
        pose = d.get("partner_pose")
        if not (isinstance(pose, list) and len(pose) == 3
                and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in pose)):
            raise InvalidInput("partner_pose", pose, "[x, y, yaw] finite metres and radians", where=w)


class Library:
    """Read access to a built library; validates the manifest on open."""

    def __init__(self, root: Path = DEFAULT_DIR) -> None:
        self.root = Path(root)
        path = self.root / "manifest.json"
        if not path.is_file():
            raise InvalidInput("motion library", str(self.root), "a built library (run `affectsim motions build`)")
        self.manifest = read_json(path, MAX_MANIFEST_BYTES, "manifest.json")
        if not isinstance(self.manifest, dict) or self.manifest.get("format") != LIBRARY_FORMAT:
            found = self.manifest.get("format") if isinstance(self.manifest, dict) else type(self.manifest).__name__
            raise InvalidInput("manifest.format", found, repr(LIBRARY_FORMAT), where=str(path))
        clips = self.manifest.get("clips")
        if not isinstance(clips, list):
            raise InvalidInput("manifest.clips", type(clips).__name__, "a list of clip entries", where=str(path))
        self.entries = {}
        root = self.root.resolve()
        for i, e in enumerate(clips):
            w = f"{path}: clips[{i}]"
            if not isinstance(e, dict):
                raise InvalidInput("entry", type(e).__name__, "a mapping", where=w)
            check_name("id", e.get("id"), w)
            f = e.get("file")
            if not isinstance(f, str) or not (root / f).resolve().is_relative_to(root):
                raise InvalidInput("file", f, f"a path inside {self.root}", where=w)
            if not (isinstance(e.get("sha256"), str) and len(e["sha256"]) == 64):
                raise InvalidInput("sha256", e.get("sha256"), "a SHA-256 hex digest", where=w)
            self.entries[e["id"]] = e
        _check_dyadic(self.manifest.get("dyadic", []), str(path))

    def load(self, mid: str) -> Motion:
        """The clip ``mid``, its file verified against the manifest's SHA-256 (once per process)."""
        if mid not in self.entries:
            raise InvalidInput("motion id", mid, f"an id in {self.root / 'manifest.json'}")
        e = self.entries[mid]
        path = self.root / e["file"]
        key = (str(path.resolve()), e["sha256"])
        if key not in _VERIFIED:
            check_clip_limits(path)  # a 1.5 GB file is refused from its size, not hashed
            try:
                sha = _sha256(path)
            except OSError:
                raise InvalidInput("file", str(path), f"the clip file of motion {mid!r}") from None
            if sha != e["sha256"]:
                raise InvalidInput("sha256", str(path), f"{e['sha256']} from {self.root / 'manifest.json'} (the file "
                                   f"has {sha}: changed or corrupt)")
            _VERIFIED.add(key)
        return load_motion(path)

    def select(self, **where) -> list[dict]:
        return [e for e in self.entries.values() if all(e.get(k) == v for k, v in where.items())]

    def dyadic_placements(self, sequence: str, x: float, y: float, yaw: float, phase: float = 0.0):
        """(target, partner) :class:`HumanPlacement` of a dyadic sequence anchored at (x, y, yaw) in ``map``."""

        seqs = {d["id"]: d for d in self.manifest.get("dyadic", [])}
        if sequence not in seqs:
            raise InvalidInput("dyadic sequence", sequence, f"an id of {self.root / 'manifest.json'}")
        d = seqs[sequence]
        px, py, pyaw = d["partner_pose"]
        c, s = math.cos(yaw), math.sin(yaw)
        target = HumanPlacement(d["target"], x, y, yaw, is_target=True, motion=self.load(d["target"]), phase=phase)
        partner = HumanPlacement(d["partner"], x + c * px - s * py, y + s * px + c * py, yaw + pyaw,
                                 is_target=False, motion=self.load(d["partner"]), phase=phase)
        return target, partner


def add_motions(root: Path, motions: list[Motion], family: str = "imported") -> dict:
    """Add validated clips to a built library; the manifest is replaced atomically after all clips are written.

    All-or-nothing: clips are validated before anything is written, and a failure while
    writing removes the clips this call wrote.
    """
    lib = Library(root)
    for m in motions:
        m.validate()
        if m.id in lib.entries:
            raise InvalidInput("motion id", m.id, "an id not yet in the library", where=str(root))
    written: list[Path] = []
    try:
        entries = list(lib.manifest["clips"])
        for m in motions:
            rel = f"clips/{family}/{m.id}.npz"
            save_motion(m, root / rel)
            written.append(root / rel)
            entries.append({"id": m.id, "file": rel, "family": family, "action": m.action, "emotion": m.emotion,
                            "performer": m.performer, "take": m.take, "group": m.performer,
                            "duration": round(m.duration, 4), "frames": m.frames, "intensity": m.intensity,
                            **_labels(m), "sha256": _sha256(root / rel)})
        manifest = dict(lib.manifest, clips=entries, counts=_counts(entries))
        fd, tmp = tempfile.mkstemp(dir=root, suffix=".json.tmp")
        with os.fdopen(fd, "w") as fh:
            json.dump(manifest, fh, indent=1)
        os.chmod(tmp, 0o644)
        os.replace(tmp, root / "manifest.json")
    except BaseException:
        for p in written:
            p.unlink(missing_ok=True)
        raise
    return manifest
