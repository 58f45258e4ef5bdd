"""rm: drop runs like `asv rm`, by commit (prefix or git ref), machine, torch version and date; a dry run unless
--yes; a run's result file and its cell-store directory go together. On copies of the real CPU fixtures."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tracker import cli
from tracker.store.commits import parse_date_ms
from tracker.store.remove import Selection, remove_run, select
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
    assert select(runs, Selection(torch="2.1")) == []  # 2.1 is not the start of 2.13.0 nor of 2.9.1
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
    assert select(runs, Selection(commit="HEAD")) == []  # no repository: HEAD is no hash prefix of a run


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
    assert rm(store, "--commit", "bc84", "--yes") == 1
    assert capsys.readouterr().err.endswith(f"error: --commit bc84 matches several commits (bc8400000000, "
                                            f"{TINY_2[:12]}): give more digits\n")
    assert rm(store, "--commit", "deadbeef", "--yes") == 1
    err = capsys.readouterr().err
    assert err.startswith("compile-baselines rm: error: no run matches --commit deadbeef (3 runs in ")
    assert err.count("\n") == 1 and "machines: cpu-laptop, vm" in err
    with pytest.raises(SystemExit) as e:
        rm(store, "--since", "last week")
    assert e.value.code == 2
    assert "argument --since: 'last week' is not a date" in capsys.readouterr().err
    assert len(commits(store)) == 3
