"""merge is idempotent: the same input merged again (a retried CI step) gives the same files, byte for byte, whatever
the order of disjoint shards; a directory merged into itself is refused; what a killed writer left in the results
tree is swept by the next writer. On real results (tests/fixtures/h100-aa2) and hand-made shards."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_results import write_result_file

from tracker import cli
from tracker.measure.cellresult import CellResult
from tracker.store import asvfiles, merge, results
from tracker.store.cells import CellStore, RunKey, default_cells_dir

ROOT = Path(__file__).resolve().parent.parent
AA2 = ROOT / "tests" / "fixtures" / "h100-aa2" / "results"
COMMIT = "c" * 40
X, Y, Z = ("prefill", "llm_rmsnorm", "eager"), ("prefill", "llm_rmsnorm", "default"), ("decode", "rl_dpo_loss", "eager")


def files(results_dir: Path) -> dict[str, bytes]:
    """Every file of a results directory with its bytes (hidden scratch files included: there must be none)."""
    return {str(p.relative_to(results_dir)): p.read_bytes() for p in sorted(results_dir.rglob("*")) if p.is_file()}


def medians(results_dir: Path) -> dict[tuple[str, ...], float]:
    t = results.load_results(results_dir).table
    t = t[t["status"] == "ok"]
    return {(str(r.machine), str(r.preset), str(r.workload), str(r.mode)): float(r.median_ms) for r in t.itertuples()}


@pytest.fixture(scope="module")
def aa2_merged_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("once") / "results"
    merge.merge_results([AA2], dest, cells_dirs=[])
    return dest


def test_a_real_run_merged_into_an_empty_directory_keeps_every_value_exactly(aa2_merged_once: Path) -> None:
    for name in ("h100-c", "h100-d"):
        (source,) = (AA2 / name).glob("759ff183-*.json")
        assert json.loads((aa2_merged_once / name / source.name).read_text()) == json.loads(source.read_text())
    assert medians(aa2_merged_once) == medians(AA2)


@pytest.mark.parametrize("times", [2, 3])
def test_merging_the_same_real_shard_again_changes_no_byte(aa2_merged_once: Path, tmp_path: Path,
                                                            times: int) -> None:
    dest = tmp_path / "results"
    shutil.copytree(aa2_merged_once, dest)
    for _ in range(times - 1):
        merge.merge_results([AA2], dest, cells_dirs=[])
    assert files(dest) == files(aa2_merged_once)


def _shards(root: Path) -> list[Path]:
    """Three shards of one run: disjoint cells, and one cell that one shard measured and another failed."""
    write_result_file(root / "a", {X: {"median": 0.5, "samples": [0.49, 0.5, 0.51]}, Y: None},
                      machine="box", commit=COMMIT)
    write_result_file(root / "b", {Y: {"median": 0.25, "samples": [0.24, 0.25, 0.26]}}, machine="box", commit=COMMIT)
    write_result_file(root / "c", {Z: 1.5, X: None}, machine="box", commit=COMMIT, launch_us=None)
    return [root / "a", root / "b", root / "c"]


def test_shards_merged_in_any_order_and_retried_give_the_same_files(tmp_path: Path) -> None:
    shards = _shards(tmp_path)
    first = tmp_path / "first"
    merge.merge_results(shards, first)
    expected = files(first)
    for k, order in enumerate(itertools.permutations(shards)):
        dest = tmp_path / f"order{k}"
        merge.merge_results(list(order), dest)
        assert files(dest) == expected, order
        for retry in ([order[0]], list(order), [order[-1], order[0]]):
            merge.merge_results(retry, dest)
            assert files(dest) == expected, (order, retry)
    assert medians(first) == {("box", *X): 0.5, ("box", *Y): 0.25, ("box", *Z): 1.5}


def test_a_shard_s_launch_floor_survives_a_merge(tmp_path: Path) -> None:
    shards = _shards(tmp_path)
    merge.merge_results(shards, tmp_path / "m")
    (merged,) = (tmp_path / "m" / "box").glob("*-existing-*.json")
    row = json.loads(merged.read_text())["results"]["baselines.Host.track_launch_overhead"]
    assert row[0] == [6.0]  # a value, not asv's True for "has samples"


@pytest.mark.parametrize("how", ["same path", "trailing slash", "symlink"])
def test_a_directory_merged_into_itself_is_refused_and_left_alone(tmp_path: Path, how: str,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    dest = tmp_path / "results"
    shutil.copytree(AA2, dest)
    before = files(dest)
    source = {"same path": str(dest), "trailing slash": f"{dest}/", "symlink": str(tmp_path / "link")}[how]
    if how == "symlink":
        (tmp_path / "link").symlink_to(dest)
    assert cli.main(["merge", str(tmp_path / "elsewhere"), source, "--results-dir", str(dest)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is the destination itself" in err and "nothing was merged" in err
    assert files(dest) == before


def test_every_replicate_of_a_shard_s_cells_comes_along(tmp_path: Path) -> None:
    (src := tmp_path / "s" / "results").mkdir(parents=True)
    write_result_file(src, {X: 0.5}, machine="box", commit=COMMIT)
    store = CellStore(default_cells_dir(src), RunKey("box", COMMIT, "2.9.1"))
    for r in (1, 2, 3):
        store.put(CellResult.from_json(
            {"preset": X[0], "workload": X[1], "mode": X[2], "status": "failed", "reason": f"compile {r}",
                   "replicate": r}))
    for _ in range(2):
        merge.merge_results([src], tmp_path / "m" / "results")
    dest = CellStore(default_cells_dir(tmp_path / "m" / "results"), RunKey("box", COMMIT, "2.9.1"))
    assert [c.reason for c in dest.replicates(*X)] == ["compile 1", "compile 2", "compile 3"]


_KILLED_SAVE = """
import os, signal, sys
from pathlib import Path
from tracker.store import merge
real = os.replace
def replace(src, dst, *a, **k):
    if ".staging-" in str(src):
        os.kill(os.getpid(), signal.SIGKILL)
    return real(src, dst, *a, **k)
os.replace = replace
merge.merge_results([Path(sys.argv[1])], Path(sys.argv[2]))
"""


@pytest.mark.parametrize("later", ["merge", "another writer"])
def test_a_writer_killed_mid_save_leaves_scratch_the_next_writer_sweeps(tmp_path: Path, later: str) -> None:
    shards = _shards(tmp_path)
    dest = tmp_path / "dest"
    killed = subprocess.run([sys.executable, "-c", _KILLED_SAVE, str(shards[0]), str(dest)], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()
    assert list(dest.glob("*/.staging-*"))  # a full copy of the result file, inside the committed tree
    (dest / ".probe-left").write_text("")
    (dest / ".benchmarks.json.x1.tmp").write_text("{")
    if later == "merge":
        merge.merge_results(shards, dest)
    else:
        loaded = merge._load(next((shards[1] / "box").glob("*-existing-*.json")))
        with asvfiles.results_lock(dest):
            asvfiles.save_results(type("Conf", (), {"results_dir": str(dest)})(), loaded, {"machine": "box"})
    assert not [p for p in dest.rglob("*") if p.name.startswith(".")]
