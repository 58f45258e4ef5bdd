"""Experiment (not a test): does a neighbour's GPU work beside autotuning change what autotuning picks?

Compiles one cell again and again in fresh processes, one at a time, the GPU lock installed as the runner's workers
install it (tracker.measure.gpulock), under conditions taken in turn:

    quiet       nothing else on the GPU
    disturbed   a neighbour process takes the same lock for 50-300 ms at a time and runs large GEMMs under it
    brief       as disturbed, the neighbour's holds 2-20 ms (as long as other compiles' benchmarks hold it)
    othergpu    the neighbour's 50-300 ms of GEMMs on another GPU of the host, under that GPU's own lock, and nothing
                else on this one (a host of several GPUs: does work on one move autotuning on another?)
    settleN     disturbed, and the runner's settle (COMPILE_BASELINES_AUTOTUNE_SETTLE_MS=N): each of autotuning's
                choices (a kernel's configs, a GEMM's candidates) benchmarked in one hold, which waits N ms first
                where another process held the lock last
    settleNafterM  settleN, only after another process's hold of M ms or more
                (COMPILE_BASELINES_AUTOTUNE_SETTLE_AFTER_MS=M)
    whole       disturbed, and all of one kernel's configs benchmarked in one hold of the lock
                (CachingAutotuner.benchmark_all_configs)
    coordesc    as whole, and coordinate descent's steps in that hold too (their compiles included)

and prints each compile's latency and the configs autotuning settled on (the cell's fingerprint), then per condition
how often each config came out. Each compile has an inductor cache of its own, a condition named twice in a round
too (so none reads another's choices). The cell compiles on the first GPU the process sees; a run with `othergpu`
needs two (its neighbour on the second). tests/fixtures/autotune-disturb has the runs and what they found.

    python tools/autotune_disturb.py --rounds 10 --out RESULTS.jsonl [--conditions quiet disturbed settle100]
                                     [--preset prefill --workload llm_rope_apply --mode max-autotune]
    python tools/autotune_disturb.py --summary RESULTS.jsonl ...      # the configs per condition, anywhere
    python tools/autotune_disturb.py --configs DIR ...                # the configs of the cell's compiles in cell
                                                                      # stores under DIR (a PR's, a truth run's)
    python tools/autotune_disturb.py --settle-cost STORE ... [--settle-ms 100] [--after-ms 0]   # what settling
                                              # (after another's hold of at least --after-ms) would add to the GPU
                                              # lock's work of the runs of those stores
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from tracker.measure.cellresult import CellResult
from tracker.runner import gpus
from tracker.store import atomic
from tracker.store.cells import CellStore, RunKey
from workloads.modes import AUTOTUNED_MODES, COMPILED

PLAIN = ("quiet", "disturbed", "brief", "othergpu", "whole", "coordesc")
ELSEWHERE = "othergpu"  # the one condition whose neighbour works on another GPU
NEIGHBOUR_HOLD_S = {"brief": (0.002, 0.02)}  # the neighbour's holds under a condition; other conditions: 50-300 ms


def condition(text: str) -> str:
    if text in PLAIN or _settle(text) is not None:
        return text
    raise argparse.ArgumentTypeError(f"{text!r}: one of {', '.join(PLAIN)}, settleN or settleNafterM (milliseconds)")


def _settle(how: str) -> tuple[int, int] | None:
    """N and M of settleN (M 0) or settleNafterM; None for another condition."""
    m = re.fullmatch(r"settle(\d+)(?:after(\d+))?", how)
    return (int(m[1]), int(m[2] or 0)) if m else None


def disturber(lock_path: str, active: str, stop: str) -> None:
    """Hold the lock for a while at a time (the seconds `active` holds, low and high), running bf16 GEMMs of about
    10 ms under it, while `active` exists."""
    import torch

    from tracker.measure import gpulock

    lock = gpulock.GpuLock(lock_path)
    a = torch.randn(12288, 12288, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(12288, 12288, device="cuda", dtype=torch.bfloat16)
    rng = random.Random(0)
    while not os.path.exists(stop):
        if not os.path.exists(active):
            time.sleep(0.02)
            continue
        try:
            low, high = map(float, Path(active).read_text().split())
        except (OSError, ValueError):  # between conditions
            continue
        with lock.held():
            end = time.perf_counter() + rng.uniform(low, high)
            while time.perf_counter() < end:
                a @ b
                torch.cuda.synchronize()
        time.sleep(rng.uniform(0.005, 0.05))


def compile_once(lock_path: str, how: str, preset: str, workload: str, mode: str,
                 launch_us: float | None) -> dict[str, object]:
    """One fresh compile and timing of the cell under condition `how`; the launch floor measured by the first compile
    is passed to the later ones, as the runner's workers share it."""
    from tracker.measure import gpulock
    from tracker.measure.harness import measure_cell

    settle_ms, after_ms = _settle(how) or (0, 0)
    lock = gpulock.GpuLock(lock_path, settle_s=settle_ms / 1000, settle_after_s=after_ms / 1000)
    gpulock.install(lock)
    from torch._inductor.runtime import triton_heuristics as th

    if how in ("whole", "coordesc"):
        gpulock._lock_method(lock, th.CachingAutotuner, "benchmark_all_configs")
    if how == "coordesc":
        gpulock._lock_method(lock, th.CachingAutotuner, "coordinate_descent_tuning")
    r = measure_cell(preset, workload, mode, device="cuda", exclusive=lock.held, launch_us=launch_us)
    return {"condition": how, "launch_us": r.launch_us, "phase_s": r.phase_s, "status": r.status,
            "reason": r.reason, "median_ms": r.median_ms, "fingerprint": r.fingerprint, "compile_s": r.compile_s,
            "lock_held_s": round(lock.held_s, 3), "lock_settled_s": round(lock.settled_s, 3),
            "lock_wait_s": round(lock.wait_s, 3), "holds": len(lock.spans)}


