"""The report's intervals and verdicts (affectsim_eval.scoring.uncertainty): estimates equal the
metrics', resamples are paired and stratified, verdicts follow the interval, not the estimate."""

from __future__ import annotations

import numpy as np
import pytest

from affectsim_core.protocol import EMOTIONS
from affectsim_core.resampling import stratified_weights
from affectsim_eval.run.report import render, summarize, validity
from affectsim_eval.scoring.metrics import compute_all
from affectsim_eval.scoring import uncertainty
from affectsim_eval.scoring.uncertainty import DISTINCT, GROUP, distinct_models, episodes_needed, greater


def intervals(*args, **kwargs):
    return uncertainty.typed(uncertainty.intervals(*args, **kwargs))
from helpers import hand_made_records, typed


def _run(n: int, p_init: float, a_obs: float, seed: int = 0, families=("action_grounded", "dyadic")) -> list:
    """``n`` paired episodes: recognizer "a" right with probability ``p_init`` at P-Init and P-Mon,
    ``a_obs`` at A-Obs and P-Ref; "b" a copy of "a"; "uniform" a fixed guess per episode."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        label = EMOTIONS[i % 5]
        wrong = EMOTIONS[(i + 1) % 5]
        hit_i, hit_a = rng.random() < p_init, rng.random() < a_obs
        a = {"p_init": label if hit_i else wrong, "p_mon": label if hit_i else wrong,
             "p_ref": label if hit_a else wrong, "a_obs": label if hit_a else wrong}
        guess = EMOTIONS[int(rng.integers(5))]
        out.append({"episode_id": f"e{i}", "family": families[i % len(families)], "label": label,
                    "predictions": {"a": a, "b": dict(a), "uniform": {x: guess for x in a}},
                    "a_obs": {"path_length": 2.0, "fallback": False, "diagnostics": hand_made_records()[0]["a_obs"][
                        "diagnostics"]},
                    "d_star": {"1": 1.0, "3": None, "5": 4.0}})
    return typed(out)


def test_estimates_are_the_metrics_values():
    records = typed(hand_made_records())
    iv = intervals(records, ["a", "b"], {})
    ref = compute_all(records)
    for rec in ("a", "b"):
        for x, v in ref["macro_f1"][rec].items():
            assert iv["macro_f1"][rec][x].estimate == pytest.approx(v, abs=1e-12)
        assert iv["recovery"][rec].estimate == ref["recovery_rate"][rec]
        for r in (1, 3, 5):
            want = ref[f"e_spl@{r}"][rec]["value"]
            got = iv["e_spl"][r][rec].estimate
            assert (got is None and want is None) or got == pytest.approx(want, abs=1e-12)
    assert iv["ogr"][GROUP].estimate == pytest.approx(ref["ogr"][GROUP])
    assert iv["gain"][GROUP]["a_obs"].estimate == pytest.approx(ref["active_gain"][GROUP])


def test_resamples_keep_each_family_size_and_repeat_with_the_seed():
    strata = ["a"] * 7 + ["b"] * 3 + ["a"] * 2
    w = stratified_weights(strata, 500, seed=3)
    assert w.shape == (501, 12) and (w[0] == 1).all()
    a = np.array(strata) == "a"
    assert (w[1:, a].sum(axis=1) == 9).all() and (w[1:, ~a].sum(axis=1) == 3).all()
    assert len({tuple(row) for row in w[1:]}) > 400  # resamples differ
    assert (stratified_weights(strata, 500, seed=3) == w).all()
    assert not (stratified_weights(strata, 500, seed=4) == w).all()


def test_a_clear_gain_holds_on_many_episodes_and_is_undetermined_on_few():
    big = intervals(_run(600, 0.3, 0.6), ["a", "b"], {})
    assert greater(big["gain"][GROUP]["a_obs"]) == "holds"
    assert big["gain"][GROUP]["a_obs"].low > 0.1
    small = intervals(_run(12, 0.3, 0.6), ["a", "b"], {})
    assert greater(small["gain"][GROUP]["a_obs"]) == "undetermined at this size"
    worse = intervals(_run(600, 0.6, 0.3), ["a", "b"], {})
    assert greater(worse["gain"][GROUP]["a_obs"]) == "does not hold"
    # the size a run needs shrinks as the observed difference grows, and scales with 1/se^2
    need = episodes_needed(small["gain"][GROUP]["a_obs"])
    assert need is not None and need > 12


def test_a_gain_on_the_same_episodes_is_paired():
    """P-Ref and A-Obs make the same predictions: their difference is exactly 0 on every resample,
    although each one's own interval is wide."""
    iv = intervals(_run(40, 0.3, 0.6), ["a", "b"], {})
    ref, aobs = iv["macro_f1"]["a"]["p_ref"], iv["macro_f1"]["a"]["a_obs"]
    assert ref.high - ref.low > 0.1 and (ref.low, ref.high) == (aobs.low, aobs.high)
    assert (iv["gain"]["a"]["p_ref"].low, iv["gain"]["a"]["p_ref"].high) == (iv["gain"]["a"]["a_obs"].low,
                                                                           iv["gain"]["a"]["a_obs"].high)


