"""tracker.publish.evidence: a verdict's evidence in the reader's unit. The cells are constructed: their numbers are
the issue's example (a GEMM cell's compiles' means 3.50 and 3.73 ms), not a measurement of this test."""

from __future__ import annotations

import math

import pytest

from tracker.analyse.changes import CellChange, InstanceChange
from tracker.analyse.verdicts import DISTURBED, HALF_BAND, NOISY
from tracker.publish.evidence import (
    DASH,
    best_ratio,
    cell_evidence,
    change,
    compared_ms,
    compiles,
    interval,
    latency_evidence,
    ms,
    noisy_words,
)


def cell(**kw: object) -> CellChange:
    fields: dict = {"preset": "prefill", "workload": "llm_swiglu_mlp", "mode": "max-autotune-no-cudagraphs",
                    "base_ms": 3.46, "head_ms": 3.73, "ratio": 3.73 / 3.50, "p_value": 1e-5, "threshold": 0.012,
                    "spread": 0.01, "verdict": "slower", "compiles": (3, 3), "ci": (1.049, 1.083),
                    "means_ms": (3.50, 3.73), "noise": "6 compiles of this comparison"} | kw
    return CellChange(**fields)


def test_a_cell_judged_against_its_noise_says_change_interval_compiles_and_best() -> None:
    assert cell_evidence(cell(means_ms=(3.46, 3.73), ratio=3.73 / 3.46, ci=(1.061, 1.096))) == (
        "+7.8% (95% CI +6.1..+9.6%), mean of 3 compiles a side, best compile 3.46 ms → 3.73 ms")
    assert cell_evidence(cell(means_ms=(0.2701, 0.2784), ratio=0.2784 / 0.2701, ci=(1.02, 1.04), base_ms=0.27,
                              head_ms=0.278, compiles=(1, 3)), micro="us", arrow="->") == (
        "+3.1% (95% CI +2.0..+4.0%), means of 1 -> 3 compiles, best compile 270 us -> 278 us")
    # one compile a side: its mean is its best, said once
    assert cell_evidence(cell(compiles=(1, 1))) == "+6.6% (95% CI +4.9..+8.3%), 1 compile a side"


def test_before_after_and_ratio_of_a_row_describe_one_quantity() -> None:
    """The issue's row `158 us  157 us  1.06x  160 us -> 169 us, +5.5%`: before and after were the best compiles,
    the ratio the means'. Now before, after and ratio are what the verdict compared."""
    x = cell(base_ms=0.158, head_ms=0.157, means_ms=(0.160, 0.169), ratio=0.169 / 0.160, ci=(1.01, 1.10))
    before, after = compared_ms(x)
    assert (before, after) == (0.160, 0.169) and after / before == pytest.approx(x.ratio)
    bands = cell(ci=None, means_ms=None, base_ms=0.158, head_ms=0.157, ratio=0.157 / 0.158, threshold=0.3)
    assert compared_ms(bands) == (0.158, 0.157) and cell_evidence(bands).endswith("best of 3 compiles a side")


def test_the_issues_example_reads_as_the_module_says() -> None:
    assert cell_evidence(cell()) == ("+6.6% (95% CI +4.9..+8.3%), mean of 3 compiles a side, best compile 3.46 ms → "
                                     "3.73 ms")


def test_a_cell_too_noisy_to_judge_says_why() -> None:
    """Disturbed while measured (its samples spread past the limit), or (the fixed bands) a move beyond half its band
    on samples that differ: the row says which, with its numbers, where the footer's "too noisy" names both."""
    disturbed = cell(verdict=NOISY, noisy_reason=DISTURBED, spread=0.23)
    assert cell_evidence(disturbed, max_spread=0.2).endswith(
        "; too noisy: samples spread 23% of the median, over 20% (disturbed)")
    half = cell(verdict=NOISY, noisy_reason=HALF_BAND, ci=None, means_ms=None, ratio=0.85, threshold=0.25,
                compiles=(1, 1))
    assert noisy_words(half) == "too noisy: moved -15.0%, beyond half its ±25% band on samples that differ"
    assert cell_evidence(half).endswith("; " + noisy_words(half))
    assert "too noisy" not in cell_evidence(cell())


