"""Training clips for the recognizers, rendered from one dataset split under a spread of viewpoints.

For each episode two head-camera viewpoints (seeded by the episode):
- ``reference``: the episode's P-Ref observation (``affectsim_eval.episode.passive.p_ref_clip``: the
  privileged reference observer's camera trajectory that keeps the performer in view), planned
  on the 8 sampled times rather than at full rate (6x cheaper, nearly the same viewpoint), so
  the good views trained on are those the benchmark's reference condition gives;
- ``random``: a static, navigable point 1.2-6 m away facing the performer (+-15 deg), head
  level, the kind of view a robot has at its start (far, rear, partly occluded, cut off).

Each clip is what every recognizer receives in the benchmark: the 8 sampled frames of a clip
of twice the motion's duration from the episode's phase, rendered at 640x480 and resized to
224x224. Stored per clip: the BlazePose pose of the 224x224 frames (8, 33, 6, see
``person_model.clip_pose``), the frames at 64x64 (for ``rgb-clip``), the label and the view's
measures (distance, relative orientation, visible-body fraction).
"""

from __future__ import annotations

import json
import math
import shutil
import time
from multiprocessing import get_context
from pathlib import Path
from typing import Callable

import numpy as np
from PIL import Image

from affectsim_bridge.backends import BACKENDS, DEFAULT_BACKEND
from affectsim_bridge.content.library import DEFAULT_DIR as MOTIONS_DIR
from affectsim_bridge.content.library import Library
from affectsim_bridge.world.scene import load_scene
from affectsim_bridge.content.scene_generator import SCENES_DIR
from affectsim_core.atomic import staged_dir
from affectsim_core.clips import clip_times, resize, sample_indices
from affectsim_core.episode import Episode
from affectsim_core.errors import InvalidInput
from affectsim_core.geometry import Pose2D
from affectsim_core.protocol import EMOTIONS
from affectsim_core.readers import read_json
from affectsim_core.workers import ignore_interrupts
from affectsim_eval.episode.passive import body_track, p_ref_clip, placements
from affectsim_eval.episode.reference import view_quality
from affectsim_perception.person_model import BlazePose, clip_pose

DATA_DIR = Path(__file__).resolve().parents[2] / "data" / "perception"
SMALL = 64  # px, stored frames for rgb-clip
VIEWS = ("reference", "random")
GENERATOR = 3  # bump when the clips change (cached clips of another generator are re-rendered)
MAX_CLIPS_META_BYTES = 256 * 2 ** 20  # a rendered split's clips.json (~300 bytes per clip)
_W: dict = {}


def _init(motions: str, scenes_dir: str) -> None:
    ignore_interrupts()
    _W.update(lib=Library(Path(motions)), scenes_dir=Path(scenes_dir), scene=None, backend=BACKENDS.create(DEFAULT_BACKEND),
              pose=BlazePose(video=True, threads=1), motions={})  # one thread per worker process


def _random_viewpoint(nav, root: np.ndarray, rng: np.random.Generator) -> np.ndarray | None:
    for _ in range(40):
        d, phi = rng.uniform(1.2, 6.0), rng.uniform(-math.pi, math.pi)
        p = root + d * np.array([math.cos(phi), math.sin(phi)])
        if nav.is_navigable(p)[0]:
            return p
    return None


def _render_clip(ep: Episode) -> list[dict]:
    w = _W
    if w["scene"] is None or w["scene"].id != ep.scene_id:
        w["scene"] = load_scene(ep.scene_id, w["scenes_dir"])
        w["motions"].clear()
    lib = w["lib"]

    def load(mid):
        if mid not in w["motions"]:
            w["motions"][mid] = lib.load(mid)
        return w["motions"][mid]

    people = placements(ep, load)
    target = next(p for p in people if p.is_target)
    b = w["backend"]
    b.load(w["scene"], ep.start, tuple(people))
    full = clip_times(target.motion.duration)
    times = full[sample_indices(len(full))]
    track = body_track(b, times)
    rng = np.random.default_rng([int(ep.seed), 7])
    views = []
    try:
        clip, _plan = p_ref_clip(b, times)
        views.append(("reference", clip.frames, clip.camera_poses))
    except RuntimeError:  # no navigable reference viewpoint around this performer
        pass
    base = _random_viewpoint(b.navigable, track.root[0], rng)
    if base is not None:
        centre = track.points[0].mean(0)
        yaw = math.atan2(centre[1] - base[1], centre[0] - base[0]) + rng.uniform(-math.radians(15), math.radians(15))
        b.set_head(tilt=0.0)
        b.set_pose(Pose2D(float(base[0]), float(base[1]), yaw))
        frames, poses = [], []
        for t in times:
            b.set_time(float(t))
            f = b.render_head_camera()
            frames.append(f.rgb)
            poses.append(f.pose.matrix())
        views.append(("random", frames, np.stack(poses)))
    out = []
    for kind, frames, poses in views:
        frames = np.stack([resize(f) for f in frames])
        vis = [view_quality(track.points[n], poses[n], b.head_intrinsics, b.line_of_sight)[0] for n in range(len(times))]
        cam = poses[0][:2, 3]
        rel = math.atan2(cam[1] - track.root[0][1], cam[0] - track.root[0][0]) - float(track.yaw[0])
        out.append({"episode_id": ep.episode_id, "view": kind, "label": EMOTIONS.index(ep.emotion),
                    "family": ep.family, "action": ep.action,
                    "distance": float(np.linalg.norm(cam - track.root[0][:2])),
                    "relative_orientation": abs(math.atan2(math.sin(rel), math.cos(rel))),
                    "visible_fraction": float(np.mean(vis)),
                    "pose": clip_pose(w["pose"], frames),
                    "small": np.stack([np.asarray(Image.fromarray(x).resize((SMALL, SMALL), Image.BILINEAR))
                                       for x in frames])})
    return out


