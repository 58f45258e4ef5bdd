"""`compile-baselines measure`: one cell measured in this process, without asv, printed as a table or as JSON.

Its compile time is the first call's, with this process's compile caches: inductor's default one is kept between
processes, so a cell compiled before compiles again faster than `run` compiles it (a fresh cache per cell unless
--warm-cache: cold compile times). The output says whether the cache held anything before the cell was measured.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tracker.measure.harness import CellResult, Settings, measure_cell
from tracker.measure.hostinfo import busy_warning


def measure_main(preset: str, workload: str, mode: str, device: str | None, settings: Settings, as_json: bool = False,
                 all_samples: bool = False) -> int:
    """Measure the cell and print it; exit 0 when it measured, 1 when it failed or was skipped. `mode`: a compile
    mode or a candidate's `kernel:NAME`; `all_samples`: with `as_json`, every sample too. Unknown names raise."""
    cache = compile_cache()
    warm = cache.is_dir() and any(cache.iterdir())  # before this cell compiles into it
    result = measure_cell(preset, workload, mode, device=device, settings=settings)
    if as_json:
        print(json.dumps(_as_json(result, all_samples) | {"compile_cache": {"dir": str(cache), "warm": warm}},
                         indent=1))
    else:
        for k, v in _rows(result, f"{preset} / {workload} / {mode}", cache, warm):
            print(f"{k:>13}  {v}")
    if result.status == "skipped":  # nothing measured: the work asked for was not done
        print(f"compile-baselines measure: skipped: {result.reason}", file=sys.stderr)
    elif result.device == "cpu" and (warning := busy_warning()):  # said of the timings just taken
        print(f"measure: warning: {warning}", file=sys.stderr)
    return 0 if result.ok else 1


def _as_json(result: CellResult, all_samples: bool) -> dict[str, object]:
    d = result.to_json()
    d["n_samples"] = len(d["samples_ms"])
    if not all_samples:
        d.pop("samples_ms")
    return d


def compile_cache() -> Path:
    """Inductor's compile cache this process compiles with (TORCHINDUCTOR_CACHE_DIR, else inductor's default)."""
    if os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
        return Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir

        return Path(cache_dir())
    except ImportError:  # another torch: its default, as inductor names it
        import getpass
        import tempfile

        return Path(tempfile.gettempdir()) / f"torchinductor_{getpass.getuser()}"


def _compile_words(result: CellResult, cache: Path, warm: bool) -> str:
    """The compile time and the cache it was compiled with: warm, it can be much faster than `run`'s."""
    how = (f"warm cache {cache}: earlier compiles kept there can make it faster than run's, which compiles each cell "
           "with a fresh cache" if warm else f"cold cache {cache}, as run compiles each cell")
    return f"{result.compile_s:.2f} s (the first call; {how})"


def _rows(result: CellResult, cell: str, cache: Path, warm: bool) -> list[tuple[str, str]]:
    rows = [("cell", f"{cell} on {result.device}"),
            ("status", result.status + (f" ({result.reason})" if result.reason else ""))]
    if result.ok:
        rows += [("median", f"{result.median_ms:.4f} ms"),
                 ("p25 / p99", f"{result.p25_ms:.4f} / {result.p99_ms:.4f} ms"),
                 ("samples", str(len(result.samples_ms))), ("compile", _compile_words(result, cache, warm)),
                 ("vs eager", f"correct (error {result.error_vs_eager:.2g})")]
        if result.peak_mem_bytes is not None:
            rows.append(("peak memory", f"{result.peak_mem_bytes / 2**20:.1f} MiB"))
    return [*rows, ("seconds", ", ".join(f"{k} {v:.3f}" for k, v in result.phase_s.items()) or "-"),
            ("launch floor", f"{result.launch_us:.1f} us" if result.launch_us else "-"),
            ("host", ", ".join(f"{k} {v}" for k, v in result.host.items() if k in ("gpu", "torch", "triton")))]
