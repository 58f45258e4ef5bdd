"""When one cell changed between two runs: the change rule, and the typed verdict it returns with its evidence.

A cell's measurements on each side are its fresh compiles (tracker.stats.Compiles: each a process of its own, the
recorded latency the best of them). Two tests decide, by `ChangeRule.test`:

`noise` (the default). The change is the difference of the two sides' mean log latency over their compiles; its
noise is the cell's own (tracker.analyse.noise: compile-to-compile and run-to-run spread, from this comparison's
compiles, the cell's history and its class's prior). Its t statistic gives a p-value. A comparison tests some 200
cells at once, so the cells are selected together (`select`): Benjamini-Hochberg at `alpha` over families, a family
being one cell, or all modes of one instance where the instance's own source changed (one code change moving all its
modes by a few percent is strong evidence together where each mode alone is weak: the better of Stouffer's Z and
Simes' test, `family_p`), then in a selected family the modes that moved its way, Benjamini-Hochberg at alpha among
them. A selected cell changed when it also moved beyond its minimum change: `floor` (1%), a quarter of the launch
floor in time (`launch_jitter`: host-bound cells draw times a fraction of a launch apart whatever their code), and
one compile's spread; and the user's `factor`.

`bands` (the rule before the noise model, and the fallback where too little is known of a cell's noise to resolve
changes as small as the bands do: no history and one compile a side, or two short a history): fixed relative bands
by cell class, and on several compiles the slower side's best beyond the faster side's slowest compile
(`judge_bands`). Which of the two judges a cell is decided before its change is looked at, from its noise alone.

Either way, a measurement whose samples spread over more than `max_spread` was disturbed while it ran: a change it
shows is NOISY, never a regression; and a change found on fewer compiles than `confirm` asks is UNCONFIRMED.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracker import stats
from tracker.analyse.noise import CellNoise, compiles_of
from tracker.analyse.verdicts import (
    DISTURBED,
    FASTER,
    HALF_BAND,
    NOISY,
    SAME,
    SLOWER,
    TESTS,
    UNCONFIRMED,
    UNDECIDED,
    UNKNOWN,
)
from tracker.stats import Compiles, HostBound, NoiseModel, float_or_none
from workloads.modes import AUTOTUNED_MODES

NOISE_TEST, BANDS_TEST, PAIRED_TEST = TESTS
# The variance of the best of k standard normal draws (k = 1..9): the best compile's own uncertainty.
MIN_VARIANCE = (1.0, 0.681, 0.561, 0.493, 0.446, 0.416, 0.392, 0.374, 0.357)


@dataclass(frozen=True)
class ChangeRule:
    """When a cell's change counts (see the module docstring; docs/verdicts.md has the measurements behind it)."""

    test: str = NOISE_TEST
    alpha: float = 0.05  # the chance that a comparison of unchanged code reports anything
    floor: float = 0.01  # no change under 1% is claimed, however still the cell
    ci_level: float = 0.95  # of the change's confidence interval, as shown
    prior_df: float = 4.0  # how many compiles a cell class's pooled noise weighs as (tracker.analyse.noise)
    run_floor: float = 0.01  # the least run-to-run spread of runs not measured together (tracker.analyse.noise)
    # The noise test calls a cell the same only where its interval lies within this size; a cell whose interval reaches
    # further is undecided, as is one the comparison cannot resolve to this size that moved beyond half the size it can
    # resolve
    resolve: float = 0.10
    # The fixed bands (test "bands", and cells of unknown noise): one compile a side
    p_value: float = 0.01
    min_change: float = 0.10
    small_change: float = 0.25  # cells under noise.small_below_ms, or host-bound
    autotuned_change: float = 0.30
    autotuned_modes: tuple[str, ...] = AUTOTUNED_MODES
    # ... several compiles a side: beyond the faster side's slowest compile by this much
    replicated_change: float = 0.05
    replicated_autotuned_small_change: float = 0.12
    # Every change must also exceed this fraction of the launch floor in time
    launch_jitter: float = 0.25
    max_spread: float = stats.TOO_NOISY_SPREAD  # relative IQR above which a measurement is too disturbed
    noise: NoiseModel = field(default_factory=NoiseModel)
    host: HostBound = field(default_factory=HostBound)
    factor: float | None = None  # the user's: a change must also exceed this ratio (e.g. 1.5: 50% slower or faster)
    # Compiles (fresh processes) each side needs before a change counts: (base, head). (0, 0): any
    confirm: tuple[int, int] = (0, 0)
    # The paired test (tracker.analyse.paired): a cell is the same when its change's interval lies within this margin
    # on at least `same_pairs` pairs (a cell whose compiles fall in two states can draw all of three from one), and a
    # cell gets at most this many pairs (the looks the sequential test allows for)
    same_within: float = 0.03
    same_pairs: int = 5
    max_compiles: int = 10
    # ... and a change is confirmed only on pairs of this many rounds, the rounds' shared noise weighed in (1: rounds
    # not counted, as records of format 3 and before)
    confirm_rounds: int = 1
    # ... and an undecided cell's estimate of the pairs that would settle it counts the modes of its instance tested
    # with it (False: its own test alone, as records of format 4 and before)
    more_by_family: bool = False
    # ... and a kernel whose own cell is undecided has its speedup's change undecided too, however small (False: a
    # change under the cell's minimum change is the same, as paired records of format 5 and before)
    kernel_undecided: bool = True
    # ... and the round-to-round variance a paired cell's mean carries is its class's ratio of that variance to the
    # variance of its differences, times the cell's own (False: its class's variance itself, as paired records of
    # format 6 and before)
    round_by_scale: bool = False

    def __post_init__(self) -> None:
        if self.factor is not None and not (self.factor >= 1 and math.isfinite(self.factor)):
            raise ValueError(f"the factor is a ratio of at least 1, e.g. 1.1 for 10%, not {self.factor:g}")
        if self.test not in TESTS:
            raise ValueError(f"the change test is one of {', '.join(TESTS)}, not {self.test!r}")
        if self.max_compiles < 2:
            raise ValueError(f"a paired comparison needs at least 2 compiles a side, not {self.max_compiles}")
        if self.same_pairs < 0:
            raise ValueError(f"the pairs a cell needs to be the same are a count, not {self.same_pairs}")

    def threshold(self, mode: str, ms: float, launch_us: float, replicated: bool = False) -> float:
        """The fixed band a cell of `mode` at `ms` (the faster of its two medians) must exceed. `replicated`: both
        sides were measured in several compiles (the band then lies beyond the faster side's slowest compile)."""
        small = self.noise.small(ms) or self.host.bound(ms, launch_us)
        autotuned = mode in self.autotuned_modes
        if replicated:
            t = self.replicated_autotuned_small_change if small and autotuned else self.replicated_change
        else:
            t = self.small_change if small else self.min_change
            t = max(t, self.autotuned_change) if autotuned else t
        return t if self.factor is None else max(t, self.factor - 1)

    def jitter_floor(self, ms: float, launch_us: float) -> float:
        """The relative change at `ms` that a quarter of the launch floor (launch_jitter) makes: no change is
        smaller in time. 0 where no launch floor was recorded."""
        return self.launch_jitter * launch_us / (ms * 1000)

    def least_change(self, ms: float, launch_us: float, noise: CellNoise, together: bool) -> float:
        """The noise test's minimum change for a cell at `ms`: the floor, the quarter launch, one compile's spread
        (compile to compile, and run to run unless the sides were measured `together`), and the user's factor."""
        spread = math.expm1(math.hypot(noise.sd, 0.0 if together else noise.run_sd))
        least = max(self.floor, self.jitter_floor(ms, launch_us), spread)
        return least if self.factor is None else max(least, self.factor - 1)


