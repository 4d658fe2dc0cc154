"""Why does P-Mon score what it does? Per family, from a run's results store and its data directory:
the monitor's room, height, tilt and distance to the target, the target's pelvis inside the monitor's
frame (at the head camera's field of view, P-Mon's lens before 19d16e0, and at the monitor's own,
which P-Mon renders with since), the mean visible-body fraction of the P-Mon and P-Init clips, and the group Macro-F1 of both
settings on all episodes and on those where both clips show at least half the body.

With ``--rerender`` it also re-renders every ok episode's P-Mon clip in this process, through the
evaluator's own functions (:func:`~affectsim_eval.episode.passive.p_mon_views`, the in-process world's
``render`` and ``recognize``), at the run's clip times, three ways:

- ``as-is``: the benchmark's P-Mon (the monitor's position, aim and 65 deg lens); its predictions are
  compared with the run's, to show that this path is the benchmark's;
- ``head lens``: the monitor's position and aim with the head camera's field of view (46.8 deg);
- ``head height``: the monitor's lens and its horizontal position, lowered to the robot's head-camera
  height (the optical frame's height at the episode's start tilt, as P-Ref's planner uses) and aimed
  at the monitor's own look-at point. At that height the camera can stand inside a plant, shelf or
  cabinet by the monitor's corner (it renders that furniture's inside, or through it, and the visibility
  rays start in it): those episodes are named and the table is repeated on the others.

The trained recognizers (:data:`RERENDERED`) classify each clip; it prints their Macro-F1 with P-Init
and P-Mon from the run's records, the paired differences with 95 % bootstrap intervals over the
episodes (seeded), the person's height in the 224-px clip (median over episodes of each clip's
median vertical extent of the projected body points, head top to heels) and the visible-body
fractions. Diagnostic only: the benchmark's P-Mon keeps the monitor's lens.

    .venv/bin/python tools/diagnose_p_mon.py results/bench
    .venv/bin/python tools/diagnose_p_mon.py results/bench --rerender [--episodes N]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from affectsim_bridge.backends import BACKENDS
from affectsim_bridge.backends.base import SimulatorBackend
from affectsim_bridge.views import View
from affectsim_bridge.world.scene import Scene, load_scene
from affectsim_core.camera import FETCH_HEAD_CAMERA, FETCH_HEAD_VFOV_DEG, CameraIntrinsics
from affectsim_core.classification import macro_f1
from affectsim_core.clips import clip_times, sample_indices
from affectsim_core.episode import Episode
from affectsim_core.errors import AffectSimError
from affectsim_core.geometry import Transform, look_at_rotation
from affectsim_core.protocol import CLIP_SIZE
from affectsim_core.record import EpisodeRecord
from affectsim_core.resampling import bootstrap_interval
from affectsim_core.ros.topics import OPTICAL_FRAME
from affectsim_eval.dataset.episodes import load_split
from affectsim_eval.episode.passive import body_track, monitor_room, p_mon_views, placements, visible_fraction
from affectsim_eval.episode.worlds import InProcessEvalWorld
from affectsim_eval.run.config import DATA_DIR, EvalData
from affectsim_eval.run.report import REFERENCES
from affectsim_eval.run.store import ResultsStore
from affectsim_eval.scoring.metrics import compute_all
from affectsim_perception.recognizers import RECOGNIZERS

PELVIS_HEIGHT_M = 0.9


def _in_frame(k: CameraIntrinsics, local: np.ndarray) -> bool:
    if local[2] <= 0:
        return False
    u, v = k.fx * local[0] / local[2] + k.cx, k.fy * local[1] / local[2] + k.cy
    return 0 <= u < k.width and 0 <= v < k.height


def _group(records: list[EpisodeRecord], setting: str) -> float:
    f1 = compute_all(records, ["macro_f1"])["macro_f1"]
    return float(np.mean([f1[n][setting] for n in records[0].recognizers if n not in REFERENCES]))


# ------------------------------------------------------------------------------ the re-rendered variants
RERENDERED = ("pose-temporal", "rgb-clip", "committee")  # the trained recognizers (the references need no frames)
VARIANTS = ("as_is", "head_lens", "head_height")
VARIANT_NAMES = {"as_is": "P-Mon re-rendered", "head_lens": "P-Mon, head lens", "head_height": "P-Mon, head height"}


@dataclass(frozen=True)
class Rerendered:
    """One episode's re-rendered P-Mon variants: per variant the recognizers' predictions, the camera
    poses (8, 4, 4; optical frames in map), the person's median height in the clip (px of 224), the
    visible-body fraction and (when kept) the clip (8, 224, 224, 3); the person's median height in the
    P-Init clip; the head-camera height used (m); the furniture it stands in at the monitor's (x, y)."""

    predictions: dict[str, dict]
    poses: dict[str, np.ndarray]
    person_px: dict[str, float]
    visible: dict[str, float]
    p_init_px: float
    head_z: float
    inside: str  # the furniture (type) the head-height camera stands in, "" when it stands free
    frames: dict[str, np.ndarray]


