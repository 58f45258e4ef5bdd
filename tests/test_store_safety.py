"""Nothing lost, nothing silent: concurrent writers of one results directory, merges of shards, names and paths
given by the user, results directories that cannot be written."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from test_results import write_result_file

from tracker.measure.cellresult import CellResult
from tracker.measure.hostinfo import host_info
from tracker.runner.config import RunConfig
from tracker.runner.plan import CellId
from tracker.runner.suite import run_suite
from tracker.store import asvfiles, merge, results
from tracker.store.cells import CellStore, RunKey, default_cells_dir

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
    from tracker.measure.cellresult import CellResult
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
    asvfiles.record_run(conf, sys.executable, "box", commit, 1_767_225_600_000, [CellResult.from_json(cell)], host)
""")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A HOME of its own (asv's machine file lives there) and the project importable."""
    e = dict(os.environ, HOME=str(tmp_path / "home"), PYTHONPATH=str(ROOT))
    (tmp_path / "home").mkdir()
    return e


@pytest.mark.slow
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
    assert not [p for p in res.rglob("*") if p.name.startswith(".")]  # no staging, probe or lock file left behind
    machines = json.loads((Path(env["HOME"]) / ".asv-machine.json").read_text())
    assert "box" in machines


# ---------------------------------------------------------------------------------------------------- merge

CELL = ("tiny", "llm_rmsnorm", "eager")


def _shard(root: Path, value: Any, **kw: Any) -> Path:
    return write_result_file(root, {CELL: value}, machine="box", commit=COMMIT, **kw)


def _status(results_dir: Path) -> tuple[str, float]:
    t = results.load_results(results_dir).table
    row = t[(t["workload"] == CELL[1]) & (t["mode"] == CELL[2])].iloc[0]
    return str(row["status"]), float(row["median_ms"])


@pytest.mark.parametrize("order", ["ok-first", "failed-first"])
def test_merge_keeps_a_measurement_over_a_failure_whatever_the_order(tmp_path: Path, order: str) -> None:
    _shard(tmp_path / "ok", 1.5)
    _shard(tmp_path / "failed", None)
    sources = [tmp_path / "ok", tmp_path / "failed"]
    merge.merge_results(sources if order == "ok-first" else sources[::-1], tmp_path / "merged")
    assert _status(tmp_path / "merged") == ("ok", 1.5)
    # and a failed shard merged later into a destination that has the measurement does not replace it
    merge.merge_results([tmp_path / "failed"], tmp_path / "merged")
    assert _status(tmp_path / "merged") == ("ok", 1.5)


def test_merge_carries_failure_reasons_from_the_shards_cell_stores(tmp_path: Path) -> None:
    _shard(tmp_path / "s1" / "results", None)
    _shard(tmp_path / "s2" / "results", math.nan)
    torch = "2.9.1"
    CellStore(default_cells_dir(tmp_path / "s1" / "results"), RunKey("box", COMMIT, torch)).put(
        CellResult.from_json({"preset": CELL[0], "workload": CELL[1], "mode": CELL[2], "status": "failed",
                              "reason": "out of memory: 3 GiB"}))
    merge.merge_results([tmp_path / "s1" / "results", tmp_path / "s2" / "results"], tmp_path / "m" / "results")
    t = results.load_results(tmp_path / "m" / "results").table
    row = t[(t["workload"] == CELL[1]) & (t["mode"] == CELL[2])].iloc[0]
    assert row["status"] == "failed" and row["reason"] == "out of memory: 3 GiB"


def test_merge_checks_everything_before_writing_anything(tmp_path: Path) -> None:
    write_result_file(tmp_path / "s1", {CELL: 1.0}, machine="aaa", commit=COMMIT)
    write_result_file(tmp_path / "s1", {CELL: 1.0}, machine="zzz", commit=COMMIT)
    (tmp_path / "s2" / "zzz").mkdir(parents=True)
    bad = write_result_file(tmp_path / "s2", {CELL: 2.0}, machine="zzz", commit=COMMIT)
    bad.write_text("{ truncated")
    with pytest.raises(merge.MergeError, match="nothing was merged"):
        merge.merge_results([tmp_path / "s1", tmp_path / "s2"], tmp_path / "merged")
    assert not list((tmp_path / "merged").rglob("*.json"))  # not even machine aaa, which sorts first


def test_merge_refuses_a_machine_json_that_disagrees_with_its_result_files(tmp_path: Path) -> None:
    path = _shard(tmp_path / "s1", 1.0)
    (path.parent / "machine.json").write_text(json.dumps({"machine": "box", "torch": "2.10.0", "version": 1}))
    with pytest.raises(merge.MergeError, match=r"machine\.json says torch 2\.10\.0"):
        merge.merge_results([tmp_path / "s1"], tmp_path / "merged")
    assert not (tmp_path / "merged").exists() or not list((tmp_path / "merged").rglob("*.json"))


def test_merged_machine_json_agrees_with_the_results(tmp_path: Path) -> None:
    path = _shard(tmp_path / "s1", 1.0)
    entry = {"machine": "box", "os": "Linux", "gpu": "NVIDIA H100 80GB HBM3", "torch": "2.9.1", "triton": "3.5.1",
             "cuda": "13.0", "driver": "580.1", "version": 1}
    (path.parent / "machine.json").write_text(json.dumps(entry))
    _shard(tmp_path / "s2", 2.0)  # no machine.json: its result file's machine fields serve
    (tmp_path / "s2" / "box" / "machine.json").unlink()
    merge.merge_results([tmp_path / "s1", tmp_path / "s2"], tmp_path / "merged")
    written = json.loads((tmp_path / "merged" / "box" / "machine.json").read_text())
    assert {k: written[k] for k in asvfiles.VERSION_KEYS} == {k: entry[k] for k in asvfiles.VERSION_KEYS}


# ---------------------------------------------------------------------------------------------------- the CLI


def run_cli(args: list[str], env: dict[str, str], cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=600)


def one_line_error(out: subprocess.CompletedProcess[str]) -> str:
    """The command failed with one error line on stderr, no traceback, and measured nothing."""
    lines = [line for line in out.stderr.splitlines() if "error:" in line]
    assert out.returncode not in (0, None) and len(lines) == 1, out.stderr
    assert "Traceback" not in out.stderr and "[1/" not in out.stderr, out.stderr
    return lines[0]


RUN = ["run", "--preset", "tiny", "--workload", "diff_cfg_blend", "--mode", "eager", "--kernel", "none",
       "--warmup-ms", "5", "--rep-ms", "50", "--commit", COMMIT]


@pytest.mark.parametrize("name", ["../../outside", *(pytest.param(n, marks=pytest.mark.slow)  # a CLI process each
                                                     for n in ("..", ".hidden", "a/b", ""))])
def test_run_refuses_a_machine_name_that_is_not_one_folder_before_measuring(tmp_path: Path, env: dict[str, str],
                                                                             name: str) -> None:
    out = run_cli([*RUN, "--results-dir", str(tmp_path / "r" / "results"), "--machine", name], env)
    assert "machine name" in one_line_error(out)
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]  # nothing written, inside or outside


