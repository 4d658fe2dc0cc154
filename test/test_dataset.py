"""Dataset build at a small scale: splits, group disjointness, validation, loader errors, counterfactuals."""

import gzip
import json
import shutil
from dataclasses import replace

import pytest

from affectsim_bridge.content.library import Library
from affectsim_core.errors import InvalidInput
from affectsim_core.protocol import CHALLENGES, EMOTIONS
from affectsim_eval.dataset.episodes import dataset_version, load_split, read_manifest, write_split
from affectsim_eval.dataset.fingerprint import SCALE, differences, read_reference
from affectsim_eval.dataset.inspect import balance_problems, counterfactual, validate_dataset
from affectsim_eval.dataset.splits import stratified_subset


@pytest.fixture(scope="module")
def small(small_data):
    return small_data


def test_splits_follow_the_paper_proportions_and_are_group_disjoint(small):
    root, manifest = small
    rep = manifest["report"]
    assert rep["built"] >= 0.9 * rep["requested"]
    eps = {s: load_split(s, root / "episodes") for s in ("train", "val", "test")}
    assert len(eps["train"]) > len(eps["val"]) > 0 and len(eps["test"]) > 0
    groups = {s: {(e.family, e.group) for e in v} for s, v in eps.items()}
    assert not groups["train"] & groups["val"] and not groups["train"] & groups["test"]
    assert not groups["val"] & groups["test"]
    perf = {s: {e.humans[0].motion_id.split("_")[1] for e in v if e.family == "action_grounded"}
            for s, v in eps.items()}
    assert perf["train"] <= {f"AG0{i}" for i in range(1, 9)} and perf["test"] <= {"AG11", "AG12"}
    oc = [e for e in eps["train"] if e.family == "observation_controlled"]
    assert {e.challenge for e in oc} == set(CHALLENGES)


def test_every_episode_validates(small):
    root, _ = small
    rep = validate_dataset(root / "episodes", motions=root / "motions", scenes_dir=root / "scenes",
                           log=lambda s: None)
    assert rep["problems"] == {}, rep["examples"]


def test_loader_rejects_corruption_and_bad_references(small, tmp_path):
    root, _ = small
    eps = load_split("test", root / "episodes")
    with pytest.raises(InvalidInput, match="scene_id"):
        load_split("test", root / "episodes", scenes={"nowhere"})
    with pytest.raises(InvalidInput, match="episode_id.*duplicate"):
        write_split(tmp_path / "dup.json.gz", "test", [eps[0], eps[0]])
    bad = replace(eps[0], start_position=(0.0, float("nan"), 0.0))
    with pytest.raises(InvalidInput, match=f"episode {eps[0].episode_id}.*start_position"):
        write_split(tmp_path / "bad.json.gz", "test", [bad])

    copy = tmp_path / "copy"
    shutil.copytree(root / "episodes", copy)
    raw = (copy / "test.json.gz").read_bytes()
    (copy / "test.json.gz").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(InvalidInput, match="checksum"):
        load_split("test", copy)
    doc = json.loads(gzip.decompress(raw))
    assert doc["format"] == "affectsim-episodes/1"


def test_counterfactual_keeps_the_observation_conditions(small):
    root, _ = small
    ep = next(e for e in load_split("train", root / "episodes") if e.family == "action_grounded")
    lib = Library(root / "motions")
    other = next(e for e in ("angry", "sad", "happy") if e != ep.emotion)
    cf = counterfactual(ep, other, lib)
    t0, t1 = ep.humans[0], cf.humans[0]
    assert cf.emotion == other and lib.entries[t1.motion_id]["emotion"] == other
    assert lib.entries[t1.motion_id]["action"] == lib.entries[t0.motion_id]["action"]
    assert (t1.x, t1.y, t1.yaw) == (t0.x, t0.y, t0.yaw)
    assert cf.start_position == ep.start_position and cf.scene_id == ep.scene_id
    assert cf.counterfactual_of == ep.episode_id
    assert other not in cf.episode_id and cf.episode_id != counterfactual(ep, "fearful", lib).episode_id  # opaque, distinct


