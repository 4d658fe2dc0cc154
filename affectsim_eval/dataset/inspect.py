"""Dataset validation, statistics, episode rendering and counterfactual re-observation.

Validation (docs/protocol.md §3), every episode: scene and motion references resolve, ids
unique, metadata consistent with the motion library, robot start navigable, motion-specific
checks (support height and position, door next to the knocking hand, free floor along walks),
the intended challenge realised (re-measured by ray casts from the stored start),
group-disjoint splits (performer / source performance / sequence), every target emotion in every
split and family with at most :data:`MAX_CLASS_RATIO` times the episodes of the rarest, a dyadic
context (interaction, partner emotion, distance) that does not give the target's emotion away
(:mod:`~affectsim_eval.dataset.context`), and nothing a policy or a recognizer gets besides the
sensors (ids included), nor an evolving clip's scenario, that predicts the label
(:mod:`~affectsim_eval.dataset.leakage`).
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter, defaultdict
from dataclasses import replace
from multiprocessing import get_context
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from affectsim_bridge.backends.base import HumanPlacement, check_people
from affectsim_bridge.content.library import DEFAULT_DIR as MOTIONS_DIR
from affectsim_bridge.content.library import Library
from affectsim_bridge.world.scene import load_scene
from affectsim_bridge.content.scene_generator import SCENES_DIR, read_scene_library
from affectsim_core.camera import CameraIntrinsics
from affectsim_core.contact_sheet import map_image, save_png
from affectsim_core.episode import Episode
from affectsim_core.errors import InvalidInput
from affectsim_core.geometry import Transform, look_at_rotation
from affectsim_core.protocol import EMOTIONS, SPLITS
from affectsim_core.workers import ignore_interrupts
from affectsim_eval.dataset.composer import SceneContext, realised
from affectsim_eval.dataset.context import MAX_CONTEXT_F1, context_shortcut
from affectsim_eval.dataset.episodes import DATASET_DIR, load_split, read_manifest
from affectsim_eval.dataset.leakage import leak_problems, policy_fields_leak, scenario_leak
from affectsim_eval.episode.passive import placements

#: Initial-view measures shown by ``dataset stats`` (composer.py defines them), with column titles.
STATS = {"initial_distance": "distance m", "relative_orientation": "rel.orient deg", "visible_fraction": "visible",
         "geodesic": "geodesic m", "rear_frames": "rear frames", "visible_frames": "seen frames",
         "detour_ratio": "detour ratio", "occluded_frames": "occluded frames", "min_distance": "least dist m"}
_SCALE = {"relative_orientation": 180 / math.pi}
MAX_CLASS_RATIO = 1.25  # episodes of the most frequent emotion over the rarest, per split and family

_W: dict = {}


def _init(motions: str, scenes_dir: str = str(SCENES_DIR)) -> None:
    ignore_interrupts()
    _W["lib"] = Library(Path(motions))
    _W["scenes_dir"] = Path(scenes_dir)
    _W["cache"] = {}


def _placements(ep: Episode) -> list[HumanPlacement]:
    cache = _W["cache"]

    def load(mid: str):
        if mid not in cache:
            cache[mid] = _W["lib"].load(mid)
        return cache[mid]

    return placements(ep, load)


def check_episode_in_scene(ctx: SceneContext, ep: Episode) -> list[str]:
    """Problems of one episode in its scene (empty: valid)."""
    problems = []
    robot = ep.start
    if not ctx.nav.is_navigable(np.array([robot.x, robot.y]))[0]:
        problems.append("start_not_navigable")
    people = _placements(ep)
    target = next(p for p in people if p.is_target)
    m = target.motion
    if m.emotion != ep.emotion:
        problems.append("label_mismatch")
    if (ep.family == "evolving") != (len(m.segments) > 1):  # an evolving episode, and only one, has a changing clip
        problems.append("evolving_clip_mismatch")
    elif ep.family == "evolving" and target.phase != 0.0:  # it plays once from the episode's start
        problems.append("evolving_phase_not_zero")
    place = ep.placement
    if m.action in ("seated", "sit_down"):
        sups = {s.furniture_id: s for s in ctx.scene.supports()}
        s = sups.get(place.get("support"))
        if s is None or abs(s.height - m.provenance.get("seat_height", 0.45)) > 0.06 or \
                math.hypot(target.x - s.x, target.y - s.y) > s.half_length + 1e-6:
            problems.append("support_alignment")
    elif m.action == "knock":
        if place.get("door") not in {d.id for d in ctx.scene.doors()}:
            problems.append("door_missing")
    elif not all(ctx.footprint_free(p) for p in people):
        problems.append("path_not_free")
    try:
        check_people(ctx.nav, ctx.scene.id, robot, tuple(people))
    except InvalidInput:
        problems.append("cast_refused_by_load_world")
    me = ctx.measure(robot, target, 0.0, detour=ep.challenge == "obstacle_detour")
    if not realised(ep.challenge, me):
        problems.append(f"challenge_not_realised:{ep.challenge or 'initially_visible'}")
    return problems


def _validate_scene(args: tuple[str, list[Episode]]) -> list[tuple[str, str]]:
    """(episode id, problem) for every problem of one scene's episodes."""
    scene_id, eps = args
    ctx = SceneContext(load_scene(scene_id, _W["scenes_dir"]))
    out = []
    try:
        for ep in eps:
            out += [(ep.episode_id, p) for p in check_episode_in_scene(ctx, ep)]
    finally:
        ctx.close()
    return out


