"""The BlazePose pipeline run from mediapipe's TFLite models (affectsim_perception.blazepose) is
the legacy mediapipe graph: same anchors, same landmarks on rendered avatars, pruned model
outputs bit-identical, refinement as specified, results independent of thread count."""

import math
import subprocess
import sys

import numpy as np
import pytest

from affectsim_bridge.backends import BACKENDS
from affectsim_perception import blazepose as bp


@pytest.fixture(scope="module")
def frames():
    """Rendered avatars at 2-4 m, 224x224 (what recognizers get) and 640x480 (the head camera)."""
    from affectsim_bridge.backends.base import HumanPlacement
    from affectsim_bridge.humans.generator import generate
    from affectsim_bridge.content.preview import studio_scene
    from affectsim_bridge.humans.styles import Performer
    from affectsim_core.camera import CameraIntrinsics
    from affectsim_core.clips import resize
    from affectsim_core.geometry import Pose2D, Transform, look_at_rotation

    rng = np.random.default_rng(5)
    b = BACKENDS.create("mujoco")
    k = CameraIntrinsics.from_vfov(640, 480, math.radians(46.83))
    out = []
    for i in range(8):
        m = generate(f"b{i}", ("standing", "walk")[i % 2], ("angry", "sad", "happy", "fearful")[i % 4],
                     Performer.sample(f"B{i}", rng), 1)
        place = HumanPlacement("p", 0.0, 0.0, 0.0, motion=m)
        b.load(studio_scene(m), Pose2D(8.0, -8.0, 0.0), (place,))
        t = float(rng.uniform(0, m.duration))
        b.set_time(t)
        root, rot, _ = place.pose_at(t)
        d, rel = float(rng.uniform(2.0, 4.0)), float(rng.uniform(-1.2, 1.2))
        cam = np.array([root[0] + d * math.cos(rot[0] + rel), root[1] + d * math.sin(rot[0] + rel), 1.1])
        out.append(b.render_camera(Transform(look_at_rotation(cam, [root[0], root[1], 0.9]), cam), k).rgb)
    b.close()
    return [resize(f) for f in out] + out


@pytest.fixture(scope="module")
def graph():
    return bp.PoseGraph(threads=2)


def test_anchors_match_the_detector_output():
    a = bp.ssd_anchors()
    assert a.shape == (2254, 2) and (a > 0).all() and (a < 1).all()
    assert np.allclose(a[:2], [[0.5 / 28, 0.5 / 28]] * 2)  # stride 8: 28x28 cells, two anchors each
    assert np.allclose(a[-6:], [[6.5 / 7, 6.5 / 7]] * 6)  # three stride-32 layers share a 7x7 grid


def test_pruned_landmark_model_gives_the_full_models_outputs_bit_for_bit(frames):
    from ai_edge_litert.interpreter import Interpreter

    path = bp.model_dir() / "pose_landmark" / "pose_landmark_full.tflite"
    keep = ("Identity", "Identity_1", "Identity_3", "Identity_4")
    full = Interpreter(model_path=str(path), num_threads=1)
    pruned = Interpreter(model_content=bp.prune_outputs(path, keep), num_threads=1)
    x = (frames[-1][112:368, 192:448].astype(np.float32) / 255)[None]  # a 256x256 crop of a 640x480 frame
    outs = []
    for it in (full, pruned):
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        outs.append({o["name"]: it.get_tensor(o["index"]) for o in it.get_output_details()})
    assert set(outs[1]) == set(keep)
    for name in keep:
        assert np.array_equal(outs[0][name], outs[1][name]), name
    with pytest.raises(ValueError, match="Identity_9"):
        bp.prune_outputs(path, ("Identity_9",))


def test_landmarks_agree_with_mediapipes_own_graph(frames, graph):
    """Still images: the same 33 landmarks as mediapipe's legacy Pose solution, within a pixel (the
    detector's letterbox resize of 640x480 frames differs slightly, hence the world tolerance)."""
    import mediapipe as mp

    ref = mp.solutions.pose.Pose(static_image_mode=True, model_complexity=1, smooth_landmarks=False)
    errors, found = [], 0
    for f in frames:
        r = ref.process(f)
        roi = graph.detect(f)
        lm = graph.landmarks(f, roi) if roi is not None else None
        mine = lm is not None and lm.presence >= 0.5
        assert mine == (r.pose_landmarks is not None)
        if mine:
            found += 1
            h, w = f.shape[:2]
            theirs = np.array([[p.x * w, p.y * h] for p in r.pose_landmarks.landmark])
            errors.append(np.linalg.norm(theirs - lm.points[:33], axis=1) / max(h, w))
            world = np.array([[p.x, p.y, p.z] for p in r.pose_world_landmarks.landmark])
            assert np.median(np.linalg.norm(world - lm.world[:33], axis=1)) < 0.05  # metres (measured <= 0.036)
            vis = np.array([p.visibility for p in r.pose_landmarks.landmark])
            assert np.abs(vis - lm.visibility[:33]).max() < 0.1
    ref.close()
    assert found >= 14
    errors = np.concatenate(errors)
    assert np.median(errors) < 0.003, np.median(errors)  # of the long side; measured 0.2 px of 224, 0.5 px of 640


def test_heatmap_refinement_moves_confident_landmarks_only():
    hm = np.full((64, 64, 3), -10.0, np.float32)
    hm[20, 30, 0] = 5.0  # a confident peak next to landmark 0
    hm[40, 10, 1] = -1.0  # a weak one next to landmark 1 (sigmoid 0.27 < 0.5)
    xy = np.array([[31.5 / 64, 21.5 / 64], [10.5 / 64, 40.5 / 64], [1.2, 0.5]])
    out = bp.refine_with_heatmap(xy, hm)
    assert out[0] == pytest.approx([30 / 64, 20 / 64], abs=1e-4)  # the peak's cell dominates the window
    assert np.array_equal(out[1:], xy[1:])  # weak window, and a landmark outside the crop


def test_results_do_not_depend_on_thread_count(frames, graph):
    one = bp.PoseGraph(threads=1)
    for f in frames[:4]:
        r1, r2 = one.detect(f), graph.detect(f)
        assert r1 == r2
        if r1 is not None:
            a, b = one.landmarks(f, r1), graph.landmarks(f, r2)
            assert np.array_equal(a.points, b.points) and np.array_equal(a.world, b.world)


def test_bad_confidence_is_named():
    with pytest.raises(ValueError, match="min_detection_confidence=1.5"):
        bp.PoseGraph(min_detection_confidence=1.5)


def test_thread_count_comes_from_omp_num_threads(monkeypatch):
    from affectsim_perception.person_model import BlazePose

    monkeypatch.setenv("OMP_NUM_THREADS", "two")
    with pytest.raises(ValueError, match="OMP_NUM_THREADS='two'"):
        BlazePose()
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert BlazePose().detect(np.zeros((224, 224, 3), np.uint8)) is None


def test_loading_the_models_imports_no_mediapipe_and_starts_no_process():
    """Importing mediapipe (its tasks API probes for PortAudio with ldconfig, gcc and ld) made the
    perception node start compilers at start-up; the models are only located inside the package."""
    probe = ("import subprocess, sys\n"
             "subprocess.Popen.__init__ = lambda self, args, *a, **k: sys.exit(f'started {args}')\n"
             "import numpy as np\n"
             "from affectsim_perception.person_model import BlazePose\n"
             "BlazePose().detect(np.zeros((224, 224, 3), np.uint8))\n"
             "print(sorted(m for m in ('mediapipe', 'sounddevice') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", out.stdout
