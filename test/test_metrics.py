"""Benchmark metrics (docs/protocol.md §8): hand-computed cases, d* against brute force, the registry."""

import json
import math

import numpy as np
import pytest
from helpers import box_room, evolving_records, hand_made_records, typed

from affectsim_bridge.world.navigable import NavigableSpace
from affectsim_bridge.world.scene import load_scene, parse_scene
from affectsim_bridge.content.scene_generator import generate_scene
from affectsim_core.errors import InvalidInput
from affectsim_core.affect import label_at
from affectsim_eval.scoring.affect_metrics import ccc
from affectsim_core.protocol import EMOTIONS, SETTINGS
from affectsim_eval.scoring.metrics import (
    METRICS,
    active_gain,
    annulus_points,
    compute_all,
    d_star,
    e_spl,
    geodesic_to_nearest,
    group_ogr,
    macro_f1,
    ogr,
    per_class_recall,
    recovery_rate,
)

A, F, H, N, S = EMOTIONS


# ---------------------------------------------------------------------------------------------- Macro-F1, recall
def test_macro_f1_hand_computed_with_missing_classes_and_none():
    y = [A, A, H, S, S, S]
    p = [A, H, H, S, None, A]
    # F1: angry 2/(2+1+1), fearful 0 (absent), happy 2/(2+1), neutral 0 (absent), sad 2/(2+0+2)
    assert macro_f1(y, p) == pytest.approx((0.5 + 0 + 2 / 3 + 0 + 0.5) / 5)
    # -1 is the same "no prediction"; indices are the same labels as names
    assert macro_f1([0, 0, 2, 4, 4, 4], [0, 2, 2, 4, -1, 0]) == pytest.approx(1 / 3)
    # "no prediction" is not a prediction of angry (that would make angry 2/(2+2+1))
    assert macro_f1(y, [A, H, H, S, A, A]) == pytest.approx((0.4 + 2 / 3 + 0.5) / 5)


def test_macro_f1_averages_over_all_five_classes():
    assert macro_f1(list(EMOTIONS), list(EMOTIONS)) == 1.0
    assert macro_f1([A, H, A], [A, H, A]) == pytest.approx(2 / 5)  # three absent classes count as 0
    assert macro_f1([A, H], [None, None]) == 0.0


def test_per_class_recall():
    r = per_class_recall([A, A, H, S, S, S], [A, H, H, S, None, A])
    assert r[A] == 0.5 and r[H] == 1.0 and r[S] == pytest.approx(1 / 3)
    assert math.isnan(r[F]) and math.isnan(r[N])
    assert list(r) == list(EMOTIONS)


@pytest.mark.parametrize("y, p, bad", [
    ([A], ["joy"], "joy"),
    (["Angry"], [A], "Angry"),
    ([None], [A], None),          # the truth is never missing
    ([-1], [A], -1),
    ([5], [A], 5),
    ([A], [2.0], 2.0),
    ([A], [True], True),
])
def test_bad_labels_are_rejected_naming_the_value(y, p, bad):
    with pytest.raises(InvalidInput) as err:
        macro_f1(y, p)
    assert err.value.value == bad and repr(bad) in str(err.value)


def test_label_lists_must_pair_up():
    with pytest.raises(InvalidInput, match="as many labels"):
        macro_f1([A, H], [A])
    with pytest.raises(InvalidInput, match="at least one"):
        per_class_recall([], [])


# ---------------------------------------------------------------------------------------------- paired metrics
def test_active_gain_and_ogr():
    assert active_gain(0.3, 0.1) == pytest.approx(0.2)
    assert ogr(0.1, 0.2, 0.15) == pytest.approx(0.5)
    assert ogr(0.1, 0.2, 0.05) == pytest.approx(-0.5)  # not clipped below 0
    assert ogr(0.1, 0.2, 0.3) == pytest.approx(2.0)  # nor above 1
    assert ogr(0.2, 0.2, 0.3) is None
    assert ogr(0.3, 0.2, 0.5) is None