@dataclass(frozen=True)
class Verdict:
    """One cell's verdict and its evidence. `ratio`: head / base of what was judged (the compiles' geometric means
    under the noise test, the best compiles under the bands); `threshold`: the relative change it had to exceed
    (the minimum change, or the band); `ci`: the ratio's confidence interval (noise test); `resolution`: the
    smallest change the comparison could have claimed for this cell; `means_ms`: the compiles' geometric means
    (base, head); `noise`: what its noise was read from; `noisy`: why a NOISY verdict is (DISTURBED, HALF_BAND;
    None otherwise)."""

    verdict: str
    ratio: float
    p_value: float | None
    threshold: float | None
    spread: float | None  # the larger relative IQR of the two sides' recorded measurements
    compiles: tuple[int, int]
    ci: tuple[float, float] | None = None
    resolution: float | None = None
    means_ms: tuple[float, float] | None = None
    noise: str = "fixed bands"
    set_aside: tuple[int, int] = (0, 0)
    more: int | None = None  # undecided: about how many more compiles a side would decide it
    noisy: str | None = None  # NOISY: why (verdicts.DISTURBED, HALF_BAND)


def _exp(x: float) -> float:
    """exp, infinite beyond a float's range (a confidence interval on one degree of freedom can reach there)."""
    return math.exp(x) if x < 700 else math.inf


