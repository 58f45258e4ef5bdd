"""`bisect`: which commit of a range moved a cell. The range's state and decisions (constructed verdicts); the flow
over a repository of nine real commits with a fake `run` that writes constructed compiles and plants a change per
commit (tests/pairedfake.py); the nightly's case, where torch changed too; and one real bisection on the CPU."""

from __future__ import annotations

import io
import math
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pairedfake import ENTRY, PairedFake, _values
from test_prflow import commit_all, git

from tracker.analyse.bisection import BAD, GOOD, SKIPPED, Commit, Range, change_of, classify
from tracker.analyse.changes import CellChange
from tracker.analyse.verdicts import FASTER, SAME, SLOWER, UNDECIDED
from tracker.cli import main
from tracker.commands.bisect import show
from tracker.errors import UsageError
from tracker.flows import bisect as flow
from tracker.flows.bisect import BisectRequest, cells_to_bisect, first_parents
from tracker.flows.rounds import Budget
from tracker.flows.sides import Command, run_command_line
from tracker.store import asvfiles
from tracker.store.resultsbranch import stored_in_dir

ROOT = Path(__file__).resolve().parent.parent
MACHINE = "h100-bisect"
CELL = ("prefill", "llm_rmsnorm", "default")
CELL_NAME = "/".join(CELL)
_SUITE: dict[str, Any] = {}


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """Nine commits, "commit 0" to "commit 8", each changing a note; commit 2 alone lacks llm_rmsnorm in
    workloads/names.py (a workload missing there: it cannot be measured)."""
    r = tmp_path_factory.mktemp("repo")
    git(r, "init", "-q")
    (r / "workloads").mkdir()
    names = (ROOT / "workloads" / "names.py").read_text()
    shas = []
    for i in range(9):
        (r / "workloads" / "names.py").write_text(names.replace('"llm_rmsnorm",', "") if i == 2 else names)
        (r / "notes.txt").write_text(f"note {i}\n")
        shas.append(commit_all(r, f"commit {i}"))
    return r, shas


class Fake(PairedFake):
    """PairedFake whose run fails (exit 1) at the commits in `failing`, whose clock moves `tick` seconds a batch of
    runs, whose runs record `torch` (default: this host's), and which discovers the asv suite once (the steps'
    scratch folders all record the same suite)."""

    def __init__(self, changes: dict[str, dict[tuple[str, str, str], float]], failing: Sequence[str] = (),
                 tick: float = 0.0, machine: str = MACHINE, torch: str | None = None) -> None:
        super().__init__(machine, changes)
        self.failing, self.tick, self.now, self.torch = set(failing), tick, 0.0, torch

    def __call__(self, commands: Sequence[Command]) -> list[int]:
        self.now += self.tick
        return super().__call__(commands)

    def one(self, c: Command) -> int:
        commit = c.argv[c.argv.index("--commit") + 1]
        if commit in self.failing:
            self.calls.append(c)
            return 1
        return super().one(c)

    def clock(self) -> float:
        return self.now

    def _record(self, results: Path, commit: str, store: Any) -> None:
        conf = asvfiles.load_conf(ROOT / "asv.conf.json", str(results))
        if "suite" not in _SUITE:
            _SUITE["suite"] = asvfiles.suite(conf, sys.executable, commit)
        asvfiles.record_run(conf, sys.executable, self.machine, commit, 1_767_225_600_000, store.cells(), {},
                            entry=ENTRY | {"machine": self.machine, "torch": self.torch or ENTRY["torch"]},
                            discovered=_SUITE["suite"])


def planted(shas: list[str], at: int, factor: float, cell: tuple[str, str, str] = CELL) -> dict[str, Any]:
    """Constructed: the cell's latency times `factor` from commit `at` on (the change stays once made)."""
    return {s: {cell: factor} for s in shas[at:]}


def bisect(r: Path, shas: list[str], results: Path, fake: Fake, out: Path | None = None, **kw: Any) -> str:
    kw = {"cells": [CELL_NAME], "machine": MACHINE, "budget": Budget(seconds=3600, max_compiles=6)} | kw
    stdout = io.StringIO()
    sys_stdout, sys.stdout = sys.stdout, stdout
    try:
        request = BisectRequest(shas[0], shas[-1], results_dir=results, repo_dir=r, out=out, **kw)
        assert show(flow.bisect(request, fake, devices=[], clock=fake.clock), request.from_machine, out) == 0
    finally:
        sys.stdout = sys_stdout
    return stdout.getvalue()


# ---------------------------------------------------------------------------------------------------- the range


