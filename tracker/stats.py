"""The tracker's statistics, in one place: how one measurement is summarised, how two measurements are compared,
and when a difference is noise. Every stage uses these definitions; none writes its own.

One measurement (a cell: preset, workload, mode, in one run) is a list of timing samples in ms.
- `quantile`: the median, p25 and p99 a measured cell reports.
- `thin`: the at most SAMPLES_KEPT samples a cell stores.
- `relative_spread`: its relative interquartile range: how disturbed it was while it was measured.

Two measurements of one cell (a base and a head run):
- `p_value`: whether their samples differ (Mann-Whitney U), or, without samples, whether their 99% CIs are disjoint.

The noise rules of the analysis, each defined once:
- `NoiseModel.tied`: when two medians count as tied (the tie rule: a relative band, or overlapping 99% CIs);
- `HostBound.bound`: when a time could be all host work (the host-bound rule: within k launch floors), so that it
  says little about the kernels.
Both are fixed parameters: each run is a fresh process, so run-to-run noise is what they must cover, and the
within-run CI does not see it. Where a cell was measured in several compiles, the spread of those compiles is the
noise instead (tracker.analyse.compare, docs/verdicts.md).

Several fresh compiles of one cell (its replicates, each in a process of its own):
- `set_aside`: the one gross outlier among them, if any, so that one bad compile never widens a cell's noise;
- `Compiles`: their count, mean and spread in log latency, the unit the change test reads.

Many cells of one comparison, each with a p-value:
- `t_p_value`, `stouffer`, `bh_select`: the two-sided t-test, the combination of one instance's modes and the
  Benjamini-Hochberg step-up selection that keeps the false alarms of a whole comparison under control.

`float_or_none` is the one conversion of a missing number (NaN) to None, for JSON and view models.

Imports only numpy (scipy inside `p_value`), so every stage can use it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

SAMPLES_KEPT = 1000
# The latencies a measurement can give, in ms per call: from a nanosecond (below any timer's resolution) to a day (a
# call that long never finishes a cell's timing within any time limit). A value outside (negative, zero, NaN,
# infinite, or 1e308) is no measurement; kept out, it also keeps every ratio of two latencies a finite float.
LATENCY_MS = (1e-6, 86_400_000.0)


def _missing(x: Any) -> bool:
    return x is None or x != x  # NaN is the only value not equal to itself


def float_or_none(x: Any) -> float | None:
    """`x` as a float; None for None, NaN or anything that is not a number (a value that was not measured)."""
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


# ---------------------------------------------------------------------------------------------------- one measurement


def quantile(samples: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default method), in plain Python: the measuring process calls it on
    every sample of a cell."""
    xs = sorted(samples)
    pos = (len(xs) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def thin(samples: list[float], keep: int = SAMPLES_KEPT) -> list[float]:
    """At most `keep` evenly spaced order statistics of `samples`.

    do_bench returns up to ~100k samples for a microsecond kernel; asv stores every sample it is given.
    Order statistics keep the distribution (median, quartiles, tails) exactly enough for asv's CI and
    Mann-Whitney test, which become conservative (they see n=keep, not the true n)."""
    xs = sorted(samples)
    if len(xs) <= keep:
        return xs
    step = (len(xs) - 1) / (keep - 1)
    return [xs[round(i * step)] for i in range(keep)]


def relative_spread(median: float, q25: float | None, q75: float | None,
                    samples: Sequence[float] | None = None) -> float:
    """Relative IQR (q75 - q25) / median of one measurement, from asv's stored quartiles, else from `samples`;
    NaN when neither is there."""
    if (_missing(q25) or _missing(q75)) and samples:
        q25, q75 = np.percentile(samples, [25, 75])
    if median and not _missing(q25) and not _missing(q75):
        return float((q75 - q25) / median)
    return math.nan


# A measurement whose samples spread (IQR) over more than this share of its median was disturbed while it ran:
# too noisy to judge a change by, and flagged wherever it is shown.
TOO_NOISY_SPREAD = 0.20


def too_noisy(median: Any, q25: Any, q75: Any, max_spread: float = TOO_NOISY_SPREAD) -> Any:
    """The too-noisy test: samples whose IQR spreads over more than `max_spread` of their median. Arrays or scalars;
    False where a quartile is missing (judged on the rest)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        spread = (np.asarray(q75, dtype=float) - np.asarray(q25, dtype=float)) / np.asarray(median, dtype=float)
    return np.nan_to_num(spread, nan=0.0) > max_spread


# How far under its median a timing's lower quartile may lie before the timing counts as disturbed (something
# outside the GPU lock ran on the GPU). Undisturbed timings stay within about a tenth and disturbed ones fall far
# further, so a quarter separates them with room on both sides; `tools/bench_runner.py` reports the widest
# spread of a run's cells against it.
DISTURBED_SPREAD = 0.25


def lower_spread(median: float | None, p25: float | None) -> float:
    """How far the lower quartile lies under the median, relative to it; NaN when either is missing."""
    if _missing(median) or _missing(p25) or not median:
        return math.nan
    return float((median - p25) / median)


def disturbed(median: float | None, p25: float | None) -> bool:
    """A timing whose samples spread as only a disturbed timing's do (see DISTURBED_SPREAD)."""
    return lower_spread(median, p25) > DISTURBED_SPREAD  # NaN compares False


# ---------------------------------------------------------------------------------------------------- two measurements


def p_value(a: Sequence[float | None] | None, b: Sequence[float | None] | None,
            a_ci: tuple[float, float], b_ci: tuple[float, float]) -> float | None:
    """Whether two measurements differ: the two-sided Mann-Whitney U test (asymptotic) on their samples. Without
    samples on either side, their 99% CIs (low, high) decide: disjoint ones stand for p < 0.01 (0.0), overlapping
    ones for no evidence (1.0). None when neither is there."""
    if a and b:
        a, b = [x for x in a if x is not None], [x for x in b if x is not None]
        if a and b:
            from scipy.stats import mannwhitneyu  # scipy takes a second to import: only comparisons need it

            return float(mannwhitneyu(a, b, alternative="two-sided", method="asymptotic").pvalue)
    (a_lo, a_hi), (b_lo, b_hi) = a_ci, b_ci
    if not any(_missing(x) for x in (a_lo, a_hi, b_lo, b_hi)):
        return 0.0 if (a_hi < b_lo or b_hi < a_lo) else 1.0
    return None


# ---------------------------------------------------------------------------------------------------- compiles

# A compile at least this far from the other compiles of its cell (a factor of 3 in time) and far beyond their own
# spread is a gross outlier: a process disturbed while it ran (a loaded CPU host's oversubscribed threads). The states
# of one cell's compiles (other generated code, other launch configs) stay inside it: a state is never set aside
# (docs/verdicts.md).
GROSS_OUTLIER = math.log(3.0)
OUTLIER_SPREADS = 5.0


def set_aside(values_ms: Sequence[float]) -> tuple[list[float], list[float]]:
    """(kept, set aside) of one cell's compile medians. Values that are not positive finite numbers are set aside.
    Of three or more, the one farthest from the rest is set aside when it lies beyond both GROSS_OUTLIER and
    OUTLIER_SPREADS times the rest's own range (in log) from the rest's median: at most one, so that two compiles
    that agree never outvote the third by their agreement alone."""
    good = [float(v) for v in values_ms if isinstance(v, (int, float)) and math.isfinite(v) and v > 0]
    bad = [v for v in values_ms if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0)]
    if len(good) < 3:
        return good, bad
    logs = np.log(good)
    far = int(np.argmax(np.abs(logs - np.median(logs))))
    rest = np.delete(logs, far)
    distance = abs(logs[far] - float(np.median(rest)))
    if distance > max(GROSS_OUTLIER, OUTLIER_SPREADS * float(np.ptp(rest))):
        return [v for i, v in enumerate(good) if i != far], [good[far], *bad]
    return good, bad


