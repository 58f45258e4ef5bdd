"""Results on a git branch, against real git repositories: `results store` merges into the branch's tip and pushes,
and no writer loses another's results when they push at once; `results fetch` copies all or part of the branch, and
leaves the destination as it was when git fails; `results previous` finds a machine's nearest earlier run along the
first-parent history. The repository's own working tree, index and branches are never touched."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from gitrepos import IDENTITY, commit_all, git, origin_and_clone, put_on_branch

from tracker import cli
from tracker.github.gitauth import git_env
from tracker.store import gitbranch, merge
from tracker.store.gitbranch import BranchError, Remote
from tracker.store.results import list_runs
from tracker.store.resultsbranch import ResultsBranchError, fetch_results, previous_run, store_results

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "tests" / "fixtures" / "cpu-tiny" / "results"  # two real runs of machine cpu-laptop
RUN_A = "cpu-laptop/5d800df4-existing-py_work_venv_bin_python3.json"
RUN_B = "cpu-laptop/bc844535-existing-py_work_venv_bin_python3.json"
VERSIONS = ROOT / "tests" / "fixtures" / "cpu-versions" / "results"  # a real run of machine cpu-vm
RUN_C = "cpu-vm/878f7b9b-existing-py_work_main_.venv_bin_python.json"
BRANCH = "asv-results"


@pytest.fixture(autouse=True)
def identity(monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in IDENTITY.items():
        monkeypatch.setenv(k, v)


# what a user of the repository sees: its refs, its state, its worktrees, whether its history is whole
LOOKS = (("for-each-ref",), ("status", "--porcelain"), ("worktree", "list"), ("rev-parse", "--is-shallow-repository"),
         ("count-objects",))


def results_dir(tmp_path: Path, name: str, fixture: Path, *runs: str) -> Path:
    """A results directory holding `runs` of `fixture`, each with its machine.json, as a measuring job leaves it."""
    out = tmp_path / name
    for run in runs:
        (out / run).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(fixture / run, out / run)
        shutil.copy(fixture / Path(run).parent / "machine.json", out / Path(run).parent / "machine.json")
    return out


def tree(origin: Path, ref: str = BRANCH) -> list[str]:
    return git(origin, "ls-tree", "-r", "--name-only", ref).split()


def stored_commits(origin: Path, tmp_path: Path) -> set[str]:
    """The commits of the runs on the branch, read back by the results reader from a fresh copy."""
    copy = tmp_path / "readback"
    shutil.rmtree(copy, ignore_errors=True)
    git(tmp_path, "clone", "-q", "-b", BRANCH, str(origin), str(copy))
    runs, problems = list_runs(copy)
    assert problems == []
    return {r.commit[:8] for r in runs}


# --- store ---------------------------------------------------------------------------------------------------


def test_the_first_store_starts_the_branch_with_the_results_alone_and_leaves_the_checkout_untouched(
        tmp_path: Path) -> None:
    origin, work, _ = origin_and_clone(tmp_path)
    (work / "untracked.txt").write_text("mine")
    before = [git(work, *args) for args in LOOKS]
    said: list[str] = []
    pushed = store_results(Remote(work), BRANCH, [results_dir(tmp_path, "in", TINY, RUN_A)], note="schedule, run 7",
                           say=said.append)
    assert pushed is not None and pushed.attempts == 1
    assert said == [f"origin has no branch {BRANCH} yet: creating it"]
    assert tree(origin) == [RUN_A, "cpu-laptop/machine.json"]  # none of main's files
    assert git(origin, "rev-list", "--parents", "-1", BRANCH) == pushed.commit  # no parent
    assert git(origin, "log", "-1", "--format=%an|%s", BRANCH) == (
        "tester|Results for 5d800df4bad6f855dd4208d2a080d087f3fe364e (schedule, run 7)")
    assert [git(work, *args) for args in LOOKS] == before
    assert stored_commits(origin, tmp_path) == {"5d800df4"}


def test_a_later_store_adds_to_the_tip(tmp_path: Path) -> None:
    origin, work, _ = origin_and_clone(tmp_path)
    first = store_results(Remote(work), BRANCH, [results_dir(tmp_path, "a", TINY, RUN_A)], say=lambda _: None)
    second = store_results(Remote(work), BRANCH, [results_dir(tmp_path, "b", TINY, RUN_B)])
    assert first is not None and second is not None
    assert git(origin, "rev-parse", f"{BRANCH}~1") == first.commit
    assert stored_commits(origin, tmp_path) == {"5d800df4", "bc844535"}


def test_a_writer_whose_push_is_refused_merges_again_on_the_new_tip_and_loses_nothing(tmp_path: Path) -> None:
    # Between this writer's read of the tip and its push, another writer stores its run (here: both start from no
    # branch at all, so the two first commits of the branch race).
    origin, work, _ = origin_and_clone(tmp_path)
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(origin), str(other))
    mine, theirs = results_dir(tmp_path, "a", TINY, RUN_A), results_dir(tmp_path, "b", TINY, RUN_B)
    calls, waits = [], []

    def merge_mine(tree_dir: Path) -> None:
        if not calls:
            store_results(Remote(other), BRANCH, [theirs], say=lambda _: None)
        calls.append(sorted(str(p.relative_to(tree_dir)) for p in tree_dir.rglob("*.json")))
        merge.merge_results([mine], tree_dir)

    said: list[str] = []
    pushed = gitbranch.commit_and_push(Remote(work), BRANCH, merge_mine, "mine", say=said.append, sleep=waits.append)
    assert pushed is not None and pushed.attempts == 2
    assert calls == [[], [RUN_B, "cpu-laptop/machine.json"]]  # the second merge starts from the other's results
    assert said[-1] == f"push to {BRANCH} refused: it moved (attempt 1 of 5); again on the new tip"
    assert waits == [gitbranch.BACKOFF_S]
    assert stored_commits(origin, tmp_path) == {"5d800df4", "bc844535"}
    assert git(origin, "log", "--format=%s", BRANCH).splitlines() == ["mine", f"Results for {_full(RUN_B)}"]


def _full(run: str) -> str:
    return json.loads((TINY / run).read_text())["commit_hash"]


def test_a_push_refused_by_the_server_mid_update_is_a_race_too(tmp_path: Path) -> None:
    # The tightest race: the other writer's push lands after this writer's push has read the branch's tip, so
    # the server, not git locally, refuses the update. A pre-push hook makes that happen, once.
    origin, work, _ = origin_and_clone(tmp_path)
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(origin), str(other))
    store_results(Remote(work), BRANCH, [results_dir(tmp_path, "c", VERSIONS, RUN_C)], say=lambda _: None)
    theirs = results_dir(tmp_path, "b", TINY, RUN_B)
    hook = tmp_path / "hooks" / "pre-push"
    hook.parent.mkdir()
    git(work, "config", "core.hooksPath", str(hook.parent))  # the repository's configuration applies to the push
    hook.write_text(f"""#!/bin/sh