def variant_views(ep: Episode, backend: SimulatorBackend, scene: Scene, times: np.ndarray) -> dict[str, list[View]]:
    """P-Mon's views at ``times`` (``backend`` loaded with ``ep``) as the evaluator plans them, and the two
    diagnostic variants: the head camera's lens at the monitor's pose, and the monitor's lens at the
    monitor's (x, y) lowered to the head camera's height, aimed at the monitor's look-at point."""
    room_id = monitor_room(ep, scene)
    as_is = p_mon_views(scene, ep.start, backend.robot.head_tilt, room_id, times)
    aim = np.asarray(next(r for r in scene.rooms if r.id == room_id).monitor.look_at, float)
    mon = as_is[0].camera.translation
    low = np.array([mon[0], mon[1], head_height(backend)])
    low_cam = Transform(look_at_rotation(low, aim), low)
    return {"as_is": as_is,
            "head_lens": [replace(v, vfov=math.radians(FETCH_HEAD_VFOV_DEG)) for v in as_is],
            "head_height": [replace(v, camera=low_cam) for v in as_is]}


def head_height(backend: SimulatorBackend) -> float:
    """The head camera's optical-frame height above the floor (m) at the robot's current head tilt."""
    return float(backend.link_transforms()[OPTICAL_FRAME].translation[2])


def furniture_at(scene: Scene, point: np.ndarray) -> str:
    """The type of the first piece of furniture of ``scene`` whose box holds ``point`` (x, y, z; map),
    "" if none: a camera there renders the furniture's inside or looks through it, and the visibility
    rays start inside it."""
    for f in scene.furniture:
        fp = f.footprint
        c, s = math.cos(fp.yaw), math.sin(fp.yaw)
        dx, dy = point[0] - fp.cx, point[1] - fp.cy
        if abs(c * dx + s * dy) <= fp.hx and abs(-s * dx + c * dy) <= fp.hy and point[2] <= f.size[2]:
            return f.type
    return ""


def person_px(points: np.ndarray, poses: np.ndarray, k: CameraIntrinsics, size: int = CLIP_SIZE) -> float:
    """Median over frames of the vertical extent (px of the ``size``-px clip, unclipped) of the body points
    (N, P, 3; map) seen from the optical frames ``poses`` (N, 4, 4) with intrinsics ``k``; frames where a
    point is behind the camera do not count (NaN if none is left)."""
    ext = []
    for pts, cam in zip(points, poses):
        local = (pts - cam[:3, 3]) @ cam[:3, :3]
        if (local[:, 2] > 0.05).all():
            v = k.fy * local[:, 1] / local[:, 2] + k.cy
            ext.append((v.max() - v.min()) * size / k.height)
    return float(np.median(ext)) if ext else math.nan


