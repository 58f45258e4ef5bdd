"""tracker.stats: the summaries of one measurement, the comparison of two, and the noise rules, on hand-made numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tracker.stats import HostBound, NoiseModel, float_or_none, p_value, quantile, relative_spread, thin


def test_quantile_interpolates_like_numpy() -> None:
    xs = [3.0, 1.0, 4.0, 1.5, 9.0, 2.6]
    for q in (0.0, 0.25, 0.5, 0.99, 1.0):
        assert quantile(xs, q) == pytest.approx(float(np.quantile(xs, q)))


def test_thin_keeps_the_extremes_and_at_most_keep_order_statistics() -> None:
    xs = [float(x) for x in range(10_000, 0, -1)]
    kept = thin(xs, keep=101)
    assert len(kept) == 101 and kept == sorted(kept) and (kept[0], kept[-1]) == (1.0, 10_000.0)
    assert thin([2.0, 1.0]) == [1.0, 2.0]


def test_relative_spread_from_quartiles_else_from_samples() -> None:
    assert relative_spread(2.0, 1.5, 2.5) == 0.5
    assert relative_spread(2.0, math.nan, None, [1.0, 2.0, 3.0]) == pytest.approx(0.5)
    assert math.isnan(relative_spread(2.0, math.nan, math.nan))


def test_p_value_from_samples_else_from_the_cis() -> None:
    assert p_value([1.0, 1.1, 0.9] * 20, [2.0, 2.1, 1.9] * 20, (0, 0), (0, 0)) < 0.01
    assert p_value(None, [1.0], (1.0, 1.2), (1.3, 1.4)) == 0.0  # disjoint CIs
    assert p_value(None, None, (1.0, 1.2), (1.1, 1.4)) == 1.0
    assert p_value(None, None, (math.nan, 1.2), (1.1, 1.4)) is None


def test_the_tie_rule_band_and_ci_overlap() -> None:
    noise = NoiseModel()
    assert noise.tied(1.0, 1.0, 1.03, 1.03)  # within 3%
    assert not noise.tied(1.0, 1.0, 1.031, 1.031)
    assert noise.tied(1.0, 1.05, 1.2, 1.05)  # CIs overlap
    assert not NoiseModel(use_ci=False).tied(1.0, 1.05, 1.2, 1.05)
    assert noise.tied(0.040, 0.040, 0.044, 0.044)  # 10% under 50 us
    assert not noise.tied(math.nan, math.nan, 1.0, 1.0)


def test_tied_pair_is_the_same_rule_in_either_order() -> None:
    noise = NoiseModel()
    a, a_lo, a_hi = np.array([1.0, 1.2, 0.04]), np.array([0.99, 1.19, 0.039]), np.array([1.01, 1.21, 0.041])
    b, b_lo, b_hi = np.array([1.02, 1.0, 0.05]), np.array([1.01, 0.99, 0.049]), np.array([1.03, 1.01, 0.051])
    assert list(noise.tied_pair(a, a_lo, a_hi, b, b_lo, b_hi)) == [True, False, False]
    assert list(noise.tied_pair(b, b_lo, b_hi, a, a_lo, a_hi)) == [True, False, False]


def test_the_host_bound_rule() -> None:
    host = HostBound(k=6.0)
    assert host.bound(0.030, 5.0) and not host.bound(0.031, 5.0)
    assert not host.bound(0.001, 0.0)  # unknown floor
    assert list(host.bound(np.array([0.030, np.nan]), np.array([5.0, 5.0]))) == [True, False]


def test_float_or_none() -> None:
    assert float_or_none(np.float64(1.5)) == 1.5 and float_or_none(2) == 2.0
    assert float_or_none(math.nan) is None and float_or_none(None) is None and float_or_none("x") is None
