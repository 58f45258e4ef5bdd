"""The scheduler (tracker.runner.schedule): which measurement starts next and on which GPU, from each measurement's
expected cost (tracker.runner.costs). The costs below are made up to make each rule visible, not measured; the
cost of a cell from a stored measurement is read from a committed H100 run (tests/fixtures/h100-aa6)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracker.measure.cellresult import CellResult
from tracker.runner.config import RunConfig
from tracker.runner.costs import PRIOR_RESERVE, Cost, Costs, expected_cost, from_record, prior
from tracker.runner.plan import CellId, Job, plan
from tracker.runner.remaining import next_replicate, pending
from tracker.runner.schedule import Scheduler, partition
from tracker.runner.workerenv import cpu_groups, timing_cpus
from tracker.store.cells import CellStore, RunKey

GiB = 2**30
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "h100-aa6" / "cells"


def cell(workload: str, mode: str = "default") -> CellId:
    return CellId("prefill", workload, mode)


def made_up(costs: dict[CellId, Cost]) -> Costs:
    """Costs as a cell store would give them: a cell's first and further measurements alike."""
    return Costs({(c.preset, c.workload, c.mode, further): cost for c, cost in costs.items()
                  for further in (False, True)})


def compile_(wall: float, lock: float = 1.0, peak: int | None = GiB) -> Cost:
    return Cost(wall_s=wall, lock_s=lock, compile_s=wall - 2.0, peak_bytes=peak, recorded=True)


def eager(lock: float = 1.0, peak: int | None = GiB) -> Cost:
    return Cost(wall_s=lock + 1.0, lock_s=lock, compile_s=0.0, peak_bytes=peak, recorded=True)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_each_gpu_begins_with_cells_that_compile_nothing_then_its_longest_compiles() -> None:
    costs = {cell("a"): compile_(60), cell("b"): compile_(50), cell("c"): compile_(10), cell("d"): compile_(8),
             cell("e", "eager"): eager(), cell("f", "eager"): eager(), cell("g", "eager"): eager(),
             cell("h", "eager"): eager()}
    schedule = Scheduler([Job(c) for c in costs], made_up(costs), gpus=1, workers=8, clock=Clock())
    started = [schedule.start() for _ in range(6)]
    # the ramp: nothing is near the lock yet, so two fillers; then the longest compiles, the fillers kept for later
    assert [(s.job.cell.workload, s.why) for s in started] == [
        ("e", "fill"), ("f", "fill"), ("a", "longest"), ("b", "longest"), ("c", "longest"), ("d", "longest")]
    schedule.finished(started[0])  # one filler done: one more keeps the lock fed while the compiles run
    assert schedule.start().why == "fill"


def test_a_gpu_whose_compile_nears_its_end_takes_the_next_compile_rather_than_a_second_filler() -> None:
    costs = {cell("a"): compile_(12), cell("b"): compile_(11), cell("c"): compile_(40),
             **{cell(w, "eager"): eager() for w in "efgh"}}

    def after_the_first_fillers(at: float) -> list[str]:
        clock = Clock()
        schedule = Scheduler([Job(c) for c in costs], made_up(costs), gpus=1, workers=4, clock=clock)
        first = [schedule.start() for _ in range(4)]
        assert [(s.job.cell.workload, s.why) for s in first] == [("e", "fill"), ("f", "fill"), ("c", "longest"),
                                                                ("a", "longest")]
        clock.now = at
        for s in first[:2]:
            schedule.finished(s)
        return [s.job.cell.workload for s in (schedule.start(), schedule.start())]

    assert after_the_first_fillers(0.0) == ["g", "h"]  # c and a compile for long yet: the lock needs fillers
    assert after_the_first_fillers(9.0) == ["g", "b"]  # a is about to need the lock: one filler is enough


