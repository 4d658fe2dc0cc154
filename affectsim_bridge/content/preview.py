"""Preview of a motion: a contact sheet (PNG) and an animated GIF from front, side and rear views.

Rendered with the MuJoCo backend in an empty studio room; the cameras follow the
performer's root so walking clips stay in frame. Under every frame of the sheet: the emotion
label at that instant and its valence, arousal and dominance; an evolving clip's sheet spans the
whole clip and names each event at the frame after it.
"""

from __future__ import annotations

import functools
import math
import os
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from affectsim_bridge.backends import BACKENDS
from affectsim_bridge.backends.base import HumanPlacement
from affectsim_bridge.humans.motion import Motion
from affectsim_bridge.world.scene import Scene, parse_scene
from affectsim_core.affect import label_at
from affectsim_core.camera import CameraIntrinsics
from affectsim_core.geometry import Pose2D, Transform, look_at_rotation
from affectsim_core.protocol import EMOTIONS

STUDIO = {
    "format": "affectsim-scene/1", "id": "studio",
    "materials": {"floor": {"rgba": [0.55, 0.55, 0.52, 1]},
                  "wall": {"rgba": [0.85, 0.86, 0.88, 1]}, "bench": {"rgba": [0.45, 0.32, 0.22, 1]}},
    "rooms": [{"id": "studio", "polygon": [[-10, -10], [10, -10], [10, 10], [-10, 10]]}],
    "walls": [{"from": [-10, -10], "to": [10, -10]}, {"from": [10, -10], "to": [10, 10]},
              {"from": [10, 10], "to": [-10, 10]}, {"from": [-10, 10], "to": [-10, -10]}],
    "lights": [[0, 0, 2.6], [3, 3, 2.6], [-3, -3, 2.6]],
}


def studio_scene(motion: Motion | None = None) -> Scene:
    """An empty 20 m x 20 m room; with a seat at the origin for seated and sit-down clips (cached)."""
    seat = motion is not None and motion.action in ("seated", "sit_down")
    return _studio(round(float(motion.provenance.get("seat_height", 0.45)), 3) if seat else None)


@functools.lru_cache(maxsize=8)
def _studio(h: float | None) -> Scene:
    doc = dict(STUDIO)
    if h is not None:
        # bench facing +x (local +y is the front, so yaw -90 deg), seat top at the clip's support height
        doc["furniture"] = [{"id": "seat", "type": "bench", "position": [-0.05, 0.0], "yaw_deg": -90,
                             "size": [0.6, 0.4, h], "seat_height": h}]
    return parse_scene(doc, "<studio>")


VIEWS = {"front": 0.0, "side": math.pi / 2, "rear": math.pi}


def render_views(motion: Motion, times: np.ndarray, distance: float = 3.0, size: tuple[int, int] = (320, 240),
                 backend=None) -> dict[str, list[np.ndarray]]:
    """RGB frames per view at ``times`` (s); views relative to the performer's facing."""

    own = backend is None
    b = backend or BACKENDS.create("mujoco")
    place = HumanPlacement("performer", 0.0, 0.0, 0.0, motion=motion)
    b.load(studio_scene(motion), Pose2D(8.0, 8.0, 0.0), (place,))
    k = CameraIntrinsics.from_vfov(size[0], size[1], math.radians(50))
    out: dict[str, list[np.ndarray]] = {v: [] for v in VIEWS}
    for t in times:
        b.sim_time = float(t)
        b._sync()
        root, rot, _ = place.pose_at(float(t))
        for view, rel in VIEWS.items():
            ang = rot[0] + rel
            target = np.array([root[0], root[1], 0.9])
            cam = target + [distance * math.cos(ang), distance * math.sin(ang), 0.35]
            pose = Transform(look_at_rotation(cam, target), cam)
            out[view].append(b.render_camera(pose, k, top_down=True).rgb)  # no ceiling glare
    if own:
        b.close()
    return out


def write_preview(motion: Motion, out_dir: Path, frames: int | None = None, gif_fps: float = 6.0,
                  gif_size: tuple[int, int] = (160, 120), size: tuple[int, int] = (320, 240)) -> tuple[Path, Path]:
    """Write ``<id>.png`` (views x frames, the label per frame) and ``<id>.gif`` (three views side
    by side) into ``out_dir``; ``frames`` default: 6, or 12 for an evolving clip."""
    out_dir.mkdir(parents=True, exist_ok=True)
    frames = frames or (12 if motion.segments else 6)
    sheet_t = np.linspace(0, motion.duration, frames, endpoint=False)
    views = render_views(motion, sheet_t, size=size)
    h, w = views["front"][0].shape[:2]
    labels = label_at(motion.label_segments, sheet_t)
    vad = motion.vad_at(sheet_t)
    events = motion.provenance.get("events", []) if motion.segments else []
    sheet = Image.new("RGB", (w * frames, (h + 14) * len(VIEWS) + 18 + 28), (255, 255, 255))
    draw = ImageDraw.Draw(sheet)
    changes = " -> ".join(s.emotion for s in motion.label_segments)
    draw.text((4, 2), f"{motion.id}: {changes} {motion.action}, performer {motion.performer}, "
                      f"{motion.duration:.1f} s", fill=(0, 0, 0))
    for r, view in enumerate(VIEWS):
        for c, img in enumerate(views[view]):
            y = 18 + r * (h + 14)
            sheet.paste(Image.fromarray(img), (c * w, y + 14))
            draw.text((c * w + 4, y), f"{view} t={sheet_t[c]:.2f}s", fill=(0, 0, 0))
    y = 18 + len(VIEWS) * (h + 14)
    for c, (k, (v, a, d)) in enumerate(zip(labels, vad)):
        draw.text((c * w + 4, y), f"{EMOTIONS[k]}  V{v:+.2f} A{a:+.2f} D{d:+.2f}", fill=(0, 0, 0))
        happened = [e["event"] for e in events if sheet_t[c] - (sheet_t[1] - sheet_t[0]) < e["time"] <= sheet_t[c]]
        if happened:
            draw.text((c * w + 4, y + 13), "after: " + ", ".join(happened), fill=(180, 0, 0))
    gif_t = np.arange(0, motion.duration, 1.0 / gif_fps)
    gv = render_views(motion, gif_t, size=gif_size)
    gif = [Image.fromarray(np.concatenate([gv[v][i] for v in VIEWS], axis=1)) for i in range(len(gif_t))]
    png, gifp = out_dir / f"{motion.id}.png", out_dir / f"{motion.id}.gif"
    for path, writer in ((png, lambda p: sheet.save(p, format="PNG")),
                         (gifp, lambda p: gif[0].save(p, format="GIF", save_all=True, append_images=gif[1:],
                                                      duration=int(1000 / gif_fps), loop=0))):
        fd, tmp = tempfile.mkstemp(dir=out_dir, suffix=".tmp")
        os.close(fd)
        writer(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    return png, gifp
