"""Experiment (not a test): does a neighbour's GPU work between autotuning's benchmarks change what autotuning picks?

In a PR's rounds the prefill rope cell under max-autotune compiled to a rarer, slower launch config in 10 of 41 compiles
against about 1 in 26 where it was measured with fewer neighbours (tests/fixtures/h100-plant-truth), and the GPU-lock
holds of those rarer compiles followed a heavy neighbour's hold more often. Each of autotuning's benchmarks takes the
lock on its own (tracker.measure.gpulock.install), so between two configs' timings another process may time an 8 ms
GEMM for a while. This tool compiles one cell again and again in fresh processes, one at a time, under four
conditions taken in turn:

    quiet       nothing else on the GPU
    disturbed   a neighbour process takes the same lock for 50-300 ms at a time and runs large GEMMs under it
    settleN     disturbed, and each of autotuning's benchmarks waits N ms with the lock held before it times
    whole       disturbed, and all of one kernel's configs benchmarked in one hold of the lock
                (CachingAutotuner.benchmark_all_configs; pass --conditions to choose)
    coordesc    as whole, and coordinate descent's steps in that hold too (its compiles included)

and prints, per condition, the configs autotuning settled on (the cell's fingerprint) and the latencies.

    python tools/autotune_disturb.py --rounds 8 --out RESULTS.jsonl [--preset prefill --workload llm_rope_apply
                                                                      --mode max-autotune]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONDITIONS = ("quiet", "disturbed", "settle100", "settle300")


def disturber(lock_path: str, active: str, stop: str) -> None:
    """Hold the lock 50-300 ms at a time, running bf16 GEMMs of about 10 ms under it, while `active` exists."""
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
        with lock.held():
            end = time.perf_counter() + rng.uniform(0.05, 0.3)
            while time.perf_counter() < end:
                a @ b
                torch.cuda.synchronize()
        time.sleep(rng.uniform(0.005, 0.05))


def compile_once(lock_path: str, condition: str, preset: str, workload: str, mode: str,
                 launch_us: float | None) -> dict[str, object]:
    """One fresh compile and timing of the cell, the lock installed as the runner's worker installs it; the launch
    floor measured by the first compile is passed to the later ones, as the runner's workers share it."""
    from tracker.measure import gpulock
    from tracker.measure.harness import measure_cell

    lock = gpulock.GpuLock(lock_path)
    gpulock.install(lock)
    from torch._inductor.runtime import triton_heuristics as th

    if condition.startswith("settle"):
        settle_s = int(condition.removeprefix("settle")) / 1000

        def settled(fn):
            def wrapper(*args, **kwargs):
                first = lock._depth == 0
                with lock.held():
                    if first:
                        time.sleep(settle_s)
                    return fn(*args, **kwargs)
            return wrapper

        from torch._inductor.runtime import benchmarking

        for cls in vars(benchmarking).values():
            if isinstance(cls, type) and "benchmark_gpu" in cls.__dict__:
                cls.benchmark_gpu = settled(cls.__dict__["benchmark_gpu"])
    if condition in ("whole", "coordesc"):
        th.CachingAutotuner.benchmark_all_configs = gpulock._locked(lock, th.CachingAutotuner.benchmark_all_configs)
    if condition == "coordesc":
        th.CachingAutotuner.coordinate_descent_tuning = gpulock._locked(
            lock, th.CachingAutotuner.coordinate_descent_tuning)
    r = measure_cell(preset, workload, mode, device="cuda", exclusive=lock.held, launch_us=launch_us)
    return {"condition": condition, "launch_us": r.launch_us, "phase_s": r.phase_s, "status": r.status,
            "reason": r.reason, "median_ms": r.median_ms,
            "fingerprint": r.fingerprint, "compile_s": r.compile_s, "lock_held_s": round(lock.held_s, 3),
            "lock_wait_s": round(lock.wait_s, 3), "holds": len(lock.spans)}


def main() -> int:
    a = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    a.add_argument("--rounds", type=int, default=8)
    a.add_argument("--preset", default="prefill")
    a.add_argument("--workload", default="llm_rope_apply")
    a.add_argument("--mode", default="max-autotune")
    a.add_argument("--out", type=Path)
    a.add_argument("--deadline-s", type=float, default=480.0)
    a.add_argument("--child", nargs=2, metavar=("ROLE", "CONDITION"), help=argparse.SUPPRESS)
    a.add_argument("--lock", help=argparse.SUPPRESS)
    a.add_argument("--flags", nargs=2, help=argparse.SUPPRESS)
    a.add_argument("--launch-us", type=float, help=argparse.SUPPRESS)
    args = a.parse_args()
    if args.child:
        role, condition = args.child
        if role == "disturber":
            disturber(args.lock, *args.flags)
        else:
            print(json.dumps(compile_once(args.lock, condition, args.preset, args.workload, args.mode,
                                          args.launch_us)))
        return 0
    if args.out is None:
        a.error("--out is required")
    start = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="autotune-disturb-"))
    lock, active, stop = str(tmp / "gpu.lock"), str(tmp / "active"), str(tmp / "stop")
    me = [sys.executable, __file__, "--lock", lock]
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp / "triton")}
    dist = subprocess.Popen([*me, "--child", "disturber", "-", "--flags", active, stop], env=env)
    seen: dict[str, collections.Counter[str]] = {c: collections.Counter() for c in CONDITIONS}
    launch: list[str] = []
    with args.out.open("a", encoding="utf-8") as out:
        for k in range(args.rounds):
            for condition in CONDITIONS:
                if time.monotonic() - start > args.deadline_s:
                    break
                Path(active).touch() if condition != "quiet" else Path(active).unlink(missing_ok=True)
                cache = tmp / f"inductor-{k}-{condition}"
                p = subprocess.run([*me, "--child", "compile", condition, "--preset", args.preset, "--workload",
                                    args.workload, "--mode", args.mode, *launch],
                                   env={**env, "TORCHINDUCTOR_CACHE_DIR": str(cache)}, capture_output=True, text=True)
                line = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else json.dumps(
                    {"condition": condition, "status": "crashed", "reason": p.stderr[-300:]})
                row = {"round": k, **json.loads(line)}
                if not launch and row.get("launch_us"):
                    launch = ["--launch-us", str(row["launch_us"])]
                out.write(json.dumps(row) + "\n")
                out.flush()
                fp = (row.get("fingerprint") or {}).get("autotune")
                seen[condition][str(fp)] += 1
                print(f"round {k} {condition:9s} {row.get('median_ms')} {fp} holds {row.get('holds')} "
                      f"held {row.get('lock_held_s')} s phases {row.get('phase_s')}", flush=True)
    Path(stop).touch()
    dist.wait(timeout=30)
    for condition, counts in seen.items():
        print(condition, dict(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