def test_group_ogr_is_ogr_of_means_and_reproduces_the_paper():
    # per-row OGRs are 1 and 0 (mean 0.5); the OGR of the means is 0.05 / 0.25
    rows = [{"p_init": 0.1, "p_ref": 0.2, "a_obs": 0.2}, {"p_init": 0.1, "p_ref": 0.5, "a_obs": 0.1}]
    assert group_ogr(rows) == pytest.approx(0.2)
    # Table 3 means: open source 9.89 / 15.56 / 11.70 -> 32.0 %, closed 22.61 / 30.78 / 24.26 -> 20.1 %
    # (the paper divides unrounded means: the two-decimal means give 31.9 % and 20.2 %)
    open_rows = [{"p_init": 9.0, "p_ref": 15.0, "a_obs": 11.0}, {"p_init": 10.78, "p_ref": 16.12, "a_obs": 12.40}]
    assert group_ogr(open_rows) == pytest.approx((11.70 - 9.89) / (15.56 - 9.89))
    assert abs(group_ogr(open_rows) - 0.320) < 0.0015
    closed = group_ogr([{"p_init": 22.61, "p_ref": 30.78, "a_obs": 24.26}])
    assert closed == pytest.approx(1.65 / 8.17) and abs(closed - 0.201) < 0.0015
    with pytest.raises(InvalidInput):
        group_ogr([{"p_init": 0.1, "p_ref": 0.2}])


def test_recovery_rate():
    # P-Init wrong on episodes 1, 2 (no prediction), 3; A-Obs right on 1 and 2; episode 0 does not count
    assert recovery_rate([0, 1, 2, 3], [0, 2, None, 1], [1, 1, 2, 0]) == pytest.approx(2 / 3)
    assert recovery_rate([A, H], [A, H], [None, None]) is None
    assert recovery_rate([A], [None], [-1]) == 0.0


# ---------------------------------------------------------------------------------------------- E-SPL
def test_e_spl_hand_computed():
    assert e_spl([True], [0.0], [0.0]) == (1.0, 1)  # L = d* = 0: ratio 1
    assert e_spl([False], [0.0], [0.0]) == (0.0, 1)
    # 2 / max(4, 2), 2 / max(1, 2), wrong -> (0.5 + 1 + 0) / 3
    value, n = e_spl([True, True, False], [4.0, 1.0, 2.0], [2.0, 2.0, 1.0])
    assert value == pytest.approx(0.5) and n == 3


def test_e_spl_excluded_episodes_change_n_r():
    correct, lengths = [True, True, False, True], [4.0, 1.0, 2.0, 1.0]
    assert e_spl(correct, lengths, [2.0, 2.0, 1.0, 3.0]) == (pytest.approx(2.5 / 4), 4)
    assert e_spl(correct, lengths, [2.0, 2.0, 1.0, None]) == (pytest.approx(0.5), 3)
    assert e_spl(correct, lengths, [2.0, 2.0, math.nan, None]) == (pytest.approx(0.75), 2)
    assert e_spl(correct, lengths, [None] * 4) == (None, 0)


def test_e_spl_rejects_bad_lengths():
    with pytest.raises(InvalidInput) as err:
        e_spl([True], [-1.0], [2.0])
    assert err.value.value == -1.0
    with pytest.raises(InvalidInput):
        e_spl([True, False], [1.0], [1.0])


# ---------------------------------------------------------------------------------------------- d*
@pytest.fixture(scope="module")
def box():
    """Empty 6 x 4 m room; wall inner faces at 0.05 m, so the robot centre is free in [0.35, 5.65] x [0.35, 3.65]."""
    return NavigableSpace(box_room(), 0.3)


def test_annulus_sampling_density():
    pts = annulus_points((1.0, 2.0), 3.0)
    rho = np.linalg.norm(pts - [1.0, 2.0], axis=1)
    assert rho.min() == pytest.approx(2.9) and rho.max() == pytest.approx(3.1)
    assert np.allclose(np.unique(np.round(rho, 9)), np.linspace(2.9, 3.1, 5))  # radial step tol / 2
    outer = pts[np.isclose(rho, 3.1)]
    gaps = np.linalg.norm(outer - np.roll(outer, 1, axis=0), axis=1)
    assert gaps.max() <= 0.05 + 1e-12
    with pytest.raises(InvalidInput):
        annulus_points((0, 0), 0.05)


