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

Over every committed H100 trial at once (tests/fixtures; no GPU needed):

    python tools/verdict_trials.py power [--test noise|bands]    # planted PR trials: detections by size and class
    python tools/verdict_trials.py pairs [--test noise|bands]    # A/A pairs of cold full runs: false alarms

`power` judges each planted trial as the PR flow does (base and head measured together, the planted workloads'
modes judged together, the committed full runs as history) and counts, per cell class and per size of the cell's
own measured change (its compiles' geometric means, head over base), the cells reported slower or faster; the
instances whose best latency moved 5% or more and those reported; and the control cells' alarms. `pairs` judges
every A/A pair of the committed cold full runs (the same workload code on other machines and days), with no
repository at hand and as if every workload's source had changed, on the runs' own compiles and once confirmed.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from tracker.analyse.compare import (
    ChangeRule,
    Comparison,
    Context,
    compare_runs,
    compare_tables,
    history_of,
    launch_floor,
)
from tracker.analyse.confirm import COMPILES
from tracker.analyse.noise import cell_class
from tracker.analyse.pairs import _run_info as pairs_info
from tracker.analyse.verdicts import TESTS
from tracker.paths import REPO_ROOT
from tracker.store import asvfiles
from tracker.store.cells import CellStore, RunKey, combine, default_cells_dir
from tracker.store.results import list_runs, load_runs
from workloads.modes import REFERENCE


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


FIXTURES = REPO_ROOT / "tests" / "fixtures"
HISTORY = [FIXTURES / d / "results" for d in ("h100-aa2", "h100-aa3", "h100-aa4")]


ALL, EAGER, COMPILED, NONE = "all", REFERENCE, "compiled", "none"  # the modes a plant moves (NONE: a no-op)


@dataclass(frozen=True)
class Trial:
    """A committed planted PR trial: its results, base and head commits, machine, and its plants: workload -> the
    modes it moves (ALL, EAGER, COMPILED) and the presets it moves them in (None: every one). Every other cell
    of a trial is a control."""

    name: str
    results: Path
    base: str
    head: str
    machine: str
    plants: tuple[tuple[str, str, tuple[str, ...] | None], ...]

    def moved(self, preset: str, workload: str, mode: str) -> bool:
        for w, modes, presets in self.plants:
            if w == workload and (presets is None or preset in presets):
                return {ALL: True, EAGER: mode == REFERENCE, COMPILED: mode != REFERENCE}.get(modes, False)
        return False

    @property
    def workloads(self) -> list[str]:
        return [w for w, _, _ in self.plants]


HOST_PLANTS = (("rl_grpo_loss", EAGER, None), ("rl_dpo_loss", EAGER, None))
TRIALS = [
    Trial("confirm", FIXTURES / "h100-plant-confirm/results", "45e09f3f", "9cbf8b1f", "h100-p",
          (("vlm_vit_mlp_block", ALL, None), ("vlm_vision_rmsnorm_pool", ALL, None),
           ("vlm_patch_embedding_conv2d", COMPILED, None), ("vlm_contrastive_nce_loss", COMPILED, None))),
    Trial("1", FIXTURES / "h100-plant-trials/results", "0fa969ca", "7b21511e", "h100-t1",
          (("vlm_vit_mlp_block", ALL, None), ("llm_rmsnorm", EAGER, None), ("vlm_contrastive_nce_loss", COMPILED, None),
           ("rl_grpo_loss", NONE, None))),
    *(Trial(t, FIXTURES / "h100-plant-calibrated/results", "7e01eb0a", "003366eb", f"h100-t{t}",
            (("llm_rmsnorm", ALL, ("prefill",)), ("llm_layernorm", ALL, ("prefill",)), ("rl_dpo_loss", EAGER, None),
             ("rl_grpo_loss", COMPILED, None))) for t in ("2", "3")),
    *(Trial(t, FIXTURES / "h100-plant-host/results", "941f185d", "f471fa5d", f"h100-t{t}", HOST_PLANTS)
      for t in ("4", "5")),
    Trial("6", FIXTURES / "h100-pr-interleaved/results", "0f981038", "abd36aeb", "h100-t6", HOST_PLANTS),
    Trial("6b", FIXTURES / "h100-plant-power/t6b/results", "9f949095", "5f69d055", "h100-t6b", HOST_PLANTS),
    Trial("6c", FIXTURES / "h100-plant-power/t6c/results", "fb5296f1", "648ed5f8", "h100-t6c", HOST_PLANTS),
    *(Trial(t, FIXTURES / "h100-plant-power/results", base, head, f"h100-t{t}",
            (("llm_swiglu_mlp", ALL, None), ("llm_gelu_mlp", ALL, None), ("vlm_vit_mlp_block", ALL, None),
             *HOST_PLANTS, ("llm_qk_norm", NONE, None)))
      for t, base, head in (("7", "93ba9613", "f6c34f42"), ("8", "1284bf34", "045e5d3b"),
                            ("9", "6fcac595", "c8c4f56e"))),
]
SIZES = (0.02, 0.03, 0.05, 0.08, 0.12, 0.15)
CLASSES = ("GPU-bound", "small", "host-bound")


def _size(change: float) -> str | None:
    bins = [f"{s:.0%}" for s in SIZES if abs(change) >= s]
    return bins[-1] if bins else None


def cmd_power(a: argparse.Namespace) -> None:
    rule = ChangeRule(test=a.test, confirm=(COMPILES, COMPILES))
    counts: Counter[tuple[str, str]] = Counter()
    hits: Counter[tuple[str, str]] = Counter()
    best, control = Counter(), Counter()
    trials = [t for t in TRIALS if not a.trials or t.name in a.trials]
    for t in trials:
        c = compare_runs(t.results, t.base, t.head, t.machine, rule=rule, together=True, joint=t.workloads,
                         history=HISTORY)
        launch = launch_floor(c.base, c.head)
        for x in c.cells:
            if x.ratio is None or x.base_ms is None or x.head_ms is None:
                continue
            if not t.moved(x.preset, x.workload, x.mode):
                control["cells"] += 1
                control["alarms"] += x.significant
                if x.significant and a.verbose:
                    print(f"  trial {t.name} control alarm: {x.preset} {x.workload} {x.mode} {x.ratio:.3f}x")
                continue
            size = _size(x.ratio - 1)
            if size is None:
                continue
            cls = cell_class(x.mode, min(x.base_ms, x.head_ms), launch, rule.noise, rule.host).split(" ", 1)[1]
            counts[(size, cls)] += 1
            hits[(size, cls)] += x.significant
            if a.verbose and not x.significant:
                print(f"  trial {t.name} missed: {cls} {x.preset} {x.workload} {x.mode} {x.ratio:.3f}x "
                      f"{x.compiles} {x.verdict}")
        for i in c.instances:
            moved = any(t.moved(i.preset, i.workload, m) for m in (i.base_best, i.head_best) if m)
            if moved and i.ratio is not None and abs(i.ratio - 1) >= 0.05:
                best["moved"] += 1
                best["reported"] += i.best_changed
                if a.verbose and not i.best_changed:
                    print(f"  trial {t.name} best latency missed: {i.preset} {i.workload} {i.base_best} -> "
                          f"{i.head_best} {i.ratio:.3f}x {i.reason}")
    print(f"test {a.test}: planted cells reported slower or faster / planted cells, by the size of their own "
          f"measured change (at least) and class, over {len(trials)} trials ({', '.join(t.name for t in trials)})")
    print(f"  {'change':>8}  " + "  ".join(f"{c:>12}" for c in CLASSES))
    for size in (f"{s:.0%}" for s in SIZES):
        print(f"  {size:>8}  " + "  ".join(f"{hits[(size, c)]:>5} / {counts[(size, c)]:<4}" for c in CLASSES))
    print(f"instances of a planted cell whose best latency moved 5% or more: {best['reported']} of {best['moved']} "
          f"reported as a best-baseline change")
    print(f"control cells (every cell no plant moves): {control['alarms']} alarms of {control['cells']}")


PAIRS = [("h100-a", "h100-b"), ("h100-c", "h100-d"), ("h100-c", "h100-e"), ("h100-d", "h100-e"),
         ("h100-d", "h100-f"), ("h100-e", "h100-f"), ("h100-f", "h100-g"), ("h100-g", "h100-h"),
         ("h100-f", "h100-h"), ("h100-d", "h100-h"), ("h100-e", "h100-h"), ("h100-b", "h100-g"), ("h100-a", "h100-e"),
         ("h100-h", "h100-i"), ("h100-g", "h100-i"), ("h100-d", "h100-i"), ("h100-a", "h100-i")]
RUNS = ("h100-aa", "h100-aa2", "h100-aa3", "h100-aa4", "h100-aa5", "h100-aa6")


def cmd_pairs(a: argparse.Namespace) -> None:
    from workloads import catalog

    with tempfile.TemporaryDirectory() as tmp:
        results = merged([FIXTURES / d / "results" for d in RUNS], Path(tmp) / "merged")
        views = {"the runs' own compiles": own_compiles(results, Path(tmp) / "own", COMPILES),
                 "confirmed (the head's fresh compiles counted)": results}
        for view, source in views.items():
            table = load_runs(list_runs(source)[0], with_samples=True).table
            for joint, repo in ((frozenset(), "no repository"), (frozenset(catalog.workload_names()),
                                                                  "every workload's source changed")):
                rule = ChangeRule(test=a.test, confirm=(0, COMPILES) if source is results else (0, 0))
                total = Counter()
                for bm, hm in PAIRS:
                    tb, th = (table[table["machine"].astype(str) == m].reset_index(drop=True) for m in (bm, hm))
                    bi, hi = pairs_info(tb), pairs_info(th)
                    history = history_of([table[~table["machine"].astype(str).isin([bm, hm])]], hi.gpu, hi.torch,
                                         [], rule)
                    c = compare_tables(tb, th, bi, hi, rule, context=Context(history, joint=joint))
                    total.update(best=len(c.best_changes), regressions=len(c.regressions),
                                 improvements=len(c.improvements), noisy=len(c.noisy))
                    for x in [*c.regressions, *c.improvements]:
                        print(f"    {bm} -> {hm} ({view}, {repo}): {x.verdict} {x.preset} {x.workload} {x.mode} "
                              f"{x.ratio:.3f}x")
                print(f"test {a.test}, {view}, {repo}: {len(PAIRS)} A/A pairs: best-baseline changes {total['best']}, "
                      f"regressions {total['regressions']}, improvements {total['improvements']} (too noisy to judge: "
                      f"{total['noisy']})")


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
    pw = sub.add_parser("power", help="detections of the committed planted trials, by change size and cell class")
    pw.add_argument("--test", choices=TESTS, default=TESTS[0])
    pw.add_argument("--verbose", action="store_true", help="list every miss and control alarm")
    pw.add_argument("--trials", nargs="+", metavar="NAME", help="only these trials (default: every one)")
    pw.set_defaults(fn=cmd_power)
    pa = sub.add_parser("pairs", help="false alarms of the committed A/A pairs of cold full runs")
    pa.add_argument("--test", choices=TESTS, default=TESTS[0])
    pa.set_defaults(fn=cmd_pairs)
    a = p.parse_args()
    a.fn(a)


if __name__ == "__main__":
    main()