def _samples(row: Any) -> list[float] | None:
    return row.samples if isinstance(row.samples, list) else None


def _spread(b: Any, h: Any) -> float:
    return max(stats.relative_spread(r.median_ms, r.q25, r.q75, _samples(r)) for r in (b, h))


def _count(row: Any) -> int:
    return int(float_or_none(getattr(row, "compiles", None)) or 1)


def _t_test(change: float, se: float, df: float) -> float:
    """The two-sided p-value of a change in log latency with its standard error; without any noise, 0 for a change
    and 1 for none."""
    return stats.t_p_value(change / se, df) if se > 0 else (0.0 if change else 1.0)


def _unconfirmed(verdict: str, compiles: tuple[int, int], rule: ChangeRule) -> str:
    short = compiles[0] < rule.confirm[0] or compiles[1] < rule.confirm[1]
    return UNCONFIRMED if verdict in (SLOWER, FASTER) and short else verdict


# ---------------------------------------------------------------------------------------------------- the bands


def moved_word(e: Evidence, half: float, rule: ChangeRule) -> str:
    """The word for a change the test selected: slower or faster, or noisy when a measurement was disturbed (its
    samples spread beyond `max_spread`) and the change's near end is no larger than that spread: a disturbance can
    explain it. A change far beyond the disturbance (a kernel made 100 times slower on a busy host) is still one."""
    near = abs(e.log_change) - half
    if e.spread > rule.max_spread and near <= math.log1p(e.spread):
        return NOISY
    return SLOWER if e.log_change > 0 else FASTER


def judge_bands(b: Any, h: Any, modes: Iterable[str], rule: ChangeRule, launch_us: float) -> Verdict:
    """The fixed bands, for two ok measurements (results-table rows; each median is the best of its compiles).

    Where either side was measured in several compiles, the slower side's best must lie beyond the faster side's
    slowest compile by the band (the replicated floor when both sides have several, the single-compile band
    otherwise), and by a quarter launch floor in time; the samples' p-value does not decide. Without compiles the
    bands and the p-value decide, the quarter launch floor counted from the faster median; a move beyond half the
    band whose samples differ is too noisy to judge, not the same."""
    ratio = float(h.median_ms / b.median_ms)
    fast = min(b.median_ms, h.median_ms)
    nb, nh = _count(b), _count(h)
    b_max = float_or_none(getattr(b, "compiles_max_ms", None)) or b.median_ms
    h_max = float_or_none(getattr(h, "compiles_max_ms", None)) or h.median_ms
    several = max(nb, nh) > 1
    band = max(rule.threshold(m, fast, launch_us, replicated=nb > 1 and nh > 1) for m in modes)
    faster_spread = (b_max / b.median_ms) if ratio >= 1 else (h_max / h.median_ms)
    if several:
        band = max(band, rule.jitter_floor(faster_spread * fast, launch_us))
        threshold = faster_spread * (1 + band) - 1
    else:
        threshold = max(band, rule.jitter_floor(fast, launch_us))
    spread = _spread(b, h)
    p = stats.p_value(_samples(b), _samples(h), (b.ci_low, b.ci_high), (h.ci_low, h.ci_high))
    why = None
    if abs(math.log(ratio)) < math.log1p(threshold):
        # Beyond half its band on samples that differ, a cell's move is more than its class's typical noise and less
        # than its worst: neither the same nor a change that can be told
        # (one compile a side, where the samples decide; a move within the user's factor is the same, as asked)
        half = (not several and abs(math.log(ratio)) > math.log1p(threshold / 2) and p is not None
                and p < rule.p_value and (rule.factor is None or abs(math.log(ratio)) > math.log(rule.factor)))
        verdict = NOISY if half else SAME
        why = HALF_BAND if half else None
    elif spread > rule.max_spread:  # NaN (no quartiles) compares False: judged on the rest
        verdict, why = NOISY, DISTURBED
    elif several:
        verdict = SLOWER if ratio > 1 else FASTER
    elif p is None:
        verdict = UNKNOWN
    else:
        verdict = (SLOWER if ratio > 1 else FASTER) if p < rule.p_value else SAME
    return Verdict(_unconfirmed(verdict, (nb, nh), rule), ratio, p, threshold, float_or_none(spread), (nb, nh),
                   noisy=why if verdict == NOISY else None)