def validate_dataset(root: Path = DATASET_DIR, motions: Path = MOTIONS_DIR, scenes_dir: Path = SCENES_DIR,
                     workers: int = 2, log=print) -> dict:
    lib = Library(motions)
    scene_ids = {s["id"] for s in read_scene_library(scenes_dir)["scenes"]}
    splits = {s: load_split(s, root, scene_ids, set(lib.entries)) for s in SPLITS}
    problems: Counter = Counter()
    examples: dict = {}
    seen: set = set()
    for s, eps in splits.items():
        for ep in eps:
            if ep.episode_id in seen:
                problems["duplicate_id"] += 1
            seen.add(ep.episode_id)
    shortcut = context_shortcut([e for eps in splits.values() for e in eps], lib)
    leaks = {"fields": policy_fields_leak(splits), "scenario": scenario_leak(splits, lib)}
    if read_manifest(root).get("scale", 1.0) >= 1.0:  # a scaled-down build has too few episodes per split
        found = {**balance_problems(splits, shortcut), **leak_problems(leaks["fields"], leaks["scenario"])}
        for why, example in found.items():
            problems[why] += 1
            examples[why] = example
    groups = {s: {(e.family, e.group) for e in eps} for s, eps in splits.items()}
    for a in SPLITS:
        for b in SPLITS:
            if a < b and groups[a] & groups[b]:
                problems["groups_shared_between_splits"] += len(groups[a] & groups[b])
    by_scene: dict = defaultdict(list)
    for eps in splits.values():
        for ep in eps:
            by_scene[ep.scene_id].append(ep)
    with get_context("spawn").Pool(workers, initializer=_init, initargs=(str(motions), str(scenes_dir))) as pool:
        for k, found in enumerate(pool.imap_unordered(_validate_scene, sorted(by_scene.items()))):
            for eid, why in found:
                problems[why] += 1
                examples.setdefault(why, eid)
            if (k + 1) % 10 == 0:
                log(f"[validate] {k + 1}/{len(by_scene)} scenes")
    total = sum(len(e) for e in splits.values())
    return {"episodes": total, "problems": dict(problems), "examples": examples, "dyadic_context": shortcut,
            "leakage": leaks, "overlap": performer_overlap(splits, lib), "counts": {s: dict(Counter(e.family for e in eps)) for s, eps in splits.items()},
            "classes": {s: {fam: dict(sorted(Counter(e.emotion for e in eps if e.family == fam).items()))
                            for fam in sorted({e.family for e in eps})} for s, eps in splits.items()}}


def balance_problems(splits: dict[str, list[Episode]], shortcut: dict) -> dict[str, str]:
    """Problem -> example: a split and family without some target emotion or with more than
    :data:`MAX_CLASS_RATIO` times the episodes of its rarest emotion for its most frequent, or a dyadic
    context (``shortcut``, from :func:`~affectsim_eval.dataset.context.context_shortcut`) that predicts it."""
    out = {}
    for s, eps in splits.items():
        for fam in sorted({e.family for e in eps}):
            counts = Counter(e.emotion for e in eps if e.family == fam)
            missing = set(EMOTIONS) - set(counts)
            if missing:
                out[f"split_missing_emotion:{s}:{fam}"] = ", ".join(sorted(missing))
            elif max(counts.values()) > MAX_CLASS_RATIO * min(counts.values()):
                out[f"classes_unbalanced:{s}:{fam}"] = ", ".join(f"{e} {counts[e]}" for e in EMOTIONS)
    if shortcut["macro_f1"] is not None and shortcut["macro_f1"] > MAX_CONTEXT_F1:
        out["dyadic_context_predicts_label"] = (f"context-only Macro-F1 {shortcut['macro_f1']:.2f} > {MAX_CONTEXT_F1}"
                                                " (leave one sequence out)")
    return out


def _performer(e: Episode, lib: Library) -> str:
    return lib.entries[e.target.motion_id]["performer"]


