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
instances whose best latency moved 5% or more and those reported; and the control cells' alarms. It bins each cell
by the verdict's own measured change, so a cell the verdict measured as unmoved is never counted as missed: the
measure of record is `truth`. `pairs` judges
every A/A pair of the committed cold full runs (the same workload code on other machines and days), with no
repository at hand and as if every workload's source had changed, on the runs' own compiles and once confirmed.

Planted trials against truth (the measure of record; tests/fixtures/h100-plant-truth/device-trials.sh makes them):

    python tools/verdict_trials.py truth DIR... [--verbose] [--same-pairs N] [--confirm-rounds N] [--round-by-scale]

Each DIR holds a trial.json (the trial's base and head commits, its planted and control workloads, and its two
runs: machine and results directory, the cell store beside it; the verdict run's own base and head where it
measured another tree of the same plants; `more_truth`, a list of further truth runs of the same plants, each with
its machine, results and commits, whose pairs are pooled with the truth's) and two runs of the same plants made
independently:
the verdict run (`pr` as a user runs it) and the truth run (`pr --compiles 10`: every cell in exactly ten paired
compiles a side). `truth` judges the verdict run as `compile-baselines compare` judges its results (the paired record
`pr` stored makes it judge as `pr` did), reads each cell's real change from the truth run's paired record
(exp of the mean over its pairs of log(head) - log(base), its 95% interval, and the spread of the base side's
compiles), and counts, per cell class and per size of the real change, the planted cells reported in the right
direction, undecided, called the same, reported the wrong way; the instances whose best latency really moved 4% or
more and whether each is a best-baseline change; and the control workloads' cells, whose real change is 0 by
construction, and their alarms. `--same-pairs N` judges the verdict runs as if their records asked N pairs of a cell
that is the same (ChangeRule.same_pairs; a record written before it asks any number), `--confirm-rounds N` as if they
asked pairs of N rounds for a change (ChangeRule.confirm_rounds), `--round-by-scale` as if they carried the rounds'
shared variance in proportion to each cell's own (ChangeRule.round_by_scale, records of format 7): the pairs they
measured read by a later rule, not the rounds that rule would have added.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import sys
import tempfile
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from tracker.analyse import paired
from tracker.analyse.changes import CellChange, Comparison
from tracker.analyse.compare import ChangeRule, Context, compare_runs, compare_tables, history_of, launch_floor
from tracker.analyse.confirm import COMPILES
from tracker.analyse.noise import cell_class
from tracker.analyse.pairs import _run_info as pairs_info
from tracker.analyse.verdicts import (
    IMPROVEMENT_VERDICTS,
    NOISY,
    REGRESSION_VERDICTS,
    SAME,
    TESTS,
    UNCONFIRMED,
    UNDECIDED,
)
from tracker.errors import ToolError
from tracker.measure.cellresult import CellResult
from tracker.paths import REPO_ROOT
from tracker.publish.units import count
from tracker.stats import t_quantile
from tracker.store import asvfiles, pairing
from tracker.store.cells import CellStore, RunKey, combine, default_cells_dir
from tracker.store.results import list_runs, load_runs
from workloads.modes import BY_NAME, MODES, REFERENCE


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
        kept: dict[tuple[str, str, str], list[CellResult]] = defaultdict(list)
        for c in store.all() if store else []:
            if c.has("mode") and int(c.replicate_number) <= upto:
                kept[(c.preset, c.workload, c.mode)].append(c)
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
    """The committed planted trials binned by the size of each cell's change as the verdict itself measured it (not
    by its real change: a cell the verdict measured as unmoved is never counted as missed); `truth` is the measure of
    record."""
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


# ---------------------------------------------------------------------------------------------------- truth

SIZES_TRUE = (">= 5%", "3-5%, own spread < 1%", "3-5%, own spread >= 1%", "2-3%", "< 2%")
OUTCOMES = ("reported", "undecided", "same", "wrong way", "other")
BEST_MOVE = 0.04  # a best latency that really moved this much is to be a best-baseline change in the headline
AUTOTUNED = frozenset(m for m, mode in BY_NAME.items() if mode.autotuned)


@dataclass(frozen=True)
class Truth:
    """A cell's real change as the truth run measured it: exp of the mean over its pairs of log(head) - log(base),
    with its 95% interval (t over the pairs; None from one pair), its own spread (the sd of the log latency of the
    base side's compiles; None from one) and each side's geometric mean."""

    change: float
    ci: tuple[float, float] | None
    spread: float | None
    base_ms: float
    head_ms: float
    pairs: int

    @classmethod
    def of(cls, pairs: Sequence[pairing.Pair]) -> Truth | None:
        if not pairs:
            return None
        d = [p.log_change for p in pairs]
        base, head = [math.log(p.base_ms) for p in pairs], [math.log(p.head_ms) for p in pairs]
        mean, ci, spread = statistics.fmean(d), None, None
        if len(pairs) > 1:
            half = t_quantile(0.025, len(d) - 1) * statistics.stdev(d) / math.sqrt(len(d))
            ci, spread = (math.exp(mean - half), math.exp(mean + half)), statistics.stdev(base)
        return cls(math.exp(mean), ci, spread, math.exp(statistics.fmean(base)), math.exp(statistics.fmean(head)),
                   len(pairs))

    @property
    def moved(self) -> float:
        return abs(self.change - 1)

    @property
    def steady(self) -> bool:
        """Its own compiles spread under 1%."""
        return self.spread is not None and self.spread < 0.01

    @property
    def size(self) -> str:
        """Its row of the table: the size of the real change, in either direction (3-5% split by its spread)."""
        if self.moved >= 0.05:
            return SIZES_TRUE[0]
        if self.moved >= 0.03:
            return SIZES_TRUE[1] if self.steady else SIZES_TRUE[2]
        return SIZES_TRUE[3] if self.moved >= 0.02 else SIZES_TRUE[4]

    def __str__(self) -> str:
        ci = f" [{self.ci[0] - 1:+.1%}..{self.ci[1] - 1:+.1%}]" if self.ci else ""
        spread = f", spread {self.spread:.1%}" if self.spread is not None else ""
        return f"{self.change - 1:+.1%}{ci}{spread}, {count(self.pairs, 'pair')}"


def excused(mode: str, truth: Truth) -> bool:
    """A cell the goal allows undecided though it really moved 5% or more: an autotuned mode whose own compiles
    spread wider than its change (which compile autotuning picks decides more than the code)."""
    return (truth.moved >= 0.05 and mode in AUTOTUNED and truth.spread is not None
            and truth.spread >= truth.moved)


def outcome(verdict: str | None, change: float) -> str:
    """What a verdict says of a cell whose real change is `change` (head / base)."""
    if verdict in REGRESSION_VERDICTS or verdict in IMPROVEMENT_VERDICTS:
        return "reported" if (verdict in REGRESSION_VERDICTS) == (change > 1) else "wrong way"
    if verdict in (UNDECIDED, UNCONFIRMED, NOISY):
        return "undecided"
    return "same" if verdict == SAME else "other"


@dataclass(frozen=True)
class TruthTrial:
    """A planted trial as tests/fixtures/h100-plant-truth/device-trials.sh leaves it: the verdict run's results
    (`machine`, `base`, `head`), the truth run's paired record and launch floor, and the control workloads."""

    name: str
    results: Path
    machine: str
    base: str
    head: str
    truth: pairing.PairedRecord
    launch_us: float
    controls: frozenset[str]
    planted: frozenset[str] = frozenset()  # none: every workload of the truth but the controls

    def counts(self, workload: str) -> bool:
        """Whether the trial counts `workload`'s cells: a truth may have measured more than its verdict run."""
        return not self.planted or workload in self.planted or workload in self.controls


def load_trial(directory: Path) -> TruthTrial:
    """The trial of `directory`, from its trial.json (ToolError when it or the truth's paired record is missing)."""
    manifest = directory / "trial.json"
    try:
        m = json.loads(manifest.read_text(encoding="utf-8"))
        verdict, truth, base, head = m["verdict"], m["truth"], str(m["base"]), str(m["head"])
        cells = default_cells_dir(directory / truth["results"])
        record = pooled(truth_record(cells, truth.get("machine"), base, head),
                        [truth_record(default_cells_dir(directory / x["results"]), x.get("machine"), str(x["base"]),
                                      str(x["head"])) for x in m.get("more_truth", ())])
        # the verdict run's commits, where it measured another tree of the same plants than the truth's
        return TruthTrial(str(m.get("trial", directory.name)), directory / verdict["results"],
                          str(verdict["machine"]), str(verdict.get("base", base)), str(verdict.get("head", head)),
                          record, truth_launch_floor(cells, record), frozenset(m.get("controls", ())),
                          frozenset(m.get("planted", ())))
    except OSError as e:
        raise ToolError(f"{manifest}: no trial here ({e.strerror})") from None
    except ValueError as e:
        raise ToolError(f"{manifest}: not a trial manifest ({e})") from None
    except (KeyError, TypeError, AttributeError) as e:
        raise ToolError(f"{manifest}: not a trial manifest (no {e})") from None


def rule_asked(t: TruthTrial, dest: Path, **rule: int | bool) -> Path:
    """A copy of the trial's verdict run (results and cell store) whose paired record asks `rule` (its fields:
    same_pairs, confirm_rounds, more_by_family, round_by_scale) instead of what it recorded."""
    shutil.copytree(t.results, dest)
    shutil.copytree(default_cells_dir(t.results), default_cells_dir(dest))
    # the trial may name its verdict run's commits abbreviated; the record is named by the full ones
    cells = default_cells_dir(dest)
    found = sorted(cells.glob(f"{t.machine}/{t.head}*/*/paired-{t.base}*.json"))
    if len(found) != 1:
        raise ToolError(f"{t.results}: no paired record of the verdict run (it was not measured in pairs)")
    record = pairing.read(cells, found[0])
    if rule.get("confirm_rounds", 1) > 1:
        record = replace(record, cells={k: tuple(replace(p, run=p.run or _scheduled_round(p.round, record))
                                                 for p in ps) for k, ps in record.cells.items()})
    pairing.write(cells, replace(record, **rule))
    return dest


def _scheduled_round(replicate: int, record: pairing.PairedRecord) -> str:
    """The round of pr's schedule that measures `replicate` (three compiles in round 1, then to each number of
    paired.schedule), for a record written before pairs named their runs: a cell that skipped a round is read as if
    it had not."""
    targets = [3, *(t for t in paired.schedule(record.max_compiles, max(record.confirm)) if t > 3)]
    return f"round {next((k for k, t in enumerate(targets, 1) if replicate <= t), len(targets))}"


def truth_record(cells: Path, machine: str | None, base: str, head: str) -> pairing.PairedRecord:
    """The truth run's paired record of `base` against `head` (hash prefixes) in the cell store `cells`."""
    found = sorted(cells.glob(f"{machine or '*'}/{head}*/torch-*/paired-{base}*.json"))
    if len(found) != 1:
        where = f" on {machine}" if machine else ""
        raise ToolError(f"{cells}: {len(found) or 'no'} paired records of {base[:8]} against {head[:8]}{where}, "
                        "not one (the truth run is `pr --compiles N`, which writes it)")
    return pairing.read(cells, found[0])


def pooled(record: pairing.PairedRecord, more: Sequence[pairing.PairedRecord]) -> pairing.PairedRecord:
    """`record` with the pairs of `more` truth runs of the same plants (measured from another tree, so under other
    commits) added to each cell's: a cell's truth from every compile measured of it."""
    cells = dict(record.cells)
    for r in more:
        for k, ps in r.cells.items():
            cells[k] = (*cells.get(k, ()), *ps)
    return replace(record, cells=cells)


def truth_launch_floor(cells: Path, r: pairing.PairedRecord) -> float:
    """The truth run's launch floor as a comparison takes it: the larger side's (0 where neither recorded one)."""
    stores = [CellStore.of_run(cells, RunKey(r.machine, c, r.torch)) for c in (r.base, r.head)]
    return max([f for s in stores if s and (f := s.launch_floor()) is not None] + [0.0])


@dataclass
class Tally:
    """What `truth` counts over every trial, and what --verbose lists."""

    cells: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # (class, size, outcome)
    steady: Counter[str] = field(default_factory=Counter)  # GPU-bound, really moved >= 3%, spread < 1%: outcome
    best: dict[str, list[bool]] = field(default_factory=dict)  # trial -> each instance really moved: reported?
    control: Counter[str] = field(default_factory=Counter)
    control_moved: float = 0.0  # the largest real change of a control cell
    settle: list[int] = field(default_factory=list)  # each undecided planted cell: the compiles a side more it asks
    # GPU-bound, really moved >= 5%, undecided: an autotuned mode whose own compiles spread wider than the change
    excused: int = 0
    # GPU-bound, really moved >= 5%, by planted workload (one kind of plant each): outcomes, and the trials of them
    by_workload: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    trials_of: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    lines: list[str] = field(default_factory=list)


def true_best(record: pairing.PairedRecord) -> dict[tuple[str, str], float]:
    """Each instance's best latency's real change: the fastest mode at head over the fastest at base, each mode by
    its compiles' geometric mean in the truth run."""
    sides: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for key, pairs in record.cells.items():
        preset, workload, mode = key.split("/", 2)
        if mode in MODES and (truth := Truth.of(pairs)) is not None:
            sides[(preset, workload)].append((truth.base_ms, truth.head_ms))
    return {k: min(h for _, h in v) / min(b for b, _ in v) for k, v in sides.items()}


def _said(t: TruthTrial, cell: tuple[str, ...], truth: Truth, x: CellChange | None) -> str:
    ratio = f" ({x.ratio - 1:+.1%})" if x and x.ratio else ""
    more = f", about {x.more} more compiles a side to settle" if x and x.more else ""
    return f"trial {t.name} {' '.join(cell)}: really {truth}; verdict {x.verdict if x else 'none'}{ratio}{more}"


def tally_cells(t: TruthTrial, c: Comparison, tally: Tally) -> None:
    """Each cell of the truth against its verdict: planted cells by class, size and outcome; control cells' alarms."""
    verdicts = {(x.preset, x.workload, x.mode): x for x in c.cells}
    rule = ChangeRule()
    for key, pairs in t.truth.cells.items():
        cell = tuple(key.split("/", 2))
        truth, x = Truth.of(pairs), verdicts.pop(cell, None)
        if truth is None or not t.counts(cell[1]):
            continue
        if cell[1] in t.controls:
            tally.control.update(cells=1, alarms=bool(x and x.significant),
                                 undecided=bool(x and x.verdict == UNDECIDED))
            tally.control_moved = max(tally.control_moved, truth.moved)
            tally.lines += [f"  control alarm: {_said(t, cell, truth, x)}"] if x and x.significant else []
            continue
        cls = cell_class(cell[2], min(truth.base_ms, truth.head_ms), t.launch_us, rule.noise, rule.host)
        cls = cls.split(" ", 1)[1]
        said = outcome(x.verdict if x else None, truth.change)
        tally.cells[(cls, truth.size, said)] += 1
        tally.settle += [x.more] if said == "undecided" and x is not None and x.more else []
        if cls == "GPU-bound" and truth.moved >= 0.03 and truth.steady:
            tally.steady[said] += 1
        tally.excused += cls == "GPU-bound" and said == "undecided" and excused(cell[2], truth)
        if cls == "GPU-bound" and truth.size == SIZES_TRUE[0]:
            tally.by_workload[cell[1]][said] += 1
            tally.trials_of[cell[1]].add(t.name)
        tally.lines.append(f"  {cls:10} {said:9}  {_said(t, cell, truth, x)}")
    for x in verdicts.values():
        if x.workload in t.controls:  # a control the truth run did not measure: its real change is 0 by construction
            tally.control.update(cells=1, alarms=x.significant, undecided=x.verdict == UNDECIDED)
            tally.lines += [f"  control alarm: trial {t.name} {x.preset} {x.workload} {x.mode}, verdict "
                            f"{x.verdict}"] if x.significant else []
        else:
            tally.lines.append(f"  no truth: trial {t.name} {x.preset} {x.workload} {x.mode}, verdict {x.verdict}")


def tally_best(t: TruthTrial, c: Comparison, tally: Tally) -> None:
    """Each instance whose best latency really moved 4% or more: a best-baseline change in the headline or not."""
    reported = {(i.preset, i.workload): i.best_changed for i in c.instances}
    undecided = {(i.preset, i.workload) for i in c.undecided_best}
    for (preset, workload), change in true_best(t.truth).items():
        if not t.counts(workload):
            continue
        said = reported.get((preset, workload), False)
        if workload in t.controls:
            tally.control.update(instances=1, best=said)
        elif abs(change - 1) >= BEST_MOVE:
            tally.best.setdefault(t.name, []).append(said)
            words = "a best-baseline change" if said else "NOT a best-baseline change" + \
                (", its best latency undecided" if (preset, workload) in undecided else "")
            tally.lines.append(f"  best latency: trial {t.name} {preset} {workload} really {change - 1:+.1%}: {words}")


def _share(hit: int, of: int) -> str:
    return f"{hit} of {of}" + (f" ({hit / of:.0%})" if of else "")


def print_truth(tally: Tally, trials: Sequence[TruthTrial]) -> None:
    pairs = sorted({len(p) for t in trials for p in t.truth.cells.values()}) or [0]
    names = ", ".join(t.name for t in trials)
    print(f"planted cells by class and real change, {count(len(trials), 'trial')} ({names}): the truth measured "
          f"apart, {pairs[0]}-{pairs[-1]} paired compiles a side; the verdict as compare judges it")
    for cls in CLASSES:
        print(f"  {cls:24} {'cells':>5}  " + "  ".join(f"{o:>9}" for o in OUTCOMES))
        for size in SIZES_TRUE:
            row = [tally.cells[(cls, size, o)] for o in OUTCOMES]
            print(f"    {size:22} {sum(row):>5}  " + "  ".join(f"{n:>9}" for n in row))
    large = [tally.cells[("GPU-bound", SIZES_TRUE[0], o)] for o in OUTCOMES]
    allowed = f", {_share(large[0] + tally.excused, sum(large))} counting {tally.excused} undecided autotuned " \
        "with their own spread wider than their change" if tally.excused else ""
    print(f"GPU-bound cells that really moved 5% or more: {_share(large[0], sum(large))} reported{allowed} "
          "(goal 95%); "
          f"3% or more with their own spread under 1%: {_share(tally.steady['reported'], sum(tally.steady.values()))}"
          " (goal 90%)")
    kinds = [f"{w} {_share(c['reported'], c.total())} in {count(len(tally.trials_of[w]), 'trial')}"
             for w, c in sorted(tally.by_workload.items())]
    print(f"  of them, by planted workload: {'; '.join(kinds) or 'none'}")
    planted = sum(tally.cells.values())
    undecided = sum(n for (_, _, o), n in tally.cells.items() if o == "undecided")
    controls = _share(tally.control["undecided"], tally.control["cells"])
    settle = sorted(tally.settle)
    more = (f"; what would settle them, more compiles a side: median {settle[len(settle) // 2]}, 5 or fewer for "
            f"{_share(sum(n <= 5 for n in settle), len(settle))}, at most {settle[-1]}") if settle else ""
    print(f"undecided: {_share(undecided, planted)} planted cells, {controls} control cells{more}")
    best = [b for t in trials for b in tally.best.get(t.name, [])]
    each = ", ".join(f"{t.name}: {_share(sum(tally.best.get(t.name, [])), len(tally.best.get(t.name, [])))}"
                     for t in trials)
    print(f"instances whose best latency really moved {BEST_MOVE:.0%} or more, a best-baseline change in the "
          f"headline: {_share(sum(best), len(best))} ({each})")
    print(f"control cells (workloads the patch did not touch; real change 0 by construction, at most "
          f"{tally.control_moved:.1%} measured): {tally.control['alarms']} alarms of {tally.control['cells']} cells, "
          f"{tally.control['best']} best-baseline changes of {tally.control['instances']} instances")


def cmd_truth(a: argparse.Namespace) -> None:
    """Planted trials against their real changes, measured independently (see the module docstring)."""
    trials = [load_trial(Path(d)) for d in a.trials]
    tally = Tally()
    with tempfile.TemporaryDirectory() as tmp:
        asked = {k: v for k, v in (("same_pairs", a.same_pairs), ("confirm_rounds", a.confirm_rounds),
                                   ("round_by_scale", a.round_by_scale or None)) if v is not None}
        for t in trials:
            results = rule_asked(t, Path(tmp) / t.name / "results", **asked) if asked else t.results
            c = compare_runs(results, t.base, t.head, t.machine)
            tally_cells(t, c, tally)
            tally_best(t, c, tally)
    print_truth(tally, trials)
    if a.same_pairs is not None:
        print(f"the verdict runs' pairs judged as if a cell needed {a.same_pairs} pairs to be the same")
    if a.confirm_rounds is not None:
        print(f"the verdict runs' pairs judged as if a change needed pairs of {a.confirm_rounds} rounds")
    if a.verbose:
        print("\n".join(tally.lines))


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
    tr = sub.add_parser("truth", help="planted trials against their real changes, measured independently")
    tr.add_argument("trials", nargs="+", metavar="DIR",
                    help="trial directories: trial.json and its verdict and truth runs (h100-plant-truth)")
    tr.add_argument("--verbose", action="store_true", help="list every planted cell, truth and verdict")
    tr.add_argument("--same-pairs", type=int, metavar="N",
                    help="judge the verdict runs as if their records asked N pairs of a cell that is the same")
    tr.add_argument("--confirm-rounds", type=int, metavar="N",
                    help="judge the verdict runs as if their records asked pairs of N rounds for a change")
    tr.add_argument("--round-by-scale", action="store_true",
                    help="judge the verdict runs as if their records carried the rounds' shared variance in "
                         "proportion to each cell's own (paired records of format 7)")
    tr.set_defaults(fn=cmd_truth)
    pa = sub.add_parser("pairs", help="false alarms of the committed A/A pairs of cold full runs")
    pa.add_argument("--test", choices=TESTS, default=TESTS[0])
    pa.set_defaults(fn=cmd_pairs)
    a = p.parse_args()
    try:
        a.fn(a)
    except ToolError as e:  # one line, and its exit code (1; 2 for a usage error)
        print(f"verdict_trials: {e}", file=sys.stderr)
        sys.exit(e.exit_code)


if __name__ == "__main__":
    main()