def test_d_star_in_an_empty_room(box):
    # from outside the annulus the nearest point is on the outer ring (r + tol): (2.9, 2), seen directly
    d = d_star(box, (1.0, 2.0), (4.0, 2.0), 1.0)
    assert 1.9 - 1e-9 <= d <= 1.9 + 1e-3
    # from the anchor itself: to the inner ring, 0.9 m away in every direction
    assert 0.9 - 1e-9 <= d_star(box, (4.0, 2.0), (4.0, 2.0), 1.0) <= 0.9 + 1e-3
    # start inside the annulus
    assert d_star(box, (3.0, 2.0), (4.0, 2.0), 1.0) == 0.0
    # r = 3 around (5, 2): most of the annulus lies outside the room; the nearest point is (1.9, 2)
    assert 0.9 - 1e-9 <= d_star(box, (1.0, 2.0), (5.0, 2.0), 3.0) <= 0.9 + 1e-3
    # r = 10 around the room centre: no navigable point
    assert d_star(box, (1.0, 2.0), (3.0, 2.0), 10.0) is None


def test_d_star_none_when_region_unreachable_or_not_navigable():
    # room a (0..4 m) is the main region; room b (4..6 m) is closed off by a full wall
    rooms = [{"id": "a", "polygon": [[0, 0], [4, 0], [4, 4], [0, 4]]},
             {"id": "b", "polygon": [[4, 0], [6, 0], [6, 4], [4, 4]]}]
    nav = NavigableSpace(box_room([{"from": [4, 0], "to": [4, 4]}], rooms=rooms), 0.3)
    assert d_star(nav, (1.0, 2.0), (5.0, 2.0), 0.5) is None  # annulus only in room b: free, unreachable
    assert d_star(nav, (5.0, 2.0), (2.0, 2.0), 1.0) is None  # start in room b: annulus navigable, unreachable
    assert d_star(nav, (1.0, 2.0), (2.0, 2.0), 0.5) == pytest.approx(1.0 - 0.6)  # to the outer ring


def test_d_star_keeps_a_free_point_in_a_band_narrower_than_a_raster_cell():
    """scene_027: (8.4625, 0.7875) lies 4.90 m from the anchor, is free and 1.90 m from the start, but its
    5 cm connectivity cell is not free; selecting candidates by the raster gave d*(5) = 4.07."""
    nav = NavigableSpace(parse_scene(generate_scene(27), "scene_027"), 0.3)
    start, anchor, point = (7.3689, 1.8590), (4.4045, 3.5355), np.array([8.4625, 0.7875])
    assert nav.is_free(point)[0] and not nav.is_navigable(point)[0]
    assert nav.geodesic_distance(start, point) == pytest.approx(1.90, abs=0.01)
    assert d_star(nav, start, anchor, 5.0) == pytest.approx(1.90, abs=0.02)  # the nearest sampled annulus point


def _brute(nav, start, cands):
    return min((nav.geodesic_distance(start, c) for c in cands), default=math.inf)


@pytest.mark.parametrize("scene", ["test_apartment", "generated_010"])
def test_d_star_matches_brute_force_on_real_scenes(scene):
    sc = load_scene(scene) if scene == "test_apartment" else parse_scene(generate_scene(10), "scene_010")
    nav = NavigableSpace(sc, 0.3)
    pts = nav.sample(24, np.random.default_rng(3))
    detours = 0
    for k, (start, anchor) in enumerate(zip(pts[:12], pts[12:])):
        r = (1.0, 3.0, 5.0)[k % 3]
        ring = annulus_points(anchor, r)
        cands = ring[nav.is_free(ring)]
        if k == 9:  # d* against every candidate of its annulus (few of them here): a path around walls
            expected = _brute(nav, start, cands)
            assert expected > np.linalg.norm(cands - start, axis=1).min() + 0.1
            assert d_star(nav, start, anchor, r) == pytest.approx(expected, abs=1e-6)
        sub = cands[::15]  # brute force over a subset keeps the other cases fast
        fast, brute = geodesic_to_nearest(nav, start, sub), _brute(nav, start, sub)
        assert fast == pytest.approx(brute, abs=1e-6) if math.isfinite(brute) else math.isinf(fast)
        if math.isfinite(brute) and brute > np.linalg.norm(sub - start, axis=1).min() + 0.1:
            detours += 1
    assert detours >= 3  # the cases include paths that wrap obstacles, not only straight moves


def test_geodesic_to_nearest_edge_cases(box):
    assert math.isinf(geodesic_to_nearest(box, (1.0, 2.0), np.zeros((0, 2))))
    assert math.isinf(geodesic_to_nearest(box, (0.1, 2.0), [[3.0, 2.0]]))  # start in the wall
    assert geodesic_to_nearest(box, (1.0, 2.0), [[3.0, 2.0], [1.0, 3.0], [0.0, 0.0]]) == pytest.approx(1.0)


