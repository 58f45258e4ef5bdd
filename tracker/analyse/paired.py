"""The paired sequential test: base and head measured in pairs, round after round, until each cell is decided.

In round r each undecided cell gets one fresh compile at base and one at head, started together on the same GPU
(tracker.store.pairing). A pair's difference in log latency, d = log(head) - log(base), cancels what the two share:
the GPU (same-model GPUs differ by several percent), the round's clocks and temperature, the host's load. The test
is on the mean of a cell's n differences:

    se^2 = s^2 / n,    s^2 = (k s0^2 + (n - 1) s_d^2) / (k + n - 1),    df = k + n - 1

where s_d is the sample sd of the differences and s0^2 the median of s_d^2 over this comparison's cells of the same
class measured in two pairs or more, weighing as k = ChangeRule.prior_df pairs (a moderated variance, Smyth 2004): a
cell of three pairs is not judged on two degrees of freedom alone. A gross outlier among the differences (a process
in another state, three times off the rest: tracker.stats.set_aside) is set aside.

The pairs of one round are not independent of each other: a round is one `run` a side, its processes forked from
one server, and what a run does to all of its processes moves every difference of the round alike, by a few percent
on host-sensitive cells (docs/verdicts.md, "Rounds"). Where the rule counts rounds (ChangeRule.confirm_rounds > 1,
paired records of format 4), the mean's variance has that shared part too,

    se^2 = s^2 / n + r^2 * sum(n_i^2) / n^2,

n_i the cell's pairs in round i and r^2 its round-to-round variance (`round_variance`: one-way random effects, by
moments): its class's median over its cells measured in two rounds or more, as a share of each cell's own variance,
times the cell's s^2 (ChangeRule.round_by_scale, paired records of format 7; before, the class's median variance
itself, which a class of few cells, some far noisier, set for its quiet ones too); 0 while no cell has two rounds. A
change is confirmed only on pairs of `confirm_rounds` rounds: three pairs of one round can be one round's state.

The rounds grow (`schedule`: 1, 3, 5, 8, 10 compiles a side by default) and the comparison looks at the data after
every round, so each look is made at Pocock's nominal level for K looks (`nominal_alpha`, K the rounds of the
schedule), which keeps the chance that unchanged code is ever called changed, over all looks, at alpha. At each look:

- changed: the cells are selected together as the noise test selects them (tracker.analyse.judge.select:
  Benjamini-Hochberg over families at the nominal level) and the change exceeds the minimum change (the 1% floor,
  a quarter of the launch floor in time, the user's factor); with fewer than ChangeRule.confirm pairs it is
  unconfirmed and the cell is measured again;
- same: the change's (1 - 2 x nominal) interval lies inside +-same_within (two one-sided tests), on at least
  ChangeRule.same_pairs pairs: a cell whose compiles fall in two states can draw all of three from one, and so look
  still when it moved (docs/verdicts.md);
- undecided otherwise: the cell gets another round, while the budget lasts. A cell still undecided at the end says
  so, with its interval and about how many more pairs would settle it (`more_to_settle`), never "same".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from statistics import median
from typing import Any

from tracker import stats
from tracker.analyse.judge import ChangeRule, Evidence, Verdict, _exp, _unconfirmed, moved_word
from tracker.analyse.noise import CellNoise
from tracker.analyse.verdicts import DISTURBED, FASTER, NOISY, SAME, SLOWER, UNCONFIRMED, UNDECIDED
from tracker.stats import Compiles
from tracker.store.pairing import Pair, PairedRecord

# Pocock's nominal two-sided level for K equally spaced looks at an overall 0.05 (Pocock 1977, table 1; K = 1..10).
_POCOCK_05 = (0.05, 0.0294, 0.0221, 0.0182, 0.0158, 0.0142, 0.0130, 0.0120, 0.0112, 0.0106)


def nominal_alpha(alpha: float, looks: int) -> float:
    """The level each of `looks` looks is made at so that all of them together keep `alpha`: Pocock's boundary,
    scaled from its 0.05 table; beyond ten looks, Bonferroni over the extra ones (conservative)."""
    k = max(1, looks)
    base = _POCOCK_05[min(k, len(_POCOCK_05)) - 1] * alpha / 0.05
    return base * len(_POCOCK_05) / k if k > len(_POCOCK_05) else base


def schedule(most: int, confirm: int = 3) -> list[int]:
    """The compiles a side after each round: one, then the confirmation's number, then about 1.6 times as many each
    round, up to `most`. A round costs about the same whatever the number of compiles in it (they compile side by
    side: docs/runner.md), so the rounds grow rather than add one compile each."""
    out = [1]
    while out[-1] < most:
        out.append(min(most, max(out[-1] + 1, confirm if len(out) == 1 else math.ceil(out[-1] * 1.6))))
    return out


CONFIRM_ROUNDS = 2  # the rounds a paired change is confirmed on (the module's docstring says why)


def rule_for(most: int, confirm: int) -> ChangeRule:
    """The rule of a paired measurement of at most `most` compiles a side that confirms a change on `confirm` pairs
    of CONFIRM_ROUNDS rounds. Where the user allows fewer compiles than the same needs, a cell is the same on all it
    may get; where fewer than the rounds, a change is confirmed on the rounds it may get."""
    return ChangeRule(confirm=(confirm, confirm), max_compiles=most, same_pairs=min(ChangeRule.same_pairs, most),
                      confirm_rounds=min(CONFIRM_ROUNDS, len(schedule(most, confirm)) - 1 or 1), more_by_family=True,
                      round_by_scale=True)


# The rule's fields a paired record (tracker.store.pairing) keeps under the same names
RECORDED = ("confirm", "same_within", "same_pairs", "max_compiles", "confirm_rounds", "more_by_family",
            "kernel_undecided", "round_by_scale")


def recorded(r: ChangeRule) -> dict[str, Any]:
    """The fields of a paired record (tracker.store.pairing) that say which rule decided it, so that any later
    comparison judges as this one did (`as_recorded`)."""
    return {name: getattr(r, name) for name in RECORDED}


def as_recorded(rule: ChangeRule, record: PairedRecord) -> ChangeRule:
    """`rule` with the fields `record` (a paired record) says it was decided by."""
    return replace(rule, **{name: getattr(record, name) for name in RECORDED})


def looks(rule: ChangeRule) -> int:
    """The looks a paired comparison may make: one after each round of `schedule`."""
    return len(schedule(rule.max_compiles, max(rule.confirm)))


@dataclass(frozen=True)
class Differences:
    """A cell's pairs as the test reads them: the kept differences in log latency, the pairs set aside, and each
    side's compiles (for the means and the best compile shown)."""

    logs: tuple[float, ...]
    set_aside: int
    base: Compiles
    head: Compiles
    rounds: tuple[str, ...] = ()  # the run of each kept difference ("": not recorded, as one run)

    @classmethod
    def of(cls, pairs: Sequence[Pair]) -> Differences | None:
        if not pairs:
            return None
        ratios = [math.exp(p.log_change) for p in pairs]
        kept, out = stats.set_aside(ratios)
        base = Compiles.of([p.base_ms for p in pairs])
        head = Compiles.of([p.head_ms for p in pairs])
        if not kept or base is None or head is None:
            return None
        left = list(zip(ratios, (p.run or "" for p in pairs), strict=True))
        rounds = []
        for x in kept:
            i = next(i for i, (r, _) in enumerate(left) if r == x)
            rounds.append(left.pop(i)[1])
        return cls(tuple(math.log(x) for x in kept), len(out), base, head, tuple(rounds))

    def by_round(self) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        for x, r in zip(self.logs, self.rounds, strict=True):
            out.setdefault(r, []).append(x)
        return out

    @property
    def n(self) -> int:
        return len(self.logs)

    @property
    def mean(self) -> float:
        return math.fsum(self.logs) / self.n

    @property
    def var(self) -> float | None:
        """The sample variance of the differences (None for one)."""
        if self.n < 2:
            return None
        m = self.mean
        return math.fsum((x - m) ** 2 for x in self.logs) / (self.n - 1)