@dataclass(frozen=True)
class Compiles:
    """One side's compiles of a cell, in natural-log latency: `n` kept, their mean and sample sd (None with one),
    `set_aside` how many `set_aside` left out, `best_ms` the best kept compile (the recorded latency)."""

    n: int
    log_mean: float
    log_sd: float | None
    best_ms: float
    set_aside: int = 0

    @classmethod
    def of(cls, values_ms: Sequence[float]) -> Compiles | None:
        kept, out = set_aside(values_ms)
        if not kept:
            return None
        logs = np.log(kept)
        sd = float(np.std(logs, ddof=1)) if len(kept) > 1 else None
        return cls(len(kept), float(np.mean(logs)), sd, min(kept), len(out))

    @property
    def mean_ms(self) -> float:
        """Their geometric mean."""
        return math.exp(self.log_mean)

    @property
    def log_ss(self) -> float:
        """Their sum of squares about the mean in log latency, what pooled spreads add up (0 for one compile)."""
        return (self.n - 1) * self.log_sd ** 2 if self.log_sd is not None else 0.0

    @property
    def log_df(self) -> int:
        """The degrees of freedom `log_ss` carries (0 for one compile)."""
        return self.n - 1 if self.log_sd is not None else 0


# ---------------------------------------------------------------------------------------------------- many tests


def t_p_value(t: float, df: float) -> float:
    """Two-sided p-value of a t statistic with `df` degrees of freedom (the normal's where df is infinite)."""
    from scipy.stats import norm  # scipy takes a second to import: only comparisons need it
    from scipy.stats import t as student

    if not math.isfinite(df):
        return float(2 * norm.sf(abs(t)))
    return float(2 * student.sf(abs(t), df))


def t_quantile(q: float, df: float) -> float:
    """The upper q-quantile's point of the t distribution (the normal's where df is infinite)."""
    from scipy.stats import norm
    from scipy.stats import t as student

    return float(norm.isf(q) if not math.isfinite(df) else student.isf(q, df))


