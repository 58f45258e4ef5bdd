"""How close a cell comes to the GPU's roofline: the work a workload declares (FLOP, and the bytes a perfect kernel
must move), the GPU's datasheet peaks, and the achieved throughput of the resource that bounds the instance."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cache


@dataclass(frozen=True)
class GpuPeak:
    name: str
    bandwidth: float  # bytes/s
    flops: float  # FLOP/s, dense BF16 (every workload runs in BF16)
    source: str


# Datasheet figures, matched against torch.cuda.get_device_name(). Only exact products: an H100 PCIe or NVL
# has other peaks, and a wrong peak is worse than none.
GPU_PEAKS: tuple[tuple[str, GpuPeak], ...] = (
    (r"H100 80GB HBM3$", GpuPeak(
        "H100 SXM5 80GB", 3.35e12, 989.4e12,
        "NVIDIA H100 Tensor Core GPU datasheet, H100 SXM: 3.35 TB/s HBM3, 989.4 TFLOP/s dense BF16 "
        "(1,979 with sparsity)")),
    (r"H200$", GpuPeak(
        "H200 SXM 141GB", 4.8e12, 989.4e12,
        "NVIDIA H200 Tensor Core GPU datasheet, H200 SXM: 4.8 TB/s HBM3e, 989.4 TFLOP/s dense BF16 "
        "(1,979 with sparsity)")),
)


def gpu_peak(gpu: str | None) -> GpuPeak | None:
    for pattern, peak in GPU_PEAKS:
        if gpu and re.search(pattern, gpu.strip()):
            return peak
    return None


@dataclass(frozen=True)
class Work:
    flops: float  # FLOP of one call
    bytes: float  # bytes a perfect kernel must move

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else math.inf


@cache
def declared_work(workload: str, preset: str) -> Work | None:
    """The workload's own declaration of its work (None for names the registry does not know)."""
    from workloads import registry  # the workloads import torch: only a page with rows needs them

    try:
        w = registry.get(workload)
        p = w.preset(preset)
    except KeyError:
        return None
    return Work(float(w.flops(p)), float(w.min_bytes(p)))


@dataclass(frozen=True)
class Throughput:
    text: str  # "2.41 TB/s" or "812 TFLOP/s": the resource that bounds this instance on this GPU
    pct_of_peak: float | None  # of that resource's peak; None without peak figures (CPU, unknown GPU)
    detail: str


def _si(value: float, unit: str) -> str:
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def throughput(work: Work | None, median_ms: float | None, peak: GpuPeak | None) -> Throughput | None:
    """Achieved bandwidth or FLOP/s of one cell. With peaks, the figure shown is the one of the resource that
    bounds the instance (its intensity against the GPU's ridge point), so its % is the % of the roofline."""
    if work is None or not median_ms or median_ms <= 0:
        return None
    s = median_ms / 1e3
    bw, fl = work.bytes / s, work.flops / s
    detail = f"{_si(bw, 'B/s')}, {_si(fl, 'FLOP/s')}; {work.intensity:.3g} FLOP/byte"
    if peak is None:
        memory_bound = work.intensity < 10  # no ridge point known: show what the kernel mostly does
        return Throughput(_si(bw, "B/s") if memory_bound else _si(fl, "FLOP/s"), None, detail)
    if work.intensity < peak.flops / peak.bandwidth:
        return Throughput(_si(bw, "B/s"), 100 * bw / peak.bandwidth, detail + " (memory-bound)")
    return Throughput(_si(fl, "FLOP/s"), 100 * fl / peak.flops, detail + " (compute-bound)")


__all__ = ["GPU_PEAKS", "GpuPeak", "Throughput", "Work", "declared_work", "gpu_peak", "throughput"]