def _median_by_class(diffs: Mapping[object, tuple[str, Differences]],
                     of: Callable[[Differences], float | None]) -> dict[str, float]:
    """By class, the median of `of` over this comparison's cells for which it is known."""
    by_class: dict[str, list[float]] = {}
    for cls, d in diffs.values():
        if (v := of(d)) is not None:
            by_class.setdefault(cls, []).append(v)
    return {cls: float(median(v)) for cls, v in by_class.items()}


def pooled_variance(diffs: Mapping[object, tuple[str, Differences]]) -> dict[str, float]:
    """s0^2 by class: the median variance of the differences of this comparison's cells of two pairs or more."""
    return _median_by_class(diffs, lambda d: d.var)


def round_variance(d: Differences) -> float | None:
    """The variance one round adds to all of its differences alike, as this cell's pairs tell it: (MS_between -
    MS_within) / n0 of a one-way random-effects layout, at least 0; None without two rounds and a round of two pairs."""
    groups = list(d.by_round().values())
    n, k = d.n, len(groups)
    if k < 2 or n - k < 1:
        return None
    m = d.mean
    between = math.fsum(len(g) * (math.fsum(g) / len(g) - m) ** 2 for g in groups) / (k - 1)
    within = math.fsum((x - math.fsum(g) / len(g)) ** 2 for g in groups for x in g) / (n - k)
    n0 = (n - sum(len(g) ** 2 for g in groups) / n) / (k - 1)
    return max(0.0, (between - within) / n0)


