"""Base vs head: two runs of one machine and one set of versions, compared cell by cell and instance by instance
(the runs: tracker.analyse.pairs; rendering them: tracker.publish.comparison and tracker.publish.prcomment).

A cell measured in several compiles (fresh processes) on either side is judged on them (see _judge): the slower side's
best beyond the faster side's slowest compile by a floor (5% when both sides have several, 12% for the autotuned modes'
small or host-bound cells; the bands below when one side has one); the samples' p-value does not decide. A change found
on fewer compiles than ChangeRule.confirm asks is UNCONFIRMED, not counted (tracker.analyse.confirm, docs/verdicts.md).

A cell measured once on both sides (preset, workload, mode) changed when both hold (ChangeRule):
- its samples differ: Mann-Whitney U on the two runs' stored samples, p < 0.01 (without samples: disjoint 99% CIs);
- its median moved by more than what fresh processes show with unchanged code: 10%, 25% for cells under 50 us or
  host-bound, 30% for the autotuned modes;
and neither run's samples are spread over more than 20% (relative IQR): such a cell was disturbed while it was
measured, and its change is reported as "noisy", never as a regression. A user's factor (ChangeRule.factor, compare
--factor F, asv compare's --factor) raises every band to at least F: a change must also exceed F (ratio > F or
< 1/F), so the factor only ever makes a verdict stricter.

Why: two full H100 runs of the same workload code, one compile a cell (54a7e406, now tests/fixtures/h100-plain-flush,
and ff774dff; both were tests/fixtures/h100, which git history keeps). Within a run, the samples
of a cell separate even 1% shifts (p < 0.01 for 85-92% of cells), so the p-value alone flags noise. Across the runs,
cells whose relative IQR was <= 20% in both moved by at most 12% (median 0.4-2.5%), except the autotuned modes',
whose autotuner picked other kernels (up to 27%); cells with a wider spread in either run (91 of 205, mostly under
300 us in decode) moved by a median 37-71% and up to 8.6x. No threshold on the ratio separates those from real
changes; their own spread does.

Either way a change must also exceed a quarter of the launch floor in time (ChangeRule.launch_jitter; ~1.1 us on
the H100): the processes of a host-bound cell draw times that far apart whatever its code. Prefill rl_dpo_loss
default measured 4.51-4.64 us in three processes and 5.28-5.31 us in three others, the same generated code and
launch configs in all six, and 4.51, 4.61 and 5.28 us in a re-run (tests/fixtures/h100-plant-calibrated): a
relative band of 12% did not cover that 0.64 us step. With that floor in place small and host-bound cells of eager,
default and reduce-overhead need no wider relative floor than the rest: their processes agree within a few percent.
Those of the autotuned modes keep 12%: their compiles draw launch configs from a wide spread. What three compiles of
an autotuned cell cannot bound at all (all three of one run drawing its slower generated code) no floor bounds:
confirmation draws fresh compiles instead (tracker.analyse.confirm, docs/verdicts.md).

An instance's best baseline changed when a different mode now wins beyond the noise (the old winner is not in the
new winner's tie set, tracker.stats.NoiseModel) and a judged cell change accounts for it (the old winner got slower
or failed, or the new winner got faster), or when the best latency itself moved by a judged change.
Kernels under test ("kernel:NAME" cells) are compared by their speedup over the instance's best baseline.

Versions: runs measured with another GPU, torch or triton are not compared unless asked (check_versions);
`compare_versions` compares two torch versions (the runs picked by version, tracker.analyse.pairs.version_pair) and
refuses only another GPU.

Method: two runs may also have been measured differently: another GPU, another launch floor (beyond 20%), or another
L2 flush (cells of the grown flush record `flush_mib` and `host_us` in the cell store; the study's file and runs
before it record none: do_bench's plain 256 MiB flush). The notes say so, and every changed cell that is host-bound
(HostBound, at the larger known floor) is marked `method`: the difference in method alone can explain its change.

Attribution: with the repository at hand, a cell of a workload that no source difference between the two commits
can reach (analyse.attribution), measured under the same versions, moved for another reason than the change (the
compiler drew other kernels or launch configs, the machine timed it differently): its timing change is reported as
"source unchanged" and not counted, and neither is a best-baseline change it would back. Each changed cell also
says what its compiled code did (fingerprints: same code, other launch configs, other generated code).
"""

from __future__ import annotations

