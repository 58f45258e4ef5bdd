"""Kernels under test: registration (in-tree, entry point), skipping, correctness against eager. CPU only."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from plugin_fixture import on_sys_path

from tracker.errors import UsageError
from tracker.measure import harness as measure
from tracker.measure.harness import Settings, compare_outputs, measure_cell
from tracker.runner import plan as runner
from tracker.store.cells import CellSkipped
from workloads.kernels import registry
from workloads.kernels.registry import Candidate, PluginWarning, Registry, candidate, declared

PLUGIN_DIR = Path(__file__).parent / "fixtures" / "kernels_plugin"
FAST = Settings(warmup_ms=1.0, rep_ms=5.0, warmup_calls=1)
BUILTIN = {"llm_rmsnorm:torch_fp32", "llm_rmsnorm:triton_rmsnorm", "diff_cfg_blend:torch_lerp",
           "diff_cfg_blend:triton_cfg_blend"}

# measure_cell resolves "kernel:<name>" modes itself once tracker/measure/harness.py has the issue-9 change.
kernel_modes = pytest.mark.skipif(not hasattr(measure, "IncorrectOutput"),
                                  reason="tracker.measure.harness does not resolve kernel:<name> modes yet")


@candidate(workload="llm_rmsnorm", name="wrong_no_norm", devices=("cpu", "cuda"))
def wrong_rmsnorm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * w  # forgets the normalisation: must be reported as incorrect, never timed


@pytest.fixture
def wrong_registered() -> Iterator[Candidate]:
    registry.REGISTRY.add(wrong_rmsnorm)
    yield declared(wrong_rmsnorm)
    registry.REGISTRY.remove("llm_rmsnorm", "wrong_no_norm")


@pytest.fixture
def plugin_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The fake kernel repository on sys.path: importlib.metadata then sees its dist-info and entry points."""
    on_sys_path(monkeypatch, PLUGIN_DIR)
    yield PLUGIN_DIR
    for name in [m for m in sys.modules if m.split(".")[0] == "fake_kernels"]:
        del sys.modules[name]


def test_in_tree_candidates_are_registered() -> None:
    assert {c.key for c in registry.candidates()} >= BUILTIN
    assert [c.name for c in registry.candidates("llm_rmsnorm")][:2] == ["torch_fp32", "triton_rmsnorm"]
    c = registry.get("llm_rmsnorm", "triton_rmsnorm")
    assert (c.workload, c.mode, c.devices) == ("llm_rmsnorm", "kernel:triton_rmsnorm", ("cuda",))
    assert c.source == "workloads.kernels.triton_rmsnorm.triton_rmsnorm"


def test_decorating_declares_without_registering() -> None:
    @candidate(workload="diff_scheduler_step", devices=("cpu",))
    def my_step(latents: torch.Tensor, noise: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        return latents - sigma[:, None, None, None] * noise

    c = declared(my_step)
    assert c is not None and c.name == "my_step" and c.fn is my_step
    assert "diff_scheduler_step:my_step" not in {x.key for x in registry.candidates()}
    reg = Registry(modules=(), group=None)
    reg.add(my_step)
    assert reg.get("diff_scheduler_step", "my_step") == c


def test_unknown_names_raise_keyerror_with_the_known_list() -> None:
    with pytest.raises(KeyError, match="torch_fp32, triton_rmsnorm"):
        registry.get("llm_rmsnorm", "no_such_kernel")
    with pytest.raises(KeyError, match="unknown workload"):
        registry.get("llm_rmsnrom", "triton_rmsnorm")
    with pytest.raises(KeyError, match="unknown workload"):
        candidate(workload="llm_rmsnrom")(lambda x, w: x)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"name": "a:b"}, "letters, digits"),
    ({"devices": ("gpu",)}, "devices must be among"),
    ({"devices": ()}, "devices must be among"),
])
def test_bad_declarations_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        candidate(workload="llm_rmsnorm", **{"name": "fine_name", **kwargs})(lambda x, w: x)


