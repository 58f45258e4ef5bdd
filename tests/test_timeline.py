"""A run's timeline from its cell store (tracker.runner.timeline): per GPU, the lock's busy share over the run and
over its middle, where the ramp ends and the tail begins, and what each GPU did over time. The records below are
constructed (their times made up to make each figure easy to check), in the form the worker stores."""

from __future__ import annotations

from tracker.measure.cellresult import CellResult
from tracker.runner import timeline

T0 = 1_800_000_000.0  # seconds since the epoch


def constructed(gpu: str, mode: str, launched: float, first_call: float, compile_s: float, warmup: float,
                end: float, holds: list[tuple[float, float, float]], workload: str = "llm_rmsnorm") -> dict:
    """A measurement launched `launched` s into the run, started at once; its holds (asked, got, released) and
    phases in seconds after its start."""
    return {"preset": "prefill", "workload": workload, "mode": mode, "replicate": 1, "gpu_index": gpu,
            "launched_at": T0 + launched, "started_at": T0 + launched, "ended_at": T0 + end,
            "phase_at": {"cuda_init": 0.0, "first_call": first_call, "warmup": warmup},
            "phase_s": {"cuda_init": 0.5, "first_call": compile_s, "warmup": 0.1},
            "lock_spans": [list(h) for h in holds]}


RECORDS = [
    # GPU 0: an eager cell holds the lock 1-3 s; another asks at 5 s and holds 8-10 s; a compile is done at 10 s
    # and holds 10-12 s
    constructed("0", "eager", 0.0, 1.0, 0.0, 2.0, 3.0, [(1.0, 1.0, 3.0)], "a"),
    constructed("0", "default", 0.0, 1.0, 9.0, 10.0, 12.0, [(10.0, 10.0, 12.0)], "b"),
    constructed("0", "eager", 4.0, 1.0, 0.0, 4.0, 10.0, [(1.0, 4.0, 6.0)], "c"),  # asked at 5 s, waited to 8 s
    # GPU 1: one compile done at 6 s, holding 6-8 s
    constructed("1", "default", 0.0, 1.0, 5.0, 6.0, 8.0, [(6.0, 6.0, 8.0)], "d"),
]


def test_each_gpu_s_lock_share_over_the_run_and_its_middle() -> None:
    ms = timeline.measurements([CellResult.from_json(r) for r in RECORDS])
    assert [m.compiled for m in ms] == [False, True, True, False]  # by mode: eager compiles nothing
    zero, one = timeline.per_gpu(ms)
    assert (zero.start, zero.end) == (0.0, 12.0) and zero.lock_held_s == 6.0 and zero.busy == 0.5
    assert zero.ramp_end == 10.0  # its first compile ready to time
    assert one.lock_held_s == 2.0 and one.ramp_end == 6.0


def test_the_bins_show_waiting_and_compiling_processes() -> None:
    bins = {(b.gpu, b.start): b for b in timeline.bins(timeline.measurements([CellResult.from_json(
        r) for r in RECORDS]), 4.0)}
    assert bins[("0", 0.0)].lock_busy == 0.5  # held 1-3 of 0-4
    assert bins[("0", 4.0)].waiting == 0.75  # c waited 5-8: 3 s of the 4
    assert bins[("0", 4.0)].compiling == 1.0  # b compiled 1-10
    assert bins[("1", 8.0)].in_flight == 0.0


def test_a_store_without_timeline_says_so() -> None:
    untimed = CellResult.from_json({"preset": "prefill", "workload": "w", "mode": "eager"})
    assert timeline.report(timeline.measurements([untimed])) == [
        "no timeline: these measurements were stored before the runner recorded when they ran"]
    lines = timeline.report(timeline.measurements([CellResult.from_json(r) for r in RECORDS]), width=4.0)
    assert lines[0].startswith("timeline: 4 measurements over 12 s")
    assert lines[1].startswith("  GPU 0: 3 measurements, lock held 6 s = 50% of the run; ramp to 10 s")
