"""Simulate a run on N GPUs and C cores from a measured run's cell store: its measurements replayed through the
runner's own scheduler (tracker.runner.schedule.Scheduler, with the costs the runner would read,
tracker.runner.costs, or with --prior-costs those a store with no earlier runs gives), to predict the wall time and
each GPU's lock share on hosts not measured.

    python tools/simulate_gpus.py STORE                       # the table for 1, 2, 4 and 8 GPUs, 16 cores a GPU
    python tools/simulate_gpus.py STORE --gpus 1 --cores 16   # one host: compare with the run's own wall time
    python tools/simulate_gpus.py STORE --gpus 8 --together 3 --init-s 0.4 --lock-scale 1.0

STORE is a run's cell directory (MACHINE/COMMIT/torch-VERSION). Each measurement of the run (replicates up to
--replicates for the autotuned modes, the first for the rest: a confirmation's later compiles are left out) becomes a
process of the simulated run, made of what its record says it did, its run's waits taken out:
- the fork and the worker's start and end (--overhead-s), its CUDA init (its own, or --init-s; at most
  --cuda-inits at once a GPU, as tracker.measure.cudainit allows);
- its GPU-lock phases (inputs; warm-up and timing; an eager cell's first call), each holding its GPU's lock
  (first come, first served), scaled by --lock-scale (a host where holding took longer);
- its compile: CPU work shared among the processes compiling at once on the compile cores (the cores less each GPU's
  two timing cores: each gets min(1, cores / compiling) of a core), with its autotuning's lock holds spread through.
The runner's rules decide what starts when: the Scheduler (its queues, ramp, tail, memory budget) and, for a cell's
further compiles, tracker.runner.remaining.next_replicate against the simulated store.

The model leaves out what a run on another host would change beyond these (the cores' speed, the driver's own
contention); --lock-scale and --init-s stand for the two that the 4-GPU host measured differently (docs/runner.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracker.measure.cellresult import CellResult
from tracker.runner import timeline
from tracker.runner.config import RunConfig
from tracker.runner.costs import Costs, from_record
from tracker.runner.plan import CellId, Job
from tracker.runner.policy import default_jobs, default_together
from tracker.runner.pool import SPARE
from tracker.runner.remaining import next_replicate
from tracker.runner.resident import may_take
from tracker.runner.schedule import Scheduler, Start
from workloads.modes import BY_NAME

GiB = 2**30
LOCKED = ("launch_floor", "inputs", "warmup", "host_time", "timing")
AUTOTUNE_CHUNKS = 4  # an autotuning compile's lock holds, spread through it


@dataclass(frozen=True)
class Params:
    gpus: int = 1
    cores: int = 16
    jobs: int | None = None  # default: the runner's (policy.default_jobs: 16 a GPU, HOST_JOBS a host, one a core)
    together: int = default_together("cuda")
    init_s: float | None = None  # None: each measurement's own
    cuda_inits: int = RunConfig.cuda_inits
    lock_scale: float = 1.0
    overhead_s: float = 0.3
    start_s: float = 20.0  # until the fork server has imported torch (the runs' first lines: 20-25 s)
    init_capacity: float | None = None  # CUDA starts the host makes at full speed at once (None: any number)
    stay: bool = False  # processes stay for further compiles (tracker.runner.resident), SPARE a GPU waiting
    prior_costs: bool = False  # the scheduler knows no cell's costs, only its mode's (a store with no earlier runs)
    budget: int | None = 72 * GiB  # 90% of an H100's 80 GB (tracker.runner.policy.memory_budget)


def run_records(store: Path, replicates: int = 3) -> list[dict[str, Any]]:
    """The run's own measurements: ok ones, up to `replicates` compiles of an autotuned mode's cell, one of the rest."""
    out = []
    for path in sorted(store.glob("*/*/*.json")):
        r = json.loads(path.read_text(encoding="utf-8"))
        mode = BY_NAME.get(r.get("mode", ""))
        most = replicates if mode is not None and mode.autotuned else 1
        if r.get("status") == "ok" and (r.get("replicate") or 1) <= most:
            out.append(r)
    return out


def segments(record: dict[str, Any], p: Params, stayed: bool = False) -> list[tuple[str, float]]:
    """What a measurement's process does, in order: ("fixed" | "init" | "lock" | "cpu", seconds). `stayed`: in a
    process that measured before, whose CUDA context is made."""
    ph = record.get("phase_s") or {}
    init = 0.0 if stayed else p.init_s if p.init_s is not None else ph.get("cuda_init", 0.4)
    mode = BY_NAME.get(record["mode"])
    cost = from_record(CellResult.from_json(record))
    timed = sum(ph.get(n, 0.0) for n in ("warmup", "host_time", "timing")) * p.lock_scale
    out = [("fixed", p.overhead_s), ("init", init)]
    if mode is not None and not mode.compiled:
        return [*out, ("lock", (ph.get("inputs", 0.0) + ph.get("first_call", 0.0)) * p.lock_scale + timed)]
    autotune = max(0.0, (record.get("lock_held_s") or 0.0) - sum(ph.get(n, 0.0) for n in LOCKED)) * p.lock_scale
    cpu = max(0.0, cost.compile_s - autotune / p.lock_scale)
    out.append(("lock", ph.get("inputs", 0.0) * p.lock_scale))
    if autotune > 0.05:
        for _ in range(AUTOTUNE_CHUNKS):
            out += [("cpu", cpu / (AUTOTUNE_CHUNKS + 1)), ("lock", autotune / AUTOTUNE_CHUNKS)]
        out.append(("cpu", cpu / (AUTOTUNE_CHUNKS + 1)))
    else:
        out.append(("cpu", cpu))
    return [*out, ("lock", timed)]


@dataclass
class _Process:
    start: Start
    record: dict[str, Any]
    todo: deque[tuple[str, float]]
    gpu: int
    launched: float
    measured: set[CellId] = field(default_factory=set)  # the cells its process measured before (it stayed)
    began: float | None = None
    left: float = 0.0
    kind: str = ""
    asked: float = 0.0
    spans: list[list[float]] = field(default_factory=list)
    phase_at: dict[str, float] = field(default_factory=dict)

    def next(self, now: float) -> None:
        self.kind, self.left = self.todo.popleft() if self.todo else ("", 0.0)
        self.asked = now


class _SimStore:
    """The store next_replicate asks: what the simulated run has finished so far."""

    def __init__(self) -> None:
        self.done: dict[tuple[str, str, str, int], CellResult] = {}

    def replicate(self, preset: str, workload: str, mode: str, replicate: int = 1) -> CellResult | None:
        return self.done.get((preset, workload, mode, replicate))


def _jobs(p: Params) -> int:
    """The measurements at once: as asked, else as the runner would on such a host."""
    return p.jobs or default_jobs("cuda", p.gpus, p.cores)


def simulate(records: list[dict[str, Any]], p: Params) -> list[dict[str, Any]]:
    """The simulated run's measurements, each with the timeline fields a real run records (tracker.runner.timeline);
    the clock starts at 0 when the run starts (the fork server's start up included)."""
    by_job = {Job(CellId(r["preset"], r["workload"], r["mode"]), r.get("replicate") or 1): r for r in records}
    counts: dict[CellId, int] = {}
    for job in by_job:
        counts[job.cell] = max(counts.get(job.cell, 0), job.replicate)
    cfg = RunConfig(store_root=Path("."), machine="sim", commit="sim", replicates_per_cell=counts, together=p.together)
    jobs = _jobs(p)
    clock = [0.0]
    costs = Costs.from_records([] if p.prior_costs else map(CellResult.from_json, records))
    sched = Scheduler([j for j in by_job if j.replicate == 1], costs, p.gpus, jobs, p.budget,
                      counts, p.together, clock=lambda: clock[0])
    store, running, out = _SimStore(), [], []
    idle: dict[int, list[set[CellId]]] = defaultdict(list)  # per GPU, what each waiting process measured
    stays = p.stay and any(n > 1 for n in counts.values())
    compile_cores = max(1, p.cores - 2 * p.gpus)
    t = p.start_s
    while sched or running:
        clock[0] = t
        while (s := sched.start()) is not None:
            running.append(_launch(s, by_job[s.job], idle[s.gpu or 0] if stays else [], p, t))
        _grant(running, t, p)
        rates = _rates(running, compile_cores, p.init_capacity)
        active = [r for r in running if r.kind in ("cpu", "fixed") or r.began is not None]
        step = min((r.left / rates.get(r.kind, 1.0) for r in active), default=0.0)
        for proc in active:
            proc.left -= step * rates.get(proc.kind, 1.0)
        t += max(0.0, step)
        for proc in list(running):
            while proc.kind and proc.left <= 1e-9 and (proc.kind in ("cpu", "fixed") or proc.began is not None
                                                       or proc.left <= 0):
                _segment_done(proc, t)
            if not proc.kind:
                running.remove(proc)
                out.append(_finished(proc, t, sched, store, cfg))
                if stays:
                    waiting = idle[proc.gpu]
                    waiting.append(proc.measured | {proc.start.job.cell})
                    del waiting[:max(0, len(waiting) - SPARE)]  # those that waited longest exit
    return out


def _launch(s: Start, record: dict[str, Any], idle: list[set[CellId]], p: Params, t: float) -> _Process:
    """The process of measurement `s`: one of its GPU's waiting ones where the runner's rule lets it take `s`
    (tracker.runner.resident.may_take), else a fresh one."""
    measured = next((m for m in idle if may_take(s.job, m)), None)
    if measured is not None:
        idle.remove(measured)
    proc = _Process(s, record, deque(segments(record, p, stayed=measured is not None)), s.gpu or 0, t,
                    measured=measured or set())
    proc.next(t)
    return proc


def _rates(running: list[_Process], compile_cores: int, init_capacity: float | None) -> dict[str, float]:
    """How fast each shared kind of work goes: compiling shares the compile cores, CUDA's start (once its turn is
    given) the host's `init_capacity`."""
    compiling = sum(1 for r in running if r.kind == "cpu")
    starting = sum(1 for r in running if r.kind == "init" and r.began is not None)
    return {"cpu": min(1.0, compile_cores / compiling) if compiling else 1.0,
            "init": min(1.0, init_capacity / starting) if init_capacity and starting else 1.0}


def _grant(running: list[_Process], t: float, p: Params) -> None:
    """Hand each GPU's lock to the longest waiter (first come, first served), and CUDA-init turns likewise."""
    turns = {"lock": 1, "init": p.cuda_inits}
    asking: dict[tuple[int, str], list[_Process]] = defaultdict(list)
    for r in running:
        if r.kind in turns:
            asking[(r.gpu, r.kind)].append(r)
    for (_, kind), mine in asking.items():
        free = turns[kind] - sum(1 for r in mine if r.began is not None)
        for r in sorted((r for r in mine if r.began is None), key=lambda r: r.asked)[:max(0, free)]:
            r.began = t
            if kind == "init":
                r.phase_at.setdefault("cuda_init", t)


def _segment_done(proc: _Process, t: float) -> None:
    if proc.kind == "lock" and proc.began is not None:
        proc.spans.append([proc.asked, proc.began, t])
        if "warmup" not in proc.phase_at and not proc.todo:
            proc.phase_at["warmup"] = proc.began
    if proc.kind == "cpu" and "first_call" not in proc.phase_at:
        proc.phase_at["first_call"] = proc.asked
    proc.began = None
    proc.next(t)


def _finished(proc: _Process, t: float, sched: Scheduler, store: _SimStore, cfg: RunConfig) -> dict[str, Any]:
    sched.finished(proc.start)
    job, r = proc.start.job, proc.record
    record = store.done[(job.cell.preset, job.cell.workload, job.cell.mode, job.replicate)] = CellResult.from_json(r)
    sched.add(next_replicate(job, record, cfg, store))  # type: ignore[arg-type]  # the simulated store answers as one
    start = proc.launched
    phases = {"cuda_init": (r.get("phase_s") or {}).get("cuda_init", 0.0), **{
        k: (r.get("phase_s") or {}).get(k, 0.0) for k in ("first_call", "warmup")}}
    return {"preset": job.cell.preset, "workload": job.cell.workload, "mode": job.cell.mode,
            "replicate": job.replicate, "gpu_index": str(proc.gpu), "launched_at": start, "started_at": start,
            "ended_at": t, "phase_s": phases, "phase_at": {k: v - start for k, v in proc.phase_at.items()},
            "lock_spans": [[a - start, g - start, e - start] for a, g, e in proc.spans], "why": proc.start.why}


@dataclass(frozen=True)
class Prediction:
    params: Params
    wall_s: float
    lock_busy: list[float]  # each GPU's, over the run
    middle_busy: list[float]  # each GPU's, after the ramp and before the tail
    bounds: dict[str, float]  # the lock's, the compilers' and the longest cell's floor under the wall time


def predict(records: list[dict[str, Any]], p: Params) -> Prediction:
    sim = simulate(records, p)
    ms = timeline.measurements([CellResult.from_json({**r, "launched_at": r["launched_at"] + 1.0,
                                                      "started_at": r["started_at"] + 1.0,
                                                      "ended_at": r["ended_at"] + 1.0}) for r in sim])
    summaries = timeline.per_gpu(ms)
    wall = max(r["ended_at"] for r in sim)
    lock = sum(sum(e - g for _, g, e in r["lock_spans"]) for r in sim)
    cpu = sum(d for r in records for kind, d in segments(r, p) if kind == "cpu")
    chains: dict[CellId, float] = {}
    for r in records:
        c = CellId(r["preset"], r["workload"], r["mode"])
        chains[c] = chains.get(c, 0.0) + sum(d for _, d in segments(r, p)) / (1 if (r.get("replicate") or 1) == 1
                                                                               else p.together)
    return Prediction(p, wall, [s.lock_held_s / wall for s in summaries], [s.middle_busy for s in summaries],
                      {"lock": p.start_s + lock / p.gpus, "compile": p.start_s + cpu / max(1, p.cores - 2 * p.gpus),
                       "longest cell": p.start_s + max(chains.values())})


def _row(pred: Prediction) -> str:
    p = pred.params
    busy = ", ".join(f"{b:.0%}" for b in pred.lock_busy)
    middle = min(pred.middle_busy)
    floors = ", ".join(f"{k} {v:.0f}" for k, v in pred.bounds.items())
    return (f"{p.gpus:>4} {p.cores:>5} {_jobs(p):>4} {p.together:>8} "
            f"{'own' if p.init_s is None else f'{p.init_s:g}':>6} {p.lock_scale:>5.2f} {pred.wall_s:>7.0f}   "
            f"{busy} (middle >= {middle:.0%}); floors: {floors}")


HEADER = "gpus cores jobs together init_s lockx  wall_s   lock busy per GPU; floors (s)"


def main(argv: list[str] | None = None) -> int:
    a = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    a.add_argument("store")
    a.add_argument("--gpus", type=int, nargs="+", default=[1, 2, 4, 8])
    a.add_argument("--cores", type=int, help="the host's cores (default: 16 a GPU)")
    a.add_argument("--jobs", type=int)
    a.add_argument("--together", type=int, nargs="+", default=[Params.together])
    a.add_argument("--init-s", type=float)
    a.add_argument("--cuda-inits", type=int, default=Params.cuda_inits)
    a.add_argument("--lock-scale", type=float, default=1.0)
    a.add_argument("--overhead-s", type=float, default=0.3)
    a.add_argument("--start-s", type=float, default=20.0)
    a.add_argument("--init-capacity", type=float, help="CUDA starts the host makes at full speed at once")
    a.add_argument("--stay", action="store_true", help="processes stay for further compiles, as the runner's do")
    a.add_argument("--replicates", type=int, default=3)
    a.add_argument("--prior-costs", action="store_true",
                   help="schedule by the modes' prior costs, as a run whose cell store has no earlier runs does (a "
                        "nightly on a fresh runner), not by the costs the records give")
    args = a.parse_args(argv)
    records = run_records(Path(args.store), args.replicates)
    print(f"{len(records)} measurements of {args.store}")
    print(HEADER)
    for n in args.gpus:
        for together in args.together:
            p = Params(gpus=n, cores=args.cores or 16 * n, jobs=args.jobs, together=together, init_s=args.init_s,
                       cuda_inits=args.cuda_inits, lock_scale=args.lock_scale, overhead_s=args.overhead_s,
                       start_s=args.start_s, init_capacity=args.init_capacity, stay=args.stay,
                       prior_costs=args.prior_costs)
            print(_row(predict(records, p)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

