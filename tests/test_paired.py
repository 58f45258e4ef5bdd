"""The paired sequential test (tracker.analyse.paired) and its record (tracker.store.pairing): the maths on pairs
constructed here (said in each test), the record's format and what a damaged or foreign one does."""

from __future__ import annotations

import json
import math
import os
from dataclasses import replace
from pathlib import Path

import pytest

from tracker.analyse import paired
from tracker.analyse.judge import ChangeRule, select
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
                                                     "max_compiles": 4, "confirm_rounds": 2,
                                                     "more_by_family": True, "kernel_undecided": True,
                                                     "round_by_scale": True}
    # one round is all three compiles allow: a change is confirmed in it
    assert paired.rule_for(3, 3).confirm_rounds == 1 and paired.rule_for(10, 3).confirm_rounds == 2


ROUNDS = ChangeRule(confirm=(3, 3), confirm_rounds=2)


def in_runs(changes: list[list[float]]) -> list[Pair]:
    """Constructed pairs of several runs (one list a run), numbered on."""
    out = [(run, c) for run, cs in enumerate(changes) for c in cs]
    return [Pair(r, 0.1, 0.1 * c, run=f"run{run}") for r, (run, c) in enumerate(out, 1)]


def judge_runs(runs: list[list[float]], round_var: float | None = None, prior: float | None = 0.01 ** 2):
    d = paired.Differences.of(in_runs(runs))
    assert d is not None
    n = d.n + d.set_aside
    e = paired.evidence(d, prior, ROUNDS, 0.01, 0.0, (n, n), round_var)
    assert e is not None
    level = paired.nominal_alpha(ROUNDS.alpha, paired.looks(ROUNDS))
    return paired.verdict_of(e, e.p_value < level, 1, ROUNDS)


def test_a_change_seen_in_one_round_alone_is_unconfirmed_its_runs_state_may_be_all_it_is() -> None:
    # An A/A PR on four H200s (tests/fixtures/h200-stay/aa-pr): every small cell of one GPU's round-1 runs read about
    # 3.6% faster at head, and one of them, three pairs within 1.6% of each other, was reported "faster"
    assert judge_runs([[0.967, 0.952, 0.959]]).verdict == UNCONFIRMED
    assert judge_runs([[1.08, 1.07, 1.09], [1.08, 1.08]]).verdict == SLOWER


def test_the_rounds_shared_noise_widens_the_interval_of_a_cell_of_few_rounds() -> None:
    runs = [[0.967, 0.952, 0.959], [0.99, 1.0]]
    quiet, shared = judge_runs(runs), judge_runs(runs, round_var=0.03 ** 2)
    assert quiet.ci is not None and shared.ci is not None
    assert shared.ci[1] - shared.ci[0] > 2 * (quiet.ci[1] - quiet.ci[0])
    assert quiet.verdict == FASTER and shared.verdict == UNDECIDED


def test_a_rounds_variance_is_what_its_rounds_means_spread_beyond_their_pairs() -> None:
    apart = paired.Differences.of(in_runs([[1.03, 1.031, 1.029], [0.97, 0.971]]))
    alike = paired.Differences.of(in_runs([[1.03, 0.97, 1.0], [1.03, 0.97]]))
    one = paired.Differences.of(in_runs([[1.03, 0.97, 1.0]]))
    assert apart and alike and one
    assert paired.round_variance(apart) == pytest.approx(0.06 ** 2 / 2, rel=0.1)
    assert paired.round_variance(alike) == 0.0 and paired.round_variance(one) is None
    shared = paired.pooled_round_variance({1: ("c", apart), 2: ("c", alike), 3: ("c", one), 4: ("d", one)})
    assert shared == {"c": pytest.approx(paired.round_variance(apart) / 2)}


def test_what_the_pairs_cannot_decide_is_undecided_with_how_much_more_would() -> None:
    v = judge([1.10, 0.95, 1.12, 0.97], prior=0.08 ** 2)  # pairs spread 8%: neither a change nor the same
    assert v.verdict == UNDECIDED and v.more and v.more > 0 and v.ci is not None
    # one pair and nothing known of its class: undecided, one more pair at least
    d = paired.Differences.of(pairs([1.05]))
    assert d is not None and paired.evidence(d, None, RULE, 0.01, 0.0, (1, 1)) is None
    assert paired.undecided(d, (1, 1), 0.0).verdict == UNDECIDED