[ -e {tmp_path}/raced ] && exit 0
touch {tmp_path}/raced
cd {other} && COMPILE_BASELINES_REPO={other} PYTHONPATH={ROOT} \\
  exec {sys.executable} -m tracker.cli results store {theirs} --branch {BRANCH} >{tmp_path}/hook.log 2>&1
""")
    hook.chmod(0o755)
    waits: list[float] = []
    pushed = store_results(Remote(work), BRANCH, [results_dir(tmp_path, "a", TINY, RUN_A)], sleep=waits.append)
    assert pushed is not None and pushed.attempts == 2 and waits == [gitbranch.BACKOFF_S]
    assert stored_commits(origin, tmp_path) == {"5d800df4", "bc844535", "878f7b9b"}


def test_writers_pushing_at_once_all_get_their_results_in(tmp_path: Path) -> None:
    origin, _, _ = origin_and_clone(tmp_path)
    sources = [results_dir(tmp_path, "a", TINY, RUN_A), results_dir(tmp_path, "b", TINY, RUN_B),
               results_dir(tmp_path, "c", VERSIONS, RUN_C)]
    clones = []
    for i in range(len(sources)):
        clones.append(tmp_path / f"writer{i}")
        git(tmp_path, "clone", "-q", str(origin), str(clones[-1]))
    start, outcomes = threading.Barrier(len(sources)), {}

    def write(i: int) -> None:
        start.wait()
        try:
            outcomes[i] = store_results(Remote(clones[i]), BRANCH, [sources[i]], say=lambda _: None,
                                        sleep=lambda _: None)
        except Exception as e:  # reported below, with the others' outcomes
            outcomes[i] = e

    threads = [threading.Thread(target=write, args=(i,)) for i in range(len(sources))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert all(isinstance(o, gitbranch.Pushed) for o in outcomes.values()) and len(outcomes) == 3, outcomes
    assert stored_commits(origin, tmp_path) == {"5d800df4", "bc844535", "878f7b9b"}
    assert git(origin, "rev-list", "--count", BRANCH) == "3"


def test_nothing_changed_is_no_commit(tmp_path: Path) -> None:
    origin, work, _ = origin_and_clone(tmp_path)
    put_on_branch(origin, tmp_path, BRANCH, {"m/aaaa1111-env.json": "{}"})
    tip = git(origin, "rev-parse", BRANCH)

    def same(tree_dir: Path) -> None:
        (tree_dir / "m" / "aaaa1111-env.json").write_text("{}")

    assert gitbranch.commit_and_push(Remote(work), BRANCH, same, "again") is None
    assert gitbranch.commit_and_push(Remote(work), "empty", lambda _: None, "nothing") is None
    assert git(origin, "rev-parse", BRANCH) == tip and git(origin, "branch", "--list", "empty") == ""


def test_a_refused_merge_stores_nothing(tmp_path: Path) -> None:
    origin, work, _ = origin_and_clone(tmp_path)
    bad = results_dir(tmp_path, "bad", TINY, RUN_A)
    (bad / "cpu-laptop" / "machine.json").write_text(json.dumps({"machine": "cpu-laptop", "torch": "9.9"}))
    with pytest.raises(merge.MergeError, match=r"machine\.json says torch 9\.9"):
        store_results(Remote(work), BRANCH, [bad], say=lambda _: None)
    assert git(origin, "branch", "--list", BRANCH) == ""
    with pytest.raises(ResultsBranchError, match="is not a results directory; nothing was stored"):
        store_results(Remote(work), BRANCH, [tmp_path / "incoming" / "results-*"])


def test_the_cli_stores_and_says_so_in_one_line_and_an_unreachable_remote_is_one_error_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    origin, work, _ = origin_and_clone(tmp_path)
    monkeypatch.setenv("COMPILE_BASELINES_REPO", str(work))
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    assert cli.main(["results", "store", str(results_dir(tmp_path, "a", TINY, RUN_A)), "--branch", BRANCH]) == 0
    tip = git(origin, "rev-parse", BRANCH)
    assert capsys.readouterr().out.splitlines() == [f"origin has no branch {BRANCH} yet: creating it",
                                                    f"stored on {BRANCH} of origin as {tip[:12]}"]
    git(work, "remote", "set-url", "origin", str(tmp_path / "gone.git"))
    assert cli.main(["results", "store", str(results_dir(tmp_path, "b", TINY, RUN_B)), "--branch", BRANCH]) == 1
    err = capsys.readouterr().err
    assert err.startswith("compile-baselines results: error: cannot read the branches of origin") and err.count(
        "\n") == 1


# --- fetch ---------------------------------------------------------------------------------------------------


@pytest.fixture
def stored(tmp_path: Path) -> tuple[Path, Path, list[str]]:
    """A results branch with runs of two machines at the first two of main's three commits."""
    origin, work, (c0, c1, c2) = origin_and_clone(tmp_path)
    files = {"benchmarks.json": '{"suite": 1}'}
    for machine in ("h100-torch-stable", "h100-torch-nightly"):
        files[f"{machine}/machine.json"] = f'{{"machine": "{machine}", "from": "branch"}}'
        for c in (c0, c1):
            files[f"{machine}/{c[:8]}-existing-py.json"] = f'{{"machine": "{machine}", "commit": "{c}"}}'
    put_on_branch(origin, tmp_path, BRANCH, files)
    return origin, work, [c0, c1, c2]


