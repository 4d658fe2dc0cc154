"""A real frozen person model (BlazePose, mediapipe 0.10.14) finds the avatar at 2-4 m, front and side."""

import math

import numpy as np
import pytest

from affectsim_bridge.backends import BACKENDS
from affectsim_bridge.backends.base import HumanPlacement
from affectsim_bridge.humans.generator import generate
from affectsim_bridge.humans.preview import studio_scene
from affectsim_bridge.humans.styles import Performer
from affectsim_core.camera import CameraIntrinsics
from affectsim_core.geometry import Pose2D, Transform, look_at_rotation
from affectsim_core.protocol import EMOTIONS
from affectsim_perception.person_model import BlazePose


@pytest.fixture(scope="module")
def detector():
    d = BlazePose()
    yield d
    d.close()


def test_blazepose_detects_avatars_across_performers_and_emotions(detector):
    rng = np.random.default_rng(11)
    backend = BACKENDS.create("mujoco")
    k = CameraIntrinsics.from_vfov(640, 480, math.radians(46.83))  # the Fetch head camera
    hits = {"front": [], "side": []}
    for i in range(30):
        performer = Performer.sample(f"D{i}", rng)
        emotion = EMOTIONS[i % len(EMOTIONS)]
        action = ("standing", "walk", "knock", "seated", "sit_down")[i % 5]
        m = generate(f"d{i}", action, emotion, performer, 1)
        place = HumanPlacement("p", 0.0, 0.0, 0.0, motion=m)
        backend.load(studio_scene(m), Pose2D(8.0, -8.0, 0.0), (place,))
        t = float(rng.uniform(0, m.duration))
        backend.sim_time = t
        backend._sync()
        root, rot, _ = place.pose_at(t)
        for view, rel in (("front", 0.0), ("side", math.pi / 2)):
            d = float(rng.uniform(2.0, 4.0))
            cam = np.array([root[0] + d * math.cos(rot[0] + rel), root[1] + d * math.sin(rot[0] + rel), 1.1])
            frame = backend.render_camera(Transform(look_at_rotation(cam, [root[0], root[1], 0.8]), cam), k)
            det = detector.detect(frame.rgb)
            hits[view].append(det is not None)
            if det is not None:  # the box is on the rendered person, who stands at the image centre
                x0, y0, x1, y1 = det.box
                assert x0 < 427 and x1 > 213 and y1 - y0 > 60  # overlaps the central third
    backend.close()
    for view, h in hits.items():
        assert np.mean(h) >= 0.95, f"{view}: detected in {np.mean(h):.0%} of {len(h)} frames"


def test_detector_rejects_bad_frames(detector):
    with pytest.raises(ValueError, match="uint8 RGB"):
        detector.detect(np.zeros((10, 10), np.float32))
    assert detector.detect(np.full((480, 640, 3), 200, np.uint8)) is None
