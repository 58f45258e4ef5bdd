"""Benchmark (not a test) of the verdicts: false alarms on A/A pairs, detections on planted changes.

On the GPU host (each step is the real CLI; see tests/fixtures/h100-aa/PROVENANCE.md for the commands as run):

    compile-baselines run --preset prefill decode --machine h100-a --commit C --results-dir R   # run A, cold
    compile-baselines run --preset prefill decode --machine h100-b --commit C --results-dir R   # run B, cold
    compile-baselines compare --results-dir R --base C --head C --machine h100-a --head-machine h100-b --confirm
    compile-baselines pr --base main --head PLANTED_BRANCH --results-dir P       # base and head, then confirmation

Anywhere, on what those left behind:

    python tools/verdict_trials.py aa R --commit C --machine h100-a --head-machine h100-b
    python tools/verdict_trials.py plant P --base B --head H --machine h100-p --kinds vlm_vit_mlp_block=gpu ...

`aa` prints the false alarms of the pair three ways: each cell's first compile alone judged by the single-compile
rule (what the tracker did before replicates and confirmation), each run's own compiles (its replicates) without
confirmation, and as recorded after the confirmation (`--confirmed-only`'s rule; the head's fresh compiles count).
A pair committed in two fixtures takes both results directories (`aa R1 R2 --commit C1 --head-commit C2`).
`plant` prints, per planted workload and kind, the cells and instances the comparison reports (the PR flow's rule:
three compiles a side), and every other verdict.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

from tracker.analyse.compare import ChangeRule, Comparison, compare_runs
from tracker.analyse.confirm import COMPILES
from tracker.paths import REPO_ROOT
from tracker.store import asvfiles
from tracker.store.cells import CellStore, RunKey, combine, default_cells_dir
from tracker.store.results import list_runs


def counts(c: Comparison) -> str:
    return (f"best-baseline changes {len(c.best_changes)}, regressions {len(c.regressions)}, improvements "
            f"{len(c.improvements)}, unconfirmed {len(c.unconfirmed)}, too noisy {len(c.noisy)} "
            f"(of {len(c.cells)} cells, {len(c.instances)} instances)")


def own_compiles(results: Path, dest: Path, upto: int) -> Path:
    """A copy of the results in which every run records each cell from its first `upto` replicates alone: 1, one
    compile in one process, as runs were before replicates and confirmation; 3, the run's own compiles, before a
    confirmation added more."""
    conf = asvfiles.load_conf(REPO_ROOT / "asv.conf.json", str(dest / "results"))
    for run in list_runs(results)[0]:
        store = CellStore.of_run(default_cells_dir(results), RunKey(run.machine, run.commit, run.torch))
        kept: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
        for c in store.all() if store else []:
            if "mode" in c and int(c.get("replicate") or 1) <= upto:
                kept[(c["preset"], c["workload"], c["mode"])].append(c)
        cells = [combine(replicates) for replicates in kept.values()]
        asvfiles.record_run(conf, sys.executable, run.machine, run.commit, run.date_ms, cells,
                            asvfiles.host_of(cells) or {})
    return dest / "results"


def merged(sources: list[Path], dest: Path) -> Path:
    """One results directory (and cell store) holding the runs of every source: a pair whose runs were committed
    in two fixtures."""
    if len(sources) == 1:
        return sources[0]
    for src in sources:
        shutil.copytree(src, dest / "results", dirs_exist_ok=True)
        shutil.copytree(default_cells_dir(src), default_cells_dir(dest / "results"), dirs_exist_ok=True)
    return dest / "results"


def cmd_aa(a: argparse.Namespace) -> None:
    pair = dict(base=a.commit, head=a.head_commit or a.commit, machine=a.machine, head_machine=a.head_machine)
    with tempfile.TemporaryDirectory() as tmp:
        results = merged([Path(r) for r in a.results], Path(tmp) / "merged")
        for upto, view in ((1, "one compile a cell, single-compile rule"),
                           (COMPILES, "the runs' own compiles, unconfirmed counted")):
            rebuilt = own_compiles(results, Path(tmp) / f"upto{upto}", upto)
            c = compare_runs(rebuilt, rule=ChangeRule(), **pair)
            print(f"{view}: {counts(c)}")
            if upto == COMPILES:
                alarms(c)
        confirmed = compare_runs(results, rule=ChangeRule(confirm=(0, COMPILES)), **pair)
    print(f"confirmed (head {COMPILES} compiles, a confirmation's fresh ones included): {counts(confirmed)}")
    alarms(confirmed)


def alarms(c: Comparison) -> None:
    for x in [*c.regressions, *c.improvements, *c.unconfirmed]:
        print(f"  {x.verdict}: {x.preset} {x.workload} {x.mode} {x.ratio:.3f}x")
    for b in c.best_changes:
        print(f"  best baseline changed: {b}")


def cmd_plant(a: argparse.Namespace) -> None:
    kinds = dict(k.split("=", 1) for k in a.kinds)
    c = compare_runs(Path(a.results), a.base, a.head, a.machine, rule=ChangeRule(confirm=(COMPILES, COMPILES)))
    print(f"PR rule ({COMPILES} compiles a side): {counts(c)}")
    detected: Counter[str] = Counter()
    for i in c.instances:
        kind = kinds.get(i.workload, "unplanted")
        print(f"  {kind:10} {i.preset:8} {i.workload:28} best {i.base_best} -> {i.head_best}: "
              f"{'CHANGED' if i.best_changed else 'same'} {i.reason}")
        detected[f"{kind} instances reported"] += i.best_changed
    for x in c.cells:
        kind = kinds.get(x.workload, "unplanted")
        ratio = f"{x.ratio:.3f}x" if x.ratio else "-"
        print(f"  {kind:10} {x.preset:8} {x.workload:28} {x.mode:28} {ratio:>7} {x.compiles!s:7} {x.verdict}")
        detected[f"{kind} cells {x.verdict}"] += 1
    print("; ".join(f"{k}: {v}" for k, v in sorted(detected.items())))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    aa = sub.add_parser("aa", help="false alarms of an A/A pair (the same code on two machines)")
    aa.add_argument("results", nargs="+", help="results directories (a pair committed in two fixtures: both)")
    aa.add_argument("--commit", required=True)
    aa.add_argument("--head-commit", help="the head run's commit label, when it differs (default: --commit)")
    aa.add_argument("--machine", required=True)
    aa.add_argument("--head-machine", required=True)
    aa.set_defaults(fn=cmd_aa)
    pl = sub.add_parser("plant", help="detections of a PR with planted changes")
    pl.add_argument("results")
    pl.add_argument("--base", required=True)
    pl.add_argument("--head", required=True)
    pl.add_argument("--machine", required=True)
    pl.add_argument("--kinds", nargs="+", default=[], metavar="WORKLOAD=KIND")
    pl.set_defaults(fn=cmd_plant)
    a = p.parse_args()
    a.fn(a)


if __name__ == "__main__":
    main()
