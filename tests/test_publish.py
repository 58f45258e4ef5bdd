"""publish: asv's pages with no CDN left, the vendored files as the manifest names them, the history read from
the results, the report beside asv's index and linked both ways."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tracker import cli, metrics
from tracker.errors import ToolError
from tracker.measure.cellresult import CellResult
from tracker.publish import preflight
from tracker.publish import site as publish
from tracker.store import asvfiles
from tracker.store.cells import CellStore, RunKey
from workloads.names import MODES, PRESET_NAMES, WORKLOAD_NAMES

ROOT = Path(__file__).resolve().parent.parent
H100_FIXTURE = ROOT / "tests" / "fixtures" / "h100-aa2"  # two full H100 runs of one commit (h100-c, h100-d)
GPU = "NVIDIA H100 80GB HBM3"


# --- a small results directory written through the project's own asv writer -------------------------------

def _benchmark(name: str, unit: str, params: bool = True) -> dict[str, Any]:
    grid = [[repr(p) for p in PRESET_NAMES], [repr(w) for w in WORKLOAD_NAMES], [repr(m) for m in MODES]]
    return {"name": name, "type": "track", "unit": unit, "version": "1", "timeout": 1800, "code": "",
            "param_names": ["preset", "workload", "mode"] if params else [], "params": grid if params else []}


def _samples(ms: float, n: int = 40) -> list[float]:
    return [ms * (1 + 0.01 * ((k * 7) % 5 - 2) / 2) for k in range(n)]  # +-1%, deterministic


# (preset, workload) -> eager median and each compiled mode's factor; one OOM, one tie (equal medians)
CASES: dict[tuple[str, str], dict[str, float]] = {
    ("prefill", "llm_rmsnorm"): {"eager": 0.40, "default": 0.6, "reduce-overhead": 0.61, "max-autotune": 0.55,
                                 "max-autotune-no-cudagraphs": 0.55},
    ("prefill", "llm_swiglu_mlp"): {"eager": 2.5, "default": 0.9, "reduce-overhead": 0.92, "max-autotune": 0.7,
                                    "max-autotune-no-cudagraphs": 0.75},
    ("prefill", "diff_cfg_blend"): {"eager": 0.05, "default": 0.5, "reduce-overhead": 0.45, "max-autotune": 0.52,
                                    "max-autotune-no-cudagraphs": 0.5},
    ("decode", "llm_rmsnorm"): {"eager": 0.012, "default": 0.9, "reduce-overhead": 0.4, "max-autotune": 0.45,
                                "max-autotune-no-cudagraphs": 0.95},
    ("decode", "rl_ppo_clipped_loss"): {"eager": 0.03, "default": 0.6, "reduce-overhead": 0.3,
                                        "max-autotune": 0.33, "max-autotune-no-cudagraphs": 0.62},
}
OOM = ("prefill", "llm_swiglu_mlp", "reduce-overhead")
OOM_REASON = "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"


def _cells(run: int, torch: str) -> list[dict[str, Any]]:
    host = {"gpu": GPU, "driver": "570.124.06", "cuda": "12.8", "torch": torch, "triton": "3.4.0"}
    drift = 1 + 0.08 * run  # later runs a little slower, so lines move
    out = []
    for (preset, workload), factors in CASES.items():
        for mode in MODES:
            cell: dict[str, Any] = {"preset": preset, "workload": workload, "mode": mode, "host": host,
                                    "launch_us": 6.5, "wall_s": 1.0}
            if (preset, workload, mode) == OOM:
                cell.update(status="failed", reason=OOM_REASON)
            else:
                ms = factors["eager"] * (1 if mode == "eager" else factors[mode]) * (drift if mode == "default" else 1)
                cell.update(status="ok", reason="", samples_ms=_samples(ms),
                            compile_s=0.0 if mode == "eager" else 20.0 + 5 * len(mode),
                            peak_mem_bytes=int((256 + 64 * MODES.index(mode)) * 2**20))
            out.append(cell)
    return out


RUNS = (("1" * 40, 1_790_000_000_000, "2.9.1"), ("2" * 40, 1_790_086_400_000, "2.9.1"),
        ("2" * 40, 1_790_086_400_000, "2.10.0"))


def make_results(root: Path, machine: str = "h100-test") -> Path:
    """Three runs (two commits, two PyTorch versions at the second) of five instances on an 'H100', written
    with tracker.store.asvfiles as the runner writes them; failure reasons in the cell store beside them."""
    from asv.benchmarks import Benchmarks
    from asv.runner import BenchmarkResult

    results_dir = root / "results"
    conf = asvfiles.load_conf(ROOT / "asv.conf.json", str(results_dir))
    benchmarks = Benchmarks(conf, [_benchmark(asvfiles.METRIC_BENCHMARKS[m.name], m.unit)
                                   for m in metrics.METRICS.values()]
                            + [_benchmark(asvfiles.HOST_BENCHMARK, "us", params=False)])
    results_dir.mkdir(parents=True)
    benchmarks.save()
    for i, (commit, date_ms, torch) in enumerate(RUNS):
        cells = _cells(i, torch)
        entry = {"machine": machine, "os": "Linux", "arch": "x86_64", "cpu": "test CPU", "num_cpu": "16",
                 "ram": "1", **cells[0]["host"]}
        # asv keys a result file by environment: another torch version is another virtualenv
        env = SimpleNamespace(name=f"existing-py-torch{torch}", python=sys.executable, env_vars={})
        results = asvfiles.open_results(conf, env, entry, commit, date_ms)
        asvfiles.record_cells(results, benchmarks, [CellResult.from_json(r) for r in cells])
        results.add_result(benchmarks[asvfiles.HOST_BENCHMARK],
                           BenchmarkResult(result=[6.5], samples=[None], number=[None], errcode=0, stderr="",
                                           profile=None))
        asvfiles.save_results(conf, results, entry)
        store = CellStore(root / "cells", RunKey(machine, commit, torch))
        for cell in cells:
            store.put(CellResult.from_json(cell))
    return results_dir


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_results(tmp_path_factory.mktemp("publish"))


@pytest.fixture(scope="module")
def site(results_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site") / "site"
    assert publish_command(results_dir, out) == 0
    return out


# --- the vendored libraries --------------------------------------------------------------------------------

def _asv_index_html() -> str:
    import asv

    return (Path(asv.__file__).parent / "www" / "index.html").read_text(encoding="utf-8")


def test_every_cdn_load_of_asvs_pages_is_vendored() -> None:
    """Fails on an asv upgrade that loads something new from a CDN: vendor it, see tracker/publish/vendor/README.md."""
    local = {f["cdn_url"]: f["path"] for f in publish.load_manifest()}
    loads = publish.external_loads(_asv_index_html())
    assert len(loads) >= 10
    assert sorted(set(loads) - set(local)) == []


def test_vendored_files_are_the_manifests_with_licenses() -> None:
    for f in publish.load_manifest():
        data = (publish.VENDOR_DIR / f["path"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == f["sha256"], f["path"]
        algo, _, want = f["cdn_integrity"].partition("-")
        same = base64.b64encode(hashlib.new(algo, data).digest()).decode() == want
        assert same == f["identical_to_cdn"], f"{f['path']}: identical_to_cdn is wrong"
        package_dir = (publish.VENDOR_DIR / f["path"]).relative_to(publish.VENDOR_DIR).parts[0]
        assert list((publish.VENDOR_DIR / package_dir).glob("LICENSE*")), f"{package_dir} has no license file"


def test_most_vendored_files_are_the_cdn_bytes() -> None:
    """jQuery, Bootstrap, md5 and orderBars are byte-identical to what asv's SRI hashes name."""
    identical = {f["npm"] for f in publish.load_manifest() if f["identical_to_cdn"]}
    assert {"jquery@3.3.1", "bootstrap@3.1.1", "blueimp-md5@2.19.0", "flot-orderbars@1.0.0"} <= identical


