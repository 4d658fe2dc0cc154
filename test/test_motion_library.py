"""The affective motion library: deterministic build, validation, emotion evidence, bad input."""

import json
from collections import Counter

import numpy as np
import pytest

from affectsim_bridge.humans.features import library_stats
from affectsim_bridge.humans.generator import generate
from affectsim_bridge.content.library import INTERACTIONS, PAIRS, Library, build, evolving_scenario
from affectsim_bridge.humans.motion import save_motion
from affectsim_bridge.humans.styles import Performer
from affectsim_bridge.content.validate import MIN_VAD_WITHIN, Report, check_motion, validate_library, vad_within_class_share
from affectsim_core.affect import prototype
from affectsim_core.classification import macro_f1
from affectsim_core.errors import InvalidInput
from affectsim_core.protocol import EMOTIONS
from affectsim_eval.dataset.build import plan_jobs, split_groups
from affectsim_eval.dataset.context import MAX_CONTEXT_F1, ContextClassifier, leave_one_sequence_out
from affectsim_eval.dataset.leakage import shortcut_score

SMALL = dict(ag_performers=2, ag_takes=1, oc_performances=30, oc_performers=3, dyadic=5, ev_performers=2,
             ev_clips=3)


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    root = tmp_path_factory.mktemp("lib") / "motions"
    manifest = build(root, seed=0, log=lambda s: None)
    return Library(root), manifest


def test_paper_scale_counts_and_balance(full):
    _, manifest = full
    c = manifest["counts"]
    assert c["action_grounded"]["total"] == 480 and c["observation_controlled"]["total"] == 837
    assert len(manifest["dyadic"]) == 60
    assert len(manifest["clips"]) >= 1259
    oc = c["observation_controlled"]["emotions"]
    assert max(oc.values()) - min(oc.values()) <= 1
    assert len({e["performer"] for e in manifest["clips"] if e["family"] == "action_grounded"}) >= 12
    assert {e["action"] for e in manifest["clips"] if e["family"] == "action_grounded"} == {
        "walk", "sit_down", "seated", "knock"}


@pytest.mark.parametrize("scale", ["small", pytest.param("paper", marks=pytest.mark.slow)])  # paper: ~25 s
def test_every_clip_passes_validation(scale, full, small_data):
    lib = full[0] if scale == "paper" else Library(small_data[0] / "motions")
    report = validate_library(lib, log=lambda s: None)
    assert report.ok, dict(report.failures)
    assert max(report.measures["foot_slide"]) < 0.05


@pytest.mark.slow  # ~20 s: a statistic of the paper-scale library (`affectsim motions stats` prints it)
def test_emotion_is_in_the_motion(full):
    lib, _ = full
    res = library_stats(lib, log=lambda s: None)
    failing = [c for c in res["checks"] if not c["holds"]]
    assert not failing, failing
    assert 0.70 <= res["macro_f1"] <= 0.97, res["confusion"]


def test_build_is_deterministic_and_atomic(tmp_path):
    a = build(tmp_path / "a", seed=3, log=lambda s: None, **SMALL)
    b = build(tmp_path / "b", seed=3, log=lambda s: None, **SMALL)
    assert [e["sha256"] for e in a["clips"]] == [e["sha256"] for e in b["clips"]]
    c = build(tmp_path / "a", seed=4, log=lambda s: None, **SMALL)  # rebuild in place replaces the whole library
    assert [e["sha256"] for e in c["clips"]] != [e["sha256"] for e in a["clips"]]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]


def test_validation_catches_broken_clips(tmp_path):
    p = Performer.sample("X", np.random.default_rng(0))
    m = generate("x", "walk", "happy", p, 1)
    r = Report()
    check_motion(m, r)
    assert r.ok
    m.dofs[:, 0] += np.linspace(0, 0.5, m.frames)  # ramp: not a loop any more
    m.root_pos[40:60, 0] += 0.3  # the whole body (planted feet included) jumps
    m.dofs[10, 5] = 9.0  # beyond a joint limit
    check_motion(m, r)
    assert {"loop_continuity", "joint_limits", "foot_sliding"} <= set(r.failures)
    k = generate("k", "knock", "angry", p, 1)
    r = Report()
    check_motion(k, r, door_plane_x=k.provenance["door_plane_x"] + 0.05)
    assert "knock_contact" in r.failures