import math
import os
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from tracker import stats
from tracker.analyse import attribution, pairs
from tracker.analyse.best import COMPILED, analyse, instance_table
from tracker.analyse.pairs import CompareError, RunInfo
from tracker.analyse.verdicts import (
    ADDED,
    COMPILED_CODE,
    COMPILED_CONFIGS,
    COMPILED_SAME,
    EXIT_FAIL_ON,
    EXIT_OK,
    FAIL_ON,
    FAILS,
    FASTER,
    GAINED,
    IMPROVEMENT_VERDICTS,
    LOST,
    NOISY,
    NOW_FAILS,
    NOW_OK,
    REGRESSION_VERDICTS,
    REMOVED,
    SAME,
    SLOWER,
    SOURCE_UNCHANGED,
    UNCONFIRMED,
    UNKNOWN,
)
from tracker.stats import HostBound, NoiseModel, float_or_none
from tracker.store.asvjson import RunFile
from workloads import catalog
from workloads.kernels.registry import MODE_PREFIX
from workloads.names import AUTOTUNED_MODES, MODES


@dataclass(frozen=True)
class ChangeRule:
    """When a cell's change counts (see the module docstring for the measurements behind the numbers)."""

    p_value: float = 0.01
    min_change: float = 0.10
    small_change: float = 0.25  # cells under noise.small_below_ms, or host-bound
    autotuned_change: float = 0.30
    autotuned_modes: tuple[str, ...] = AUTOTUNED_MODES
    # Both sides measured in several compiles: the band's floor, under the spread measured (see threshold); a
    # host-bound cell's wider jitter is the launch floor's (launch_jitter), not a fraction of its time. Small or
    # host-bound cells of the autotuned modes draw their launch configs from a wide spread, which three compiles do
    # not bound: decode llm_label_smoothed_ce_loss max-autotune-no-cudagraphs drew 24.4-29.6 us in one run and
    # 31.2-46.8 us in the next, 5.4% beyond (tests/fixtures/h100-aa3)
    replicated_change: float = 0.05
    replicated_autotuned_small_change: float = 0.12
    # Every change must also exceed this fraction of the launch floor in time: a host-bound cell's processes draw
    # times a fraction of a launch apart whatever its code (see the module docstring)
    launch_jitter: float = 0.25
    max_spread: float = stats.TOO_NOISY_SPREAD  # relative IQR above which a measurement is too disturbed
    noise: NoiseModel = field(default_factory=NoiseModel)
    host: HostBound = field(default_factory=HostBound)
    factor: float | None = None  # the user's: a change must also exceed this ratio (e.g. 1.5: 50% slower or faster)
    # Compiles (fresh processes) each side needs before a change counts: (base, head). (0, 0): any; the PR flow
    # re-measures candidates on both sides, a nightly on its head side (the base is history).
    confirm: tuple[int, int] = (0, 0)

    def __post_init__(self) -> None:
        if self.factor is not None and not (self.factor >= 1 and math.isfinite(self.factor)):
            raise ValueError(f"--factor takes a ratio of at least 1, e.g. 1.1 for 10%, not {self.factor:g}")

    def threshold(self, mode: str, ms: float, launch_us: float, replicated: bool = False) -> float:
        """The relative change a cell of `mode` at `ms` (the faster of its two medians) must exceed. `replicated`:
        both sides were measured in several compiles, whose spread the verdict reads (see compare._judge), so the
        band is a floor for what else differs between runs, and the autotuned modes need no wider one."""
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


# ---------------------------------------------------------------------------------------------------- records


@dataclass(frozen=True)
class CellChange:
    preset: str
    workload: str
    mode: str  # a compile mode or "kernel:NAME"
    base_ms: float | None
    head_ms: float | None
    ratio: float | None  # head / base
    p_value: float | None
    threshold: float | None  # the relative change this cell had to exceed
    spread: float | None  # the larger relative IQR of the two measurements
    verdict: str
    compiled: str | None = None  # what the compiled code did between the runs (COMPILED_SAME ...); None: unknown
    compiles: tuple[int, int] | None = None  # fresh compiles measured (base, head)
    method: bool = False  # changed, host-bound, and the runs were measured differently: the method can explain it

    @property
    def significant(self) -> bool:
        return self.verdict in REGRESSION_VERDICTS + IMPROVEMENT_VERDICTS


@dataclass(frozen=True)
class InstanceChange:
    preset: str
    workload: str
    base_best: str | None
    head_best: str | None
    base_ties: tuple[str, ...]
    head_ties: tuple[str, ...]
    base_ms: float | None
    head_ms: float | None
    ratio: float | None
    p_value: float | None
    threshold: float | None  # the band the best latency had to leave
    latency_verdict: str  # the best latency's own change (old winner at base vs new winner at head)
    mode_changed: bool  # another mode wins and the old winner is not in its tie set
    best_changed: bool  # mode_changed backed by a judged cell change, or the best latency changed
    reason: str
    host_bound: bool
    unconfirmed: bool = False  # moved beyond noise only on fewer compiles than the rule asks: listed, not counted