def test_localize_rewrites_loads_and_leaves_links() -> None:
    html = ('<script src="https://cdn.example/a.js" integrity="sha256-x" crossorigin="anonymous" '
            'referrerpolicy="no-referrer" onerror="f()"></script>\n'
            '<link rel="stylesheet" href="https://cdn.example/b.css" integrity="sha256-y" crossorigin="anonymous">\n'
            '<a href="https://github.com/airspeed-velocity/asv/">asv</a>')
    out, missing = publish.localize_html(html, {"https://cdn.example/a.js": "vendor/a.js",
                                                "https://cdn.example/b.css": "vendor/b.css"})
    assert missing == []
    assert '<script src="vendor/a.js" onerror="f()"></script>' in out
    assert '<link rel="stylesheet" href="vendor/b.css">' in out
    assert '<a href="https://github.com/airspeed-velocity/asv/">' in out  # a link, not a load
    assert publish.external_loads(out) == []
    _, missing = publish.localize_html('<script src="https://elsewhere/x.js"></script>', {})
    assert missing == ["https://elsewhere/x.js"]


def test_tampered_vendor_file_is_refused(tmp_path: Path) -> None:
    vendor = tmp_path / "vendor"
    import shutil

    shutil.copytree(publish.VENDOR_DIR, vendor)
    first = publish.load_manifest(vendor)[0]["path"]
    (vendor / first).write_text("/* not jquery */")
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "index.html").write_text(_asv_index_html())
    with pytest.raises(publish.PublishError, match="does not match"):
        publish.make_offline(tmp_path / "site", vendor)