def test_a_name_clash_is_refused_and_leaves_the_registry_unchanged() -> None:
    @candidate(workload="llm_rmsnorm", name="torch_fp32", devices=("cpu",))
    def impostor(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x

    before = registry.get("llm_rmsnorm", "torch_fp32")
    with pytest.raises(ValueError, match="declared twice"):
        registry.REGISTRY.add(impostor)
    assert registry.get("llm_rmsnorm", "torch_fp32") is before


def test_entry_point_plugins_register_modules_and_callables(plugin_path: Path) -> None:
    reg = Registry()  # in-tree modules and the entry-point group, as the global registry loads them
    with warnings.catch_warnings():
        warnings.simplefilter("error", PluginWarning)
        keys = {c.key for c in reg.candidates()}
    assert {"diff_scheduler_step:fake_addcmul", "diff_cfg_blend:fake_blend"} | BUILTIN <= keys
    assert reg.get("diff_scheduler_step", "fake_addcmul").source == "fake_kernels.register.scheduler_step_addcmul"
    assert reg.plugin_errors == {}


def test_a_broken_plugin_warns_once_and_is_skipped(plugin_path: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    dist = tmp_path / "broken_kernels-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-kernels\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[compile_baselines.kernels]\nbroken = no_such_module_for_cb_tests\n")
    on_sys_path(monkeypatch, tmp_path)
    reg = Registry(modules=())
    with pytest.warns(PluginWarning, match="kernel plugin 'broken'.*skipped: ModuleNotFoundError") as record:
        keys = {c.key for c in reg.candidates()}
    assert len([w for w in record if issubclass(w.category, PluginWarning)]) == 1
    assert "diff_scheduler_step:fake_addcmul" in keys  # the good plugin still loads
    assert set(reg.plugin_errors) == {"broken"}
    with warnings.catch_warnings():
        warnings.simplefilter("error", PluginWarning)
        reg.candidates()  # loaded once: no second warning


def test_a_plugin_clashing_with_an_in_tree_name_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "clash_kernels_for_cb_tests.py"
    pkg.write_text("from workloads.kernels import candidate\n\n"
                   "@candidate(workload='llm_rmsnorm', name='torch_fp32', devices=('cpu',))\n"
                   "def mine(x, w):\n    return x\n")
    dist = tmp_path / "clash_kernels-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: clash-kernels\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[compile_baselines.kernels]\nclash = clash_kernels_for_cb_tests\n")
    on_sys_path(monkeypatch, tmp_path)
    monkeypatch.delitem(sys.modules, "clash_kernels_for_cb_tests", raising=False)
    reg = Registry()
    with pytest.warns(PluginWarning, match="declared twice"):
        c = reg.get("llm_rmsnorm", "torch_fp32")
    assert c.source == "workloads.kernels.reference.rmsnorm_fp32"


def test_devices_and_enabled_give_skip_reasons() -> None:
    triton_c = registry.get("llm_rmsnorm", "triton_rmsnorm")
    assert triton_c.skip_reason("cpu") == "candidate llm_rmsnorm:triton_rmsnorm runs on cuda only, not on cpu"
    assert registry.get("llm_rmsnorm", "torch_fp32").skip_reason("cpu") is None
    off = Candidate("llm_rmsnorm", "off", lambda x, w: x, ("cpu",), enabled=False, disabled_reason="no triton")
    assert off.skip_reason("cpu") == "candidate llm_rmsnorm:off is disabled: no triton"


@kernel_modes
@pytest.mark.parametrize("key", ["llm_rmsnorm:triton_rmsnorm", "diff_cfg_blend:triton_cfg_blend"])
def test_triton_candidates_are_skipped_on_cpu(key: str) -> None:
    workload, name = registry.split_key(key)
    r = measure_cell("tiny", workload, registry.mode_of(name), "cpu", FAST)
    assert r.status == measure.SKIPPED, r.reason
    assert r.reason == f"candidate {key} runs on cuda only, not on cpu"
    assert r.samples_ms == [] and r.median_ms is None


def test_a_wrong_candidate_is_incorrect_and_never_timed() -> None:
    r = measure_cell("tiny", "llm_rmsnorm", "kernel:wrong_no_norm", "cpu", FAST, fn_override=wrong_rmsnorm)
    assert r.status == measure.FAILED and r.correct is False
    assert "incorrect: output 0 differs from eager" in r.reason
    assert r.samples_ms == [] and r.median_ms is None


@kernel_modes
def test_a_registered_wrong_candidate_fails_with_incorrect_reason(wrong_registered: Candidate) -> None:
    r = measure_cell("tiny", "llm_rmsnorm", wrong_registered.mode, "cpu", FAST)
    assert r.status == measure.FAILED and r.correct is False
    assert r.reason.startswith("incorrect: "), r.reason