def test_library_rejects_corruption(tmp_path):
    root = tmp_path / "lib"
    build(root, seed=1, log=lambda s: None, **SMALL)
    lib = Library(root)
    first = lib.manifest["clips"][0]
    (root / first["file"]).write_bytes(b"not a zip")
    report = validate_library(Library(root), log=lambda s: None)
    assert report.failures["checksum"] == 1
    (root / "manifest.json").write_text("{")
    with pytest.raises(InvalidInput, match="manifest.json"):
        Library(root)
    with pytest.raises(InvalidInput, match="motions build"):
        Library(tmp_path / "nowhere")


def test_per_emotion_walks_follow_the_literature():
    rng = np.random.default_rng(5)
    perf = [Performer.sample(f"T{i}", rng) for i in range(4)]
    speed = {e: np.mean([generate("w", "walk", e, p, 1).provenance["speed"] for p in perf]) for e in EMOTIONS}
    assert speed["angry"] > speed["neutral"] > speed["sad"] and speed["happy"] > speed["neutral"]


def test_manifest_is_json_with_checksums(full):
    lib, _ = full
    text = (lib.root / "manifest.json").read_text()
    data = json.loads(text)
    assert all(len(e["sha256"]) == 64 for e in data["clips"])
    assert lib.load(data["clips"][0]["id"]).emotion == data["clips"][0]["emotion"]
    with pytest.raises(InvalidInput, match="motion id"):
        lib.load("nope")
    bad = lib.load(data["clips"][0]["id"])
    bad.fps = 0
    with pytest.raises(InvalidInput, match="fps"):
        save_motion(bad, tmp := lib.root / "x.npz")
    assert not tmp.exists()


def test_dyadic_sequences_place_both_people(full):
    lib, manifest = full
    seq = manifest["dyadic"][0]
    target, partner = lib.dyadic_placements(seq["id"], 2.0, 3.0, 0.5)
    assert target.is_target and not partner.is_target
    assert target.motion.emotion == seq["emotion"]
    gap = np.hypot(partner.x - target.x, partner.y - target.y)
    assert 0.6 < gap < 1.7  # facing each other at conversational distance
    assert abs(((partner.yaw - target.yaw) % (2 * np.pi)) - np.pi) < 1e-9
    with pytest.raises(InvalidInput, match="dyadic sequence"):
        lib.dyadic_placements("dy99", 0, 0, 0)


def test_knock_meets_a_given_door_plane():
    p = Performer.sample("K", np.random.default_rng(9))
    for emotion in EMOTIONS:
        m = generate("k", "knock", emotion, p, 1, door_x=0.55)
        r = Report()
        check_motion(m, r, door_plane_x=0.55)
        assert r.ok, r.examples


def test_dyadic_context_is_crossed_with_the_target_emotion(full):
    """Each interaction is staged with several target emotions and partner reactions, so that the context
    does not give the target's emotion away; every split holds every target emotion."""
    lib, manifest = full
    seqs = manifest["dyadic"]
    for kind in INTERACTIONS:
        mine = [s for s in seqs if s["interaction"] == kind]
        assert {s["emotion"] for s in mine} == set(EMOTIONS), kind
        assert len({lib.entries[s["partner"]]["emotion"] for s in mine}) >= 2, kind
    groups = split_groups(lib, 0)
    for split in ("train", "val", "test"):
        assert {lib.entries[f"{sid}_target"]["emotion"] for sid in groups[split]["dyadic"]} == set(EMOTIONS), split
    assert [len(groups[s]["dyadic"]) for s in ("train", "val", "test")] == [40, 10, 10]
    for split in ("val", "test"):  # two sequences of every target emotion: the split's classes are balanced
        assert set(Counter(lib.entries[f"{sid}_target"]["emotion"] for sid in groups[split]["dyadic"]).values()) == {2}