# --- the published site ----------------------------------------------------------------------------------

@pytest.mark.slow
def test_published_pages_load_nothing_from_elsewhere(site: Path) -> None:
    for page in site.glob("*.html"):
        html = page.read_text(encoding="utf-8")
        assert publish.external_loads(html) == [], page.name
        assert "integrity=" not in html and "crossorigin" not in html
        for src in re.findall(r'<(?:script|link)\b[^>]*(?:src|href)="([^"]+)"', html):
            assert (site / src).is_file(), f"{page.name} loads {src}, which is not in the site"
    assert (site / "vendor" / "bootstrap-3.1.1" / "fonts" / "glyphicons-halflings-regular.woff").is_file()


@pytest.mark.slow
def test_history_comes_from_the_results(site: Path) -> None:
    """Commits unknown to git (this fixture's) are plotted, in date order."""
    index = json.loads((site / "index.json").read_text())
    revisions = sorted((int(r), h) for r, h in index["revision_to_hash"].items())
    assert [h for _, h in revisions] == ["1" * 40, "2" * 40]
    assert sorted(index["params"]["torch"]) == ["2.10.0", "2.9.1"]
    graphs = list((site / "graphs").rglob("baselines.Baseline.track_latency.json"))
    points = {p[0] for g in graphs for p in json.loads(g.read_text()) if p[1] is not None}
    assert points == {0, 1}
    # two commits: the grid draws their history, and says nothing of a single commit
    assert publish.SINGLE_COMMIT_ID not in (site / "index.html").read_text(encoding="utf-8")


@pytest.mark.slow
def test_report_and_asv_link_both_ways(site: Path) -> None:
    index = (site / "index.html").read_text(encoding="utf-8")
    assert publish.REPORT_LINK in index
    report = (site / "report" / "index.html").read_text(encoding="utf-8")
    assert 'href="../index.html"' in report
    assert "../index.html#baselines.Baseline.track_latency?machine=h100-test&amp;p-preset=%27prefill%27" in report


def test_refuses_to_publish_over_or_into_the_results(results_dir: Path) -> None:
    with pytest.raises(preflight.UnusableOutput, match="would replace the results"):
        publish.publish(results_dir, None, results_dir.parent, warn=print)
    with pytest.raises(preflight.UnusableOutput, match="inside the results"):
        publish.publish(results_dir, None, results_dir / "site", warn=print)


@pytest.mark.slow
def test_html_dir_is_relative_to_the_config(results_dir: Path, tmp_path: Path) -> None:
    """Without --out the site goes to asv.conf.json's html_dir, read relative to the config file as asv does."""
    import shutil

    config = tmp_path / "conf" / "asv.conf.json"
    config.parent.mkdir()
    shutil.copy(ROOT / "asv.conf.json", config)
    (tmp_path / "conf" / "benchmarks").symlink_to(ROOT / "benchmarks")
    assert cli.main(["--config", str(config), "publish", "--results-dir", str(results_dir)]) == 0
    assert (tmp_path / "conf" / ".asv" / "html" / "report" / "index.html").is_file()