def _parts_dir(out: Path, split: str) -> Path:
    """Where an unfinished render keeps the episodes it has finished (per generator)."""
    return Path(out) / f".{split}-generator{GENERATOR}-parts"


def _meta(clip: dict) -> dict:
    """A rendered clip's row without its arrays (pose, small frames)."""
    return {k: v for k, v in clip.items() if k not in ("pose", "small")}


def _save_part(parts: Path, rows: dict[str, list[dict]]) -> None:
    """One part file of finished episodes (written to a temporary file, then renamed)."""
    parts.mkdir(parents=True, exist_ok=True)
    path = parts / f"part-{len(list(parts.glob('part-*.npz'))):05d}.npz"
    clips = [r for v in rows.values() for r in v]
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, episodes=np.array(list(rows), dtype=str),
             pose=np.array([r["pose"] for r in clips], np.float32).reshape(-1, 8, 33, 6),
             small=np.array([r["small"] for r in clips], np.uint8).reshape(-1, 8, SMALL, SMALL, 3),
             meta=np.array(json.dumps([_meta(r) for r in clips])))
    tmp.replace(path)


def _load_parts(parts: Path) -> dict[str, list[dict]]:
    """The finished episodes' clips (by episode id) of an earlier, interrupted render."""
    out: dict[str, list[dict]] = {}
    for path in sorted(parts.glob("part-*[0-9].npz")):
        with np.load(path) as z:
            out.update({str(e): [] for e in z["episodes"]})
            for r, pose, small in zip(json.loads(str(z["meta"])), z["pose"], z["small"]):
                out[r["episode_id"]].append({**r, "pose": pose, "small": small})
    return out


def render_split(split: str, episodes: list[Episode], out: Path = DATA_DIR, workers: int = 2,
                 motions: Path = MOTIONS_DIR, scenes_dir: Path = SCENES_DIR,
                 reuse: tuple[np.ndarray, np.ndarray, list[dict]] | None = None, part_size: int = 200,
                 log: Callable[[str], None] = print) -> Path:
    """Render the training clips of ``episodes`` into ``out/split`` (replaced atomically), in the
    order of (scene, episode). ``reuse``: clips rendered earlier by this generator (``load_clips``);
    the episodes found there are taken from it instead of being rendered again (a clip depends on
    its episode alone, so the result is the same). Finished episodes are saved in parts of
    ``part_size`` while rendering, so an interrupted render resumes where it stopped."""
    episodes = sorted(episodes, key=lambda e: (e.scene_id, e.episode_id))
    cached: dict[str, list[int]] = {}
    for i, m in enumerate(reuse[2] if reuse is not None else []):
        cached.setdefault(m["episode_id"], []).append(i)
    parts = _parts_dir(out, split)
    rendered = _load_parts(parts)
    todo = [e for e in episodes if e.episode_id not in cached and e.episode_id not in rendered]
    reused = len(episodes) - len(todo)
    t0 = time.monotonic()
    if todo:
        pending: dict[str, list[dict]] = {}
        with get_context("spawn").Pool(workers, initializer=_init, initargs=(str(motions), str(scenes_dir))) as pool:
            for k, (ep, clips) in enumerate(zip(todo, pool.imap(_render_clip, todo, chunksize=4))):
                pending[ep.episode_id] = clips
                if len(pending) == part_size or k + 1 == len(todo):
                    _save_part(parts, pending)
                    rendered.update(pending)
                    pending = {}
                    el = time.monotonic() - t0
                    eta = el / (k + 1) * (len(todo) - k - 1)
                    log(f"[train data] {split}: {k + 1}/{len(todo)} episodes rendered ({reused} reused), "
                        f"{el:.0f} s, ETA {eta:.0f} s")
    pose, small, meta = [], [], []
    for ep in episodes:
        for r in rendered.get(ep.episode_id, ()):
            pose.append(r["pose"])
            small.append(r["small"])
            meta.append(_meta(r))
        for i in cached.get(ep.episode_id, ()):
            pose.append(reuse[0][i])
            small.append(reuse[1][i])
            meta.append(reuse[2][i])
    pose_arr, small_arr = np.stack(pose).astype(np.float32), np.stack(small).astype(np.uint8)
    target = Path(out) / split
    with staged_dir(target, f".{split}-") as tmp:
        np.save(tmp / "pose.npy", pose_arr)
        np.save(tmp / "frames64.npy", small_arr)
        (tmp / "clips.json").write_text(json.dumps(meta))
    shutil.rmtree(parts, ignore_errors=True)
    return target


def load_clips(split: str, root: Path = DATA_DIR) -> tuple[np.ndarray, np.ndarray, list[dict]]:
    """(pose (N, 8, 33, 6), frames64 (N, 8, 64, 64, 3), metadata) of a rendered split."""
    d = Path(root) / split
    if not (d / "clips.json").is_file():
        raise FileNotFoundError(f"{d} has no rendered clips; run `affectsim train` (it renders them first)")
    meta = read_json(d / "clips.json", MAX_CLIPS_META_BYTES, "clips.json")
    if not (isinstance(meta, list) and all(isinstance(c, dict) for c in meta)):
        raise InvalidInput("clips.json", str(d / "clips.json"), "a list of clip entries (delete it to render again)")
    return np.load(d / "pose.npy", mmap_mode="r"), np.load(d / "frames64.npy", mmap_mode="r"), meta
