"""The change tests behind one seam: which test judges a comparison's cells, and what it needs to know.

A test takes the cells measured ok on both sides (their results-table rows) and the comparison's context, and returns
a verdict per cell with the evidence that judging the instances' best latencies reuses (`Judged`). Three are
registered (`REGISTRY`, by the names of tracker.analyse.verdicts.TESTS):

- `noise`: each cell against its own noise (tracker.analyse.judge's t-test on the compiles' means, the cells selected
  together), the fixed bands where nothing is known of a cell's noise;
- `bands`: the fixed bands alone, the rule of earlier versions;
- `paired`: base and head measured in pairs round after round (tracker.analyse.paired), for runs that a paired
  record ties together (tracker.store.pairing: the PR flow writes one). A cell the record says was measured once for
  both sides (a shared baseline: only kernels under test changed) is the same by construction, never a change.

`test_for` picks the test: the rule's, except that two runs measured in pairs are judged by the paired test whenever
the rule asks for the default, so that any later `compare` judges them as the PR flow did.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Protocol

from tracker.analyse import paired
from tracker.analyse.judge import (
    BANDS_TEST,
    NOISE_TEST,
    PAIRED_TEST,
    ChangeRule,
    Evidence,
    Selection,
    Verdict,
    _spread,
    evidence,
    judge_bands,
    resolution,
    select,
    verdict_of,
)
from tracker.analyse.noise import EmpiricalNoise, History, cell_class, compiles_of
from tracker.analyse.verdicts import SAME, SHARED_BASELINE
from tracker.errors import UsageError
from tracker.store.pairing import PairedRecord, SharedBaseline
from workloads.modes import MODES

Cell = tuple[str, str, str]  # (preset, workload, mode)
Rows = dict[Cell, tuple[Any, Any]]  # cell -> (base row, head row), both measured ok


@dataclass(frozen=True)
class Context:
    """What a comparison knows beyond its two runs: the cells' `history` (earlier runs of the same GPU and torch;
    None: none), whether base and head were measured `together` (their timings interleaved on one GPU, the PR flow),
    the workloads whose own source changed between them (`joint`: their instances are judged on their modes
    together), and the record of their paired measurement (`paired`; None: not measured in pairs)."""

    history: History | None = None
    together: bool = False
    joint: frozenset[str] = frozenset()
    paired: PairedRecord | None = None


@dataclass
class Judged:
    """The verdicts of a comparison's cells, and what judging its best latencies needs."""

    verdicts: dict[Cell, Verdict]
    evidence: dict[Cell, Evidence]
    selection: Selection
    together: bool
    test: str = NOISE_TEST


class ChangeTest(Protocol):
    """A way of judging a comparison's cells."""

    name: str

    def judge(self, ok: Rows, rule: ChangeRule, launch_us: float, context: Context) -> Judged: ...


def _families(keys: Collection[Cell], joint: Collection[str]) -> list[list[Cell]]:
    """One family per cell, or per instance (its modes) where the instance's own source changed."""
    families: dict[tuple[str, ...], list[Cell]] = {}
    for key in keys:
        joined = key[1] in joint and key[2] in MODES
        families.setdefault(key[:2] if joined else key, []).append(key)
    return list(families.values())


class BandsTest:
    name = BANDS_TEST

    def judge(self, ok: Rows, rule: ChangeRule, launch_us: float, context: Context) -> Judged:
        verdicts = {key: judge_bands(b, h, [key[2]], rule, launch_us) for key, (b, h) in ok.items()}
        return Judged(verdicts, {}, Selection(frozenset(), rule.alpha, 0), context.together, self.name)


class NoiseTest:
    name = NOISE_TEST

    def judge(self, ok: Rows, rule: ChangeRule, launch_us: float, context: Context) -> Judged:
        """The noise test where a cell's noise is known well enough, the cells selected together (the instances of
        `joint` workloads as families of their modes), the bands elsewhere."""
        judged = BandsTest().judge(ok, rule, launch_us, context)
        together = context.together
        model = EmpiricalNoise(context.history or History(), rule.prior_df, rule.run_floor) \
            .pooling(_pooled(ok, rule, launch_us, base_only=together and bool(context.joint)))
        ev = {}
        for key, (b, h) in ok.items():
            cb, ch = compiles_of(b), compiles_of(h)
            if cb is None or ch is None:
                continue
            cls = cell_class(key[2], min(cb.best_ms, ch.best_ms), launch_us, rule.noise, rule.host)
            noise = model.noise(key, cls, cb, ch)
            if noise is not None:
                ev[key] = evidence(b, h, noise, rule, launch_us, together)
        # A cell whose noise is known only from elsewhere (no compiles of its own to read it from) and too little to
        # resolve its band is left to the band; decided before any change is read
        ev = {k: e for k, e in ev.items()
              if e.own_df >= 2 or resolution(e, len(ev), rule) <= (judged.verdicts[k].threshold or math.inf)}
        chosen = select(ev, _families(ev, context.joint), rule.alpha)
        for key, e in ev.items():
            judged.verdicts[key] = verdict_of(e, key in chosen.cells, chosen.families, rule)
        return Judged(judged.verdicts, ev, chosen, together, self.name)