def test_stratified_subsets_of_any_size_are_proportional_and_seeded(small):
    root, _ = small
    eps = load_split("train", root / "episodes")
    strata = {(e.family, e.challenge or "") for e in eps}
    full = stratified_subset(eps, len(strata) + 3, seed=1)
    assert len(full) == len(strata) + 3 and {(e.family, e.challenge or "") for e in full} == strata
    few = stratified_subset(eps, 2, seed=1)  # fewer than the strata: the two largest, one each
    assert len(few) == 2 and len({(e.family, e.challenge or "") for e in few}) == 2
    assert [e.episode_id for e in few] == [e.episode_id for e in stratified_subset(eps, 2, seed=1)]
    with pytest.raises(InvalidInput, match="episodes=0 is invalid"):
        stratified_subset(eps, 0)


def test_the_dataset_version_is_recorded_and_checked_against_the_split_hashes(small, tmp_path):
    root, manifest = small
    hashes = {s: manifest["splits"][s]["sha256"] for s in ("train", "val", "test")}
    assert manifest["version"] == dataset_version(hashes) == read_manifest(root / "episodes")["version"]
    assert dataset_version({**hashes, "test": "0" * 64}) != manifest["version"]  # any split changes it
    copy = tmp_path / "episodes"
    shutil.copytree(root / "episodes", copy)
    edited = {**manifest, "version": "0123456789ab"}
    (copy / "manifest.json").write_text(json.dumps(edited))
    with pytest.raises(InvalidInput, match=f"manifest.version='0123456789ab' is invalid; expected '{manifest['version']}'"):
        load_split("test", copy)
    del edited["version"]  # a manifest from before versions were recorded: computed from its hashes
    (copy / "manifest.json").write_text(json.dumps(edited))
    assert read_manifest(copy)["version"] == manifest["version"]


def test_fingerprint_differences_name_both_hashes(small, tmp_path):
    _, manifest = small
    built = {"seed": 0, "scale": 0.004, "version": manifest["version"],
             "episodes": {s: manifest["splits"][s]["episodes"] for s in ("train", "val", "test")},
             "splits_sha256": {s: manifest["splits"][s]["sha256"] for s in ("train", "val", "test")}}
    assert differences(built, built) == []
    ref = json.loads(json.dumps(built))
    ref["splits_sha256"]["val"], ref["version"] = "f" * 64, "abcdefabcdef"
    diff = differences(built, ref)
    assert diff[0] == f"dataset version: built {built['version']}, reference abcdefabcdef"
    assert diff[1].startswith(f"val split SHA-256: built {built['splits_sha256']['val']}, reference {'f' * 64}")
    assert len(diff) == 2
    bad = tmp_path / "ref.json"
    bad.write_text(json.dumps({"seed": 0}))
    with pytest.raises(InvalidInput, match="dataset reference.scale"):
        read_reference(bad)
    assert read_reference()["scale"] == SCALE  # the committed reference (CI rebuilds it: make dataset-check)


def test_balance_problems_name_a_missing_emotion_and_a_leaking_context(small):
    root, _ = small
    splits = {s: load_split(s, root / "episodes") for s in ("train", "val", "test")}
    full = {s: [e for e in eps if e.family == "action_grounded"] for s, eps in splits.items()}
    fine = {"macro_f1": 0.2, "chance_p95": 0.22, "episodes": 1440, "sequences": 48}
    assert {e.emotion for e in full["train"]} == set(EMOTIONS)
    assert balance_problems({"train": full["train"]}, fine) == {}
    no_sad = {"train": [e for e in full["train"] if e.emotion != "sad"]}
    assert balance_problems(no_sad, fine) == {"split_missing_emotion:train:action_grounded": "sad"}
    leak = balance_problems({}, {**fine, "macro_f1": 0.76})
    assert leak == {"dyadic_context_predicts_label": "context-only Macro-F1 0.76 > 0.25 (leave one sequence out)"}


