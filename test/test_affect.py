"""VAD mapping, emotion segments and the evolving-affect metrics, on hand-computed cases."""

import math

import numpy as np
import pytest

from affectsim_core.affect import (
    VAD_PROTOTYPES,
    Segment,
    clip_segments,
    label_at,
    motion_vad,
    parse_segments,
    segments_from_windows,
)
from affectsim_core.errors import InvalidInput
from affectsim_eval.scoring.affect_metrics import (
    ccc,
    match_transitions,
    mean_tiou,
    pearson,
    segment_count_accuracy,
    segment_emotion_accuracy,
    spearman,
    tiou,
    transition_scores,
    vad_scores,
)

S = Segment


def test_prototypes_are_the_published_positions_and_order_the_classes():
    assert VAD_PROTOTYPES["angry"] == (-0.51, 0.59, 0.25) and VAD_PROTOTYPES["sad"] == (-0.63, -0.27, -0.33)
    v = {e: p[0] for e, p in VAD_PROTOTYPES.items()}
    a = {e: p[1] for e, p in VAD_PROTOTYPES.items()}
    d = {e: p[2] for e, p in VAD_PROTOTYPES.items()}
    assert max(v, key=v.get) == "happy" and min(a, key=a.get) == "sad"
    assert d["angry"] > 0 > d["fearful"]  # dominance separates the two high-arousal negative classes


def test_motion_vad_scales_with_strength_and_follows_energy_and_expansion():
    assert np.allclose(motion_vad("neutral", 1.0, 0.0, 0.0), 0)
    # by hand, kinematic share 0.7 and gain 2: the class prototype keeps 0.3 of arousal and dominance
    assert np.allclose(motion_vad("angry", 1.0, 0.0, 0.0), [-0.51, 0.3 * 0.59, 0.3 * 0.25])
    # a = 0.3 * 0.5 * 0.59 + 0.7 * tanh(2 * 0.2); d = 0.3 * 0.5 * 0.25 + 0.7 * tanh(2 * -0.1)
    got = motion_vad("angry", 0.5, 0.2, -0.1)
    assert got == pytest.approx([-0.255, 0.0885 + 0.7 * math.tanh(0.4), 0.0375 + 0.7 * math.tanh(-0.2)])
    assert np.allclose(motion_vad("happy", 3.0, 0, 0), motion_vad("happy", 1.0, 0, 0))  # strength capped at 1
    assert motion_vad("sad", 1, -0.4, 0)[1] < motion_vad("sad", 1, 0.0, 0)[1]  # slower: calmer
    assert np.abs(motion_vad("fearful", 1, 50, -50)).max() <= 1
    with pytest.raises(InvalidInput, match="energy"):
        motion_vad("sad", 1, float("nan"), 0)
    with pytest.raises(InvalidInput, match="emotion"):
        motion_vad("bored", 1, 0, 0)


def test_segments_parse_strictly_and_label_time():
    segs = parse_segments([[0, 5, "angry"], [5, 10, "happy"]], 10.0)
    assert label_at(segs, [-1, 0, 4.99, 5, 12]).tolist() == [0, 0, 0, 2, 2]
    assert clip_segments(segs, 3, 7) == (S(3, 5, "angry"), S(5, 7, "happy"))
    assert clip_segments(segs, 6, 12) == (S(6, 12, "happy"),)
    for bad, field in (([[0, 5, "angry"], [6, 10, "happy"]], r"segments\[1\]"),  # gap
                       ([[0, 5, "angry"], [5, 10, "angry"]], r"segments\[1\]"),  # no change
                       ([[0, 5, "bored"]], r"segments\[0\]"), ([[5, 0, "sad"]], r"segments\[0\]"),
                       ([], "segments")):
        with pytest.raises(InvalidInput, match=field):
            parse_segments(bad)
    with pytest.raises(InvalidInput, match="cover"):
        parse_segments([[0, 5, "angry"]], 10.0)


def test_window_predictions_become_segments():
    t = [0.5, 1.5, 2.5, 3.5]
    assert segments_from_windows(t, [0, 0, 2, 2], 0, 4) == (S(0, 2, "angry"), S(2, 4, "happy"))
    assert segments_from_windows(t, [None, 0, -1, 2], 0, 4) == (S(0, 3, "angry"), S(3, 4, "happy"))
    assert segments_from_windows(t, [0, 0, 0, 2], 0, 4, min_duration=1.5) == (S(0, 4, "angry"),)
    assert segments_from_windows(t, [2, 0, 0, 0], 0, 4, min_duration=1.5) == (S(0, 4, "angry"),)  # into the next
    six = [0.5, 1.5, 2.5, 3.5, 4.5, 5.5]  # a one-window flicker inside a run disappears
    assert segments_from_windows(six, [0, 0, 2, 0, 0, 0], 0, 6, min_duration=1.5) == (S(0, 6, "angry"),)
    assert segments_from_windows(t, [None] * 4, 0, 4) == ()
    with pytest.raises(InvalidInput, match="times"):
        segments_from_windows([1, 0.5], [0, 1], 0, 2)