def change(verdict: str, ratio: float | None = 1.0, ci: tuple[float, float] | None = None,
           cell: tuple[str, str, str] = CELL) -> CellChange:
    """A constructed verdict of one cell, with its 95% interval."""
    return CellChange(*cell, 1.0, ratio, ratio, None, None, None, verdict, ci=ci)


def test_the_next_commit_is_the_middle_of_what_is_left_and_a_skipped_one_is_stepped_around() -> None:
    r = Range([Commit(str(i) * 40, f"commit {i}") for i in range(9)])
    assert r.next() == 4 and r.first_bad is None and len(r.suspects) == 8
    r.mark(4, GOOD)
    assert r.next() == 6
    r.mark(6, SKIPPED, "its run failed")
    assert r.next() == 5  # beside the skipped one, the earlier of two equally near
    r.mark(5, BAD)
    assert r.next() is None and r.first_bad == r.commits[5] and r.suspects == [r.commits[5]]
    s = Range(r.commits)
    s.mark(4, BAD)
    s.mark(2, SKIPPED, "a workload missing")
    s.mark(1, GOOD)
    s.mark(3, BAD)
    assert s.next() is None and s.first_bad is None and s.suspects == s.commits[2:4]  # git bisect: one of these
    with pytest.raises(ValueError, match="not between the ends"):
        s.mark(7, GOOD)


def test_a_commit_is_placed_at_the_level_of_the_end_it_measures_like_else_skipped() -> None:
    other = ("decode", "llm_rmsnorm", "eager")
    moved = change_of([change(SLOWER, 1.1), change(SAME, 1.0, cell=other)], [CELL, other])
    assert moved == {CELL: pytest.approx(math.log(1.1))}
    assert classify([change(SLOWER, 1.1, (1.08, 1.12))], moved) == (BAD, "")
    assert classify([change(SAME, 1.0, (0.99, 1.01))], moved) == (GOOD, "")
    assert classify([change(FASTER, 0.9)], moved) == (GOOD, "")  # against the change: it lies after this commit
    # an interval across half the change, and no verdict: at neither level
    assert classify([change(UNDECIDED, 1.02, (0.97, 1.08))], moved) == (
        SKIPPED, f"{CELL_NAME} undecided, at neither end's level")
    assert classify([change("now fails", None)], moved) == (SKIPPED, f"{CELL_NAME} now fails")
    assert classify([], moved) == (SKIPPED, f"{CELL_NAME} not measured")
    # a change of many times the noise: a commit is placed by its level even where "the same" is not decided, and a
    # small move the same way is not the change
    large = change_of([change(SLOWER, 30.0)], [CELL])
    assert classify([change(UNDECIDED, 0.9, (0.6, 1.3))], large) == (GOOD, "")
    assert classify([change(UNDECIDED, 28.0, (20.0, 40.0))], large) == (BAD, "")
    assert classify([change(SLOWER, 1.03, (1.01, 1.05))], change_of([change(FASTER, 0.5)], [CELL])) == (GOOD, "")
    assert classify([change(SLOWER, 1.03, (1.01, 1.05))], change_of([change(SLOWER, 2.0)], [CELL])) == (GOOD, "")


def test_an_instance_is_its_every_mode_unless_the_stored_runs_name_its_winners() -> None:
    modes = [c[2] for c in cells_to_bisect([], ["prefill/llm_rmsnorm"], None)]
    assert modes == ["eager", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]
    with pytest.raises(UsageError, match="not a cell: PRESET/WORKLOAD/MODE"):
        cells_to_bisect(["prefill/llm_rmsnorm"], [], None)
    with pytest.raises(UsageError, match="'fast' is not a mode"):
        cells_to_bisect(["prefill/llm_rmsnorm/fast"], [], None)


# ---------------------------------------------------------------------------------------------------- the flow


