"""Recognizer registry: every shipped recognizer gives 5 probabilities summing to 1 and a label,
deterministically; checkpoints are verified; bad clips and corrupt weights are named."""

import shutil

import numpy as np
import pytest

from affectsim_bridge.backends import BACKENDS
from affectsim_core.episode import Episode, EpisodeHuman
from affectsim_core.protocol import EMOTIONS
from affectsim_eval.training.train import TRAINERS
from affectsim_perception.recognizers import RECOGNIZERS, ClipInput, load_checkpoint
from affectsim_perception.recognizers.base import CHECKPOINT_DIR

LOCAL = [n for n in RECOGNIZERS.names() if n != "vlm-openai"]  # the VLM client: test_vlm_client.py


@pytest.fixture(scope="module")
def clips():
    from affectsim_bridge.backends.base import HumanPlacement
    from affectsim_bridge.humans.generator import generate
    from affectsim_bridge.content.preview import studio_scene
    from affectsim_bridge.humans.styles import Performer
    from affectsim_core.camera import CameraIntrinsics
    from affectsim_core.clips import resize
    from affectsim_core.geometry import Pose2D, Transform, look_at_rotation

    b = BACKENDS.create("mujoco")
    out = []
    for k, emotion in enumerate(("happy", "sad")):
        m = generate("r", "standing", emotion, Performer.sample(f"R{k}", np.random.default_rng(k)), 1,
                     scenario="gestures")
        b.load(studio_scene(m), Pose2D(8.0, -8.0, 0.0), (HumanPlacement("p", 0.0, 0.0, 0.0, motion=m),))
        pos = np.array([2.6, 0.0, 1.1])
        cam = Transform(look_at_rotation(pos, np.array([0.0, 0.0, 0.9])), pos)
        frames = []
        for t in np.linspace(0, 2 * m.duration, 8, endpoint=False):
            b.set_time(float(t))
            frames.append(resize(b.render_camera(cam, CameraIntrinsics.from_vfov(640, 480, 0.817)).rgb))
        out.append(ClipInput(np.stack(frames)))
    b.close()
    out.append(ClipInput(np.zeros((8, 224, 224, 3), np.uint8)))  # nobody in view
    return out


@pytest.mark.parametrize("name", TRAINERS.names())
def test_shipped_checkpoints_have_manifests_and_reload_identically(name, clips):
    ck = load_checkpoint(name)
    m = ck.manifest
    assert m["recognizer"] == name and len(m["weights_sha256"]) == 64
    assert set(m["dataset_splits_sha256"]) == {"train", "val", "test"} and "code_version" in m and "seed" in m
    assert (CHECKPOINT_DIR / name / "weights.npz").stat().st_size < 20 * 2 ** 20
    if name != "majority":
        assert m["metrics"]["test"]["good_view"]["n"] > 100
        assert set(m["subsets"]) == {"train", "val", "test"}
    first = RECOGNIZERS.create(name).predict(clips[0]).probs
    assert np.array_equal(first, RECOGNIZERS.create(name).predict(clips[0]).probs)  # a reload, same outputs
    with pytest.raises(ValueError):
        next(iter(ck.arrays.values()))[...] = 0  # read-only


def test_corrupt_or_empty_checkpoints_are_named(tmp_path):
    shutil.copytree(CHECKPOINT_DIR / "majority", tmp_path / "majority")
    w = tmp_path / "majority" / "weights.npz"
    w.write_bytes(w.read_bytes()[:-10] + b"0123456789")
    with pytest.raises(ValueError, match="SHA-256"):
        load_checkpoint("majority", tmp_path)
    w.write_bytes(b"")
    with pytest.raises(ValueError, match="weights.npz of 1 to"):
        load_checkpoint("majority", tmp_path)
    (tmp_path / "majority" / "manifest.json").write_text("{")
    with pytest.raises(ValueError, match="valid JSON"):
        load_checkpoint("majority", tmp_path)
    with pytest.raises(ValueError, match="affectsim train nope"):
        load_checkpoint("nope", tmp_path)


def test_pose_temporal_numpy_network_equals_pytorch():
    """The shipped inference path (numpy) computes what the trained PyTorch network computes."""
    import torch

    from affectsim_perception.recognizers import pose_temporal as pt

    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 4, pt.FRAMES, 7))  # two ensemble members, a batch of four
    convs = [torch.nn.Conv1d(7, 5, 3, padding=1).double() for _ in range(2)]
    ref = np.stack([c(torch.tensor(xm).transpose(1, 2)).transpose(1, 2).detach().numpy() for c, xm in zip(convs, x)])
    w = np.stack([c.weight.detach().numpy() for c in convs])
    b = np.stack([c.bias.detach().numpy() for c in convs])
    assert np.allclose(pt._conv1d(x, w, b), ref, atol=1e-12)