# two episodes, worked by hand:
# 1: true angry [0,5) happy [5,10); predicted angry [0,4) happy [4,10): counts equal; tIoU 4/5 and 5/6;
#    both segments matched with their emotion; the transition found 1 s early.
# 2: true sad [0,10); predicted sad [0,3) neutral [3,10): counts differ; best tIoU 0.7 (a neutral
#    segment); sad's only match has tIoU 0.3; one false transition.
TRUE = [(S(0, 5, "angry"), S(5, 10, "happy")), (S(0, 10, "sad"),)]
PRED = [(S(0, 4, "angry"), S(4, 10, "happy")), (S(0, 3, "sad"), S(3, 10, "neutral"))]


def test_segment_metrics_on_the_worked_example():
    assert tiou(S(0, 4, "angry"), S(2, 6, "sad")) == pytest.approx(2 / 6)
    assert tiou(S(0, 1, "angry"), S(2, 3, "sad")) == 0
    assert segment_count_accuracy(TRUE, PRED) == 0.5
    assert mean_tiou(TRUE, PRED) == pytest.approx((0.8 + 5 / 6) / 2 / 2 + 0.7 / 2)
    assert segment_emotion_accuracy(TRUE, PRED) == pytest.approx(2 / 3)
    s = transition_scores(TRUE, PRED)
    assert (s["tp"], s["fp"], s["fn"]) == (1, 1, 0)
    assert s["f1"] == pytest.approx(2 / 3) and s["precision"] == 0.5 and s["recall"] == 1.0
    assert s["delay_s"] == pytest.approx(-1.0)
    assert transition_scores(TRUE, PRED, tol=0.5)["tp"] == 0  # 1 s early is outside +-0.5 s
    none = transition_scores([(S(0, 4, "sad"),)], [(S(0, 4, "sad"),)])
    assert none["f1"] is None and none["delay_s"] is None
    with pytest.raises(InvalidInput, match="pred"):
        mean_tiou(TRUE, PRED[:1])


def test_transitions_match_one_to_one_closest_first():
    assert match_transitions([2, 5], [2.6, 4.5, 9]) == [(2, 2.6), (5, 4.5)]
    assert match_transitions([2, 3], [2.9]) == [(3, 2.9)]  # not the first-listed true boundary
    assert match_transitions([2], [3.5]) == []


def test_correlations_on_hand_computed_series():
    assert pearson([1, 2, 3], [2, 3, 4]) == pytest.approx(1)
    assert pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1)
    assert ccc([1, 2, 3], [2, 3, 4]) == pytest.approx(4 / 7)  # 2 (2/3) / (2/3 + 2/3 + 1)
    assert ccc([1, 2, 3], [1, 2, 3]) == pytest.approx(1)
    assert spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(4.5 / math.sqrt(4.5 * 5))  # tied ranks averaged
    assert spearman([1, 2, 3, 4], [1, 8, 27, 64]) == pytest.approx(1)  # monotone, not linear
    assert pearson([1, 1, 1], [1, 2, 3]) is None and ccc([2, 2], [2, 2]) is None
    assert pearson([1, 2, 3, 4, 5, 6, 7], [0.1] * 7) is None  # numpy's std of seven 0.1s is 1.4e-17, not 0
    assert ccc([0, 1, 4], [0.7] * 3) == 0.0  # not numpy's -8.6e-33
    scores = vad_scores(np.array([[0, 0, 0], [1, 1, 1], [2, 2, 3]]), np.array([[0, 0, 1], [1, 2, 1], [2, 1, 0]]))
    assert scores["valence"]["pearson"] == pytest.approx(1) and scores["dominance"]["pearson"] < 0
    with pytest.raises(InvalidInput, match="pred"):
        vad_scores(np.zeros((3, 3)), np.zeros((3, 2)))
    with pytest.raises(InvalidInput, match="values"):
        pearson([1, float("nan")], [1, 2])


def test_a_vad_head_is_fit_on_train_chooses_its_strength_on_val_and_stays_in_range():
    from affectsim_eval.training.vad_fit import fit_vad_head, vad_quality
    from affectsim_perception.recognizers.vad_head import has_vad_head, vad_head

    rng = np.random.default_rng(0)
    w = rng.normal(size=(20, 3)) * 0.15
    x, xv = rng.normal(size=(400, 20)), rng.normal(size=(200, 20))
    y = np.clip(x @ w + 0.05 * rng.normal(size=(400, 3)), -1, 1)
    yv = np.clip(xv @ w, -1, 1)
    arrays, record = fit_vad_head(x, y, xv, yv, log=lambda m: None)
    assert has_vad_head(arrays) and record["alpha"] <= 10 and set(record["val_mean_ccc_by_alpha"]) == {
        "0.1", "1.0", "10.0", "100.0", "1000.0", "10000.0"}
    q = vad_quality(yv, vad_head(arrays, xv))
    assert all(q[d]["ccc"] > 0.95 for d in ("valence", "arousal", "dominance"))
    assert np.abs(vad_head(arrays, 100 * xv)).max() <= 1  # clipped
    noise, _ = fit_vad_head(x, rng.uniform(-1, 1, (400, 3)), xv, rng.uniform(-1, 1, (200, 3)), log=lambda m: None)
    assert vad_quality(yv, vad_head(noise, xv))["valence"]["ccc"] < 0.3  # nothing learned from noise
