"""rm: drop runs like `asv rm`, by commit (prefix or git ref), machine, torch version and date; a dry run unless
--yes; a run's result file and its cell-store directory go together. On copies of the real CPU fixtures."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tracker import cli
from tracker.store.commits import parse_date_ms
from tracker.store.remove import Selection, SelectionError, finish_interrupted, remove_run, select
from tracker.store.results import list_runs

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
TINY_1, TINY_2 = "5d800df4bad6f855dd4208d2a080d087f3fe364e", "bc8445352fe86eff2a4599c96cb2a0f5a1cb4b8d"
KERNELS = "4476b6cb81753841427b98f8ddd59d72d3b7b34a"  # machine "vm", with its cell store


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """results/ with three real runs (two on cpu-laptop, one on vm) and cells/ with the vm run's cells."""
    shutil.copytree(FIXTURES / "cpu-tiny" / "results", tmp_path / "results")
    shutil.copytree(FIXTURES / "cpu-kernels" / "results" / "vm", tmp_path / "results" / "vm")
    shutil.copytree(FIXTURES / "cpu-kernels" / "cells", tmp_path / "cells")
    return tmp_path


def rewrite(path: Path, **fields: object) -> None:
    """Change a result file's commit_hash, date or params (torch) in place, as another run would have them."""
    data = json.loads(path.read_text())
    for key, value in fields.items():
        if key == "torch":
            data["params"]["torch"] = value
        else:
            data[key] = value
    path.write_text(json.dumps(data))


def rm(store: Path, *args: str) -> int:
    return cli.main(["rm", "--results-dir", str(store / "results"), *args])


def commits(store: Path) -> list[str]:
    return [r.commit for r in list_runs(store / "results")[0]]


