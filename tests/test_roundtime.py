"""A later round of paired measurement: how long it is expected to take, and which undecided cells fit in the time
the budget has left."""

from __future__ import annotations

import io

import pytest

from tracker.analyse.changes import CellChange, Comparison
from tracker.analyse.paired import rule_for
from tracker.analyse.pairs import RunInfo
from tracker.analyse.verdicts import NOISY, SAME, UNCONFIRMED, UNDECIDED
from tracker.flows.rounds import Budget, until_decided
from tracker.flows.roundtime import MARGIN, ROUND_OVERHEAD_S, RoundTime, fitting, measured
from tracker.runner.costs import Cost, Costs

GEMM = ("prefill", "llm_logits_projection_softmax", "max-autotune")
ROPE = ("prefill", "llm_rope_apply", "max-autotune")
NORM = ("decode", "llm_rmsnorm", "default")


def costs(**lock_and_wall: tuple[float, float]) -> Costs:
    """Constructed: each cell's further compile holding the lock `lock` seconds in a process of `wall` seconds."""
    cells = {"gemm": GEMM, "rope": ROPE, "norm": NORM}
    return Costs({(*cells[k], True): Cost(wall, lock, wall - 1.0, recorded=True)
                  for k, (lock, wall) in lock_and_wall.items()})


def change(cell: tuple[str, str, str], verdict: str, compiles: int = 3, more: int | None = None) -> CellChange:
    return CellChange(*cell, 1.0, 1.0, 1.0, None, None, None, verdict, compiles=(compiles, compiles + 1), more=more)


def test_a_round_takes_its_start_and_end_and_the_last_rounds_seconds_per_second_of_lock_work() -> None:
    pace = RoundTime(costs(gemm=(8.0, 20.0), norm=(0.5, 4.0)))
    first = {GEMM: 3, NORM: 3}
    assert pace.work(first) == pytest.approx(3 * 2 * 8.0 + 3 * 2 * 0.5)  # a compile a side
    pace.learn(first, ROUND_OVERHEAD_S + 102.0)  # 51 s of lock work measured in 102 s
    assert pace.expected({GEMM: 2, NORM: 2}) == pytest.approx(ROUND_OVERHEAD_S + 2.0 * (2 * 2 * 8.5))


def test_a_round_takes_at_least_its_longest_cells_compiles_two_at_a_time() -> None:
    pace = RoundTime(costs(gemm=(1.0, 40.0)), together=2, rate=1.0)
    assert pace.expected({GEMM: 2}) == pytest.approx(ROUND_OVERHEAD_S + 40.0)
    assert pace.expected({GEMM: 3}) == pytest.approx(ROUND_OVERHEAD_S + 80.0)
    assert pace.expected({}) == 0.0


def test_the_cells_measured_so_far_count_the_fewer_sides_compiles() -> None:
    assert measured([change(GEMM, UNDECIDED, 3), change(NORM, SAME, 5)]) == {GEMM: 3, NORM: 5}


def test_a_change_awaiting_confirmation_is_measured_while_any_time_is_left_the_others_as_they_fit() -> None:
    pace = RoundTime(costs(gemm=(8.0, 20.0), rope=(1.0, 8.0), norm=(0.5, 4.0)), rate=1.0)
    changes = [change(GEMM, UNCONFIRMED), change(ROPE, UNDECIDED, more=40), change(NORM, UNDECIDED, more=3)]
    everything = pace.expected({GEMM: 2, ROPE: 2, NORM: 2})
    assert fitting([GEMM, ROPE, NORM], changes, 5, everything * MARGIN, pace) == {GEMM: 2, ROPE: 2, NORM: 2}
    # time for the confirmation and one more: the one its own estimate says is nearest a decision
    assert fitting([GEMM, ROPE, NORM], changes, 5, pace.expected({GEMM: 2, NORM: 2}) * MARGIN, pace) == \
        {GEMM: 2, NORM: 2}
    # a second left: the confirmation alone, past the budget (round 1 saw the change; its next round confirms it)
    assert fitting([GEMM, ROPE, NORM], changes, 5, 1.0, pace) == {GEMM: 2}
    assert fitting([GEMM, ROPE, NORM], changes, 5, 0.0, pace) == {}  # no time left: nothing


def test_a_disturbed_cell_goes_before_the_undecided_ones() -> None:
    pace = RoundTime(costs(rope=(4.0, 8.0), norm=(4.0, 4.0)), rate=1.0)
    changes = [change(ROPE, NOISY), change(NORM, UNDECIDED, more=3)]
    assert fitting([ROPE, NORM], changes, 5, pace.expected({ROPE: 2}) * MARGIN, pace) == {ROPE: 2}


def test_a_cell_behind_the_others_is_measured_up_to_the_rounds_number() -> None:
    pace = RoundTime(costs(norm=(0.5, 4.0)), rate=1.0)
    assert fitting([NORM], [change(NORM, UNDECIDED, compiles=3)], 8, 1000.0, pace) == {NORM: 5}


class Rounds:
    """Constructed rounds on a constructed clock: round 1 takes 100 s (10 s of it the runs' start and end), a later
    one at the same pace for its lock work (a second a compile); each cell stays undecided whatever its compiles."""

    name, first_compiles = "pr", 3

    def __init__(self, cells: list[tuple[str, str, str]]) -> None:
        self.now, self.log, self.calls = 0.0, io.StringIO(), []
        self.compiles = dict.fromkeys(cells, 0)

    def first(self) -> None:
        self.now += 100.0
        self.compiles = dict.fromkeys(self.compiles, 3)

    def more(self, cells: list[tuple[str, str, str]], target: int) -> None:
        self.calls.append((cells, target))
        self.now += ROUND_OVERHEAD_S + 90.0 / 18.0 * sum(2 * (target - self.compiles[c]) for c in cells)
        self.compiles |= dict.fromkeys(cells, target)

    def costs(self) -> Costs:
        return costs(gemm=(1.0, 4.0), rope=(1.0, 4.0), norm=(1.0, 4.0))

    def judge(self) -> Comparison:
        run = RunInfo("a" * 40, "m", "2026-11-29T00:00:00+00:00", "gpu", "2.11.0", "3.6.0")
        cells = [change(c, UNDECIDED, n, more=10) for c, n in self.compiles.items()]
        return Comparison(run, run, rule_for(10, 3), cells, [], [], [], [], [])


def test_a_later_round_measures_what_it_can_finish_within_the_budget_then_the_rounds_stop_saying_why() -> None:
    fake = Rounds([GEMM, ROPE, NORM])
    told: list[str] = []
    # round 1: 90 s for 18 s of lock work (3 cells, 3 compiles a side); 2 more a side: 20 s a cell, and 10 s; the
    # round to 8 after it: 3, 3 and 5 more a side, 120 s
    result = until_decided(fake, fake.judge, Budget(seconds=160.0), clock=lambda: fake.now,
                           stopped=lambda why, c: told.append(why) or c)
    assert fake.calls == [(sorted([GEMM, NORM]), 5)]  # two of the three fit in the 60 s left, with room
    said = fake.log.getvalue()
    assert "2 of 3 cells (what the budget has time for) to decide, measuring to 5 compiles a side" in said
    assert len(told) == 1 and told[0].startswith("budget spent (150 s of 160 s, another round would take about 120 s")
    assert "3 cells more rounds could decide measured no further" in told[0]
    assert told[0].endswith("about 300 s would let one more run") and result.cells
