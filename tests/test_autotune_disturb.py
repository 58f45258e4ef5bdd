"""tools/autotune_disturb.py reproduces what tests/fixtures/autotune-disturb records: autotuning's choices per condition
of the H200 experiment, the configs of a PR's and a truth run's compiles, and what settling would cost."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = "tests/fixtures/autotune-disturb"
TRUTH = "tests/fixtures/h100-plant-truth"
COMMANDS = (
    ["--summary", f"{FIXTURE}/run1-no-neighbour.jsonl", f"{FIXTURE}/run2-whole-coordesc.jsonl",
     f"{FIXTURE}/run3-settle.jsonl", f"{FIXTURE}/run4-settle-per-choice.jsonl", f"{FIXTURE}/run5-settle50.jsonl",
     f"{FIXTURE}/run6-brief-after50.jsonl", f"{FIXTURE}/run7-after50.jsonl", f"{FIXTURE}/run8-othergpu.jsonl",
     f"{FIXTURE}/run9-othergpu.jsonl"],
    ["--configs", f"{TRUTH}/t12-h200x4-r10/verdict"],
    ["--configs", f"{TRUTH}/t12-h200x2-r13/verdict"],
    ["--configs", f"{TRUTH}/t12-h200"],
    ["--settle-cost", "tests/fixtures/h200-stay/x4-e2/cells"],
    ["--settle-cost", f"{TRUTH}/t12-h200x2-r9/verdict/cells"],
    ["--settle-cost", f"{TRUTH}/t12-h200x2-r9/verdict/cells", "--settle-ms", "20"],
    ["--settle-cost", f"{TRUTH}/t12-h200x2-r9/verdict/cells", "--after-ms", "50"],
    ["--settle-cost", "tests/fixtures/h200-stay/x4-e2/cells", "--after-ms", "50"],
)


def _tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "tools/autotune_disturb.py", *args], cwd=ROOT, capture_output=True,
                          text=True)


def _by_condition(*runs: str) -> dict[str, str]:
    """The summary's line of each condition in these runs (FIXTURE's RUN.jsonl)."""
    out = _tool("--summary", *(f"{FIXTURE}/{run}.jsonl" for run in runs)).stdout
    return {x.split(":")[0].strip(): x for x in out.splitlines() if x.startswith("  ")}


def _on_quiet_config(line: str) -> int:
    return int(m[1]) if (m := re.search(r"f839aaaf2a56 x(\d+)", line)) else 0


def test_the_experiment_s_summary_the_trials_configs_and_the_settle_cost_are_reproduced() -> None:
    out = "".join(_tool(*c).stdout for c in COMMANDS)
    assert out == (ROOT / FIXTURE / "summary.txt").read_text()


def test_beside_a_neighbour_autotuning_left_the_quiet_config_and_settling_brought_it_back() -> None:
    lines = _tool("--summary", f"{FIXTURE}/run3-settle.jsonl").stdout.splitlines()
    quiet = next(x for x in lines if x.strip().startswith("quiet:"))
    assert "configs f839aaaf2a56 x6;" in quiet
    assert "f839aaaf2a56" not in next(x for x in lines if x.strip().startswith("disturbed:"))
    assert all("configs f839aaaf2a56 x5;" in x for x in lines if x.strip().startswith("settle"))


def test_a_settle_of_100_ms_a_choice_kept_the_quiet_config_and_shorter_ones_did_not() -> None:
    by_condition = _by_condition("run4-settle-per-choice", "run5-settle50")
    assert "configs f839aaaf2a56 x4;" in by_condition["wholesettle100"]
    for short in ("wholesettle20", "settle50", "settle20"):
        assert re.search(r"configs (?!f839aaaf2a56 x\d+;)", by_condition[short]), short  # not all on it


def test_brief_holds_left_autotuning_alone_and_settling_only_after_long_ones_mostly_kept_the_quiet_config() -> None:
    for run, expected in (("run6-brief-after50", {"brief": 6, "disturbed": 1, "settle100after50": 5}),
                          ("run7-after50", {"settle100after50": 4, "disturbed": 0})):
        quiet = {how: _on_quiet_config(line) for how, line in _by_condition(run).items()}
        assert quiet == expected, run


def test_a_neighbour_on_the_other_gpu_left_autotuning_alone_where_one_on_the_same_gpu_moved_it() -> None:
    # run 8 named othergpu twice a round, the second reading the first's inductor cache back (its own label since)
    for run, expected in (("run8-othergpu", {"othergpu": (6, 6), "quiet": (6, 6), "disturbed": (1, 5)}),
                          ("run9-othergpu", {"othergpu": (9, 9), "disturbed": (0, 9)})):
        counts = {how: (_on_quiet_config(line), int(re.search(r": (\d+) compiles", line)[1]))  # type: ignore[index]
                  for how, line in _by_condition(run).items() if how in expected}
        assert counts == expected, run


def test_a_file_or_store_that_is_not_there_is_one_line_and_exit_2(tmp_path: Path) -> None:
    for option in ("--summary", "--configs", "--settle-cost"):
        done = _tool(option, str(tmp_path / "none"))
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
        assert done.stderr.startswith("autotune_disturb: ") and str(tmp_path / "none") in done.stderr


def test_a_neighbour_on_another_gpu_needs_two_gpus_and_one_is_one_line_and_exit_2(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    done = _tool("--out", str(tmp_path / "out.jsonl"), "--conditions", "quiet", "othergpu")
    assert done.returncode == 2 and done.stderr == "autotune_disturb: othergpu needs 2 GPUs, this host shows 1\n"
    assert not (tmp_path / "out.jsonl").exists()