def test_without_yes_it_lists_what_it_would_remove_and_removes_nothing(
        store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = sorted(p for p in store.rglob("*"))
    assert rm(store, "--commit", KERNELS[:8]) == 0
    out = capsys.readouterr().out
    assert "would remove 1 of 3 runs" in out and KERNELS[:12] in out and "torch 2.13.0+cpu" in out
    assert out.rstrip().endswith("dry run: nothing removed; pass --yes to remove them")
    assert sorted(p for p in store.rglob("*")) == before


def test_yes_removes_the_result_file_and_the_runs_cells_and_nothing_else(
        store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (kernel_file,) = (store / "results" / "vm").glob("4476b6cb-*.json")
    assert (store / "cells" / "vm" / KERNELS / "torch-2.13.0+cpu").is_dir()
    assert rm(store, "--commit", KERNELS[:8], "--yes") == 0
    out = capsys.readouterr().out
    assert f"removed vm  {KERNELS[:12]}" in out and out.rstrip().endswith("removed 1 of 3 runs")
    assert not kernel_file.exists()
    assert not (store / "cells" / "vm").exists()  # the run's folders, emptied, go too
    assert (store / "cells").is_dir() and (store / "results" / "vm" / "machine.json").exists()
    assert commits(store) == [TINY_1, TINY_2]
    assert not list(store.rglob(".rm-*"))


def test_selectors_combine_machine_torch_and_dates(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (first,) = (store / "results" / "cpu-laptop").glob("5d800df4-*.json")
    rewrite(first, date=parse_date_ms("2026-06-30T23:00:00Z"), torch="2.9.1+cpu")
    runs = list_runs(store / "results")[0]
    by_commit = {r.commit: r for r in runs}
    assert select(runs, Selection(torch="2.9")) == [by_commit[TINY_1]]
    with pytest.raises(SelectionError, match=r"--torch 2\.1 matches none"):  # 2.1 starts neither 2.13.0 nor 2.9.1
        select(runs, Selection(torch="2.1"))
    assert select(runs, Selection(torch="2.13")) == [by_commit[TINY_2], by_commit[KERNELS]]
    until = parse_date_ms("2026-06-30", end_of_day=True)  # a bare --until date includes its whole day
    assert select(runs, Selection(until_ms=until)) == [by_commit[TINY_1]]
    assert select(runs, Selection(since_ms=parse_date_ms("2026-07-01"))) == [by_commit[TINY_2], by_commit[KERNELS]]
    assert select(runs, Selection(machine="cpu-laptop", since_ms=parse_date_ms("2026-07-01"))) == [by_commit[TINY_2]]
    assert rm(store, "--machine", "cpu-laptop", "--until", "2026-06-30", "--yes") == 0
    assert commits(store) == [TINY_2, KERNELS]


def test_commit_may_be_a_git_ref(store: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "one"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    (second,) = (store / "results" / "cpu-laptop").glob("bc844535-*.json")
    rewrite(second, commit_hash=head)
    runs = list_runs(store / "results")[0]
    assert [r.commit for r in select(runs, Selection(commit="HEAD"), repo)] == [head]
    with pytest.raises(SelectionError):  # no repository: HEAD is no hash prefix of a run
        select(runs, Selection(commit="HEAD"))


def test_a_run_without_cells_is_removed_too(store: Path) -> None:
    (r,) = [r for r in list_runs(store / "results")[0] if r.commit == TINY_1]
    assert remove_run(r, store / "cells") is False
    assert not r.path.exists()


def test_no_selector_or_no_match_is_one_clear_error(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert rm(store, "--yes") == 2
    assert capsys.readouterr().err == ("compile-baselines rm: error: say which runs to remove: --commit, --machine, "
                                       "--torch, --since or --until\n")
    (first,) = (store / "results" / "cpu-laptop").glob("5d800df4-*.json")
    rewrite(first, commit_hash="bc84" + "0" * 36)
    assert rm(store, "--commit", "bc84", "--yes") == 2
    assert capsys.readouterr().err.endswith(f"error: --commit bc84 matches several commits (bc8400000000, "
                                            f"{TINY_2[:12]}): give more digits\n")
    assert rm(store, "--commit", "deadbeef", "--yes") == 2
    err = capsys.readouterr().err
    assert err.startswith("compile-baselines rm: error: --commit deadbeef matches none of the 3 runs in the results")
    assert err.count("\n") == 1 and "commits: 4476b6cb8175, bc8400000000, bc8445352fe8" in err
    with pytest.raises(SystemExit) as e:
        rm(store, "--since", "last week")
    assert e.value.code == 2
    assert "argument --since: 'last week' is not a date" in capsys.readouterr().err
    assert len(commits(store)) == 3


def tree(root: Path) -> list[tuple[str, int]]:
    """Every file under `root` with its size: what a refused or rolled-back rm must leave exactly as it was."""
    return sorted((str(p.relative_to(root)), p.stat().st_size) for p in root.rglob("*") if p.is_file())


@pytest.mark.parametrize("flag", ["--commit", "--machine", "--torch"])
@pytest.mark.parametrize("value", ["", " ", "\t"], ids=["empty", "space", "tab"])
@pytest.mark.parametrize("yes", [True, False], ids=["yes", "dry-run"])
def test_a_blank_selector_is_a_usage_error_and_removes_nothing(
        store: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str, yes: bool) -> None:
    before = tree(store)
    assert rm(store, flag, value, *(["--yes"] if yes else [])) == 2
    err = capsys.readouterr().err
    assert err == f"compile-baselines rm: error: {flag} is empty (an unset shell variable?): say which runs to remove\n"
    assert tree(store) == before


@pytest.mark.parametrize("args", [
    ["--machine", "nope"], ["--machine", "vm", "--torch", "2.9"], ["--commit", KERNELS[:8], "--until", "2020-01-01"],
    ["--since", "2099-01-01", "--machine", "vm"]], ids=["machine", "torch", "until", "since"])
def test_a_selector_that_picks_no_run_is_a_usage_error_even_beside_one_that_does(
        store: Path, capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    before = tree(store)
    assert rm(store, *args, "--yes") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "matches none of the 3 runs" in err
    assert tree(store) == before


def test_selectors_that_each_match_but_not_together_are_a_usage_error(
        store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert rm(store, "--machine", "vm", "--commit", TINY_1[:8], "--yes") == 2
    assert "no run matches --commit 5d800df4 --machine vm together" in capsys.readouterr().err
    assert len(commits(store)) == 3


def _deny(monkeypatch: pytest.MonkeyPatch, denied: Path) -> None:
    """os.access says `denied` cannot be written, as for another user's folder or a read-only mount."""
    real = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: Path(path) != denied and real(path, mode, **kw))


@pytest.mark.parametrize("where", ["result folder", "cell store's commit folder", "a folder inside the cells"])
def test_an_unwritable_path_is_refused_before_anything_is_moved(
        store: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    cells = store / "cells" / "vm" / KERNELS
    denied = {"result folder": store / "results" / "vm", "cell store's commit folder": cells,
              "a folder inside the cells": cells / "torch-2.13.0+cpu" / "tiny" / "llm_rmsnorm"}[where]
    _deny(monkeypatch, denied)
    before = tree(store)
    assert rm(store, "--commit", KERNELS[:8], "--yes") == 1
    err = capsys.readouterr().err
    what = "run" if where == "result folder" else "cells of"
    assert err == (f"compile-baselines rm: error: cannot remove the {what} vm {KERNELS[:12]}: {denied} is not "
                   "writable (permissions or a read-only file system); nothing was removed\n")
    assert tree(store) == before


def test_a_result_file_that_cannot_be_deleted_gets_its_cells_back(
        store: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    real = Path.unlink

    def unlink(self: Path, missing_ok: bool = False) -> None:
        if self.parent.name == "vm" and self.name.startswith("4476b6cb"):
            raise PermissionError(1, "Operation not permitted")
        real(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", unlink)
    before = tree(store)
    assert rm(store, "--commit", KERNELS[:8], "--yes") == 1
    assert "Operation not permitted; that run and its cells are left as they were" in capsys.readouterr().err
    assert tree(store) == before and not list(store.rglob(".rm-*"))


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("chattr") is None, reason="chattr +i needs root")
def test_an_immutable_results_folder_is_refused_for_real(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = store / "results" / "vm"
    if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("this file system has no immutable flag")
    try:
        before = tree(store)
        assert rm(store, "--commit", KERNELS[:8], "--yes") == 1
        assert f"{folder} is not writable" in capsys.readouterr().err
        assert tree(store) == before
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)


# The two windows of a removal: killed after the cells were renamed aside (the result file still there), or while
# the renamed cells were being deleted (the result file gone).
KILL_AT = {
    "before the result file is deleted": "pathlib.Path.unlink",
    "while the cells are deleted": "shutil.rmtree",
}
_KILLER = """
import os, pathlib, shutil, signal, sys
from tracker import cli
target, attr = sys.argv[1].rsplit(".", 1)
module = {"pathlib.Path": pathlib.Path, "shutil": shutil}[target]
real = getattr(module, attr)
def kill(*args, **kwargs):
    if ".rm-" in str(args[0]) or str(args[0]).endswith(".json"):
        os.kill(os.getpid(), signal.SIGKILL)
    return real(*args, **kwargs)
setattr(module, attr, kill)
cli.main(["rm", "--results-dir", sys.argv[2], "--commit", sys.argv[3], "--yes"])
"""


def _killed_rm(store: Path, window: str) -> None:
    done = subprocess.run([sys.executable, "-c", _KILLER, KILL_AT[window], str(store / "results"), KERNELS[:8]],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True)
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()
    assert len(list((store / "cells").rglob(".rm-*"))) == 1


@pytest.mark.parametrize("window", list(KILL_AT))
@pytest.mark.parametrize("later", ["rm of another run", "the same rm again", "run"])
def test_a_killed_rm_is_rolled_back_or_finished_by_the_next_rm_or_run(
        store: Path, capsys: pytest.CaptureFixture[str], window: str, later: str) -> None:
    _killed_rm(store, window)
    file_left = window == "before the result file is deleted"
    assert (KERNELS in commits(store)) is file_left
    if later == "run":
        for line in finish_interrupted(store / "results", store / "cells"):  # what `run` does first
            print(line)
    else:
        selector = KERNELS[:8] if later == "the same rm again" else TINY_1[:8]
        assert rm(store, "--commit", selector, "--yes") == 0
    out = capsys.readouterr().out
    assert ("rolled back an interrupted rm" if file_left else "finished an interrupted rm") in out
    assert not list(store.rglob(".rm-*"))
    cells = store / "cells" / "vm" / KERNELS / "torch-2.13.0+cpu"
    removed_now = later == "the same rm again"
    assert cells.is_dir() is (file_left and not removed_now)
    assert (KERNELS in commits(store)) is (file_left and not removed_now)
    if cells.is_dir():
        assert len(list(cells.rglob("*.json"))) == 5


def test_run_repairs_an_interrupted_rm_before_it_reads_the_store(
        store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tracker.runner import suite
    from tracker.runner.config import RunConfig

    _killed_rm(store, "before the result file is deleted")

    def stop(*args: object) -> None:
        raise RuntimeError("stopped after the repair")

    monkeypatch.setattr(suite, "ForkServer", stop)  # the first thing a run starts after the repair
    conf = type("Conf", (), {"results_dir": str(store / "results")})()
    cfg = RunConfig(store_root=store / "cells", machine="vm", commit=KERNELS)
    with pytest.raises(RuntimeError, match="stopped after the repair"):
        suite.run_suite([], cfg, conf, 0)
    assert not list(store.rglob(".rm-*")) and (store / "cells" / "vm" / KERNELS / "torch-2.13.0+cpu").is_dir()


def test_a_dry_run_names_what_an_interrupted_rm_left_and_changes_nothing(
        store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _killed_rm(store, "while the cells are deleted")
    before = tree(store)
    assert rm(store, "--machine", "cpu-laptop") == 0
    assert "an interrupted rm left " in capsys.readouterr().out
    assert tree(store) == before


@pytest.mark.parametrize("command", ["rm", "merge"])
def test_an_interrupt_says_what_that_command_leaves(
        store: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: str) -> None:
    from tracker.store import merge, remove

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(remove, "rm", interrupted)
    monkeypatch.setattr(merge, "merge_results", interrupted)
    argv = (["rm", "--commit", KERNELS[:8], "--yes"] if command == "rm" else ["merge", str(store / "results")])
    assert cli.main([*argv, "--results-dir", str(store / "results")]) == 130
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cells" not in err.replace("its cells", "")
    assert f"{command} again" in err