# ---------------------------------------------------------------------------------------------- records, registry
@pytest.fixture
def records():
    return hand_made_records()


def test_metrics_on_hand_made_records(records):
    out = compute_all(typed(records))
    f1 = out["macro_f1"]
    # a: P-Init F1 happy 2/3 only; A-Obs angry 1, happy 1, sad 2/3; P-Ref perfect on 4 of 5 classes
    assert f1["a"]["p_init"] == pytest.approx(2 / 15)
    assert f1["a"]["a_obs"] == pytest.approx(8 / 15)
    assert f1["a"]["p_ref"] == f1["b"]["p_ref"] == pytest.approx(0.8)
    assert f1["b"]["a_obs"] == 0.0 and f1["a"]["p_mon"] == 0.0
    assert out["per_class_recall"]["a"]["a_obs"][N] == 0.0 and math.isnan(out["per_class_recall"]["a"]["a_obs"][F])
    assert out["active_gain"] == pytest.approx({"a": 0.4, "b": -0.8, "group": -0.2})
    # a: (8 - 2) / (12 - 2); b: P-Ref = P-Init; group: means 7/15, 12/15, 4/15 -> -3/5, not clipped
    assert out["ogr"]["a"] == pytest.approx(0.6) and out["ogr"]["b"] is None
    assert out["ogr"]["group"] == pytest.approx(-0.6)
    assert out["recovery_rate"] == {"a": pytest.approx(2 / 3), "b": None}
    # @1: a = (1/2 + 1 (L = d* = 0) + 0) / 3 with episode 2 excluded; @3: nothing valid
    assert out["e_spl@1"] == {"a": {"value": pytest.approx(0.5), "n_valid": 3}, "b": {"value": 0.0, "n_valid": 3}}
    assert out["e_spl@3"]["a"] == {"value": None, "n_valid": 0}
    assert out["e_spl@5"]["a"] == {"value": pytest.approx(0.75), "n_valid": 4}
    assert out["table6"] == pytest.approx({"handoff_pct": 50.0, "mean_path_m": 2.0, "path_before_handoff_pct": 87.5,
                                           "budget_exhausted_pct": 50.0, "clipped_pct": 10.0})


def test_records_must_be_paired_and_valid(records):
    del records[2]["predictions"]["a"]["p_ref"]
    with pytest.raises(InvalidInput) as err:
        METRICS.create("macro_f1").compute(typed(records))
    assert err.value.where == "ep2"
    with pytest.raises(InvalidInput):
        METRICS.create("ogr").compute([])


def test_records_reject_bad_labels_and_reserved_names(records):
    records[1]["predictions"]["a"]["a_obs"] = "joy"
    with pytest.raises(InvalidInput) as err:
        METRICS.create("e_spl@1").compute(typed(records))
    assert err.value.value == "joy"
    records[1]["predictions"]["a"]["a_obs"] = H
    for r in records:
        r["predictions"]["group"] = r["predictions"].pop("b")
    with pytest.raises(InvalidInput, match="reserved"):
        METRICS.create("ogr").compute(typed(records))


def test_ogr_needs_the_three_settings(records):
    for r in records:
        del r["predictions"]["b"]["p_ref"]
    assert "b" in METRICS.create("macro_f1").compute(typed(records))
    with pytest.raises(InvalidInput, match="p_ref"):
        METRICS.create("ogr").compute(typed(records))


def test_registry_ids_are_stable_and_unique():
    shipped = [n for n in METRICS.names() if METRICS.get(n).__module__.startswith("affectsim_")]  # not users' plugins
    assert shipped == sorted(["macro_f1", "per_class_recall", "active_gain", "ogr", "recovery_rate",
                                      "e_spl@1", "e_spl@3", "e_spl@5", "table6", "macro_f1_new_obs", "intervals",
                                      "macro_f1_by_family", "social_measures", "affect_segments",
                                      "affect_transitions", "affect_vad"])
    for name in METRICS.names():
        metric = METRICS.create(name)
        assert metric.name == name  # from the registration, never spelled twice
        assert metric.description and "\n" not in metric.description
    assert len({METRICS.get(n) for n in METRICS.names()}) == len(METRICS.names())
    with pytest.raises(KeyError, match=r"unknown metric 'e_spl@2'; registered: .*e_spl@1"):
        METRICS.get("e_spl@2")
    with pytest.raises(KeyError, match="already registered"):
        METRICS.register("ogr")(object)