def twinned(train: list[Episode], held: list[Episode], lib: Library) -> set[str]:
    """Ids of the ``held`` episodes whose target clip has a twin among ``train``'s: the same performer,
    action, scenario and emotion in another take (the observation-controlled split is by source
    performance, so a performance's other take can be in train)."""
    def key(e: Episode) -> tuple:
        m = lib.entries[e.target.motion_id]
        return m["performer"], m["action"], m.get("scenario"), m["emotion"]

    seen: dict[tuple, set[str]] = {}
    for e in train:
        seen.setdefault(key(e), set()).add(e.target.motion_id)
    return {e.episode_id for e in held if seen.get(key(e), set()) - {e.target.motion_id}}


def performer_overlap(splits: dict[str, list[Episode]], lib: Library) -> dict[str, dict[str, int]]:
    """Family -> ``test`` episodes, those whose target performer also performs in train
    (``performer_in_train``), and those whose clip has a twin in train (``twinned``, :func:`twinned`).
    Splits are group-disjoint, not always performer-disjoint: observation-controlled splits are by
    source performance, dyadic ones by sequence."""
    out = {}
    for fam in sorted({e.family for eps in splits.values() for e in eps}):
        train = [e for e in splits.get("train", []) if e.family == fam]
        test = [e for e in splits.get("test", []) if e.family == fam]
        performers = {_performer(e, lib) for e in train}
        out[fam] = {"test": len(test), "performer_in_train": sum(_performer(e, lib) in performers for e in test),
                    "twinned": len(twinned(train, test, lib))}
    return out


def dataset_stats(root: Path = DATASET_DIR, out_png: Path | None = None, log=print) -> dict:
    """Class balance and distributions of the initial-view measures per family and split."""
    splits = {s: load_split(s, root) for s in SPLITS}
    table = {}
    for s, eps in splits.items():  # one row per family, and per challenge of the observation-controlled one
        for fam, ch in sorted({(e.family, e.challenge) for e in eps}, key=lambda fc: (fc[0], fc[1] or "")):
            sel = [e for e in eps if e.family == fam and e.challenge == ch]
            meas = {k: np.array([e.measures.get(k) for e in sel], float) for k in STATS}
            table[(s, fam if ch is None else f"{fam}:{ch}")] = {
                "episodes": len(sel), "classes": dict(Counter(e.emotion for e in sel)),
                **{k: tuple(float(np.nanpercentile(v, q)) if np.isfinite(v).any() else math.nan for q in (50, 10, 90))
                   for k, v in meas.items()}}
    log(f"{'split':5s} {'family[:challenge]':40s} {'n':>6s}  classes (a/f/h/n/s)  " + "  ".join(
        f"{STATS[k]:>17s}" for k in STATS) + "   (median [p10, p90])")
    for (s, fam), row in table.items():
        c = row["classes"]
        cls = "/".join(str(c.get(e, 0)) for e in EMOTIONS)
        fmt = lambda k: (f"{row[k][0] * _SCALE.get(k, 1):5.2f} [{row[k][1] * _SCALE.get(k, 1):.1f},"  # noqa: E731
                         f"{row[k][2] * _SCALE.get(k, 1):.1f}]").rjust(17)
        log(f"{s:5s} {fam:40s} {row['episodes']:6d}  {cls:20s} " + "  ".join(fmt(k) for k in STATS))
    if out_png is not None:
        keys = ("initial_distance", "relative_orientation", "visible_fraction", "geodesic")
        emotions = EMOTIONS
        fams = sorted({e.family for eps in splits.values() for e in eps})
        from matplotlib.figure import Figure  # here: ~0.5 s at import time; no pyplot (no global state, no display)

        fig = Figure(figsize=(22, 3.6 * len(SPLITS)))
        axes = fig.subplots(len(SPLITS), 5, squeeze=False)
        for row, split in zip(axes, SPLITS):  # one row per split, one line per family
            eps = splits[split]
            for ax, k in zip(row, keys):
                scale = 180 / math.pi if k == "relative_orientation" else 1.0
                for fam in fams:
                    v = np.array([e.measures[k] for e in eps if e.family == fam], float) * scale
                    v = v[np.isfinite(v)]
                    if len(v):
                        ax.hist(v, bins=30, histtype="step", density=True, label=f"{fam} ({len(v)})")
                ax.set_title(f"{split}: {k}{' (deg)' if scale != 1.0 else ''}", fontsize=9)
            row[0].legend(fontsize=7)
            width = 0.8 / max(1, len(fams))
            for i, fam in enumerate(fams):
                c = Counter(e.emotion for e in eps if e.family == fam)
                row[4].bar(np.arange(len(emotions)) + i * width, [c[e] for e in emotions], width, label=fam)
            row[4].set_xticks(np.arange(len(emotions)) + 0.4 - width / 2, emotions, fontsize=7)
            row[4].set_title(f"{split}: class balance per family", fontsize=9)
        out_png.parent.mkdir(parents=True, exist_ok=True)
        fig.tight_layout()
        fig.savefig(out_png, dpi=80)
        log(f"[stats] {out_png}")
    return {f"{s}/{fam}": row for (s, fam), row in table.items()}