def summary(rows: Iterable[dict[str, object]]) -> list[str]:
    """Per condition, in the order first seen: the compiles, each config's count (most first) and the latencies."""
    configs: dict[str, collections.Counter[str]] = {}
    latency: dict[str, list[float]] = collections.defaultdict(list)
    for row in rows:
        fp = row.get("fingerprint")
        configs.setdefault(str(row["condition"]), collections.Counter())[
            str(fp.get("autotune") if isinstance(fp, dict) else None)] += 1
        if isinstance(row.get("median_ms"), (int, float)):
            latency[str(row["condition"])].append(float(row["median_ms"]))  # type: ignore[arg-type]
    out = []
    for how, counts in configs.items():
        ms = latency[how]
        span = f"{min(ms):.4f}-{max(ms):.4f} ms" if ms else "no latency"
        out.append(f"{how}: {sum(counts.values())} compiles, configs {_counts(counts)}; {span}")
    return out


def _counts(counter: collections.Counter[str]) -> str:
    return ", ".join(f"{k} x{n}" for k, n in counter.most_common())


def measurements(dirs: Iterable[Path]) -> list[tuple[RunKey, CellResult]]:
    """Every measurement of the cell stores (MACHINE/COMMIT/torch-VERSION) under `dirs`, with its run, in the order of
    their paths, read as the runner reads its store (tracker.store.cells.CellStore); a store reached twice through links
    once."""
    seen: set[Path] = set()
    out: list[tuple[RunKey, CellResult]] = []
    for d in dirs:
        for run in sorted(p for p in d.glob("**/torch-*") if p.is_dir()):
            if run.resolve() in seen:
                continue
            seen.add(run.resolve())
            key = RunKey(run.parent.parent.name, run.parent.name, run.name.removeprefix("torch-"))
            out += [(key, c) for c in CellStore(run.parents[2], key).all() if c.has("mode")]
    return out


