"""Bootstrap intervals: coverage of a known mean, determinism, undefined resamples reported."""

import math

import numpy as np
import pytest

from affectsim_core.resampling import bootstrap_interval


def test_the_interval_of_a_mean_covers_it_and_narrows_with_more_units():
    rng = np.random.default_rng(1)
    small, large = rng.normal(0.5, 1.0, 25), rng.normal(0.5, 1.0, 400)
    a = bootstrap_interval(len(small), lambda k: float(small[k].mean()), resamples=500)
    b = bootstrap_interval(len(large), lambda k: float(large[k].mean()), resamples=500)
    assert a.low < small.mean() < a.high and b.low < 0.5 < b.high
    assert (b.high - b.low) < (a.high - a.low) / 2  # ~1/sqrt(16) of the width
    se = large.std() / math.sqrt(len(large))  # the normal approximation's 95 % half-width
    assert (b.high - b.low) / 2 == pytest.approx(1.96 * se, rel=0.2)


def test_the_same_seed_gives_the_same_interval_and_undefined_resamples_are_counted():
    x = np.array([0.0, 0.0, 0.0, 1.0])
    stat = lambda k: float("nan") if x[k].sum() == 0 else float(x[k].mean())  # noqa: E731
    a, b = bootstrap_interval(4, stat, resamples=4000, seed=3), bootstrap_interval(4, stat, resamples=4000, seed=3)
    assert a == b
    assert a.undefined == pytest.approx((3 / 4) ** 4, abs=0.03)  # resamples without the one 1.0
    assert a.text(100).startswith("+25.0 [")


def test_an_interval_that_cannot_be_computed_says_undetermined():
    iv = bootstrap_interval(3, lambda k: None, resamples=50)
    assert iv.low is None and iv.undefined == 1.0 and iv.text() == "undetermined" and iv.contains(7.0)
    with pytest.raises(ValueError, match="units=0"):
        bootstrap_interval(0, lambda k: 0.0)
