"""The `pr` flow: which workloads a change selects, both sides measured in worktrees in pairs, round after round
until each cell is decided (a fake `run` writes constructed compiles: tests/pairedfake.py), the comparison, the
comment handed to the forge, and a later `compare` of what it stored saying the same."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from fake_github import FakeGitHub
from pairedfake import PairedFake

from tracker.analyse.compare import EXIT_FAIL_ON, compare_runs
from tracker.commands.pr import exit_code
from tracker.errors import UsageError
from tracker.flows.forge import FileForge, PrintForge
from tracker.flows.pr import PrRequest, pr
from tracker.flows.rounds import Budget, PairedRounds, balance, enough_for, groups_of
from tracker.flows.sides import Command, FlowError, Side, run_command_line, run_commands, workloads_at
from tracker.github.forge import GitHubForge
from tracker.publish.comparetable import render_table
from tracker.publish.markdown import MARKER
from tracker.publish.prcomment import render_comment
from tracker.publish.units import count
from tracker.runner import policy
from tracker.store import commits, pairing
from tracker.store.cells import CellStore, RunKey, default_cells_dir, torch_version
from tracker.store.commits import CommitError, resolve_ref
from workloads.names import WORKLOAD_NAMES

ROOT = Path(__file__).resolve().parent.parent
MACHINE = "h100-pr"
LLM = [w for w in WORKLOAD_NAMES if w.startswith("llm_")]  # what workloads/llm.py defines
RMSNORM_DEFAULT = ("prefill", "llm_rmsnorm", "default")
QK_EAGER = ("decode", "llm_qk_norm", "eager")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def commit_all(repo: Path, message: str) -> str:
    """A commit a minute after its parent, from a fixed date: the same hashes in every test run, so the fake's draws
    (seeded by commit) are the same too."""
    git(repo, "add", "-A")
    depth = subprocess.run(["git", "rev-list", "--count", "HEAD"], cwd=repo, capture_output=True, text=True)
    date = f"{1_793_491_200 + 60 * int(depth.stdout.strip() or 0)} +0000"  # 2026-11-01T00:00Z onwards
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", message], cwd=repo,
                   check=True, capture_output=True, env={**os.environ, "GIT_AUTHOR_DATE": date,
                                                         "GIT_COMMITTER_DATE": date})
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A small repository: base, head (workloads/llm.py changed), docs (README only, on top of head), and an old
    commit whose workloads/names.py lacks llm_qk_norm."""
    r = tmp_path_factory.mktemp("repo")
    git(r, "init", "-q")
    (r / "workloads").mkdir()
    names = (ROOT / "workloads" / "names.py").read_text()
    (r / "workloads" / "names.py").write_text(names.replace('"llm_qk_norm",', ""))
    (r / "workloads" / "llm.py").write_text("# llm workloads v0\n")
    old = commit_all(r, "old")
    (r / "workloads" / "names.py").write_text(names)
    (r / "README.md").write_text("docs\n")
    base = commit_all(r, "base")
    (r / "workloads" / "llm.py").write_text("# llm workloads v1: a slower rmsnorm\n")
    head = commit_all(r, "head")
    (r / "README.md").write_text("more docs\n")
    docs = commit_all(r, "docs")
    return r, {"old": old, "base": base, "head": head, "docs": docs}


def request(r: Path, c: dict[str, str], results: Path, **kw: Any) -> PrRequest:
    kw = {"jobs": 4, "machine": MACHINE, "scope": ["llm_rmsnorm", "llm_qk_norm"], "presets": ["prefill", "decode"],
          "budget": Budget(seconds=3600, max_compiles=6)} | kw
    return PrRequest(c.get("base_ref", c["base"]), c.get("head_ref", c["head"]), results, repo_dir=r, **kw)


def plant(c: dict[str, str], cells: dict[tuple[str, str, str], float]) -> dict[str, dict[tuple[str, str, str], float]]:
    """Constructed changes at head: each cell's latency times its factor."""
    return {c["head"]: cells}


# ---------------------------------------------------------------------------------------------------- what is measured