class PairedTest:
    name = PAIRED_TEST

    def judge(self, ok: Rows, rule: ChangeRule, launch_us: float, context: Context) -> Judged:
        """Cells of the paired record by the paired test, selected together at the nominal level of each look;
        any other cell as the noise test judges it."""
        record = context.paired
        if record is None:
            raise UsageError("the paired test judges runs measured in pairs (the pr flow), and these were not")
        judged = NoiseTest().judge(ok, rule, launch_us, context)
        diffs = {}
        for key in ok:
            if record.shared is not None and record.shared.holds(key):
                judged.verdicts[key] = _shared(ok[key], record.shared)
                judged.evidence.pop(key, None)
                continue
            d = paired.Differences.of(record.pairs(key))
            if d is not None:
                fast = min(d.base.best_ms, d.head.best_ms)
                diffs[key] = (cell_class(key[2], fast, launch_us, rule.noise, rule.host), d)
        prior = paired.pooled_variance(diffs)
        shared = paired.pooled_round_variance(diffs, rule.round_by_scale) if rule.confirm_rounds > 1 else {}
        ev: dict[Cell, Evidence] = {}
        for key, (cls, d) in diffs.items():
            b, h = ok[key]
            n = d.n + d.set_aside
            least = max(rule.floor, rule.jitter_floor(min(d.base.best_ms, d.head.best_ms), launch_us))
            least = least if rule.factor is None else max(least, rule.factor - 1)
            e = paired.evidence(d, prior.get(cls), rule, least, _spread(b, h), (n, n), shared.get(cls))
            if e is None:
                judged.verdicts[key] = paired.undecided(d, (n, n), _spread(b, h))
                judged.evidence.pop(key, None)
            else:
                ev[key] = e
        level = paired.nominal_alpha(rule.alpha, paired.looks(rule))
        chosen = select(ev, _families(ev, context.joint), level)
        for key, e in ev.items():
            judged.verdicts[key] = paired.verdict_of(e, key in chosen.cells, chosen.families, rule,
                                                     chosen.needs.get(key))
            judged.evidence[key] = e
        return Judged(judged.verdicts, judged.evidence, chosen, True, self.name)


def _shared(rows: tuple[Any, Any], shared: SharedBaseline) -> Verdict:
    """A cell measured once for both sides: the same, its one measurement on both."""
    b, h = rows
    n = compiles_of(b)
    count = n.n + n.set_aside if n is not None else 1
    where = "this PR's head" if shared.source == "head" else f"the run of {shared.commit[:8]} in {shared.where}"
    return Verdict(SAME, float(h.median_ms) / float(b.median_ms), None, None, _spread(b, h), (count, count),
                   noise=f"{SHARED_BASELINE}: measured once for both sides, in {where}")


REGISTRY: dict[str, ChangeTest] = {t.name: t for t in (NoiseTest(), BandsTest(), PairedTest())}


def test_for(rule: ChangeRule, context: Context) -> ChangeTest:
    """The rule's test; the paired one for runs measured in pairs when the rule asks for the default."""
    if context.paired is not None and rule.test == NOISE_TEST:
        return REGISTRY[PAIRED_TEST]
    return REGISTRY[rule.test]


def _pooled(ok: Rows, rule: ChangeRule, launch_us: float, base_only: bool = False) -> dict[str, list[float]]:
    """The compile variances of this comparison's cells measured in several compiles on both sides, by class: the
    prior of a class that no history measured in several compiles every run. `base_only`: the base sides' alone
    (a PR's head is the changed code, whose compiles the change itself may spread: its plants are no prior)."""
    out: dict[str, list[float]] = {}
    for key, (b, h) in ok.items():
        cb, ch = compiles_of(b), compiles_of(h)
        if cb is None or ch is None or cb.log_sd is None or ch.log_sd is None:
            continue
        var = cb.log_sd ** 2 if base_only else (cb.log_ss + ch.log_ss) / (cb.log_df + ch.log_df)
        cls = cell_class(key[2], min(cb.best_ms, ch.best_ms), launch_us, rule.noise, rule.host)
        out.setdefault(cls, []).append(var)
    return out


__all__ = ["REGISTRY", "BandsTest", "ChangeTest", "Context", "Judged", "NoiseTest", "PairedTest", "test_for"]
