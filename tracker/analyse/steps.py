"""Steps in a cell's history: the nights on which its level changed and stayed changed.

A night-to-night comparison judges one pair of runs; a change under its noise that night is missed, yet the runs
after it keep the new level. Over the history of one machine and torch (its runs in date order, each a level: the
mean log latency of its compiles) the level is modelled as piecewise constant. Binary segmentation (as Hunter /
Apache Otava's E-Divisive means, with a t-test to accept each split) looks for the split that best separates the
levels before from those after: Welch's t between the two segments, the noise within segments pooled with the
cell's prior (the typical run-to-run spread of its class), the p-value corrected for the splits tried (Bonferroni
over them). A split is kept when that p-value is under `alpha` and the step is larger than `least` (the cell's
minimum change); each segment then is searched again. Segments are at least `min_runs` runs long, so that one
disturbed run is never a step of its own: a step is found once `min_runs` runs after it agree.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tracker import stats


@dataclass(frozen=True)
class Split:
    """A step between `levels[index - 1]` and `levels[index]`: the mean level before and after (log), its p-value."""

    index: int
    before: float
    after: float
    p_value: float

    @property
    def ratio(self) -> float:
        return math.exp(self.after - self.before)


def _best_split(x: np.ndarray, prior_var: float | None, prior_df: float, min_runs: int) -> Split | None:
    n = len(x)
    if n < 2 * min_runs:
        return None
    best: Split | None = None
    tries = n - 2 * min_runs + 1
    for k in range(min_runs, n - min_runs + 1):
        left, right = x[:k], x[k:]
        ss = float(((left - left.mean()) ** 2).sum() + ((right - right.mean()) ** 2).sum())
        df = n - 2
        if prior_var is not None:
            ss, df = ss + prior_df * prior_var, df + prior_df
        if df <= 0:
            continue
        var = ss / df
        se = math.sqrt(var * (1 / k + 1 / (n - k))) if var > 0 else 0.0
        change = float(right.mean() - left.mean())
        p = stats.t_p_value(change / se, df) if se > 0 else (0.0 if change else 1.0)
        p = min(1.0, p * tries)
        if best is None or p < best.p_value:
            best = Split(k, float(left.mean()), float(right.mean()), p)
    return best


def find_splits(levels: Sequence[float], alpha: float = 0.001, least: float = 0.01, prior_var: float | None = None,
                prior_df: float = 4.0, min_runs: int = 2) -> list[Split]:
    """The steps of a series of levels (natural log, oldest first), in order; indices into `levels`."""
    x = np.asarray(levels, dtype=float)
    found: list[Split] = []
    pending = [(0, len(x))]
    while pending:
        lo, hi = pending.pop()
        split = _best_split(x[lo:hi], prior_var, prior_df, min_runs)
        if split is None or split.p_value >= alpha or abs(split.after - split.before) <= math.log1p(least):
            continue
        at = lo + split.index
        found.append(Split(at, split.before, split.after, split.p_value))
        pending += [(lo, at), (at, hi)]
    return sorted(found, key=lambda s: s.index)


def last_segment(levels: Sequence[float], prior_var: float | None = None, alpha: float = 0.001,
                 least: float = 0.01) -> int:
    """Where the latest segment of a series begins (0 when no step was found): the history of a cell's noise is
    read from there on, since an earlier level is another cell's."""
    splits = find_splits(levels, alpha, least, prior_var)
    return splits[-1].index if splits else 0


__all__ = ["Split", "find_splits", "last_segment"]
