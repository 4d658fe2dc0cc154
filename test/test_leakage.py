"""Nothing but the sensors gives a label away: the metadata-only classifier of `affectsim dataset validate`."""

from dataclasses import replace

import pytest

from affectsim_core.protocol import EMOTIONS
from affectsim_eval.dataset.build import episode_id
from affectsim_eval.dataset.episodes import load_split
from affectsim_eval.dataset.inspect import MAX_CLASS_RATIO, balance_problems
from affectsim_eval.dataset.leakage import (
    MARGIN,
    TokenBayes,
    leak_problems,
    policy_fields_leak,
    shortcut_score,
    string_tokens,
    visible_fields,
)


@pytest.fixture(scope="module")
def template(small_data):
    root, _ = small_data
    return next(e for e in load_split("test", root / "episodes") if e.family == "action_grounded")


def _episodes(template, split: str, n: int, name) -> list:
    """``n`` copies of ``template`` in ``split`` with emotion index % 5 and the id ``name(split, index)``."""
    return [replace(template, episode_id=name(split, i), emotion=EMOTIONS[i % 5]) for i in range(n)]


def test_an_index_in_the_id_is_found_and_the_builds_opaque_ids_pass(template):
    """Ids of the old form (``test_ag_000042``: the index modulo 10 told the emotion) fail the check; the
    build's ids, a hash of the job, score at chance."""
    def old(split, i):
        return f"{split}_ag_{i:06d}"

    def built(split, i):
        return episode_id({"seed": 1234 + i, "split": split, "family": "action_grounded", "index": i})

    leaky = {s: _episodes(template, s, n, old) for s, n in (("train", 400), ("val", 100), ("test", 100))}
    found = policy_fields_leak(leaky)
    assert found["episode_id"]["action_grounded"]["macro_f1"] == 1.0 and found["episode_id"]["action_grounded"]["fails"]
    assert found["all"]["action_grounded"]["fails"]
    assert "metadata_predicts_label:episode_id:action_grounded" in leak_problems(found, {})
    opaque = {s: _episodes(template, s, n, built) for s, n in (("train", 400), ("val", 100), ("test", 100))}
    fine = policy_fields_leak(opaque)["episode_id"]["action_grounded"]
    assert not fine["fails"] and fine["macro_f1"] <= fine["chance"] + MARGIN, fine
    assert len(built("test", 3)) == len("test_") + 12 and built("test", 3) != built("test", 4)


def test_the_fields_are_what_reaches_a_policy(template):
    fields = visible_fields(template)
    assert set(fields) == {"episode_id", "scene", "start_pose", "target_description"}
    assert fields["target_description"] == string_tokens("")  # only a dyadic target is described
    assert ("mod", 10, 2) in string_tokens("test_ag_000042") and ("part", "ag") in string_tokens("test_ag_000042")


def test_a_classifier_reads_a_token_that_carries_the_label_and_not_one_that_does_not():
    rows = [[("colour", EMOTIONS[i % 5])] for i in range(100)]
    labels = [i % 5 for i in range(100)]
    clf = TokenBayes(rows, labels)
    assert [clf.predict(r) for r in rows] == labels
    assert clf.predict([("never", "seen")]) == 0  # no evidence: the prior (ties: the first class)
    flat = shortcut_score([[("x", i % 3)] for i in range(300)], [i % 5 for i in range(300)],
                          [[("x", i % 3)] for i in range(100)], [i % 5 for i in range(100)])
    assert not flat["fails"]


def test_unbalanced_classes_are_named(template):
    eps = {"train": _episodes(template, "train", 50, lambda s, i: f"{s}_{i}")}
    assert balance_problems(eps, {"macro_f1": None}) == {}
    extra = [replace(template, episode_id=f"more_{i}", emotion="angry") for i in range(4)]
    worse = {"train": eps["train"] + extra}  # angry 14, the others 10: a ratio of 1.4
    assert 14 / 10 > MAX_CLASS_RATIO
    assert balance_problems(worse, {"macro_f1": None}) == {
        "classes_unbalanced:train:action_grounded": "angry 14, fearful 10, happy 10, neutral 10, sad 10"}