def test_a_change_selects_the_workloads_it_can_affect() -> None:
    from tracker.analyse.attribution import select_workloads

    assert select_workloads(["workloads/llm.py", "README.md"]).workloads == tuple(LLM)
    assert select_workloads(["workloads/rl.py"]).workloads == ("rl_ppo_clipped_loss", "rl_dpo_loss", "rl_grpo_loss")
    assert select_workloads(["workloads/kernels/triton_rmsnorm.py"]).workloads == ("llm_rmsnorm",)
    assert select_workloads(["workloads/kernels/registry.py"]).workloads == ("llm_rmsnorm", "diff_cfg_blend")
    for harness in ("tracker/measure/harness.py", "benchmarks/baselines.py", "workloads/spec.py",
                    "workloads/presets.py", "pyproject.toml", "workloads/new_helper.py",
                    "tracker/runner/workerenv.py", "tracker/runner/schedule.py", "tracker/runner/memledger.py"):
        s = select_workloads([harness, "workloads/llm.py"])
        assert s.everything and s.workloads == WORKLOAD_NAMES, harness
    nothing = select_workloads(["README.md", "docs/runner.md", "tracker/publish/report.py", "tests/test_x.py",
                                "tracker/runner/progress.py"])
    assert nothing.workloads == () and nothing.describe() == "nothing to measure"


def test_a_side_measures_the_modes_asked_for_first_and_in_later_rounds() -> None:
    commit = "c" * 40
    args = (commit, ["acme.silu"], Path("r"), MACHINE, None, ["tiny"])
    assert run_command_line(*args)[-2:] == ["--replicates", "1"] and "--mode" not in run_command_line(*args)
    for cmd in (run_command_line(*args, modes=["eager"]),
                run_command_line(*args, cells=["tiny/acme.silu/eager"], replicates=3, modes=["eager"])):
        assert cmd[cmd.index("--mode"):cmd.index("--mode") + 2] == ["--mode", "eager"] and commit in cmd


def test_each_side_measures_only_the_workloads_it_has(repo: tuple[Path, dict[str, str]]) -> None:
    r, c = repo
    assert "llm_qk_norm" not in workloads_at(c["old"], r) and workloads_at(c["base"], r) == WORKLOAD_NAMES
    assert workloads_at("0" * 40, r) is None  # unreadable: every selected workload is measured


def test_a_ref_resolves_to_its_full_hash_and_a_run_records_under_it(repo: tuple[Path, dict[str, str]],
                                                                    tmp_path: Path) -> None:
    r, c = repo
    assert resolve_ref(c["base"][:10], r) == c["base"] and resolve_ref("HEAD", r) == c["docs"]
    with pytest.raises(CommitError, match="'no-such-ref' is not a commit of the repository"):
        resolve_ref("no-such-ref", r)
    assert commits.resolve(c["head"][:10], r)[0] == c["head"]
    assert commits.resolve("cafe", tmp_path, 1_767_225_600_000) == ("cafe", 1_767_225_600_000)  # no repository


def test_work_is_spread_over_the_gpus_the_most_expensive_first_and_each_gpu_gets_its_own_cores() -> None:
    assert balance([5.0, 1.0, 4.0, 3.0], float, 2) == [[5.0, 1.0], [4.0, 3.0]]
    assert groups_of([], [0, 1]) == groups_of(["0"], [0, 1]) == [groups_of([], [])[0]]  # one open group
    two = groups_of(["0", "1"], list(range(8)))
    assert [g.gpu for g in two] == ["0", "1"] and two[0].cpus == frozenset(range(4))
    assert two[1].cpus == frozenset(range(4, 8)) and two[1].env() == {"CUDA_VISIBLE_DEVICES": "1"}


# ---------------------------------------------------------------------------------------------------- the rounds