def test_cells_go_to_the_gpus_longest_first_balancing_their_lock_work_and_stay_there() -> None:
    costs = {cell("a"): compile_(90, lock=6), cell("b"): compile_(80, lock=1), cell("c"): compile_(30, lock=2),
             cell("d"): compile_(20, lock=2), cell("e"): compile_(10, lock=2)}
    groups = partition(costs, made_up(costs), 2)
    assert groups == [[cell("a")], [cell("b"), cell("c"), cell("d"), cell("e")]]  # 6 s and 7 s of lock work
    assert partition(costs, made_up(costs), 2, compiles={cell("b"): 3}) == [
        [cell("b"), cell("c"), cell("d")], [cell("a"), cell("e")]]  # b's three compiles: the longest, 3 s of lock
    schedule = Scheduler([Job(c) for c in costs], made_up(costs), gpus=2, workers=10, clock=Clock())
    on = {s.job.cell.workload: s.gpu for s in iter(schedule.start, None)}
    assert on == {"a": 0, "b": 1, "c": 1, "d": 1, "e": 1}
    schedule.add([Job(cell("a"), 2)])
    assert schedule.start().gpu == 0  # a cell's further compile runs where its first did


def test_a_further_compile_starts_before_any_waiting_first_measurement() -> None:
    costs = {cell("a"): compile_(60), cell("b"): compile_(50), cell("c"): compile_(40)}
    schedule = Scheduler([Job(c) for c in costs], made_up(costs), gpus=1, workers=1, clock=Clock())
    a = schedule.start()
    assert schedule.start() is None  # every worker busy
    schedule.finished(a)
    schedule.add([Job(cell("a"), 2)])
    nxt = schedule.start()
    assert (nxt.job, nxt.why) == (Job(cell("a"), 2), "further")


def test_a_gpu_with_nothing_left_takes_the_longest_cell_not_started_from_the_busiest_gpu() -> None:
    costs = {cell("a"): compile_(90, lock=3), cell("b"): compile_(80, lock=3), cell("c"): compile_(30, lock=3),
             cell("d"): compile_(20)}
    schedule = Scheduler([Job(c) for c in costs], made_up(costs), gpus=2, workers=2, clock=Clock())
    a, b = schedule.start(), schedule.start()
    assert (a.gpu, b.gpu) == (0, 1)  # the other two wait: one worker a GPU
    schedule.finished(b)
    stolen = schedule.start()  # GPU 1's own cell is d, GPU 0 waits on a with c queued: GPU 1 takes d
    assert stolen.gpu == 1
    schedule.finished(stolen)
    again = schedule.start()
    assert (again.job.cell, again.gpu, again.why) == (cell("c"), 1, "stolen longest")


def test_cells_that_cannot_fit_together_in_a_gpu_s_memory_are_kept_apart() -> None:
    costs = {cell("big"): compile_(60, peak=40 * GiB), cell("huge"): compile_(50, peak=30 * GiB),
             cell("small"): compile_(40, peak=GiB)}
    budget = 60 * GiB  # big reserves 51 GiB, huge 38.5, small 2.25
    schedule = Scheduler([Job(c) for c in costs], made_up(costs), gpus=1, workers=4, budget=budget, clock=Clock())
    first, second = schedule.start(), schedule.start()
    assert (first.job.cell, second.job.cell) == (cell("big"), cell("small"))  # huge waits: it does not fit beside
    assert schedule.start() is None
    schedule.finished(first)
    assert schedule.start().job.cell == cell("huge")


def test_a_measurement_larger_than_the_budget_still_runs_alone() -> None:
    costs = {cell("vast"): compile_(60, peak=90 * GiB), cell("small"): compile_(40, peak=GiB)}
    schedule = Scheduler([Job(c) for c in costs], made_up(costs), gpus=1, workers=4, budget=70 * GiB, clock=Clock())
    vast = schedule.start()
    assert vast.job.cell == cell("vast") and schedule.start() is None
    schedule.finished(vast)
    assert schedule.start().job.cell == cell("small")