def pooled_round_variance(diffs: Mapping[object, tuple[str, Differences]], by_scale: bool = False
                          ) -> dict[str, float]:
    """r^2 by class: the median `round_variance` of this comparison's cells measured in two rounds or more; `by_scale`:
    the median of its ratio to each cell's variance of its differences (ChangeRule.round_by_scale)."""
    if not by_scale:
        return _median_by_class(diffs, round_variance)

    def ratio(d: Differences) -> float | None:
        r = round_variance(d)
        return r / d.var if r is not None and d.var else None

    return _median_by_class(diffs, ratio)


def evidence(d: Differences, prior_var: float | None, rule: ChangeRule, least: float, spread: float,
             compiles: tuple[int, int], round_var: float | None = None) -> Evidence | None:
    """The paired evidence of one cell; None where nothing tells its noise yet (one pair and no prior).
    `round_var`: its class's round-to-round variance, where the rule counts rounds (with ChangeRule.round_by_scale,
    its ratio to a cell's variance: `pooled_round_variance`)."""
    k = rule.prior_df if prior_var is not None else 0.0
    own = (d.n - 1) * d.var if d.var is not None else 0.0
    df = k + d.n - 1
    if df <= 0:
        return None
    var = (k * (prior_var or 0.0) + own) / df
    round_var = (round_var or 0.0) * (var if rule.round_by_scale else 1.0)
    shared = round_var * sum(len(g) ** 2 for g in d.by_round().values()) / d.n ** 2
    se = math.sqrt(var / d.n + shared)
    p = stats.t_p_value(d.mean / se, df) if se > 0 else (0.0 if d.mean else 1.0)
    source = f"{d.n} pairs" + (f" and its class's spread (as {k:g} pairs)" if k else "") + \
        (" and its rounds' shared spread" if shared else "")
    noise = CellNoise(math.sqrt(var / 2), df, 0.0, 0.0, f"paired: {source}", own_df=d.n - 1)
    rounds = len(set(d.rounds)) if rule.confirm_rounds > 1 else None
    return Evidence(d.base, d.head, compiles, d.mean, se, df, p, least, spread, noise, rounds)


