"""Render the person sprite of ``test/standin_robot.py`` once: ``test/data/standin_person.npz``.

Run from the repository root (CPU rendering works; EGL if available):

    MUJOCO_GL=egl PYOPENGL_PLATFORM=egl .venv/bin/python test/make_standin_sprite.py

A neutral, standing performer of the project's avatar generator is rendered from the front by the
MuJoCo backend in its empty studio room, with a level camera 2.5 m away at 1.1 m (the stand-in's
head-camera height, so the sprite's perspective matches the stand-in's level camera). The alpha mask is where the scene's
depth with the person is nearer than the same scene's depth without them; the sprite is cropped to
the person's opaque pixels. Saved (uint8 RGBA, small): ``rgba`` (H, W, 4), ``height_m`` (the
sprite's full height in metres, at the person's distance), ``width_m``, ``feet_row`` (the row of
the lowest opaque pixel: the feet on the floor), ``centre_col`` (the column of the body's axis),
``distance_m`` (the depth of the feet) and ``fy`` of the render.

This script may use the project's code; the stand-in robot that pastes the sprite does not.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

from affectsim_bridge.backends import BACKENDS
from affectsim_bridge.backends.base import HumanPlacement
from affectsim_bridge.humans.generator import generate
from affectsim_bridge.content.preview import studio_scene
from affectsim_bridge.humans.styles import Performer
from affectsim_core.camera import CameraIntrinsics
from affectsim_core.geometry import Pose2D, Transform, look_at_rotation

OUT = Path(__file__).resolve().parent / "data" / "standin_person.npz"
DISTANCE = 2.5  # m, camera to person
CAM_Z = 1.1  # m, a level camera at the height of the stand-in's head camera
W, H = 400, 800  # render size
FY = 600.0  # px; a 1.76 m person is about 1.76 * 600 / 2.5 = 420 px tall in the render


def render(seed: int, t_frac: float):
    rng = np.random.default_rng(seed)
    performer = Performer.sample("standin", rng)
    motion = generate("standin", "standing", "neutral", performer, 1)
    backend = BACKENDS.create("mujoco")
    k = CameraIntrinsics(W, H, FY, FY, (W - 1) / 2.0, (H - 1) / 2.0)
    t = t_frac * motion.duration
    place = HumanPlacement("p", 0.0, 0.0, 0.0, motion=motion)
    frames = []
    for humans in ((place,), ()):
        backend.load(studio_scene(motion), Pose2D(8.0, -8.0, 0.0), humans)
        backend.sim_time = t
        backend._sync()
        if humans:
            root, rot, _ = place.pose_at(t)
            yaw = float(rot[0])
            centre = np.array([root[0], root[1]])
        cam = np.array([centre[0] + DISTANCE * math.cos(yaw), centre[1] + DISTANCE * math.sin(yaw), CAM_Z])
        target = np.array([centre[0], centre[1], CAM_Z])  # level view
        frames.append(backend.render_camera(Transform(look_at_rotation(cam, target), cam), k))
    backend.close()
    return frames, motion.body.height


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=13, help="performer seed (13: 1.70 m tall, found by BlazePose in 97 %% of stand-in frames at 1.5-4.5 m)")
    ap.add_argument("--time", type=float, default=0.3, help="fraction of the standing clip's duration")
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args()
    (person, empty), body_h = render(a.seed, a.time)
    dp = np.nan_to_num(person.depth, nan=1e3)
    de = np.nan_to_num(empty.depth, nan=1e3)
    mask = dp < de - 0.01  # the person is in front of what is behind them
    mask &= dp < DISTANCE + 1.0
    # a morphological clean-up: drop isolated pixels (a 3x3 majority)
    pad = np.pad(mask, 1)
    votes = sum(pad[1 + dy:H + 1 + dy, 1 + dx:W + 1 + dx] for dy in (-1, 0, 1) for dx in (-1, 0, 1))
    mask = mask & (votes >= 3)
    rows, cols = np.nonzero(mask)
    if len(rows) < 500:
        raise SystemExit(f"no person found in the render ({len(rows)} px)")
    r0, r1, c0, c1 = rows.min(), rows.max() + 1, cols.min(), cols.max() + 1
    pad_px = 2
    r0, c0 = max(0, r0 - pad_px), max(0, c0 - pad_px)
    r1, c1 = min(H, r1 + pad_px), min(W, c1 + pad_px)
    rgba = np.zeros((r1 - r0, c1 - c0, 4), np.uint8)
    rgba[..., :3] = person.rgb[r0:r1, c0:c1]
    rgba[..., 3] = np.where(mask[r0:r1, c0:c1], 255, 0).astype(np.uint8)
    # the sprite's metric size at the depth of the feet: the floor under the lowest opaque row is at
    # z = FY * CAM_Z / (row - cy) for the level camera (the person's front surface is a little nearer)
    z = float(FY * CAM_Z / (rows.max() + 0.5 - (H - 1) / 2.0))
    height_m = (r1 - r0) * z / FY
    width_m = (c1 - c0) * z / FY
    feet_row = int(rows.max() - r0)
    centre_col = float((W - 1) / 2.0 - c0)  # the body's axis: the image centre the camera looked at
    a.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(a.out, rgba=rgba, height_m=np.float32(height_m), width_m=np.float32(width_m),
                        feet_row=np.int32(feet_row), centre_col=np.float32(centre_col),
                        distance_m=np.float32(z), fy=np.float32(FY), body_height_m=np.float32(body_h))
    print(f"{a.out}: {rgba.shape[1]}x{rgba.shape[0]} px, height {height_m:.3f} m (body {body_h:.2f} m), "
          f"feet at row {feet_row}, feet at depth {z:.2f} m, {a.out.stat().st_size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
