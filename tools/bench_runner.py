"""Benchmark (not a test) of the parallel runner: the same cells serially and in parallel, same machine.

    python tools/bench_runner.py measure --jobs 1 --store /tmp/serial  --preset prefill decode --workload ...
    python tools/bench_runner.py measure --jobs 8 --store /tmp/parallel --preset prefill decode --workload ...
    python tools/bench_runner.py agree /tmp/serial /tmp/parallel
    python tools/bench_runner.py agree /tmp/serial .asv/cells/MACHINE/COMMIT/torch-VERSION   # a full run
    python tools/bench_runner.py phases .asv/cells/MACHINE/COMMIT/torch-VERSION
    python tools/bench_runner.py spread STORE_1 STORE_2 ...   # each store one cold compile of the same cells
    python tools/bench_runner.py pairs BASE_STORE HEAD_STORE  # a PR's two sides (MACHINE/COMMIT/torch-VERSION each)
    python tools/bench_runner.py rounds CELLS_DIR ...         # PRs' cell stores (a trial's verdict/cells)

`measure` prints the wall time; `agree` prints the per-cell agreement of medians (|parallel/serial - 1|:
median, p90, max, the distribution), the instances whose best mode differs with the serial margin, and
the launch floor, and the host time per call of each cell in both runs (CPU contention from compiling
neighbours shows there; the latency itself is GPU time, see tracker.measure.harness.flush_multiple). `phases` prints
where a run's cells spent their time, and how long each held the GPU lock: the lock-held seconds summed over
the cells are the floor of a one-GPU run's wall time; then, for a run that recorded when each measurement ran, each
GPU's lock share over the run and over its middle (ramp and tail left out) and each GPU's activity over time
(tracker.runner.timeline). `pairs` prints, for a PR's two sides, how far apart in time each pair's two timings began
(a cell's compile k at base and at head: the paired test's drift cancels only as far as they are close) and how long
the sides' measurements waited for their GPU's memory (tracker.runner.memledger). `rounds` prints, for each PR's
cell store of two rounds or more, how long round 2 was expected to take from what round 1 recorded
(tracker.flows.roundtime, as `pr` foresees it before starting a round) and how long it took: its measurements, from
the first one's launch to the last one's end (`pr` counts its runs' start and end and the judging too:
roundtime.ROUND_OVERHEAD_S).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from tracker.flows import roundtime
from tracker.measure.cellresult import CellResult
from tracker.measure.harness import Settings
from tracker.runner import timeline
from tracker.runner.config import RunConfig
from tracker.runner.costs import Costs, read_record
from tracker.runner.plan import plan
from tracker.runner.pool import measure_cells
from tracker.runner.progress import Progress
from tracker.stats import DISTURBED_SPREAD, lower_spread, quantile
from tracker.store.cells import CellStore, RunKey, torch_version
from workloads.names import MODES, PRESET_NAMES, WORKLOAD_NAMES


def cmd_measure(a: argparse.Namespace) -> None:
    cells = plan(a.preset, a.workload or WORKLOAD_NAMES, a.mode or MODES)
    cfg = RunConfig(store_root=Path(a.store), machine="bench", commit=a.commit, jobs=a.jobs, device=a.device,
                    settings=Settings(), warm_cache_dir=Path(a.warm_cache) if a.warm_cache else None)
    store = CellStore(cfg.store_root, RunKey(cfg.machine, cfg.commit, torch_version()))
    t0 = time.monotonic()
    measure_cells(cells, cfg, store, Progress(len(cells)))
    wall = time.monotonic() - t0
    print(json.dumps({"cells": len(cells), "jobs": a.jobs, "wall_s": round(wall, 1), "store": a.store}))


def _store(path: str) -> CellStore:
    """A `measure --store` directory (any torch version), or a run's cell directory
    (.asv/cells/MACHINE/COMMIT/torch-VERSION), so a full `run` can be compared with a serial subset."""
    root = Path(path)
    store = CellStore(root, RunKey("bench", "bench", torch_version()))
    store.dir = next((d for d in [root, *sorted(root.glob("bench/bench/torch-*"))] if any(d.glob("*/*/*.json"))),
                     store.dir)
    return store


def _load(path: str) -> dict[tuple[str, str, str], dict]:
    """The cells of `_store(path)`, each its replicates combined."""
    return {(c.preset, c.workload, c.mode): c.to_json() for c in _store(path).cells()}


def _measurements(path: str) -> list[dict]:
    """Every measurement of `_store(path)`, each replicate (compile) on its own."""
    return [c.to_json() for c in _store(path).all() if c.has("mode")]


def cmd_agree(a: argparse.Namespace) -> None:
    serial, parallel = _load(a.serial), _load(a.parallel)
    both = sorted(k for k in serial.keys() & parallel.keys()
                  if serial[k]["status"] == "ok" and parallel[k]["status"] == "ok")
    diffs = {k: parallel[k]["median_ms"] / serial[k]["median_ms"] - 1 for k in both}
    absd = sorted(abs(d) for d in diffs.values())
    print(f"cells compared: {len(both)} (serial {len(serial)}, parallel {len(parallel)})")
    if absd:
        print(f"|parallel/serial - 1|: median {quantile(absd, .5):.2%}, p90 {quantile(absd, .9):.2%}, "
              f"max {absd[-1]:.2%}")
        for lim in (0.01, 0.03, 0.05, 0.10):
            print(f"  within {lim:.0%}: {sum(d <= lim for d in absd)}/{len(absd)}")
    for k in sorted(diffs, key=lambda k: -abs(diffs[k])):
        s, p = serial[k], parallel[k]
        print(f"  {' '.join(k)}: serial {s['median_ms']:.4f} ms, parallel {p['median_ms']:.4f} ms ({diffs[k]:+.1%}); "
              f"host {s.get('host_us') or 0:.0f}/{p.get('host_us') or 0:.0f} us a call, "
              f"flush {s.get('flush_mib') or 0}/{p.get('flush_mib') or 0} MiB")
    instances = sorted({k[:2] for k in both})
    differ = incomplete = 0
    for inst in instances:
        s_modes = {m: serial[(*inst, m)]["median_ms"] for m in MODES if (*inst, m) in both}
        p_modes = {m: parallel[(*inst, m)]["median_ms"] for m in MODES if (*inst, m) in both}
        if len(s_modes) < len(MODES):
            incomplete += 1  # a best mode over some of the modes is not the instance's best mode
            continue
        s_rank = sorted(s_modes, key=s_modes.get)
        p_best = min(p_modes, key=p_modes.get)
        margin = s_modes[s_rank[1]] / s_modes[s_rank[0]] - 1
        same = "same" if p_best == s_rank[0] else f"DIFFERS: parallel {p_best}"
        differ += p_best != s_rank[0]
        print(f"  best mode {' '.join(inst)}: serial {s_rank[0]} by {margin:.1%} over {s_rank[1]}; {same}"
              f"{'  <-- margin > 3%' if p_best != s_rank[0] and margin > 0.03 else ''}")
    print(f"instances: {len(instances)} ({incomplete} without every mode in both runs, not ranked), "
          f"best mode differs in {differ}")
    host = sorted(abs(parallel[k]["host_us"] / serial[k]["host_us"] - 1) for k in both
                  if serial[k].get("host_us") and parallel[k].get("host_us"))
    if host:  # CPU contention from compiling neighbours shows in the host's time per call
        print(f"host time per call |parallel/serial - 1|: median {quantile(host, .5):.1%}, "
              f"p90 {quantile(host, .9):.1%}, max {host[-1]:.1%} over {len(host)} cells")
    for name, cells in (("serial", serial), ("parallel", parallel)):
        launch = [c["launch_us"] for c in cells.values() if c.get("launch_us")]
        flush = [c["flush_mib"] for c in cells.values() if c.get("flush_mib")]
        if launch:
            print(f"launch floor ({name}): median {statistics.median(launch):.2f} us, max {max(launch):.2f} us")
        if flush:
            print(f"L2 flush ({name}): {sum(f > 256 for f in flush)}/{len(flush)} cells above do_bench's 256 MiB, "
                  f"largest {max(flush)} MiB")


# The phases a measurement holds the GPU lock for (tracker.measure.harness); the rest of its lock time is the
# compiler's: autotuning's benchmarks, which take the same lock (tracker.measure.gpulock.install).
LOCKED_PHASES = ("launch_floor", "inputs", "warmup", "host_time", "timing")


def cmd_phases(a: argparse.Namespace) -> None:
    cells = [c for c in _load(a.store).values() if c.get("status") == "ok"]
    every = [c for c in _measurements(a.store) if c.get("status") == "ok"]
    print(f"{len(cells)} ok cells, {len(every)} measurements (their compiles); seconds per measurement (median, "
          f"mean, sum):")
    names = sorted({n for c in every for n in c.get("phase_s") or {}})
    rows = [(n, [c["phase_s"][n] for c in every if n in (c.get("phase_s") or {})]) for n in names]
    rows += [(k, [c[k] for c in every if c.get(k) is not None])
             for k in ("lock_held_s", "lock_wait_s", "memory_wait_s", "wall_s")]
    for name, xs in rows:
        if xs:
            print(f"  {name:<14} {statistics.median(xs):7.3f} {statistics.fmean(xs):7.3f} {sum(xs):8.1f}"
                  f"  ({len(xs)} measurements)")
    _per_gpu(every)
    held = sum(c.get("lock_held_s") or 0.0 for c in every)
    timed = sum(v for c in every for n, v in (c.get("phase_s") or {}).items() if n in LOCKED_PHASES)
    if held:
        print(f"GPU lock held {held:.0f} s: {timed:.0f} s measuring the cells ({', '.join(LOCKED_PHASES)}), "
              f"{held - timed:.0f} s inside their compiles (autotuning's benchmarks)")
    spread = {(c["preset"], c["workload"], c["mode"]): lower_spread(c["median_ms"], c["p25_ms"]) for c in cells}
    if spread:  # how far below its median a cell's lower quartile lies (stats.DISTURBED_SPREAD)
        widest = max(spread, key=spread.get)
        print(f"widest timing spread (median - p25) / median: {spread[widest]:.1%} ({' '.join(widest)}); "
              f"{sum(v > DISTURBED_SPREAD for v in spread.values())} cells over {DISTURBED_SPREAD:.0%}")
    print("\n".join(timeline.report(timeline.measurements(map(CellResult.from_json, _measurements(a.store))), a.bin)))


PER_GPU = ("lock_held_s", "inputs", "warmup", "timing", "cuda_init", "cuda_init_wait", "memory_wait_s")


def _per_gpu(every: list[dict]) -> None:
    """The medians per GPU of a run on several: a GPU whose lock is held longer a measurement than the others' (its
    timing cores far from it, say) shows here."""
    gpus = sorted({str(c["gpu_index"]) for c in every if c.get("gpu_index") is not None})
    if len(gpus) < 2:
        return
    print("per GPU, the median measurement's seconds: " + ", ".join(PER_GPU))
    for gpu in gpus:
        mine = [c for c in every if str(c.get("gpu_index")) == gpu]
        values = []
        for key in PER_GPU:
            xs = [c.get(key, (c.get("phase_s") or {}).get(key)) for c in mine]
            xs = [x for x in xs if x is not None]
            values.append(f"{statistics.median(xs):.3f}" if xs else "-")
        print(f"  GPU {gpu}: {len(mine)} measurements; " + ", ".join(values))


def _cells_under(root: str) -> dict[tuple[str, str, str], dict]:
    """Every stored cell under `root`, whatever its machine, commit and torch directories."""
    cells = {}
    for path in sorted(Path(root).rglob("*.json")):
        cell = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(cell, dict) and "preset" in cell:
            cells[(cell["preset"], cell["workload"], cell["mode"])] = cell
    return cells


def compile_spread(roots: list[str]) -> list[dict]:
    """Per cell, over the stores (each one cold compile of it): the medians' min, median and max (us), and over
    the compiles that carry a fingerprint (tracker.measure.fingerprint), how many distinct generated codes and
    (code, launch configs) choices they produced."""
    runs = [_cells_under(r) for r in roots]
    rows = []
    for key in sorted(set().union(*runs)):
        ok = [run[key] for run in runs if key in run and run[key]["status"] == "ok"]
        if not ok:
            continue
        us = sorted(c["median_ms"] * 1000 for c in ok)
        prints = [c["fingerprint"] for c in ok if c.get("fingerprint")]
        rows.append({"cell": " ".join(key), "compiles": len(ok), "min_us": us[0], "median_us": quantile(us, 0.5),
                     "max_us": us[-1], "spread": us[-1] / us[0], "fingerprinted": len(prints),
                     "codes": len({f["code"] for f in prints}),
                     "configs": len({(f["code"], f["autotune"]) for f in prints})})
    return rows


def cmd_spread(a: argparse.Namespace) -> None:
    rows = compile_spread(a.stores)
    print(f"{'cell':<54} {'n':>2} {'min us':>8} {'median':>8} {'max us':>8} {'max/min':>7}  of n' fingerprinted: "
          "codes, configs")
    for r in rows:
        print(f"{r['cell']:<54} {r['compiles']:>2} {r['min_us']:8.1f} {r['median_us']:8.1f} {r['max_us']:8.1f} "
              f"{r['spread']:6.2f}x  {r['fingerprinted']:>2}: {r['codes']:>2}, {r['configs']:>2}")


def pair_gaps(base: str, head: str) -> tuple[list[float], list[float]]:
    """(seconds between the start of each pair's two timings, each measurement's wait for memory) of two sides."""
    def timed(path: str) -> dict[tuple[str, str, str, int], dict]:
        return {(r["preset"], r["workload"], r["mode"], r.get("replicate") or 1): r for r in _measurements(path)
                if r.get("started_at") is not None and "timing" in (r.get("phase_at") or {})}

    sides = timed(base), timed(head)
    gaps = sorted(abs((b["started_at"] + b["phase_at"]["timing"]) - (h["started_at"] + h["phase_at"]["timing"]))
                  for key, b in sides[0].items() if (h := sides[1].get(key)) is not None)
    waits = [r.get("memory_wait_s") or 0.0 for side in sides for r in side.values()]
    return gaps, waits


def cmd_pairs(a: argparse.Namespace) -> None:
    gaps, waits = pair_gaps(a.base, a.head)
    if not gaps:
        sys.exit(f"no pair of measurements with their times in {a.base} and {a.head}")
    print(f"{len(gaps)} pairs: their timings {quantile(gaps, 0.5):.1f} s apart (median), "
          f"p90 {quantile(gaps, 0.9):.1f} s, at most {gaps[-1]:.1f} s")
    print(f"{len(waits)} measurements waited {sum(waits):.0f} s for memory in all, "
          f"{sum(w > 5 for w in waits)} over 5 s")


def foresee_round_two(cells_dir: Path, first: int = 3, second: int = 5) -> tuple[float, float] | None:
    """(expected, took) seconds of the measurements of round 2 (compiles `first` + 1 to `second` a side) of the PR
    whose cell store is `cells_dir`; None without a round 2."""
    records = [(f.relative_to(cells_dir).parts[1], r) for f in sorted(cells_dir.glob("*/*/torch-*/*/*/*.json"))
               if (r := read_record(f)) is not None and r.launched_at and r.ended_at]
    rounds = [[(side, r) for side, r in records if lo < r.replicate_number <= hi] for lo, hi in ((0, first),
                                                                                               (first, second))]
    if not rounds[0] or not rounds[1]:
        return None

    def compiles(rs: list[tuple[str, CellResult]]) -> dict[tuple[str, str, str], int]:
        sides: dict[tuple[str, str, str], dict[str, int]] = {}
        for side, r in rs:
            per = sides.setdefault((r.preset, r.workload, r.mode), {})
            per[side] = per.get(side, 0) + 1
        return {c: min(per.values()) for c, per in sides.items() if len(per) == 2}

    def took(rs: list[tuple[str, CellResult]]) -> float:
        return max(r.ended_at for _, r in rs) - min(r.launched_at for _, r in rs)

    pace = roundtime.RoundTime(Costs.from_records(r for _, r in sorted(rounds[0], key=lambda x: x[1].replicate_number)))
    pace.learn(compiles(rounds[0]), took(rounds[0]) + roundtime.ROUND_OVERHEAD_S)
    return pace.measuring(compiles(rounds[1])), took(rounds[1])


def cmd_rounds(a: argparse.Namespace) -> None:
    ratios = []
    for d in a.cells:
        seen = foresee_round_two(Path(d))
        if seen is None:
            print(f"{d}: no second round")
            continue
        ratios.append(seen[0] / seen[1])
        print(f"{d}: round 2 expected {seen[0]:.0f} s, took {seen[1]:.0f} s ({ratios[-1]:.2f}x)")
    if ratios:
        print(f"{len(ratios)} PRs: expected / took median {quantile(ratios, 0.5):.2f}, "
              f"from {min(ratios):.2f} to {max(ratios):.2f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--store", required=True)
    m.add_argument("--jobs", type=int, default=1)
    m.add_argument("--preset", nargs="+", default=["tiny"], choices=PRESET_NAMES)
    m.add_argument("--workload", nargs="+", choices=WORKLOAD_NAMES)
    m.add_argument("--mode", nargs="+", choices=MODES)
    m.add_argument("--device", choices=("cpu", "cuda"))
    m.add_argument("--commit", default="bench")
    m.add_argument("--warm-cache")
    g = sub.add_parser("agree")
    g.add_argument("serial")
    g.add_argument("parallel")
    h = sub.add_parser("phases")
    h.add_argument("store")
    h.add_argument("--bin", type=float, help="seconds a row of the timeline (default: the run's 24th part)")
    s = sub.add_parser("spread", help="the spread of each cell over stores that each compiled it cold once")
    s.add_argument("stores", nargs="+")
    q = sub.add_parser("pairs", help="how far apart a PR's pairs were timed, and the waits for memory")
    q.add_argument("base")
    q.add_argument("head")
    o = sub.add_parser("rounds", help="how long each PR's round 2 was expected to take and took")
    o.add_argument("cells", nargs="+")
    a = p.parse_args()
    commands = {"measure": cmd_measure, "agree": cmd_agree, "phases": cmd_phases, "spread": cmd_spread,
                "pairs": cmd_pairs, "rounds": cmd_rounds}
    commands[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