def test_rear_view_jobs_go_to_in_place_performances(full):
    lib, _ = full
    jobs = plan_jobs(lib, [{"id": "s0", "doors": 1}], seed=0)
    rear = [j for j in jobs if j["challenge"] == "rear_view"]
    assert rear and not [j for j in rear if lib.entries[j["item"]]["scenario"] == "pacing"]
    pacing = {e["id"] for e in lib.manifest["clips"] if e.get("scenario") == "pacing"}
    assert pacing and {j["item"] for j in jobs if j["challenge"] == "far_visible"} & pacing  # other challenges keep them


def test_a_context_only_classifier_finds_a_deterministic_context_and_not_an_independent_one():
    rng = np.random.default_rng(0)
    kinds = list(INTERACTIONS)
    leaky = [((kinds[k % 4], EMOTIONS[k % 5], 0.8), EMOTIONS[k % 5]) for k in range(200)]  # partner mirrors target
    clf = ContextClassifier(*zip(*leaky))
    assert all(clf.predict(c) == y for c, y in leaky)
    train = [((kinds[rng.integers(4)], EMOTIONS[rng.integers(5)], float(rng.uniform(0.7, 1.6))), EMOTIONS[rng.integers(5)])
             for _ in range(1000)]
    test = [((kinds[rng.integers(4)], EMOTIONS[rng.integers(5)], float(rng.uniform(0.7, 1.6))), EMOTIONS[rng.integers(5)])
            for _ in range(1000)]
    clf = ContextClassifier(*zip(*train))
    y = np.array([EMOTIONS.index(t) for _, t in test])
    p = np.array([EMOTIONS.index(clf.predict(c)) for c, _ in test])
    assert macro_f1(y, p) < 0.3  # chance: 0.2


@pytest.mark.slow  # ~20 s: permutation nulls at the dataset's size
def test_leaving_one_sequence_out_has_the_power_to_find_a_partial_leak_at_the_datasets_size():
    """48 sequences of 30 episodes (the dataset's dyadic size, one distance per sequence): an
    independent context stays below the limit with its permutation null, a partner that mirrors the
    target in half of the sequences is caught, and the score does not depend on the sequences' names."""
    rng = np.random.default_rng(1)
    kinds = list(INTERACTIONS)
    groups = [f"DY{g:02d}" for g in range(48) for _ in range(30)]
    target = {g: EMOTIONS[k % 5] for k, g in enumerate(sorted(set(groups)))}  # one target emotion per sequence
    labels = [target[g] for g in groups]

    def contexts(mirrored: float) -> list:
        out = []
        for g in sorted(set(groups)):
            mirror = rng.uniform() < mirrored
            kind, partner, dist = kinds[rng.integers(4)], EMOTIONS[rng.integers(5)], float(rng.uniform(0.7, 1.6))
            out += [(kind, target[g] if mirror else partner, dist + float(rng.normal(0, 0.02))) for _ in range(30)]
        return out

    independent = contexts(0.0)
    fair = leave_one_sequence_out(independent, labels, groups)
    assert fair["macro_f1"] <= MAX_CONTEXT_F1 and fair["chance_p95"] <= MAX_CONTEXT_F1
    leaky = leave_one_sequence_out(contexts(0.5), labels, groups)
    assert leaky["macro_f1"] > MAX_CONTEXT_F1
    renamed = leave_one_sequence_out(independent, labels, [f"x{g[::-1]}" for g in groups], permutations=0)
    assert renamed["macro_f1"] == fair["macro_f1"]
    assert leave_one_sequence_out([("a", "happy", 1.0)], ["happy"], ["one"]) == {"macro_f1": None, "chance_p95": None}