def test_fetch_copies_one_run_of_one_machine_and_keeps_the_destination_s_machine_file(
        stored: tuple[Path, Path, list[str]], tmp_path: Path) -> None:
    _, work, (c0, _, c2) = stored
    dest = tmp_path / "tonight"
    (dest / "h100-torch-stable").mkdir(parents=True)
    (dest / "h100-torch-stable" / "machine.json").write_text("tonight's")
    (dest / "h100-torch-stable" / f"{c2[:8]}-existing-py.json").write_text("tonight's run")
    written = fetch_results(Remote(work), BRANCH, dest, machine="h100-torch-stable", commit="HEAD~2", repo_dir=work)
    assert written == [dest / "h100-torch-stable" / f"{c0[:8]}-existing-py.json"]
    assert json.loads(written[0].read_text()) == {"machine": "h100-torch-stable", "commit": c0}
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*")) == sorted([
        "h100-torch-stable", f"h100-torch-stable/{c0[:8]}-existing-py.json",
        f"h100-torch-stable/{c2[:8]}-existing-py.json", "h100-torch-stable/machine.json"])
    assert (dest / "h100-torch-stable" / "machine.json").read_text() == "tonight's"


def test_fetch_of_a_machine_or_of_everything_brings_the_descriptions_a_new_directory_needs(
        stored: tuple[Path, Path, list[str]], tmp_path: Path) -> None:
    _, work, (c0, c1, _) = stored
    one = fetch_results(Remote(work), BRANCH, tmp_path / "one", machine="h100-torch-nightly")
    assert one is not None and sorted(str(p.relative_to(tmp_path / "one")) for p in one) == sorted([
        f"h100-torch-nightly/{c0[:8]}-existing-py.json", f"h100-torch-nightly/{c1[:8]}-existing-py.json",
        "h100-torch-nightly/machine.json"])
    everything = fetch_results(Remote(work), BRANCH, tmp_path / "all")
    assert everything is not None and len(everything) == 7 and (tmp_path / "all" / "benchmarks.json").exists()


