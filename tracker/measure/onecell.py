"""`compile-baselines measure`: one cell measured in this process, without asv, as a table's rows or as JSON.

Its compile time is the first call's, with this process's compile caches: inductor's default one is kept between
processes, so a cell compiled before compiles again faster than `run` compiles it (a fresh cache per cell unless
--warm-cache: cold compile times). The output says whether the cache held anything before the cell was measured.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tracker.measure.harness import CellResult, Settings, measure_cell


@dataclass(frozen=True)
class Measured:
    """A cell measured in this process, and the compile cache it compiled with (`warm`: it held files before)."""

    result: CellResult
    cache: Path
    warm: bool

    def as_json(self, all_samples: bool = False) -> dict[str, object]:
        """The result's fields, the sample count (every sample too with `all_samples`) and the compile cache."""
        return _as_json(self.result, all_samples) | {"compile_cache": {"dir": str(self.cache), "warm": self.warm}}

    def rows(self, cell: str) -> list[tuple[str, str]]:
        """The result as (label, value) rows of a table, `cell` naming it."""
        return _rows(self.result, cell, self.cache, self.warm)


def measure(preset: str, workload: str, mode: str, device: str | None, settings: Settings) -> Measured:
    """The cell measured in this process (measure_cell: never raises for a failed cell). `mode`: a compile mode or a
    candidate's `kernel:NAME`. Unknown names raise."""
    cache = compile_cache()
    warm = cache.is_dir() and any(cache.iterdir())  # before this cell compiles into it
    return Measured(measure_cell(preset, workload, mode, device=device, settings=settings), cache, warm)


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