def test_evolving_affect_metrics_on_the_worked_example():
    records = typed(evolving_records())
    seg = METRICS.create("affect_segments").compute(records)
    assert set(seg) == {"a", "b"} and set(seg["a"]) == set(SETTINGS)
    assert seg["a"]["p_init"] == pytest.approx({"count_accuracy": 0.5, "mean_tiou": (0.8 + 5 / 6) / 4 + 0.35,
                                                "emotion_accuracy": 2 / 3, "episodes": 2})
    tr = METRICS.create("affect_transitions").compute(records)["b"]["a_obs"]
    assert (tr["tp"], tr["fp"], tr["fn"]) == (1, 1, 0) and tr["f1"] == pytest.approx(2 / 3)
    assert tr["delay_s"] == pytest.approx(-1.0)
    vad = METRICS.create("affect_vad").compute(records)
    assert set(vad) == {"a"}  # only "a" rates VAD
    v = vad["a"]["p_init"]
    assert v["windows"] == 19  # one window without a rating is left out
    assert v["valence"]["pearson"] == pytest.approx(1) and v["valence"]["spearman"] == pytest.approx(1)
    assert 0.9 < v["valence"]["ccc"] < 1  # the 0.1 offset costs concordance, not correlation
    assert v["arousal"]["ccc"] == pytest.approx(1)
    ref = v["from_class"]  # the class-mean lookup of "a"'s own predicted labels
    assert ref["windows"] == sum(y is not None for r in records for y in r.streams.labels["a"]["p_init"])
    means = {}
    for r in records:
        for k, t in zip(label_at(r.streams.segments, np.asarray(r.streams.times)), r.streams.vad):
            means.setdefault(EMOTIONS[k], []).append(t)
    everything = [t for v in means.values() for t in v]
    pairs = [(t, np.mean(means.get(y, everything), 0)) for r in records
             for t, y in zip(r.streams.vad, r.streams.labels["a"]["p_init"]) if y is not None]
    assert set(means) < set(EMOTIONS)  # a predicted class no true window holds gets the mean of all windows
    assert ref["valence"]["ccc"] == pytest.approx(ccc([t[0] for t, _ in pairs], [p[0] for _, p in pairs]))
    lines = "\n".join(METRICS.create("affect_vad").section(
        {"settings": list(SETTINGS), "affect": {"segments": seg, "vad": vad}}, {}))
    assert "| a: its class, looked up | valence |" in lines
    plain = typed(hand_made_records())  # no evolving episode: nothing to measure
    assert all(METRICS.create(m).compute(plain) == {} for m in ("affect_segments", "affect_transitions", "affect_vad"))


def test_streams_are_validated_naming_the_field():
    good = evolving_records()[0]
    for edit, field in ((lambda s: s.update(times=s["times"][::-1]), "streams.times"),
                        (lambda s: s.update(segments=[[0, 4, "angry"], [5, 10, "happy"]]), r"segments\[1\]"),
                        (lambda s: s.update(segments=[[0, 9, "angry"]]), "streams.segments"),
                        (lambda s: s.update(vad=s["vad"][:3]), "streams.vad"),
                        (lambda s: s["labels"]["a"].update(p_init=["bored"] * 10), r"streams.labels\['a'\]"),
                        (lambda s: s["pred_vad"]["a"].update(p_init=[[2, 0, 0]] * 10), r"streams.pred_vad\['a'\]")):
        bad = json.loads(json.dumps(good))
        edit(bad["streams"])
        with pytest.raises(InvalidInput, match=field):
            typed([bad])


def test_report_shows_evolving_affect_tables_only_with_evolving_episodes():
    from affectsim_eval.run.report import render, summarize

    text = render(summarize(typed(hand_made_records() + evolving_records())), {}, [], {})
    assert "## Evolving affect: segments and transitions" in text and "| a | mean tIoU | 75.8 |" in text
    assert "| b | detection delay s | -1.00 | -1.00 | -1.00 | -1.00 |" in text
    assert "| a | valence | 0.99 / 1.00 / 1.00 | – | – | 0.99 / 1.00 / 1.00 |" in text  # "a" rates P-Init, A-Obs
    assert "Evolving affect" not in render(summarize(typed(hand_made_records())), {}, [], {})