@pytest.mark.slow
def test_run_refuses_a_commit_that_is_not_a_hash(tmp_path: Path, env: dict[str, str]) -> None:
    out = run_cli([*RUN[:-1], "../../x", "--results-dir", str(tmp_path / "results"), "--machine", "box"], env)
    assert "not a hexadecimal git hash" in one_line_error(out)


@pytest.mark.slow
def test_run_and_merge_into_a_file_in_place_of_the_results_dir_refuse_in_one_line(tmp_path: Path,
                                                                                  env: dict[str, str]) -> None:
    blocker = tmp_path / "results"
    blocker.write_text("not a directory")
    out = run_cli([*RUN, "--results-dir", str(blocker / "sub"), "--machine", "box"], env)
    assert "cannot write" in one_line_error(out)
    _shard(tmp_path / "shard", 1.0)
    out = run_cli(["merge", str(tmp_path / "shard"), "--results-dir", str(blocker)], env)
    assert "cannot write" in one_line_error(out)
    assert blocker.read_text() == "not a directory"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_run_and_merge_into_a_read_only_results_dir_refuse_in_one_line(tmp_path: Path, env: dict[str, str]) -> None:
    ro = tmp_path / "results"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        assert "cannot write" in one_line_error(run_cli([*RUN, "--results-dir", str(ro), "--machine", "box"], env))
        _shard(tmp_path / "shard", 1.0)
        out = run_cli(["merge", str(tmp_path / "shard"), "--results-dir", str(ro)], env)
        assert "cannot write" in one_line_error(out)
        assert list(ro.iterdir()) == []
    finally:
        ro.chmod(0o755)