def test_the_evolving_family_is_performer_disjoint_plays_from_the_start_and_is_chosen_explicitly(small):
    from affectsim_eval.run.config import EvalConfig, select_episodes

    root, manifest = small
    eps = {s: [e for e in load_split(s, root / "episodes") if e.family == "evolving"] for s in ("train", "val", "test")}
    assert all(eps.values()), {s: len(v) for s, v in eps.items()}  # every split has evolving episodes
    performers = {s: {e.group for e in v} for s, v in eps.items()}
    assert not performers["train"] & performers["val"] and not performers["val"] & performers["test"]
    assert not performers["train"] & performers["test"]
    lib = Library(root / "motions")
    for e in eps["test"]:
        assert e.target.phase == 0.0 and e.episode_id.startswith("test_")
        assert len(lib.load(e.target.motion_id).segments) > 1 and e.emotion == lib.entries[e.target.motion_id]["emotion"]
    assert all(s["families"].get("evolving") for s in manifest["splits"].values())
    # the default subset keeps the paper's families; evolving ones are asked for
    default = select_episodes(EvalConfig(episodes=0), root)
    assert default and all(e.family != "evolving" for e in default)
    chosen = select_episodes(EvalConfig(episodes=2, families=("evolving",)), root)
    assert chosen and all(e.family == "evolving" for e in chosen)
    with pytest.raises(InvalidInput, match="families"):
        EvalConfig(families=("cyclic",)).validate()
    bad = replace(eps["test"][0], humans=(replace(eps["test"][0].target, phase=1.0),))  # validation catches it
    from affectsim_eval.dataset import inspect

    inspect._init(str(root / "motions"), str(root / "scenes"))
    from affectsim_bridge.world.scene import load_scene
    from affectsim_eval.dataset.composer import SceneContext

    ctx = SceneContext(load_scene(bad.scene_id, root / "scenes"))
    try:
        assert "evolving_phase_not_zero" in inspect.check_episode_in_scene(ctx, bad)
        assert inspect.check_episode_in_scene(ctx, eps["test"][0]) == []
        wrong = replace(bad, family="observation_controlled", challenge="far_visible",
                        humans=(eps["test"][0].target,))
        assert "evolving_clip_mismatch" in inspect.check_episode_in_scene(ctx, wrong)
    finally:
        ctx.close()


def test_performer_overlap_is_counted_per_family(small):
    """Action-grounded and evolving splits are performer-disjoint; observation-controlled ones are split by
    source performance, so their test performers also perform in train."""
    from affectsim_eval.dataset.inspect import performer_overlap

    root, _ = small
    splits = {s: load_split(s, root / "episodes") for s in ("train", "val", "test")}
    overlap = performer_overlap(splits, Library(root / "motions"))
    for fam in ("action_grounded", "evolving"):
        assert overlap[fam]["test"] > 0 and overlap[fam]["performer_in_train"] == overlap[fam]["twinned"] == 0, fam
    oc = overlap["observation_controlled"]
    assert 0 < oc["performer_in_train"] <= oc["test"] and oc["twinned"] <= oc["performer_in_train"]


def test_twinned_finds_another_take_of_the_same_performance_in_train(small):
    """A held-out clip is twinned when train holds the same performer, action, scenario and emotion in
    another take; the same clip, or another scenario, is not a twin."""
    from types import SimpleNamespace

    from affectsim_eval.dataset.inspect import twinned

    root, _ = small
    ep = next(e for e in load_split("test", root / "episodes") if e.family == "observation_controlled")
    take = {"performer": "OC01", "action": "standing", "emotion": "sad"}
    lib = SimpleNamespace(entries={"g1": {**take, "scenario": "gestures"}, "g2": {**take, "scenario": "gestures"},
                                   "p1": {**take, "scenario": "pacing"}})

    def showing(clip: str, eid: str):
        return replace(ep, episode_id=eid, humans=(replace(ep.humans[0], motion_id=clip), *ep.humans[1:]))

    train = [showing("g1", "a")]
    held = [showing("g2", "b"), showing("p1", "c"), showing("g1", "d")]
    assert twinned(train, held, lib) == {"b"}
