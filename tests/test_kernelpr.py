"""A PR that changes only a kernel under test: the kernels' cells measured in pairs at base and head, the modes' cells
(the baseline) once for both sides, at head or taken from the nightly's run, and the same verdicts as a full
measurement of the same change (`full`: every cell in pairs). A fake `run` writes constructed compiles
(tests/pairedfake.py); the plants are constructed changes of the kernel's cells at their head commit."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from pairedfake import PairedFake
from test_prflow import commit_all, git

from tracker.analyse.attribution import select_workloads
from tracker.analyse.changes import Comparison
from tracker.analyse.compare import compare_runs
from tracker.flows import pr as prflow
from tracker.flows.forge import FileForge
from tracker.flows.pr import PrRequest
from tracker.flows.rounds import KERNEL_ONLY_FIRST, Budget
from tracker.flows.sides import Condenser
from tracker.publish.prcomment import render_comment
from tracker.store import pairing
from tracker.store.cells import CellStore, RunKey, default_cells_dir, torch_version
from workloads.modes import AUTOTUNED_MODES, MODES

ROOT = Path(__file__).resolve().parent.parent
MACHINE = "h100-kpr"
KERNEL_FILE = "workloads/kernels/triton_cfg_blend.py"
TRITON = "kernel:triton_cfg_blend"
PRESETS = ("prefill", "decode")
MODE_CELLS = {(p, "diff_cfg_blend", m) for p in PRESETS for m in MODES}
KERNEL_CELLS = {(p, "diff_cfg_blend", k) for p in PRESETS for k in (TRITON, "kernel:torch_lerp")}
CHANGED = {(p, "diff_cfg_blend", TRITON) for p in PRESETS}  # the kernel of the changed file
BASELINE = MODE_CELLS | KERNEL_CELLS - CHANGED  # the modes and the kernel the change left alone (reference.py)
# Constructed plants of the Triton kernel (its cells are host-bound, ~5 us: a change must pass a quarter launch)
PLANTS: dict[str, dict[tuple[str, str, str], float]] = {
    "slower": {("prefill", "diff_cfg_blend", TRITON): 2.15, ("decode", "diff_cfg_blend", TRITON): 1.35},
    "faster": {("prefill", "diff_cfg_blend", TRITON): 0.6, ("decode", "diff_cfg_blend", TRITON): 0.6},
    "unchanged": {},
}


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A base commit, and one head a plant, each changing only the Triton kernel's module."""
    r = tmp_path_factory.mktemp("krepo")
    git(r, "init", "-q")
    (r / "workloads" / "kernels").mkdir(parents=True)
    (r / "workloads" / "names.py").write_text((ROOT / "workloads" / "names.py").read_text())
    kernel = (ROOT / KERNEL_FILE).read_text()
    (r / KERNEL_FILE).write_text(kernel)
    commits = {"base": commit_all(r, "base")}
    for plant in PLANTS:
        git(r, "checkout", "-q", "--detach", commits["base"])
        (r / KERNEL_FILE).write_text(kernel + f"# plant: {plant}\n")
        commits[plant] = commit_all(r, plant)
    return r, commits


def pr(r: Path, c: dict[str, str], plant: str, where: Path, fake: PairedFake, **kw: Any) -> tuple[Comparison, str]:
    """`pr` of the plant's head against base, its results in `where`; the comparison a later `compare` reads, and
    the comment posted."""
    results, out = where / "results", where / "forge"
    forge = FileForge(out)
    request = PrRequest(c["base"], c[plant], results, jobs=4, machine=MACHINE, presets=PRESETS,
                        budget=Budget(seconds=3600, max_compiles=6), repo_dir=r, **kw)
    prflow.pr(request, forge, fake, devices=[])
    comparison = compare_runs(results, c["base"], c[plant], MACHINE)
    body = (out / "comment.md").read_text()
    assert render_comment(comparison) == body  # what `pr` posted is what `compare` says of what it stored
    return comparison, body


def record_of(where: Path, base: str, head: str) -> pairing.PairedRecord | None:
    return pairing.find(default_cells_dir(where / "results"), MACHINE, torch_version(), base, head)


