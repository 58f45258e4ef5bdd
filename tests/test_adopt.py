"""Adoption: `compile-baselines init` writes a kernel repository that plugs in and measures, and the reusable
workflow it calls keeps our fork policy and least-privilege tokens."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from plugin_fixture import EXAMPLE_REPO, installed
from test_workflows import cli_invocations, evaluate, pr_event

from tracker import cli
from tracker.adopt.scaffold import WORKFLOW, Scaffold, init, render
from tracker.commands._options import results_dir
from tracker.measure import harness
from tracker.measure.harness import Settings, measure_cell
from workloads import catalog

ROOT = Path(__file__).resolve().parent.parent
REF = "c30913a34f8d40dc30ed91adcacb8885a2e115d9"  # the commit that added .github/workflows/kernel-repo.yml
FAST = Settings(warmup_ms=1.0, rep_ms=5.0, warmup_calls=1)


def load_yaml(path: Path) -> dict[str, Any]:
    wf = yaml.safe_load(path.read_text())
    if True in wf:  # YAML 1.1 reads the key `on` as the boolean True
        wf["on"] = wf.pop(True)
    return wf


REUSABLE = load_yaml(ROOT / ".github" / "workflows" / "kernel-repo.yml")


# ---------------------------------------------------------------------------------------------------- init


def test_init_writes_a_repository_that_plugs_in_and_measures(tmp_path: Path) -> None:
    repo = tmp_path / "acme"
    s, written, hand_edit = init(repo, ref=REF)
    assert (s.namespace, s.package, hand_edit) == ("acme", "acme_kernels", None)
    assert sorted(p.relative_to(repo).as_posix() for p in written) == [
        WORKFLOW, ".gitignore", "acme_kernels/__init__.py", "acme_kernels/kernels.py", "acme_kernels/workloads.py",
        "pyproject.toml"]
    assert {".asv/", "build/", "*.egg-info/"} <= set((repo / ".gitignore").read_text().splitlines())
    with installed(repo, tmp_path / "site", ("acme_kernels",)):
        assert catalog.workload_names()[-1] == "acme.silu"
        assert "tokens=8192" in catalog.preset_names()
        for mode in ("eager", "kernel:torch_reference"):
            r = measure_cell("tiny", "acme.silu", mode, "cpu", FAST)
            assert (r.status, r.correct) == (harness.OK, True), r.reason
        # its docstring says what its sweep sweeps: the tokens, as the presets' names do, not the sequence length
        swept = [p for p in catalog.preset_names() if p.startswith("tokens=")]
        doc = (repo / "acme_kernels" / "workloads.py").read_text().split('"""')[1]
        assert swept and "sweep over the number of tokens" in " ".join(doc.split()) and "sequence" not in doc