def store_configs(dirs: Iterable[Path], preset: str, workload: str, mode: str) -> list[str]:
    """The configs of the cell's compiles in the cell stores under `dirs`, per commit: what autotuning settled on,
    and how often."""
    by_commit: dict[str, collections.Counter[str]] = {}
    for run, c in measurements(dirs):
        if (c.preset, c.workload, c.mode) == (preset, workload, mode):
            config = str((c.fingerprint or {}).get("autotune"))
            by_commit.setdefault(run.commit[:12], collections.Counter())[config] += 1
    return [f"{commit}: {sum(c.values())} compiles, configs {_counts(c)}" for commit, c in by_commit.items()]


class _Hold(NamedTuple):
    """One span of a measurement's holds of the GPU lock."""

    at: float  # when it got the lock, seconds since the epoch
    length_s: float
    measurement: int  # which of settle_cost's measurements held it
    autotuning: bool  # within the measurement's torch.compile first call


def settle_cost(stores: Iterable[Path], settle_ms: float, after_ms: float = 0.0) -> str:
    """What settling would have added to the GPU lock's work of the runs whose cell stores are `stores` (measured on
    one host, without it): each hold of the lock during torch.compile's first call (autotuning's) whose hold before it
    on its GPU was another measurement's, of at least `after_ms`, settles once; the runner settles once a choice, its
    benchmarks in one hold, and judges a hold's length alone, not merged into its span, so fewer. Every store of the
    GPUs' runs at the time belongs in it (a PR's base and head)."""
    timed = [c for _run, c in measurements(stores) if c.lock_spans and c.started_at is not None]
    holds: dict[str | None, list[_Hold]] = collections.defaultdict(list)
    for k, c in enumerate(timed):
        at, took = c.phase_at, c.phase_s
        # an eager first call holds the lock as the cell does, unsettled
        begun = c.started_at + at["first_call"] if c.mode in COMPILED and "first_call" in at else math.inf
        ended = begun + took.get("first_call", 0.0)
        holds[c.gpu_index].extend(_Hold(c.started_at + got, released - got, k, begun <= c.started_at + got <= ended)
                                  for _asked, got, released in c.lock_spans)
    by_workload: collections.Counter[str] = collections.Counter()
    for spans in holds.values():
        spans.sort()
        by_workload.update(timed[now.measurement].workload for before, now in itertools.pairwise(spans)
                           if now.autotuning and before.measurement != now.measurement
                           and before.length_s * 1000 >= after_ms)
    held = sum(c.lock_held_s or 0.0 for c in timed)
    settles = sum(by_workload.values())
    added = settles * settle_ms / 1000
    top = ", ".join(f"{w} {n}" for w, n in by_workload.most_common(5))
    after = f" of {after_ms:g} ms or more" if after_ms else ""
    return (f"{len(timed)} measurements, GPU lock held {held:.0f} s; {settles} holds of autotuning follow another "
            f"measurement's{after}: settling {settle_ms:g} ms adds {added:.0f} s "
            f"({100 * added / max(held, 1e-9):.0f}%); most in {top}")