def kernel_verdicts(c: Comparison) -> dict[tuple[str, str, str], str]:
    return {(k.preset, k.workload, k.kernel): k.verdict for k in c.kernels}


def kernel_cell_verdicts(c: Comparison) -> dict[tuple[str, str, str], str]:
    return {(x.preset, x.workload, x.mode): x.verdict for x in c.cells if x.mode.startswith("kernel:")}


def plant(c: dict[str, str], name: str) -> dict[str, dict[tuple[str, str, str], float]]:
    return {c[name]: PLANTS[name]}


# ---------------------------------------------------------------------------------------------------- what is measured


def test_a_change_of_kernels_alone_is_kernel_only_and_anything_else_is_not() -> None:
    for kernels in (["workloads/kernels/triton_cfg_blend.py", "README.md"], ["workloads/kernels/registry.py"],
                    ["workloads/kernels/new_kernel.py"]):
        assert select_workloads(kernels).kernel_only, kernels
    for other in (["workloads/kernels/triton_cfg_blend.py", "workloads/diffusion.py"],
                  ["workloads/kernels/triton_cfg_blend.py", "tracker/measure/harness.py"],
                  ["workloads/kernels/triton_cfg_blend.py", "pyproject.toml"], ["workloads/llm.py"], ["README.md"]):
        assert not select_workloads(other).kernel_only, other
    # a kernel repository's own kernel module (the files as its registry maps them), and within its scope
    plugin = select_workloads(["mine/kernels.py"], {"mine/workloads.py": ["llm_rmsnorm"]},
                              {"mine/kernels.py": ["llm_rmsnorm"]})
    assert plugin.kernel_only and plugin.within(["llm_rmsnorm"]).kernel_only


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PLANTS))
def test_a_kernel_only_change_measures_the_modes_once_and_judges_as_a_full_measurement(
        repo: tuple[Path, dict[str, str]], tmp_path: Path, name: str) -> None:
    r, c = repo
    fake = PairedFake(MACHINE, plant(c, name))
    quick, body = pr(r, c, name, tmp_path / "quick", fake)
    full, _ = pr(r, c, name, tmp_path / "full", PairedFake(MACHINE, plant(c, name)), full=True)
    assert kernel_verdicts(quick) == kernel_verdicts(full)
    assert kernel_cell_verdicts(quick) == kernel_cell_verdicts(full)
    # (decode's Triton cells of the source run are too disturbed to rank by: its verdict is whatever both paths say)
    expected = {"slower": "lost", "faster": "gained", "unchanged": "same"}[name]
    assert kernel_verdicts(quick)[("prefill", "diff_cfg_blend", "triton_cfg_blend")] == expected
    assert kernel_verdicts(quick)[("prefill", "diff_cfg_blend", "torch_lerp")] == "same"
    # round 1: each side's kernels of the changed file, listed by its own code, five compiles a side (a round of their
    # own costs a side's start again); at head, the baseline alone (the modes and the untouched kernel), in as many
    # compiles as a plain run gives them
    base1, head1, modes1 = fake.calls[:3]
    assert [base1.label, head1.label, modes1.label] == ["base", "head", "head modes"]
    assert base1.argv[1] == head1.argv[1] == modes1.argv[1] == "-c" and "--kernel" not in base1.argv
    assert base1.argv[base1.argv.index("--files") + 1:base1.argv.index("--")] == [KERNEL_FILE]
    assert base1.argv[base1.argv.index("--replicates") + 1] == str(KERNEL_ONLY_FIRST) == "5"
    assert "--replicate-all-modes" in base1.argv
    assert "--baseline" in modes1.argv and "--replicates" not in modes1.argv
    # later rounds: the changed kernel's cells alone, both sides
    later = [cmd.argv[cmd.argv.index("--cell") + 1:cmd.argv.index("--replicates")] for cmd in fake.calls[3:]]
    assert {tuple(x.split("/")) for names in later for x in names} <= CHANGED
    # the baseline's cells: one measurement, at head, recorded at base too and marked so; judged the same
    stores = {s: CellStore(default_cells_dir(tmp_path / "quick" / "results"), RunKey(MACHINE, c[s], torch_version()))
              for s in ("base", name)}
    for cell in BASELINE:
        measured = stores[name].replicates(*cell)
        assert len(measured) == (3 if cell[2] in AUTOTUNED_MODES else 1)
        copies = stores["base"].replicates(*cell)
        assert [x.shared_from for x in copies] == [c[name]] * len(measured)
        assert [x.median_ms for x in copies] == [x.median_ms for x in measured]
    assert {(x.preset, x.workload, x.mode): x.verdict for x in quick.cells if x.mode in MODES} == \
        dict.fromkeys(MODE_CELLS, "same")
    record = record_of(tmp_path / "quick", c["base"], c[name])
    assert record is not None and record.shared is not None and record.shared.source == "head"
    assert {tuple(x.split("/")) for x in record.shared.cells} == BASELINE
    assert {tuple(k.split("/")) for k in record.cells} == CHANGED  # pairs: the changed kernel's alone
    assert "the baseline they are compared with (the modes' cells and the kernels the change did not touch) once " \
        "for both sides, at head" in body
    assert body.count("shared baseline: one measurement for both sides") == len(BASELINE)


