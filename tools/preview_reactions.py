#!/usr/bin/env python3
"""Contact sheet of every emotion's reaction, for a person to look at (docs/img/reactions.png).

Per emotion (rows): the scripted person, then the same person 0.5 s, 1.5 s and 3 s after a robot
standing 2.5 m in front of them came into view, rendered from beside the robot (the robot's own
head camera crops the legs at this distance). Usage::

    python tools/preview_reactions.py [--out docs/img/reactions.png]
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from affectsim_bridge.backends import BACKENDS
from affectsim_bridge.backends.base import HumanPlacement
from affectsim_bridge.humans.generator import generate
from affectsim_bridge.content.preview import studio_scene
from affectsim_bridge.humans.styles import Performer
from affectsim_core.actions import Action
from affectsim_core.camera import CameraIntrinsics
from affectsim_core.geometry import Pose2D, Transform, look_at_rotation
from affectsim_core.protocol import EMOTIONS, STEP_SECONDS

TIMES = (0.5, 1.5, 3.0)  # s after the robot appeared
SIZE = (240, 300)  # width, height of one tile


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="docs/img/reactions.png")
    ns = ap.parse_args()
    backend = BACKENDS.create("mujoco")
    k = CameraIntrinsics.from_vfov(SIZE[0], SIZE[1], math.radians(60))
    cam = np.array([2.6, 1.2, 1.2])  # beside the robot, which stands at (2.5, 0) facing the person
    view = Transform(look_at_rotation(cam, np.array([0.0, 0.0, 0.9])), cam)
    performer = Performer.sample("P1", np.random.default_rng(1))
    sheet = Image.new("RGB", (SIZE[0] * (1 + len(TIMES)) + 90, SIZE[1] * len(EMOTIONS) + 24), "white")
    draw = ImageDraw.Draw(sheet)
    for c, title in enumerate(["scripted", *(f"reactive, {t:g} s" for t in TIMES)]):
        draw.text((90 + c * SIZE[0] + 8, 6), title, fill="black")
    for r, emotion in enumerate(EMOTIONS):
        m = generate("p", "standing", emotion, performer, 1, scenario="gestures")
        person = (HumanPlacement("p", 0.0, 0.0, 0.0, motion=m),)
        tiles = []
        for mode, t in (("scripted", TIMES[-1]), *(("reactive", t) for t in TIMES)):
            backend.load(studio_scene(m), Pose2D(2.5, 0.0, math.pi), person, humans_mode=mode, reaction_seed=1)
            for _ in range(int(round(t / STEP_SECONDS))):
                backend.apply_action(Action.STOP)
            tiles.append(backend.render_camera(view, k).rgb)
        draw.text((8, 24 + r * SIZE[1] + SIZE[1] // 2), emotion, fill="black")
        for c, tile in enumerate(tiles):
            sheet.paste(Image.fromarray(tile), (90 + c * SIZE[0], 24 + r * SIZE[1]))
    backend.close()
    out = Path(ns.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp.png")
    sheet.save(tmp)
    tmp.replace(out)
    print(out)


if __name__ == "__main__":
    main()