def test_pose_features_of_mirrored_and_empty_clips():
    from affectsim_perception.recognizers import pose_temporal as pt

    assert pt.pose_features(np.zeros((8, 33, 6))).shape == (pt.N_FEATURES,)
    assert not pt.pose_features(np.zeros((8, 33, 6))).any()  # nobody found: all zero
    pose = np.zeros((8, 33, 6))
    rng = np.random.default_rng(1)
    pose[:, :, :2] = rng.uniform(0.3, 0.7, (8, 33, 2))
    pose[:, :, 2] = 0.9
    pose[:, :, 3:] = rng.normal(scale=0.3, size=(8, 33, 3))
    pose[3] = 0.0  # frame 3: nobody
    f = pt.pose_features(pose)
    assert np.isfinite(f).all()
    frames = f[pt.N_STATIC:].reshape(pt.FRAMES, pt.N_FRAME)
    assert frames[:, -1].tolist() == [1, 1, 1, 0, 1, 1, 1, 1] and not frames[3].any()
    assert np.allclose(pt.mirror_pose(pt.mirror_pose(pose)), pose)
    with pytest.raises(ValueError, match=r"clip pose shape \(7, 33, 6\)"):
        pt.pose_features(np.zeros((7, 33, 6)))


def test_training_subsets_grow_by_disjoint_stratified_tiers():
    from collections import Counter

    from affectsim_eval.training.train import _subset, tiered_subset

    eps = [Episode(f"e{i:04d}", "scene_000", (0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0),
                   ("action_grounded", "dyadic")[i % 2], None, EMOTIONS[i % 5], "walk", "g", i, None,
                   (EpisodeHuman("target", "m", 0.0, 0.0, 0.0, 0.0),)) for i in range(1000)]
    first = tiered_subset(eps, (200,), 3)
    both = tiered_subset(eps, (200, 300), 3)
    assert first == _subset(eps, 200, 3) == both[:200]  # adding a tier keeps the earlier draw
    ids = [e.episode_id for e in both]
    assert len(ids) == len(set(ids)) == 500
    assert set(Counter(e.emotion for e in both[200:]).values()) == {60}
    assert both == tiered_subset(eps, (200, 300), 3) and both != tiered_subset(eps, (200, 300), 4)


def test_rendering_reuses_cached_clips_and_resumes_where_it_was_interrupted(tmp_path, small_data):
    """Clips taken from an earlier cache or from the parts of an interrupted render equal a fresh render."""
    from functools import partial

    from affectsim_eval.dataset.episodes import load_split
    from affectsim_eval.training.training_data import load_clips
    from affectsim_eval.training.training_data import render_split as render

    data, _ = small_data
    render_split = partial(render, motions=data / "motions", scenes_dir=data / "scenes")
    eps = load_split("val", data / "episodes")[:4]
    assert len(eps) == 4
    fresh = load_clips("val", render_split("val", eps, tmp_path / "fresh", log=lambda m: None).parent)
    part = load_clips("val", render_split("val", eps[:2], tmp_path / "grown", log=lambda m: None).parent)

    def interrupt(msg: str) -> None:
        raise KeyboardInterrupt(msg)

    with pytest.raises(KeyboardInterrupt, match="1/2 episodes rendered"):  # killed after its first part
        render_split("val", eps, tmp_path / "grown", reuse=part, part_size=1, log=interrupt)
    logs: list[str] = []
    grown = load_clips("val", render_split("val", eps, tmp_path / "grown", reuse=part, log=logs.append).parent)
    assert logs == [logs[0]] and "1/1 episodes rendered (3 reused)" in logs[0]
    assert grown[2] == fresh[2]
    np.testing.assert_array_equal(grown[0], fresh[0])
    np.testing.assert_array_equal(grown[1], fresh[1])
    assert sorted(p.name for p in (tmp_path / "grown").iterdir()) == ["val"]  # the parts are gone


class _CountingDetector:
    """A video-mode BlazePose that counts its frames (to check each stream frame is posed once)."""

    def __init__(self):
        from affectsim_perception.person_model import BlazePose

        self.inner, self.frames = BlazePose(video=True), 0
        self.video = True

    def reset(self):
        self.inner.reset()

    def detect(self, rgb):
        self.frames += 1
        return self.inner.detect(rgb)

    def close(self):
        self.inner.close()


@pytest.mark.parametrize("name", ["pose-temporal", "committee"])
def test_streams_pose_every_frame_once_and_label_each_window_from_that_pass(name, clips):
    from affectsim_perception.person_model import clear_pose_cache, clip_pose
    from affectsim_perception.recognizers.base import StreamInput

    frames = np.concatenate([clips[0].frames, clips[1].frames[:5]])  # 13 frames: windows at 0, 2, 4
    stream = StreamInput(frames, np.arange(13) * 0.25)
    clear_pose_cache()
    det = _CountingDetector()
    rec = RECOGNIZERS.create(name, detector=det)
    got = rec.predict_stream(stream, stride=2)
    assert det.frames == 13 and [t for t, _ in got] == [0.875, 1.375, 1.875]
    pose = clip_pose(det, frames)  # the same pass (memoised), the person tracked through all 13 frames
    for (t, p), i in zip(got, (0, 2, 4)):
        want = (rec.predict_pose(pose[i:i + 8]) if name == "pose-temporal"
                else rec._vote(pose[i:i + 8], frames[i:i + 8]))
        assert p.label == want.label and np.array_equal(p.probs, want.probs)
    assert got[0][1].label == rec.predict(clips[0]).label  # first window: the first clip, posed afresh
    rec.close()
