"""Commit or torch: when both changed between two runs, the change that moved each best baseline and significant
cell, from a cross run (head's commit under base's torch, or base's commit under head's torch), else the one run
that decides it.

The runs are the real ones of tests/fixtures/cpu-versions: one commit (878f7b9) measured under torch 2.9.1 and
2.13.0. The fixture has a single commit, so the scenario's earlier commit C1 is a relabelled copy: the 2.9.1 run
(and, where said, the 2.13.0 run) with its commit label reassigned to C1 and its date a day earlier (see the fixture's
PROVENANCE.md). Between C1 and 878f7b9 nothing was measured anew, so these runs can show a change moved by torch,
never one moved by a commit: the fixture lacks that case, and `commit`, `both` and `neither alone` are specified on
the leg states alone (test_the_cause_is_the_leg_that_moved).

Every cell of the fixture is spread over more than 20% of its median (tiny CPU timings): under the default rule
nothing is judged, so the tests that need judged changes lift the spread limit (ChangeRule(max_spread=inf)) and let
the p-values and bands judge them. That is a rule for exercising the attribution, not a claim about torch 2.13.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from tracker import cli
from tracker.analyse.changes import Comparison
from tracker.analyse.compare import SAME, ChangeRule, compare_files, compare_versions
from tracker.analyse.verdicts import BY_BOTH, BY_COMMIT, BY_NEITHER, BY_TORCH, BY_UNDECIDED
from tracker.analyse.versionattribution import MOVED, STAYED, UNCLEAR, Attribution, attribute, cause, leg_state
from tracker.github.tracking import tracking_body
from tracker.publish import attributiontext
from tracker.publish.prcomment import render_comment
from tracker.store.results import list_runs

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "cpu-versions"
C2 = "878f7b9b2d6464958d64ca46541a276d7e7fa8f7"  # the fixture's one commit: nightly N's
C1 = "c1" * 20  # nightly N-1's commit: a label reassigned to copies of the fixture's runs, never measured as such
A, B = "2.9.1+cu128", "2.13.0+cpu"  # nightly N-1's torch and nightly N's
MACHINE = "cpu-vm"
JUDGED = ChangeRule(max_spread=math.inf)  # every fixture cell is too noisy under the default rule: see above


def test_the_cause_is_the_leg_that_moved() -> None:
    assert cause(MOVED, STAYED) == BY_COMMIT
    assert cause(STAYED, MOVED) == BY_TORCH
    assert cause(MOVED, MOVED) == BY_BOTH
    assert cause(STAYED, STAYED) == BY_NEITHER  # each within its band; together beyond it
    for unclear in ((UNCLEAR, MOVED), (UNCLEAR, STAYED), (MOVED, UNCLEAR), (STAYED, UNCLEAR), (UNCLEAR, UNCLEAR)):
        assert cause(*unclear) == BY_UNDECIDED


def test_a_leg_says_moved_stayed_or_unclear_from_its_own_verdicts(tmp_path: Path) -> None:
    noisy = compare_versions(FIXTURE / "results", "2.9.1", "2.13")  # every cell spread over 20%: not judged
    judged = compare_versions(FIXTURE / "results", "2.9.1", "2.13", rule=JUDGED)
    results = _results(tmp_path)
    relabel_as_c1(results, A)
    runs = {(r.commit, r.torch): r for r in list_runs(results)[0]}
    still = compare_files(results, runs[(C1, A)], runs[(C2, A)])  # one measurement under two labels
    for mode in (None, "eager", "max-autotune"):
        assert leg_state(noisy, "tiny", "llm_rmsnorm", mode)[0] == UNCLEAR
        assert leg_state(judged, "tiny", "llm_rmsnorm", mode)[0] == MOVED
        assert leg_state(still, "tiny", "llm_rmsnorm", mode)[0] == STAYED
    assert leg_state(judged, "tiny", "llm_rmsnorm", "max-autotune") == (MOVED, "slower (1.63x)")
    assert leg_state(judged, "tiny", "llm_rope_apply", None) == (UNCLEAR, "not measured on both sides")


def _results(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURE / "results", tmp_path / "results")
    shutil.copytree(FIXTURE / "cells", tmp_path / "cells")
    return tmp_path / "results"


def _file(results: Path, commit: str, torch: str) -> Path:
    return next(r.path for r in list_runs(results)[0] if (r.commit, r.torch) == (commit, torch))


def relabel_as_c1(results: Path, torch: str, keep_original: bool = True) -> None:
    """A copy of the fixture's run under `torch`, its commit label reassigned to C1 and its date a day earlier (its
    cell store records copied alike); the original run is removed unless `keep_original`."""
    src = _file(results, C2, torch)
    data = json.loads(src.read_text())
    data["commit_hash"], data["date"] = C1, data["date"] - 86_400_000
    src.with_name(f"{C1[:8]}-{src.name.split('-', 1)[1]}").write_text(json.dumps(data))
    cells = results.parent / "cells" / MACHINE
    shutil.copytree(cells / C2 / f"torch-{torch}", cells / C1 / f"torch-{torch}")
    if not keep_original:
        src.unlink()


def direct(results: Path, rule: ChangeRule | None = None) -> Comparison:
    """Nightly N-1 (C1 under torch A) against nightly N (C2 under torch B), as compare picks them."""
    return compare_versions(results, "2.9.1", "2.13", base=C1[:8], head=C2[:8], rule=rule)


def attributed(results: Path, rule: ChangeRule | None = None) -> tuple[Comparison, Attribution]:
    c = direct(results, rule)
    a = attribute(results, c)
    assert a is not None
    return c, a


def keys(c: Comparison) -> list[tuple[str, str, str | None]]:
    return ([(i.preset, i.workload, None) for i in c.best_changes]
            + [(x.preset, x.workload, x.mode) for x in c.cells if x.significant])


def test_a_rule_that_lifts_the_spread_limit_ranks_the_cells_it_judges() -> None:
    c = compare_versions(FIXTURE / "results", "2.9.1", "2.13", rule=JUDGED)
    assert not c.noisy and all(x.verdict != "noisy" for x in c.cells)
    rms = next(i for i in c.instances if (i.preset, i.workload) == ("tiny", "llm_rmsnorm"))
    assert rms.base_best is not None and rms.head_best is not None


def test_one_change_alone_needs_no_attribution() -> None:
    c = compare_versions(FIXTURE / "results", "2.9.1", "2.13")  # one commit, two torch versions
    assert c.base.commit == c.head.commit and attribute(FIXTURE / "results", c) is None


def test_the_cross_run_is_found_and_under_the_default_rule_nothing_moved_to_attribute(tmp_path: Path) -> None:
    results = _results(tmp_path)
    relabel_as_c1(results, A)  # C1 under A; the fixture's C2 under A stays: the cross run
    c, a = attributed(results)
    assert (a.base.commit, a.base.torch, a.head.commit, a.head.torch) == (C1, A, C2, B)
    [route] = a.routes
    assert (route.cross.commit, route.cross.torch, route.cross.machine) == (C2, A, MACHINE)
    assert len(c.noisy) == 10 and a.items == [] and a.decisive is None


def test_with_the_cross_run_at_heads_commit_every_change_is_torchs(tmp_path: Path) -> None:
    results = _results(tmp_path)
    relabel_as_c1(results, A)
    c, a = attributed(results, JUDGED)
    assert len(c.best_changes) == 2 and sum(x.significant for x in c.cells) == 10
    assert [(x.preset, x.workload, x.mode) for x in a.items] == keys(c)
    assert {x.cause for x in a.items} == {BY_TORCH}
    [route] = a.routes
    # the commit leg compares the relabelled copy with its original: one measurement, no move
    assert {(x.verdict, x.ratio) for x in route.commit.cells} == {(SAME, 1.0)}
    # the torch leg is the fixture's own comparison of the versions at its commit, verdict for verdict
    alone = compare_versions(FIXTURE / "results", "2.9.1", "2.13", rule=JUDGED)
    assert [(x.mode, x.verdict) for x in route.torch.cells] == [(x.mode, x.verdict) for x in alone.cells]
    rms = next(x for x in a.items if (x.workload, x.mode) == ("llm_rmsnorm", None))
    assert rms.change == "best latency faster"
    assert rms.why == (f"via {C2[:8]} under torch {A}: commit alone eager best, latency same; torch alone best "
                       "latency faster")


def test_without_a_cross_run_it_names_the_run_that_decides_and_that_run_decides(tmp_path: Path) -> None:
    results = _results(tmp_path)
    relabel_as_c1(results, A, keep_original=False)  # no run of C2 under A, none of C1 under B
    _, a = attributed(results, JUDGED)
    assert a.routes == [] and len(a.items) == 12 and {x.cause for x in a.items} == {BY_UNDECIDED}
    assert a.items[0].why == f"no cross run: neither {C2[:8]} under torch {A} nor {C1[:8]} under torch {B} was measured"
    assert a.decisive is not None and (a.decisive.commit, a.decisive.torch) == (C2, A)
    # base and head share a machine, which must keep one torch version per commit: the run gets its own
    assert a.decisive.command() == ("compile-baselines run --preset tiny --workload llm_rmsnorm diff_cfg_blend "
                                    f"--kernel none --machine {MACHINE}-torch-{A} --commit {C2}")
    # That run is the one the fixture holds (PROVENANCE.md: the same cells, commit and torch, on machine cpu-vm):
    # with it back in place, the attribution decides.
    shutil.copy(FIXTURE / "results" / MACHINE / "878f7b9b-existing-py_tmp_venv291_bin_python.json",
                results / MACHINE)
    _, decided = attributed(results, JUDGED)
    assert decided.decisive is None and {x.cause for x in decided.items} == {BY_TORCH}


@pytest.mark.slow
def test_the_cross_run_at_bases_commit_decides_too_and_two_cross_runs_must_agree(tmp_path: Path) -> None:
    results = _results(tmp_path)
    relabel_as_c1(results, A, keep_original=False)
    relabel_as_c1(results, B)  # C1 under B (a relabelled copy of the 2.13.0 run): the other cross run
    _, a = attributed(results, JUDGED)
    [route] = a.routes
    assert (route.cross.commit, route.cross.torch) == (C1, B)
    assert (route.torch.base.torch, route.torch.head.torch, route.commit.head.commit) == (A, B, C2)
    assert {x.cause for x in a.items} == {BY_TORCH}

    shutil.copy(FIXTURE / "results" / MACHINE / "878f7b9b-existing-py_tmp_venv291_bin_python.json",
                results / MACHINE)  # and C2 under A: both cross runs
    _, both = attributed(results, JUDGED)
    assert [(r.cross.commit, r.cross.torch) for r in both.routes] == [(C2, A), (C1, B)]
    assert {x.cause for x in both.items} == {BY_TORCH} and all(x.why.count("via ") == 2 for x in both.items)


def test_the_markdown_says_which_change_moved_each_and_the_run_that_decides(tmp_path: Path) -> None:
    results = _results(tmp_path)
    relabel_as_c1(results, A, keep_original=False)
    _, a = attributed(results, JUDGED)
    md = attributiontext.render_md(a)
    assert md.startswith(attributiontext.HEADING + "\n")
    assert (f"| llm_rmsnorm | tiny | best baseline | best latency faster | **undecided** | no cross run: neither "
            f"{C2[:8]} under torch {A} nor {C1[:8]} under torch {B} was measured |") in md
    assert f"```\n{a.decisive.command()}\n```" in md
    relabel_as_c1(results, B)
    _, decided = attributed(results, JUDGED)
    md = attributiontext.render_md(decided)
    assert "| diff_cfg_blend | tiny | eager | slower | **torch** | via c1c1c1c1 under torch 2.13.0+cpu: " in md
    assert "```" not in md


@pytest.mark.slow
def test_compare_attribute_adds_the_section_to_the_markdown_and_the_json(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    results = _results(tmp_path)
    relabel_as_c1(results, A)
    args = ["compare", "--results-dir", str(results), "--base", C1[:8], "--head", C2[:8], "--base-torch", "2.9.1",
            "--head-torch", "2.13", "--attribute"]
    assert cli.main([*args, "--format", "md"]) == 0
    md = capsys.readouterr().out
    assert attributiontext.HEADING in md and "Nothing moved beyond noise between the two runs" in md
    assert f"- cross run {C2[:8]} under torch {A} on {MACHINE}:" in md
    assert cli.main([*args, "--format", "json"]) == 0
    got = json.loads(capsys.readouterr().out)["attribution"]
    assert ([r["commit"] for r in got["cross_runs"]], got["items"], got["decisive_run"]) == ([C2], [], None)
    # one commit: nothing to attribute, said as null
    assert cli.main([*args[:3], "--base-torch", "2.9.1", "--head-torch", "2.13", "--attribute", "--format",
                     "json"]) == 0
    assert json.loads(capsys.readouterr().out)["attribution"] is None
    assert cli.main([*args[:-1], "--format", "md"]) == 0
    assert attributiontext.HEADING not in capsys.readouterr().out  # without --attribute, as before


def test_compare_files_of_a_relabelled_copy_is_no_change(tmp_path: Path) -> None:
    """The premise of the relabelling: a copy under another commit label compares as one measurement."""
    results = _results(tmp_path)
    relabel_as_c1(results, A)
    runs = {(r.commit, r.torch): r for r in list_runs(results)[0]}
    c = compare_files(results, runs[(C1, A)], runs[(C2, A)])
    assert not c.changed and {x.verdict for x in c.cells} == {SAME}


def test_the_tracking_issue_says_which_change_moved_each_best_baseline(tmp_path: Path) -> None:
    """The nightly's issue body is compare --attribute's markdown per machine (nightly.yml): the section follows the
    best-baseline changes and survives the fitting of the issue to GitHub's limit."""
    results = _results(tmp_path)
    relabel_as_c1(results, A)
    c, a = attributed(results, JUDGED)
    section = attributiontext.render_md(a)
    body = tracking_body("## cpu-vm\n\n" + render_comment(c, attribution=section), max_chars=60_000)
    assert body.index("#### Best baseline changes") < body.index(attributiontext.HEADING) < body.index("#### Wins")
    for workload in ("llm_rmsnorm", "diff_cfg_blend"):
        assert f"| {workload} | tiny | best baseline | best latency " in body
    assert body.count("| **torch** |") == 12
    short = render_comment(c, max_chars=6_000, attribution=section)  # rows are cut, never the section
    assert section.rstrip("\n") in short and len(short) <= 6_000
