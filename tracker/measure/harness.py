"""Measure one cell = (preset, workload, mode): compile, warm up, time, check against eager.

The study's procedure: seed, build inputs, `torch._dynamo.reset()`, `torch.compile(fn,
mode=MODE, dynamic=False)` (the mode's backend and options: workloads.modes), time the first call as compile
seconds, 20 warm-up calls, synchronize, then `triton.testing.do_bench(warmup=100, rep=1000)`. On a CPU-only
host a CPU timer with the same result shape (all samples, in ms) stands in for do_bench. A cell that fails returns
a failed result; it never raises.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import math
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from tracker.measure.cellresult import FAILED, OK, SKIPPED, CellResult
from tracker.measure.fingerprint import compiled_fingerprint, loaded_modules
from tracker.measure.hostinfo import host_info
from tracker.measure.settings import Settings
from tracker.stats import quantile
from workloads import catalog, modes, names, registry
from workloads.kernels import registry as kernel_registry
from workloads.presets import Preset
from workloads.shapes import Shape
from workloads.spec import Workload


class SharedFloor(Protocol):
    """Where a run keeps its launch floor (the cell store: tracker.store.cells.CellStore)."""

    def launch_floor(self) -> float | None: ...

    def set_launch_floor(self, launch_us: float) -> float: ...


class CellTimeout(Exception):
    pass


class IncorrectOutput(Exception):
    """The output disagrees with eager's beyond tolerance: the cell fails with "incorrect: ..." as its reason."""


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise CellTimeout after `seconds` (main thread only; elsewhere the runner's process limit applies)."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum: int, frame: Any) -> None:
        raise CellTimeout(f"time limit of {seconds:g} s exceeded")

    old = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def cpu_bench(call: Callable[[], Any], warmup_ms: float, rep_ms: float, min_samples: int = 5) -> list[float]:
    """do_bench's shape on a CPU: warm up for `warmup_ms`, then time single calls for `rep_ms` (ms each)."""
    end = time.perf_counter() + warmup_ms / 1e3
    call()
    while time.perf_counter() < end:
        call()
    samples: list[float] = []
    end = time.perf_counter() + rep_ms / 1e3
    while time.perf_counter() < end or len(samples) < min_samples:
        t0 = time.perf_counter()
        call()
        samples.append((time.perf_counter() - t0) * 1e3)
    return samples


FLUSH_BYTES = 256 * 2**20  # do_bench's L2 flush buffer (triton's get_empty_cache_for_benchmark)
HOST_HEADROOM = 2.0  # the GPU's work per timed call (flush + call) is kept at least this many times the host's
LOOP_US = 10.0  # do_bench's own host work per timed call: the flush launch and two event records
MAX_FLUSH = 8


def flush_multiple(host_us: float, flush_us: float) -> int:
    """How many of do_bench's flush buffers to write before each timed call.

    do_bench flushes L2 (FLUSH_BYTES) and then records an event, calls, records another. While the host issues
    a call faster than the GPU flushes, the host runs ahead and the events time the GPU alone. When the host is
    slower (compiled wrappers, CUDA-graph bookkeeping and eager op chains), the events also time part of the
    host's work, differently in every process. A flush that outlasts the host's work twice over keeps the figure
    the GPU's time, which is what do_bench gives on a fast host (README, "What it measures", has the figures)."""
    return max(1, min(MAX_FLUSH, math.ceil(HOST_HEADROOM * (host_us + LOOP_US) / flush_us)))


def affordable_flush(wanted: int, free_bytes: int) -> int:
    """At most what fits in free GPU memory with 1 GiB to spare (other cells' tensors share the GPU)."""
    return max(1, min(wanted, (free_bytes - 2**30) // FLUSH_BYTES))


def gpu_bench(call: Callable[[], Any], warmup_ms: float, rep_ms: float, flush: int = 1) -> list[float]:
    """do_bench(warmup, rep, return_mode="all"), with `flush` times its L2 flush buffer when asked."""
    import torch
    import triton
    import triton.testing

    driver = triton.runtime.driver.active
    if flush > 1:
        driver.get_empty_cache_for_benchmark = lambda: torch.empty(flush * FLUSH_BYTES // 4, dtype=torch.int,
                                                                   device="cuda")
    try:
        return [float(t) for t in triton.testing.do_bench(call, warmup=warmup_ms, rep=rep_ms, return_mode="all")]
    finally:
        if flush > 1:
            del driver.get_empty_cache_for_benchmark


def bench(call: Callable[[], Any], device: str, warmup_ms: float, rep_ms: float, flush: int = 1) -> list[float]:
    return gpu_bench(call, warmup_ms, rep_ms, flush) if device == "cuda" else cpu_bench(call, warmup_ms, rep_ms)


def host_time_us(call: Callable[[], Any], calls: int = 50) -> float:
    """Host time per call, calls issued back to back without waiting for the GPU (it keeps up: the launch
    queue holds far more than `calls` calls' kernels)."""
    import torch

    t0 = time.perf_counter()
    for _ in range(calls):
        call()
    host = (time.perf_counter() - t0) / calls * 1e6
    torch.cuda.synchronize()
    return host


@functools.cache
def flush_time_us() -> float:
    """GPU time of one do_bench L2 flush on this device (measured once per process)."""
    import torch

    buf = torch.empty(FLUSH_BYTES // 4, dtype=torch.int, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    buf.zero_()
    start.record()
    for _ in range(20):
        buf.zero_()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 20 * 1e3


_LAUNCH_US: dict[str, float] = {}


def launch_overhead_us(device: str) -> float:
    """Median time of a one-element in-place add under the cell timer: the host's launch floor.

    Eager chains of small kernels and sub-20-us compiled cells are bound by it, so results from
    different hosts are only comparable with it recorded (measured once per process)."""
    if device not in _LAUNCH_US:
        import torch

        x = torch.zeros(1, device=device)
        samples = bench(lambda: x.add_(1), device, warmup_ms=10, rep_ms=50)
        _LAUNCH_US[device] = quantile(samples, 0.5) * 1e3
    return _LAUNCH_US[device]


def init_cuda() -> None:
    """Create the CUDA context and the cuBLAS handle: host work of a few hundred ms and no kernels, so it
    is done before taking the GPU lock rather than under it."""
    import torch

    torch.empty(1, device="cuda")
    torch.cuda.current_blas_handle()


def _start_cuda(result: CellResult, gate: Callable[[], contextlib.AbstractContextManager[Any]]) -> bool:
    """Whether this host has a CUDA device; where it has, its driver, context and cuBLAS handle are started here, in
    the phase cuda_init, everything that touches the driver first included (the device check, host_info's device
    name). `gate`: the turn to do it among the processes of this GPU (tracker.measure.cudainit), its wait the phase
    cuda_init_wait."""
    import torch

    with _phase(result, "cuda_init", gate, wait="cuda_init_wait"):
        if not torch.cuda.is_available():
            return False
        init_cuda()
        result.host = host_info("cuda").as_dict()
    return True


def host_calls(per_call_ms: float | None, budget_ms: float = 20.0) -> int:
    """Calls for host_time_us: about `budget_ms` of them, 5 to 50 (each one's GPU work is waited for)."""
    return 50 if not per_call_ms else max(5, min(50, int(budget_ms / per_call_ms)))


@contextlib.contextmanager
def _phase(result: CellResult, name: str,
           guard: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
           wait: str | None = None) -> Iterator[None]:
    """Record the seconds `name` took inside `guard` (the GPU lock: its wait is not counted; `wait`: the phase that
    counts it) and when it began."""
    asked = time.perf_counter()
    with guard():
        t0 = time.perf_counter()
        if wait is not None:
            result.phase_s[wait] = round(t0 - asked, 4)
        if result.started_at is not None:
            result.phase_at[name] = round(time.time() - result.started_at, 3)
        try:
            yield
        finally:
            result.phase_s[name] = round(time.perf_counter() - t0, 4)


def pick_device(device: str | None = None) -> str:
    import torch

    return device or ("cuda" if torch.cuda.is_available() else "cpu")


def _flatten(out: Any) -> list[Any]:
    if isinstance(out, (tuple, list)):
        return [y for x in out for y in _flatten(x)]
    return [out]


# Elements compared at a time, so the error's temporaries stay small whatever the output's size: compared at once, a
# large output's masks and copies came to many times its size, a peak the scheduler then reserved for every compile.
COMPARE_CHUNK = 2**24


def relative_error(out: Any, ref: Any) -> tuple[float, bool]:
    """The relative L2 error of float tensor `out` against `ref` over the elements finite in both, and whether `out`
    has a NaN where `ref` has none, computed a chunk at a time (COMPARE_CHUNK)."""
    import torch

    o, r = out.detach().reshape(-1), ref.detach().reshape(-1)
    diff2 = scale2 = 0.0
    o_nan = r_nan = False
    for k in range(0, r.numel(), COMPARE_CHUNK):
        o32, r32 = o[k:k + COMPARE_CHUNK].float(), r[k:k + COMPARE_CHUNK].float()
        o_nan = o_nan or bool(torch.isnan(o32).any())
        r_nan = r_nan or bool(torch.isnan(r32).any())
        finite = torch.isfinite(r32) & torch.isfinite(o32)
        diff2 += float(torch.linalg.vector_norm(torch.where(finite, o32 - r32, 0.0), dtype=torch.float64) ** 2)
        scale2 += float(torch.linalg.vector_norm(torch.where(finite, r32, 0.0), dtype=torch.float64) ** 2)
    return math.sqrt(diff2) / max(math.sqrt(scale2), 1e-30), o_nan and not r_nan


def compare_outputs(out: Any, ref: Any) -> tuple[bool, float, str]:
    """Compiled output vs eager output: (correct, error figure, reason when not).

    Floats: relative L2 error <= 2e-2 for 16-bit types (inductor computes in fp32 where eager rounds every
    op to bf16, so a few ulps of drift is expected), 1e-4 for fp32. Integers (indices): at most 5% of
    elements differ, because bf16 ties make equally valid indices. A NaN where eager has none fails."""
    import torch

    outs, refs = _flatten(out), _flatten(ref)
    if len(outs) != len(refs):
        return False, math.inf, f"output count {len(outs)} != eager's {len(refs)}"
    worst = 0.0
    for i, (o, r) in enumerate(zip(outs, refs, strict=True)):
        if not isinstance(r, torch.Tensor):
            if o != r:
                return False, math.inf, f"output {i}: {o!r} != eager's {r!r}"
            continue
        if not isinstance(o, torch.Tensor) or o.shape != r.shape or o.dtype != r.dtype:
            return False, math.inf, f"output {i}: shape/dtype differ from eager's {tuple(r.shape)} {r.dtype}"
        if r.dtype.is_floating_point:
            err, nan = relative_error(o, r)
            if nan:
                return False, math.inf, f"output {i}: NaN where eager has none"
            tol = 1e-4 if r.dtype == torch.float32 or r.dtype == torch.float64 else 2e-2
        else:
            err = float((o != r).float().mean()) if r.numel() else 0.0
            tol = 0.05
        worst = max(worst, err)
        if err > tol:
            return False, err, f"output {i} differs from eager: error {err:.3g} > tolerance {tol:g}"
    return True, worst, ""


def _clone(out: Any) -> Any:
    # CUDA-graph modes reuse output buffers on the next replay: keep a private copy to compare.
    if isinstance(out, (tuple, list)):
        return type(out)(_clone(x) for x in out)
    return out.detach().clone() if hasattr(out, "detach") else out


def _sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def _reason(exc: BaseException) -> str:
    import torch

    if isinstance(exc, torch.cuda.OutOfMemoryError):
        return "out of memory: " + str(exc).splitlines()[0][:300]
    if isinstance(exc, (CellTimeout, IncorrectOutput)):
        return str(exc)
    lines = [ln for ln in str(exc).splitlines() if ln.strip()]
    return f"{type(exc).__name__}: {lines[0][:300] if lines else ''}".rstrip(": ")


def measure_cell(
    preset: str,
    workload: str,
    mode: str,
    device: str | None = None,
    settings: Settings = Settings(),
    exclusive: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
    fn_override: Callable[..., Any] | None = None,
    launch_us: float | None = None,
    cuda_init_gate: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
    shared_floor: SharedFloor | None = None,
) -> CellResult:
    """Measure one cell in this process. Unknown names raise KeyError; anything else is a failed result.

    `exclusive` guards the GPU work that must not overlap another process's timing (input building, the
    eager reference, the launch floor, an eager first call, warm-up and timing); the parallel runner passes its
    cross-process GPU lock. The CUDA context is created before it (no kernels). The first call of a compiled
    mode runs outside it: that call still compiles, and the GPU would idle while other cells wait for the lock
    (docs/runner.md).
    A mode "kernel:NAME" measures the registered candidate NAME of the workload (workloads.kernels.registry) instead of
    a compile mode; a candidate that does not support the device is skipped. `fn_override` times any other
    callable with the workload's signature on its inputs, in eager, under `mode` as its label. `launch_us`: this
    run's launch floor when another cell measured it already (the runner's workers share one); `shared_floor`: where
    that floor is kept, asked again once the GPU is this cell's, so that of the cells that started together only the
    first measures it, under the GPU lock; `cuda_init_gate`: see `_start_cuda`."""
    import torch

    spec = registry.get(workload)
    catalog.check_preset(preset)
    kernel = kernel_registry.candidate_name(mode)
    candidate = kernel_registry.get(workload, kernel) if kernel is not None and fn_override is None else None
    if fn_override is None and candidate is None:
        names.check_mode(mode)
    device = pick_device(device)
    result = CellResult(preset, workload, mode, device, FAILED, started_at=time.time())
    start = time.perf_counter()
    if why := _not_here(spec, preset, device, candidate):
        return _skip(result, why, start)
    fn_override = candidate.fn if candidate is not None else fn_override
    threads = torch.get_num_threads()
    try:
        if device == "cpu":  # before anything compiles: inductor fixes its kernels' thread count then
            torch.set_num_threads(settings.cpu_threads)
            result.cpu_threads = settings.cpu_threads
            result.host = host_info(device).as_dict()
        with time_limit(settings.time_limit_s):
            if device == "cuda" and not _start_cuda(result, cuda_init_gate):
                return _skip(result, "no CUDA device", start)
            result.launch_us = launch_us if launch_us is not None else _launch_floor(result, device, exclusive,
                                                                                       shared_floor)
            _measure_into(result, spec, spec.preset(preset), mode, device, settings, exclusive, fn_override)
    except Exception as exc:
        result.status, result.reason = FAILED, _reason(exc)
    finally:
        torch.set_num_threads(threads)
        gc.collect()
        if device == "cuda":
            torch.cuda.empty_cache()
    result.wall_s = time.perf_counter() - start
    return result


def _launch_floor(result: CellResult, device: str, exclusive: Callable[[], Any],
                  shared: SharedFloor | None) -> float:
    """The run's launch floor: the one `shared` keeps by the time this cell holds the GPU, else measured here (and
    kept there for the cells after it)."""
    with _phase(result, "launch_floor", exclusive):
        if shared is not None and (kept := shared.launch_floor()) is not None:
            return kept
        measured = launch_overhead_us(device)
        if shared is not None:
            with contextlib.suppress(Exception):  # the worker keeps it after the cell, and says what failed
                return shared.set_launch_floor(measured)
        return measured


# The most a cell's inputs and outputs may take on a CPU: the study's full-size presets reach 2-4 GiB in its four
# vocabulary-sized prefill workloads, where one call takes seconds on a CPU and the eager reference doubles the
# memory; the rest of theirs take at most 512 MiB (prefill llm_qk_norm).
CPU_MAX_BYTES = 1 << 30


def too_large_for_cpu(spec: Workload, p: Preset | Shape) -> str | None:
    """Why a cell of preset `p` is not measured on a CPU (its tensors exceed CPU_MAX_BYTES), or None: decided by the
    size of the cell's inputs and outputs, not by the preset's name. A builder that cannot say (it fails on the meta
    device) leaves it to the preset's declaration (`needs_cuda`)."""
    try:
        size = spec.tensor_bytes(p)
    except Exception:
        return f"preset {p.name} is declared for a CUDA device (needs_cuda)" if p.needs_cuda else None
    if size <= CPU_MAX_BYTES:
        return None
    return (f"preset {p.name}: {spec.name}'s inputs and outputs take {size / 2**30:.1f} GiB, more than the "
            f"{CPU_MAX_BYTES / 2**30:g} GiB a CPU measures; measure it on a CUDA device")


def _not_here(spec: Workload, preset: str, device: str, candidate: Any) -> str | None:
    """Why the cell is not measured on `device`, or None: a preset the workload does not have, tensors too large
    for a CPU, a candidate that does not run here. Whether a CUDA device is there is asked later (`_start_cuda`)."""
    if why := spec.not_measured_in(preset):
        return why
    if device != "cuda" and (why := too_large_for_cpu(spec, spec.preset(preset))):
        return why
    return candidate.skip_reason(device) if candidate is not None else None


def _skip(result: CellResult, reason: str, start: float) -> CellResult:
    result.status, result.reason, result.wall_s = SKIPPED, reason, time.perf_counter() - start
    return result


def _warm_up(result: CellResult, call: Callable[[], Any], device: str, settings: Settings) -> int:
    """The direct calls before timing; on a GPU then the host's time per call, and the L2 flushes each timed call
    gets (`flush_multiple`, as many as memory affords), returned. The caller holds the cell's GPU lock."""
    with _phase(result, "warmup"):
        t0 = time.perf_counter()
        for _ in range(settings.warmup_calls):
            call()
        _sync(device)
        per_call_ms = (time.perf_counter() - t0) * 1e3 / settings.warmup_calls if settings.warmup_calls else None
    if device != "cuda":
        return 1
    import torch

    with _phase(result, "host_time"):
        result.host_us = host_time_us(call, host_calls(per_call_ms))
    wanted = flush_multiple(result.host_us, flush_time_us())
    flush = affordable_flush(wanted, torch.cuda.mem_get_info()[0])
    result.flush_capped = flush < wanted
    result.flush_mib = flush * FLUSH_BYTES // 2**20
    result.process_peak_bytes = int(torch.cuda.max_memory_reserved())  # before the timed region's peak is reset
    torch.cuda.reset_peak_memory_stats()
    return flush


def _measure_into(result: CellResult, spec: Workload, p: Preset | Shape, mode: str, device: str,
                  settings: Settings, exclusive: Callable[[], Any], fn_override: Callable[..., Any] | None) -> None:
    import torch

    with _phase(result, "inputs", exclusive):
        fn, args, kwargs = spec.build(p, device)
        ref = _clone(fn(*args, **kwargs))
        _sync(device)
    m = modes.BY_NAME.get(mode)  # None: a kernel under test's label
    if fn_override is None and m.compiled:  # only before a compile: on a GPU the reset imports inductor
        torch._dynamo.reset()
    before = loaded_modules()
    if fn_override is not None:
        call_fn = fn_override
    elif not m.compiled:
        call_fn = fn
    else:
        call_fn = torch.compile(fn, dynamic=False, **m.compile_options())
    mark_step = settings.cudagraph_mark_step and device == "cuda" and m is not None and m.cudagraphs

    def call() -> Any:
        if mark_step:
            torch.compiler.cudagraph_mark_step_begin()
        return call_fn(*args, **kwargs)

    # Eager compiles nothing: its first call runs its kernels, so it holds the lock like the rest.
    compiles = fn_override is not None or m.compiled
    with _phase(result, "first_call", contextlib.nullcontext if compiles else exclusive):
        out = _clone(call())
        _sync(device)
    result.compile_s = result.phase_s["first_call"]
    if compiles:
        result.correct, result.error_vs_eager, why = compare_outputs(out, ref)
        if not result.correct:
            raise IncorrectOutput(f"incorrect: {why}")
    else:
        result.correct, result.error_vs_eager = True, 0.0
    del out, ref
    with exclusive():
        flush = _warm_up(result, call, device, settings)
        with _phase(result, "timing"):
            samples = bench(call, device, settings.warmup_ms, settings.rep_ms, flush)
        if device == "cuda":
            result.peak_mem_bytes = int(torch.cuda.max_memory_allocated())
            result.process_peak_bytes = max(result.process_peak_bytes or 0, int(torch.cuda.max_memory_reserved()))
    if fn_override is None and m.compiled:
        result.fingerprint = compiled_fingerprint(before)
    result.samples_ms = samples
    result.median_ms = quantile(samples, 0.5)
    result.p25_ms = quantile(samples, 0.25)
    result.p99_ms = quantile(samples, 0.99)
    result.status = OK