def rerender_episode(ep: Episode, world: InProcessEvalWorld, data: EvalData, humans: str = "scripted",
                     keep_frames: bool = False) -> Rerendered:
    """The P-Mon variants of ``ep`` at the evaluator's clip times, rendered and recognised by ``world``
    (``keep_frames``: with the clips)."""
    people = placements(ep, data.load_motion)
    full = clip_times(next(p for p in people if p.is_target).motion.duration)
    times = full[sample_indices(len(full))]
    scene = data.scene(ep.scene_id)
    b = world.backend
    b.load(scene, ep.start, tuple(people), humans_mode=humans, reaction_seed=ep.seed)
    points = body_track(b, times).points
    p_init = np.repeat(b.head_camera_pose().matrix()[None], len(times), 0)  # P-Init: the camera at the start
    variants = variant_views(ep, b, scene, times)
    inside = furniture_at(scene, variants["head_height"][0].camera.translation)
    out = Rerendered({}, {}, {}, {}, person_px(points, p_init, b.head_intrinsics), head_height(b), inside, {})
    for name, views in variants.items():
        frames, poses = world.render(views)
        k = views[0].intrinsics(b.head_intrinsics)
        out.predictions[name], out.poses[name] = world.recognize(frames), poses
        if keep_frames:
            out.frames[name] = frames
        out.person_px[name] = person_px(points, poses, k)
        out.visible[name] = visible_fraction(b, times, poses, k)
    return out


def _f1(y: np.ndarray, pred: dict[str, dict[str, np.ndarray]], setting: str, names: list[str], k: np.ndarray) -> float:
    return float(np.mean([macro_f1(y[k], pred[setting][n][k]) for n in names]))


COLUMNS = (("p_init", "P-Init"), ("p_mon", "P-Mon"), ("head_lens", "head lens"), ("head_height", "head height"))
DIFFERENCES = (("head_lens", "p_mon", "head lens - P-Mon"), ("head_height", "p_mon", "head height - P-Mon"),
               ("p_init", "head_lens", "P-Init - head lens"))


def _table(y: np.ndarray, pred: dict, names: list[str], idx: np.ndarray) -> list[str]:
    """Macro-F1 (%) per recognizer and group on the episodes ``idx``, and the paired differences (points)
    with their 95 % bootstrap intervals over those episodes (seeded: the same table every time)."""
    lines = ["| recognizer | " + " | ".join(c for _, c in COLUMNS) + " | " + " | ".join(d for *_, d in DIFFERENCES) + " |",
             "|---|" + "---:|" * (len(COLUMNS) + len(DIFFERENCES))]
    for label, group in [(f"`{n}`", [n]) for n in names] + [("group (trained)", names)]:
        row = [f"{100 * _f1(y, pred, s, group, idx):.1f}" for s, _ in COLUMNS]
        for a, b, _ in DIFFERENCES:
            row.append(bootstrap_interval(len(idx), lambda k, a=a, b=b, g=group: _f1(y, pred, a, g, idx[k])
                                          - _f1(y, pred, b, g, idx[k])).text(100))
        lines.append(f"| {label} | " + " | ".join(row) + " |")
    return lines