# ---------------------------------------------------------------------------------------------------- the noise test


@dataclass(frozen=True)
class Evidence:
    """A cell under the noise test, before the comparison's cells are selected together."""

    base: Compiles
    head: Compiles
    compiles: tuple[int, int]  # ok compiles each side (set-aside ones included)
    log_change: float  # head - base, mean log latency
    se: float
    df: float
    p_value: float
    least: float  # the minimum change
    spread: float  # the larger relative IQR of the two recorded measurements (NaN: unknown)
    noise: CellNoise
    rounds: int | None = None  # the paired test's: the rounds its pairs came from (None: not counted)

    @property
    def ratio(self) -> float:
        return math.exp(self.log_change)

    @property
    def own_df(self) -> float:
        """What the compared compiles themselves tell of the cell's noise (degrees of freedom)."""
        return self.noise.own_df


def evidence(b: Any, h: Any, noise: CellNoise, rule: ChangeRule, launch_us: float, together: bool) -> Evidence:
    """The noise test's evidence for two ok measurements, given the cell's noise. `together`: the two sides were
    measured at once, their timings interleaved (their run-to-run level is shared)."""
    cb, ch = compiles_of(b), compiles_of(h)
    assert cb is not None and ch is not None  # ok rows have a latency
    change = ch.log_mean - cb.log_mean
    se, df = noise.se(cb.n, ch.n, together)
    p = _t_test(change, se, df)
    fast = min(cb.best_ms, ch.best_ms)
    return Evidence(cb, ch, (_count(b), _count(h)), change, se, df, p,
                    rule.least_change(fast, launch_us, noise, together), _spread(b, h), noise)


def best_evidence(b: Evidence, h: Evidence, b_row: Any, h_row: Any, rule: ChangeRule, launch_us: float,
                  together: bool) -> Evidence:
    """The change of an instance's best latency when another mode wins at head: the base winner's best compile
    against the head winner's, each with the uncertainty of a best of k compiles under its own cell's noise."""
    cb, ch = b.base, h.head
    var = (b.noise.sd ** 2 * MIN_VARIANCE[min(cb.n, 9) - 1] + h.noise.sd ** 2 * MIN_VARIANCE[min(ch.n, 9) - 1]
           + (0.0 if together else b.noise.run_sd ** 2 + h.noise.run_sd ** 2))
    change = math.log(ch.best_ms / cb.best_ms)
    se = math.sqrt(var)
    df = min(b.noise.df, h.noise.df)
    p = _t_test(change, se, df)
    noise = b.noise if b.noise.sd >= h.noise.sd else h.noise
    least = rule.least_change(min(cb.best_ms, ch.best_ms), launch_us, noise, together)
    return Evidence(cb, ch, (b.compiles[0], h.compiles[1]), change, se, df, p, least, _spread(b_row, h_row), noise)


@dataclass(frozen=True)
class Selection:
    """The cells a comparison selects (`cells`) and the p-value at or under which a further hypothesis of the same
    comparison (a best latency) counts too (`cutoff`), out of `families` families; `needs`: the p-value each cell
    would need to be selected, at the first rank (its family selected: within it; else its family's, as its own)."""

    cells: frozenset
    cutoff: float
    families: int
    needs: Mapping[Any, float] = field(default_factory=dict)


