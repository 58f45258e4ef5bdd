"""Nothing lost, nothing silent: concurrent writers of one results directory, merges of shards, names and paths
given by the user, results directories that cannot be written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tracker.measure.hostinfo import host_info
from tracker.store import results

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "tracker.cli"]
COMMIT = "c" * 40
WORKLOADS = ["llm_rmsnorm", "diff_cfg_blend", "rl_dpo_loss", "rl_grpo_loss"]

# One process recording one measured cell, as `compile-baselines run` does at its end, with the suite's
# description read from benchmarks/baselines.py (no asv discovery subprocess) and a second's pause between
# reading the result file and saving it: without a lock every writer reads the same file and all but the last
# one's cells are lost.
RECORDER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from asv.benchmarks import Benchmarks
    from tracker.paths import ASV_CONF
    from tracker.store import asvfiles, studycsv

    results_dir, workload, host, go, commit = sys.argv[1:]
    host, go = json.loads(host), Path(go)
    conf = asvfiles.load_conf(ASV_CONF, results_dir)
    asvfiles.discover = lambda conf, env, commit: Benchmarks(conf, list(studycsv.suite_benchmarks().values()))
    save = asvfiles.save_results
    def slow_save(*args, **kwargs):
        time.sleep(1.0)
        return save(*args, **kwargs)
    asvfiles.save_results = slow_save
    cell = {"preset": "tiny", "workload": workload, "mode": "eager", "status": "ok", "device": "cpu",
            "samples_ms": [1.0, 1.1, 0.9, 1.05, 0.95], "compile_s": 0.01, "wall_s": 1.0, "host": host}
    while not go.exists():
        time.sleep(0.01)
    asvfiles.record_run(conf, sys.executable, "box", commit, 1_767_225_600_000, [cell], host)
""")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A HOME of its own (asv's machine file lives there) and the project importable."""
    e = dict(os.environ, HOME=str(tmp_path / "home"), PYTHONPATH=str(ROOT))
    (tmp_path / "home").mkdir()
    return e


def test_concurrent_recorders_into_one_results_dir_lose_no_cell(tmp_path: Path, env: dict[str, str]) -> None:
    res, go = tmp_path / "results", tmp_path / "go"
    host = json.dumps(host_info("cpu").as_dict())
    procs = [subprocess.Popen([sys.executable, "-c", RECORDER, str(res), w, host, str(go), COMMIT], env=env,
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for w in WORKLOADS]
    time.sleep(3.0)  # let every process import and wait at the start line
    go.touch()
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    loaded = results.load_results(res)
    ok = loaded.table[loaded.table["status"] == "ok"]
    assert loaded.warnings == [] and sorted(ok["workload"].astype(str)) == sorted(WORKLOADS)
    assert not [p for p in res.rglob("*") if p.name.startswith((".staging-", ".probe-"))]  # nothing left behind
    machines = json.loads((Path(env["HOME"]) / ".asv-machine.json").read_text())
    assert "box" in machines