def more_to_settle(e: Evidence, rule: ChangeRule, families: int, needs: float | None = None) -> int:
    """About how many more pairs would decide this cell at its present estimate and noise: enough for the change to
    be selected, or for its interval to fit inside the margin, whichever comes first. Selected at the p-value the
    selection says it `needs` (`judge.Selection.needs`: its instance's modes counted), where `rule.more_by_family`;
    else as a family of its own, first among `families` (records of format 4)."""
    n = e.compiles[0]
    sd = e.se * math.sqrt(max(n, 1))
    if sd <= 0:
        return 0
    level = nominal_alpha(rule.alpha, looks(rule))
    bar = needs if rule.more_by_family and needs is not None else level / max(families, 1)
    change, margin = abs(e.log_change), _margin(e, rule)
    need = []
    if change > 0:
        need.append((stats.t_quantile(bar / 2, e.df) * sd / change) ** 2)
    if change < margin:
        need.append(max((stats.t_quantile(level, e.df) * sd / (margin - change)) ** 2, rule.same_pairs))
    return max(0, math.ceil(min(need)) - n) if need else 0


def _margin(e: Evidence, rule: ChangeRule) -> float:
    """The margin of "the same", in log: same_within. A cell whose minimum change is larger (a quarter launch on a
    host-bound cell) and that moved between the two is undecided: the rule never claims such a change, nor calls it
    the same."""
    return math.log1p(rule.same_within)


def verdict_of(e: Evidence, selected: bool, families: int, rule: ChangeRule, needs: float | None = None) -> Verdict:
    """The paired test's verdict for one cell once the comparison's cells were selected together (`needs`: the
    p-value the selection would have needed of it)."""
    level = nominal_alpha(rule.alpha, looks(rule))
    half = stats.t_quantile((1 - rule.ci_level) / 2, e.df) * e.se
    ci = (_exp(e.log_change - half), _exp(e.log_change + half))
    resolves = _exp(stats.t_quantile(level / (2 * max(families, 1)), e.df) * e.se) - 1
    if selected and abs(e.log_change) > math.log1p(e.least):
        verdict = moved_word(e, half, rule)
        verdict = _unconfirmed(verdict, e.compiles, rule)
        if verdict in (SLOWER, FASTER) and e.rounds is not None and e.rounds < rule.confirm_rounds:
            verdict = UNCONFIRMED
    elif abs(e.log_change) + stats.t_quantile(level, e.df) * e.se < _margin(e, rule) and \
            min(e.compiles) >= rule.same_pairs:
        verdict = SAME
    else:
        verdict = UNDECIDED
    more = more_to_settle(e, rule, families, needs) if verdict == UNDECIDED else None
    return Verdict(verdict, e.ratio, e.p_value, e.least, stats.float_or_none(e.spread), e.compiles, ci, resolves,
                   (e.base.mean_ms, e.head.mean_ms), e.noise.source, (e.base.set_aside, e.head.set_aside), more,
                   noisy=DISTURBED if verdict == NOISY else None)


def undecided(d: Differences, compiles: tuple[int, int], spread: float) -> Verdict:
    """A cell of one pair whose noise nothing tells yet: undecided, one more pair at least."""
    return Verdict(UNDECIDED, math.exp(d.mean), None, None, stats.float_or_none(spread), compiles,
                   means_ms=(d.base.mean_ms, d.head.mean_ms), noise="paired: 1 pair, its noise unknown yet", more=1)


__all__ = ["CONFIRM_ROUNDS", "RECORDED", "Differences", "as_recorded", "evidence", "looks", "more_to_settle",
           "nominal_alpha", "pooled_round_variance", "pooled_variance", "recorded", "round_variance", "rule_for",
           "schedule", "undecided", "verdict_of"]