@dataclass(frozen=True)
class KernelChange:
    preset: str
    workload: str
    kernel: str
    base_speedup: float | None  # best baseline / kernel: > 1 means the kernel beats every mode
    head_speedup: float | None
    change: float | None  # head_speedup / base_speedup
    verdict: str  # GAINED, LOST, SAME, NOISY, UNKNOWN, NOW_FAILS, NOW_OK, FAILS, ADDED, REMOVED

    @property
    def changed(self) -> bool:
        return self.verdict in (GAINED, LOST, NOW_FAILS, NOW_OK)


@dataclass(frozen=True)
class ModeFigures:
    preset: str
    mode: str
    base_wins: int
    head_wins: int
    base_geomean: float | None  # speedup vs eager over the instances both runs measured
    head_geomean: float | None


@dataclass
class Comparison:
    base: RunInfo
    head: RunInfo
    rule: ChangeRule
    cells: list[CellChange]
    instances: list[InstanceChange]
    kernels: list[KernelChange]
    figures: list[ModeFigures]
    added: list[tuple[str, str]]  # instances (preset, workload) only head measured
    removed: list[tuple[str, str]]
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def best_changes(self) -> list[InstanceChange]:
        return [i for i in self.instances if i.best_changed]

    @property
    def regressions(self) -> list[CellChange]:
        return [c for c in self.cells if c.verdict in REGRESSION_VERDICTS]

    @property
    def improvements(self) -> list[CellChange]:
        return [c for c in self.cells if c.verdict in IMPROVEMENT_VERDICTS]

    @property
    def source_unchanged(self) -> list[CellChange]:
        """Cells that moved beyond noise although nothing they depend on changed: not counted."""
        return [c for c in self.cells if c.verdict == SOURCE_UNCHANGED]

    @property
    def unconfirmed(self) -> list[CellChange]:
        """Cells that moved beyond their band on fewer compiles than the rule asks: listed, not counted."""
        return [c for c in self.cells if c.verdict == UNCONFIRMED]

    @property
    def noisy(self) -> list[CellChange]:
        return [c for c in self.cells if c.verdict == NOISY]

    @property
    def unjudged(self) -> list[CellChange]:
        """Cells that moved beyond their band where one side has no samples (an imported study): not judged."""
        return [c for c in self.cells if c.verdict == UNKNOWN]

    @property
    def kernel_changes(self) -> list[KernelChange]:
        return [k for k in self.kernels if k.changed]

    @property
    def changed(self) -> bool:
        """Anything worth a notification: a best baseline, a significant cell or a kernel's speedup."""
        return bool(self.best_changes or self.regressions or self.improvements or self.kernel_changes)

    def fails(self, fail_on: str) -> bool:
        if fail_on not in FAIL_ON:
            raise ValueError(f"--fail-on takes {', '.join(FAIL_ON)}, not {fail_on!r}")
        return {"best-change": bool(self.best_changes), "regression": bool(self.regressions),
                "never": False}[fail_on]


# ---------------------------------------------------------------------------------------------------- judging


def _samples(row: Any) -> list[float] | None:
    return row.samples if isinstance(row.samples, list) else None


def compiles(row: Any) -> tuple[int, float]:
    """(how many compiles, the slowest one's median) of a measured row; (1, its median) for a run that recorded
    none (older runs, imported studies)."""
    n, slowest = float_or_none(getattr(row, "compiles", None)), float_or_none(getattr(row, "compiles_max_ms", None))
    return (int(n), slowest) if n and slowest else (1, float(row.median_ms))


