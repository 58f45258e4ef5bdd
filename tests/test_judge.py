"""tracker.analyse.judge: a comparison's cells selected together (Benjamini-Hochberg over families, an instance's
modes one family where its source changed) and the verdict of a selected cell, on constructed evidence: each cell's
p-value and change are made up for the arithmetic, not measured."""

from __future__ import annotations

import math

import pytest

from tracker.analyse.judge import ChangeRule, Evidence, family_p, select, verdict_of
from tracker.analyse.noise import CellNoise
from tracker.analyse.verdicts import FASTER, NOISY, SAME, SLOWER, UNDECIDED
from tracker.stats import Compiles, simes, stouffer

MODES = ("eager", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
NOISE = CellNoise(0.01, 4.0, 0.01, math.inf, "constructed")


def evidence(p: float, change: float = 0.03, se: float = 0.01, least: float = 0.01) -> Evidence:
    """A constructed cell's evidence: its p-value and log change as given, three compiles a side."""
    c = Compiles(3, 0.0, 0.01, 1.0)
    return Evidence(c, c, (3, 3), change, se, 4.0, p, least, 0.01, NOISE)


def comparison(moved: dict[str, float], nulls: int = 40) -> tuple[dict, list, list]:
    """The evidence of one instance's five modes (p-values `moved`, the others 0.5) and of `nulls` cells of other
    workloads that did not move (p-values spread over 0.1-0.9); the families with the instance's modes together,
    and with every cell alone."""
    ev = {("w", m): evidence(moved.get(m, 0.5)) for m in MODES}
    ev |= {(f"other{i}", "default"): evidence(0.1 + 0.8 * i / nulls, 0.0) for i in range(nulls)}
    joint = [[("w", m) for m in MODES]] + [[k] for k in ev if k[0] != "w"]
    return ev, joint, [[k] for k in ev]


def test_cells_alone_are_benjamini_hochberg_and_a_family_of_one_is_its_cell() -> None:
    ev = {i: evidence(p) for i, p in enumerate([0.0001, 0.0004, 0.0019, 0.0095, 0.0201, 0.045, 0.9])}
    chosen = select(ev, [[k] for k in ev], 0.05)
    assert chosen.cells == {0, 1, 2, 3, 4} and chosen.families == 7  # 0.0201 <= 0.05 x 5 / 7; 0.045 > 0.05 x 6 / 7
    assert chosen.cutoff == pytest.approx(0.05 * 5 / 7)  # a best latency's p-value counts at or under this
    assert family_p([0.02], [1.0]) == 0.02
    assert select({}, [], 0.05).cells == frozenset()


def test_a_family_takes_the_better_of_simes_and_stouffer_corrected_for_taking_the_better() -> None:
    ps, signs = [0.03] * 5, [1.0] * 5
    assert family_p(ps, signs) == pytest.approx(2 * stouffer(ps, signs))  # all moved a little, one way
    one = [1e-6, 0.5, 0.6, 0.7, 0.8]
    assert family_p(one, signs) == pytest.approx(2 * simes(one))  # one mode moved
    assert family_p([0.03] * 5, [1.0, -1.0, 1.0, -1.0, 1.0]) == pytest.approx(min(1.0, 2 * simes([0.03] * 5)))


def test_a_single_moved_mode_of_a_family_is_selected_by_simes_and_its_other_modes_are_not() -> None:
    ev, joint, _ = comparison({"default": 1e-6})
    chosen = select(ev, joint, 0.05)
    assert chosen.cells == {("w", "default")}


def test_no_cell_is_selected_where_nothing_moved() -> None:
    ev, joint, alone = comparison({})
    assert select(ev, joint, 0.05).cells == frozenset() == select(ev, alone, 0.05).cells


def test_a_family_of_five_modes_each_moved_a_little_is_selected_jointly() -> None:
    ev, joint, alone = comparison(dict.fromkeys(MODES, 0.01))
    assert select(ev, alone, 0.05).cells == frozenset()  # each alone too weak among 45 cells
    assert select(ev, joint, 0.05).cells == {("w", m) for m in MODES}
    # a mode that moved the other way is no part of what the family shows
    ev[("w", "eager")] = evidence(0.01, change=-0.03)
    assert select(ev, joint, 0.05).cells == {("w", m) for m in MODES if m != "eager"}


def test_judging_an_instances_modes_together_never_selects_fewer_of_them() -> None:
    ev, joint, alone = comparison(dict.fromkeys(MODES, 0.003))
    assert select(ev, alone, 0.05).cells == {("w", m) for m in MODES}
    assert select(ev, joint, 0.05).cells >= select(ev, alone, 0.05).cells


# -- the verdict of a cell once selected ------------------------------------------------------------------------


def test_a_selected_cell_changed_when_it_moved_beyond_its_minimum_change() -> None:
    rule = ChangeRule()
    slower = verdict_of(evidence(1e-6, change=math.log(1.05)), True, 40, rule)
    assert (slower.verdict, slower.ratio, slower.noise) == (SLOWER, pytest.approx(1.05), "constructed")
    assert slower.ci is not None and slower.ci[0] < 1.05 < slower.ci[1]
    assert verdict_of(evidence(1e-6, change=math.log(0.95)), True, 40, rule).verdict == FASTER
    # selected, but within its minimum change (1%): the same
    assert verdict_of(evidence(1e-6, change=math.log(1.005)), True, 40, rule).verdict == SAME
    # moved beyond its minimum change, not selected, and resolved finely enough: the same
    assert verdict_of(evidence(0.2, change=math.log(1.02), se=0.005), False, 40, rule).verdict == SAME


def test_a_move_the_comparison_cannot_resolve_is_undecided_not_the_same() -> None:
    rule = ChangeRule()
    # se 5% on 4 degrees of freedom among 40 families: the smallest change it could claim is 50%, beyond 10%
    v = verdict_of(evidence(0.01, change=math.log(1.30), se=0.05), False, 40, rule)
    assert v.resolution == pytest.approx(0.50, abs=0.01) and v.verdict == UNDECIDED
    # ... and so is a move under half that resolution whose interval reaches beyond 10%: +20% is never "the same"
    assert verdict_of(evidence(0.05, change=math.log(1.20), se=0.05), False, 40, rule).verdict == UNDECIDED
    # the same only where the interval lies within 10% (or the cell's minimum change)
    assert verdict_of(evidence(0.05, change=math.log(1.01), se=0.02), False, 40, rule).verdict == SAME


def test_the_change_test_is_named() -> None:
    assert ChangeRule().test == "noise" and ChangeRule(test="bands").test == "bands"
    with pytest.raises(ValueError, match="the change test is one of"):
        ChangeRule(test="t-test")


def test_a_disturbed_measurement_is_too_noisy_unless_its_change_lies_beyond_the_disturbance() -> None:
    c = Compiles(3, 0.0, 0.01, 1.0)
    rule = ChangeRule()
    small = Evidence(c, c, (3, 3), math.log(1.3), 0.01, 4.0, 1e-6, 0.01, 0.84, NOISE)  # +30% on samples spread 84%
    huge = Evidence(c, c, (3, 3), math.log(400.0), 0.1, 4.0, 1e-6, 0.01, 0.84, NOISE)  # 400 times slower
    calm = Evidence(c, c, (3, 3), math.log(1.3), 0.01, 4.0, 1e-6, 0.01, 0.05, NOISE)
    assert verdict_of(small, True, 1, rule).verdict == NOISY
    assert verdict_of(huge, True, 1, rule).verdict == SLOWER
    assert verdict_of(calm, True, 1, rule).verdict == SLOWER