def stouffer(p_values: Sequence[float], signs: Sequence[float]) -> float:
    """Two-sided p-value of several independent tests taken together (Stouffer's Z): each two-sided p turned into a
    signed z by the direction of its change, summed over sqrt(k). Changes in one direction add up; opposite ones
    cancel."""
    from scipy.stats import norm

    z = [math.copysign(float(norm.isf(max(p, 1e-300) / 2)), s) for p, s in zip(p_values, signs, strict=True)]
    return float(2 * norm.sf(abs(sum(z)) / math.sqrt(len(z))))


def simes(p_values: Sequence[float]) -> float:
    """Simes' p-value of several tests taken together: min over i of p(i) * k / i. Valid however the tests depend
    positively on each other, and as strong as the best single test when one of them moved."""
    ps = sorted(p_values)
    return min(1.0, min(p * len(ps) / i for i, p in enumerate(ps, 1)))


def bh_select(p_values: Sequence[float], alpha: float) -> list[bool]:
    """Benjamini-Hochberg's step-up selection: the tests whose p-values lie at or under the largest p(i) <= alpha *
    i / m. Under no change at all, the chance of selecting any is at most alpha (independent tests)."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    last = max((rank for rank, i in enumerate(order, 1) if p_values[i] <= alpha * rank / m), default=0)
    chosen = set(order[:last])
    return [i in chosen for i in range(m)]


# ---------------------------------------------------------------------------------------------------- noise rules


@dataclass(frozen=True)
class NoiseModel:
    """When two medians count as tied: the slower within a relative band of the faster (`rel_band`, or
    `small_rel_band` when the faster is under `small_below_ms`), or, with `use_ci`, their 99% CIs overlapping.

    The band has to cover run-to-run noise, which the within-run CI does not see (each run is a fresh process):
    cells under 50 us move between processes several times as much as larger ones, hence the wider band there; the
    cells beyond it are host-bound (HostBound), flagged separately. The measurements behind the defaults are in
    docs/verdicts.md; `tools/bench_runner.py agree` measures them again from repeated runs."""

    rel_band: float = 0.03
    small_rel_band: float = 0.10
    small_below_ms: float = 0.050
    use_ci: bool = True

    def small(self, ms: Any) -> Any:
        """Whether a time is under `small_below_ms`: noisier, so it gets the wider band (and compare's wider
        change threshold). Arrays or scalars."""
        return ms < self.small_below_ms

    def band(self, fast_ms: np.ndarray) -> np.ndarray:
        """The relative band above the faster median within which a slower one is tied with it."""
        return np.where(self.small(fast_ms), self.small_rel_band, self.rel_band)

    def tied(self, fast_ms: Any, fast_ci_high: Any, slow_ms: Any, slow_ci_low: Any) -> np.ndarray:
        """The tie rule: the slower median within the faster's band, or (use_ci) the slower's 99% CI reaching down
        to the faster's. False where either median is NaN (not measured ok). Arrays broadcast."""
        with np.errstate(invalid="ignore"):
            tied = slow_ms <= fast_ms * (1 + self.band(fast_ms))
            if self.use_ci:
                tied = tied | (slow_ci_low <= fast_ci_high)
        return tied & ~np.isnan(fast_ms) & ~np.isnan(slow_ms)

    def tied_pair(self, a_ms: np.ndarray, a_ci_low: np.ndarray, a_ci_high: np.ndarray, b_ms: np.ndarray,
                  b_ci_low: np.ndarray, b_ci_high: np.ndarray) -> np.ndarray:
        """`tied` for two measurements in either order (elementwise: the faster of each pair is a or b)."""
        a_first = a_ms <= b_ms
        return self.tied(np.where(a_first, a_ms, b_ms), np.where(a_first, a_ci_high, b_ci_high),
                         np.where(a_first, b_ms, a_ms), np.where(a_first, b_ci_low, a_ci_low))


@dataclass(frozen=True)
class HostBound:
    """A time is host-bound when median_ms * 1000 <= k * launch_us: it could be all host work (Python, dispatch,
    launches), so it says little about the kernels.

    launch_us is the run's launch floor: one eager one-element add under the same timer. `k` lies between the
    slowest cells that are all host work (short eager op chains) and the cheapest GPU-bound ones, with room either
    side (docs/verdicts.md has the measurements). All cells of a run share the floor, so an instance is host-bound
    exactly when its fastest cell is."""

    k: float = 6.0

    def bound(self, ms: Any, launch_us: Any) -> Any:
        """The host-bound rule for `ms`, the fastest time of an instance or of a pair of cells. False where either
        is NaN, or the floor is unknown (0). Arrays or scalars."""
        with np.errstate(invalid="ignore"):
            return (launch_us > 0) & (ms * 1000 <= self.k * launch_us)


__all__ = [
    "SAMPLES_KEPT",
    "Compiles",
    "HostBound",
    "NoiseModel",
    "bh_select",
    "float_or_none",
    "p_value",
    "quantile",
    "relative_spread",
    "set_aside",
    "simes",
    "stouffer",
    "t_p_value",
    "t_quantile",
    "thin",
    "too_noisy",
]