def test_save_into_an_unwritable_place_is_one_error_and_leaves_nothing_behind(tmp_path: Path) -> None:
    path = _shard(tmp_path / "src", 1.0)
    from asv.results import Results

    loaded = Results.load(str(path))
    (tmp_path / "dest").mkdir()
    (tmp_path / "dest" / "box").write_text("a file where the machine's folder goes")
    conf = type("Conf", (), {"results_dir": str(tmp_path / "dest")})()
    with pytest.raises(asvfiles.AsvError, match="cannot write results"):
        asvfiles.save_results(conf, loaded, {"machine": "box"})
    assert sorted(p.name for p in (tmp_path / "dest").iterdir()) == ["box"]


@pytest.mark.slow
def test_run_from_another_directory_with_relative_paths_records_where_it_was_told(tmp_path: Path,
                                                                                  env: dict[str, str]) -> None:
    out = run_cli([*RUN, "--results-dir", "res", "--cells-dir", "cells", "--machine", "box"], env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "1 cells: 1 ok" in out.stdout
    assert len(list((tmp_path / "cells").glob("box/*/*/tiny/diff_cfg_blend/eager.json"))) == 1
    t = results.load_results(tmp_path / "res").table
    assert (t["status"] == "ok").sum() == 1 and (tmp_path / "res" / "benchmarks.json").exists()


def test_the_config_s_relative_paths_are_resolved_against_its_folder(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    conf = asvfiles.load_conf(ROOT / "asv.conf.json")
    assert conf.benchmark_dir == str(ROOT / "benchmarks") and conf.results_dir == str(ROOT / ".asv" / "results")
    assert conf.html_dir == str(ROOT / ".asv" / "html") and Path(conf.repo) == ROOT



def test_asv_discovery_imports_the_suite_from_its_checkout_installed_or_not(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # asv's discovery process drops PYTHONPATH and takes ASV_PYTHONPATH: the checkout must be on it, ahead of what
    # the user put there, and only while asv discovers
    from asv.benchmarks import Benchmarks

    seen: list[str | None] = []
    monkeypatch.setattr(Benchmarks, "discover", staticmethod(lambda *a: seen.append(os.environ.get("ASV_PYTHONPATH"))))
    monkeypatch.setenv("ASV_PYTHONPATH", "/site")
    asvfiles.discover(asvfiles.load_conf(ROOT / "asv.conf.json", str(tmp_path)), None, COMMIT)
    assert seen == [os.pathsep.join([str(ROOT), "/site"])] and os.environ["ASV_PYTHONPATH"] == "/site"
    monkeypatch.delenv("ASV_PYTHONPATH")
    asvfiles.discover(asvfiles.load_conf(ROOT / "asv.conf.json", str(tmp_path)), None, COMMIT)
    assert seen[-1] == str(ROOT) and "ASV_PYTHONPATH" not in os.environ


@pytest.mark.slow
@pytest.mark.parametrize("timing_cores_kept_free", [False, True])
def test_a_run_whose_environment_cannot_discover_the_suite_fails_in_seconds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, timing_cores_kept_free: bool) -> None:
    # on the H100 such a run measured for 874 s and failed at the end, in asv's discovery. A host that keeps its timing
    # cores free discovers beside the measuring, whose loop looks at it every second; any other discovers first.
    from tracker.runner import suite

    def broken(conf: object, env: object, commit: str) -> None:
        raise asvfiles.AsvError("asv benchmark discovery failed: No module named 'tracker'")

    monkeypatch.setattr(asvfiles, "discover", broken)
    if timing_cores_kept_free:
        monkeypatch.setattr(suite, "timing_cpus", lambda cfg, slot=0: [0])
    cfg = RunConfig(store_root=tmp_path / "cells", machine="box", commit=COMMIT, device="cpu")
    conf = asvfiles.load_conf(ROOT / "asv.conf.json", str(tmp_path / "results"))
    cells = [CellId("tiny", "diff_cfg_blend", m) for m in ("eager", "default", "reduce-overhead", "max-autotune")]
    with pytest.raises(asvfiles.AsvError, match="discovery failed"):
        run_suite(cells, cfg, conf, 1_767_225_600_000)
    measured = len(list((tmp_path / "cells").rglob("*.json")))
    assert measured < len(cells) if timing_cores_kept_free else measured == 0
    assert not list((tmp_path / "results").rglob("*.json"))

# ---------------------------------------------------------------------------------------------------- the cell store


@pytest.mark.parametrize("machine,commit,preset,workload", [
    ("..", "c", "tiny", "llm_rmsnorm"), ("m", "..", "tiny", "llm_rmsnorm"), (".", ".", "tiny", "llm_rmsnorm"),
    ("../..", "x/../../y", "tiny", "llm_rmsnorm"), ("m", "c", "../../..", ".."), ("m", "c", "/etc", "a/../../b"),
    ("m" * 1_000_000, "c" * 300, "p" * 300, "w\x1b" * 200),  # a result file's names, written by hand
])
def test_cell_store_paths_stay_inside_the_store_whatever_the_names(tmp_path: Path, machine: str, commit: str,
                                                                   preset: str, workload: str) -> None:
    root = tmp_path / "cells"
    store = CellStore(root, RunKey(machine, commit, ".."))
    record = {"preset": preset, "workload": workload, "mode": "..", "status": "skipped", "reason": "a test"}
    if "/" in preset + workload or not preset.strip(".") or not workload.strip("."):
        # a preset or workload that is not one folder's name is no cell's: refused, nothing written
        with pytest.raises(ValueError, match="does not name a folder of the cell store"):
            store.put(CellResult.from_json(record))
        assert not [p for p in tmp_path.rglob("*") if p.is_file()]
        return
    store.put(CellResult.from_json(record))
    store.set_launch_floor(3.0)
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert written and all(root in p.parents for p in written)
    assert store.get(preset, workload, "..") is not None
    assert CellStore.of_run(root, RunKey(machine, commit, "..")) is not None  # found again, no name too long


def test_long_names_stay_apart_in_the_store(tmp_path: Path) -> None:
    a, b = (CellStore(tmp_path, RunKey("m" * 200 + end, "c", "t")) for end in "ab")
    assert a.dir != b.dir and all(len(part) <= 100 for part in a.dir.relative_to(tmp_path).parts)
    assert CellStore(tmp_path, RunKey("h100-smoke", "c", "2.11.0")).dir == tmp_path / "h100-smoke/c/torch-2.11.0"


def test_the_first_launch_floor_of_a_run_stands(tmp_path: Path) -> None:
    store = CellStore(tmp_path, RunKey("m", COMMIT, "2.11.0"))
    assert store.set_launch_floor(4.4) == 4.4
    assert store.set_launch_floor(9.9) == 4.4 and store.launch_floor() == 4.4  # a concurrent cell's comes second


CONCURRENT_FLOOR = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from tracker.store.cells import CellStore, RunKey
    root, value, go = sys.argv[1], float(sys.argv[2]), Path(sys.argv[3])
    store = CellStore(root, RunKey("m", "c", "t"))
    read = CellStore.launch_floor
    def slow_read(self):
        got = read(self)
        time.sleep(0.5)
        return got
    CellStore.launch_floor = slow_read
    while not go.exists():
        time.sleep(0.01)
    print(store.set_launch_floor(value))
""")


@pytest.mark.slow
def test_concurrent_cells_agree_on_one_launch_floor(tmp_path: Path, env: dict[str, str]) -> None:
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", CONCURRENT_FLOOR, str(tmp_path / "cells"), str(v), str(go)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for v in (1.0, 2.0, 3.0)]
    time.sleep(1.5)
    go.touch()
    outs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    got = {out.strip() for out, _ in outs}
    assert len(got) == 1 and got <= {"1.0", "2.0", "3.0"}  # every cell got the one floor that stands
    assert CellStore(tmp_path / "cells", RunKey("m", "c", "t")).launch_floor() == float(got.pop())


def test_the_cell_store_is_named_by_torch_s_own_version_string(tmp_path, monkeypatch):
    # Some builds' package metadata says 2.11.0 where torch.__version__ (what the results record) is 2.11.0+cu130.
    import importlib.util
    import types

    from tracker.store import cells

    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "version.py").write_text("__all__ = ['__version__']\n__version__ = '2.11.0+cu130'\n")
    spec = types.SimpleNamespace(submodule_search_locations=[str(tmp_path / "torch")])
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: spec if name == "torch" else None)
    assert cells.torch_version() == "2.11.0+cu130"
    older = cells.CellStore(tmp_path / "cells", cells.RunKey("m", "a" * 40, "2.11.0"))
    older.put(CellResult.from_json({"preset": "tiny", "workload": "llm_rmsnorm", "mode": "eager", "status": "ok"}))
    found = cells.CellStore.of_run(tmp_path / "cells", cells.RunKey("m", "a" * 40, "2.11.0+cu130"))
    assert found is not None and found.dir == older.dir  # a store written under the metadata's name
    assert cells.CellStore.of_run(tmp_path / "cells", cells.RunKey("m", "b" * 40, "2.11.0+cu130")) is None


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o077], ids=["022", "027", "077"])
def test_atomic_writes_get_the_permissions_a_plain_write_gets(tmp_path: Path, umask: int) -> None:
    """A report, a result file or a cell written atomically is as readable as one `open` writes (asv's own files are
    0644 under the usual umask), not private to its writer because of the temporary file it started as."""
    from tracker.store import atomic

    old = os.umask(umask)
    try:
        (tmp_path / "plain.html").write_text("plain")
        atomic.write_text(tmp_path / "atomic.html", "atomic")
        atomic.write_json(tmp_path / "atomic.json", {})
    finally:
        os.umask(old)
    modes = {p.name: p.stat().st_mode & 0o777 for p in tmp_path.iterdir()}
    assert modes == dict.fromkeys(["plain.html", "atomic.html", "atomic.json"], 0o666 & ~umask)


def test_points_a_grown_grid_adds_are_recorded_as_not_run_never_as_failed() -> None:
    """A plugin that declares one more preset (or a second plugin installed) grows its benchmarks' grid; asv would fill
    the new points of a run's existing result file with null, its mark of a failure. They are not run: NaN."""
    from asv.results import Results

    from tracker import metrics

    def benchmarks(presets: list[str]) -> dict[str, dict[str, Any]]:
        grid = [[repr(p) for p in presets], ["'ns.op'"], ["'eager'", "'default'"]]
        return {name: {"name": name, "version": "1", "params": grid}
                for name in metrics.benchmark_names(asvfiles.PLUGIN_CLASS).values()}

    def cell(mode: str) -> dict[str, Any]:
        return {"preset": "tiny", "workload": "ns.op", "mode": mode, "status": "ok", "device": "cpu",
                "samples_ms": [1.0, 1.1, 0.9], "compile_s": 0.01, "wall_s": 1.0}

    run = Results({"machine": "box"}, {}, COMMIT, 0, "python", "existing-python", {})
    asvfiles.record_cells(run, benchmarks(["tiny"]), [CellResult.from_json(cell("eager"))])
    grown = benchmarks(["tiny", "seq=128"])
    asvfiles.record_cells(run, grown, [CellResult.from_json(cell("default"))])
    latency = metrics.benchmark_names(asvfiles.PLUGIN_CLASS)["latency"]
    values = run.get_result_value(latency, grown[latency]["params"])
    assert values[:2] == [1.0, 1.0] and all(math.isnan(v) for v in values[2:]), values