def test_evolving_clips_balance_emotion_pairs_and_events_independently(full):
    _, manifest = full
    ev = [e for e in manifest["clips"] if e["family"] == "evolving"]
    assert len(ev) == 400
    performers = {e["performer"] for e in ev}
    others = {e["performer"] for e in manifest["clips"] if e["family"] != "evolving"}
    assert len(performers) == 20 and not performers & others  # splits can be performer-disjoint
    last = lambda e: (e["segments"][-2][2], e["segments"][-1][2])  # noqa: E731  the last change
    for p in performers:  # each performer performs every ordered pair once as the last change
        assert Counter(last(e) for e in ev if e["performer"] == p) == Counter(PAIRS), p
    changes = Counter(len(e["segments"]) - 1 for e in ev)
    assert set(changes) == {1, 2} and changes[2] >= 90
    # the last event does not tell the last change: every event comes with many emotion pairs
    by_event: dict = {}
    for e in ev:
        by_event.setdefault(e["events"][-1]["event"], set()).add(last(e))
    assert len(by_event) == 5 and min(len(v) for v in by_event.values()) >= 12
    for e in ev:
        segs = e["segments"]
        assert segs[0][0] == 0 and abs(segs[-1][1] - e["duration"]) < 1e-3 and segs[-1][2] == e["emotion"]
        assert all(a[1] == b[0] and a[2] != b[2] for a, b in zip(segs, segs[1:]))
        assert segs[-1][1] - segs[-1][0] >= 4.0  # the held state is long enough to be seen


def test_every_clip_has_vad_in_range_with_class_means_near_their_prototypes(full):
    lib, manifest = full
    mean = {emo: np.mean([e["vad"] for e in manifest["clips"] if e["family"] != "evolving" and e["emotion"] == emo],
                         axis=0) for emo in EMOTIONS}
    assert mean["happy"][0] > 0.4 > -0.3 > max(mean[k][0] for k in ("angry", "fearful", "sad"))  # valence
    assert mean["angry"][1] > mean["happy"][1] > mean["neutral"][1] > mean["sad"][1]  # arousal
    assert min(mean["angry"][2], mean["happy"][2]) > 0 > max(mean["fearful"][2], mean["sad"][2])  # dominance
    assert np.abs(mean["neutral"]).max() < 0.05
    m = lib.load(next(e["id"] for e in manifest["clips"] if e["family"] == "evolving"))
    assert m.frame_vad.shape == (m.frames, 3) and np.abs(m.frame_vad).max() <= 1


def test_an_evolving_clips_scenario_gives_neither_its_first_nor_its_final_emotion_away(full):
    """Every in-place scenario comes with every emotion before and after the last change equally
    often, for each performer (a Latin square); and over the library with every first emotion."""
    _, manifest = full
    ev = [e for e in manifest["clips"] if e["family"] == "evolving"]
    for p in {e["performer"] for e in ev}:
        mine = [e for e in ev if e["performer"] == p]
        for k in (-2, -1):
            cells = Counter((e["scenario"], e["segments"][k][2]) for e in mine)
            assert len(cells) == 20 and set(cells.values()) == {1}, (p, k, cells)
    # a clip with two changes starts with another emotion: a scenario-only classifier fit on 14 performers
    # reads no emotion of the other 6 better than with permuted labels
    perfs = sorted({e["performer"] for e in ev})
    train = [e for e in ev if e["performer"] not in perfs[-6:]]
    held = [e for e in ev if e["performer"] in perfs[-6:]]
    for k in (0, -1):
        r = shortcut_score([[e["scenario"]] for e in train], [EMOTIONS.index(e["segments"][k][2]) for e in train],
                           [[e["scenario"]] for e in held], [EMOTIONS.index(e["segments"][k][2]) for e in held])
        assert not r["fails"], (k, r)
    assert evolving_scenario(("angry", "sad"), 0) != evolving_scenario(("angry", "happy"), 0)


def test_vad_carries_information_beyond_the_class(full):
    """A clip's arousal and dominance follow its own energy and expansion: at least 30 % of their variance
    lies within the classes; a library whose VAD is the class prototype fails validation."""
    lib, manifest = full
    shares = vad_within_class_share(manifest["clips"])
    assert shares["arousal"] >= MIN_VAD_WITHIN and shares["dominance"] >= MIN_VAD_WITHIN, shares
    prototypes = [{**e, "vad": list(prototype(e["emotion"]))} for e in manifest["clips"]]
    assert vad_within_class_share(prototypes) == {"valence": 0.0, "arousal": 0.0, "dominance": 0.0}