def test_a_mode_its_own_test_would_select_but_its_instances_modes_together_not_yet_says_what_they_need() -> None:
    # one mode of an instance whose source changed, five constructed pairs -3.5% on average: alone it is selected at
    # the look's level; tested with its instance's five modes (their p-value about ten times its own) it is not yet
    d = paired.Differences.of(pairs([0.96, 1.0, 0.965, 0.99, 0.96]))
    assert d is not None
    e = paired.evidence(d, 0.01 ** 2, RULE, 0.01, 0.0, (5, 5))
    level = paired.nominal_alpha(RULE.alpha, paired.looks(RULE))
    assert e is not None and e.p_value < level
    c, m = ("prefill", "llm_gelu_mlp"), ["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]
    quiet = {(*c, mode): replace(e, log_change=0.0, p_value=1.0) for mode in m}
    alone = select({(*c, "eager"): e}, [[(*c, "eager")]], level)
    together = select({(*c, "eager"): e, **quiet}, [[(*c, "eager"), *quiet]], level)
    assert (*c, "eager") in alone.cells and (*c, "eager") not in together.cells
    counted = replace(RULE, more_by_family=True)
    assert together.needs[(*c, "eager")] == pytest.approx(level / 10)
    assert paired.verdict_of(e, False, 1, counted, together.needs[(*c, "eager")]).more == 3
    # a record of format 4 estimated on the cell's own test alone: none
    assert paired.verdict_of(e, False, 1, RULE, together.needs[(*c, "eager")]).more == 0
    assert paired.rule_for(10, 3).more_by_family and paired.recorded(paired.rule_for(10, 3))["more_by_family"]


def test_an_undecided_cell_far_past_the_most_compiles_is_not_chased_one_within_reach_is() -> None:
    from tracker.analyse.changes import CellChange
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
    assert back.stopped == "" and back.confirm_rounds == 1  # an older record counts no rounds
    assert not back.more_by_family and not as_recorded(RULE, back).more_by_family  # nor its instances' modes


def test_each_pair_names_its_run_and_an_older_record_names_none(tmp_path: Path) -> None:
    cells = {"prefill/llm_rmsnorm/default": (Pair(1, 0.1, 0.11, "0", "0", "r1"), Pair(4, 0.1, 0.108, "1", "1", "r2"))}
    written = pairing.write(tmp_path, PairedRecord("h100", "2.11.0+cu130", BASE, HEAD, cells=cells, confirm_rounds=2))
    back = pairing.find(tmp_path, "h100", "2.11.0+cu130", BASE, HEAD)
    assert back is not None and [p.run for p in back.pairs(("prefill", "llm_rmsnorm", "default"))] == ["r1", "r2"]
    assert back.confirm_rounds == 2
    data = json.loads(written.read_text())
    data["cells"] = {k: [{f: v for f, v in p.items() if f != "run"} for p in ps] for k, ps in data["cells"].items()}
    written.write_text(json.dumps({k: v for k, v in data.items() if k != "confirm_rounds"} | {"format": 3}))
    back = pairing.find(tmp_path, "h100", "2.11.0+cu130", BASE, HEAD)
    assert back is not None and back.confirm_rounds == 1
    assert [p.run for p in back.pairs(("prefill", "llm_rmsnorm", "default"))] == [None, None]


def test_a_newer_damaged_or_linked_record_is_one_clear_error(tmp_path: Path) -> None:
    written = pairing.write(tmp_path, record())
    data = json.loads(written.read_text())
    written.write_text(json.dumps(data | {"format": pairing.FORMAT + 1}))
    with pytest.raises(PairingError, match="newer than this tool reads"):
        pairing.find(tmp_path, "h100", "2.11.0+cu130", BASE, HEAD)
    written.write_text(json.dumps(data | {"cells": {"x": [{"round": 1, "base_ms": -1, "head_ms": 1}]}}))
    with pytest.raises(PairingError, match="damaged paired record"):
        pairing.find(tmp_path, "h100", "2.11.0+cu130", BASE, HEAD)
    written.write_text(json.dumps(data | {"more_by_family": "yes"}))
    with pytest.raises(PairingError, match=r"damaged paired record \('yes' is not true or false\)"):
        pairing.find(tmp_path, "h100", "2.11.0+cu130", BASE, HEAD)
    outside = tmp_path.parent / f"{tmp_path.name}-outside.json"
    outside.write_text(json.dumps(data))
    written.unlink()
    os.symlink(outside, written)
    with pytest.raises(PairingError, match="not a readable paired record"):
        pairing.find(tmp_path, "h100", "2.11.0+cu130", BASE, HEAD)


def test_a_pairs_change_is_its_log_ratio() -> None:
    assert Pair(1, 0.1, 0.11).log_change == pytest.approx(math.log(1.1))


# ---------------------------------------------------------------------------------------------------- an A/A PR

AA_PR = Path(__file__).resolve().parent / "fixtures" / "h200-stay" / "aa-pr"


@pytest.mark.slow
def test_an_aa_pr_whose_first_round_moved_one_gpus_cells_alike_reports_nothing_once_changes_need_two_rounds(
        tmp_path: Path) -> None:
    import shutil

    from tracker.analyse.compare import compare_runs
    from tracker.store.cells import default_cells_dir

    shutil.copytree(AA_PR / "results", tmp_path / "results")
    shutil.copytree(AA_PR / "cells", default_cells_dir(tmp_path / "results"))
    cells = default_cells_dir(tmp_path / "results")
    as_run = compare_runs(tmp_path / "results", "df1eb2d0", "78e2c14c", "x4-aa-diffusion")
    assert [(x.workload, x.mode) for x in as_run.improvements] == [("diff_time_embedding_mlp", "eager")]
    record = pairing.find(cells, "x4-aa-diffusion", "2.11.0+cu130", as_run.base.commit, as_run.head.commit)
    assert record is not None and record.confirm_rounds == 1  # written before rounds were counted
    # its pairs given the rounds pr measured them in (to 3, 5, 8, 10 compiles a side: its log)
    def run(replicate: int) -> str:
        return f"round {next(k for k, top in enumerate((3, 5, 8, 10), 1) if replicate <= top)}"

    runs = {k: tuple(replace(p, run=run(p.round)) for p in ps) for k, ps in record.cells.items()}
    # and as a record of format 7 asks, the rounds' shared variance in proportion to each cell's own
    for scaled in (False, True):
        pairing.write(cells, replace(record, cells=runs, confirm_rounds=2, round_by_scale=scaled))
        judged = compare_runs(tmp_path / "results", "df1eb2d0", "78e2c14c", "x4-aa-diffusion")
        assert not judged.regressions and not judged.improvements and not judged.best_changes
        assert [x.verdict for x in judged.cells if x.workload == "diff_time_embedding_mlp" and x.mode == "eager"
                and x.preset == "prefill"] == [UNCONFIRMED]


def test_a_cell_carries_its_class_s_share_of_round_to_round_variance_in_proportion_to_its_own_noise() -> None:
    # trial t13 (tests/fixtures/h100-plant-truth/t13-h200-r1): rope's prefill max-autotune-no-cudagraphs, five pairs
    # -12% within 1.7% of each other, shared its class with the logits projection's autotuned cells, three of whose
    # rounds differed by 3.9-5.8%; their round-to-round variance, carried as the class's, widened rope's interval
    # most, and it stayed undecided. Scaled (paired records of format 7), each cell carries the class's ratio
    # of round-to-round variance to a cell's own, times its own: a quiet cell less, a noisy one about as much.
    logits = [paired.Differences.of(in_runs(r)) for r in ([[1.04, 0.99, 1.07], [0.97, 0.94]],
                                                           [[0.95, 1.02, 0.99], [1.05, 1.06]])]
    rope = paired.Differences.of(in_runs([[0.873, 0.885, 0.88], [0.869, 0.878]]))
    assert rope is not None and all(logits)
    diffs = {i: ("autotuned", d) for i, d in enumerate([*logits, rope]) if d is not None}
    scaled = replace(ROUNDS, round_by_scale=True)

    def se(d: paired.Differences, rule: ChangeRule) -> float:
        shared = paired.pooled_round_variance(diffs, rule.round_by_scale)["autotuned"]
        e = paired.evidence(d, paired.pooled_variance(diffs)["autotuned"], rule, 0.01, 0.0, (d.n, d.n), shared)
        assert e is not None
        return e.se

    assert se(rope, scaled) < 0.8 * se(rope, ROUNDS)
    assert logits[0] is not None and se(logits[0], scaled) == pytest.approx(se(logits[0], ROUNDS), rel=0.5)