def _visible_gpus(least: int) -> tuple[str, ...]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES names them (tracker.runner.gpus.listed); ValueError
    where there are fewer than `least`."""
    found = gpus.listed()
    if len(found) < least:
        raise ValueError(f"{ELSEWHERE} needs {least} GPUs, this host shows {len(found)}")
    return found


def experiment(args: argparse.Namespace) -> int:
    # the first GPU for the compiles and the same-GPU neighbour, the second for the other GPU's neighbour
    pair = _visible_gpus(2) if ELSEWHERE in args.conditions else ()
    start = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="autotune-disturb-"))
    lock, active, stop = str(tmp / "gpu.lock"), str(tmp / "active"), str(tmp / "stop")
    me = [sys.executable, __file__, "--lock", lock]
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp / "triton")}
    elsewhere = str(tmp / "active-elsewhere")
    if pair:
        env["CUDA_VISIBLE_DEVICES"] = pair[0]
    dists = [subprocess.Popen([*me, "--child", "disturber", "-", "--flags", active, stop], env=env)]
    if pair:
        dists.append(subprocess.Popen([sys.executable, __file__, "--lock", str(tmp / "gpu-elsewhere.lock"), "--child",
                                       "disturber", "-", "--flags", elsewhere, stop],
                                      env={**env, "CUDA_VISIBLE_DEVICES": pair[1]}))
    launch: list[str] = []
    rows = []
    with args.out.open("a", encoding="utf-8") as out:
        for k in range(args.rounds):
            for i, how in enumerate(args.conditions):
                if time.monotonic() - start > args.deadline_s:
                    break
                neighbour = {ELSEWHERE: elsewhere, "quiet": None}.get(how, active)
                for flag in (active, elsewhere):
                    if flag == neighbour:
                        atomic.write_text(flag, "{:g} {:g}".format(*NEIGHBOUR_HOLD_S.get(how, (0.05, 0.3))))
                    else:
                        Path(flag).unlink(missing_ok=True)
                p = subprocess.run([*me, "--child", "compile", how, "--preset", args.preset, "--workload",
                                    args.workload, "--mode", args.mode, *launch],
                                   env={**env, "TORCHINDUCTOR_CACHE_DIR": str(tmp / f"inductor-{k}-{i}")},
                                   capture_output=True, text=True)
                line = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else json.dumps(
                    {"condition": how, "status": "crashed", "reason": p.stderr[-300:]})
                row = {"round": k, **json.loads(line)}
                if not launch and row.get("launch_us"):
                    launch = ["--launch-us", str(row["launch_us"])]
                out.write(json.dumps(row) + "\n")
                out.flush()
                rows.append(row)
                print(f"round {k} {how:9s} {row.get('median_ms')} {(row.get('fingerprint') or {}).get('autotune')} "
                      f"held {row.get('lock_held_s')} s phases {row.get('phase_s')}", flush=True)
    Path(stop).touch()
    for dist in dists:
        dist.wait(timeout=30)
    print("\n".join(summary(rows)))
    return 0


def main() -> int:
    a = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    a.add_argument("--rounds", type=int, default=8)
    a.add_argument("--conditions", nargs="+", type=condition, default=["quiet", "disturbed", "settle100"])
    a.add_argument("--preset", default="prefill")
    a.add_argument("--workload", default="llm_rope_apply")
    a.add_argument("--mode", default=AUTOTUNED_MODES[0], choices=AUTOTUNED_MODES)
    a.add_argument("--out", type=Path)
    a.add_argument("--deadline-s", type=float, default=480.0)
    a.add_argument("--summary", nargs="+", type=Path, metavar="RESULTS")
    a.add_argument("--configs", nargs="+", type=Path, metavar="DIR")
    a.add_argument("--settle-cost", nargs="+", type=Path, metavar="STORE")
    a.add_argument("--settle-ms", type=float, default=100.0)
    a.add_argument("--after-ms", type=float, default=0.0)
    a.add_argument("--child", nargs=2, metavar=("ROLE", "CONDITION"), help=argparse.SUPPRESS)
    a.add_argument("--lock", help=argparse.SUPPRESS)
    a.add_argument("--flags", nargs=2, help=argparse.SUPPRESS)
    a.add_argument("--launch-us", type=float, help=argparse.SUPPRESS)
    args = a.parse_args()
    if args.child:
        role, how = args.child
        if role == "disturber":
            disturber(args.lock, *args.flags)
        else:
            print(json.dumps(compile_once(args.lock, how, args.preset, args.workload, args.mode, args.launch_us)))
        return 0
    try:
        if args.summary:
            for f in args.summary:
                rows = [json.loads(line) for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
                print(f"{f}:", *summary(rows), sep="\n  ")
            return 0
        if args.configs or args.settle_cost:
            missing = [d for d in (args.configs or args.settle_cost) if not d.is_dir()]
            if missing:
                raise OSError(f"{missing[0]}: no such directory")
            print("\n".join(store_configs(args.configs, args.preset, args.workload, args.mode)) if args.configs
                  else settle_cost(args.settle_cost, args.settle_ms, args.after_ms))
            return 0
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"autotune_disturb: {e}", file=sys.stderr)
        return 2
    if args.out is None:
        a.error("--out is required for an experiment")
    try:
        return experiment(args)
    except ValueError as e:
        print(f"autotune_disturb: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
