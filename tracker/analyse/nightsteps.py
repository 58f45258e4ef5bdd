"""The nights on which a machine's baselines stepped: change points over its stored history (tracker.analyse.steps).

For one machine and the torch of its latest run, every cell's level (the mean log latency of its compiles) and every
instance's best latency, run by run in date order, are searched for steps. A step is reported when it lies among the
`recent` latest runs (a step is first seen once two runs after it agree, so each is reported on the nights after it
happened, and not forever), is larger than the cell's minimum change, and holds at a level that keeps a month of
nightly searches from raising a false step: `alpha` shared (Bonferroni) among the series searched.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracker.analyse.best import instance_table
from tracker.analyse.noise import History, compiles_of
from tracker.analyse.steps import find_splits
from tracker.stats import HostBound, NoiseModel
from workloads.names import MODES

BEST = "best"  # the mode column of an instance's best latency


@dataclass(frozen=True)
class Step:
    """A step of one series: `mode` is a mode, a kernel ("kernel:NAME") or BEST (the instance's best latency). The
    run it starts at (`commit`, `date`, `torch`), the levels before and after (geometric means, ms) and its
    p-value."""

    preset: str
    workload: str
    mode: str
    commit: str
    date: str
    torch: str
    before_ms: float
    after_ms: float
    p_value: float
    runs_after: int

    @property
    def ratio(self) -> float:
        return self.after_ms / self.before_ms


def _runs(table: pd.DataFrame) -> pd.DataFrame:
    runs = table[["commit", "machine", "torch", "date"]].astype(str).drop_duplicates(["commit", "machine", "torch"])
    return runs.sort_values("date", kind="stable").reset_index(drop=True)


def _series(table: pd.DataFrame, runs: pd.DataFrame) -> dict[tuple[str, str, str], list[tuple[int, float]]]:
    """(run index, level) of every ok cell, and of every instance's best latency (mode BEST), by series."""
    index = {tuple(r): i for i, r in enumerate(runs[["commit", "machine", "torch"]].to_numpy())}
    out: dict[tuple[str, str, str], list[tuple[int, float]]] = {}
    for row in table[table["status"].astype(str) == "ok"].itertuples(index=False):
        c = compiles_of(row)
        if c is not None:
            key = (str(row.preset), str(row.workload), str(row.mode))
            out.setdefault(key, []).append((index[(str(row.commit), str(row.machine), str(row.torch))], c.log_mean))
    modes = table[table["mode"].astype(str).isin(MODES)].copy()
    modes["mode"] = pd.Categorical(modes["mode"].astype(str), categories=list(MODES))
    for inst in instance_table(modes).itertuples(index=False):
        if isinstance(inst.winner, str) and inst.winner_ms > 0:
            key = (str(inst.preset), str(inst.workload), BEST)
            out.setdefault(key, []).append((index[(str(inst.commit), str(inst.machine), str(inst.torch))],
                                            math.log(float(inst.winner_ms))))
    return out


def _prior(key: tuple[str, str, str], history: History) -> float | None:
    """A series' prior level variance: its cell class's; an instance's best latency takes the widest of its modes'."""
    modes = MODES if key[2] == BEST else (key[2],)
    found = [p.level_var for m in modes if (p := history.priors.get(history.classes.get((*key[:2], m), "")))
             and p.level_var is not None]
    return max(found) if found else None


def recent_steps(table: pd.DataFrame, machine: str, recent: int = 3, alpha: float = 0.05, least: float = 0.01,
                 ties: NoiseModel | None = None, host: HostBound | None = None) -> list[Step]:
    """The steps of `machine`'s history (results-table rows without samples) under the torch of its latest run,
    among its `recent` latest runs, largest first."""
    t = table[table["machine"].astype(str) == machine]
    if t.empty:
        return []
    t = t[t["torch"].astype(str) == _runs(t).iloc[-1]["torch"]]
    runs = _runs(t)
    series = _series(t, runs)
    history = History.from_table(t, ties, host)
    level = alpha / max(len(series), 1)
    out = []
    for key, points in series.items():
        points.sort()
        idx, levels = [i for i, _ in points], [x for _, x in points]
        splits = find_splits(levels, level, least, _prior(key, history))
        bounds = [0, *(s.index for s in splits), len(levels)]
        for n, split in enumerate(splits, 1):
            if idx[split.index] < len(runs) - recent:
                continue
            run = runs.iloc[idx[split.index]]
            before, after = levels[bounds[n - 1]:bounds[n]], levels[bounds[n]:bounds[n + 1]]
            out.append(Step(*key, run["commit"], run["date"], run["torch"], math.exp(float(np.mean(before))),
                            math.exp(float(np.mean(after))), split.p_value, len(after)))
    return sorted(out, key=lambda s: -abs(math.log(s.ratio)))


__all__ = ["BEST", "Step", "recent_steps"]
