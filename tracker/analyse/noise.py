"""How much one cell moves when nothing changed: the noise a change of that cell is judged against.

A cell's latency varies on two levels. Between the fresh compiles (processes) of one run it varies by `sd`, in natural
log: autotuning draws other kernels, a process lands on other memory. Between runs on other days or machines its level
moves as well, by `run_sd`: clocks, temperature, the host. Two runs measured at once, their timings interleaved on
one GPU (the PR flow), share the second level, so only `sd` separates them.

Both are read per cell, from what is known of it:
- the compiles of this comparison (each side's own spread);
- its history: earlier runs of the same GPU and torch (`History`): the spread of their compiles and of their levels,
  one outlying run left out;
- the prior of its class (autotuned or not; host-bound, small or GPU-bound): the median compile spread of the
  history's cells measured in several compiles every run, or, where no history measured the class so, of this
  comparison's cells measured in several compiles on both sides; it weighs as `prior_df` compiles, so that a cell
  measured three times a side is not judged on four degrees of freedom alone (a moderated estimate, as limma's for
  gene expression: Smyth 2004).

Runs not measured together are never taken to differ by less than a floor in level (`run_floor`, 1% for GPU-bound
cells; 2% small, 3% host-bound): a machine's day moves some cells together by a few percent, more than a short
history shows (the A/A pairs of docs/verdicts.md).

Where nothing at all is known of a cell's noise (no history, one compile a side), `EmpiricalNoise.noise` returns
None and the fixed bands judge it (tracker.analyse.judge.judge_bands).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np
import pandas as pd

from tracker.analyse.steps import last_segment
from tracker.stats import Compiles, HostBound, NoiseModel, float_or_none, set_aside
from workloads.modes import AUTOTUNED_MODES

Cell = tuple[str, str, str]  # (preset, workload, mode)


def compiles_of(row: Any) -> Compiles | None:
    """One side's compiles of a cell, from its row of the results table: the recorded mean and spread of its kept
    compiles, or, for a run that recorded only the best, median and slowest, those three (every compile of up to
    three). None for a row without a latency."""
    best = float_or_none(getattr(row, "median_ms", None))
    if best is None:
        return None
    n = int(float_or_none(getattr(row, "compiles", None)) or 1)
    mean = float_or_none(getattr(row, "compiles_mean_ms", None))
    if mean is not None:
        aside = int(float_or_none(getattr(row, "compiles_set_aside", None)) or 0)
        kept = max(1, n - aside)
        sd = float_or_none(getattr(row, "compiles_log_sd", None)) if kept > 1 else None
        return Compiles(kept, math.log(mean), sd, best, aside)
    median = float_or_none(getattr(row, "compiles_median_ms", None))
    slowest = float_or_none(getattr(row, "compiles_max_ms", None))
    values = [best] if n == 1 or slowest is None else [best, slowest] if n == 2 or median is None else \
        [best, median, slowest]
    return Compiles.of(values)


def cell_class(mode: str, fast_ms: float, launch_us: float, ties: NoiseModel, host: HostBound) -> str:
    """The class whose pooled noise a cell borrows: autotuned or not, and host-bound, small or GPU-bound."""
    size = "host-bound" if bool(host.bound(fast_ms, launch_us)) else "small" if bool(ties.small(fast_ms)) else \
        "GPU-bound"
    return f"{'autotuned' if mode in AUTOTUNED_MODES else 'plain'} {size}"


@dataclass(frozen=True)
class CellNoise:
    """A cell's noise in natural log: `sd` between compiles of one run (`df` degrees of freedom), `run_sd` between
    runs not measured together (`run_df`), and what they were read from."""

    sd: float
    df: float
    run_sd: float
    run_df: float
    source: str
    own_df: float = 0.0  # of `df`, what the compared compiles themselves gave

    def se(self, m: int, n: int, together: bool) -> tuple[float, float]:
        """The standard error of the difference of two sides' mean log latency over m and n compiles, and its
        degrees of freedom (Welch-Satterthwaite over the two levels). `together`: measured at once (the PR flow)."""
        a = self.sd ** 2 * (1 / m + 1 / n)
        b = 0.0 if together else 2 * self.run_sd ** 2
        if a + b <= 0:
            return 0.0, math.inf
        df = (a + b) ** 2 / ((a * a / self.df if self.df else 0) + (b * b / self.run_df if b and self.run_df else 0)
                             or 1e-300)
        return math.sqrt(a + b), df


class CellNoiseModel(Protocol):
    """What the change test asks of a noise model: a cell's noise, or None when nothing is known of it."""

    def noise(self, cell: Cell, cls: str, base: Compiles, head: Compiles) -> CellNoise | None: ...


# ---------------------------------------------------------------------------------------------------- history