@pytest.mark.slow
def test_a_planted_change_is_measured_in_pairs_until_decided_and_compare_says_what_the_comment_said(
        repo: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    r, c = repo
    fake = PairedFake(MACHINE, plant(c, {RMSNORM_DEFAULT: 1.08, QK_EAGER: 0.85}))
    forge = FileForge(tmp_path / "forge")
    assert exit_code(pr(request(r, c, tmp_path / "results", fail_on="regression"), forge, fake, devices=[]),
                     "regression") == EXIT_FAIL_ON
    body = (tmp_path / "forge" / "comment.md").read_text()
    record = pairing.find(default_cells_dir(tmp_path / "results"), MACHINE, torch_version(), c["base"], c["head"])
    assert record is not None and record.scope == ("llm_rmsnorm", "llm_qk_norm")
    # every cell three compiles a side at once (a look at one pair decides nothing), then only the undecided ones, a
    # round at a time, both sides in every round
    first, later = fake.batches[0], fake.batches[1:]
    assert first == ["base", "head"] and later and all(b == ["base", "head"] for b in later)
    assert all(cmd.argv[cmd.argv.index("--replicates") + 1] == "3" for cmd in fake.calls[:2])
    assert all("--cell" in cmd.argv for cmd in fake.calls[2:]) and "--cell" not in fake.calls[0].argv
    assert len(record.pairs(RMSNORM_DEFAULT)) >= 3 and len(record.pairs(RMSNORM_DEFAULT)) <= 6
    comparison = compare_runs(tmp_path / "results", c["base"], c["head"], MACHINE)
    verdicts = {(x.preset, x.workload, x.mode): x.verdict for x in comparison.cells}
    assert verdicts[RMSNORM_DEFAULT] == "slower" and verdicts[QK_EAGER] == "faster"
    assert {v for k, v in verdicts.items() if k not in (RMSNORM_DEFAULT, QK_EAGER)} <= {"same", "undecided"}
    # what `pr` posted is what `compare --format md` renders from the results it stored, byte for byte
    assert render_comment(comparison) == body
    assert "paired: " in (comparison.cells[0].noise or "") and "in pairs" in body


@pytest.mark.slow
def test_a_cell_the_budget_cannot_decide_is_undecided_with_its_interval_never_the_same(
        repo: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    r, c = repo
    noisy = ("prefill", "llm_rmsnorm", "max-autotune")
    fake = PairedFake(MACHINE, plant(c, {noisy: 1.04}),
                      sd=lambda cell: 0.15 if cell == noisy else 0.005)
    forge = FileForge(tmp_path / "forge")
    pr(request(r, c, tmp_path / "results", scope=["llm_rmsnorm"], presets=["prefill"],
                    budget=Budget(seconds=3600, max_compiles=3)), forge, fake, devices=[])
    comparison = compare_runs(tmp_path / "results", c["base"], c["head"], MACHINE)
    [cell] = [x for x in comparison.cells if (x.preset, x.workload, x.mode) == noisy]
    assert cell.verdict == "undecided" and cell.compiles == (3, 3) and cell.ci is not None and cell.more
    body = (tmp_path / "forge" / "comment.md").read_text()
    assert f"{count(len(comparison.undecided), 'cell')} undecided" in body.splitlines()[2]  # in the headline
    assert f"~{cell.more} more" in body


@pytest.mark.slow
def test_a_resumed_pr_measures_again_beside_its_other_side_what_an_interrupted_round_stored_of_one_side(
        repo: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    r, c = repo
    cell = ("prefill", "llm_rmsnorm", "max-autotune")
    results, ask = tmp_path / "results", {"scope": ["llm_rmsnorm"], "presets": ["prefill"]}
    pr(request(r, c, results, **ask), FileForge(tmp_path / "forge"), PairedFake(MACHINE), devices=[])
    head = CellStore(default_cells_dir(results), RunKey(MACHINE, c["head"], torch_version()))
    last = len(head.replicates(*cell))
    head.remove(*cell, last)  # interrupted: the base's last compile stored, the head's not
    log, again = io.StringIO(), PairedFake(MACHINE)
    pr(request(r, c, results, **ask), FileForge(tmp_path / "forge"), again, devices=[], log=log)
    assert "pr: 1 measurement an interrupted round stored at one side only dropped: measured again beside the other " \
           "side" in log.getvalue()
    base = CellStore(default_cells_dir(results), RunKey(MACHINE, c["base"], torch_version()))
    assert len(base.replicates(*cell)) == len(head.replicates(*cell)) >= last  # measured again, both sides
    assert again.batches and all(b == ["base", "head"] for b in again.batches)  # both sides together, each round


def test_the_budget_that_would_let_another_round_run_is_a_tenth_more_than_it_needs_in_whole_tens_of_seconds() -> None:
    # rounds that would end 247 s after the first began: 272 s, up to a whole ten; 160 s spent and a round of 60 s
    # expected: 242 s
    assert [enough_for(s) for s in (247.0, 160.0 + 60.0, 0.01)] == [280, 250, 10]


@pytest.mark.slow
def test_rounds_the_budget_stopped_say_so_in_the_comment_and_in_what_compare_reads_later(
        repo: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    r, c = repo
    moved = ("prefill", "llm_rmsnorm", "max-autotune")
    fake = PairedFake(MACHINE, plant(c, {moved: 1.03}), sd=lambda cell: 0.02 if cell == moved else 0.005)
    forge = FileForge(tmp_path / "forge")
    pr(request(r, c, tmp_path / "results", scope=["llm_rmsnorm"], presets=["prefill"],
               budget=Budget(seconds=0.01)), forge, fake, devices=[])
    assert len(fake.batches) == 1  # round 1 runs whatever the budget; no round after it
    record = pairing.find(default_cells_dir(tmp_path / "results"), MACHINE, torch_version(), c["base"], c["head"])
    assert record is not None and record.stopped.startswith("Measuring stopped, budget spent (")
    assert "more rounds could decide measured no further" in record.stopped
    # and what budget would have let another round run: past what round 1 took
    spent = float(re.search(r"budget spent \((\d+) s of", record.stopped)[1])
    enough = int(re.search(r"about (\d+) s would let one more run\.$", record.stopped)[1])
    assert enough > spent and enough % 10 == 0
    body = (tmp_path / "forge" / "comment.md").read_text()
    assert f"{record.stopped} `--budget` sets the time." in body
    comparison = compare_runs(tmp_path / "results", c["base"], c["head"], MACHINE)
    assert comparison.stopped == record.stopped and render_comment(comparison) == body
    assert f"note: {record.stopped}" in render_table(comparison).splitlines()


@pytest.mark.slow
def test_unchanged_code_measured_in_pairs_reports_nothing(repo: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    r, c = repo
    out = io.StringIO()
    pr(request(r, c, tmp_path / "results", budget=Budget(seconds=3600, max_compiles=4)), PrintForge(out),
            PairedFake(MACHINE), devices=[])
    assert "<!-- compile-baselines:changed=false -->" in out.getvalue()


@pytest.mark.slow
def test_a_measurement_of_the_real_change_gives_every_cell_its_compiles_in_one_more_round(
        repo: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    r, c = repo
    fake = PairedFake(MACHINE, plant(c, {RMSNORM_DEFAULT: 1.08}))
    pr(request(r, c, tmp_path / "results", scope=["llm_rmsnorm"], presets=["prefill"],
                    budget=Budget(compiles=5)), PrintForge(io.StringIO()), fake, devices=[])
    assert len(fake.batches) == 2 and all(cmd.argv[cmd.argv.index("--replicates") + 1] == "5"
                                          for cmd in fake.calls[2:])
    record = pairing.find(default_cells_dir(tmp_path / "results"), MACHINE, torch_version(), c["base"], c["head"])
    assert record is not None and {len(p) for p in record.cells.values()} == {5}


@pytest.mark.slow
def test_on_several_gpus_a_pair_never_straddles_two(repo: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    r, c = repo
    fake = PairedFake(MACHINE, plant(c, {RMSNORM_DEFAULT: 1.08}))
    pr(request(r, c, tmp_path / "results", jobs=8), PrintForge(io.StringIO()), fake, devices=["0", "1"])
    assert fake.batches[0] == ["base@0", "head@0", "base@1", "head@1"]  # one workload a GPU, both sides on it
    assert {cmd.env["CUDA_VISIBLE_DEVICES"] for cmd in fake.calls} == {"0", "1"}
    assert {cmd.env[policy.ENV_RUNS_PER_GPU] for cmd in fake.calls} == {"2"}  # each plans within half the memory
    assert all(cmd.argv[cmd.argv.index("-j") + 1] == "2" for cmd in fake.calls[:4])
    record = pairing.find(default_cells_dir(tmp_path / "results"), MACHINE, torch_version(), c["base"], c["head"])
    assert record is not None
    pairs = [p for ps in record.cells.values() for p in ps]
    assert {p.base_gpu for p in pairs} == {"0", "1"} and all(p.base_gpu == p.head_gpu for p in pairs)


# ---------------------------------------------------------------------------------------------------- the forge


@pytest.mark.slow
def test_github_gets_one_comment_edited_in_place_and_the_job_summary(
        repo: tuple[Path, dict[str, str]], fake: FakeGitHub, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    r, c = repo
    summary = tmp_path / "summary.md"
    env = {"GITHUB_TOKEN": fake.token, "GITHUB_API_URL": fake.url, "GITHUB_STEP_SUMMARY": str(summary)}
    forge = GitHubForge.for_pr("octo/widgets", 7, env)
    pr(request(r, c, tmp_path / "results", scope=["llm_rmsnorm"], presets=["prefill"]), forge,
            PairedFake(MACHINE, plant(c, {RMSNORM_DEFAULT: 1.08})), devices=[])
    [comment] = fake.comments()
    assert comment["body"].startswith(f"{MARKER}\n<!-- compile-baselines:changed=true -->\n")
    assert "Measured llm_rmsnorm" in comment["body"] and summary.read_text() == comment["body"] + "\n"
    out, err = capsys.readouterr()
    assert out == "" and f"created comment {comment['id']} on octo/widgets#7" in err
    assert git(r, "worktree", "list").count("\n") == 0  # the temporary worktrees are gone
    # A later push that changes only docs: nothing is measured, the comment is edited to say so.
    runner = PairedFake(MACHINE)
    pr(request(r, {"base": c["head"], "head": c["docs"]}, tmp_path / "results"), forge, runner, devices=[])
    assert runner.calls == []
    [comment] = fake.comments()
    assert "no workload, kernel or measurement-harness file changed (1 other file)" in comment["body"]


def test_no_change_creates_no_comment_and_no_token_prints(
        repo: tuple[Path, dict[str, str]], fake: FakeGitHub, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    r, c = repo
    docs = {"base": c["head"], "head": c["docs"]}
    env = {"GITHUB_TOKEN": fake.token, "GITHUB_API_URL": fake.url}
    pr(request(r, docs, tmp_path), GitHubForge.for_pr("octo/widgets", 7, env), PairedFake(MACHINE), devices=[])
    out, err = capsys.readouterr()
    assert fake.comments() == [] and out == "" and "no comment on octo/widgets#7" in err
    pr(request(r, docs, tmp_path), GitHubForge.for_pr("octo/widgets", 7, {}), PairedFake(MACHINE), devices=[])
    out, err = capsys.readouterr()
    assert out.startswith(MARKER) and "GITHUB_TOKEN" not in out  # the body alone
    assert err.rstrip().endswith("GITHUB_TOKEN is not set (the comment body is printed on stdout)")


def test_a_forge_is_a_seam_any_ci_system_can_fill(repo: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    r, c = repo
    forge = FileForge(tmp_path / "out")
    pr(request(r, {"base": c["head"], "head": c["docs"]}, tmp_path), forge, PairedFake(MACHINE), devices=[])
    assert (tmp_path / "out" / "comment.md").read_text().startswith(MARKER)
    assert (tmp_path / "out" / "summary.md").read_text().startswith(MARKER)


def test_failures_are_one_clear_error(repo: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    r, c = repo
    with pytest.raises(UsageError, match=r"'no-such-ref' is not a commit of the repository at .*: fetch it"):
        pr(request(r, {"base": "no-such-ref", "head": c["head"]}, tmp_path), PrintForge(), devices=[])
    with pytest.raises(FlowError, match=r"measuring .* failed \(exit 2\)"):
        pr(request(r, c, tmp_path), PrintForge(), PairedFake(MACHINE, rc=2), devices=[])
    assert git(r, "worktree", "list").count("\n") == 0
    with pytest.raises(UsageError, match="a repository and a PR number go together"):
        GitHubForge.for_pr("octo/widgets", None, {})


# ---------------------------------------------------------------------------------------------------- the runs' output


@pytest.mark.slow
def test_an_interrupted_pr_asks_its_run_to_stop_so_no_worker_outlives_it(tmp_path: Path) -> None:
    # The run ends its cell workers on SIGINT and records nothing half-done; killed outright it could not, and its
    # workers (each in a session of its own) would go on writing into the cell store.
    import os
    import signal
    import threading

    marker = tmp_path / "stopped"
    child = ("import signal, sys, time\n"
             "def stop(*_):\n    open(sys.argv[1], 'w').write('asked to stop'); sys.exit(130)\n"
             "signal.signal(signal.SIGINT, stop)\ntime.sleep(30)")
    threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    with pytest.raises(KeyboardInterrupt):
        run_commands([Command(side, [sys.executable, "-c", child, str(marker.with_suffix(f".{side}"))], tmp_path)
                      for side in ("base", "head")])
    assert marker.with_suffix(".base").read_text() == marker.with_suffix(".head").read_text() == "asked to stop"


def test_the_sides_run_at_once_each_line_of_their_output_after_its_label_on_its_gpu_and_cores(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    # each side waits for the other's file: they finish only if they run at the same time
    wait = ("import os, pathlib, sys, time\n"
            "pathlib.Path(sys.argv[1]).touch()\n"
            "deadline = time.monotonic() + 60\n"
            "while not pathlib.Path(sys.argv[2]).exists() and time.monotonic() < deadline: time.sleep(0.05)\n"
            "print('done', sys.argv[1][-4:], os.environ['CUDA_VISIBLE_DEVICES'], sorted(os.sched_getaffinity(0)))\n"
            "sys.exit(0 if pathlib.Path(sys.argv[2]).exists() else 5)")
    a, b = str(tmp_path / "base"), str(tmp_path / "head")
    gpu, cpus = {"CUDA_VISIBLE_DEVICES": "1"}, frozenset({0})
    codes = run_commands([Command("base", [sys.executable, "-c", wait, a, b], tmp_path, gpu, cpus),
                          Command("head", [sys.executable, "-c", wait, b, a], tmp_path, gpu, cpus)])
    assert codes == [0, 0]
    err = capfd.readouterr().err
    assert "base | done base 1 [0]\n" in err and "head | done head 1 [0]\n" in err


def _rounds_on_gpus(workloads: tuple[str, ...], tree: Path, results: Path,
                    gpus: int) -> tuple[PairedRounds, list[Command]]:
    """The paired rounds of both sides' `workloads` on a host of `gpus` GPUs (8 jobs and cores a GPU), and the list
    of the commands they hand the runner, which runs none."""
    sides = [Side(label, "c" * 40, workloads) for label in ("base", "head")]
    seen: list[Command] = []

    def runner(commands: Sequence[Command]) -> list[int]:
        seen.extend(commands)
        return [0] * len(commands)

    return PairedRounds(sides, {s.label: tree for s in sides}, results, "m", 8 * gpus, None, None, runner,
                        groups_of([str(k) for k in range(gpus)], list(range(8 * gpus))), log=io.StringIO()), seen


def test_round_one_puts_the_workloads_whose_autotuning_benchmarks_templates_on_different_gpus(tmp_path: Path) -> None:
    heavy = ["llm_logits_projection_softmax", "diff_vae_decoder_upsample"]
    workloads = ("llm_rmsnorm", "llm_rope_apply", heavy[0], "llm_qk_norm", heavy[1], "llm_kl_divergence_loss")
    rounds, seen = _rounds_on_gpus(workloads, tmp_path, tmp_path / "results", 2)
    rounds.first()
    on_gpu = {gpu: {w for c in seen if c.env["CUDA_VISIBLE_DEVICES"] == gpu
                    for w in c.argv[c.argv.index("--workload") + 1:c.argv.index("--replicates")]}
              for gpu in ("0", "1")}
    assert all(len(set(heavy) & placed) == 1 for placed in on_gpu.values()), on_gpu


def test_a_later_round_shares_its_cells_over_the_gpus_by_the_lock_seconds_the_earlier_rounds_recorded(
        tmp_path: Path) -> None:
    from tracker.runner.costs import Costs
    from tracker.runner.plan import CellId

    # a t12 verdict run on four H200s: its cell store holds each cell's compiles of rounds 1 and 2
    trial = Path(__file__).resolve().parent / "fixtures" / "h100-plant-truth" / "t12-h200-r2" / "verdict"
    record = next(pairing.read(trial / "cells", p) for p in (trial / "cells").glob("*/*/*/paired-*.json"))
    cells = sorted(tuple(k.split("/")) for k in record.cells)
    workloads = tuple(sorted({w for _, w, _ in cells}))
    rounds, seen = _rounds_on_gpus(workloads, tmp_path, trial / "results", 4)
    rounds.more(cells, 5)
    lock = Costs.from_store_root(trial / "cells")
    load = {}
    for c in seen:
        names = c.argv[c.argv.index("--cell") + 1:]
        names = names[:next((i for i, a in enumerate(names) if a.startswith("-")), len(names))]
        load[(c.label, c.env["CUDA_VISIBLE_DEVICES"])] = sum(lock.of(CellId(*n.split("/")), 2).lock_s for n in names)
    assert len(load) == 8  # each GPU's share, measured by both sides
    # longest first onto the least loaded GPU: no GPU's share exceeds another's by more than the dearest cell's
    dearest = max(lock.of(CellId(*c), 2).lock_s for c in cells)
    assert max(load.values()) - min(load.values()) <= dearest