@pytest.mark.slow
def test_a_stale_benchmarks_json_leaving_out_graphs_is_warned_about(results_dir: Path, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    results = Path(shutil.copytree(results_dir, tmp_path / "results"))
    listed = json.loads((results / "benchmarks.json").read_text())
    del listed[asvfiles.METRIC_BENCHMARKS["compile_time"]]  # written before the metric was added
    (results / "benchmarks.json").write_text(json.dumps(listed))
    publish_command(results, tmp_path / "site")
    err = capsys.readouterr().err
    assert "publish: warning: 1 benchmark(s) with results have no graphs" in err
    assert asvfiles.METRIC_BENCHMARKS["compile_time"] in err and "stale?" in err


@pytest.mark.slow
def test_benchmarks_never_run_are_left_out_of_asvs_index(results_dir: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """A suite newer than its results (kernels under test not yet run): asv's grid would 404 on them. Only those of a
    class the results measure are warned about: a kernel repository's runs never hold the study's classes."""
    import shutil

    results = Path(shutil.copytree(results_dir, tmp_path / "results"))
    listed = json.loads((results / "benchmarks.json").read_text())
    latency = asvfiles.METRIC_BENCHMARKS["latency"]
    new_metric = latency.rsplit(".", 1)[0] + ".track_new_metric"
    for name in ("candidates.Candidate.track_latency", new_metric):
        listed[name] = {**listed[latency], "name": name}
    (results / "benchmarks.json").write_text(json.dumps(listed))
    publish_command(results, tmp_path / "site")
    index = json.loads((tmp_path / "site" / "index.json").read_text())
    assert "candidates.Candidate.track_latency" not in index["benchmarks"] and new_metric not in index["benchmarks"]
    assert latency in index["benchmarks"]
    warned = [line for line in capsys.readouterr().err.splitlines() if "have no results and no graphs" in line]
    assert len(warned) == 1 and warned[0].startswith("publish: warning: 1 benchmark(s)")
    assert new_metric in warned[0] and "candidates.Candidate" not in warned[0]


def test_empty_results_dir_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "results").mkdir()
    with pytest.raises(ToolError, match="no asv result files in "):
        publish.publish(tmp_path / "results", None, tmp_path / "site", warn=print)


def h100_results(tmp: Path) -> Path | None:
    """A scratch copy of the committed H100 fixture's results directory (publish may add benchmarks.json to
    it), or None while the fixture is not committed."""
    import shutil

    found = sorted({m.parent.parent for m in H100_FIXTURE.rglob("machine.json")})
    if not found:
        return None
    copy = Path(shutil.copytree(H100_FIXTURE, tmp / "h100"))  # whole: a cell store beside holds the reasons
    return copy / found[0].relative_to(H100_FIXTURE)


@pytest.mark.slow
def test_publishes_the_h100_fixture(tmp_path: Path) -> None:
    results_dir = h100_results(tmp_path)
    if results_dir is None:
        pytest.skip(f"no H100 fixture at {H100_FIXTURE}")
    assert publish_command(results_dir, tmp_path / "site") == 0
    assert publish.external_loads((tmp_path / "site" / "index.html").read_text()) == []
    # asv's graph pages open on a measured instance, all five modes (both runs measured them all)
    selection = publish.measured_selection(tmp_path / "site")
    modes = ["'eager'", "'default'", "'reduce-overhead'", "'max-autotune'", "'max-autotune-no-cudagraphs'"]
    assert selection["baselines.Baseline.track_latency"] == {
        "p-preset": ["'prefill'"], "p-workload": ["'llm_rmsnorm'"], "p-mode": modes}
    # its one commit leaves asv's grid empty: the grid says so, and links to where the values are
    html = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    note = html[html.index(f'<div id="{publish.SINGLE_COMMIT_ID}"'):]
    note = note[:note.index("</div>")]
    assert "One commit measured so far</strong> (759ff183)" in note and 'href="report/index.html"' in note
    for machine in ("h100-c", "h100-d"):
        assert f'href="#baselines.Baseline.track_latency?machine={machine}&amp;x-axis=mode' in note


@pytest.mark.slow
def test_asv_graphs_open_on_what_an_eager_and_default_run_measured(tmp_path: Path) -> None:
    # the committed CPU run (tiny preset, llm_rmsnorm and diff_cfg_blend, eager and default): asv alone would open
    # on prefill/decode/tiny x llm_rmsnorm/llm_layernorm x eager, one series of six with data
    results_dir = tmp_path / "results"
    shutil.copytree(ROOT / "tests" / "fixtures" / "cpu-tiny" / "results", results_dir)
    assert publish_command(results_dir, tmp_path / "site") == 0
    selection = publish.measured_selection(tmp_path / "site")
    want = {"p-preset": ["'tiny'"], "p-workload": ["'llm_rmsnorm'"], "p-mode": ["'eager'", "'default'"]}
    assert selection == {"baselines.Baseline.track_latency": want, "baselines.Baseline.track_compile_time": want}
    html = (tmp_path / "site" / "index.html").read_text()
    assert html.index(publish.SELECTION_SCRIPT_ID) < html.index("asv.js")  # runs before asv reads the URL


@pytest.mark.slow
def test_builds_with_no_network_and_twice(monkeypatch: pytest.MonkeyPatch, results_dir: Path, tmp_path: Path) -> None:
    """Building never reaches for the network (a socket fails here), and publishing again over the same output
    (asv empties it first) adds the report link once."""
    import socket

    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError("network disabled in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    out = tmp_path / "site"
    assert publish_command(results_dir, out) == 0
    assert publish_command(results_dir, out) == 0
    assert (out / "index.html").read_text().count("nav-li-baseline-report") == 1
    assert (out / "index.html").read_text().count(publish.SELECTION_SCRIPT_ID) == 1
    assert os.path.isfile(out / "report" / "index.html") and (out / preflight.MARKER).is_file()


def publish_command(results_dir: Path, out: Path) -> int:
    """`compile-baselines publish --results-dir RESULTS_DIR --out OUT`: its exit code."""
    return cli.main(["publish", "--results-dir", str(results_dir), "--out", str(out)])