def _judge(b: Any, h: Any, modes: Iterable[str], rule: ChangeRule, launch_us: float) -> dict[str, Any]:
    """Ratio, p-value, threshold, spread and verdict for two ok measurements (rows of the results table; each
    median is the best of its compiles).

    Where either side was measured in several compiles, what differs between compiles is the noise, not the
    within-process samples: the slower side's best must lie beyond the faster side's slowest compile by the band
    (the threshold is that, relative to the faster side's best), and the samples' p-value does not decide. The band
    is the replicated floor when both sides have several compiles, the single-compile band otherwise, and at least
    a quarter launch floor in time beyond that slowest compile. Without compiles the fixed bands and the p-value
    decide, the quarter launch floor counted from the faster median. A change found on fewer compiles than
    `rule.confirm` asks for is UNCONFIRMED."""
    ratio = float(h.median_ms / b.median_ms)
    fast = min(b.median_ms, h.median_ms)
    (nb, b_max), (nh, h_max) = compiles(b), compiles(h)
    several = max(nb, nh) > 1
    band = max(rule.threshold(m, fast, launch_us, replicated=nb > 1 and nh > 1) for m in modes)
    faster_spread = (b_max / b.median_ms) if ratio >= 1 else (h_max / h.median_ms)
    if several:  # the floor lies beyond the faster side's slowest compile, a quarter launch at least
        band = max(band, rule.jitter_floor(faster_spread * fast, launch_us))
        threshold = faster_spread * (1 + band) - 1
    else:
        threshold = max(band, rule.jitter_floor(fast, launch_us))
    spread = max(stats.relative_spread(r.median_ms, r.q25, r.q75, _samples(r)) for r in (b, h))
    p = stats.p_value(_samples(b), _samples(h), (b.ci_low, b.ci_high), (h.ci_low, h.ci_high))
    if abs(math.log(ratio)) < math.log1p(threshold):
        verdict = SAME
    elif spread > rule.max_spread:  # NaN (no quartiles) compares False: judged on the rest
        verdict = NOISY
    elif several:
        verdict = SLOWER if ratio > 1 else FASTER
    elif p is None:
        verdict = UNKNOWN
    elif p < rule.p_value:
        verdict = SLOWER if ratio > 1 else FASTER
    else:
        verdict = SAME
    if verdict in (SLOWER, FASTER) and (nb < rule.confirm[0] or nh < rule.confirm[1]):
        verdict = UNCONFIRMED
    return {"ratio": ratio, "p_value": p, "threshold": threshold, "spread": float_or_none(spread),
            "verdict": verdict, "compiles": (nb, nh)}


def _status_verdict(b: Any, h: Any) -> str | None:
    """The verdict when either side is missing or failed; None when both are ok."""
    if b is None:
        return ADDED
    if h is None:
        return REMOVED
    bf, hf = b.status == "failed", h.status == "failed"
    if bf and hf:
        return FAILS
    return NOW_FAILS if hf else NOW_OK if bf else None


def compiled_change(base: dict[str, Any] | None, head: dict[str, Any] | None) -> str | None:
    """How the compiled code of a cell differs between two runs, from their fingerprints; None when either has
    none."""
    if not base or not head:
        return None
    if base.get("code") != head.get("code"):
        return COMPILED_CODE
    return COMPILED_SAME if base.get("autotune") == head.get("autotune") else COMPILED_CONFIGS


def _fingerprint(row: Any) -> dict[str, Any] | None:
    fp = getattr(row, "fingerprint", None)
    return fp if isinstance(fp, dict) else None


def _cell(key: tuple[str, str, str], b: Any, h: Any, rule: ChangeRule, launch_us: float) -> CellChange:
    verdict = _status_verdict(b, h)
    base_ms = float(b.median_ms) if b is not None and b.status == "ok" else None
    head_ms = float(h.median_ms) if h is not None and h.status == "ok" else None
    if verdict is not None:
        return CellChange(*key, base_ms, head_ms, None, None, None, None, verdict)
    compiled = compiled_change(_fingerprint(b), _fingerprint(h))
    return CellChange(*key, base_ms, head_ms, **_judge(b, h, [key[2]], rule, launch_us), compiled=compiled)


def _measured(t: pd.DataFrame) -> dict[tuple[str, str, str], Any]:
    """Rows measured ok or failed (skipped cells were not measured), by (preset, workload, mode)."""
    t = t[t["status"].astype(str) != "skipped"]
    return {(str(r.preset), str(r.workload), str(r.mode)): r for r in t.itertuples(index=False)}


def _order(key: tuple[str, ...]) -> tuple[Any, ...]:
    preset, workload, *rest = key
    workloads, presets = catalog.workload_names(), catalog.preset_names()
    w = workloads.index(workload) if workload in workloads else len(workloads)
    p = presets.index(preset) if preset in presets else len(presets)
    m = [(MODES.index(x), x) if x in MODES else (len(MODES), x) for x in rest]
    return (p, w, workload, *m)


# ---------------------------------------------------------------------------------------------------- comparing


def launch_floor(base: RunInfo, head: RunInfo) -> float:
    """The launch floor two runs are judged by: the larger known one (0 when neither recorded one), so a cell is
    host-bound when it is on either host."""
    return max(x for x in (base.launch_us, head.launch_us, 0.0) if x is not None)


