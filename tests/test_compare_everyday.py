"""compare as people type it every day: git refs and abbreviated hashes, the latest two runs when none is named, a
terminal table (the default on a terminal), --only-changed, and --factor, which only ever makes a verdict stricter.
Runs are modified copies of a real H100 run (tests/fixtures/h100-aa2's h100-d, by tests/test_compare.py's
write_run)."""

from __future__ import annotations

import itertools
import json
import math
import shutil
import subprocess
from pathlib import Path

import pytest
from comparecli import run_compare

from tests.test_compare import BASE, H100, MACHINE, SCENARIOS, fake_commit, write_run
from tracker import cli
from tracker.analyse.compare import FASTER, NOISY, NOW_FAILS, SAME, SLOWER, UNDECIDED, ChangeRule, compare_runs
from tracker.commands import compare as compare_command
from tracker.errors import UsageError
from tracker.publish.comparison import FORMATS, comparison_json
from tracker.publish.markdown import MARKER
from tracker.publish.prcomment import render_comment


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                          capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A git repository of three commits, oldest first; the results hold runs of the first two."""
    path = tmp_path_factory.mktemp("repo")
    git(path, "init", "-q")
    for name in ("one", "two", "three"):
        git(path, "commit", "-q", "--allow-empty", "-m", name)
    return path, git(path, "log", "--reverse", "--format=%H").split()


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory, repo: tuple[Path, list[str]]) -> Path:
    """The fixture's two real runs (BASE on h100-c and on MACHINE), then the repo's first commit (a copy of BASE)
    and its second (the regression scenario of test_compare) on MACHINE, one and two hours later."""
    rd = tmp_path_factory.mktemp("everyday") / "results"
    shutil.copytree(H100, rd)
    first, second, _ = repo[1]
    write_run(rd, first, hours=1)
    write_run(rd, second, SCENARIOS["regression"], hours=2)
    return rd


def run_json(results: Path, base: str | None, head: str | None, capsys: pytest.CaptureFixture[str],
             repo_dir: Path | None = None, **kw: object) -> tuple[dict, str]:
    assert run_compare(results, base, head, MACHINE, "json", repo_dir=repo_dir, **kw) == 0  # type: ignore[arg-type]
    captured = capsys.readouterr()
    return json.loads(captured.out), captured.err


def cell_of(header: str, row: str) -> tuple[str, str, str]:
    """(preset, workload, mode) of a row of the terminal table, by its header's columns."""
    at = [header.index(f" {name}") + 1 for name in ("preset", "workload", "mode", "evidence")]
    return tuple(row[a:b].strip() for a, b in itertools.pairwise(at))  # type: ignore[return-value]


def evidence_of(header: str, row: str) -> str:
    return row[header.index(" evidence") + 1:].strip()