@dataclass(frozen=True)
class CellHistory:
    """One cell over earlier runs: the pooled spread of their compiles (sum of squares and degrees of freedom), and
    the levels (mean log latency) of the runs, oldest first, with their compile counts."""

    within_ss: float
    within_df: int
    levels: tuple[float, ...]
    counts: tuple[int, ...]

    @property
    def within_var(self) -> float | None:
        return self.within_ss / self.within_df if self.within_df else None

    def level_var(self) -> tuple[float | None, int]:
        """The variance of the runs' levels and its degrees of freedom, a gross outlier among them left out
        (tracker.stats.set_aside: one disturbed run does not widen the band). A level seen once but within the
        gross-outlier bound stays: a cell's compiles fall into states a few percent apart, and one run of a state is
        all a short history shows of it."""
        kept, _ = set_aside([math.exp(x) for x in self.levels])
        if len(kept) < 2:
            return None, 0
        return float(np.var(np.log(kept), ddof=1)), len(kept) - 1


@dataclass(frozen=True)
class Prior:
    """A class of cells' typical noise: the median over its cells of their compile variance and level variance."""

    within_var: float | None
    level_var: float | None
    cells: int


@dataclass
class History:
    """Earlier runs of one GPU and torch, cell by cell (`cells`), and the priors of the cell classes (`priors`)."""

    runs: int = 0
    cells: dict[Cell, CellHistory] = field(default_factory=dict)
    classes: dict[Cell, str] = field(default_factory=dict)
    priors: dict[str, Prior] = field(default_factory=dict)

    @classmethod
    def from_table(cls, table: pd.DataFrame, ties: NoiseModel | None = None, host: HostBound | None = None,
                   lookback: int = 30) -> History:
        """The history of the ok cells of `table` (results-table rows of earlier runs, already chosen: one GPU and
        torch), its latest `lookback` runs."""
        ties, host = ties or NoiseModel(), host or HostBound()
        if table.empty:
            return cls()
        ok = table[table["status"].astype(str) == "ok"]
        runs = ok[["commit", "machine", "torch", "date"]].astype(str).drop_duplicates(["commit", "machine", "torch"])
        runs = runs.sort_values("date", kind="stable").tail(lookback)
        keep = set(map(tuple, runs[["commit", "machine", "torch"]].to_numpy()))
        per_cell: dict[Cell, list[tuple[str, Compiles]]] = defaultdict(list)
        fastest: dict[Cell, tuple[float, float]] = {}
        for row in ok.itertuples(index=False):
            if (str(row.commit), str(row.machine), str(row.torch)) not in keep:
                continue
            c = compiles_of(row)
            if c is None:
                continue
            key = (str(row.preset), str(row.workload), str(row.mode))
            per_cell[key].append((str(row.date), c))
            launch = float_or_none(getattr(row, "launch_us", None)) or 0.0
            fastest[key] = min(fastest.get(key, (math.inf, 0.0)), (c.best_ms, launch))
        history = cls(runs=len(keep))
        for key, entries in per_cell.items():
            entries.sort(key=lambda e: e[0])
            comp = [c for _, c in entries]
            ss, df = sum(c.log_ss for c in comp), sum(c.log_df for c in comp)
            history.cells[key] = CellHistory(ss, df, tuple(c.log_mean for c in comp), tuple(c.n for c in comp))
            history.classes[key] = cell_class(key[2], *fastest[key], ties, host)
        history.priors = _priors(history.cells, history.classes)
        history.cells = {key: _since_last_step(h, history.priors.get(history.classes[key]))
                         for key, h in history.cells.items()}
        history.priors = _priors(history.cells, history.classes)
        return history


def _since_last_step(h: CellHistory, prior: Prior | None) -> CellHistory:
    """The cell's history from its latest step on (tracker.analyse.steps): levels before a step are those of code
    or versions that are gone, and would make its noise look wider than it is."""
    start = last_segment(h.levels, prior.level_var if prior else None)
    if not start:
        return h
    return CellHistory(h.within_ss, h.within_df, h.levels[start:], h.counts[start:])


def _priors(cells: dict[Cell, CellHistory], classes: dict[Cell, str]) -> dict[str, Prior]:
    within: dict[str, list[float]] = defaultdict(list)
    level: dict[str, list[float]] = defaultdict(list)
    for key, h in cells.items():
        # Only cells measured in several compiles in every run tell their class's compile spread: cells given more
        # compiles only when they moved (a confirmation) are the noisiest of their class.
        if h.within_df >= 2 and h.within_var is not None and min(h.counts) > 1:
            within[classes[key]].append(h.within_var)
        var, df = h.level_var()
        if var is not None and df >= 2:
            level[classes[key]].append(var)
    return {c: Prior(float(np.median(within[c])) if within[c] else None,
                     float(np.median(level[c])) if level[c] else None, max(len(within[c]), len(level[c])))
            for c in set(within) | set(level)}