def compare_tables(base: pd.DataFrame, head: pd.DataFrame, base_info: RunInfo, head_info: RunInfo,
                   rule: ChangeRule | None = None, workloads: Collection[str] | None = None,
                   unaffected: Collection[str] = ()) -> Comparison:
    """Compare two runs' tables (results-table columns, samples included; each one run). `unaffected`: the
    workloads no source difference between the runs can move (analyse.attribution): their cells' timing changes
    are reported as SOURCE_UNCHANGED, never counted."""
    rule = rule or ChangeRule()
    if workloads is not None:
        base = base[base["workload"].astype(str).isin(workloads)]
        head = head[head["workload"].astype(str).isin(workloads)]
    launch = launch_floor(base_info, head_info)
    bc, hc = _measured(base), _measured(head)
    cells = {k: _cell(k, bc.get(k), hc.get(k), rule, launch) for k in sorted(bc.keys() | hc.keys(), key=_order)}

    def modes_only(t: pd.DataFrame) -> pd.DataFrame:  # the analysis' input: the five modes, as categories
        t = t[t["mode"].astype(str).isin(MODES)].copy()
        t["mode"] = pd.Categorical(t["mode"].astype(str), categories=list(MODES))
        return t

    bi = {(str(r.preset), str(r.workload)): r for r in instance_table(modes_only(base), rule.noise,
                                                                      rule.host).itertuples(index=False)}
    hi = {(str(r.preset), str(r.workload)): r for r in instance_table(modes_only(head), rule.noise,
                                                                      rule.host).itertuples(index=False)}
    common = sorted(bi.keys() & hi.keys(), key=_order)
    instances = [_instance(k, bi[k], hi[k], bc, hc, cells, rule, launch) for k in common]
    kernels = [_kernel(k, cells[k], bi.get(k[:2]), hi.get(k[:2]), bc, hc, rule, launch)
               for k in cells if k[2].startswith(MODE_PREFIX)]
    notes = _version_notes(base_info, head_info)
    method = _method_notes(base, head, base_info, head_info)
    if method:
        notes += method
        floors = [x for x in (base_info.launch_us, head_info.launch_us) if x]
        changed = [k for k, x in cells.items() if (x.significant or x.verdict == UNKNOWN)
                   and x.base_ms is not None and x.head_ms is not None]
        if not floors:
            notes.append("no launch floor is known for either run: which changed cells are host-bound cannot be told")
        else:
            marked = [k for k in changed if bool(rule.host.bound(min(cells[k].base_ms, cells[k].head_ms), launch))]
            for k in marked:
                cells[k] = replace(cells[k], method=True)
            notes.append(f"{len(marked)} of the {len(changed)} cells that moved beyond their band are host-bound "
                         f"(at most {rule.host.k:g} x the {launch:.2f} us launch floor): the difference in method "
                         "alone can explain their change (marked method)")
    cells_list, instances, kernels = _attribute(list(cells.values()), instances, kernels, set(unaffected))
    return Comparison(base_info, head_info, rule, cells_list, instances, kernels,
                      _figures(modes_only(base), modes_only(head), common, rule),
                      sorted(hi.keys() - bi.keys(), key=_order), sorted(bi.keys() - hi.keys(), key=_order), notes)


def _attribute(cells: list[CellChange], instances: list[InstanceChange], kernels: list[KernelChange],
               unaffected: set[str]) -> tuple[list[CellChange], list[InstanceChange], list[KernelChange]]:
    """Timing changes of workloads the source change cannot reach are not the change's: SOURCE_UNCHANGED. A cell
    that now fails or now works still counts (a failure is worth knowing whatever its cause)."""
    if not unaffected:
        return cells, instances, kernels
    cells = [replace(x, verdict=SOURCE_UNCHANGED) if x.workload in unaffected and x.verdict in (SLOWER, FASTER)
             else x for x in cells]
    instances = [replace(i, best_changed=False, reason=f"{i.reason}; source unchanged: not counted")
                 if i.workload in unaffected and i.best_changed and i.base_best and i.head_best else i
                 for i in instances]
    kernels = [replace(k, verdict=SOURCE_UNCHANGED) if k.workload in unaffected and k.verdict in (GAINED, LOST)
               else k for k in kernels]
    return cells, instances, kernels