def test_measurements_run_again_alone_take_one_gpu_each_and_its_whole_memory() -> None:
    costs = {cell(w): compile_(10) for w in "abc"}
    schedule = Scheduler([Job(c) for c in costs], made_up(costs), gpus=2, workers=2, budget=70 * GiB, alone=True,
                         clock=Clock())
    one, two = schedule.start(), schedule.start()
    assert {one.gpu, two.gpu} == {0, 1} and one.reserve_bytes == two.reserve_bytes == 70 * GiB
    assert schedule.start() is None


def test_a_cell_s_further_compiles_run_together_once_its_first_is_in(tmp_path: Path) -> None:
    c = cell("llm_rmsnorm", "max-autotune")
    store = CellStore(tmp_path, RunKey("m", "c", "t"))
    ok = {"preset": c.preset, "workload": c.workload, "mode": c.mode, "status": "ok", "samples_ms": [0.1],
          "median_ms": 0.1, "compile_s": 1.0}
    one_at_a_time = RunConfig(store_root=tmp_path, machine="m", commit="c", replicates=4)
    two_at_once = RunConfig(store_root=tmp_path, machine="m", commit="c", replicates=4, together=2)
    store.put(CellResult.from_json({**ok, "replicate": 1}))
    assert next_replicate(Job(c, 1), CellResult.from_json(ok), one_at_a_time, store) == [Job(c, 2)]
    assert next_replicate(Job(c, 1), CellResult.from_json(ok), two_at_once, store) == [Job(c, 2), Job(c, 3)]
    store.put(CellResult.from_json({**ok, "replicate": 2}))  # 2 is in while 3 still runs: 4 follows, not 3 again
    assert next_replicate(Job(c, 2), CellResult.from_json(ok), two_at_once, store) == [Job(c, 4)]
    assert next_replicate(Job(c, 2), CellResult.from_json(ok), one_at_a_time, store) == [Job(c, 3)]


@pytest.mark.parametrize("mode", ["eager", "kernel:triton_rmsnorm"])
def test_a_cell_not_compiled_by_torch_compile_starts_all_its_compiles_at_once(tmp_path: Path, mode: str) -> None:
    # nothing of its first to reuse (no inductor, at most a Triton build): waiting for it costs a whole measurement
    c, compiled = cell("llm_rmsnorm", mode), cell("llm_rmsnorm", "default")
    store = CellStore(tmp_path, RunKey("m", "c", "t"))
    cfg = RunConfig(store_root=tmp_path, machine="m", commit="c", replicates=3, replicated_modes=None, together=2)
    assert sorted(pending([c, compiled], cfg, store)) == sorted([Job(c, 1), Job(c, 2), Job(c, 3), Job(compiled, 1)])
    ok = {"preset": c.preset, "workload": c.workload, "mode": mode, "status": "ok", "samples_ms": [0.1],
          "median_ms": 0.1, "compile_s": 1.0, "replicate": 1}
    store.put(CellResult.from_json(ok))
    assert next_replicate(Job(c, 1), CellResult.from_json(ok), cfg, store) == []  # 2 and 3 run already


def test_a_measurement_reserves_its_process_s_peak_where_recorded_not_only_its_timed_region_s() -> None:
    """The logits projection's prefill timed region peaked at 2-5 GiB on the H100 (the trial t12's cell stores), yet
    its compiles asked for 16 GiB more beside it and ran out of memory: the whole process's peak is what it needs."""
    path = next(FIXTURE.glob("*/*/torch-*/prefill/diff_unet_resblock/max-autotune.json"))
    record = json.loads(path.read_text())
    timed = from_record(CellResult.from_json(record))
    whole = from_record(CellResult.from_json({**record, "process_peak_bytes": record["peak_mem_bytes"] + 20 * 2**30}))
    assert whole.peak_bytes == record["peak_mem_bytes"] + 20 * 2**30 and whole.reserve_bytes > timed.reserve_bytes
    less = from_record(CellResult.from_json({**record, "process_peak_bytes": 1}))
    assert less.peak_bytes == record["peak_mem_bytes"]  # the larger of the two


