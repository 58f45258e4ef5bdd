"""The `pr` flow: which workloads a change selects, measuring each side in a worktree (a fake runner writes
modified copies of the H100 fixture), the comparison, the comment on the fake GitHub and the job summary."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fake_github import FakeGitHub
from test_compare import MACHINE, SCENARIOS, write_run

from tracker.analyse.compare import EXIT_FAIL_ON
from tracker.errors import UsageError
from tracker.github.prflow import (
    Command,
    PrFlowError,
    pr_main,
    run_command_line,
    run_commands,
    select_workloads,
    workloads_at,
)
from tracker.publish.markdown import MARKER
from tracker.store import commits
from tracker.store.commits import CommitError, resolve_ref
from workloads.names import WORKLOAD_NAMES

ROOT = Path(__file__).resolve().parent.parent
LLM = [w for w in WORKLOAD_NAMES if w.startswith("llm_")]  # what workloads/llm.py defines


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", message)
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
    (r / "workloads" / "llm.py").write_text("# llm workloads v1: a faster rmsnorm\n")
    head = commit_all(r, "head")
    (r / "README.md").write_text("more docs\n")
    docs = commit_all(r, "docs")
    return r, {"old": old, "base": base, "head": head, "docs": docs}


class FakeRunner:
    """Stands in for `compile-baselines run` in the worktree: checks where it runs, writes the fixture (head:
    the best_change scenario) for the requested workloads."""

    def __init__(self, head: str, rc: int = 0) -> None:
        self.head, self.rc, self.calls, self.batches = head, rc, [], []

    def __call__(self, commands: list[Command]) -> list[int]:
        self.batches.append([c.label for c in commands])
        return [self.one(c.argv, c.cwd) for c in commands]

    def one(self, command: list[str], cwd: Path) -> int:
        self.calls.append(command)
        assert command[:4] == [sys.executable, "-m", "tracker.cli", "run"]
        commit = command[command.index("--commit") + 1]
        assert git(cwd, "rev-parse", "HEAD") == commit  # a worktree of exactly that commit
        results = Path(command[command.index("--results-dir") + 1])
        assert command[command.index("--machine") + 1] == MACHINE
        after = command[command.index("--workload") + 1:]
        workloads = set(after[:next((i for i, a in enumerate(after) if a.startswith("--")), len(after))])
        # the first pass compiles each cell once; a confirmation (--cell ... --replicates N) measures the cells
        # again: every compile agrees with the first
        compiles = int(command[command.index("--replicates") + 1])
        assert compiles == 1 or "--cell" in command
        compiles = None if compiles == 1 else compiles
        changes = SCENARIOS["best_change"] if commit == self.head else {}
        write_run(results, commit, changes, keep=lambda p, w, m: w in workloads, hours=2 if commit == self.head else 1,
                  compiles=compiles)
        return self.rc


def test_a_change_selects_the_workloads_it_can_affect() -> None:
    assert select_workloads(["workloads/llm.py", "README.md"]).workloads == tuple(LLM)
    assert select_workloads(["workloads/rl.py"]).workloads == ("rl_ppo_clipped_loss", "rl_dpo_loss", "rl_grpo_loss")
    assert select_workloads(["workloads/kernels/triton_rmsnorm.py"]).workloads == ("llm_rmsnorm",)
    assert select_workloads(["workloads/kernels/registry.py"]).workloads == ("llm_rmsnorm", "diff_cfg_blend")
    for harness in ("tracker/measure/harness.py", "benchmarks/baselines.py", "workloads/spec.py",
                    "workloads/presets.py",
                    "pyproject.toml", "workloads/new_helper.py"):
        s = select_workloads([harness, "workloads/llm.py"])
        assert s.everything and s.workloads == WORKLOAD_NAMES, harness
    nothing = select_workloads(["README.md", "docs/runner.md", "tracker/publish/report.py", "tests/test_x.py"])
    assert nothing.workloads == () and nothing.describe() == "nothing to measure"


def test_a_side_measures_the_modes_asked_for_first_and_when_confirming() -> None:
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


def test_pr_flow_measures_both_sides_compares_and_comments_once(
        repo: tuple[Path, dict[str, str]], fake: FakeGitHub, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    r, c = repo
    summary = tmp_path / "summary.md"
    env = {"GITHUB_TOKEN": fake.token, "GITHUB_API_URL": fake.url, "GITHUB_STEP_SUMMARY": str(summary)}
    runner = FakeRunner(c["head"])
    rc = pr_main(c["base"][:10], c["head"], "octo/widgets", 7, tmp_path / "results", jobs=4, machine=MACHINE,
                 env=env, runner=runner, repo_dir=r, fail_on="best-change")
    assert rc == EXIT_FAIL_ON
    # each side once, then the cells that moved again, to three compiles a side
    assert [cmd[cmd.index("--commit") + 1] for cmd in runner.calls] == [c["base"], c["head"]] * 2
    assert all(cmd[cmd.index("--workload") + 1:cmd.index("-j")] == LLM for cmd in runner.calls)
    first, confirming = runner.calls[:2], runner.calls[2:]
    assert not any("--cell" in cmd for cmd in first)
    assert all(cmd[cmd.index("--replicates") + 1] == "1" for cmd in first)  # one compile a cell, then confirmation
    assert [cmd[cmd.index("--replicates") + 1] for cmd in confirming] == ["3", "3"]
    cells = confirming[0][confirming[0].index("--cell") + 1:confirming[0].index("--replicates")]
    assert "prefill/llm_rmsnorm/default" in cells and "prefill/llm_layernorm/max-autotune-no-cudagraphs" in cells
    [comment] = fake.comments()
    body = comment["body"]
    assert body.startswith(f"{MARKER}\n<!-- compile-baselines:changed=true -->\n### compile-baselines: Best "
                           "baselines changed: 2")
    assert f"Measured {', '.join(LLM)} (workloads/llm.py changed)." in body
    assert "diff_cfg_blend" not in body  # not measured, not compared
    assert summary.read_text() == body + "\n"
    out, err = capsys.readouterr()
    assert out == "" and f"created comment {comment['id']} on octo/widgets#7" in err
    assert git(r, "worktree", "list").count("\n") == 0  # the temporary worktrees are gone

    # A later push that changes only docs: nothing is measured, the comment is edited to say so.
    runner = FakeRunner(c["docs"])
    assert pr_main(c["head"], c["docs"], "octo/widgets", 7, tmp_path / "results", machine=MACHINE, env=env,
                   runner=runner, repo_dir=r) == 0
    assert runner.calls == []
    [comment] = fake.comments()
    assert "no workload, kernel or measurement-harness file changed (1 other file)" in comment["body"]
    assert "<!-- compile-baselines:changed=false -->" in comment["body"]


def test_no_change_creates_no_comment_and_no_token_prints(
        repo: tuple[Path, dict[str, str]], fake: FakeGitHub, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    r, c = repo
    env = {"GITHUB_TOKEN": fake.token, "GITHUB_API_URL": fake.url}
    assert pr_main(c["head"], c["docs"], "octo/widgets", 7, tmp_path, machine=MACHINE, env=env, repo_dir=r,
                   runner=FakeRunner(c["docs"])) == 0
    out, err = capsys.readouterr()
    assert fake.comments() == [] and out == "" and "no comment on octo/widgets#7" in err
    assert pr_main(c["head"], c["docs"], "octo/widgets", 7, tmp_path, machine=MACHINE, env={}, repo_dir=r,
                   runner=FakeRunner(c["docs"])) == 0
    out, err = capsys.readouterr()
    assert out.startswith(MARKER) and "GITHUB_TOKEN" not in out  # the body alone
    assert err.rstrip().endswith("GITHUB_TOKEN is not set (the comment body is printed on stdout)")


class TalkativeRunner(FakeRunner):
    """FakeRunner whose run, like `compile-baselines run`, prints progress and its summary on its stdout: a real
    subprocess started the way `pr` starts one (prflow.run_commands)."""

    def one(self, command: list[str], cwd: Path) -> int:
        script = "import sys; print('run: 10 cells'); print('tiny: 2 instances'); print('warn', file=sys.stderr)"
        assert run_commands([Command("base", [sys.executable, "-c", script], cwd)]) == [0]
        return super().one(command, cwd)


@pytest.mark.parametrize("target", [{}, {"repo": "octo/widgets", "pr": 7}])
def test_stdout_carries_the_comment_body_alone(repo: tuple[Path, dict[str, str]], tmp_path: Path,
                                                capfd: pytest.CaptureFixture[str], target: dict[str, Any]) -> None:
    # `compile-baselines pr ... > comment.md` without a token: both runs' output and the logs go to stderr
    r, c = repo
    assert pr_main(c["base"], c["head"], results_dir=tmp_path / "results", machine=MACHINE, env={}, repo_dir=r,
                   runner=TalkativeRunner(c["head"]), **target) == 0
    out, err = capfd.readouterr()
    assert out.startswith(MARKER) and out.endswith("\n")
    assert "run: 10 cells" not in out and "tiny: 2 instances" not in out and "pr: " not in out
    # base and head, then two rounds of confirmation each
    assert err.count("run: 10 cells") == 4 and err.count("tiny: 2 instances") == 4
    assert "pr: measuring" in err
    assert "### compile-baselines: Best baselines changed: 2" in out


def test_failures_are_one_clear_error(repo: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    r, c = repo
    with pytest.raises(PrFlowError, match="fetch-depth: 0"):
        pr_main("no-such-ref", c["head"], results_dir=tmp_path, machine=MACHINE, env={}, repo_dir=r)
    with pytest.raises(PrFlowError, match=r"measuring .* failed \(exit 2\)"):
        pr_main(c["base"], c["head"], results_dir=tmp_path, machine=MACHINE, env={}, repo_dir=r,
                runner=FakeRunner(c["head"], rc=2))
    assert git(r, "worktree", "list").count("\n") == 0
    with pytest.raises(UsageError, match="a repository and a PR number go together"):
        pr_main(c["base"], c["head"], repo="octo/widgets", env={}, repo_dir=r)


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


def test_the_sides_run_at_once_each_line_of_their_output_after_its_label(tmp_path: Path,
                                                                         capfd: pytest.CaptureFixture[str]) -> None:
    # each side waits for the other's file: they finish only if they run at the same time
    wait = ("import pathlib, sys, time\n"
            "pathlib.Path(sys.argv[1]).touch()\n"
            "deadline = time.monotonic() + 60\n"
            "while not pathlib.Path(sys.argv[2]).exists() and time.monotonic() < deadline: time.sleep(0.05)\n"
            "print('done', sys.argv[1][-4:]); sys.exit(0 if pathlib.Path(sys.argv[2]).exists() else 5)")
    a, b = str(tmp_path / "base"), str(tmp_path / "head")
    codes = run_commands([Command("base", [sys.executable, "-c", wait, a, b], tmp_path),
                          Command("head", [sys.executable, "-c", wait, b, a], tmp_path)])
    assert codes == [0, 0]
    err = capfd.readouterr().err
    assert "base | done base\n" in err and "head | done head\n" in err


@pytest.mark.slow
def test_on_a_gpu_host_base_and_head_are_measured_at_once_with_half_the_workers_each(
        repo: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    r, c = repo
    runner = FakeRunner(c["head"])
    pr_main(c["base"], c["head"], results_dir=tmp_path / "results", jobs=16, machine=MACHINE, env={}, repo_dir=r,
            runner=runner)
    assert runner.batches == [["base", "head"], ["base", "head"]]  # the first pass, then the confirmation
    assert all(cmd[cmd.index("-j") + 1] == "8" for cmd in runner.calls)
    serial = FakeRunner(c["head"])  # a CPU host: one worker, one side after the other
    pr_main(c["base"], c["head"], results_dir=tmp_path / "serial", jobs=1, machine=MACHINE, env={}, repo_dir=r,
            runner=serial)
    assert serial.batches == [["base"], ["head"], ["base"], ["head"]]
    assert all(cmd[cmd.index("-j") + 1] == "1" for cmd in serial.calls)
