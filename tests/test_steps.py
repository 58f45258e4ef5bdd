"""tracker.analyse.steps: the nights on which a cell's level changed and stayed changed, found over its history. The
series are constructed levels (natural log of a cell's latency, one a night, oldest first) with a small jitter."""

from __future__ import annotations

import math

import pytest

from tracker.analyse.steps import find_splits, last_segment

JITTER = (0.002, -0.001, 0.0, 0.001, -0.002, 0.001, -0.001, 0.002, 0.0, -0.002)  # about 0.15% a night


def series(*segments: tuple[int, float]) -> list[float]:
    """Nights at constant levels, (nights, level) each, with JITTER added."""
    levels = [level for nights, level in segments for _ in range(nights)]
    return [x + JITTER[i % len(JITTER)] for i, x in enumerate(levels)]


def test_a_clear_step_is_found_at_its_night() -> None:
    (step,) = find_splits(series((5, 0.0), (5, math.log(1.05))))
    assert step.index == 5 and step.ratio == pytest.approx(1.05, rel=2e-3) and step.p_value < 0.001
    assert last_segment(series((5, 0.0), (5, math.log(1.05)))) == 5


def test_two_steps_are_both_found_in_order() -> None:
    steps = find_splits(series((5, 0.0), (5, math.log(1.04)), (5, math.log(1.08))))
    assert [s.index for s in steps] == [5, 10]
    assert steps[1].ratio == pytest.approx(1.04, rel=2e-3)  # within the segment the first step left


def test_a_single_outlying_run_is_not_a_step() -> None:
    assert find_splits(series((4, 0.0), (1, 0.3), (5, 0.0))) == []  # one disturbed night in the middle
    assert find_splits(series((9, 0.0), (1, 0.3))) == []  # the latest night alone


def test_a_step_needs_two_runs_after_it() -> None:
    assert find_splits(series((6, 0.0), (1, math.log(1.1)))) == []
    (step,) = find_splits(series((6, 0.0), (2, math.log(1.1))))
    assert step.index == 6


def test_a_step_under_the_least_change_is_no_step_however_clear() -> None:
    flat = [0.0] * 5 + [0.005] * 5  # 0.5% without any jitter: certain, and under the 1% minimum
    assert find_splits(flat) == [] and find_splits(flat, least=0.001)[0].index == 5


def test_the_class_prior_keeps_a_short_history_from_calling_its_jitter_a_step() -> None:
    short = [0.0, 0.001, 0.0, 0.02, 0.021, 0.02]  # +2% after three nights of six, on nights 0.1% apart
    assert [s.index for s in find_splits(short)] == [3]
    assert find_splits(short, prior_var=0.01 ** 2) == []  # its class moves 1% a night: three nights tell little