def test_a_run_learns_each_cell_s_cost_from_its_own_measurements_as_they_finish() -> None:
    path = next(FIXTURE.glob("*/*/torch-*/prefill/diff_unet_resblock/max-autotune.json"))
    record = CellResult.from_json({**json.loads(path.read_text()), "process_peak_bytes": 30 * 2**30})
    costs, unet = Costs(), cell("diff_unet_resblock", "max-autotune")
    assert not costs.of(unet, 2).recorded
    costs.learn(record)  # its first compile is in: its next ones reserve what it held
    assert costs.of(unet, 2).peak_bytes == 30 * 2**30
    costs.learn(CellResult.from_json({**record.to_json(), "status": "failed", "reason": "out of memory"}))
    assert costs.of(unet).peak_bytes == 30 * 2**30  # a failure teaches nothing


def test_a_cell_s_cost_is_what_the_store_recorded_without_its_run_s_waits() -> None:
    path = next(FIXTURE.glob("*/*/torch-*/prefill/diff_unet_resblock/max-autotune.json"))
    record = json.loads(path.read_text())
    cost = from_record(CellResult.from_json(record))
    assert cost.recorded and cost.lock_s == record["lock_held_s"] and cost.peak_bytes == record["peak_mem_bytes"]
    assert cost.wall_s == pytest.approx(record["wall_s"] - record["lock_wait_s"])
    assert 0 < cost.compile_s < record["compile_s"]  # autotuning waited for the lock inside its compile
    assert cost.reserve_bytes > record["peak_mem_bytes"]
    costs = Costs.from_store_root(FIXTURE)
    unet = cell("diff_unet_resblock", "max-autotune")
    assert costs.of(unet) == cost and costs.of(unet, 2) != cost  # a further compile reuses the first's binaries
    never = CellId("tiny", "llm_rmsnorm", "default")
    assert costs.of(never) == prior(never) and not prior(never).recorded
    assert prior(never).wall_s == expected_cost(never) and prior(never).reserve_bytes == PRIOR_RESERVE


def test_a_schedule_of_the_whole_suite_starts_every_measurement_once() -> None:
    cells = plan(["prefill", "decode"])
    costs = Costs.from_store_root(FIXTURE)
    schedule = Scheduler([Job(c) for c in cells], costs, gpus=4, workers=64, budget=70 * GiB, clock=Clock())
    started = []
    while schedule:
        batch = list(iter(schedule.start, None))
        assert batch, "nothing starts while measurements wait and none runs"
        for s in batch:
            schedule.finished(s)
        started += batch
    assert sorted(s.job.cell for s in started) == sorted(cells)
    per_gpu = [sum(s.cost.lock_s for s in started if s.gpu == k) for k in range(4)]
    assert max(per_gpu) - min(per_gpu) <= max(s.cost.lock_s for s in started)


def test_runs_given_disjoint_cores_take_disjoint_timing_cores(monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    groups = cpu_groups(4, list(range(64)))
    assert [len(g) for g in groups] == [16] * 4 and sorted(c for g in groups for c in g) == list(range(64))
    assert cpu_groups(3, list(range(8))) == [[0, 1, 2], [3, 4, 5], [6, 7]]
    with pytest.raises(ValueError):
        cpu_groups(9, list(range(8)))
    cfg = RunConfig(store_root=tmp_path, machine="m", commit="c", jobs=8, gpus=("2",))
    timing = []
    for group in groups[:2]:  # the PR flow's base and head of GPU 2 share a group; GPU 3's runs another
        monkeypatch.setattr("os.sched_getaffinity", lambda pid, g=group: set(g), raising=False)
        timing.append(timing_cpus(cfg))
    assert timing == [[0, 1], [16, 17]]