# ---------------------------------------------------------------------------------------------------- the model


@dataclass(frozen=True)
class EmpiricalNoise:
    """A cell's noise from its own compiles, its history and its class's prior (see the module docstring)."""

    history: History = field(default_factory=History)
    prior_df: float = 4.0
    # Two runs on other days or machines differ by more than their histories show: a machine's day (clocks, another
    # host) moves some cells together by a few percent. The run-to-run spread of a cell is never taken under its
    # size's floor (GPU-bound, small, host-bound: the A/A pairs' spread, docs/verdicts.md)
    run_floor: float = 0.01
    run_floors: tuple[tuple[str, float], ...] = (("small", 0.02), ("host-bound", 0.03))
    # The compile variances of the comparison's own cells measured in several compiles, by class (`pooling`)
    pooled: dict[str, list[float]] = field(default_factory=dict)

    def pooling(self, pooled: dict[str, list[float]]) -> EmpiricalNoise:
        """This model with the comparison's own cells as the prior of the classes no history gives one."""
        return replace(self, pooled=pooled)

    def _within_prior(self, cls: str, prior: Prior | None) -> float | None:
        if prior is not None and prior.within_var is not None:
            return prior.within_var
        pooled = self.pooled.get(cls)
        return float(np.median(pooled)) if pooled and len(pooled) >= 3 else None

    def noise(self, cell: Cell, cls: str, base: Compiles, head: Compiles) -> CellNoise | None:
        h, prior = self.history.cells.get(cell), self.history.priors.get(self.history.classes.get(cell, cls))
        sources: list[str] = []
        ss, df = base.log_ss + head.log_ss, float(base.log_df + head.log_df)
        own = df
        if df:
            sources.append(f"{int(df) + 2} compiles of this comparison")
        if h is not None and h.within_df and min(h.counts) > 1:  # a cell given compiles only when it moved: biased
            ss, df = ss + h.within_ss, df + h.within_df
            sources.append(f"{h.within_df + len(h.levels)} compiles of {len(h.levels)} earlier runs")
        within_prior = self._within_prior(cls, prior)
        if within_prior is not None:
            ss, df = ss + self.prior_df * within_prior, df + self.prior_df
        level, level_df = _level(h, prior, self.prior_df)
        if h is not None and h.levels and len(h.levels) > 1:
            sources.append(f"the levels of {len(h.levels)} earlier runs")
        if not df and level is None:
            return None
        if prior is not None or cls in self.pooled:
            sources.append(f"the {cls} prior")
        within = ss / df if df else level
        within_df = df if df else level_df
        mean_n = float(np.mean(h.counts)) if h is not None and h.counts else 1.0
        run_var = max(0.0, level - within / mean_n) if level is not None else 0.0
        floor = max([self.run_floor, *(f for size, f in self.run_floors if cls.endswith(size))])
        if run_var < floor ** 2:
            run_var, level_df = floor ** 2, math.inf
        return CellNoise(math.sqrt(within), within_df, math.sqrt(run_var), level_df, "; ".join(sources), own)


def _level(h: CellHistory | None, prior: Prior | None, prior_df: float) -> tuple[float | None, float]:
    """The variance of a cell's level between runs, moderated by its class's prior, and its degrees of freedom."""
    var, df = h.level_var() if h is not None else (None, 0)
    ss, n = (var * df if var is not None else 0.0), float(df)
    if prior is not None and prior.level_var is not None:
        ss, n = ss + prior_df * prior.level_var, n + prior_df
    return (ss / n, n) if n else (None, 0.0)


def history_of(tables: Iterable[pd.DataFrame], gpu: str, torch: str, exclude: Iterable[tuple[str, str, str]],
               before: str | None = None, ties: NoiseModel | None = None, host: HostBound | None = None) -> History:
    """The History of the runs in `tables` measured on `gpu` under `torch`, other than `exclude` ((commit, machine,
    torch) of the runs compared), dated no later than `before` when given."""
    frames = [t for t in tables if not t.empty]
    if not frames:
        return History()
    t = pd.concat(frames, ignore_index=True)
    t = t[(t["gpu"].astype(str) == gpu) & (t["torch"].astype(str) == torch)]
    skip = {tuple(map(str, x)) for x in exclude}
    keys = list(zip(t["commit"].astype(str), t["machine"].astype(str), t["torch"].astype(str), strict=True))
    t = t[[k not in skip for k in keys]]
    if before is not None:
        t = t[t["date"].astype(str) <= before]
    return History.from_table(t, ties, host)


__all__ = ["CellHistory", "CellNoise", "CellNoiseModel", "EmpiricalNoise", "History", "Prior", "cell_class",
           "compiles_of", "history_of"]
