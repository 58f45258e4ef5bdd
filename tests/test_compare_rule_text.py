"""What a comparison says about its own rule: the terminal footer and the comment's fine print name the way each cell
was judged (against its own noise: the noise test; where its noise is unknown, or under ChangeRule(test="bands"),
the fixed bands: one compile a side by samples and bands, several compiles by the compiles and the replicated
floor), with the numbers of the comparison's ChangeRule; a change on fewer compiles than the rule asks is
unconfirmed, in the headline and listed, never counted. The bands' words are pinned under test="bands", which judges
every cell by them.

The runs are a real H100 run (tests/fixtures/h100-aa2, h100-d: three compiles in most cells of the autotuned modes
and in those its confirmation re-measured, one elsewhere) rewritten by test_compare.write_run with the same number
of compiles in every cell, which no real run has: write_run(compiles=1) keeps each cell's best compile as its only
one, write_run(compiles=3) records three compiles as fast as the best (both constructed).
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from test_compare import BASE, H100, MACHINE, fake_commit, write_run

from tracker.analyse.changes import Comparison
from tracker.analyse.compare import UNCONFIRMED, ChangeRule, compare_runs, launch_floor
from tracker.publish.comparetable import render_table
from tracker.publish.comparison import comparison_json
from tracker.publish.prcomment import headline, render_comment

SLOWER_CELL = ("prefill", "llm_rmsnorm", "eager")  # ~500 us, GPU-bound: judged by the plain bands
# Numbers no default has, so a text that restates the defaults instead of reading the rule fails.
RULE = ChangeRule(test="bands", min_change=0.11, replicated_change=0.07, replicated_autotuned_small_change=0.13,
                  launch_jitter=0.3)
NOISE_RULE = ChangeRule(alpha=0.03, floor=0.02, launch_jitter=0.3)


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rd = tmp_path_factory.mktemp("rule-text") / "results"
    shutil.copytree(H100, rd)
    write_run(rd, fake_commit("one-base"), {}, hours=1, compiles=1)
    write_run(rd, fake_commit("one-head"), {SLOWER_CELL: 1.5}, hours=2, compiles=1)
    write_run(rd, fake_commit("three-base"), {}, hours=3, compiles=3)
    write_run(rd, fake_commit("three-head"), {SLOWER_CELL: 1.5}, hours=4, compiles=3)
    return rd


@pytest.fixture(scope="module")
def as_measured(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture's runs and a copy of h100-d's with the slower cell, every cell with the compiles h100-d measured
    (three in some, one elsewhere), in a directory of their own: h100-d's run has no history there, so the noise test
    judges the cells of three compiles a side (their compiles tell their noise), the bands the rest."""
    rd = tmp_path_factory.mktemp("rule-text-measured") / "results"
    shutil.copytree(H100, rd)
    write_run(rd, fake_commit("measured-head"), {SLOWER_CELL: 1.5})
    return rd


def compare(results: Path, base: str, head: str, rule: ChangeRule = RULE) -> Comparison:
    return compare_runs(results, fake_commit(base)[:8], fake_commit(head)[:8], MACHINE, rule=rule)


def footer(c: Comparison) -> list[str]:
    lines = render_table(c).splitlines()
    return lines[next(i for i, line in enumerate(lines) if line.endswith("otherwise")) + 1:]


def fine_print(c: Comparison) -> str:
    (line,) = [line for line in render_comment(c).splitlines() if line.startswith("<sub>A cell")]
    return line


def jitter_us(c: Comparison) -> float:
    return RULE.launch_jitter * launch_floor(c.base, c.head)


def test_one_compile_a_side_is_judged_by_its_samples_and_the_fixed_bands(results: Path) -> None:
    c = compare(results, "one-base", "one-head")
    assert {x.compiles for x in c.cells if x.compiles} == {(1, 1)}
    assert footer(c) == [f"a cell changed when p < {RULE.p_value:g} and its median moved beyond its band (11%, 25% "
                         f"when small or host-bound, 30% autotuned); every change also beyond 0.3x the launch floor "
                         f"({jitter_us(c):.2f} us); too noisy (~): samples spread over 20% (disturbed) or a move "
                         "beyond half its band; the row says which"]
    assert "p < 0.01" in fine_print(c) and "±11%" in fine_print(c)
    assert "several compiles" not in fine_print(c) and "unconfirmed" not in fine_print(c)