def family_p(ps: Sequence[float], signs: Sequence[float]) -> float:
    """A family's p-value: its one cell's, or for an instance's modes the better of Simes' test (one mode moved) and
    Stouffer's (all moved a little, one way), Bonferroni-corrected for taking the better of two."""
    if len(ps) == 1:
        return ps[0]
    return min(1.0, 2 * min(stats.simes(ps), stats.stouffer(ps, signs)))


def select(evidence: dict[Any, Evidence], families: Sequence[Sequence[Any]], alpha: float) -> Selection:
    """Benjamini-Hochberg over the families' p-values (`family_p`) at alpha. A family of one cell is selected or
    not; in a selected family of several (an instance's modes, its source changed), the cells that moved the
    family's way are selected by Benjamini-Hochberg at alpha among themselves: the claim that the instance changed
    is the comparison's, controlled over all families; which of its modes moved is said within it (looser than
    Benjamini and Bogomolov's alpha x R / F, which among 200 families leaves no mode of a clearly changed instance)."""
    fams = [f for f in ([k for k in fam if k in evidence] for fam in families) if f]
    if not fams:
        return Selection(frozenset(), alpha, 0)
    fp = [family_p([evidence[k].p_value for k in f], [evidence[k].log_change for k in f]) for f in fams]
    chosen = stats.bh_select(fp, alpha)
    cutoff = alpha * max(sum(chosen), 1) / len(fams)
    cells: set[Any] = set()
    needs: dict[Any, float] = {}
    for fam, yes in zip(fams, chosen, strict=True):
        # a family's p-value is about 2 x its size times its one moved cell's (family_p: Simes', doubled)
        needs.update(dict.fromkeys(fam, alpha / len(fam) if yes else
                                   alpha / len(fams) / (2 * len(fam) if len(fam) > 1 else 1)))
        if not yes:
            continue
        if len(fam) == 1:
            cells |= set(fam)
            continue
        way = math.copysign(1.0, sum(evidence[k].log_change / evidence[k].se for k in fam if evidence[k].se > 0))
        along = [k for k in fam if evidence[k].log_change * way > 0]
        inner = stats.bh_select([evidence[k].p_value for k in along], alpha)
        cells |= {k for k, ok in zip(along, inner, strict=True) if ok}
    return Selection(frozenset(cells), cutoff, len(fams), needs)


def resolution(e: Evidence, families: int, rule: ChangeRule) -> float:
    """The smallest change the noise test could claim for this cell among `families` tested at once (each at the
    Bonferroni share of alpha, the strictest a selection asks)."""
    return _exp(stats.t_quantile(rule.alpha / (2 * max(families, 1)), e.df) * e.se) - 1


def verdict_of(e: Evidence, selected: bool, families: int, rule: ChangeRule) -> Verdict:
    """The noise test's verdict for one cell, once the comparison's cells were selected together."""
    half = stats.t_quantile((1 - rule.ci_level) / 2, e.df) * e.se
    ci = (_exp(e.log_change - half), _exp(e.log_change + half))
    resolves = resolution(e, families, rule)
    moved = abs(e.log_change) > math.log1p(e.least)
    why = None
    if selected and moved:
        verdict = moved_word(e, half, rule)
        why = DISTURBED
    elif moved and resolves > rule.resolve and abs(e.log_change) > math.log1p(resolves / 2):
        verdict = UNDECIDED  # moved within more noise than the comparison can resolve
    elif max(abs(e.log_change - half), abs(e.log_change + half)) > math.log1p(rule.resolve):
        verdict = UNDECIDED  # its interval reaches beyond what the rule calls the same
    else:
        verdict = SAME
    return Verdict(_unconfirmed(verdict, e.compiles, rule), e.ratio, e.p_value, e.least, float_or_none(e.spread),
                   e.compiles, ci, resolves, (e.base.mean_ms, e.head.mean_ms), e.noise.source,
                   (e.base.set_aside, e.head.set_aside), noisy=why if verdict == NOISY else None)


__all__ = ["BANDS_TEST", "NOISE_TEST", "PAIRED_TEST", "TESTS", "ChangeRule", "Evidence", "Selection", "Verdict",
           "best_evidence", "evidence", "judge_bands", "resolution", "select", "verdict_of"]