def find_episode(episode_id: str, root: Path = DATASET_DIR) -> Episode:
    split = episode_id.split("_", 1)[0]
    if split not in SPLITS:
        raise InvalidInput("episode id", episode_id, "an id starting with train_, val_ or test_")
    for ep in load_split(split, root):
        if ep.episode_id == episode_id:
            return ep
    raise InvalidInput("episode id", episode_id, f"an episode of the {split} split")


def counterfactual(ep: Episode, emotion: str, lib: Library) -> Episode:
    """The same episode (scene, placement, robot start, phase) with the target performing ``emotion``.

    The swapped clip has the same action type and, where the library has one, the same performer,
    scenario and take; the initial-view measures are recomputed by :func:`show_episode` callers.
    """
    if emotion not in EMOTIONS:
        raise InvalidInput("emotion", emotion, f"one of {', '.join(EMOTIONS)}")
    src = lib.entries[ep.target.motion_id]
    cands = [e for e in lib.manifest["clips"] if e["emotion"] == emotion and e["action"] == src["action"]
             and e["family"] == src["family"]]
    if not cands:
        raise InvalidInput("emotion", emotion, f"a clip of action {src['action']!r} in the motion library")
    key = lambda e: (e["performer"] != src["performer"], e["take"] != src["take"],  # noqa: E731
                     e["id"].split("_")[2:3] != src["id"].split("_")[2:3])
    new = min(cands, key=key)
    duration = lib.load(new["id"]).duration
    humans = tuple(replace(h, motion_id=new["id"], phase=round(h.phase % duration, 4)) if h.role == "target" else h
                   for h in ep.humans)
    tag = hashlib.sha256(f"{ep.episode_id}|{emotion}".encode()).hexdigest()[:6]  # opaque: no label in an id
    return replace(ep, humans=humans, emotion=emotion, episode_id=f"{ep.episode_id}_cf{tag}",
                   counterfactual_of=ep.episode_id)


def show_episode(ep: Episode, out: Path, motions: Path = MOTIONS_DIR, scenes_dir: Path = SCENES_DIR) -> Path:
    """PNG: the robot's initial head-camera view, the room monitor's view and a top-down map."""

    _init(str(motions), str(scenes_dir))
    scene = load_scene(ep.scene_id, scenes_dir)
    ctx = SceneContext(scene)
    people = _placements(ep)
    robot = ep.start
    b = ctx.backend
    b.load(scene, robot, tuple(people))
    head = b.render_head_camera().rgb
    room = next((r for r in scene.rooms if r.id == ep.monitor_room), scene.rooms[0])
    mon = room.monitor
    pos = np.array(mon.position)
    monitor = b.render_camera(Transform(look_at_rotation(pos, np.array(mon.look_at)), pos),
                              CameraIntrinsics.from_vfov(640, 480, mon.vfov)).rgb
    me = ctx.measure(robot, next(p for p in people if p.is_target), 0.0)
    grid, origin = ctx.nav.occupancy_grid(0.05)
    mp = map_image(grid, origin, 0.05, np.array([[robot.x, robot.y]]), scale=3,
                   labels=[(p.id, p.x, p.y) for p in people])
    mp = mp.resize((int(mp.width * 480 / mp.height), 480))
    ctx.close()
    sheet = Image.new("RGB", (1280 + mp.width, 500), (255, 255, 255))
    sheet.paste(Image.fromarray(head), (0, 20))
    sheet.paste(Image.fromarray(monitor), (640, 20))
    sheet.paste(mp, (1280, 20))
    d = ImageDraw.Draw(sheet)
    d.text((4, 4), f"{ep.episode_id} {ep.scene_id} {ep.family} {ep.challenge or ''} {ep.emotion} | "
                   f"distance {me.initial_distance:.2f} m, visible {me.visible_fraction:.2f}, "
                   f"rel. orientation {math.degrees(me.relative_orientation):.0f} deg", fill=(0, 0, 0))
    d.text((644, 4), f"monitor: {room.id}", fill=(0, 0, 0))
    save_png(sheet, out)
    return out


__all__ = ["validate_dataset", "dataset_stats", "show_episode", "counterfactual", "find_episode", "replace"]