def _instance(key: tuple[str, str], b: Any, h: Any, bc: dict, hc: dict, cells: dict, rule: ChangeRule,
              launch: float) -> InstanceChange:
    bw, hw = b.winner if isinstance(b.winner, str) else None, h.winner if isinstance(h.winner, str) else None
    base_ms, head_ms = (float(b.winner_ms) if bw else None), (float(h.winner_ms) if hw else None)
    common = {"base_ties": tuple(b.ties), "head_ties": tuple(h.ties), "base_ms": base_ms, "head_ms": head_ms,
              "host_bound": bool(h.host_bound if hw else b.host_bound)}
    if bw is None or hw is None:
        changed = bw != hw
        reason = "no mode measured ok at " + ("base" if bw is None else "head") if changed else "no mode measured ok"
        return InstanceChange(*key, bw, hw, ratio=None, p_value=None, threshold=None, latency_verdict=UNKNOWN,
                              mode_changed=changed,
                              best_changed=changed, reason=reason, **common)
    old, new = cells[(*key, bw)], cells.get((*key, hw))
    if bw == hw:
        latency = {"ratio": old.ratio, "p_value": old.p_value, "threshold": old.threshold, "verdict": old.verdict}
    else:
        latency = _judge(bc[(*key, bw)], hc[(*key, hw)], {bw, hw}, rule, launch)
        if NOISY in (old.verdict, new.verdict if new else None) and latency["verdict"] in (SLOWER, FASTER):
            # A disturbed measurement of either winner decides which mode wins, and so the best latency.
            latency["verdict"] = NOISY
    mode_changed = bw != hw and bw not in h.ties
    backed = old.verdict in (SLOWER, NOW_FAILS) or (new is not None and new.verdict in (FASTER, ADDED, NOW_OK))
    reasons = []
    if mode_changed and backed:
        why = [f"{bw} {old.verdict}"] if old.verdict in (SLOWER, NOW_FAILS) else []
        why += [f"{hw} {new.verdict}"] if new is not None and new.verdict in (FASTER, ADDED, NOW_OK) else []
        reasons.append(f"{hw} now wins beyond noise ({', '.join(why)})")
    if latency["verdict"] in (SLOWER, FASTER):
        reasons.append(f"best latency {latency['verdict']}")
    if not reasons and mode_changed:
        verdicts = (old.verdict, new.verdict if new else None, latency["verdict"])
        reasons.append(f"{hw} now wins, but " + ("the cells are too noisy to judge" if NOISY in verdicts else
                                                  "the change is unconfirmed" if UNCONFIRMED in verdicts else
                                                  "no cell changed beyond noise"))
    elif latency["verdict"] == UNCONFIRMED:
        reasons.append("best latency moved, unconfirmed")
    best_changed = (mode_changed and backed) or latency["verdict"] in (SLOWER, FASTER)
    verdicts = (old.verdict, new.verdict if new else None, latency["verdict"])
    return InstanceChange(*key, bw, hw, ratio=latency["ratio"], p_value=latency["p_value"],
                          threshold=latency["threshold"], latency_verdict=latency["verdict"], mode_changed=mode_changed,
                          best_changed=best_changed, reason="; ".join(reasons), **common,
                          unconfirmed=not best_changed and UNCONFIRMED in verdicts)


def _kernel(key: tuple[str, str, str], cell: CellChange, b: Any, h: Any, bc: dict, hc: dict, rule: ChangeRule,
            launch: float) -> KernelChange:
    name = key[2].removeprefix(MODE_PREFIX)

    def speedup(inst: Any, ms: float | None) -> float | None:
        if inst is None or ms is None or not isinstance(inst.winner, str):
            return None
        return float(inst.winner_ms) / ms

    sb, sh = speedup(b, cell.base_ms), speedup(h, cell.head_ms)
    change = sh / sb if sb and sh else None
    if cell.verdict in (ADDED, REMOVED, NOW_FAILS, NOW_OK, FAILS):
        return KernelChange(*key[:2], name, sb, sh, change, cell.verdict)
    if change is None:
        return KernelChange(*key[:2], name, sb, sh, None, UNKNOWN)
    # The speedup moves when the kernel or the best baseline moves: judge both, each with its own noise.
    bw, hw = b.winner, h.winner
    best = _judge(bc[(*key[:2], bw)], hc[(*key[:2], hw)], {bw, hw}, rule, launch)
    threshold = max(cell.threshold or 0.0, best["threshold"])
    if abs(math.log(change)) < math.log1p(threshold):
        verdict = SAME
    elif NOISY in (cell.verdict, best["verdict"]):
        verdict = NOISY
    elif cell.verdict in (SLOWER, FASTER) or best["verdict"] in (SLOWER, FASTER):
        verdict = GAINED if change > 1 else LOST
    else:
        verdict = SAME
    return KernelChange(*key[:2], name, sb, sh, change, verdict)