def test_the_range_is_the_first_parent_history_and_bad_input_is_one_clear_error(
        repo: tuple[Path, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r, shas = repo
    assert [c.sha for c in first_parents(shas[0], shas[8], r)] == shas
    assert first_parents(shas[3], shas[5], r)[-1] == Commit(shas[5], "commit 5")
    with pytest.raises(UsageError, match="is not an ancestor of bad"):
        first_parents(shas[5], shas[3], r)
    with pytest.raises(UsageError, match="nothing lies between them"):
        first_parents(shas[3], shas[3], r)
    with pytest.raises(UsageError, match="name what to bisect"):
        flow.bisect(BisectRequest(shas[0], shas[8], repo_dir=r), Fake({}), devices=[])
    with pytest.raises(UsageError, match="llm_rmsnorm is not a workload at the good end"):
        flow.bisect(BisectRequest(shas[2], shas[8], [CELL_NAME], repo_dir=r, results_dir=tmp_path), Fake({}),
                    devices=[])
    assert main(["bisect", "--good", "HEAD~1", "--bad", "HEAD", "--cell", "prefill/llm_rmsnorm"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("compile-baselines bisect: error: --cell 'prefill/llm_rmsnorm' is not a cell: "
                   "PRESET/WORKLOAD/MODE, e.g. prefill/llm_rmsnorm/default")


@pytest.mark.slow
def test_bisect_names_the_commit_that_planted_the_change_with_its_evidence(
        repo: tuple[Path, list[str]], tmp_path: Path) -> None:
    r, shas = repo
    fake = Fake(planted(shas, 5, 1.10))
    out = tmp_path / "bisect.md"
    said = bisect(r, shas, tmp_path / "results", fake, out)
    # the first line names the commit, its subject and the evidence in the PR comment's unit, against its parent: a
    # change confirmed, or one round placing it at the bad end's level (a change is confirmed on two rounds)
    assert said.startswith(f"first bad: {shas[5][:8]} 'commit 5': {CELL_NAME} ")
    first = said.splitlines()[0]
    assert re.search(r" (slower|unconfirmed, at the bad end's level): \+", first)
    assert "(95% CI +" in first and "compiles a side" in first and first.endswith("against its parent")
    ratio = float(re.findall(r": \+([\d.]+)%", first)[0])
    assert 7 < ratio < 13  # the planted 10%, measured on constructed noise
    # log2(8) = 3 steps after the first (bad against good), and each step measured the named cell only
    steps = [line for line in said.splitlines() if line.startswith("  step ")]
    assert len(steps) == 1 + math.ceil(math.log2(8))
    assert all(_values(c.argv, "--cell") == [CELL_NAME] for c in fake.calls)
    # every commit measured after good is a run of the bisection's machine in the results directory
    measured = {c.argv[c.argv.index("--commit") + 1] for c in fake.calls} - {shas[0]}
    assert {s[:8] for s in measured} == stored_in_dir(tmp_path / "results", MACHINE)
    section = out.read_text()
    assert section.startswith(f"## {MACHINE}: bisection of {shas[0][:8]}..{shas[8][:8]}\n\nfirst bad: `{shas[5][:8]}`"
                              " 'commit 5'")
    assert "| 1 | " in section and "the change" in section and "**bad**" in section


@pytest.mark.slow
def test_commits_that_cannot_be_measured_are_skipped_and_said_and_the_range_narrowed(
        repo: tuple[Path, list[str]], tmp_path: Path) -> None:
    r, shas = repo
    # planted at commit 3; commit 2 lacks the workload and commit 1's run fails: the first bad is one of 1, 2, 3
    fake = Fake(planted(shas, 3, 0.85), failing=[shas[1]])
    out = tmp_path / "bisect.md"
    said = bisect(r, shas, tmp_path / "results", fake, out)
    suspects = ", ".join(f"{shas[i][:8]} 'commit {i}'" for i in (1, 2, 3))
    assert said.startswith(f"narrowed, the commits between were skipped: the first bad is one of 3 commits after "
                           f"{shas[0][:8]}: {suspects}")
    assert f"skipped {shas[1][:8]}: its run failed (exit 1)" in said
    assert f"skipped {shas[2][:8]}: llm_rmsnorm is not a workload there" in said
    assert not any(c.argv[c.argv.index("--commit") + 1] == shas[2] for c in fake.calls)  # never started
    assert "faster" in said.splitlines()[1]  # the change, either way
    assert "Skipped, as git bisect skips a commit it cannot test:" in out.read_text()


@pytest.mark.slow
def test_no_change_between_good_and_bad_ends_after_one_step(repo: tuple[Path, list[str]], tmp_path: Path) -> None:
    r, shas = repo
    said = bisect(r, shas[3:], tmp_path / "results", Fake({}))
    assert said.startswith(f"no change: {shas[3][:8]} and {shas[8][:8]} measure the same in pairs under torch ")
    assert len([line for line in said.splitlines() if line.startswith("  step ")]) == 1


@pytest.mark.slow
def test_past_the_budget_the_narrowed_range_is_named(repo: tuple[Path, list[str]], tmp_path: Path) -> None:
    r, shas = repo
    # a side's run takes 100 s (a constructed clock), a round 200 s: the range's ends take two (a change is confirmed
    # on two rounds), a later step one, so three steps fit in 800 s, not four
    fake = Fake(planted(shas, 5, 1.10), tick=100.0)
    said = bisect(r, shas, tmp_path / "results", fake, budget=Budget(seconds=800, max_compiles=6))
    assert said.startswith(f"narrowed, past the budget (800 s): the first bad is one of 2 commits after "
                           f"{shas[4][:8]}: {shas[5][:8]} 'commit 5', ")
    assert len([line for line in said.splitlines() if line.startswith("  step ")]) == 3


# ---------------------------------------------------------------------------------------------------- the nightly


def stored_run(results: Path, machine: str, commit: str, torch: str, changes: dict[str, Any]) -> None:
    """A machine's stored run of one commit under `torch`, as a nightly of another day left it: the fake's compiles
    (three of the cell)."""
    argv = run_command_line(commit, [CELL[1]], results, machine, None, [CELL[0]], [CELL_NAME], 3)
    assert Fake(changes, machine=machine, torch=torch).one(Command("night", argv, results)) == 0


@pytest.mark.slow
def test_a_change_torch_made_is_said_to_be_torchs_not_a_commits(repo: tuple[Path, list[str]], tmp_path: Path) -> None:
    r, shas = repo
    results = tmp_path / "results"
    night = "h100-torch-nightly"
    stored_run(results, night, shas[3], "2.12.0.dev20261126", {})
    stored_run(results, night, shas[8], "2.12.0.dev20261127", planted(shas, 8, 1.4))
    out = tmp_path / "bisect.md"
    # the commits, measured in pairs under today's torch, move nothing: the night's change came with torch
    said = bisect(r, shas[3:], results, Fake({}, machine=f"{night}-bisect"), out, cells=[], from_machine=night,
                  machine=None)
    assert said.startswith("no change: ")
    section = out.read_text()
    assert section.startswith(f"## {night}-bisect: bisection of ")
    assert "measured under different torch" in section and "the change came with torch" in section
    assert "moved by **" in section  # the stored runs' attribution
    # nothing moved between two nights: nothing to bisect, and no section
    stored_run(results, night, shas[5], "2.12.0.dev20261127", {})
    said = bisect(r, [shas[3], shas[5]], results, Fake({}), out, cells=[], from_machine=night)
    assert "nothing to bisect" in said and not out.exists()


# ---------------------------------------------------------------------------------------------------- a real bisection

SPIN = '''

def _planted_spin() -> int:
    # PLANTED (tests/test_bisect.py): 10-30 ms of Python arithmetic a call, no sleep, in eager only: unmistakable on
    # a loaded 2-core CPU, where a tiny cell's timings move by tens of percent between processes
    s = 0
    for i in range(200_000):
        s += i * i
    return s
'''


@pytest.fixture(scope="module")
def real_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A copy of this tree's measuring code (tracker, workloads, benchmarks, asv.conf.json) as nine commits: each a
    harmless change of a note, commit 5 also planting an eager slowdown in llm_rmsnorm."""
    r = tmp_path_factory.mktemp("real")
    tracked = git(ROOT, "ls-files", "tracker", "workloads", "benchmarks", "asv.conf.json", "pyproject.toml")
    for name in tracked.splitlines():
        (r / name).parent.mkdir(parents=True, exist_ok=True)
        (r / name).write_bytes((ROOT / name).read_bytes())
    git(r, "init", "-q")
    shas = []
    for i in range(9):
        (r / "NOTES.md").write_text(f"note {i}\n")
        if i == 5:
            llm = r / "workloads" / "llm.py"
            text = llm.read_text()
            body = "    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w\n"
            assert body in text
            llm.write_text(text.replace(body, "    if not torch.compiler.is_compiling():\n        _planted_spin()\n"
                                        + body) + SPIN)
        shas.append(commit_all(r, f"commit {i}" + (": slow down rmsnorm's eager path" if i == 5 else "")))
    return r, shas


@pytest.mark.slow
def test_a_real_bisection_on_the_cpu_names_the_planted_commit(real_repo: tuple[Path, list[str]],
                                                               tmp_path: Path) -> None:
    r, shas = real_repo
    out = tmp_path / "bisect.md"
    stdout = io.StringIO()
    sys_stdout, sys.stdout = sys.stdout, stdout
    try:
        show(flow.bisect(BisectRequest(shas[0], shas[8], ["tiny/llm_rmsnorm/eager"],
                                       results_dir=tmp_path / "results", machine="cpu-bisect", jobs=2,
                                       budget=Budget(seconds=3600, max_compiles=5), out=out, repo_dir=r), devices=[]),
             None, out)
    finally:
        sys.stdout = sys_stdout
    said = stdout.getvalue()
    print(said)
    assert re.match(f"first bad: {shas[5][:8]} 'commit 5: slow down rmsnorm's eager path': "
                    "tiny/llm_rmsnorm/eager (slower|unconfirmed, at the bad end's level): ", said)
    assert stored_in_dir(tmp_path / "results", "cpu-bisect") >= {shas[5][:8], shas[8][:8]}
    assert out.read_text().count("\n| ") >= 4  # the header, its rule and a row a step
