"""A run's timeline, read back from its cell store: per GPU over time, what held the lock and what waited for it,
what was creating its CUDA context, compiling or timing, and where the start-up ramp and the tail were.

Each measurement records when it was asked for (`launched_at`), began and ended (`started_at`, `ended_at`, seconds
since the epoch), when each phase began (`phase_at`, after started_at; `phase_s` its seconds) and its holds of the
GPU lock (`lock_spans`: asked, got, released, after started_at) (tracker.runner.worker, tracker.measure.harness).
Measurements stored before these fields have no timeline. `tools/bench_runner.py phases` prints it, and
`tools/simulate_gpus.py` reads a simulated run the same way.

The ramp of a GPU lasts until its first compiled measurement is ready to time (its warm-up begins); its tail begins
when the measurements in flight on it fall below half their most for good (the run has run out of work for it). The
middle is what lies between: how busy the lock is there says what the scheduler achieved once under way.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from tracker.measure.cellresult import CellResult
from workloads.modes import BY_NAME


@dataclass(frozen=True)
class Measurement:
    """One stored measurement on the run's clock (seconds after the run's first launch)."""

    gpu: str
    label: str
    launched: float
    started: float
    ended: float
    phases: dict[str, tuple[float, float]]  # name -> (start, end)
    lock: list[tuple[float, float, float]]  # asked, got, released
    compiled: bool


def measurements(records: Iterable[CellResult]) -> list[Measurement]:
    """The measurements that carry a timeline, on one clock from the first launch."""
    timed = [r for r in records if isinstance(r.started_at, (int, float)) and r.ended_at]
    if not timed:
        return []
    t0 = min(r.launched_at or r.started_at or 0.0 for r in timed)
    out = []
    for r in timed:
        s, seconds = (r.started_at or 0.0) - t0, r.phase_s or {}
        mode = BY_NAME.get(r.mode)
        replicate = r.replicate_number
        out.append(Measurement(
            str(r.gpu_index if r.has("gpu_index") else "-"), f"{r.preset} {r.workload} {r.mode}"
            + ("" if replicate == 1 else f" #{replicate}"), (r.launched_at or r.started_at or 0.0) - t0, s,
            (r.ended_at or 0.0) - t0,
            {n: (s + at, s + at + seconds.get(n, 0.0)) for n, at in (r.phase_at or {}).items()},
            [(s + a, s + g, s + e) for a, g, e in r.lock_spans or []],
            mode.compiled if mode is not None else seconds.get("first_call", 0.0) >= 1.0))
    return sorted(out, key=lambda m: m.launched)


def _overlap(a: float, b: float, lo: float, hi: float) -> float:
    return max(0.0, min(b, hi) - max(a, lo))


@dataclass(frozen=True)
class GpuSummary:
    gpu: str
    measurements: int
    start: float
    end: float
    lock_held_s: float
    ramp_end: float
    tail_start: float
    middle_held_s: float

    @property
    def busy(self) -> float:
        return self.lock_held_s / max(1e-9, self.end - self.start)

    @property
    def middle_busy(self) -> float:
        return self.middle_held_s / max(1e-9, self.tail_start - self.ramp_end)


def per_gpu(ms: list[Measurement]) -> list[GpuSummary]:
    """Each GPU's lock share over the run (from the run's first launch to its last end) and over its middle."""
    if not ms:
        return []
    start, end = min(m.launched for m in ms), max(m.ended for m in ms)
    out = []
    for gpu in sorted({m.gpu for m in ms}):
        mine = [m for m in ms if m.gpu == gpu]
        ramp_end = min((m.phases["warmup"][0] for m in mine if m.compiled), default=start)
        tail = _tail_start(mine, start, end)
        ramp_end = min(ramp_end, tail)
        held = [(g, e) for m in mine for _, g, e in m.lock]
        out.append(GpuSummary(gpu, len(mine), start, end, sum(e - g for g, e in held), ramp_end, tail,
                              sum(_overlap(g, e, ramp_end, tail) for g, e in held)))
    return out


def _tail_start(mine: list[Measurement], start: float, end: float) -> float:
    """When the measurements in flight fell below half their most for good."""
    events = sorted([(m.launched, 1) for m in mine] + [(m.ended, -1) for m in mine])
    level = most = 0
    levels = []
    for t, d in events:
        level += d
        most = max(most, level)
        levels.append((t, level))
    tail = end
    for t, level in reversed(levels):
        if level >= most / 2:
            break
        tail = t
    return max(start, tail)


@dataclass(frozen=True)
class Bin:
    gpu: str
    start: float
    lock_busy: float  # share of the bin the lock was held
    waiting: float  # processes waiting for the lock, on average
    init: float  # processes creating their CUDA context (or waiting for their turn), on average
    compiling: float  # processes in their first call of a compiled mode, on average
    in_flight: float  # processes of the GPU, on average


def bins(ms: list[Measurement], width: float) -> list[Bin]:
    """Each GPU's activity in bins of `width` seconds from the run's first launch."""
    if not ms:
        return []
    end = max(m.ended for m in ms)
    out = []
    for gpu in sorted({m.gpu for m in ms}):
        mine = [m for m in ms if m.gpu == gpu]
        lo = 0.0
        while lo < end:
            hi = lo + width

            def share(spans: Iterable[tuple[float, float]], lo: float = lo, hi: float = hi) -> float:
                return sum(_overlap(a, b, lo, hi) for a, b in spans) / width

            init = [(m.started, m.phases["cuda_init"][1]) for m in mine if "cuda_init" in m.phases]
            compiles = [m.phases["first_call"] for m in mine if m.compiled and "first_call" in m.phases]
            out.append(Bin(gpu, lo, share((g, e) for m in mine for _, g, e in m.lock),
                           share((a, g) for m in mine for a, g, _ in m.lock), share(init), share(compiles),
                           share((m.launched, m.ended) for m in mine)))
            lo = hi
    return out


def report(ms: list[Measurement], width: float | None = None) -> list[str]:
    """The lines `tools/bench_runner.py phases` prints of a run's timeline."""
    if not ms:
        return ["no timeline: these measurements were stored before the runner recorded when they ran"]
    summaries = per_gpu(ms)
    run = summaries[0].end - summaries[0].start
    lines = [f"timeline: {len(ms)} measurements over {run:.0f} s (first launch to last end); lock busy per GPU over "
             f"the run and over its middle (after the ramp, before the tail):"]
    for s in summaries:
        lines.append(f"  GPU {s.gpu}: {s.measurements} measurements, lock held {s.lock_held_s:.0f} s = {s.busy:.0%} "
                     f"of the run; ramp to {s.ramp_end:.0f} s, tail from {s.tail_start:.0f} s; middle "
                     f"{s.middle_busy:.0%} busy")
    launch_gap = [m.started - m.launched for m in ms]
    lines.append(f"  asked for to started (the fork): median {statistics.median(launch_gap):.2f} s, "
                 f"max {max(launch_gap):.2f} s")
    width = width or max(5.0, round(run / 24))
    table = bins(ms, width)
    gpus = [s.gpu for s in summaries]
    lines.append(f"per GPU over time, {width:g} s a row: the lock's busy share; on average, processes waiting for "
                 "the lock (w), starting CUDA (c), compiling (k), in flight (n)")
    lines.append(" " * 8 + "".join(f"| GPU {g:<27}" for g in gpus))
    for lo in sorted({b.start for b in table}):
        row = {b.gpu: b for b in table if b.start == lo}
        lines.append(f"{lo:5.0f} s " + "".join(
            f"| {row[g].lock_busy:4.0%} w{row[g].waiting:4.1f} c{row[g].init:4.1f} k{row[g].compiling:4.1f} "
            f"n{row[g].in_flight:4.1f} " for g in gpus))
    return lines