def _figures(base: pd.DataFrame, head: pd.DataFrame, common: list[tuple[str, str]],
             rule: ChangeRule) -> list[ModeFigures]:
    """Wins and geomeans per preset and mode, over the instances both runs measured (else they mislead)."""
    def figures(t: pd.DataFrame) -> dict[str, Any]:
        t = t[pd.MultiIndex.from_frame(t[["preset", "workload"]].astype(str)).isin(common)]
        f = analyse(t, rule.noise, rule.host).figures
        return {str(r["preset"]): r for _, r in f.iterrows()}

    fb, fh = figures(base), figures(head)
    out = []
    for preset in sorted(fb.keys() & fh.keys(), key=lambda p: _order((p, ""))):
        for m in MODES:
            geo = (None, None) if m not in COMPILED else tuple(
                float_or_none(f[preset][f"geomean_{m}"]) for f in (fb, fh))
            out.append(ModeFigures(preset, m, int(fb[preset][f"wins_{m}"]), int(fh[preset][f"wins_{m}"]), *geo))
    return out


def _flush(t: pd.DataFrame) -> str | None:
    """How a run's cells were flushed, when its cell store says: the grown flush's range; None: not recorded."""
    if "flush_mib" not in t:
        return None
    mib = t["flush_mib"].dropna()
    if mib.empty:
        return None
    lo, hi = int(mib.min()), int(mib.max())
    return f"grown L2 flush ({lo} MiB)" if lo == hi else f"grown L2 flush ({lo}-{hi} MiB)"


PLAIN_FLUSH = "no flush recorded (do_bench's plain 256 MiB L2 flush, as the study's)"


def _method_notes(base: pd.DataFrame, head: pd.DataFrame, b: RunInfo, h: RunInfo) -> list[str]:
    """How the two runs were measured differently: GPU, launch floor, L2 flush; [] when alike (or unknown alike)."""
    notes = []
    if b.gpu != h.gpu:
        notes.append(f"measured on another GPU: {b.gpu} (base) vs {h.gpu} (head)")
    if b.launch_us and h.launch_us and max(b.launch_us, h.launch_us) > 1.2 * min(b.launch_us, h.launch_us):
        notes.append(f"launch floor differs: {b.launch_us:.2f} us (base) vs {h.launch_us:.2f} us (head)")
    elif bool(b.launch_us) != bool(h.launch_us):  # another host, whose floor nobody recorded
        side, known = ("head", h.launch_us) if h.launch_us else ("base", b.launch_us)
        notes.append(f"launch floor recorded only at {side} ({known:.2f} us): the other host's is unknown")
    fb, fh = _flush(base), _flush(head)
    if (fb is None) != (fh is None):
        notes.append(f"L2 flush differs: {fb or PLAIN_FLUSH} (base) vs {fh or PLAIN_FLUSH} (head)")
    return notes


def _version_notes(b: RunInfo, h: RunInfo) -> list[str]:
    return [f"{key} differs: {getattr(b, key)} (base) vs {getattr(h, key)} (head)"
            for key in ("gpu", "torch", "triton", "cuda", "driver") if getattr(b, key) != getattr(h, key)]


def check_versions(b: RunInfo, h: RunInfo, allow_cross_versions: bool, expected: Collection[str] = ()) -> None:
    """Refuse to compare across GPUs or library versions: the PR's effect would mix with theirs. `expected`: the
    keys meant to differ (a comparison of torch versions: torch and the triton it brings)."""
    differ = [k for k in ("gpu", "torch", "triton") if getattr(b, k) != getattr(h, k) and k not in expected]
    if differ and not allow_cross_versions:
        what = ", ".join(f"{k} {getattr(b, k)} vs {getattr(h, k)}" for k in differ)
        raise CompareError(f"base {b.commit[:8]} and head {h.commit[:8]} on {h.machine} were measured with different "
                           f"versions ({what}): the difference would mix with the code's; pass "
                           "--allow-cross-versions to compare anyway")


def compare_runs(source: str | os.PathLike[str] | pd.DataFrame, base: str, head: str, machine: str | None = None,
                 allow_cross_versions: bool = False, rule: ChangeRule | None = None,
                 workloads: Collection[str] | None = None, head_machine: str | None = None,
                 repo_dir: Path | None = None) -> Comparison:
    """Compare the runs of commits `base` and `head` (hashes or prefixes) of one machine: from a results directory
    (only those two files are read), or from a results table with samples. CompareError across versions unless
    `allow_cross_versions`; `workloads` restricts the comparison (the PR flow measures only some). `head_machine`
    names another machine for the head run (one machine per PyTorch version: compare the versions at one commit).
    With `repo_dir`, a commit that is no hash prefix of a run is resolved as a git ref there (HEAD~1, a branch)."""
    if isinstance(source, pd.DataFrame):
        tb, th, bi, hi = pairs.split_pair(source, base, head, machine, head_machine)
        warnings: list[str] = []
    else:
        b, h, warnings = pairs.pick_pair(source, base, head, machine, head_machine, repo_dir)
        check_versions(pairs.header_info(b), pairs.header_info(h), allow_cross_versions)  # before any parsing
        tb, th, bi, hi, loading = pairs.load_pair(source, b, h)
        warnings = warnings + loading
    if bi.machine != hi.machine and head_machine is None:
        raise CompareError(f"base ran on {bi.machine} and head on {hi.machine}: compare runs of one machine "
                           "(pass --machine)")
    check_versions(bi, hi, allow_cross_versions)
    unaffected, note = _unaffected(bi, hi, repo_dir, (tb, th), workloads)
    comparison = compare_tables(tb, th, bi, hi, rule, workloads, unaffected)
    comparison.warnings = warnings
    comparison.notes += [note] if note else []
    return comparison


