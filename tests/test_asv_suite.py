"""The asv suite and `compile-baselines run` on a CPU: asv itself, real runs of tiny cells, resume, merge."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tracker.measure.hostinfo import host_info
from tracker.store import asvfiles, merge, results

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "tracker.cli"]
FAST = ["--warmup-ms", "5", "--rep-ms", "50"]
BENCH = r"baselines\.Baseline\.track_(latency|compile_time)\('tiny', 'diff_cfg_blend', 'eager'\)"
pytestmark = pytest.mark.slow  # every test here runs asv or `compile-baselines run` end to end


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A HOME of its own (asv's machine file lives there) and the project importable."""
    e = dict(os.environ, HOME=str(tmp_path / "home"), PYTHONPATH=str(ROOT))
    (tmp_path / "home").mkdir()
    return e


def asv_conf(tmp_path: Path) -> Path:
    conf = json.loads((ROOT / "asv.conf.json").read_text())
    conf.update(repo=str(ROOT), benchmark_dir=str(ROOT / "benchmarks"), results_dir=str(tmp_path / "results"),
                html_dir=str(tmp_path / "html"))
    path = tmp_path / "asv.conf.json"
    path.write_text(json.dumps(conf))
    return path


def run_cli(args: list[str], env: dict[str, str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=600, **kw)


def head() -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def cell_files(root: Path) -> list[Path]:
    """Measured cells: MACHINE/COMMIT/TORCH/PRESET/WORKLOAD/MODE.json (beside them, the run's launch floor)."""
    return list(root.glob("*/*/*/*/*/*.json"))


def test_asv_check_passes(tmp_path: Path, env: dict[str, str]) -> None:
    out = subprocess.run([sys.executable, "-m", "asv", "check", "-E", f"existing:{sys.executable}",
                          "--config", str(asv_conf(tmp_path))], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.skipif(not head(), reason="needs the project's git history (asv dates the commit from it)")
def test_plain_asv_run_stores_samples_stats_and_version_keys(tmp_path: Path, env: dict[str, str]) -> None:
    conf = asv_conf(tmp_path)
    env["COMPILE_BASELINES_CELLS"] = str(tmp_path / "cells")
    # the machine file as `compile-baselines run` writes it: asv's fields plus the version keys
    asvfiles.write_machine_file(asvfiles.machine_entry("cpu-box", host_info("cpu").as_dict()),
                                Path(env["HOME"]) / ".asv-machine.json")
    out = subprocess.run([sys.executable, "-m", "asv", "run", "-E", f"existing:{sys.executable}",
                          "--machine", "cpu-box", "--set-commit-hash", head(), "--config", str(conf),
                          "--record-samples", "-b", BENCH],
                         env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    (path,) = (tmp_path / "results" / "cpu-box").glob(f"{head()[:8]}-*.json")
    data = json.loads(path.read_text())
    cols = data["result_columns"]
    row = dict(zip(cols, data["results"]["baselines.Baseline.track_latency"], strict=False))
    idx = [i for i, v in enumerate(row["result"]) if v is not None and v == v]
    assert len(idx) == 1 and len(row["samples"][idx[0]]) >= 5 and row["stats_q_25"][idx[0]] <= row["result"][idx[0]]
    assert data["params"]["torch"] == torch.__version__ and data["params"]["gpu"] == "cpu"
    assert {"driver", "cuda", "triton"} <= set(data["params"])
    # one measurement fed both metrics: the cell store holds exactly that cell
    assert len(cell_files(tmp_path / "cells")) == 1


def test_run_records_cells_with_versions_and_resumes_without_remeasuring(tmp_path: Path, env: dict[str, str]) -> None:
    res, cells = tmp_path / "results", tmp_path / "cells"
    base = ["run", "--results-dir", str(res), "--cells-dir", str(cells), "--machine", "cpu-box", "--mode", "eager",
            "--kernel", "none", *FAST]
    first = run_cli([*base, "--workload", "llm_rmsnorm", "diff_cfg_blend"], env)
    assert first.returncode == 0, first.stderr
    assert "2 cells: 2 ok, 0 failed, 0 skipped" in first.stdout
    stored = sorted(cell_files(cells))
    mtimes = {p: p.stat().st_mtime_ns for p in stored}

    second = run_cli([*base, "--workload", "llm_rmsnorm", "diff_cfg_blend", "rl_dpo_loss"], env)
    assert second.returncode == 0, second.stderr
    assert "(2 already measured" in second.stderr
    assert all(p.stat().st_mtime_ns == t for p, t in mtimes.items())  # finished cells were not measured again

    loaded = results.load_results(res)
    t = loaded.table[loaded.table["status"] != "skipped"]  # asv marks cells it did not run as n/a
    assert loaded.warnings == [] and len(t) == 3 and (t["status"] == "ok").all()
    assert set(t["torch"].astype(str)) == {torch.__version__}
    machine = json.loads((res / "cpu-box" / "machine.json").read_text())
    assert {"gpu", "driver", "cuda", "torch", "triton"} <= set(machine)


def test_an_interrupted_run_resumes_where_it_stopped(tmp_path: Path, env: dict[str, str]) -> None:
    res, cells = tmp_path / "results", tmp_path / "cells"
    args = ["run", "--results-dir", str(res), "--cells-dir", str(cells), "--machine", "cpu-box", "--mode", "eager",
            "--kernel", "none", "--workload", "llm_rmsnorm", "diff_cfg_blend", "rl_dpo_loss", "rl_grpo_loss",
            "--rep-ms", "400"]
    proc = subprocess.Popen([*CLI, *args], env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 300
    while not cell_files(cells) and time.monotonic() < deadline:
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "run again to resume" in err
    done = {p: p.stat().st_mtime_ns for p in cell_files(cells)}
    assert 1 <= len(done) < 4
    assert not list(res.rglob("*.tmp"))  # nothing half-written

    again = run_cli(args, env)
    assert again.returncode == 0, again.stderr
    assert f"({len(done)} already measured" in again.stderr
    assert all(p.stat().st_mtime_ns == t for p, t in done.items())
    assert (results.load_results(res).table["status"] == "ok").sum() == 4


def test_shards_split_the_cells_and_merge_into_one_result_set(tmp_path: Path, env: dict[str, str]) -> None:
    workloads = ["llm_rmsnorm", "diff_cfg_blend", "rl_dpo_loss", "rl_grpo_loss"]
    for i in (1, 2):
        out = run_cli(["run", "--results-dir", str(tmp_path / f"shard{i}"), "--cells-dir", str(tmp_path / "cells"),
                       "--machine", "cpu-box", "--mode", "eager", "--kernel", "none", "--workload", *workloads,
                       "--shard", f"{i}/2",
                       "--commit", head() or "0" * 40, *FAST], env)
        assert out.returncode == 0, out.stderr
    parts = [(results.load_results(tmp_path / f"shard{i}").table["status"] == "ok").sum() for i in (1, 2)]
    assert sorted(parts) == [2, 2]

    merge.merge_results([tmp_path / "shard1", tmp_path / "shard2"], tmp_path / "merged")
    merged = results.load_results(tmp_path / "merged").table
    merged = merged[merged["status"] != "skipped"]
    assert sorted(merged["workload"].astype(str)) == sorted(workloads) and (merged["status"] == "ok").all()

    (f,) = (tmp_path / "shard2" / "cpu-box").glob("*-*.json")
    data = json.loads(f.read_text())
    data["params"]["torch"] = "0.0.1"
    f.write_text(json.dumps(data))
    with pytest.raises(merge.MergeError, match="torch"):
        merge.merge_results([tmp_path / "shard1", tmp_path / "shard2"], tmp_path / "merged2")


def test_compare_confirm_measures_the_heads_moved_cells_again_until_three_compiles(tmp_path: Path,
                                                                                  env: dict[str, str]) -> None:
    # head: a real CPU run; base: its copy under another commit with every time halved (constructed), so that the
    # head's cells have moved beyond any band and are candidates for confirmation
    res, commit = tmp_path / "results", "c" * 40
    run = run_cli(["run", "--results-dir", str(res), "--machine", "cpu-box", "--mode", "eager", "--kernel", "none",
                   "--workload", "diff_cfg_blend", "--commit", commit, "--date", "2026-11-23", *FAST], env)
    assert run.returncode == 0, run.stderr
    head_file = next((res / "cpu-box").glob("cccccccc-*.json"))
    data = json.loads(head_file.read_text())
    cols = data["result_columns"]
    for c in ("result", "stats_ci_99_a", "stats_ci_99_b", "stats_q_25", "stats_q_75"):
        row = data["results"]["baselines.Baseline.track_latency"][cols.index(c)]
        row[:] = [x / 2 if isinstance(x, float) else x for x in row]
    samples = data["results"]["baselines.Baseline.track_latency"][cols.index("samples")]
    samples[:] = [[x / 2 for x in s] if isinstance(s, list) else s for s in samples]
    data["commit_hash"], data["date"] = "b" * 40, data["date"] - 86_400_000
    (res / "cpu-box" / head_file.name.replace("cccccccc", "bbbbbbbb")).write_text(json.dumps(data))

    confirmed = run_cli(["compare", "--results-dir", str(res), "--base", "b" * 8, "--head", commit[:8],
                         "--machine", "cpu-box", "--confirm", "--format", "json"], env)
    assert confirmed.returncode == 0, confirmed.stderr
    assert "1 cell moved; measuring each at head cccccccc in 3 more compiles" in confirmed.stderr
    [cell] = [x for x in json.loads(confirmed.stdout)["cells"] if x["workload"] == "diff_cfg_blend"]
    assert cell["compiles"] == [1, 4]  # the head's cell was measured three times more, in fresh processes
    stored = sorted(p.name for p in (tmp_path / "cells").rglob("tiny/diff_cfg_blend/eager*.json"))
    assert stored == ["eager.json", "eager@2.json", "eager@3.json", "eager@4.json"]
