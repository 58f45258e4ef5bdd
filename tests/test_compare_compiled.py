"""compare tells a change of the compiled code (other generated code, other launch configs) from the same code
timed differently, by the cells' fingerprints; and cells too noisy to judge are in the headline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_compare import BASE, MACHINE, SCENARIOS, fake_commit, write_run

from tracker.analyse.compare import compare_runs, compiled_change
from tracker.analyse.verdicts import CODE_UNCHANGED, COMPILED_CODE, COMPILED_CONFIGS, COMPILED_SAME
from tracker.measure.cellresult import CellResult
from tracker.publish.comparison import comparison_json
from tracker.publish.prcomment import headline, render_comment
from tracker.store.cells import CellStore, RunKey, default_cells_dir
from tracker.store.results import list_runs

UNET = ("prefill", "diff_unet_resblock", "max-autotune-no-cudagraphs")
RMS = ("prefill", "llm_rmsnorm", "default")


def test_fingerprints_say_what_the_compiled_code_did():
    a = {"code": "c1", "autotune": "t1"}
    assert compiled_change(a, dict(a)) == COMPILED_SAME
    assert compiled_change(a, {"code": "c1", "autotune": "t2"}) == COMPILED_CONFIGS
    assert compiled_change(a, {"code": "c2", "autotune": "t1"}) == COMPILED_CODE
    assert compiled_change(a, None) is None and compiled_change(None, a) is None


def _store_fingerprints(results: Path, commit: str, prints: dict[tuple[str, str, str], dict]) -> None:
    runs, _ = list_runs(results)
    (run,) = [r for r in runs if r.commit == commit]
    store = CellStore(default_cells_dir(results), RunKey(run.machine, run.commit, run.torch))
    for (preset, workload, mode), fp in prints.items():
        # a stored cell as the harness writes one (a record without its latency is damaged, and unused)
        store.put(CellResult.from_json(
            {"preset": preset, "workload": workload, "mode": mode, "status": "ok", "median_ms": 0.3,
                   "samples_ms": [0.29, 0.3, 0.31], "compile_s": 20.0, "fingerprint": fp}))


MA = ("prefill", "llm_rmsnorm", "max-autotune")


@pytest.fixture
def slower_unet(tmp_path: Path) -> Path:
    """Head: prefill diff_unet_resblock max-autotune-no-cudagraphs 1.5x slower with other launch configs (cold
    compiles on the H100 drew 279-344 us), llm_rmsnorm default 1.5x slower with the same compiled code, and llm_rmsnorm
    max-autotune 1.5x slower with other generated code."""
    results = tmp_path / "results"
    head = fake_commit("head")
    write_run(results, BASE)
    write_run(results, head, {UNET: 1.5, RMS: 1.5, MA: 1.5})
    _store_fingerprints(results, BASE, {UNET: {"code": "aa", "autotune": "t1"}, RMS: {"code": "bb", "autotune": "t"},
                                        MA: {"code": "cc", "autotune": "t"}})
    _store_fingerprints(results, head, {UNET: {"code": "aa", "autotune": "t2"}, RMS: {"code": "bb", "autotune": "t"},
                                        MA: {"code": "cd", "autotune": "t"}})
    return results


def test_a_cell_that_moved_says_what_its_compiled_code_did_and_counts_only_with_other_code(slower_unet: Path):
    c = compare_runs(slower_unet, BASE[:8], fake_commit("head")[:8], MACHINE)
    cells = {(x.preset, x.workload, x.mode): x for x in c.cells}
    assert cells[MA].verdict == "slower" and cells[MA].compiled == COMPILED_CODE
    # the same kernels under the same versions, at most launched with other configs: not the commits' doing
    assert cells[UNET].verdict == CODE_UNCHANGED and cells[UNET].compiled == COMPILED_CONFIGS
    assert cells[RMS].verdict == CODE_UNCHANGED and cells[RMS].compiled == COMPILED_SAME
    assert c.regressions == [cells[MA]] and {(x.preset, x.workload, x.mode) for x in c.code_unchanged} == {UNET, RMS}
    assert cells[("prefill", "llm_rmsnorm", "eager")].compiled is None  # eager compiles nothing
    body = render_comment(c)
    assert f"**slower** ({COMPILED_CODE})" in body
    assert "2 cells moved with their compiled code unchanged (not counted)" in body.splitlines()[2]
    by_cell = {(x["preset"], x["workload"], x["mode"]): x for x in comparison_json(c)["cells"]}
    assert by_cell[UNET]["compiled"] == COMPILED_CONFIGS and by_cell[UNET]["verdict"] == CODE_UNCHANGED


def test_a_night_confirms_only_the_moved_cells_whose_compiled_code_changed_or_that_compile_nothing(slower_unet: Path):
    from tracker.analyse.confirm import candidates

    c = compare_runs(slower_unet, BASE[:8], fake_commit("head")[:8], MACHINE)
    # the unet and rmsnorm default cells moved 1.5x on the same code: more compiles could not make them count
    assert MA in candidates(c) and UNET not in candidates(c) and RMS not in candidates(c)


def test_cells_too_noisy_to_judge_are_in_the_headline(tmp_path: Path):
    results = tmp_path / "results"
    write_run(results, BASE)
    noisy = {k: v for k, v in SCENARIOS["regression"].items() if k == ("decode", "llm_qk_norm", "reduce-overhead")}
    write_run(results, fake_commit("noisy"), noisy)
    c = compare_runs(results, BASE[:8], fake_commit("noisy")[:8], MACHINE)
    assert len(c.noisy) == 1 and not c.changed
    assert headline(c).startswith("No change found · 1 cell too noisy to judge")
    assert json.loads(json.dumps(comparison_json(c)))["summary"]["noisy"] == 1


SMOKE = Path(__file__).resolve().parent / "fixtures" / "h100-smoke" / "results"


def test_on_the_h100_pair_the_one_move_is_autotunings_draw_and_not_counted():
    # two runs of the same measuring code on the H100 (fixtures/h100-smoke/PROVENANCE.md); their cell stores are
    # named by torch 2.11.0 while the results say 2.11.0+cu130, and are found all the same
    c = compare_runs(SMOKE, "406ada5", "44379fb")
    assert (len(c.best_changes), len(c.regressions), len(c.improvements)) == (0, 0, 0)
    [changed] = c.code_unchanged  # faster, on the same code launched with the configs autotuning drew: not counted
    assert (changed.preset, changed.workload, changed.mode) == ("decode", "diff_unet_resblock", "reduce-overhead")
    assert changed.compiled == COMPILED_CONFIGS
    compiled = [x.compiled for x in c.cells]
    assert compiled.count(None) == 16 and {COMPILED_SAME, COMPILED_CONFIGS, COMPILED_CODE} <= set(compiled)
    eager = [x for x in c.cells if x.mode == "eager" or x.mode.startswith("kernel:")]
    assert all(x.compiled is None for x in eager)  # nothing compiled: no fingerprint


def _git_repo(root: Path, edits: list[dict[str, str]]) -> list[str]:
    """A repository whose commits write `edits` in turn; their hashes."""
    import subprocess

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout.strip()

    root.mkdir()
    git("init", "-q")
    hashes = []
    for i, files in enumerate(edits):
        for name, text in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        git("add", "-A")
        git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", f"c{i}")
        hashes.append(git("rev-parse", "HEAD"))
    return hashes


def test_a_move_of_a_workload_the_change_cannot_reach_is_not_counted(tmp_path: Path):
    # The change edits workloads/rl.py only: rl_ppo_clipped_loss can move, llm_layernorm cannot.
    base, head = _git_repo(tmp_path / "repo", [{"workloads/rl.py": "a\n", "README.md": "x\n"},
                                               {"workloads/rl.py": "b\n"}])
    ppo = ("prefill", "rl_ppo_clipped_loss", "eager")
    layernorm = ("prefill", "llm_layernorm", "max-autotune-no-cudagraphs")  # the winner: a best change too
    results = tmp_path / "results"
    write_run(results, base)
    write_run(results, head, {ppo: 1.5, layernorm: 1.4})
    c = compare_runs(results, base, head, MACHINE, repo_dir=tmp_path / "repo")
    cells = {(x.preset, x.workload, x.mode): x for x in c.cells}
    assert cells[ppo].verdict == "slower" and cells[ppo] in c.regressions
    assert cells[layernorm].verdict == "source unchanged" and cells[layernorm] not in c.regressions
    assert [i.workload for i in c.best_changes] == []  # layernorm's new winner is not the change's doing
    assert headline(c).startswith("Best baselines changed: 0 · significant regressions: 1 · improvements: 0 · ")
    assert headline(c).endswith(" · 1 cell moved with its source unchanged (not counted)")
    # undecided only where the change can reach: elsewhere the source did not change, so neither did the cell
    assert {x.workload for x in c.undecided} <= {"rl_ppo_clipped_loss", "rl_dpo_loss", "rl_grpo_loss"}
    assert ("source: the changes between the commits reach rl_ppo_clipped_loss, rl_dpo_loss, rl_grpo_loss; timing "
            "changes of the other 20 workloads measured are reported as 'source unchanged' and not counted") in c.notes
    # without the repository (or with commits it does not know) every move counts, as before
    plain = compare_runs(results, base, head, MACHINE)
    assert {(x.workload, x.verdict) for x in plain.regressions} == {("rl_ppo_clipped_loss", "slower"),
                                                                   ("llm_layernorm", "slower")}


def test_the_source_note_counts_the_workloads_measured_and_reads_right_for_one_commit(tmp_path: Path):
    """One commit on two machines: no source differs, and the note says so of the workloads the runs measured (a
    PR flow's two), not of every workload installed."""
    (commit,) = _git_repo(tmp_path / "repo", [{"README.md": "x\n"}])
    results = tmp_path / "results"
    write_run(results, commit)
    write_run(results, commit, machine="other")
    c = compare_runs(results, commit, commit, MACHINE, head_machine="other", repo_dir=tmp_path / "repo",
                     workloads=["llm_rmsnorm", "diff_cfg_blend"])
    assert [n for n in c.notes if n.startswith("source:")] == [
        f"source: both runs are of commit {commit[:8]}, so timing changes of the 2 workloads measured are reported "
        "as 'source unchanged' and not counted"]
    assert f"> **Note**: source: both runs are of commit {commit[:8]}, so " in render_comment(c)  # no method note


PLANT = Path(__file__).resolve().parent / "fixtures" / "h100-pr-plant" / "results"


def test_on_the_h100_the_planted_slowdown_is_reported_and_nothing_else():
    # the PR flow's two runs (fixtures/h100-pr-plant/PROVENANCE.md): only diff_unet_resblock was slowed
    c = compare_runs(PLANT, "41112f50", "43e50533")
    assert {x.workload for x in c.regressions} == {"diff_unet_resblock"} and len(c.regressions) == 5
    assert c.improvements == [] and {i.workload for i in c.best_changes} <= {"diff_unet_resblock"}
    assert (PLANT.parent / "comment.md").read_text().startswith("<!-- compile-baselines:pr-comment -->")


@pytest.mark.parametrize("trial", [PLANT, PLANT.parent / "trial2" / "results"], ids=["trial1", "trial2"])
def test_on_the_h100_the_planted_best_latency_move_is_a_best_baseline_change(trial: Path):
    c = compare_runs(trial, "41112f50", "43e50533")
    (unet,) = [i for i in c.instances if (i.preset, i.workload) == ("decode", "diff_unet_resblock")]
    assert (unet.base_best, unet.head_best) == ("default", "reduce-overhead") and unet.ratio > 1.15
    assert unet.latency_verdict == "slower" and unet.best_changed


def test_a_second_planted_trial_finds_the_planted_cells_again_and_one_small_cell_of_noise():
    c = compare_runs(PLANT.parent / "trial2" / "results", "41112f50", "43e50533")
    slower = {(x.preset, x.workload, x.mode) for x in c.regressions}
    assert {k for k in slower if k[1] == "diff_unet_resblock"} == {
        ("prefill", "diff_unet_resblock", "eager"), ("prefill", "diff_unet_resblock", "default"),
        ("decode", "diff_unet_resblock", "eager"), ("decode", "diff_unet_resblock", "default")}
    # the false alarm this trial had: a ~10 us host-bound eager cell of the same module moved 27% (band 25%)
    assert slower - {k for k in slower if k[1] == "diff_unet_resblock"} == {("prefill", "diff_cfg_blend", "eager")}