def _unaffected(b: RunInfo, h: RunInfo, repo_dir: Path | None, tables: tuple[pd.DataFrame, ...] = (),
                workloads: Collection[str] | None = None) -> tuple[set[str], str]:
    """The workloads the source differences between the two commits cannot move (none unless git can tell and
    the runs share GPU, torch and triton), and a note saying what the source change reaches, counting the workloads
    the runs' `tables` measured (within `workloads`, when the comparison is restricted to them)."""
    if repo_dir is None or any(getattr(b, k) != getattr(h, k) for k in ("gpu", "torch", "triton")):
        return set(), ""
    reach = attribution.source_changes(b.commit, h.commit, repo_dir)
    if reach is None:
        return set(), ""
    unaffected = set(catalog.workload_names()) - set(reach.workloads)
    measured = {str(w) for t in tables for w in t["workload"].unique()}
    counted = unaffected & (measured if workloads is None else measured & set(workloads))
    if not counted:
        return set(), ""
    n = f"{len(counted)} workload{'s' if len(counted) != 1 else ''} measured"
    if b.commit == h.commit:
        return unaffected, (f"source: both runs are of commit {h.commit[:8]}, so timing changes of the {n} are "
                            f"reported as '{SOURCE_UNCHANGED}' and not counted")
    what = "no workload" if not reach.workloads else ", ".join(reach.workloads)
    return unaffected, (f"source: the changes between the commits reach {what}; timing changes of the other {n} "
                        f"are reported as '{SOURCE_UNCHANGED}' and not counted")


def compare_versions(results_dir: str | os.PathLike[str], base_torch: str, head_torch: str,
                     machine: str | None = None, head_machine: str | None = None, base: str | None = None,
                     head: str | None = None, allow_cross_versions: bool = False, rule: ChangeRule | None = None,
                     repo_dir: Path | None = None) -> Comparison:
    """torch `base_torch` vs `head_torch` on one kind of machine: the runs picked by version (pairs.version_pair:
    head's latest run, base at the same commit or the nearest), torch and triton allowed to differ, another GPU
    refused unless `allow_cross_versions`. The notes say how base was chosen."""
    b, h, warnings, how = pairs.version_pair(results_dir, base_torch, head_torch, machine, head_machine, base, head,
                                             repo_dir)
    check_versions(pairs.header_info(b), pairs.header_info(h), allow_cross_versions, ("torch", "triton"))
    comparison = compare_files(results_dir, b, h, rule)
    comparison.notes.insert(0, f"runs picked by torch version: head {h.commit[:8]} on {h.machine} (torch {h.torch}, "
                               f"its latest run), base {b.commit[:8]} on {b.machine} (torch {b.torch}, {how})")
    comparison.warnings = warnings + comparison.warnings
    return comparison


def compare_files(results_dir: str | os.PathLike[str], b: RunFile, h: RunFile, rule: ChangeRule | None = None,
                  repo_dir: Path | None = None) -> Comparison:
    """Compare two runs already picked (their files in `results_dir`; only those two and their cell stores are
    read), whatever versions they were measured with: the caller decided that they are worth comparing. With
    `repo_dir`, cells the source differences cannot reach are reported as SOURCE_UNCHANGED (same versions only)."""
    tb, th, bi, hi, loading = pairs.load_pair(results_dir, b, h)
    unaffected, note = _unaffected(bi, hi, repo_dir, (tb, th))
    comparison = compare_tables(tb, th, bi, hi, rule, unaffected=unaffected)
    comparison.notes += [note] if note else []
    comparison.warnings = loading
    return comparison


__all__ = ["EXIT_FAIL_ON", "EXIT_OK", "FAIL_ON", "CellChange", "ChangeRule", "CompareError", "Comparison",
           "InstanceChange", "KernelChange", "ModeFigures", "RunInfo", "check_versions", "compare_files",
           "compare_runs", "compare_tables", "compare_versions"]