def test_several_compiles_a_side_are_judged_by_their_compiles_and_the_replicated_floor(results: Path) -> None:
    c = compare(results, "three-base", "three-head")
    assert {x.compiles for x in c.cells if x.compiles} == {(3, 3)}
    assert [x.verdict for x in c.cells if (x.preset, x.workload, x.mode) == SLOWER_CELL] == ["slower"]
    (line,) = footer(c)
    assert line.startswith("a cell of several compiles changed when the slower side's best lay beyond the faster "
                           "side's slowest compile by 7% (13% autotuned and small or host-bound), p not deciding")
    assert "p < " not in line  # no cell was judged by its samples
    text = fine_print(c)
    assert text.startswith("<sub>A cell measured in several compiles (fresh processes) was judged on its compiles")
    assert ("by ±7% (±13% for max-autotune and max-autotune-no-cudagraphs under 50 µs or host-bound), whatever its "
            "samples' p-value") in text and "Mann-Whitney" not in text
    assert f"every change also had to exceed 0.3\u00d7 the launch floor in time ({jitter_us(c):.2f} µs)" in text
    rule = comparison_json(c)["rule"]
    floors = ("replicated_change", "replicated_autotuned_small_change", "launch_jitter")
    assert tuple(rule[k] for k in floors) == (0.07, 0.13, 0.3)


def test_a_change_on_fewer_compiles_than_the_rule_asks_is_unconfirmed_listed_and_not_counted(results: Path) -> None:
    # base has three compiles a cell, head one: the head side is what confirmation would re-measure
    c = compare(results, "three-base", "one-head", replace(RULE, confirm=(0, 3)))
    unconfirmed = [x for x in c.cells if x.verdict == UNCONFIRMED]
    assert [(x.preset, x.workload, x.mode) for x in unconfirmed] == [SLOWER_CELL]
    assert not c.regressions and not c.changed
    assert headline(c).endswith(f"{len(unconfirmed)} unconfirmed (not counted)")
    comment = render_comment(c, only_changed=True)  # listed even without the every-cell details
    assert comment.splitlines()[2] == f"### compile-baselines: {headline(c)}"
    assert ("Unconfirmed, not counted (moved beyond its noise on fewer than 3 compiles at head; a re-measurement "
            "confirms or clears them): llm_rmsnorm prefill eager (1.50\u00d7, compiles 3 → 1).") in comment
    table = render_table(c)
    assert any(line.startswith("?") and " llm_rmsnorm " in line and " eager " in line and UNCONFIRMED in line
               for line in table.splitlines())
    assert "1 unconfirmed, not counted (?)" in table
    # one side with several compiles: judged on them, against the fixed band; and the confirmation is said
    (line,) = footer(c)
    assert "(13% autotuned and small or host-bound, the fixed band where one side has one)" in line
    assert "a change found on fewer than 3 compiles at head is unconfirmed: listed, not counted" in line
    assert "a change found on fewer than 3 compiles at head is unconfirmed" in fine_print(c)


def test_cells_judged_against_their_own_noise_say_so_with_the_rules_numbers(as_measured: Path) -> None:
    c = compare_runs(as_measured, BASE[:8], fake_commit("measured-head")[:8], MACHINE, rule=NOISE_RULE)
    tested = [x for x in c.cells if x.ci is not None]
    assert tested and all(x.compiles == (3, 3) for x in tested)
    assert any(x.ci is None and x.compiles == (1, 1) for x in c.cells)  # unknown noise: the bands
    # ... one compile a side: the bands judge no cell on several compiles, and the text names no such test
    assert all(x.compiles == (1, 1) for x in c.cells if x.noise == "fixed bands")
    lines = footer(c)
    assert lines[0] == ("a cell changed when its compiles' mean moved beyond its own noise (t-test, the cells selected "
                        "together at 3% false alarms a comparison, modes together) and beyond 2% and one compile's "
                        "spread; the same within ±10%; else undecided")
    assert lines[1].startswith("a cell of unknown noise changed when p < 0.01")
    assert lines[-1].endswith(f"every change also beyond 0.3x the launch floor ({jitter_us(c):.2f} us); too noisy "
                              "(~): samples spread over 20% (disturbed) or a move beyond half its band; the row says "
                              "which")
    assert not any("several compiles" in line for line in lines)
    text = fine_print(c)
    assert text.startswith("<sub>A cell changed when its compiles' mean moved beyond its own noise (compile to compile "
                           "and run to run, from this comparison, the cell's history and its class), the comparison's "
                           "cells selected together so that unchanged code raises an alarm in under 3% of comparisons "
                           "(Benjamini-Hochberg, an instance's modes together where its source changed), and beyond "
                           "its minimum change (2%, and one compile's spread); it is the same when its interval lies "
                           "within ±10%, and undecided otherwise; a cell of unknown noise changed when Mann-Whitney U")
    assert comparison_json(c)["rule"]["test"] == "noise"


def test_under_the_bands_no_cell_is_judged_against_its_noise_and_the_text_never_says_so(as_measured: Path) -> None:
    c = compare_runs(as_measured, BASE[:8], fake_commit("measured-head")[:8], MACHINE, rule=RULE)
    assert all(x.ci is None and x.noise in ("fixed bands", None) for x in c.cells)
    assert not any("own noise" in line for line in footer(c)) and "own noise" not in fine_print(c)
    assert comparison_json(c)["rule"]["test"] == "bands"