def test_fetch_of_what_is_not_there(stored: tuple[Path, Path, list[str]], tmp_path: Path) -> None:
    _, work, (_, _, c2) = stored
    assert fetch_results(Remote(work), "no-such-branch", tmp_path / "d") is None
    assert not (tmp_path / "d").exists()
    with pytest.raises(ResultsBranchError, match=f"no results of commit {c2[:10]} on {BRANCH} for machine "
                                                 "h100-torch-stable"):
        fetch_results(Remote(work), BRANCH, tmp_path / "d", machine="h100-torch-stable", commit=c2[:10],
                      repo_dir=work)
    with pytest.raises(ResultsBranchError, match=f"no results on {BRANCH} for machine h100-torch-old"):
        fetch_results(Remote(work), BRANCH, tmp_path / "d", machine="h100-torch-old")


def test_a_fetch_that_git_cannot_finish_leaves_the_destination_as_it_was(
        stored: tuple[Path, Path, list[str]], tmp_path: Path) -> None:
    origin, work, (c0, c1, _) = stored
    # one of the machine's files can no longer be read from the remote (a damaged object store)
    blob = git(origin, "rev-parse", f"{BRANCH}:h100-torch-stable/{c1[:8]}-existing-py.json")
    loose = origin / "objects" / blob[:2] / blob[2:]
    assert loose.exists()
    loose.unlink()
    dest = tmp_path / "dest"
    (dest / "h100-torch-stable").mkdir(parents=True)
    (dest / "h100-torch-stable" / f"{c0[:8]}-existing-py.json").write_text("kept")
    before = sorted(str(p.relative_to(dest)) for p in dest.rglob("*"))
    with pytest.raises(BranchError, match=r"^git fetch .* failed for "):
        fetch_results(Remote(work), BRANCH, dest, machine="h100-torch-stable")
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*")) == before  # no file, no staging folder left
    assert (dest / "h100-torch-stable" / f"{c0[:8]}-existing-py.json").read_text() == "kept"


# --- previous ------------------------------------------------------------------------------------------------


