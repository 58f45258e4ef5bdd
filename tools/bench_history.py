"""Benchmark (not a test) of the tracker on a year of nightly history: load + analysis + history, time and memory.

    python tools/bench_history.py --source tests/fixtures/h100-aa2/results [--commits 365] [--torch 2] [--cells 205]

Synthesizes the history into a temporary directory from one real asv result file of `--source` (the newest):
`--commits` nightly commits x `--torch` versions, each run holding `--cells` ok latency cells (the study's 205:
23 prefill + 18 decode instances x 5 modes; when the source has fewer ok cells, its cells are repeated). Each
run gets its own commit hash, date (one a day) and values (the source's medians, CIs and quartiles times a slow
drift and a per-cell wobble, so best modes change now and then). Samples are kept as in the source and padded
by repetition to at least `--min-samples` per cell (the H100 suite stores up to 1000 per cell after thinning),
so the files are as large as real ones: ~4 MB each, ~3 GB for the year.

Then a fresh process (so its peak RSS is the tracker's alone) times: listing the runs, loading every file into
the table, the analysis of every run, both history series and the best-mode timelines, the summary of the
latest run, and the JSON of every run (what the report uses); it prints seconds per phase and the peak RSS.
The files sit in the page cache after being written: a warm-cache figure, as on a runner that just fetched them.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the tracker is imported lazily: the child's import time and RSS are measured

DAY_MS = 86_400_000
SAMPLES_MARK = "__SAMPLES__"


def _template(source: Path) -> dict[str, Any]:
    from tracker.store.results import list_runs

    runs, _ = list_runs(source)
    if not runs:
        raise SystemExit(f"no result files in {source}")
    return json.loads(runs[-1].path.read_text())


def _study_cells(n: int) -> list[tuple[str, str, str]]:
    from workloads.names import MODES, WORKLOAD_NAMES, applies

    cells = [(p, w, m) for p in ("prefill", "decode") for w in WORKLOAD_NAMES if applies(p, w) for m in MODES]
    return cells[:n]


def build_year(source: Path, out: Path, commits: int, torches: int, cells: int, min_samples: int) -> int:
    """Write the synthetic history; returns the bytes written."""
    from tracker import metrics
    from tracker.store.asvfiles import HOST_BENCHMARK, METRIC_BENCHMARKS

    latency = METRIC_BENCHMARKS["latency"]
    data = _template(source)
    cols = {c: i for i, c in enumerate(data["result_columns"])}
    row = data["results"][latency]
    params = row[cols["params"]]
    combos = [tuple(eval_repr(v) for v in c) for c in itertools.product(*params)]
    index = {c: i for i, c in enumerate(combos)}
    n = len(combos)

    def column(name: str) -> list[Any]:
        i = cols[name]
        value = row[i] if i < len(row) else None
        return value if isinstance(value, list) else [None] * n

    result, samples = row[cols["result"]], column("samples")
    stats = {k: column(f"stats_{k}") for k in ("ci_99_a", "ci_99_b", "q_25", "q_75", "number", "repeat")}
    real = [i for i, v in enumerate(result) if isinstance(v, float) and not math.isnan(v)]
    if not real:
        raise SystemExit(f"{source}: the newest result file has no ok latency cell to copy")
    targets = [index[c] for c in _study_cells(cells)]
    picks = {t: real[k % len(real)] for k, t in enumerate(targets)}  # repeat the real cells over the study grid

    def padded(s: list[float] | None) -> list[float] | None:
        if not s:
            return s
        return (s * (min_samples // len(s) + 1))[: max(len(s), min_samples)]

    # Samples are not what the tracker reads (it skips them), so their text is written once and spliced in.
    sample_rows = [padded(samples[picks[t]]) if t in picks else None for t in range(n)]
    samples_text = json.dumps(sample_rows)
    written = 0
    for c in range(commits):
        for v in range(torches):
            torch = f"2.{9 + v}.{c % 3}" if v else "2.9.1"
            drift = 1.0 + 0.05 * math.sin(c / 40 + v)
            base = {t: result[picks[t]] for t in targets}
            wobble = {t: 1.0 + 0.03 * math.sin(c * 0.7 + t * 1.3 + v) for t in targets}
            res = [math.nan] * n
            st: dict[str, list[Any]] = {k: [None] * n for k in stats}
            for t in targets:
                f = drift * wobble[t]
                res[t] = base[t] * f
                for k in ("ci_99_a", "ci_99_b", "q_25", "q_75"):
                    src = stats[k][picks[t]]
                    st[k][t] = src * f if isinstance(src, float) else src
                st["number"][t], st["repeat"][t] = stats["number"][picks[t]], stats["repeat"][picks[t]]
            new_row = [res, params, row[cols["version"]], row[cols["started_at"]], row[cols["duration"]],
                       st["ci_99_a"], st["ci_99_b"], st["q_25"], st["q_75"], st["number"], st["repeat"],
                       SAMPLES_MARK]
            commit = hashlib.sha1(f"commit {c}".encode()).hexdigest()
            other = [[None if x is None or (isinstance(x, float) and math.isnan(x)) else 10.0 for x in res],
                     params, "1", 0, 1.0]
            doc = dict(data, commit_hash=commit, date=1_735_689_600_000 + c * DAY_MS, env_name=f"existing-py_t{v}",
                       params=dict(data["params"], torch=torch, machine="bench-h100"),
                       results={latency: new_row, **{METRIC_BENCHMARKS[m.name]: other for m in metrics.unsampled()},
                                HOST_BENCHMARK: [[6.0 + 0.1 * v], [], "1", 0, 1.0]})
            text = json.dumps(doc).replace(json.dumps(SAMPLES_MARK), samples_text, 1)
            path = out / "bench-h100" / f"{commit[:8]}-existing-py_t{v}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            written += len(text)
    (out / "bench-h100" / "machine.json").write_text(json.dumps({"machine": "bench-h100", "version": 1}))
    return written


def eval_repr(text: str) -> Any:
    import ast

    return ast.literal_eval(text)


def measure(results_dir: str) -> dict[str, Any]:
    """The timed phases, in this (fresh) process; peak RSS from the kernel's count for the process."""
    import resource

    t0 = time.perf_counter()
    from tracker.analyse import best as analysis
    from tracker.publish import summary, summary_json
    from tracker.store import results

    t_import = time.perf_counter() - t0
    rss_import = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    phases: dict[str, float] = {}

    def timed(name: str, fn: Any) -> Any:
        t = time.perf_counter()
        out = fn()
        phases[name] = time.perf_counter() - t
        return out

    runs, _ = timed("list runs", lambda: results.list_runs(results_dir))
    loaded = timed("load table", lambda: results.load_results(results_dir))
    a = timed("analyse all runs", lambda: analysis.analyse(loaded.table))
    h1, h2, tl = timed("history + timelines", lambda: (analysis.history(a, "commit"), analysis.history(a, "torch"),
                                                        analysis.best_mode_timeline(a)))
    timed("summary of the latest run", lambda: summary.render_text(results_dir))
    js = timed("JSON of every run", lambda: summary_json.summary_json(loaded.table, analysis=a))
    t = loaded.table
    return {"files": len(runs), "rows": len(t), "ok_cells": int((t["status"] == "ok").sum()),
            "instances": len(a.instances), "history_points": len(h1), "torch_points": len(h2),
            "timeline_rows": len(tl), "json_runs": len(js["runs"]), "warnings": len(loaded.warnings),
            "import_s": t_import, "rss_after_import_mib": rss_import / 1024, "phases_s": phases,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "table_mib": t.memory_usage(deep=True).sum() / 2**20}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--source", type=Path, default=ROOT / "tests" / "fixtures" / "cpu-tiny" / "results",
                   help="a real asv results directory (default: the CPU fixture; use the H100 fixture)")
    p.add_argument("--commits", type=int, default=365)
    p.add_argument("--torch", type=int, default=2, help="PyTorch versions per commit")
    p.add_argument("--cells", type=int, default=205, help="ok latency cells per run")
    p.add_argument("--min-samples", type=int, default=1000, help="pad each cell's samples to this many")
    p.add_argument("--keep", type=Path, help="write the history here and keep it (default: a temporary dir)")
    p.add_argument("--child", help=argparse.SUPPRESS)  # internal: measure this results directory, print JSON
    a = p.parse_args()
    if a.child:
        print(json.dumps(measure(a.child)))
        return
    out = a.keep or Path(tempfile.mkdtemp(prefix="cb-history-"))
    try:
        t = time.perf_counter()
        size = build_year(a.source, out / "results", a.commits, a.torch, a.cells, a.min_samples)
        print(f"synthesized {a.commits} commits x {a.torch} torch versions x {a.cells} cells from {a.source}: "
              f"{size / 2**30:.2f} GiB in {time.perf_counter() - t:.0f} s ({out / 'results'})", flush=True)
        env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
        proc = subprocess.run([sys.executable, __file__, "--child", str(out / "results")], capture_output=True,
                              text=True, env=env, cwd=ROOT)
        if proc.returncode:
            raise SystemExit(proc.stderr)
        r = json.loads(proc.stdout)
        total = sum(r["phases_s"].values())
        print(f"{r['files']} result files, {r['rows']} table rows ({r['ok_cells']} ok cells, "
              f"{r['table_mib']:.0f} MiB), {r['instances']} instances, {r['json_runs']} runs, {r['warnings']} warnings")
        for name, s in r["phases_s"].items():
            print(f"  {name:28} {s:6.2f} s")
        core = r["phases_s"]["load table"] + r["phases_s"]["analyse all runs"] + r["phases_s"]["history + timelines"]
        print(f"  {'load + analysis + history':28} {core:6.2f} s   (target <= 5 s)")
        print(f"  {'all phases':28} {total:6.2f} s   (+ {r['import_s']:.2f} s imports)")
        print(f"peak RSS {r['peak_rss_mib']:.0f} MiB (after imports {r['rss_after_import_mib']:.0f} MiB; "
              f"target < 1024 MiB); python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    finally:
        if a.keep is None:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