def test_init_never_overwrites_and_leaves_an_existing_pyproject_alone(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'mine'\n")
    assert cli.main(["init", "--dir", str(tmp_path), "--namespace", "mine", "--ref", REF]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "pyproject.toml").read_text() == "[project]\nname = 'mine'\n"
    assert 'add these lines' in out and '[project.entry-points."compile_baselines.workloads"]\nmine = ' \
        '"mine_kernels.workloads"' in out
    assert cli.main(["init", "--dir", str(tmp_path), "--namespace", "mine", "--ref", REF]) == 1
    err = capsys.readouterr().err.strip()
    assert err.endswith("already exist in " + str(tmp_path) + ": move them aside or pass --force")
    # names the command line gives that cannot be used: usage errors
    assert cli.main(["init", "--dir", str(tmp_path), "--namespace", "Mine", "--ref", REF]) == 2
    assert "lower-case letters" in capsys.readouterr().err
    assert cli.main(["init", "--dir", str(tmp_path), "--namespace", "mine", "--ref", "main"]) == 2
    assert capsys.readouterr().err == ("compile-baselines init: error: --ref 'main': give the full 40-hex commit hash "
                                       "(workflows are pinned to commits)\n")


def test_init_adds_to_an_existing_gitignore_what_it_lacks(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("build/\n*.log")
    _, written, _ = init(tmp_path, "mine", REF)
    lines = (tmp_path / ".gitignore").read_text().splitlines()
    assert lines[:2] == ["build/", "*.log"] and lines.count("build/") == 1 and ".asv/" in lines
    assert tmp_path / ".gitignore" in written
    (tmp_path / ".gitignore").write_text(".asv/\nbuild/\n*.egg-info/\n__pycache__/\n")
    _, written, _ = init(tmp_path, "mine", REF, force=True)
    assert (tmp_path / ".gitignore").read_text() == ".asv/\nbuild/\n*.egg-info/\n__pycache__/\n"
    assert tmp_path / ".gitignore" not in written


def test_the_example_caller_is_what_init_writes_for_it() -> None:
    meta = Scaffold("example", "example_kernels", "cb-example-kernels", REF)
    caller = EXAMPLE_REPO / WORKFLOW
    assert caller.read_text() == render("caller.yml.j2", **meta.context())
    job = load_yaml(caller)["jobs"]["compile-baselines"]
    assert job["uses"].endswith(f"/.github/workflows/kernel-repo.yml@{job['with']['compile-baselines-ref']}")
    assert set(load_yaml(caller)["on"]) == {"schedule", "workflow_dispatch", "pull_request"}


def test_init_s_caller_passes_the_workflow_linters(tmp_path: Path) -> None:
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    if not all(shutil.which(t, path=path) for t in ("actionlint", "zizmor")):
        pytest.skip("actionlint or zizmor not installed (the project's test extra)")
    init(tmp_path, namespace="acme", ref=REF)
    env = {**os.environ, "PATH": path}
    for command in (["actionlint", "-no-color", WORKFLOW],
                    ["zizmor", "--offline", "--min-severity", "medium", "--no-progress", "--color", "never",
                     ".github/workflows"]):
        done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr


# ---------------------------------------------------------------------------------------------------- the workflow


def _jobs() -> dict[str, dict[str, Any]]:
    return REUSABLE["jobs"]


def _on_gpu(job: dict[str, Any]) -> bool:
    return "inputs.runner-labels" in str(job.get("runs-on", ""))


def test_the_reusable_workflow_is_only_called_and_grants_nothing_itself() -> None:
    assert set(REUSABLE["on"]) == {"workflow_call"}
    assert REUSABLE["permissions"] == {}
    assert {"namespace", "compile-baselines-ref"} == {k for k, v in REUSABLE["on"]["workflow_call"]["inputs"].items()
                                                      if v.get("required")}


def test_each_job_narrows_the_token_and_the_gpu_jobs_never_write_the_repository() -> None:
    assert {j for j, job in _jobs().items() if _on_gpu(job)} == {"bench", "pr"}
    for job_id, job in _jobs().items():
        assert isinstance(job.get("permissions"), dict), job_id
        assert 0 < job["timeout-minutes"] <= 360, job_id
        writes = {k for k, v in job["permissions"].items() if v == "write"}
        if _on_gpu(job):
            assert writes <= {"pull-requests"}, job_id
        for step in job.get("steps", []):
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False, job_id
            assert "${{" not in step.get("run", ""), f"{job_id}: expression inside run"
    assert {j for j, job in _jobs().items() if "write" in job["permissions"].values()} == {
        "store", "track", "deploy", "unlabel", "pr"}


@pytest.mark.parametrize(("event", "runs"), [
    (pr_event("opened", fork=False), True),
    (pr_event("synchronize", fork=False), True),
    (pr_event("opened", fork=True), False),
    (pr_event("synchronize", fork=True, labels=("safe-to-bench",)), False),
    (pr_event("labeled", fork=True, labels=("bug",), label="bug"), False),
    (pr_event("labeled", fork=True, labels=("safe-to-bench",), label="safe-to-bench"), True),
])
def test_fork_code_reaches_the_gpu_runner_only_by_a_maintainers_label(event: dict[str, Any], runs: bool) -> None:
    event["event_name"] = "pull_request"
    assert evaluate(_jobs()["pr"]["if"], event) is runs
    assert evaluate(_jobs()["bench"]["if"], event) is False  # the nightly never runs on a pull request


def test_every_command_the_workflow_runs_parses_with_the_real_command_line() -> None:
    parser = cli.build_parser()
    used = set()
    for job in _jobs().values():
        for step in job.get("steps", []):
            for args in cli_invocations(step.get("run", "")):
                # a shell expansion stands for a value of the option's type: a number after -j and --pr
                concrete = ["1" if "$" in a and i and args[i - 1] in ("-j", "--pr") else a.replace("$", "X")
                            for i, a in enumerate(args)]
                namespace = parser.parse_args(concrete)  # SystemExit on any mistake
                used.add(namespace.command)
                if namespace.command in ("run", "pr"):
                    assert args[args.index("--workload") + 1] == "$NAMESPACE.*", shlex.join(args)
    assert used == {"run", "results", "track", "issue", "publish", "pr"}


# ---------------------------------------------------------------------------------------------------- where runs go


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                          capture_output=True, text=True).stdout.strip()


def test_the_commands_work_for_the_kernel_repository_they_run_in(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside a kernel repository (a pyproject.toml declaring compile_baselines entry points), its commits and its
    .asv/ are the default; elsewhere, this checkout's; COMPILE_BASELINES_REPO names one from anywhere."""
    from tracker import paths

    repo = tmp_path / "acme"
    init(repo, ref=REF)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "pyproject.toml").write_text("[project]\nname = 'other'\n")
    monkeypatch.delenv(paths.ENV_PROJECT_REPO, raising=False)
    assert paths.kernel_repo(repo / "acme_kernels") == repo.resolve()
    assert paths.kernel_repo(tmp_path / "other") is None and paths.kernel_repo(tmp_path) is None
    assert paths.project_repo(cwd=repo / "acme_kernels") == repo.resolve()
    assert paths.project_repo(cwd=tmp_path / "other") == paths.REPO_ROOT
    assert paths.project_repo({paths.ENV_PROJECT_REPO: str(repo)}, cwd=tmp_path) == repo.resolve()
    monkeypatch.chdir(repo)
    assert results_dir(cli.build_parser().parse_args(["summary"])) == str(repo.resolve() / ".asv" / "results")


def test_run_in_a_kernel_repository_without_a_commit_says_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "acme"
    init(repo, ref=REF)
    monkeypatch.chdir(repo)
    assert cli.main(["run", "--workload", "llm_rmsnorm", "--mode", "eager", "--kernel", "none"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not a git repository with a commit: commit your work there" in err[0], err
    assert not (repo / ".asv").exists()


def test_uncommitted_changes_are_those_of_tracked_files_at_the_checked_out_commit(tmp_path: Path) -> None:
    from tracker.store.commits import uncommitted

    init(tmp_path, "mine", REF)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "start")
    head = _git(tmp_path, "rev-parse", "HEAD")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "out.txt").write_text("what pip install leaves")
    (tmp_path / "notes.txt").write_text("untracked")
    assert uncommitted(head, tmp_path) == []
    with (tmp_path / "mine_kernels" / "kernels.py").open("a") as f:
        f.write("# faster\n")
    assert uncommitted(head, tmp_path) == ["mine_kernels/kernels.py"]
    assert uncommitted("0" * 40, tmp_path) == []  # not the checked-out commit: its tree is not this one
    assert _git(tmp_path, "status", "--porcelain", "--ignored").count("!! build/") == 1  # init's .gitignore