def test_the_previous_run_is_the_nearest_first_parent_ancestor_with_a_run_of_that_machine(
        stored: tuple[Path, Path, list[str]], tmp_path: Path) -> None:
    _, work, (c0, c1, c2) = stored
    remote = Remote(work)
    assert previous_run("h100-torch-stable", c2, work, remote=remote, branch=BRANCH) == c1
    assert previous_run("h100-torch-stable", "HEAD~1", work, remote=remote, branch=BRANCH) == c0  # itself excluded
    assert previous_run("h100-torch-stable", c0, work, remote=remote, branch=BRANCH) is None
    assert previous_run("h100-torch-old", c2, work, remote=remote, branch=BRANCH) is None
    assert previous_run("h100-torch-stable", c2, work, remote=remote, branch="no-such-branch") is None
    fetch_results(remote, BRANCH, tmp_path / "local")
    assert previous_run("h100-torch-nightly", c2, work, results_dir=tmp_path / "local") == c1
    assert previous_run("h100-torch-nightly", c2, work, results_dir=tmp_path / "empty") is None


def test_a_run_of_a_merged_branch_is_not_the_previous_run(tmp_path: Path) -> None:
    _, work, (c0, _) = origin_and_clone(tmp_path, commits=2)
    git(work, "checkout", "-qb", "side", "HEAD~1")
    (work / "side.txt").write_text("side")
    side = commit_all(work, "side")
    git(work, "checkout", "-q", "main")
    git(work, "-c", "user.name=t", "-c", "user.email=t@t", "merge", "-q", "--no-ff", "-m", "merge", "side")
    head = git(work, "rev-parse", "HEAD")
    results = tmp_path / "results" / "m"
    results.mkdir(parents=True)
    for c in (c0, side, head):
        (results / f"{c[:8]}-env.json").write_text("{}")
    # head's first parent (main's second commit) has no run; the side branch's commit, one merge away, is not it
    assert previous_run("m", head, work, results_dir=tmp_path / "results") == c0


def test_the_cli_prints_the_previous_commit_alone_or_nothing(
        stored: tuple[Path, Path, list[str]], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    _, work, (_, c1, _) = stored
    monkeypatch.setenv("COMPILE_BASELINES_REPO", str(work))
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_TOKEN", "t0ken")  # its mask goes to stderr: stdout is the answer
    assert cli.main(["results", "previous", "--branch", BRANCH, "--machine", "h100-torch-stable"]) == 0
    out, err = capsys.readouterr()
    assert out == f"{c1}\n" and err.startswith("::add-mask::")
    assert cli.main(["results", "previous", "--branch", BRANCH, "--machine", "h100-torch-old"]) == 0
    out, err = capsys.readouterr()
    assert out == "" and "h100-torch-old: no earlier measured commit than HEAD" in err


# --- the token ------------------------------------------------------------------------------------------------


def test_the_token_reaches_git_for_its_server_only_through_the_environment(tmp_path: Path) -> None:
    env = git_env({"GITHUB_TOKEN": "t0ken", "GITHUB_SERVER_URL": "https://ghe.example.com/", "GIT_CONFIG_COUNT": "1",
                   "GIT_CONFIG_KEY_0": "core.abbrev", "GIT_CONFIG_VALUE_0": "9"})
    assert env["GIT_CONFIG_COUNT"] == "2" and "GIT_CONFIG_KEY_0" not in env
    full = {**os.environ, "GIT_CONFIG_KEY_0": "core.abbrev", "GIT_CONFIG_VALUE_0": "9", **env}

    def header(url: str) -> str:
        return subprocess.run(["git", "config", "--get-urlmatch", "http.extraheader", url], env=full, cwd=tmp_path,
                              capture_output=True, text=True).stdout.strip()

    assert header("https://ghe.example.com/org/repo") == "AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46dDBrZW4="
    assert header("https://github.com/org/repo") == ""
    assert git_env({}) == {} and git_env({"GITHUB_TOKEN": ""}) == {}
    masked: list[str] = []
    git_env({"GITHUB_TOKEN": "t0ken", "GITHUB_ACTIONS": "true"}, say=masked.append)
    assert masked == ["::add-mask::eC1hY2Nlc3MtdG9rZW46dDBrZW4="]


# --- links on the branch -----------------------------------------------------------------------------------------


def put_links(origin: Path, tmp_path: Path, links: dict[str, Path], files: dict[str, str] | None = None) -> str:
    """Commit `links` (path -> target: symlinks, git's mode 120000) and `files` as the whole tree of the results
    branch on `origin`: what anyone who can push to the branch can put there."""
    scratch = tmp_path / "scratch-links"
    git(tmp_path, "clone", "-q", str(origin), str(scratch))
    git(scratch, "checkout", "-q", "--orphan", BRANCH)
    git(scratch, "rm", "-rqf", "--ignore-unmatch", ".")
    for path, target in links.items():
        (scratch / path).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, scratch / path)
    for path, text in (files or {}).items():
        (scratch / path).parent.mkdir(parents=True, exist_ok=True)
        (scratch / path).write_text(text)
    tip = commit_all(scratch, "links")
    git(scratch, "push", "-qf", "origin", f"HEAD:refs/heads/{BRANCH}")
    return tip


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret.txt").write_text("the runner's secret")
    return out


