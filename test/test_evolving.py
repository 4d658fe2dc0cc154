"""Evolving clips: scripted emotion changes, continuity through them, play-once-and-hold, labels in the file."""

import json
import zipfile

import numpy as np
import pytest

from affectsim_bridge.humans.evolving import EVENTS, Script, evolving, weights
from affectsim_bridge.humans.generator import generate
from affectsim_bridge.humans.motion import (
    load_motion,
    loop_error,
    save_motion,
    transition_error,
)
from affectsim_bridge.humans.styles import Performer
from affectsim_bridge.content.validate import Report, check_motion
from affectsim_core.affect import label_at
from affectsim_core.errors import InvalidInput
from affectsim_core.protocol import EMOTIONS

P = Performer.sample("EV99", np.random.default_rng(7))


@pytest.fixture(scope="module")
def clip():
    return evolving("ev_test", P, 1, ("sad", "happy", "angry"), ("phone_call", "knock_answered"), "gestures")


def test_script_times_follow_the_event_and_label_changes_mid_transition(clip):
    ev, (a, b) = clip.provenance["events"][0], clip.provenance["transitions"][0]
    assert 0.4 <= a - ev["time"] <= 0.8 and 1.0 <= b - a <= 2.0
    assert clip.segments[1].start == pytest.approx((a + b) / 2, abs=1e-4)
    assert [s.emotion for s in clip.segments] == ["sad", "happy", "angry"] and clip.emotion == "angry"
    second = clip.provenance["events"][1]["time"]
    assert 3.0 <= second - b <= 4.5 + 3.0  # the phone call may still be ending
    times = np.arange(clip.frames) / clip.fps
    assert label_at(clip.segments, times[[0, -1]]).tolist() == [EMOTIONS.index("sad"), EMOTIONS.index("angry")]
    w = weights(Script.draw(("sad", "happy"), ("phone_call",), np.random.default_rng(0)), np.linspace(0, 20, 401))
    assert np.allclose(w.sum(0), 1) and (np.diff(w[1]) >= -1e-12).all()


def test_vad_moves_smoothly_from_one_style_to_the_next(clip):
    v = clip.frame_vad
    first, last = v[0], v[-1]
    assert first[0] < 0 and first[1] < 0  # sad: unpleasant, calm
    assert last[0] < 0 < last[1] and last[2] > 0  # angry: unpleasant, aroused, dominant
    mid = v[int(clip.segments[1].start * clip.fps) + int(2 * clip.fps)]
    assert mid[0] > 0.2  # happy in between
    # no jump between frames: the steepest step is the quintic blend's (1.875 x the change / frames)
    shortest = min(b - a for a, b in clip.provenance["transitions"]) * clip.fps
    assert np.abs(np.diff(v, axis=0)).max() <= 1.9 * np.ptp(v, axis=0).max() / shortest


def test_transitions_are_continuous_and_a_pop_is_caught(clip):
    pose, vel = transition_error(clip)
    assert pose <= 1.5 and vel <= 2.5
    assert max(loop_error(clip)) < 2.5  # the held cycle repeats seamlessly
    report = Report()
    check_motion(clip, report)
    assert report.ok, report.examples
    # the same clip with the style switched in one frame at the first boundary
    k = int(clip.segments[1].start * clip.fps)
    popped = evolving("ev_test", P, 1, ("sad", "happy", "angry"), ("phone_call", "knock_answered"), "gestures")
    popped.dofs[k:] += 0.25
    report = Report()
    check_motion(popped, report)
    assert "transition_continuity" in report.failures


def test_plays_once_then_holds_its_final_cycle(clip):
    a, T, fps = clip.loop_start, clip.frames, clip.fps
    assert clip.provenance["transitions"][-1][1] < a / fps  # held cycle starts after the last change
    for t in (T / fps + 0.37, T / fps + 5.2, 3 * T / fps):
        later = clip.sample(t)[2]
        back = a / fps + (t - a / fps) % ((T - a) / fps)
        assert np.allclose(later, clip.sample(back)[2], atol=1e-9)
    assert np.allclose(clip.sample(-3.0)[2], clip.dofs[0])  # before the start: the first frame
    assert label_at(clip.segments, 1e4)[0] == EMOTIONS.index("angry")


def test_same_inputs_same_clip_and_every_event_validates():
    a = evolving("x", P, 3, ("neutral", "fearful"), ("object_dropped",), "weight_shift")
    b = evolving("x", P, 3, ("neutral", "fearful"), ("object_dropped",), "weight_shift")
    assert np.array_equal(a.dofs, b.dofs) and np.array_equal(a.frame_vad, b.frame_vad)
    report = Report()
    for k, event in enumerate(EVENTS):
        check_motion(evolving("x", P, k, (EMOTIONS[k], EMOTIONS[(k + 1) % 5]), (event,), "self_touch"), report)
    assert report.ok, report.examples
    for bad in ((("sad", "sad"), ("phone_call",)), (("sad", "happy"), ("fireworks",)), (("sad",), ())):
        with pytest.raises(InvalidInput):
            evolving("x", P, 1, *bad)


def test_labels_survive_the_file_and_bad_labels_name_the_field(clip, tmp_path):
    path = tmp_path / "ev.npz"
    save_motion(clip, path)
    back = load_motion(path)
    assert back.segments == tuple(type(s)(*s.to_list()) for s in clip.segments)
    assert back.loop_start == clip.loop_start and np.allclose(back.frame_vad, clip.frame_vad, atol=1e-6)
    cyclic = generate("c", "walk", "sad", P, 1)
    save_motion(cyclic, tmp_path / "c.npz")
    assert load_motion(tmp_path / "c.npz").segments == ()  # one label over the whole clip

    def rewrite(name, meta_edit=None, vad=None):
        with np.load(path) as z:
            arrays = {k: z[k] for k in z.files}
        meta = json.loads(str(arrays["meta"]))
        if meta_edit:
            meta_edit(meta)
        arrays["meta"] = np.array(json.dumps(meta))
        if vad is not None:
            arrays["vad"] = vad
        out = tmp_path / name
        np.savez(out, **arrays)
        return out

    cases = [("segments", lambda m: m.update(segments=[[0, 3, "sad"], [4, m["duration"], "angry"]]), None),
             ("emotion", lambda m: m.update(segments=[[0, 3, "angry"], [3, m["duration"], "sad"]]), None),
             ("loop_start", lambda m: m.update(loop_start=10 ** 6), None),
             ("loop_start", lambda m: m.update(loop_start=True), None),
             ("vad", None, np.full((clip.frames, 3), 1.5, np.float32)),
             ("vad", None, np.zeros((clip.frames, 2), np.float32))]
    for i, (field, edit, vad) in enumerate(cases):
        with pytest.raises(InvalidInput, match=field):
            load_motion(rewrite(f"bad{i}.npz", edit, vad))
    with zipfile.ZipFile(path) as zf:  # a clip written before VAD labels loads with its label's prototype
        names = [n for n in zf.namelist() if n != "vad.npy"]
        with zipfile.ZipFile(tmp_path / "old.npz", "w") as out:
            for n in names:
                out.writestr(n, zf.read(n))
    old = load_motion(tmp_path / "old.npz")
    assert old.vad is None and np.allclose(old.frame_vad, [-0.51, 0.59, 0.25])