def test_a_view_that_reads_better_than_the_reference_is_found_above_p_ref():
    """A-Obs − P-Ref is the metrics' difference on the same episodes, exactly 0 where the two settings predict
    alike, holds where A-Obs reads better, and the report states the verdict from its interval."""
    same = intervals(_run(40, 0.3, 0.6), ["a", "b"], {})
    d = same["beyond_ref"][GROUP]
    assert d.estimate == 0 and d.low == 0 and d.high == 0  # P-Ref and A-Obs predict alike in _run
    records = _run(600, 0.3, 0.6)
    for r in records:  # P-Ref now reads as P-Init does
        for rec in ("a", "b"):
            r.predictions[rec]["p_ref"] = r.predictions[rec]["p_init"]
    iv = intervals(records, ["a", "b"], {})
    f1 = compute_all(records)["macro_f1"]["a"]
    assert iv["beyond_ref"]["a"].estimate == pytest.approx(f1["a_obs"] - f1["p_ref"])
    assert greater(iv["beyond_ref"][GROUP]) == "holds" and iv["beyond_ref"][GROUP].low > 0.1
    s = summarize(records)
    line = next(line for line in validity(s) if "A-Obs > P-Ref" in line)
    assert "**holds**" in line, line
    # read as the claims against P-Init are: beside the noise floors, with the smallest difference the run detects
    assert "noise floors: uniform" in line and "This run detects" in line, line
    assert "A-Obs − P-Ref" in render(s, {}, [], {})


def test_an_ensemble_of_the_runs_models_counts_once_in_the_distinct_group():
    assert distinct_models(["committee", "pose", "rgb"], {"committee": ("pose", "rgb")}) == ["pose", "rgb"]
    assert distinct_models(["committee", "pose"], {"committee": ("pose", "rgb")}) == ["committee", "pose"]
    iv = intervals(_run(30, 0.3, 0.6), ["a", "b"], {"b": ("a",)})
    assert iv["groups"] == {GROUP: {"a": 1, "b": 1}, DISTINCT: {"a": 1}}
    assert iv["macro_f1"][DISTINCT]["p_init"].estimate == iv["macro_f1"]["a"]["p_init"].estimate


def test_the_report_reads_its_verdicts_from_the_intervals():
    s = summarize(_run(12, 0.3, 0.6))
    lines = validity(s)
    aobs = next(line for line in lines if "A-Obs > P-Init" in line)
    assert "**undetermined at this size**" in aobs and "noise floors: uniform" in aobs and "[" in aobs
    text = render(s, {}, [], {})
    assert "## Intervals (95 %, paired bootstrap over episodes)" in text and "seed 0" in text
    assert "episodes to detect the observed" in text
    assert "**holds**" in validity(summarize(_run(600, 0.3, 0.6)))[2]


def test_differences_between_two_runs_are_paired_and_equal_the_metrics():
    """Two runs of the same episodes: each difference's estimate is that of the metrics (per recognizer, for
    the group, per family); an E-SPL radius without a d* is undefined; a run against itself differs by
    exactly 0 on every resample; runs of other episodes or other recognizers are refused."""
    from affectsim_core.errors import InvalidInput

    first, other = _run(60, 0.3, 0.3, seed=1), _run(60, 0.3, 0.6, seed=2)
    for r in other[::3]:  # "b" no longer a copy of "a": the group is the mean of two
        r.predictions["b"]["a_obs"] = EMOTIONS[(EMOTIONS.index(r.label) + 2) % 5]
    d = uncertainty.differences(first, other, ["a", "b"])
    fa, fb = compute_all(first), compute_all(other)
    diff = {m: fb["macro_f1"][m]["a_obs"] - fa["macro_f1"][m]["a_obs"] for m in ("a", "b")}
    assert diff["a"] != pytest.approx(diff["b"])
    assert d["a_obs"]["b"]["estimate"] == pytest.approx(diff["b"])
    assert d["a_obs"][GROUP]["estimate"] == pytest.approx((diff["a"] + diff["b"]) / 2)
    assert d["a_obs"]["a"]["low"] > 0.1  # a 30-point gain on 60 episodes
    recovery = lambda res: np.mean([res["recovery_rate"][m] for m in ("a", "b")])  # noqa: E731
    assert d["recovery"]["estimate"] == pytest.approx(recovery(fb) - recovery(fa))
    espl = lambda res: np.mean([res["e_spl@1"][m]["value"] for m in ("a", "b")])  # noqa: E731
    assert d["e_spl"][1]["estimate"] == pytest.approx(espl(fb) - espl(fa))
    assert d["e_spl"][3]["estimate"] is None and d["e_spl"][3]["undefined"] == 1.0  # no d* at 3 m
    for fam in ("action_grounded", "dyadic"):
        fa_, fb_ = (compute_all([r for r in x if r.family == fam])["macro_f1"] for x in (first, other))
        want = np.mean([fb_[m]["a_obs"] - fa_[m]["a_obs"] for m in ("a", "b")])
        assert d["family"][fam]["n"] == 30 and d["family"][fam]["a_obs"]["estimate"] == pytest.approx(want)
    same = uncertainty.differences(first, first, ["a", "b"])
    assert (same["a_obs"][GROUP]["low"], same["a_obs"][GROUP]["high"]) == (0.0, 0.0)
    assert "group" not in uncertainty.differences(first, other, [])["a_obs"]  # no trained recognizer: no group
    with pytest.raises(InvalidInput, match="same episodes"):
        uncertainty.differences(first, other[::-1], ["a", "b"])
    with pytest.raises(InvalidInput, match="same episodes"):
        uncertainty.differences([], [], ["a", "b"])
    for r in other:
        del r.predictions["uniform"]
    with pytest.raises(InvalidInput, match="recognizers"):
        uncertainty.differences(first, other, ["a", "b"])