def test_store_refuses_a_branch_holding_links_and_reads_and_writes_nothing_through_them(
        tmp_path: Path, outside: Path) -> None:
    origin, work, _ = origin_and_clone(tmp_path)
    tip = put_links(origin, tmp_path, {"m/aaaaaaaa-env.json": outside / "secret.txt", "cpu-laptop": outside})
    with pytest.raises(BranchError, match=r"holds cpu-laptop \(a symlink\) and 1 more: results are never read or "
                                          "written through one; remove it from the branch; nothing was stored"):
        store_results(Remote(work), BRANCH, [results_dir(tmp_path, "a", TINY, RUN_A)], say=lambda _: None)
    assert git(origin, "rev-parse", BRANCH) == tip  # nothing pushed
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]  # nothing written through the link


def test_fetch_leaves_links_out_with_a_warning_and_never_makes_one(
        tmp_path: Path, outside: Path, capsys: pytest.CaptureFixture[str]) -> None:
    origin, work, _ = origin_and_clone(tmp_path)
    put_links(origin, tmp_path, {"cpu-laptop/bbbbbbbb-env.json": outside / "secret.txt", "other": outside},
              {"cpu-laptop/aaaaaaaa-env.json": "{}"})
    dest = tmp_path / "dest"
    written = fetch_results(Remote(work), BRANCH, dest)
    assert written == [dest / "cpu-laptop" / "aaaaaaaa-env.json"]
    assert [p for p in dest.rglob("*") if p.is_symlink()] == []
    assert capsys.readouterr().err.splitlines() == [
        "warning: skipped cpu-laptop/bbbbbbbb-env.json on the branch: a symlink, which is never followed",
        "warning: skipped other on the branch: a symlink, which is never followed"]


def test_fetch_never_writes_through_a_link_in_its_destination(
        stored: tuple[Path, Path, list[str]], tmp_path: Path, outside: Path) -> None:
    _, work, _ = stored
    dest = tmp_path / "dest"
    dest.mkdir()
    os.symlink(outside, dest / "h100-torch-stable")  # say, made by an earlier version's fetch
    with pytest.raises(BranchError, match=r"h100-torch-stable is a symlink, which is never followed; nothing was "
                                          "written"):
        fetch_results(Remote(work), BRANCH, dest)
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert sorted(p.name for p in dest.iterdir()) == ["h100-torch-stable"]  # no other file either


def test_fetch_sweeps_what_a_killed_fetch_left(stored: tuple[Path, Path, list[str]], tmp_path: Path) -> None:
    _, work, (c0, _, _) = stored
    dest = tmp_path / "dest"
    dead = dest / f"{gitbranch.STAGING}x1y2z3" / "h100-torch-stable"  # what a fetch killed mid-way leaves
    dead.mkdir(parents=True)
    (dead / f"{c0[:8]}-existing-py.json").write_text("half")
    fetch_results(Remote(work), BRANCH, dest, machine="h100-torch-stable")
    assert sorted(p.name for p in dest.iterdir()) == ["h100-torch-stable"]