def test_a_cell_of_unknown_noise_says_its_band_and_p_value() -> None:
    bands = cell(ci=None, means_ms=None, ratio=1.5, threshold=0.1, p_value=1e-9, compiles=(1, 1), noise="fixed bands")
    assert cell_evidence(bands) == "+50.0%, band ±10%, p < 0.001, 1 compile a side"
    assert cell_evidence(cell(ci=None, means_ms=None, ratio=0.97, threshold=0.25, p_value=0.0312, compiles=(1, 1))) \
        == "-3.0%, band ±25%, p = 0.031, 1 compile a side"
    no_samples = cell(ci=None, means_ms=None, ratio=0.83, threshold=0.1, p_value=None, compiles=(1, 1))
    assert cell_evidence(no_samples) == "-17.0%, band ±10%, 1 compile a side"


def test_a_cell_not_judged_on_its_times_has_no_evidence() -> None:
    assert cell_evidence(cell(ratio=None, head_ms=None, verdict="now fails", ci=None, compiles=None)) == ""


def test_changes_intervals_and_compiles_in_words() -> None:
    assert [change(x) for x in (1.066, 0.5, 3.0, 1.0)] == ["+6.6%", "-50.0%", "+200%", "+0.0%"]
    assert change(math.inf) == "+∞%" and change(math.nan) == DASH  # never "inf" or "nan" in a comment
    assert interval((0.95, math.inf)) == "95% CI -5.0..+∞%"
    assert interval((1.049, 1.083), level=0.9) == "90% CI +4.9..+8.3%"
    assert [compiles(n) for n in ((1, 1), (3, 3), (1, 3), None)] == ["1 compile a side", "3 compiles a side",
                                                                     "1 → 3 compiles", ""]
    assert [compiles(n, of="mean") for n in ((1, 1), (3, 3), (1, 3))] == [
        "1 compile a side", "mean of 3 compiles a side", "means of 1 → 3 compiles"]
    # three significant digits, trailing zeros kept, no trailing point
    assert [ms(x) for x in (0.0925, 1.5, 12.0, 100.0, 0.1, None)] == ["92.5 µs", "1.50 ms", "12.0 ms", "100 ms",
                                                                      "100 µs", DASH]


def test_a_latency_never_reads_in_exponent_notation() -> None:
    assert ms(0.9996) == "1.00 ms"  # rounds up into the next unit
    assert ms(999.6) == "1000 ms" and ms(1234.0) == "1234 ms"  # a second or more: whole milliseconds


def test_a_best_latency_says_its_interval_or_its_band() -> None:
    def inst(**kw: object) -> InstanceChange:
        fields: dict = {"preset": "prefill", "workload": "llm_swiglu_mlp", "base_best": "default",
                        "head_best": "default", "base_ties": ("default",), "head_ties": ("default",), "base_ms": 3.46,
                        "head_ms": 3.73, "ratio": 1.078, "p_value": 1e-5, "threshold": 0.012,
                        "latency_verdict": "slower", "mode_changed": False, "best_changed": True,
                        "reason": "best latency slower", "host_bound": False, "ci": (1.061, 1.096)} | kw
        return InstanceChange(**fields)

    assert latency_evidence(inst()) == "+7.8% (95% CI +6.1..+9.6%)"
    assert latency_evidence(inst(ci=None, ratio=0.833, threshold=0.3)) == "-16.7%, band ±30%"
    assert latency_evidence(inst(ratio=None)) == ""
    # the issue's PR row `273 µs -> 311 µs` with ratio 0.99x: the ratio is new best / old best; what the latency's
    # verdict judged (the old winner's own compiles, tied with the new one's) is named beside it
    moved = inst(base_best="max-autotune", head_best="default", base_ms=0.273, head_ms=0.311, ratio=0.99,
                 ci=(0.95, 1.03), judged_on="max-autotune")
    assert best_ratio(moved) == pytest.approx(0.311 / 0.273)
    assert latency_evidence(moved) == "judged on max-autotune's compiles' means: -1.0% (95% CI -5.0..+3.0%)"
