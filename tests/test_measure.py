"""The measurement harness on a CPU: every tiny cell compiles and agrees with eager; failures are results."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from tracker.measure import harness as measure
from tracker.measure.harness import Settings, measure_cell
from tracker.stats import quantile
from workloads.names import WORKLOAD_NAMES

QUICK = Settings(warmup_ms=1, rep_ms=5, warmup_calls=2)
# One workload a domain in the fast subset (`-m "not slow"`); the full suite compiles all 23.
FAST = ("llm_rmsnorm", "vlm_vision_rmsnorm_pool", "diff_cfg_blend", "rl_ppo_clipped_loss")


@pytest.mark.parametrize("name", [n if n in FAST else pytest.param(n, marks=pytest.mark.slow) for n in WORKLOAD_NAMES])
def test_every_tiny_workload_runs_in_eager_and_agrees_with_a_compiled_mode(name: str) -> None:
    eager = measure_cell("tiny", name, "eager", device="cpu", settings=QUICK)
    compiled = measure_cell("tiny", name, "default", device="cpu", settings=QUICK)
    for cell in (eager, compiled):
        assert cell.status == "ok", (name, cell.mode, cell.reason)
        assert cell.correct and len(cell.samples_ms) >= 5
        assert cell.p25_ms <= cell.median_ms <= cell.p99_ms
    assert compiled.compile_s > 0 and compiled.error_vs_eager <= 2e-2, name


def test_a_cell_records_its_environment_and_the_host_launch_floor() -> None:
    cell = measure_cell("tiny", "diff_cfg_blend", "eager", device="cpu", settings=QUICK)
    assert cell.host["torch"] == torch.__version__ and cell.host["device"] == "cpu"
    assert {"gpu", "driver", "cuda", "triton", "cpu", "hostname"} <= set(cell.host)
    assert cell.launch_us is not None and cell.launch_us > 0
    assert cell.peak_mem_bytes is None  # device memory is a CUDA figure


def test_a_cell_reuses_its_run_s_launch_floor_and_records_where_its_time_went() -> None:
    cell = measure_cell("tiny", "diff_cfg_blend", "default", device="cpu", settings=QUICK, launch_us=7.25)
    assert cell.launch_us == 7.25 and "launch_floor" not in cell.phase_s  # measured once a run, not again
    assert {"inputs", "first_call", "warmup", "timing"} <= set(cell.phase_s)
    assert cell.compile_s == cell.phase_s["first_call"]
    assert sum(cell.phase_s.values()) <= cell.wall_s


def test_a_cell_that_started_with_others_takes_the_floor_the_first_of_them_kept() -> None:
    class Kept:  # the run's store, which a cell that started beside this one filled while this one waited for the GPU
        def __init__(self, value: float | None) -> None:
            self.value, self.asked = value, 0

        def launch_floor(self) -> float | None:
            self.asked += 1
            return self.value

        def set_launch_floor(self, launch_us: float) -> float:
            self.value = self.value or launch_us
            return self.value

    kept = Kept(6.5)
    cell = measure_cell("tiny", "diff_cfg_blend", "eager", device="cpu", settings=QUICK, shared_floor=kept)
    assert cell.launch_us == 6.5 and kept.asked == 1
    empty = Kept(None)  # the first: it measures the floor and keeps it for the others
    cell = measure_cell("tiny", "diff_cfg_blend", "eager", device="cpu", settings=QUICK, shared_floor=empty)
    assert cell.launch_us is not None and empty.value == cell.launch_us


def test_host_time_is_taken_over_about_20_ms_of_calls_5_to_50_of_them() -> None:
    assert measure.host_calls(0.005) == 50  # a 5 us kernel: the most calls
    assert measure.host_calls(1.0) == 20
    assert measure.host_calls(12.0) == 5  # a 12 ms prefill cell: not 0.6 s of the GPU lock
    assert measure.host_calls(None) == 50  # no warm-up calls to estimate from


def test_a_workload_that_raises_is_a_failed_result_not_a_crash() -> None:
    def broken(*args: object) -> None:
        raise RuntimeError("kernel exploded\nsecond line")

    cell = measure_cell("tiny", "llm_rmsnorm", "kernel:broken", device="cpu", settings=QUICK, fn_override=broken)
    assert cell.status == "failed" and cell.reason == "RuntimeError: kernel exploded"


def test_an_output_that_disagrees_with_eager_fails_as_incorrect() -> None:
    def wrong(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x * w  # forgot the normalisation

    cell = measure_cell("tiny", "llm_rmsnorm", "kernel:wrong", device="cpu", settings=QUICK, fn_override=wrong)
    assert cell.status == "failed" and cell.reason.startswith("incorrect: output 0 differs from eager")
    assert cell.correct is False and cell.median_ms is None


def test_a_nan_output_fails_even_within_tolerance_elsewhere() -> None:
    def nan_one(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        out = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
        out.view(-1)[0] = float("nan")
        return out

    cell = measure_cell("tiny", "llm_rmsnorm", "kernel:nan", device="cpu", settings=QUICK, fn_override=nan_one)
    assert cell.status == "failed" and "NaN" in cell.reason


def test_integer_outputs_may_differ_only_in_a_few_tied_elements() -> None:
    ref = (torch.ones(4, 2), torch.arange(100))
    near = (torch.ones(4, 2), torch.cat([torch.arange(99), torch.tensor([0])]))
    far = (torch.ones(4, 2), torch.zeros(100, dtype=torch.int64))
    assert measure.compare_outputs(near, ref)[0]
    assert not measure.compare_outputs(far, ref)[0]


def test_a_cell_past_its_time_limit_fails_with_the_limit_as_reason() -> None:
    def slow(*args: torch.Tensor) -> torch.Tensor:
        time.sleep(0.5)
        return args[0]

    settings = Settings(warmup_ms=1, rep_ms=5, warmup_calls=1, time_limit_s=0.3)
    cell = measure_cell("tiny", "diff_cfg_blend", "kernel:slow", device="cpu", settings=settings, fn_override=slow)
    assert cell.status == "failed" and cell.reason == "time limit of 0.3 s exceeded"


def test_cells_the_study_does_not_measure_are_skipped_with_a_reason() -> None:
    assert measure_cell("decode", "rl_dpo_loss", "eager").reason.endswith("prefill only")


def test_a_cpu_measures_what_fits_whatever_the_preset_s_name() -> None:
    """The full-size presets are the GPU's, yet most of their cells fit a CPU (decode llm_rmsnorm: 0.3 MiB); those
    whose tensors exceed what a CPU measures are skipped, saying how large they are."""
    cell = measure_cell("decode", "llm_rmsnorm", "eager", device="cpu", settings=QUICK)
    assert cell.status == "ok", cell.reason
    cell = measure_cell("prefill", "llm_kl_divergence_loss", "eager", device="cpu", settings=QUICK)
    assert cell.status == "skipped"
    assert cell.reason.startswith("preset prefill: llm_kl_divergence_loss's inputs and outputs take ")
    assert cell.reason.endswith(" GiB, more than the 1 GiB a CPU measures; measure it on a CUDA device")


def test_a_skipped_measure_exits_non_zero_with_its_reason(capsys: pytest.CaptureFixture[str]) -> None:
    from tracker import cli

    assert cli.main(["measure", "--preset", "decode", "--workload", "rl_dpo_loss", "--mode", "eager"]) == 1
    captured = capsys.readouterr()
    assert "skipped" in captured.out
    assert captured.err.strip().splitlines()[-1] == ("compile-baselines measure: skipped: rl_dpo_loss is "
                                                     "decode-invariant: the study measures it in prefill only")


def test_unknown_names_raise_for_the_caller_to_report() -> None:
    with pytest.raises(KeyError, match="unknown mode"):
        measure_cell("tiny", "llm_rmsnorm", "max-autotuned")
    with pytest.raises(KeyError, match=r"unknown workload 'llm_rmsnrom' \(did you mean llm_rmsnorm\?\); choose from "
                                       r"the study's llm_rmsnorm, .*, rl_grpo_loss; plugin workloads: none"):
        measure_cell("tiny", "llm_rmsnrom", "eager")
    with pytest.raises(KeyError, match=r"unknown preset 'tinny' \(did you mean tiny\?\)"):
        measure_cell("tinny", "llm_rmsnorm", "eager")


def test_cpu_timer_has_do_bench_shape_all_samples_in_ms() -> None:
    samples = measure.cpu_bench(lambda: sum(range(100)), warmup_ms=1, rep_ms=5)
    # milliseconds: a call of about a microsecond times far under 5 (the median: a preempted sample may not)
    assert len(samples) >= 5 and all(s > 0 for s in samples) and quantile(samples, 0.5) < 5
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5


def test_the_l2_flush_grows_until_the_gpu_outlasts_the_host_twice() -> None:
    flush_us = 80.0  # one 256 MiB flush on an H100
    assert measure.flush_multiple(20.0, flush_us) == 1  # the host is well ahead: do_bench as it is
    assert measure.flush_multiple(67.0, flush_us) == 2  # a compiled wrapper on a slow host
    assert measure.flush_multiple(160.0, flush_us) == 5  # CUDA-graph bookkeeping
    assert measure.flush_multiple(5000.0, flush_us) == measure.MAX_FLUSH


def test_the_flush_takes_only_free_gpu_memory_and_at_least_do_bench_s_own() -> None:
    assert measure.affordable_flush(5, free_bytes=2**30 + 2 * measure.FLUSH_BYTES) == 2
    assert measure.affordable_flush(5, free_bytes=2**40) == 5
    assert measure.affordable_flush(5, free_bytes=0) == 1


def test_a_cpu_cell_runs_on_the_threads_its_settings_say_and_records_them() -> None:
    """Inductor fixes a CPU kernel's thread count when it compiles: the cell sets it first (one by default, steady on
    a busy host), records it, and gives the process its own count back."""
    before = torch.get_num_threads()
    seen: list[int] = []

    def probe(*args: torch.Tensor) -> torch.Tensor:
        from workloads.diffusion import cfg_blend

        seen.append(torch.get_num_threads())
        return cfg_blend(*args)

    cell = measure_cell("tiny", "diff_cfg_blend", "kernel:probe", device="cpu", settings=QUICK, fn_override=probe)
    assert cell.status == "ok" and cell.cpu_threads == 1 and set(seen) == {1}
    assert torch.get_num_threads() == before
    seen.clear()
    cell = measure_cell("tiny", "diff_cfg_blend", "kernel:probe", device="cpu", fn_override=probe,
                        settings=Settings(warmup_ms=1, rep_ms=5, warmup_calls=2, cpu_threads=2))
    assert cell.cpu_threads == 2 and set(seen) == {2}


def test_a_host_busier_than_its_cores_is_said() -> None:
    from tracker.measure.hostinfo import busy_warning

    assert busy_warning(cores=2, load=1.9) is None and busy_warning(cores=2, load=2.0) is None
    assert busy_warning(cores=2, load=4.3) == ("this host is busier than its cores (load average 4.3 over the last "
                                               "minute, 2 cores): CPU timings will be slower and noisier than on an "
                                               "idle host")


@pytest.mark.parametrize("line,built", [("cuda: Optional[str] = '13.0'", True), ("cuda: Optional[str] = None", False),
                                        ("cuda = '12.8'", True)])
def test_whether_torch_is_built_for_cuda_is_read_without_importing_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str, built: bool) -> None:
    import importlib.machinery
    import importlib.util

    from tracker.measure import hostinfo

    (tmp_path / "version.py").write_text(f"__version__ = '2.11.0'\n{line}\nhip: Optional[str] = None\n")
    spec = importlib.machinery.ModuleSpec("torch", None, is_package=True)
    spec.submodule_search_locations = [str(tmp_path)]
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: spec)
    assert hostinfo.cuda_build() is built


def test_measure_says_whether_its_compile_cache_was_warm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """`measure` reports 1.5 s and `run` 8.9 s for one cell's compile: measure compiles with inductor's kept cache,
    run with a fresh one a cell. measure says which it had: cold (an empty cache, as run's), or warm (the cache held
    earlier compiles; here a file put there stands for them)."""
    from tracker import cli

    cache = tmp_path / "inductor"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))
    argv = ["measure", "--preset", "tiny", "--workload", "llm_rmsnorm", "--mode", "eager", "--rep-ms", "5",
            "--warmup-ms", "1"]
    for before, words in (("", f"cold cache {cache}, as run compiles each cell"),
                          ("earlier", f"warm cache {cache}: earlier compiles kept there can make it faster than "
                                      "run's, which compiles each cell with a fresh cache")):
        if before:
            cache.mkdir(exist_ok=True)
            (cache / "earlier").write_text(before)
        assert cli.main(argv) == 0
        (line,) = [x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("compile ")]
        assert line.endswith(f" s (the first call; {words})"), line
    assert cli.main([*argv, "--json"]) == 0
    assert '"warm": true' in capsys.readouterr().out


def test_the_error_is_the_same_computed_a_chunk_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    gen = torch.Generator().manual_seed(0)
    ref = torch.randn(1000, generator=gen, dtype=torch.float32).to(torch.bfloat16)
    out = (ref.float() + 1e-2 * torch.randn(1000, generator=gen)).to(torch.bfloat16)
    out[10], ref[900] = float("inf"), float("inf")  # an element infinite on either side is left out
    whole = measure.relative_error(out, ref)
    monkeypatch.setattr(measure, "COMPARE_CHUNK", 64)
    chunked = measure.relative_error(out, ref)
    finite = torch.isfinite(out.float()) & torch.isfinite(ref.float())
    direct = float(torch.linalg.vector_norm((out.float() - ref.float())[finite])
                   / torch.linalg.vector_norm(ref.float()[finite]))
    assert whole[0] == pytest.approx(direct, rel=1e-6) and chunked[0] == pytest.approx(direct, rel=1e-6)
    assert not whole[1] and not chunked[1]


def test_a_nan_in_any_chunk_fails_unless_eager_has_one_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(measure, "COMPARE_CHUNK", 16)
    ref = torch.ones(100)
    out = ref.clone()
    out[99] = float("nan")  # in the last chunk
    assert measure.relative_error(out, ref)[1]
    assert not measure.compare_outputs(out, ref)[0]
    ref2 = ref.clone()
    ref2[3] = float("nan")  # eager's NaN in another chunk
    assert not measure.relative_error(out, ref2)[1]
