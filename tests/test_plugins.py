"""Plug-in workloads: a kernel repository declares its own workloads and shapes through the entry-point group
`compile_baselines.workloads`, and they are measured, stored, analysed and reported like the study's 23.

The repository is examples/kernel-repo/ itself, made visible as pip would install it (tests/plugin_fixture.py).
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from plugin_fixture import EXAMPLE_REPO, installed, on_sys_path, reset_registries

from tracker import cli
from tracker.measure import harness
from tracker.measure.harness import Settings, measure_cell
from tracker.runner.plan import plan
from workloads import catalog, plugins, registry
from workloads.kernels import registry as kernel_registry
from workloads.names import MODES, PRESET_NAMES, WORKLOAD_NAMES
from workloads.shapes import Shape, powers_of_two, shape, sweep
from workloads.spec import Workload

ROOT = Path(__file__).resolve().parent.parent
FAST = Settings(warmup_ms=1.0, rep_ms=5.0, warmup_calls=1)
WORKLOAD = "example.add_rmsnorm"
SWEEP = [f"batch={b},seq={s}" for b in (1, 64) for s in (128, 512, 2048, 8192)]


@pytest.fixture
def example(tmp_path: Path) -> Iterator[dict[str, str]]:
    with installed(EXAMPLE_REPO, tmp_path / "site", ("example_kernels",)) as env:
        yield env


def _plugin(tmp_path: Path, dist: str, namespace: str, module: str, source: str) -> None:
    """A one-module workload plugin on sys.path (removed by the caller's monkeypatch)."""
    (tmp_path / f"{module}.py").write_text(source)
    info = tmp_path / f"{dist}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[compile_baselines.workloads]\n{namespace} = {module}\n")