@pytest.mark.parametrize("key", ["llm_rmsnorm:torch_fp32", "diff_cfg_blend:torch_lerp"])
def test_reference_candidates_measure_ok_and_correct(key: str) -> None:
    c = registry.get(*registry.split_key(key))
    r = measure_cell("tiny", c.workload, c.mode, "cpu", FAST, fn_override=c.fn)
    assert r.status == measure.OK, r.reason
    assert r.correct is True and r.error_vs_eager < 2e-2
    assert r.samples_ms and r.median_ms > 0


@kernel_modes
def test_a_kernel_mode_resolves_the_registered_candidate() -> None:
    r = measure_cell("tiny", "diff_cfg_blend", "kernel:torch_lerp", "cpu", FAST)
    assert (r.status, r.mode, r.correct) == (measure.OK, "kernel:torch_lerp", True)
    with pytest.raises(KeyError, match="unknown candidate 'nope'"):
        measure_cell("tiny", "diff_cfg_blend", "kernel:nope", "cpu", FAST)


@pytest.mark.skipif(not hasattr(runner, "kernel_modes"), reason="tracker.runner.plan does not plan candidates yet")
def test_the_run_plan_adds_the_selected_candidates_after_the_modes() -> None:
    cells = runner.plan(["tiny"], ["llm_rmsnorm"], ["eager"], kernels=["all"])
    assert [c.mode for c in cells] == ["eager", "kernel:torch_fp32", "kernel:triton_rmsnorm"]
    cells = runner.plan(["tiny"], ["llm_rmsnorm", "diff_cfg_blend"], [], kernels=["torch_lerp", "triton_rmsnorm"])
    assert [(c.workload, c.mode) for c in cells] == [("llm_rmsnorm", "kernel:triton_rmsnorm"),
                                                     ("diff_cfg_blend", "kernel:torch_lerp")]
    assert runner.plan(["tiny"], ["llm_rmsnorm"], ["eager"]) == runner.plan(["tiny"], ["llm_rmsnorm"], ["eager"], [])
    with pytest.raises(UsageError, match="unknown candidate 'nope'"):
        runner.plan(["tiny"], kernels=["nope"])


def test_fp32_rmsnorm_passes_the_bf16_tolerance_at_the_study_width() -> None:
    """The Triton kernel's arithmetic (workloads.kernels.reference.rmsnorm_fp32 is its PyTorch twin) against the
    bf16-throughout workload, at h = 2048: more exact than eager, and within compare_outputs' tolerance."""
    from workloads.kernels.reference import rmsnorm_fp32
    from workloads.llm import rmsnorm

    torch.manual_seed(0)
    x, w = torch.randn(256, 2048, dtype=torch.bfloat16), torch.randn(2048, dtype=torch.bfloat16)
    ok, err, why = compare_outputs(rmsnorm_fp32(x, w), rmsnorm(x, w))
    assert ok, why
    assert err < 1e-2


def test_asv_candidate_benchmark_lists_every_candidate() -> None:
    from benchmarks.candidates import Candidate as AsvCandidate

    presets, keys = AsvCandidate.params
    assert presets == ["prefill", "decode", "tiny"]
    assert keys == [c.key for c in registry.candidates()]
    assert AsvCandidate.param_names == ["preset", "candidate"] and AsvCandidate.version == "1"


@pytest.mark.slow
@kernel_modes
def test_asv_candidate_benchmark_records_ok_and_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks.candidates import Candidate as AsvCandidate

    monkeypatch.setenv("COMPILE_BASELINES_CELLS", str(tmp_path))
    monkeypatch.setenv("ASV_COMMIT", "abc123")
    bench = AsvCandidate()
    bench.setup("tiny", "diff_cfg_blend:torch_lerp")
    assert bench.track_latency("tiny", "diff_cfg_blend:torch_lerp")["samples"]
    assert bench.track_compile_time("tiny", "diff_cfg_blend:torch_lerp") >= 0
    with pytest.raises(CellSkipped, match="runs on cuda only"):
        bench.setup("tiny", "diff_cfg_blend:triton_cfg_blend")
    assert list(tmp_path.rglob("kernel_torch_lerp.json"))