def rerender_report(records: list[EpisodeRecord], got: dict[str, Rerendered], names: list[str]) -> list[str]:
    """The report's lines: agreement of the as-is re-render with the run, Macro-F1 per recognizer and
    group with the paired differences and their 95 % bootstrap intervals over the episodes (all, and
    those where the head-height camera stands free of furniture), per family, person heights and
    visible-body fractions."""
    recs = [r for r in records if r.episode_id in got]
    y = np.array([r.label for r in recs], object)
    pred = {s: {n: np.array([r.predictions[n][s] for r in recs], object) for n in names} for s in ("p_init", "p_mon")}
    for v in VARIANTS:
        pred[v] = {n: np.array([got[r.episode_id].predictions[v][n].label for r in recs], object) for n in names}
    same = [pred["as_is"][n][i] == pred["p_mon"][n][i] for n in names for i in range(len(recs))]
    dprob = max(float(np.max(np.abs(np.asarray(got[r.episode_id].predictions["as_is"][n].probs)
                                    - np.asarray(r.probs[n]["p_mon"])))) for n in names for r in recs)
    lines = [f"re-rendered P-Mon as-is vs the run's P-Mon: {100 * np.mean(same):.1f} % of "
             f"{len(same)} (episode, recognizer) labels equal, largest probability difference {dprob:.2g}"]
    every = np.arange(len(recs))
    lines += [f"Macro-F1 (%), all {len(recs)} episodes; differences in points, paired 95 % bootstrap intervals "
              "over the episodes:"] + _table(y, pred, names, every)
    inside = defaultdict(int)
    for r in recs:
        inside[got[r.episode_id].inside] += 1
    free = np.array([i for i, r in enumerate(recs) if not got[r.episode_id].inside])
    if 0 < len(free) < len(recs):
        what = ", ".join(f"{t} {n}" for t, n in sorted(inside.items()) if t)
        lines += [f"the head-height camera stands inside furniture in {len(recs) - len(free)} episodes ({what}); "
                  f"the {len(free)} where it stands free:"] + _table(y, pred, names, free)
    fam = defaultdict(list)
    for i, r in enumerate(recs):
        fam[r.family].append(i)
    for f, idx in sorted(fam.items()):
        k = np.array(idx)
        lines.append(f"{f} ({len(k)}): group " + ", ".join(f"{c} {100 * _f1(y, pred, s, names, k):.1f}"
                                                         for s, c in COLUMNS))
    px = {v: [got[r.episode_id].person_px[v] for r in recs] for v in VARIANTS}
    vis = {v: [got[r.episode_id].visible[v] for r in recs] for v in VARIANTS}
    lines.append("person's height in the 224-px clip (median over episodes of each clip's median; "
                 "body points head top to heels): P-Init "
                 f"{np.nanmedian([got[r.episode_id].p_init_px for r in recs]):.0f} px, "
                 + ", ".join(f"{VARIANT_NAMES[v]} {np.nanmedian(px[v]):.0f} px" for v in VARIANTS))
    lines.append("mean visible-body fraction: P-Init "
                 f"{np.mean([r.visible['p_init'] for r in recs]):.2f}, run's P-Mon "
                 f"{np.mean([r.visible['p_mon'] for r in recs]):.2f}, "
                 + ", ".join(f"{VARIANT_NAMES[v]} {np.mean(vis[v]):.2f}" for v in VARIANTS)
                 + (f" (head height, camera free of furniture: {np.mean([vis['head_height'][i] for i in free]):.2f})"
                    if 0 < len(free) < len(recs) else ""))
    z = [got[r.episode_id].head_z for r in recs]
    lines.append(f"head-camera height used for the head-height variant: {np.min(z):.3f}-{np.max(z):.3f} m")
    return lines


def rerender(run: Path, episodes: int = 0,
             log=print) -> tuple[list[EpisodeRecord], dict[str, Rerendered], list[str], float]:
    """Re-render the P-Mon variants of the run's ok episodes (the first ``episodes`` of them, 0 = all, in
    the run's order): their records, the re-renders by episode id, the recognizers re-run and the
    seconds it took; progress goes to ``log``."""
    with ResultsStore.open(run / "results.sqlite") as store:
        meta = store.meta()
        records = [EpisodeRecord.from_dict(r, str(run)) for r in store.records("ok")]
    cfg = meta["config"]
    data = EvalData(Path(meta.get("data_dir", DATA_DIR)))
    by_id = {e.episode_id: e for e in load_split(cfg["split"], data.root / "episodes")}
    order = {e: i for i, e in enumerate(meta.get("episode_ids", []))}
    records = sorted(records, key=lambda r: (order.get(r.episode_id, len(order)), r.episode_id))
    records = records[:episodes] if episodes else records
    names = [n for n in RERENDERED if n in records[0].predictions]
    if not names:
        raise SystemExit(f"diagnose_p_mon: error: the run has none of the recognizers {', '.join(RERENDERED)}")
    os.environ.setdefault("MUJOCO_GL", "egl")
    recognizers = {n: RECOGNIZERS.create(n) for n in names}
    world = InProcessEvalWorld(BACKENDS.create(cfg.get("backend", "mujoco")), None, recognizers)
    got: dict[str, Rerendered] = {}
    t0 = time.monotonic()
    try:
        for i, r in enumerate(sorted(records, key=lambda r: (r.scene_id, r.episode_id))):  # one scene loaded at a time
            got[r.episode_id] = rerender_episode(by_id[r.episode_id], world, data, cfg.get("humans", "scripted"))
            log(f"[{i + 1}/{len(records)}] {r.episode_id} {time.monotonic() - t0:.0f} s")
    finally:
        for rec in recognizers.values():
            rec.close()
        world.backend.close()
    return records, got, names, time.monotonic() - t0