def test_git_refs_and_abbreviated_hashes_name_the_runs(results: Path, repo: tuple[Path, list[str]],
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    path, (first, second, third) = repo
    data, _ = run_json(results, "HEAD~2", "HEAD~1", capsys, path)
    assert (data["base"]["commit"], data["head"]["commit"]) == (first, second)
    data, _ = run_json(results, first[:7], "main" if git(path, "branch", "--show-current") == "main" else second,
                       capsys, path)
    assert (data["base"]["commit"], data["head"]["commit"]) == (first, second)
    with pytest.raises(Exception, match=rf"no results for 'HEAD' \(commit {third[:12]}\); latest commits with "
                                        rf"results: {second[:8]}, {first[:8]}, {BASE[:8]}$"):  # newest first
        run_compare(results, "HEAD~1", "HEAD", MACHINE, repo_dir=path)
    with pytest.raises(Exception, match="no results for commit 'HEAD~1'"):  # no repository: not resolved
        run_compare(results, "HEAD~1", second, MACHINE)


def test_without_base_and_head_the_machines_latest_two_runs(results: Path, repo: tuple[Path, list[str]],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    _, (first, second, _) = repo
    data, err = run_json(results, None, None, capsys)
    assert (data["base"]["commit"], data["head"]["commit"]) == (first, second)
    # the copies are dated one and two hours after the real run (2026-11-24 00:50 UTC)
    assert err.splitlines()[0] == (f"compare: base {first[:8]} (2026-11-24 01:50 UTC) and head {second[:8]} "
                                   f"(2026-11-24 02:50 UTC): the latest two runs on {MACHINE}")
    data, err = run_json(results, None, first[:8], capsys)  # only --head: the run before it
    assert (data["base"]["commit"], data["head"]["commit"]) == (BASE, first)
    assert err.splitlines()[0].endswith(f": the run before head on {MACHINE}")
    data, err = run_json(results, BASE[:8], None, capsys)  # only --base: the latest run
    assert (data["base"]["commit"], data["head"]["commit"]) == (BASE, second)
    assert err.splitlines()[0].startswith(f"compare: head {second[:8]} ")


def test_the_latest_two_runs_need_two_runs_and_one_machine(tmp_path: Path) -> None:
    rd = tmp_path / "results"
    write_run(rd, BASE)
    # the first run of a machine (the quickstart's): nothing to compare with, and what to do about it (exit 2)
    with pytest.raises(UsageError, match=f"no run on {MACHINE} before {BASE[:8]} to compare it with: it is the "
                                         "machine's only commit measured; measure another"):
        run_compare(rd, None, None)
    write_run(rd, fake_commit("earlier"), hours=-1)
    write_run(rd, BASE, machine="other")
    with pytest.raises(Exception, match=rf"results of several machines \({MACHINE}, other\): pass --machine"):
        run_compare(rd, None, None)
    assert run_compare(rd, None, None, MACHINE, "json") == 0


def test_two_machines_latest_runs_need_only_the_two_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The README's own fixture: one commit measured on two H100 hosts (tests/fixtures/h100-aa2)."""
    assert cli.main(["compare", "--results-dir", str(H100), "--machine", "h100-c", "--head-machine", MACHINE,
                     "--format", "json"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert (data["base"]["machine"], data["head"]["machine"]) == ("h100-c", MACHINE)
    assert data["base"]["commit"] == data["head"]["commit"] == BASE
    assert "the latest run of each machine, base on h100-c, head on h100-d" in captured.err
    for argv, message in ((["--head-machine", MACHINE], "--head-machine needs --machine"),
                          ([], "results of several machines (h100-c, h100-d): pass --machine")):
        assert cli.main(["compare", "--results-dir", str(H100), *argv]) == 2  # an input mistake, as --help says
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], err


def test_table_has_before_after_ratio_verdict_per_cell_and_the_headline(
        results: Path, repo: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]) -> None:
    _, (first, second, _) = repo
    assert run_compare(results, first, second, MACHINE, "table") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"compare {first[:8]} -> {second[:8]} on {MACHINE} · NVIDIA H100 80GB HBM3")
    assert lines[1].startswith("Best baselines changed: 0 · significant regressions: 3 · improvements: 1 · "
                               "1 cell too noisy to judge · ") and lines[1].endswith(" cells undecided")
    assert lines[3].split() == ["before", "after", "ratio", "verdict", "preset", "workload", "mode", "evidence"]
    rows = {cell_of(lines[3], line): line for line in lines[4:4 + 213]}
    assert len(rows) == 213
    eager = rows[("prefill", "vlm_patch_embedding_conv2d", "eager")]
    assert eager.startswith("+") and f" 1.50x  {SLOWER} " in eager
    # each row ends in its evidence: here a cell of one compile a side, of unknown noise, and its band
    assert evidence_of(lines[3], eager) == "+50.0%, band ±10%, p < 0.001, 1 compile a side"
    assert rows[("prefill", "llm_qk_norm", "eager")].startswith("-")
    assert rows[("decode", "llm_qk_norm", "reduce-overhead")].startswith("~")
    failed = rows[("decode", "llm_logits_projection_softmax", "max-autotune")]
    assert failed.startswith("+") and f" -      -  {NOW_FAILS}  decode " in failed
    # the counts, then the rule: a line for cells of one compile a side, one for cells of several
    counts = next(line for line in lines if line.startswith("41 instances and 213 cells: "))
    assert counts.startswith("41 instances and 213 cells: 3 slower or now failing (+), 1 faster or now ok (-)")


@pytest.mark.slow
def test_the_table_says_what_the_comment_says(capsys: pytest.CaptureFixture[str]) -> None:
    """The two hosts' runs of one commit (tests/fixtures/h100-aa2): besides the cells, the table has the comment's
    winner changed within noise, every kernel's speedup over the best baseline, and wins and geomeans per mode."""
    assert run_compare(H100, BASE, BASE, "h100-c", "md", head_machine=MACHINE) == 0
    md = capsys.readouterr().out
    assert run_compare(H100, BASE, BASE, "h100-c", "table", head_machine=MACHINE) == 0
    table = capsys.readouterr().out
    assert ("Winner changed within noise (not counted): vlm_vit_mlp_block decode (max-autotune-no-cudagraphs → "
            "default).") in md
    assert ("winner changed within noise (not counted): vlm_vit_mlp_block decode (max-autotune-no-cudagraphs -> "
            "default)") in table
    assert "| diff_cfg_blend | prefill | triton_cfg_blend | 1.02\u00d7 | 0.89\u00d7 | 0.87\u00d7 | same |" in md
    rows = [line.split() for line in table.splitlines()]
    assert ["prefill", "diff_cfg_blend", "triton_cfg_blend", "1.02x", "0.89x", "0.87x", "same"] in rows
    # 15 of its 41 instances have another fastest mode, every one within noise: the wins do not move
    assert "| prefill | max-autotune-no-cudagraphs | 17 → 17 | 11 → 11 | 2.04\u00d7 → 2.04\u00d7 |" in md
    assert ["prefill", "max-autotune-no-cudagraphs", "17", "->", "17", "11", "->", "11", "2.04x", "->", "2.04x"] in rows


AA_PAIRS = [(H100, "h100-c", MACHINE), (H100.parent.parent / "h100-aa4" / "results", "h100-f", "h100-g")]


def figure_rows(table: str) -> list[list[str]]:
    """The rows of the terminal table's wins and geomeans, split on whitespace."""
    lines = table.splitlines()
    start = lines.index("wins and geomean speedup vs eager, per mode (instances both runs measured)") + 2
    return [line.split() for line in itertools.takewhile(lambda x: x.split()[0] in ("prefill", "decode"),
                                                         lines[start:])]


@pytest.mark.slow
@pytest.mark.parametrize("results_dir, base, head", AA_PAIRS, ids=["h100-aa2", "h100-aa4"])
def test_two_runs_of_one_commit_show_the_same_wins_and_geomeans(
        results_dir: Path, base: str, head: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The README's step: `compare --results-dir tests/fixtures/h100-aa2/results --machine h100-c --head-machine
    h100-d`. Nothing changed between the two runs, so no wins or geomean row may move, though a run's fastest
    mode differs in 15 (h100-aa4: 9) of the 41 instances, each within noise (the study's raw count moves)."""
    argv = ["compare", "--results-dir", str(results_dir), "--machine", base, "--head-machine", head]
    assert cli.main([*argv, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    flipped = [i for i in data["instances"] if i["base_best"] != i["head_best"]]
    assert len(flipped) >= 9 and not any(i["best_changed"] for i in flipped)
    assert cli.main([*argv, "--format", "table"]) == 0
    rows = figure_rows(capsys.readouterr().out)
    assert len(rows) == 10  # two presets, five modes
    for row in rows:  # "a -> a" in every column
        values = row[2:]
        pairs = [(values[i - 1], values[i + 1]) for i, v in enumerate(values) if v == "->"]
        assert pairs and all(a == b for a, b in pairs), row
    assert all((f["base_wins"], f["base_tied"], f["base_geomean"]) == (f["head_wins"], f["head_tied"],
                                                                       f["head_geomean"]) for f in data["figures"])


def test_only_changed_lists_the_changed_cells_in_every_format(
        results: Path, repo: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]) -> None:
    """Every cell the headline counts or names stays listed: the changes, the cell too noisy to judge, and the cells
    whose interval reaches beyond what the rule could call the same (undecided)."""
    _, (first, second, _) = repo
    assert run_compare(results, first, second, MACHINE, "table", only_changed=True) == 0
    lines = capsys.readouterr().out.splitlines()
    end = next(i for i in range(4, len(lines)) if lines[i].startswith("before, after, ratio: "))
    shown, after = lines[4:end], lines[end + 1]
    assert after == ""
    listed = [(cell_of(lines[3], line), line[0]) for line in shown]
    changed = [(c[1], c[2], mark) for c, mark in listed if mark != "?"]
    assert changed == [("llm_topk_sampling_prep", "reduce-overhead", "+"), ("llm_qk_norm", "eager", "-"),
                       ("vlm_patch_embedding_conv2d", "eager", "+"), ("llm_logits_projection_softmax", "max-autotune",
                                                                    "+"), ("llm_qk_norm", "reduce-overhead", "~")]
    undecided = [line for line in shown if line.startswith("?")]
    assert len(undecided) == len(shown) - 5 and all(" undecided " in line and "95% CI" in line for line in undecided)
    # the cell too noisy to judge says why: its samples spread
    (noisy,) = [line for line in shown if line.startswith("~")]
    assert noisy.endswith("; too noisy: samples spread 111% of the median, over 20% (disturbed)")
    counts = next(line for line in lines if line.startswith("41 instances and 213 cells: "))
    assert counts.endswith(f"; {213 - len(shown)} not shown (--only-changed)")
    # the undecided cells are counted apart, not among the others
    assert f", 1 too noisy to judge (~), {len(undecided)} undecided (?), {213 - len(shown)} otherwise;" in counts
    data, _ = run_json(results, first, second, capsys, only_changed=True)
    assert [(x["workload"], x["verdict"]) for x in data["cells"] if x["verdict"] != UNDECIDED] == [
        ("llm_topk_sampling_prep", SLOWER), ("llm_qk_norm", FASTER), ("vlm_patch_embedding_conv2d", SLOWER),
        ("llm_logits_projection_softmax", NOW_FAILS), ("llm_qk_norm", NOISY)]
    assert data["summary"]["cells"] == 213 and data["kernels"] == []
    # of the instances, only those whose best latency is undecided (the headline names them; none changed)
    assert data["summary"]["best_changed"] == 0 and len(data["instances"]) == data["summary"]["undecided_best"] > 0
    assert {i["latency_verdict"] for i in data["instances"]} == {UNDECIDED}
    assert data["summary"]["undecided"] == len(undecided)
    assert run_compare(results, first, second, MACHINE, "md", only_changed=True) == 0
    md = capsys.readouterr().out
    assert md.startswith(MARKER) and "#### Significant cell changes" in md and "Every cell" not in md
    assert (f"<details><summary>Cells that moved ({len(shown)}): 3 slower or now failing, 1 faster or now ok, 1 too "
            f"noisy, {len(undecided)} undecided") in md
    assert "| llm_qk_norm | decode | reduce-overhead | 24.0 µs | 71.9 µs | 3.00\u00d7 |" in md


@pytest.mark.slow
def test_factor_only_makes_verdicts_stricter(results: Path, repo: tuple[Path, list[str]],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    _, (first, second, _) = repo
    plain = compare_runs(results, first, second, MACHINE)
    strict = compare_runs(results, first, second, MACHINE, rule=ChangeRule(factor=1.3))
    assert {(x.workload, x.verdict) for x in strict.regressions + strict.improvements} == {
        ("vlm_patch_embedding_conv2d", SLOWER), ("llm_logits_projection_softmax", NOW_FAILS)}  # 1.25x, 0.8x: within
    assert all(x.threshold >= 0.3 for x in strict.cells if x.threshold is not None)
    loose = compare_runs(results, first, second, MACHINE, rule=ChangeRule(factor=1.01))  # below every band
    assert [x.verdict for x in loose.cells] == [x.verdict for x in plain.cells]
    data, _ = run_json(results, first, second, capsys, factor=1.3)
    assert data["rule"]["factor"] == 1.3 and data["summary"]["regressions"] == 2
    assert "factor 1.3\u00d7 (--factor)" in render_comment(strict)
    with pytest.raises(ValueError, match="the factor is a ratio of at least 1"):
        ChangeRule(factor=0.9)


def test_a_change_within_the_factor_is_never_an_alarm(results: Path, repo: tuple[Path, list[str]]) -> None:
    _, (first, second, _) = repo
    plain = compare_runs(results, first, second, MACHINE)
    strict = compare_runs(results, first, second, MACHINE, rule=ChangeRule(factor=1.3))
    verdicts = {(x.preset, x.workload, x.mode): x.verdict for x in strict.cells}
    for x in plain.cells:  # the same verdict, or "same" (or undecided) where the change stays within the factor
        assert verdicts[(x.preset, x.workload, x.mode)] in (x.verdict, SAME, UNDECIDED)
    within = [x for x in plain.cells if x.ratio is not None and abs(math.log(x.ratio)) < math.log(1.3)]
    assert any(x.significant for x in within)  # the plain rule's +25% and -20% cells
    # the same, or undecided where its interval reaches beyond the factor
    assert all(verdicts[(x.preset, x.workload, x.mode)] in (SAME, UNDECIDED) for x in within)


def test_without_the_new_options_md_and_json_are_as_before(results: Path, repo: tuple[Path, list[str]],
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    _, (first, second, _) = repo
    c = compare_runs(results, first, second, MACHINE)
    assert run_compare(results, first, second, MACHINE, "md") == 0
    assert capsys.readouterr().out == render_comment(c)
    data, _ = run_json(results, first, second, capsys)
    assert "factor" not in data["rule"] and data == comparison_json(c)


def test_cli_picks_a_table_on_a_terminal_and_markdown_into_a_pipe(
        results: Path, repo: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    _, (first, second, _) = repo
    assert compare_command.FORMATS == FORMATS  # one constant (tracker.publish.units), named in the CLI without pandas
    args = ["compare", "--results-dir", str(results), "--base", first[:8], "--head", second[:8]]
    assert cli.main(args) == 0
    assert capsys.readouterr().out.startswith(MARKER)  # captured: not a terminal
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    assert cli.main(args) == 0
    assert capsys.readouterr().out.startswith(f"compare {first[:8]} -> {second[:8]}")
    with pytest.raises(SystemExit) as e:
        cli.main([*args, "--factor", "0.5"])
    assert e.value.code == 2 and "argument --factor: takes a ratio of at least 1" in capsys.readouterr().err
