"""tracker.stats: the summaries of one measurement, the comparison of two, and the noise rules, on hand-made numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tracker.stats import (
    Compiles,
    HostBound,
    NoiseModel,
    bh_select,
    float_or_none,
    p_value,
    quantile,
    relative_spread,
    set_aside,
    simes,
    stouffer,
    thin,
)


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


# -- several compiles of one cell (constructed medians, in ms) ------------------------------------------------------


def test_one_gross_outlier_among_agreeing_compiles_is_set_aside() -> None:
    assert set_aside([1.00, 1.01, 3.20]) == ([1.00, 1.01], [3.20])  # 3.2x off two that agree within 1%
    assert set_aside([3.20, 0.99, 1.00, 1.01]) == ([0.99, 1.00, 1.01], [3.20])
    assert set_aside([1.00, 1.01, 0.30]) == ([1.00, 1.01], [0.30])  # a compile too fast is as suspect
    # a loaded 2-core host's oversubscribed compile: 760x
    assert set_aside([0.021, 0.021, 15.96]) == ([0.021, 0.021], [15.96])


def test_compiles_in_two_states_are_kept_whatever_their_count() -> None:
    # autotuning draws one of two codes: a state seen once is within the gross-outlier bound, or far beyond the
    # others' own spread only where two compiles agree (then it is set aside, the case above)
    assert set_aside([1.00, 1.01, 1.30]) == ([1.00, 1.01, 1.30], [])  # 30%: under the factor 3
    # prefill rl_ppo_clipped_loss max-autotune-no-cudagraphs: 19.5, 9.25 and 9.82 us in three cold compiles
    # (tests/fixtures/h100-compiles rep5-rep7): a real draw of autotuning, kept
    assert set_aside([0.01952, 0.009248, 0.009824]) == ([0.01952, 0.009248, 0.009824], [])
    assert set_aside([1.00, 1.01, 1.60, 1.61]) == ([1.00, 1.01, 1.60, 1.61], [])  # two states, two compiles each
    assert set_aside([1.00, 2.00]) == ([1.00, 2.00], [])  # two compiles: neither is the outlier


def test_at_most_one_compile_is_set_aside_and_values_that_are_no_times_always_are() -> None:
    assert set_aside([1.00, 1.00, 1.00, 2.00, 2.10]) == ([1.00, 1.00, 1.00, 2.00, 2.10], [])
    kept, out = set_aside([1.00, math.nan, 0.0, -1.0, math.inf])
    assert kept == [1.00] and math.isnan(out[0]) and out[1:] == [0.0, -1.0, math.inf]
    kept, out = set_aside([1.00, 1.01, 1.02, 5.0, math.nan])
    assert kept == [1.00, 1.01, 1.02] and len(out) == 2 and out[0] == 5.0 and math.isnan(out[1])


def test_compiles_summarise_the_kept_ones_in_log() -> None:
    c = Compiles.of([1.00, 1.01, 3.20])
    assert c is not None and (c.n, c.set_aside, c.best_ms) == (2, 1, 1.00)
    assert c.mean_ms == pytest.approx(math.sqrt(1.00 * 1.01))
    assert c.log_sd == pytest.approx(float(np.std(np.log([1.00, 1.01]), ddof=1)))
    one = Compiles.of([2.0])
    assert one is not None and (one.n, one.log_sd, one.mean_ms) == (1, None, pytest.approx(2.0))
    assert Compiles.of([math.nan]) is None


# -- many tests at once -------------------------------------------------------------------------------------------

# Benjamini & Hochberg (1995), section 4: fifteen p-values of a clinical trial; at q = 0.05 the first four are
# rejected (Bonferroni rejects three)
BH_1995 = [0.0001, 0.0004, 0.0019, 0.0095, 0.0201, 0.0278, 0.0298, 0.0344, 0.0459, 0.3240, 0.4262, 0.5719, 0.6528,
           0.7590, 1.000]


def test_benjamini_hochberg_on_its_papers_example() -> None:
    assert bh_select(BH_1995, 0.05) == [True] * 4 + [False] * 11
    shuffled = BH_1995[::-1]
    assert bh_select(shuffled, 0.05) == [False] * 11 + [True] * 4  # by value, not by position
    assert sum(p <= 0.05 / 15 for p in BH_1995) == 3


def test_benjamini_hochberg_steps_up_and_selects_nothing_under_no_change() -> None:
    # 0.04 lies above its own bound (0.05 x 2 / 3) but under the third's, which is selected: so is it
    assert bh_select([0.01, 0.04, 0.045], 0.05) == [True, True, True]
    assert bh_select([0.2, 0.5, 0.9, 0.06], 0.05) == [False] * 4
    assert bh_select([], 0.05) == []


def test_simes_is_as_strong_as_the_best_single_test_and_never_stronger_than_all_together() -> None:
    assert simes([0.001, 0.5, 0.6, 0.7, 0.8]) == pytest.approx(0.005)  # the best one, Bonferroni-corrected
    assert simes([0.01, 0.02, 0.03, 0.04, 0.05]) == pytest.approx(0.05)  # min over i of p(i) k / i
    assert simes([0.04] * 5) == pytest.approx(0.04)
    assert simes([0.3]) == pytest.approx(0.3) and simes([0.9, 0.95]) == 0.95


def test_stouffer_adds_changes_of_one_direction_and_cancels_opposite_ones() -> None:
    # five tests of p = 0.2 (z = 1.2816 each) one way: Z = 1.2816 x sqrt(5) = 2.866, two-sided p = 0.00416
    assert stouffer([0.2] * 5, [1.0] * 5) == pytest.approx(0.00416, rel=2e-3)
    assert stouffer([0.2] * 5, [-1.0] * 5) == pytest.approx(0.00416, rel=2e-3)
    assert stouffer([0.01, 0.01], [1.0, -1.0]) == pytest.approx(1.0)
    assert stouffer([0.05], [1.0]) == pytest.approx(0.05)  # one test is itself