def noisy_kernels(cell: tuple[str, str, str]) -> float:
    """Compile-to-compile noise (log) that leaves a kernel's cells undecided after round 1, so later rounds run."""
    return 0.15 if cell[2].startswith("kernel:") else 0.01


def nightly(c: dict[str, str], history: Path, **entry: str) -> None:
    """The nightly's run of the base commit (every mode and kernel of diff_cfg_blend) in `history`."""
    night = PairedFake(MACHINE, entry=entry or None)
    from tracker.flows.sides import Command, run_command_line

    night([Command("night", run_command_line(c["base"], ["diff_cfg_blend"], history, MACHINE, None, PRESETS), ROOT)])


@pytest.mark.slow
def test_a_fresh_nightly_run_is_the_baseline_and_the_comment_says_which_and_how_old(
        repo: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    r, c = repo
    nightly(c, tmp_path / "history")
    fake = PairedFake(MACHINE, plant(c, "slower"))
    quick, body = pr(r, c, "slower", tmp_path / "quick", fake, history=[str(tmp_path / "history")])
    full, _ = pr(r, c, "slower", tmp_path / "full", PairedFake(MACHINE, plant(c, "slower")), full=True)
    assert kernel_verdicts(quick) == kernel_verdicts(full)
    # no mode measured at all: both sides' round 1 their kernels alone, the later rounds (where any is needed) too
    assert [cmd.argv[1] for cmd in fake.calls[:2]] == ["-c", "-c"] and all(x.argv[1] == "-m" for x in fake.calls[2:])
    assert all("--kernel" not in cmd.argv for cmd in fake.calls)
    for s in ("base", "slower"):
        store = CellStore(default_cells_dir(tmp_path / "quick" / "results"), RunKey(MACHINE, c[s], torch_version()))
        assert {(x.preset, x.workload, x.mode) for x in store.all()} == CHANGED
    record = record_of(tmp_path / "quick", c["base"], c["slower"])
    assert record is not None and record.shared is not None
    assert (record.shared.source, record.shared.commit) == ("history", c["base"]) and record.shared.measured
    assert f"the nightly's run of {c['base'][:8]} in {tmp_path / 'history'}" in body
    assert " before this comparison" in body
    nights = {(x.preset, x.workload, x.mode): x.base_ms for x in quick.cells}
    assert all(x.base_ms == x.head_ms == nights[(x.preset, x.workload, x.mode)] for x in quick.cells
               if (x.preset, x.workload, x.mode) in BASELINE)
    assert {tuple(x.split("/")) for x in record.shared.cells} == BASELINE


@pytest.mark.slow
def test_a_nightly_run_of_other_versions_is_not_used_the_modes_are_measured_at_head(
        repo: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    r, c = repo
    nightly(c, tmp_path / "history", driver="0.0.1")
    err = io.StringIO()
    fake = PairedFake(MACHINE, plant(c, "slower"))
    with contextlib.redirect_stderr(err):
        quick, _ = pr(r, c, "slower", tmp_path / "quick", fake, history=[str(tmp_path / "history")])
    assert "was measured with other versions than this host's: measuring the baseline at head" in err.getvalue()
    # where the time went, last: the two calls of measuring (round 1, the baseline at head) and the rest
    assert re.search(r"\Apr: done in \d+ s: measuring \d+ s \(\d+ \+ \d+.*\), judging \d+ s, the rest \d+ s\Z",
                     err.getvalue().splitlines()[-1])
    record = record_of(tmp_path / "quick", c["base"], c["slower"])
    assert record is not None and record.shared is not None and record.shared.source == "head"
    assert kernel_verdicts(quick)[("prefill", "diff_cfg_blend", "triton_cfg_blend")] == "lost"


@pytest.mark.slow
def test_a_nightly_run_of_other_workload_code_is_not_the_baseline(repo: tuple[Path, dict[str, str]],
                                                                   tmp_path: Path) -> None:
    r, c = repo
    history = tmp_path / "history"
    from tracker.flows.sides import Command, run_command_line

    # the night's run is of the faster plant's commit: its kernel differs from the base's, its modes' code does not
    PairedFake(MACHINE)([Command("night", run_command_line(c["faster"], ["diff_cfg_blend"], history, MACHINE, None,
                                                           PRESETS), ROOT)])
    fake = PairedFake(MACHINE, plant(c, "slower"), sd=noisy_kernels)
    pr(r, c, "slower", tmp_path / "quick", fake, history=[str(history)])
    # a kernel's difference keeps the modes' code: the night's run is the baseline, no mode is measured
    assert [cmd.label for cmd in fake.calls[:2]] == ["base", "head"]
    assert "head modes" not in [cmd.label for cmd in fake.calls]
    other = tmp_path / "other"
    (other / MACHINE).mkdir(parents=True)
    for f in (history / MACHINE).iterdir():  # the same run, of a commit this repository does not have
        data = json.loads(f.read_text())
        if f.name != "machine.json":
            data["commit_hash"] = "f" * 40
            f = f.with_name("ffffffff-" + f.name.split("-", 1)[1])
        (other / MACHINE / f.name).write_text(json.dumps(data))
    fake = PairedFake(MACHINE, plant(c, "slower"))
    pr(r, c, "slower", tmp_path / "quick2", fake, history=[str(other)])
    assert [cmd.label for cmd in fake.calls[:3]] == ["base", "head", "head modes"]  # measured at head


def test_a_side_lists_its_own_kernels_of_the_workloads_and_presets_named_or_says_it_cannot() -> None:
    from tracker.flows import kernelrun

    run = ["run", "--commit", "c" * 40, "--workload", "diff_cfg_blend", "llm_qk_norm", "--preset", "prefill", "decode",
           "--replicates", "3", "--replicate-all-modes"]
    assert sorted(kernelrun.kernel_cells(run) or []) == sorted(f"{p}/{w}/{m}" for p, w, m in KERNEL_CELLS)
    assert kernelrun.kernel_cells([*run[:3], "--workload", "llm_qk_norm", "--preset", "prefill"]) == []
    assert kernelrun.kernel_cells(run[:6]) is None  # no preset named: the side's defaults are not asked
    assert kernelrun.main([*run[:3], "--workload", "llm_qk_norm", "--preset", "prefill"]) == 0  # nothing to measure


def test_a_side_pairs_the_kernels_of_the_changed_files_and_measures_the_others_once_with_the_modes(
        tmp_path: Path) -> None:
    from tracker.flows import kernelrun

    run = ["run", "--commit", "c" * 40, "--workload", "diff_cfg_blend", "--preset", "prefill", "decode",
           "--replicates", "3", "--replicate-all-modes"]
    cells = lambda names: {tuple(x.split("/")) for x in names or ()}  # noqa: E731
    assert cells(kernelrun.kernel_cells(run, [KERNEL_FILE])) == CHANGED
    assert cells(kernelrun.kernel_cells(run, [KERNEL_FILE], changed=False)) == KERNEL_CELLS - CHANGED
    assert cells(kernelrun.kernel_cells(run, None)) == KERNEL_CELLS  # the registry changed: every kernel
    paired = kernelrun.command(["--files", KERNEL_FILE, "--", *run])
    assert paired is not None and cells(paired[paired.index("--cell") + 1:]) == CHANGED
    # the baseline at head: the modes' run, the untouched kernel beside them, listed for the flow to share
    modes = ["run", "--commit", "c" * 40, "--workload", "diff_cfg_blend", "--kernel", "none", "--preset", "prefill"]
    record = tmp_path / "record.txt"
    line = kernelrun.command(["--files", KERNEL_FILE, "--baseline", str(record), "--", *modes])
    assert line is not None and line[line.index("--kernel") + 1:line.index("--preset")] == ["diff_cfg_blend:torch_lerp"]
    assert record.read_text().split() == ["prefill/diff_cfg_blend/kernel:torch_lerp"]
    line = kernelrun.command(["--baseline", str(record), "--", *modes])  # every kernel changed: none is a baseline
    assert line is not None and line[line.index("--kernel") + 1] == "none" and record.read_text() == ""


# ---------------------------------------------------------------------------------------------------- the record


def test_a_paired_record_of_format_1_reads_with_no_shared_baseline_and_today_s_keeps_it() -> None:
    commit = "a" * 40
    old = {"format": 1, "machine": "m", "torch": "2.11.0", "base": commit, "head": "b" * 40,
           "cells": {"prefill/w/default": [{"round": 1, "base_ms": 1.0, "head_ms": 1.1}]}}
    record = pairing.from_json(old)
    assert record.shared is None and record.pairs(("prefill", "w", "default"))[0].head_ms == 1.1
    shared = pairing.SharedBaseline(("prefill/w/eager",), commit, "history", "2026-11-27T03:00:00Z", "/h")
    again = pairing.from_json(json.loads(json.dumps(pairing.PairedRecord(**{**record.__dict__, "shared": shared})
                                                    .to_json())))
    assert again.shared == shared and again.shared.holds(("prefill", "w", "eager")) and again == \
        pairing.PairedRecord(**{**record.__dict__, "shared": shared})
    assert pairing.PairedRecord(**{**record.__dict__, "shared": shared}).to_json()["format"] == pairing.FORMAT == 7
    with pytest.raises(pairing.PairingError, match="damaged paired record"):
        pairing.from_json({**old, "format": 2, "shared": {"cells": "prefill/w/eager", "commit": commit}})
    with pytest.raises(pairing.PairingError, match="format 8 is newer"):
        pairing.from_json({**old, "format": 8})


# ---------------------------------------------------------------------------------------------------- stderr


OLD_RUN = """run: commit 0123456789ab, machine h100, device cuda, presets prefill, decode
14 cells (0 already measured for this commit, machine and torch): 14 measurements to make, 8 at a time
[ 1/14] prefill diff_cfg_blend eager: ok 0.0108 ms, compile 0.0 s | 0 failed | 3s elapsed, ETA 40s
[ 2/14] prefill diff_cfg_blend default: failed out of memory | 1 failed | 5s elapsed, ETA 30s
GPU lock held 9 s of 20 s (45%), 0.64 s a cell

14 cells: 13 ok, 1 failed, 0 skipped in 20 s; results: .asv/results/h100/01234567-existing.json
  failed: prefill diff_cfg_blend default: out of memory

Best mode by preset
prefill  diff_cfg_blend  max-autotune-no-cudagraphs  1.12x
"""


def test_pr_shows_each_runs_progress_and_outcome_not_the_summary_an_older_run_prints() -> None:
    out = io.StringIO()
    shown = Condenser("base", out)
    for line in OLD_RUN.splitlines(keepends=True):
        shown.feed(line)
    lines = out.getvalue().splitlines()
    assert all(x.startswith("base | ") for x in lines)
    assert [x.removeprefix("base | ")[:8] for x in lines] == ["14 cells", "[ 1/14] ", "[ 2/14] ", "14 cells",
                                                              "  failed"]
    assert "Best mode" not in out.getvalue() and "run: commit" not in out.getvalue()
    shown.show_held()  # the run failed: its log tells why
    assert "Best mode by preset" in out.getvalue() and "run: commit 0123456789ab" in out.getvalue()
