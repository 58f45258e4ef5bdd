"""The paired sequential test (tracker.analyse.paired) and its record (tracker.store.pairing): the maths on pairs
constructed here (said in each test), the record's format and what a damaged or foreign one does."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from tracker.analyse import paired
from tracker.analyse.judge import ChangeRule
from tracker.analyse.verdicts import FASTER, SAME, SLOWER, UNCONFIRMED, UNDECIDED
from tracker.store import pairing
from tracker.store.pairing import Pair, PairedRecord, PairingError

RULE = ChangeRule(confirm=(3, 3))
BASE, HEAD = "a" * 40, "b" * 40


def pairs(changes: list[float], base_ms: float = 0.1) -> list[Pair]:
    """Constructed pairs: head = base x change, round by round."""
    return [Pair(r, base_ms, base_ms * c) for r, c in enumerate(changes, 1)]


def judge(changes: list[float], prior: float | None = 0.01 ** 2, selected: bool | None = None, least: float = 0.01):
    d = paired.Differences.of(pairs(changes))
    assert d is not None
    e = paired.evidence(d, prior, RULE, least, 0.0, (len(changes), len(changes)))
    assert e is not None
    level = paired.nominal_alpha(RULE.alpha, paired.looks(RULE))
    chosen = e.p_value < level if selected is None else selected
    return paired.verdict_of(e, chosen, 1, RULE)


def test_the_rounds_grow_and_each_look_is_made_at_pococks_level() -> None:
    assert paired.schedule(10) == [1, 3, 5, 8, 10] and paired.schedule(3) == [1, 3] and paired.schedule(2) == [1, 2]
    assert paired.looks(RULE) == 5 and paired.nominal_alpha(0.05, 5) == pytest.approx(0.0158)
    # more looks, a stricter level each; one look, alpha itself
    assert paired.nominal_alpha(0.05, 1) == pytest.approx(0.05)
    assert paired.nominal_alpha(0.05, 1) > paired.nominal_alpha(0.05, 2) > paired.nominal_alpha(0.05, 10)
    assert paired.nominal_alpha(0.05, 20) < paired.nominal_alpha(0.05, 10)


def test_a_cell_that_moved_clearly_is_a_change_once_confirmed() -> None:
    assert judge([1.08, 1.07, 1.09, 1.08, 1.08]).verdict == SLOWER
    assert judge([0.92, 0.93, 0.91, 0.92, 0.92]).verdict == FASTER
    assert judge([1.08, 1.08]).verdict == UNCONFIRMED  # two pairs: measured again, never counted yet


def test_the_same_is_a_claim_its_interval_inside_the_margin() -> None:
    same = judge([1.002, 0.998, 1.001, 0.999, 1.0])
    assert same.verdict == SAME and same.ci is not None and 0.97 < same.ci[0] < 1 < same.ci[1] < 1.03
    # a change the rule never claims (under a host-bound cell's quarter launch) and beyond the margin: undecided, never
    # "the same" (on the H100 a +9% move of a 5 us kernel was "the same within its 22% minimum change")
    assert judge([1.05, 1.06, 1.04, 1.05, 1.05], least=0.10, selected=True).verdict == UNDECIDED


def test_the_same_needs_five_pairs_three_still_ones_may_be_one_state_of_a_cell_with_two() -> None:
    # On the H100 (tests/fixtures/h100-plant-truth/t11) a decode cell's base compiles fell at 115 or 131 us, four of
    # eight each, the head's all at 116-118 us: the verdict's three base compiles all drew 115 us, and three pairs
    # within 1% of each other were "the same" where the cell really moved -5.5%
    three = judge([1.011, 0.985, 0.997])
    assert three.verdict == UNDECIDED and three.more is not None and three.more >= 2
    assert judge([1.011, 0.985, 0.997, 1.004, 0.996]).verdict == SAME
    # a change needs no more than its confirmation
    assert judge([1.08, 1.07, 1.09]).verdict == SLOWER


def test_a_rule_allowing_fewer_compiles_than_the_same_needs_calls_the_same_on_all_it_may_get() -> None:
    assert paired.rule_for(10, 3).same_pairs == 5 and paired.rule_for(3, 3).same_pairs == 3
    assert paired.recorded(paired.rule_for(4, 3)) == {"confirm": (3, 3), "same_within": 0.03, "same_pairs": 4,
                                                     "max_compiles": 4}


def test_what_the_pairs_cannot_decide_is_undecided_with_how_much_more_would() -> None:
    v = judge([1.10, 0.95, 1.12, 0.97], prior=0.08 ** 2)  # pairs spread 8%: neither a change nor the same
    assert v.verdict == UNDECIDED and v.more and v.more > 0 and v.ci is not None
    # one pair and nothing known of its class: undecided, one more pair at least
    d = paired.Differences.of(pairs([1.05]))
    assert d is not None and paired.evidence(d, None, RULE, 0.01, 0.0, (1, 1)) is None
    assert paired.undecided(d, (1, 1), 0.0).verdict == UNDECIDED


def test_an_undecided_cell_far_past_the_most_compiles_is_not_chased_one_within_reach_is() -> None:
    from tracker.analyse.compare import CellChange
    from tracker.analyse.confirm import futile

    def cell(verdict: str, compiles: int, more: int | None) -> CellChange:
        return CellChange("prefill", "diff_cfg_blend", "kernel:x", 0.005, 0.005, 1.0, None, None, 0.08, verdict,
                          compiles=(compiles, compiles), more=more)

    # a 5 us cell whose pairs spread 8%: deciding it would take ~190 more pairs (seen on the H100): given up
    assert futile(cell(UNDECIDED, 3, 190), max_compiles=10)
    assert not futile(cell(UNDECIDED, 3, 12), max_compiles=10)  # within twice the most: measured on
    assert not futile(cell(UNDECIDED, 1, None), max_compiles=10)  # nothing known of its noise yet
    assert not futile(cell(UNCONFIRMED, 2, 190), max_compiles=10)  # a change to confirm is always measured


def test_a_pair_three_times_off_the_rest_is_set_aside() -> None:
    d = paired.Differences.of(pairs([1.0, 1.01, 0.99, 1.0, 3.5]))
    assert d is not None and d.n == 4 and d.set_aside == 1 and abs(d.mean) < 0.01


def test_the_class_prior_is_the_median_variance_of_cells_of_two_pairs_or_more() -> None:
    a, b = paired.Differences.of(pairs([1.0, 1.02])), paired.Differences.of(pairs([1.0, 1.04]))
    one = paired.Differences.of(pairs([1.3]))
    assert a and b and one
    prior = paired.pooled_variance({1: ("c", a), 2: ("c", b), 3: ("c", one)})
    assert prior["c"] == pytest.approx((a.var + b.var) / 2)


# ---------------------------------------------------------------------------------------------------- the record


def record(**kw: object) -> PairedRecord:
    cells = {"prefill/llm_rmsnorm/default": (Pair(1, 0.1, 0.11, "0", "0"), Pair(2, 0.1, 0.108, "1", "1"))}
    return PairedRecord("h100", "2.11.0+cu130", BASE, HEAD, ("llm_rmsnorm",), ("llm_rmsnorm",), "Measured it.",
                        cells=cells, **kw)  # type: ignore[arg-type]


def test_the_record_is_kept_in_the_head_runs_cell_store_and_read_back_as_written(tmp_path: Path) -> None:
    written = pairing.write(tmp_path, record())
    assert written == tmp_path / "h100" / HEAD / "torch-2.11.0+cu130" / f"paired-{BASE}.json"
    assert json.loads(written.read_text())["format"] == pairing.FORMAT
    back = pairing.find(tmp_path, "h100", "2.11.0+cu130", BASE, HEAD)
    assert back == record() and back.rounds == 2
    assert back.pairs(("prefill", "llm_rmsnorm", "default"))[1].head_gpu == "1"
    assert pairing.find(tmp_path, "h100", "2.11.0+cu130", HEAD, BASE) is None  # not measured that way round


def test_the_record_says_how_many_pairs_the_same_needed_and_an_older_one_needed_any(tmp_path: Path) -> None:
    from tracker.analyse.compare import as_recorded

    written = pairing.write(tmp_path, record(same_pairs=5))
    back = pairing.find(tmp_path, "h100", "2.11.0+cu130", BASE, HEAD)
    assert back is not None and back.same_pairs == 5 and as_recorded(RULE, back).same_pairs == 5
    older = {k: v for k, v in json.loads(written.read_text()).items() if k not in ("same_pairs", "stopped")}
    written.write_text(json.dumps(older | {"format": 2}))  # a record of the format before
    back = pairing.find(tmp_path, "h100", "2.11.0+cu130", BASE, HEAD)
    assert back is not None and back.same_pairs == 0 and as_recorded(RULE, back).same_pairs == 0
    assert back.stopped == ""


def test_a_newer_damaged_or_linked_record_is_one_clear_error(tmp_path: Path) -> None:
    written = pairing.write(tmp_path, record())
    data = json.loads(written.read_text())
    written.write_text(json.dumps(data | {"format": pairing.FORMAT + 1}))
    with pytest.raises(PairingError, match="newer than this tool reads"):
        pairing.find(tmp_path, "h100", "2.11.0+cu130", BASE, HEAD)
    written.write_text(json.dumps(data | {"cells": {"x": [{"round": 1, "base_ms": -1, "head_ms": 1}]}}))
    with pytest.raises(PairingError, match="damaged paired record"):
        pairing.find(tmp_path, "h100", "2.11.0+cu130", BASE, HEAD)
    outside = tmp_path.parent / f"{tmp_path.name}-outside.json"
    outside.write_text(json.dumps(data))
    written.unlink()
    os.symlink(outside, written)
    with pytest.raises(PairingError, match="not a readable paired record"):
        pairing.find(tmp_path, "h100", "2.11.0+cu130", BASE, HEAD)


def test_a_pairs_change_is_its_log_ratio() -> None:
    assert Pair(1, 0.1, 0.11).log_change == pytest.approx(math.log(1.1))