def main(run: Path) -> None:
    with ResultsStore.open(run / "results.sqlite") as store:
        meta = store.meta()
        records = [EpisodeRecord.from_dict(r, str(run)) for r in store.records("ok")]
    data = Path(meta.get("data_dir", DATA_DIR))
    episodes = {e.episode_id: e for e in load_split(meta["config"]["split"], data / "episodes")}
    rows: dict[str, list] = defaultdict(list)
    for r in records:
        ep = episodes[r.episode_id]
        scene = load_scene(ep.scene_id, data / "scenes")
        t = next(h for h in ep.humans if h.role == "target")
        here = scene.room_at((t.x, t.y))
        room = next(x for x in scene.rooms if x.id == (ep.monitor_room or here.id))
        mon, aim = np.asarray(room.monitor.position, float), np.asarray(room.monitor.look_at, float)
        local = (np.array([t.x, t.y, PELVIS_HEIGHT_M]) - mon) @ look_at_rotation(mon, aim)
        declared = CameraIntrinsics.from_vfov(FETCH_HEAD_CAMERA.width, FETCH_HEAD_CAMERA.height, room.monitor.vfov)
        tilt = math.degrees(math.atan2(mon[2] - aim[2], float(np.linalg.norm(aim[:2] - mon[:2]))))
        rows[ep.family].append((r.visible["p_mon"], r.visible["p_init"], float(np.linalg.norm(local)),
                                _in_frame(FETCH_HEAD_CAMERA, local), _in_frame(declared, local),
                                here is not None and here.id == room.id, mon[2], tilt))
    for fam, vals in sorted(rows.items()):
        a = np.array(vals, float)
        print(f"{fam}: {len(a)} episodes; monitor in the target's room {100 * a[:, 5].mean():.0f} %, "
              f"{a[:, 6].mean():.1f} m high, tilted {a[:, 7].mean():.0f} deg down, "
              f"{np.median(a[:, 2]):.1f} m from the pelvis [p10 {np.percentile(a[:, 2], 10):.1f}, "
              f"p90 {np.percentile(a[:, 2], 90):.1f}]; pelvis in frame {100 * a[:, 3].mean():.0f} % "
              f"(declared field of view: {100 * a[:, 4].mean():.0f} %); visible P-Mon {a[:, 0].mean():.2f}, "
              f"P-Init {a[:, 1].mean():.2f}; P-Mon < 0.1 visible in {int((a[:, 0] < 0.1).sum())}")
    both = [r for r in records if r.visible["p_mon"] >= 0.5 and r.visible["p_init"] >= 0.5]
    print(f"group Macro-F1, all {len(records)}: P-Init {100 * _group(records, 'p_init'):.1f}, "
          f"P-Mon {100 * _group(records, 'p_mon'):.1f}")
    if both:
        print(f"group Macro-F1, the {len(both)} where both clips show >= 0.5 of the body: "
              f"P-Init {100 * _group(both, 'p_init'):.1f}, P-Mon {100 * _group(both, 'p_mon'):.1f} "
              f"(visible {np.mean([r.visible['p_init'] for r in both]):.2f} / "
              f"{np.mean([r.visible['p_mon'] for r in both]):.2f})")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", nargs="?", default="results/bench", type=Path, help="a run directory (results.sqlite)")
    ap.add_argument("--rerender", action="store_true", help="also re-render P-Mon with the head lens and at head height")
    ap.add_argument("--episodes", type=int, default=0, help="with --rerender: only the run's first N ok episodes")
    args = ap.parse_args()
    try:
        main(args.run)
        if args.rerender:
            records, got, names, wall = rerender(args.run, args.episodes, lambda s: print(s, file=sys.stderr, flush=True))
            print("\n".join(rerender_report(records, got, names)))
            print(f"re-rendered {len(got)} episodes in {wall:.0f} s")
    except AffectSimError as exc:  # InvalidInput included: one line naming the file, the value and what was expected
        raise SystemExit(f"diagnose_p_mon: error: {exc}") from None
    except KeyError as exc:
        raise SystemExit(f"diagnose_p_mon: error: {exc} is missing from the run's metadata or dataset "
                         "(expected a run of `affectsim eval` or `make bench` on this dataset)") from None