# --- git's refusals and names ------------------------------------------------------------------------------------


def test_a_push_the_remote_rejects_is_one_line_at_once_not_a_race(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    origin, work, _ = origin_and_clone(tmp_path)
    tip = put_on_branch(origin, tmp_path, BRANCH, {"m/aaaa1111-env.json": "{}"})
    hook = origin / "hooks" / "pre-receive"  # what a protected branch's server does
    hook.write_text("#!/bin/sh\necho 'GH006: Protected branch update failed' >&2\nexit 1\n")
    hook.chmod(0o755)
    waits: list[float] = []
    with pytest.raises(BranchError) as refused:
        store_results(Remote(work), BRANCH, [results_dir(tmp_path, "a", TINY, RUN_A)], sleep=waits.append)
    assert str(refused.value) == (
        f"origin refused the push to {BRANCH}: [remote rejected] (pre-receive hook declined); remote: GH006: "
        "Protected branch update failed; the branch did not move, so pushing again would not help (a protected "
        "branch?); nothing was stored")
    assert waits == [] and git(origin, "rev-parse", BRANCH) == tip
    monkeypatch.setenv("COMPILE_BASELINES_REPO", str(work))
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    assert cli.main(["results", "store", str(results_dir(tmp_path, "b", TINY, RUN_B)), "--branch", BRANCH]) == 1
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.parametrize("name", ["-x", "", "a..b", "@{-1}", "HEAD", "has space", "end.lock", "x/"])
def test_a_branch_name_git_would_refuse_is_a_usage_error_before_anything_is_fetched_or_pushed(
        tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    origin, work, _ = origin_and_clone(tmp_path)
    monkeypatch.setenv("COMPILE_BASELINES_REPO", str(work))
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    source = str(results_dir(tmp_path, "a", TINY, RUN_A))
    for argv in (["store", source], ["fetch", "--results-dir", str(tmp_path / "d")], ["previous", "--machine", "m"]):
        assert cli.main(["results", *argv, f"--branch={name}"]) == 2
        assert capsys.readouterr().err == (f"compile-baselines results: error: --branch {name!r} is not a branch "
                                           "name git accepts (see git check-ref-format; none starts with '-')\n")
    assert git(origin, "for-each-ref", "--format=%(refname)") == "refs/heads/main" and not (tmp_path / "d").exists()


def test_a_remote_name_that_git_would_read_as_an_option_is_refused(
        stored: tuple[Path, Path, list[str]], tmp_path: Path) -> None:
    _, work, _ = stored
    with pytest.raises(gitbranch.NameRefused, match="is not a git remote's name"):
        fetch_results(Remote(work, name=f"--upload-pack=touch {tmp_path}/ran"), BRANCH, tmp_path / "d")
    assert not (tmp_path / "ran").exists()


def test_a_file_on_the_branch_where_a_machine_s_folder_goes_is_named_on_the_branch(tmp_path: Path) -> None:
    origin, work, _ = origin_and_clone(tmp_path)
    tip = put_on_branch(origin, tmp_path, BRANCH, {"cpu-laptop": "a file, not a folder"})
    with pytest.raises(BranchError, match=f"^cannot write results into {BRANCH}: cpu-laptop there is a file where "
                                          "the machine's folder goes"):
        store_results(Remote(work), BRANCH, [results_dir(tmp_path, "a", TINY, RUN_A)], say=lambda _: None)
    assert git(origin, "rev-parse", BRANCH) == tip


def test_an_empty_commit_to_fetch_is_a_usage_error_not_whichever_run_there_is(
        stored: tuple[Path, Path, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    _, work, _ = stored
    monkeypatch.setenv("COMPILE_BASELINES_REPO", str(work))
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    argv = ["results", "fetch", "--branch", BRANCH, "--machine", "h100-torch-stable", "--results-dir", str(tmp_path)]
    assert cli.main([*argv, "--commit", ""]) == 2
    assert "--commit is empty (an unset shell variable?)" in capsys.readouterr().err
    assert cli.main([*argv[:-2], "--results-dir", str(tmp_path / "d"), "--machine", "../x"]) == 2
    assert not (tmp_path / "d").exists()