_CLASHING = """
from workloads.shapes import shape
from workloads.spec import Workload
WORKLOADS = (Workload("{name}", "llm", (), lambda p, d: None, lambda p: 0.0, presets=(shape("tiny", n=1),)),)
"""


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a fresh process that sees the example as installed; it must succeed."""
    done = subprocess.run([sys.executable, "-m", "tracker.cli", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


# ---------------------------------------------------------------------------------------------------- declaring


def test_a_sweep_is_a_family_of_presets_named_by_their_point() -> None:
    shapes = sweep({"batch": [1, 64], "seq": powers_of_two(128, 512)}, hidden=2048)
    assert [s.name for s in shapes] == ["batch=1,seq=128", "batch=1,seq=256", "batch=1,seq=512",
                                        "batch=64,seq=128", "batch=64,seq=256", "batch=64,seq=512"]
    last = shapes[-1]
    assert (last.batch, last.seq, last["hidden"], last.needs_cuda) == (64, 512, 2048, True)
    assert last.point == {"batch": 64, "seq": 512} and last.sweep == ("batch", "seq")
    assert shape("tiny", batch=2).point == {}
    with pytest.raises(AttributeError, match="has no dimension 'seq'; it has batch"):
        _ = shape("tiny", batch=2).seq
    with pytest.raises(ValueError, match="positive int"):
        shape("tiny", batch=0)
    with pytest.raises(ValueError, match="letters, digits"):
        Shape("a/b", {"n": 1})


def test_a_plugin_workload_is_namespaced_and_declares_its_presets() -> None:
    tiny = (shape("tiny", n=4),)
    ok = Workload("mine.op", "attention", ("x",), lambda p, d: None, lambda p: 1.0, presets=tiny)
    assert ok.applies_to("tiny") and not ok.applies_to("prefill")
    assert ok.not_measured_in("prefill") == "mine.op has no preset prefill (it has tiny)"
    with pytest.raises(ValueError, match="declare its presets"):
        Workload("mine.op", "llm", (), lambda p, d: None, lambda p: 1.0)
    with pytest.raises(plugins.WorkloadClash, match=r"name it <namespace>\.llm_rmsnorm"):
        Workload("llm_rmsnorm", "llm", (), lambda p, d: None, lambda p: 1.0, presets=tiny)
    with pytest.raises(ValueError, match="declared twice"):
        Workload("mine.op", "llm", (), lambda p, d: None, lambda p: 1.0, presets=tiny * 2)


def test_the_example_repository_plugs_in_its_workload_and_sweep(example: dict[str, str]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", plugins.PluginWarning)
        names = catalog.workload_names()
    assert names == (*WORKLOAD_NAMES, WORKLOAD)  # the study's 23 first, untouched
    assert catalog.preset_names() == (*PRESET_NAMES, *SWEEP)  # its tiny is the study's name: listed once
    w = registry.get(WORKLOAD)
    assert (w.domain, catalog.domain(WORKLOAD)) == ("llm", "llm")
    assert [p.name for p in w.presets] == ["tiny", *SWEEP]
    assert catalog.applies("tiny", WORKLOAD) and not catalog.applies("prefill", WORKLOAD)
    assert not catalog.applies(SWEEP[0], "llm_rmsnorm")
    p = w.preset("batch=64,seq=8192")
    assert w.flops(p) == 6.0 * 64 * 8192 * 2048
    assert w.min_bytes(p) == 2.0 * (4 * 64 * 8192 * 2048 + 2048)  # declared, not counted on the meta device
    assert catalog.expand(["example.*"]) == [WORKLOAD]
    with pytest.raises(KeyError, match="plugin namespaces: example"):
        catalog.expand(["nope.*"])
    keys = [c.key for c in kernel_registry.candidates(WORKLOAD)]
    assert keys == [f"{WORKLOAD}:torch_fp32", f"{WORKLOAD}:triton_add_rmsnorm"]


def _asv_suite() -> tuple[Any, Any]:
    """benchmarks/baselines.py and candidates.py as asv imports them, in a process of its own: afresh."""
    for name in ("benchmarks.candidates", "benchmarks.baselines"):
        sys.modules.pop(name, None)
    return importlib.import_module("benchmarks.baselines"), importlib.import_module("benchmarks.candidates")


def test_installing_a_plugin_leaves_the_study_grid_as_it_is(tmp_path: Path) -> None:
    """The study's asv benchmarks keep their grid (and so their names, versions and history) whatever is installed;
    a plugin's workloads and candidates are benchmarks of their own, over the plugin's presets only."""
    study = (list(PRESET_NAMES), list(WORKLOAD_NAMES), list(MODES))
    baselines, candidates = _asv_suite()
    study_candidates = candidates.Candidate.params
    assert baselines.Baseline.params == study and not hasattr(baselines, "PluginBaseline")
    assert study_candidates[0] == list(PRESET_NAMES) and not hasattr(candidates, "PluginCandidate")
    try:
        with installed(EXAMPLE_REPO, tmp_path / "site", ("example_kernels",)):
            baselines, candidates = _asv_suite()
            assert (baselines.Baseline.params, baselines.Baseline.version) == (study, "1")
            assert (candidates.Candidate.params, candidates.Candidate.version) == (study_candidates, "1")
            assert baselines.PluginBaseline.params == (["tiny", *SWEEP], [WORKLOAD], list(MODES))
            assert candidates.PluginCandidate.params == (
                ["tiny", *SWEEP], [f"{WORKLOAD}:torch_fp32", f"{WORKLOAD}:triton_add_rmsnorm"])
    finally:
        _asv_suite()


def test_an_unknown_workload_names_the_closest_and_the_plugins_too(example: dict[str, str],
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    for command in (["measure", "--preset", "tiny", "--mode", "eager"], ["run"]):
        assert cli.main([*command, "--workload", "example.add_rmsnrom"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "unknown workload 'example.add_rmsnrom' (did you mean example.add_rmsnorm?)" in err[0]
        assert "; choose from the study's llm_rmsnorm, " in err[0]
        assert err[0].endswith(f"; plugin workloads: {WORKLOAD}")
    # a shell-style glob for the namespace: the selector is NAMESPACE.*, and the error says so
    assert cli.main(["run", "--workload", "example*"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["compile-baselines run: error: no workload is named 'example*': did you mean 'example.*'? (plugin "
                   "namespaces: example)"]


def test_list_shows_the_plugin_workloads_and_their_presets(example: dict[str, str],
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert f"  {WORKLOAD}" in out and "tiny, 8 in a sweep over batch x seq" in out
    assert "(example_kernels.workloads (cb-example-kernels))" in out
    assert f"{WORKLOAD}:triton_add_rmsnorm" in out
    # each table under its column headers
    headers = [line.split() for line in out.splitlines() if line.startswith(("  workload ", "  kernel "))]
    assert headers == [["workload", "domain", "presets", "tags"],
                       ["workload", "domain", "presets;", "tags", "(plugin)"], ["kernel", "devices", "(defined", "in)"]]


def test_the_run_plan_gives_a_plugin_workload_cells_in_its_own_presets(example: dict[str, str]) -> None:
    cells = plan(["tiny", SWEEP[0]], [WORKLOAD, "llm_rmsnorm"], ["eager"], kernels=["all"])
    assert [str(c) for c in cells] == [
        "tiny llm_rmsnorm eager", "tiny llm_rmsnorm kernel:torch_fp32", "tiny llm_rmsnorm kernel:triton_rmsnorm",
        f"tiny {WORKLOAD} eager", f"tiny {WORKLOAD} kernel:torch_fp32", f"tiny {WORKLOAD} kernel:triton_add_rmsnorm",
        f"{SWEEP[0]} {WORKLOAD} eager", f"{SWEEP[0]} {WORKLOAD} kernel:torch_fp32",
        f"{SWEEP[0]} {WORKLOAD} kernel:triton_add_rmsnorm"]
    from tracker.runner import policy

    assert policy.default_presets("cpu") == ["tiny"]
    assert policy.default_presets("cuda") == ["prefill", "decode", *SWEEP]


def test_a_plugin_workload_measures_like_the_study_s(example: dict[str, str]) -> None:
    r = measure_cell("tiny", WORKLOAD, "kernel:torch_fp32", "cpu", FAST)
    assert (r.status, r.correct) == (harness.OK, True), r.reason
    assert r.error_vs_eager < 2e-2
    r = measure_cell("tiny", WORKLOAD, "kernel:triton_add_rmsnorm", "cpu", FAST)
    assert r.status == harness.SKIPPED and "runs on cuda only" in r.reason
    r = measure_cell(SWEEP[-1], WORKLOAD, "eager", "cpu", FAST)  # 64 x 8192 x 2048 bf16: 2 GiB a tensor
    assert r.status == harness.SKIPPED and r.reason.startswith(f"preset {SWEEP[-1]}: {WORKLOAD}'s inputs and outputs")
    r = measure_cell(SWEEP[0], WORKLOAD, "eager", "cpu", FAST)  # declared for a GPU, and 1 MiB: a CPU measures it
    assert r.status == harness.OK, r.reason
    r = measure_cell(SWEEP[0], "llm_rmsnorm", "eager", "cpu", FAST)
    assert r.status == harness.SKIPPED and "the study's presets only" in r.reason
    with pytest.raises(KeyError, match="unknown preset"):
        measure_cell("seq=3", WORKLOAD, "eager", "cpu", FAST)


# ---------------------------------------------------------------------------------------------------- clashes


def test_two_plugins_with_one_namespace_are_one_clear_error(example: dict[str, str], tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    _plugin(tmp_path, "other_kernels", "example", "other_cb_workloads", _CLASHING.format(name="example.other"))
    on_sys_path(monkeypatch, tmp_path)
    monkeypatch.delitem(sys.modules, "other_cb_workloads", raising=False)
    reset_registries()
    with pytest.raises(plugins.WorkloadClash, match=r"workload namespace 'example' is declared twice: by .*\(cb-ex"
                                                    r"ample-kernels\) and by .*\(other_kernels\)|declared twice"):
        catalog.workload_names()
    with pytest.raises(plugins.WorkloadClash):  # every time it is asked, never half a registry
        catalog.workload_names()
    assert cli.main(["run", "--workload", "example.*"]) == 1  # the plugins installed clash, not the command line
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is declared twice" in err[0]


@pytest.mark.parametrize(("module", "name", "message"), [
    # a name without a namespace, yet with presets of its own: a plugin's, so it must carry one
    ("sneaky_cb_workloads", "llm_rmsnorm",
     r"workload 'llm_rmsnorm' has presets of its own, so it is a plugin's: name it <namespace>.llm_rmsnorm"),
    # another plugin's namespace
    ("sneaky2_cb_workloads", "example.add_rmsnorm",
     r"workload 'example.add_rmsnorm' of plugin 'sneaky': name it sneaky\.<name>"),
])
def test_a_workload_named_outside_its_plugin_s_namespace_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    module: str, name: str, message: str) -> None:
    _plugin(tmp_path, "sneaky", "sneaky", module, _CLASHING.format(name=name))
    on_sys_path(monkeypatch, tmp_path)
    monkeypatch.delitem(sys.modules, module, raising=False)
    reset_registries()
    try:
        with pytest.raises(plugins.WorkloadClash, match=message):
            catalog.workload_names()
    finally:
        reset_registries()


def test_a_broken_workload_plugin_warns_once_and_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _plugin(tmp_path, "broken", "broken", "broken_cb_workloads", "raise ImportError('no triton here')\n")
    on_sys_path(monkeypatch, tmp_path)
    reset_registries()
    try:
        with pytest.warns(plugins.PluginWarning, match="workload plugin 'broken'.*skipped: ImportError"):
            assert catalog.workload_names() == WORKLOAD_NAMES
        assert set(plugins.REGISTRY.plugin_errors) == {"broken"}
    finally:
        reset_registries()


def test_only_the_plugins_compile_baselines_plugins_names_are_loaded(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """COMPILE_BASELINES_PLUGINS: unset, every installed plugin; set, those it names (the tests set it, so that a
    kernel repository installed beside the project changes nothing they see)."""
    _plugin(tmp_path, "quiet", "quiet", "quiet_cb_workloads", _CLASHING.format(name="quiet.one"))
    on_sys_path(monkeypatch, tmp_path)
    monkeypatch.delitem(sys.modules, "quiet_cb_workloads", raising=False)
    try:
        with_it = (*WORKLOAD_NAMES, "quiet.one")
        for listed, expected in (("quiet", with_it), ("", WORKLOAD_NAMES), ("other, quiet", with_it), (None, with_it)):
            if listed is None:
                monkeypatch.delenv("COMPILE_BASELINES_PLUGINS")
            else:
                monkeypatch.setenv("COMPILE_BASELINES_PLUGINS", listed)
            reset_registries()
            assert catalog.workload_names()[:len(expected)] == expected
            if listed is not None:  # unset, whatever else is installed here shows too
                assert catalog.workload_names() == expected
    finally:
        reset_registries()


# ---------------------------------------------------------------------------------------------------- end to end


@pytest.mark.slow
def test_the_example_repository_end_to_end_on_cpu(example: dict[str, str], tmp_path: Path) -> None:
    """`run` on the tiny preset (eager, default and the candidates), then the summary, the report and the asv
    files, in fresh processes that see the plugin as an installed one would be seen."""
    results = tmp_path / "results"

    def cli_run(*args: str) -> subprocess.CompletedProcess[str]:
        return _cli(example, *args)

    run = cli_run("run", "--preset", "tiny", "--workload", "example.*", "--mode", "eager", "default",
                  "--machine", "cpu-plugin", "--results-dir", str(results), "--warmup-ms", "1", "--rep-ms", "20",
                  "--warmup-calls", "2")
    assert "4 cells: 3 ok, 0 failed, 1 skipped" in run.stdout
    stored = {p.name for p in (tmp_path / "cells").rglob(f"tiny/{WORKLOAD}/*.json")}
    assert stored == {"eager.json", "default.json", "kernel_torch_fp32.json", "kernel_triton_add_rmsnorm.json"}
    described = json.loads((results / "benchmarks.json").read_text())  # the suite as asv's discovery saw it
    assert described["baselines.Baseline.track_latency"]["params"] == [
        [repr(p) for p in PRESET_NAMES], [repr(w) for w in WORKLOAD_NAMES], [repr(m) for m in MODES]]
    assert described["baselines.PluginBaseline.track_latency"]["params"] == [
        [repr(p) for p in ("tiny", *SWEEP)], [repr(WORKLOAD)], [repr(m) for m in MODES]]

    summary = json.loads(cli_run("summary", "--results-dir", str(results), "--format", "json").stdout)
    tiny = summary["runs"][0]["presets"]["tiny"]
    assert tiny["instances"] == 1 and set(tiny["winners"]) == {WORKLOAD}
    assert set(tiny["domain_wins"]) == {"llm"}
    kernel = next(k for k in tiny["kernels"] if k["candidate"] == "torch_fp32")
    assert kernel["workload"] == WORKLOAD and kernel["correct"] is True and kernel["speedup_vs_best"] > 0

    cli_run("report", "--results-dir", str(results), "--out", str(tmp_path / "report"))
    page = (tmp_path / "report" / "index.html").read_text(encoding="utf-8")
    assert WORKLOAD in page and "triton_add_rmsnorm" in page


# ---------------------------------------------------------------------------------------------------- the report


def test_the_report_lays_a_sweep_out_as_one_table(example: dict[str, str]) -> None:
    """The regrouping alone: the figures are the report's per-preset rows (made up here, since the example's sweep
    needs a GPU); the table reads them along the sweep's declared order, a point with no row left out."""
    from tracker.publish import report
    from tracker.publish.sweeps import sweep_views

    def rows(best: str, best_ms: float, eager_ms: float) -> list[report.Row]:
        cells = (report.Cell("eager", "ok", eager_ms, 1.0, best=best == "eager"),
                 report.Cell(best, "ok", best_ms, eager_ms / best_ms, best=True))
        return [report.Row(WORKLOAD, "llm", cells, best, (), False, None, None)]

    def kernel(speedup: float | None) -> list[report.KernelRow]:
        status = "ok" if speedup is not None else "skipped"
        return [report.KernelRow(WORKLOAD, "triton_add_rmsnorm", status, None, None, None, speedup, None, False,
                                 False, "", "")]

    by_preset = {SWEEP[0]: (rows("max-autotune", 0.01, 0.02), kernel(1.5)),
                 SWEEP[1]: (rows("default", 0.02, 0.05), kernel(None)),
                 SWEEP[3]: (rows("max-autotune", 0.5, 1.0), kernel(0.8)),
                 "tiny": (rows("eager", 0.001, 0.001), [])}
    [view] = sweep_views(by_preset)
    assert (view.workload, view.axes, view.candidates) == (WORKLOAD, ("batch", "seq"), ("triton_add_rmsnorm",))
    assert [(p.preset, p.best, p.best_vs_eager, p.kernels) for p in view.points] == [
        (SWEEP[0], "max-autotune", 2.0, (1.5,)), (SWEEP[1], "default", 2.5, (None,)),
        (SWEEP[3], "max-autotune", 2.0, (0.8,))]
    section = report.MachineSection("gpu-box", [], None, "NVIDIA H100", [], 1, [view])
    html = report.environment().get_template("report_sweeps.html.j2").render(s=section, mode_colors={})
    assert f'id="gpu-box-sweep-{WORKLOAD}"' in html and "over batch x seq" in html
    assert html.count('<tr data-preset="') == 3


@pytest.mark.slow
def test_the_example_s_h100_run_shows_where_the_best_mode_changes_along_its_sweep(example: dict[str, str],
                                                                                 tmp_path: Path) -> None:
    """The real H100 run of examples/kernel-repo (tests/fixtures/h100-example/PROVENANCE.md): the summary names a
    baseline for every point of the sweep, and the report lays the sweep out as one table of all eight points."""
    results = ROOT / "tests" / "fixtures" / "h100-example" / "results"

    def cli(*args: str) -> str:
        return _cli(example, *args).stdout

    summary = json.loads(cli("summary", "--results-dir", str(results), "--format", "json"))
    presets = summary["runs"][0]["presets"]
    assert set(presets) == set(SWEEP)
    targets = {p: presets[p]["targets"][WORKLOAD] for p in SWEEP}
    assert all(t["ms"] > 0 for t in targets.values())
    assert len({t["mode"] for t in targets.values()}) > 1, targets  # the best mode changes along the sweep
    cli("report", "--results-dir", str(results), "--out", str(tmp_path / "report"))
    page = (tmp_path / "report" / "index.html").read_text(encoding="utf-8")
    assert "over batch x seq" in page
    assert all(f'<tr data-preset="{p}"' in page for p in SWEEP)
