"""Base vs head: two runs of one machine and one set of versions, compared cell by cell and instance by instance
(the runs: tracker.analyse.pairs; what it finds: tracker.analyse.changes; rendering it: tracker.publish.comparison and
tracker.publish.prcomment).

Each cell is judged by the change rule (tracker.analyse.judge: its noise test, the cells of a comparison selected
together, or the fixed bands where nothing is known of a cell's noise); its noise comes from its compiles, its
history and its class (tracker.analyse.noise). A change found on fewer compiles than ChangeRule.confirm asks is
UNCONFIRMED, not counted (tracker.analyse.confirm, docs/verdicts.md).

An instance's best baseline changed when a different mode now wins beyond the noise (the old winner is not in the
new winner's tie set, tracker.stats.NoiseModel) and a judged cell change accounts for it (the old winner got slower
or failed, or the new winner got faster), or when the best latency itself moved by a judged change: the same mode's
cell verdict, or, where another mode wins, the two winners' best compiles judged with their own uncertainty.
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
"source unchanged" and not counted, and neither is a best-baseline change it would back. The workloads the source
change does reach are judged with joint evidence over each instance's modes (tracker.analyse.judge.select). Each
changed cell also says what its compiled code did (fingerprints: same code, other launch configs, other generated
code). Under the same versions, a compiled cell that moved with the same generated code at both commits runs the same
kernels (at most launched with the configs autotuning drew), so it moved for another reason than the change: "code
unchanged", not counted, and neither is a best-baseline change resting on such cells alone. This needs no repository.
"""

from __future__ import annotations

import math
import os
from collections.abc import Collection, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from tracker.analyse import attribution, noise, paired, pairs
from tracker.analyse.best import instance_table
from tracker.analyse.changes import CellChange, Comparison, InstanceChange, KernelChange, ModeFigures
from tracker.analyse.changetest import Context, Judged, test_for
from tracker.analyse.judge import NOISE_TEST, ChangeRule, Verdict, best_evidence, judge_bands, verdict_of
from tracker.analyse.noise import History
from tracker.analyse.pairs import CompareError, RunInfo
from tracker.analyse.verdicts import (
    ADDED,
    CODE_UNCHANGED,
    COMPILED_CODE,
    COMPILED_CONFIGS,
    COMPILED_SAME,
    DISTURBED,
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
    UNDECIDED,
    UNKNOWN,
)
from tracker.store import pairing
from tracker.store.asvjson import RunFile
from tracker.store.cells import default_cells_dir
from workloads import catalog
from workloads.kernels.registry import MODE_PREFIX
from workloads.modes import COMPILED, MODES, REFERENCE

# ---------------------------------------------------------------------------------------------------- judging


def _samples(row: Any) -> list[float] | None:
    return row.samples if isinstance(row.samples, list) else None


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


def _change(key: tuple[str, str, str], b: Any, h: Any, v: Verdict) -> CellChange:
    """A judged cell as the comparison lists it."""
    return CellChange(*key, float(b.median_ms), float(h.median_ms), v.ratio, v.p_value, v.threshold, v.spread,
                      v.verdict, compiled_change(_fingerprint(b), _fingerprint(h)), v.compiles, ci=v.ci,
                      resolution=v.resolution, means_ms=v.means_ms, noise=v.noise, more=v.more,
                      noisy_reason=v.noisy)


def _unjudged(key: tuple[str, str, str], b: Any, h: Any, verdict: str) -> CellChange:
    """A cell missing or failed on either side."""
    base_ms = float(b.median_ms) if b is not None and b.status == "ok" else None
    head_ms = float(h.median_ms) if h is not None and h.status == "ok" else None
    return CellChange(*key, base_ms, head_ms, None, None, None, None, verdict)


def _latency(key: tuple[str, str], b: Any, h: Any, base_cells: dict, head_cells: dict, judged: Judged, rule: ChangeRule,
             launch_us: float) -> tuple[Verdict, str | None]:
    """The change of an instance's best latency (`b`, `h`: its instance rows), and the mode whose own cell it was
    judged on. The winning mode's own verdict when it still wins, or when the other winner is within noise of it (in
    the tie set: modes that tie are one baseline, and the one judged on both sides carries it); else (mode None) the
    base winner's best compile against the head winner's, with their own uncertainty (or the bands where unknown)."""
    base_winner, head_winner = b.winner, h.winner
    for mode, ties in ((base_winner, h.ties), (head_winner, b.ties)):
        if (base_winner == head_winner or mode in ties) and (*key, mode) in judged.verdicts:
            return judged.verdicts[(*key, mode)], mode
    base_evidence, head_evidence = judged.evidence.get((*key, base_winner)), judged.evidence.get((*key, head_winner))
    if base_evidence is None or head_evidence is None:
        return judge_bands(base_cells[(*key, base_winner)], head_cells[(*key, head_winner)],
                           {base_winner, head_winner}, rule, launch_us), None
    e = best_evidence(base_evidence, head_evidence, base_cells[(*key, base_winner)], head_cells[(*key, head_winner)],
                      rule, launch_us, judged.together)
    return verdict_of(e, e.p_value <= judged.selection.cutoff, judged.selection.families, rule), None


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


def _modes_only(t: pd.DataFrame) -> pd.DataFrame:
    """The analysis' input: the five modes, as categories."""
    t = t[t["mode"].astype(str).isin(MODES)].copy()
    t["mode"] = pd.Categorical(t["mode"].astype(str), categories=list(MODES))
    return t


Medians = dict[tuple[str, str], dict[str, float]]


def _instances_of(t: pd.DataFrame, rule: ChangeRule) -> tuple[dict[tuple[str, str], Any], Medians]:
    """A run's instance rows (tracker.analyse.best.instance_table), and each instance's medians by mode (NaN: not
    measured ok, or too noisy to rank), both by (preset, workload)."""
    inst = instance_table(_modes_only(t), rule.noise, rule.host, rule.max_spread)
    keys = list(zip(inst["preset"].astype(str), inst["workload"].astype(str), strict=True))
    medians = inst[[f"ms_{m}" for m in MODES]].to_numpy(dtype=float)
    return (dict(zip(keys, inst.itertuples(index=False), strict=True)),
            {k: dict(zip(MODES, row, strict=True)) for k, row in zip(keys, medians, strict=True)})


def compare_tables(base: pd.DataFrame, head: pd.DataFrame, base_info: RunInfo, head_info: RunInfo,
                   rule: ChangeRule | None = None, workloads: Collection[str] | None = None,
                   unaffected: Collection[str] = (), context: Context | None = None) -> Comparison:
    """Compare two runs' tables (results-table columns, samples included; each one run). `unaffected`: the
    workloads no source difference between the runs can move (analyse.attribution): their cells' timing changes
    are reported as SOURCE_UNCHANGED, never counted."""
    rule, context = rule or ChangeRule(), context or Context()
    if workloads is not None:
        base = base[base["workload"].astype(str).isin(workloads)]
        head = head[head["workload"].astype(str).isin(workloads)]
    launch = launch_floor(base_info, head_info)
    base_cells, head_cells = _measured(base), _measured(head)
    keys = sorted(base_cells.keys() | head_cells.keys(), key=_order)
    unjudged = {k: v for k in keys if (v := _status_verdict(base_cells.get(k), head_cells.get(k))) is not None}
    pairs_to_judge = {k: (base_cells[k], head_cells[k]) for k in keys if k not in unjudged}
    judged = test_for(rule, context).judge(pairs_to_judge, rule, launch, context)
    cells = {k: _unjudged(k, base_cells.get(k), head_cells.get(k), unjudged[k]) if k in unjudged else
             _change(k, base_cells[k], head_cells[k], judged.verdicts[k]) for k in keys}
    (base_instances, b_ms), (head_instances, h_ms) = _instances_of(base, rule), _instances_of(head, rule)
    common = sorted(base_instances.keys() & head_instances.keys(), key=_order)
    instances = [_instance(k, base_instances[k], head_instances[k], base_cells, head_cells, cells, judged, rule, launch)
                 for k in common]
    kernels = [_kernel(k, cells[k], base_instances.get(k[:2]), head_instances.get(k[:2]), base_cells, head_cells,
                       judged, rule, launch) for k in cells if k[2].startswith(MODE_PREFIX)]
    notes = _version_notes(base_info, head_info) + _mark_method(cells, base, head, base_info, head_info, rule, launch)
    cells_list, instances, kernels = _attribute(list(cells.values()), instances, kernels, set(unaffected))
    if same := code_unchanged(cells_list, base_info, head_info):
        cells_list, instances = _code_unchanged(cells_list, instances, same)
    return Comparison(base_info, head_info, rule, cells_list, instances, kernels,
                      _figures(b_ms, h_ms, instances, {(x.preset, x.workload, x.mode): x for x in cells_list}),
                      sorted(head_instances.keys() - base_instances.keys(), key=_order),
                      sorted(base_instances.keys() - head_instances.keys(), key=_order), notes)


def _mark_method(cells: dict[tuple[str, str, str], CellChange], base: pd.DataFrame, head: pd.DataFrame,
                 base_info: RunInfo, head_info: RunInfo, rule: ChangeRule, launch: float) -> list[str]:
    """The notes on how the runs were measured differently, and the changed host-bound cells that difference alone
    can explain, marked `method` in `cells`."""
    notes = _method_notes(base, head, base_info, head_info)
    if not notes:
        return []
    changed = [k for k, x in cells.items() if (x.significant or x.verdict == UNKNOWN)
               and x.base_ms is not None and x.head_ms is not None]
    if not [x for x in (base_info.launch_us, head_info.launch_us) if x]:
        return [*notes, "no launch floor is known for either run: which changed cells are host-bound cannot be told"]
    marked = [k for k in changed if bool(rule.host.bound(min(cells[k].base_ms, cells[k].head_ms), launch))]
    for k in marked:
        cells[k] = replace(cells[k], method=True)
    return [*notes, f"{len(marked)} of the {len(changed)} cells that moved beyond their band are host-bound "
                    f"(at most {rule.host.k:g} x the {launch:.2f} us launch floor): the difference in method alone "
                    "can explain their change (marked method)"]


def _attribute(cells: list[CellChange], instances: list[InstanceChange], kernels: list[KernelChange],
               unaffected: set[str]) -> tuple[list[CellChange], list[InstanceChange], list[KernelChange]]:
    """Timing changes of workloads the source change cannot reach are not the change's: SOURCE_UNCHANGED. A cell
    that now fails or now works still counts (a failure is worth knowing whatever its cause)."""
    if not unaffected:
        return cells, instances, kernels
    # An undecided cell the change cannot reach is the same as far as the change goes: its source did not change
    cells = [replace(x, verdict=SOURCE_UNCHANGED) if x.workload in unaffected and x.verdict in (SLOWER, FASTER)
             else replace(x, verdict=SAME) if x.workload in unaffected and x.verdict == UNDECIDED else x
             for x in cells]
    instances = [replace(i, best_changed=False, reason=f"{i.reason}; source unchanged: not counted")
                 if i.workload in unaffected and i.best_changed and i.base_best and i.head_best else i
                 for i in instances]
    kernels = [replace(k, verdict=SOURCE_UNCHANGED) if k.workload in unaffected and k.verdict in (GAINED, LOST)
               else k for k in kernels]
    return cells, instances, kernels


def same_versions(b: RunInfo, h: RunInfo) -> bool:
    """Whether two runs were measured on the same GPU with the same torch, triton, CUDA and driver."""
    return not _version_notes(b, h)


def code_unchanged(cells: list[CellChange], b: RunInfo, h: RunInfo) -> set[tuple[str, str, str]]:
    """The compiled cells whose generated code is the same at both runs (at most launched with other configs), where
    the runs share their versions: the same kernels, so whatever moved them was not the commits (none otherwise)."""
    if not same_versions(b, h):
        return set()
    return {(x.preset, x.workload, x.mode) for x in cells if x.compiled in (COMPILED_SAME, COMPILED_CONFIGS)}


def _code_unchanged(cells: list[CellChange], instances: list[InstanceChange], same: set[tuple[str, str, str]]
                    ) -> tuple[list[CellChange], list[InstanceChange]]:
    """The cells of `same` (`code_unchanged`) run the same kernels at both commits: their timing change is the
    machine's or autotuning's, not the commits' (CODE_UNCHANGED, never counted), and so is a best-baseline change that
    rests on such cells alone."""
    cells = [replace(x, verdict=CODE_UNCHANGED) if (x.preset, x.workload, x.mode) in same
             and x.verdict in (SLOWER, FASTER) else x for x in cells]

    def unchanged(i: InstanceChange) -> bool:
        return bool(i.base_best and i.head_best) and all((i.preset, i.workload, m) in same
                                                         for m in (i.base_best, i.head_best))

    instances = [replace(i, best_changed=False, reason=f"{i.reason}; compiled code unchanged: not counted")
                 if i.best_changed and unchanged(i) else i for i in instances]
    return cells, instances


def _disturbed(rule: ChangeRule, *cells: CellChange | None) -> bool:
    """Whether any of `cells` was disturbed while measured (its samples spread beyond the rule's limit): then its
    median decides nothing, the ranking of modes included."""
    return any(x is not None and (x.spread or 0.0) > rule.max_spread for x in cells)


def _unranked(key: tuple[str, str], side: dict) -> bool:
    """An instance whose side has cells measured ok, none of them quiet enough to rank (too noisy to judge)."""
    return any(k[:2] == key and k[2] in MODES and r.status == "ok" for k, r in side.items())


def _instance(key: tuple[str, str], b: Any, h: Any, base_cells: dict, head_cells: dict, cells: dict,
              judged: Judged, rule: ChangeRule, launch: float) -> InstanceChange:
    base_winner = b.winner if isinstance(b.winner, str) else None
    head_winner = h.winner if isinstance(h.winner, str) else None
    base_ms, head_ms = (float(b.winner_ms) if base_winner else None), (float(h.winner_ms) if head_winner else None)
    common = {"base_ties": tuple(b.ties), "head_ties": tuple(h.ties), "base_ms": base_ms, "head_ms": head_ms,
              "host_bound": bool(h.host_bound if head_winner else b.host_bound)}
    if base_winner is None or head_winner is None:
        noisy = ((base_winner is None and _unranked(key, base_cells))
                 or (head_winner is None and _unranked(key, head_cells)))
        changed = base_winner != head_winner and not noisy
        reason = ("its cells are too noisy to rank at " + ("base" if base_winner is None else "head") if noisy else
                  "no mode measured ok at " + ("base" if base_winner is None else "head") if changed else
                  "no mode measured ok")
        return InstanceChange(*key, base_winner, head_winner, ratio=None, p_value=None, threshold=None,
                              latency_verdict=NOISY if noisy else UNKNOWN, mode_changed=changed,
                              best_changed=changed, reason=reason, **common)
    old, new = cells[(*key, base_winner)], cells.get((*key, head_winner))
    v, judged_on = _latency(key, b, h, base_cells, head_cells, judged, rule, launch)
    latency = {"ratio": v.ratio, "p_value": v.p_value, "threshold": v.threshold, "verdict": v.verdict, "ci": v.ci}
    if base_winner != head_winner and _disturbed(rule, old, new) and v.verdict in (SLOWER, FASTER):
        # A disturbed measurement of either winner decides which mode wins, and so the best latency.
        latency["verdict"] = NOISY
    mode_changed = base_winner != head_winner and base_winner not in h.ties
    backed = old.verdict in (SLOWER, NOW_FAILS) or (new is not None and new.verdict in (FASTER, ADDED, NOW_OK))
    reasons = []
    if mode_changed and backed:
        why = [f"{base_winner} {old.verdict}"] if old.verdict in (SLOWER, NOW_FAILS) else []
        why += [f"{head_winner} {new.verdict}"] if new is not None and new.verdict in (FASTER, ADDED, NOW_OK) else []
        reasons.append(f"{head_winner} now wins beyond noise ({', '.join(why)})")
    if latency["verdict"] in (SLOWER, FASTER):
        reasons.append(f"best latency {latency['verdict']}")
    if not reasons and mode_changed:
        verdicts = (old.verdict, new.verdict if new else None, latency["verdict"])
        reasons.append(f"{head_winner} now wins, but " + ("the cells are too noisy to judge" if NOISY in verdicts else
                                                  "the change is undecided" if UNDECIDED in verdicts else
                                                  "the change is unconfirmed" if UNCONFIRMED in verdicts else
                                                  "no cell changed beyond noise"))
    elif latency["verdict"] == UNCONFIRMED:
        reasons.append("best latency moved, unconfirmed")
    best_changed = (mode_changed and backed) or latency["verdict"] in (SLOWER, FASTER)
    verdicts = (old.verdict, new.verdict if new else None, latency["verdict"])
    return InstanceChange(*key, base_winner, head_winner, ratio=latency["ratio"], p_value=latency["p_value"],
                          threshold=latency["threshold"], latency_verdict=latency["verdict"], mode_changed=mode_changed,
                          best_changed=best_changed, reason="; ".join(reasons), **common,
                          unconfirmed=not best_changed and UNCONFIRMED in verdicts, ci=latency["ci"],
                          judged_on=judged_on)


def _kernel(key: tuple[str, str, str], cell: CellChange, b: Any, h: Any, base_cells: dict, head_cells: dict,
            judged: Judged, rule: ChangeRule, launch: float) -> KernelChange:
    name = key[2].removeprefix(MODE_PREFIX)

    def speedup(inst: Any, ms: float | None) -> float | None:
        if inst is None or ms is None or not isinstance(inst.winner, str):
            return None
        return float(inst.winner_ms) / ms

    base_speedup, head_speedup = speedup(b, cell.base_ms), speedup(h, cell.head_ms)
    change = head_speedup / base_speedup if base_speedup and head_speedup else None
    if cell.verdict in (ADDED, REMOVED, NOW_FAILS, NOW_OK, FAILS):
        return KernelChange(*key[:2], name, base_speedup, head_speedup, change, cell.verdict)
    if change is None:
        return KernelChange(*key[:2], name, base_speedup, head_speedup, None, UNKNOWN)
    # The speedup moves when the kernel or the best baseline moves: judge both, each with its own noise.
    best, _ = _latency(key[:2], b, h, base_cells, head_cells, judged, rule, launch)
    threshold = max(cell.threshold or 0.0, best.threshold or 0.0)
    why = None
    if abs(math.log(change)) < math.log1p(threshold) and not (rule.kernel_undecided and cell.verdict == UNDECIDED):
        verdict = SAME
    elif cell.verdict in (SLOWER, FASTER) or best.verdict in (SLOWER, FASTER):
        disturbed = _disturbed(rule, cell) or (best.spread or 0.0) > rule.max_spread
        verdict, why = (NOISY, DISTURBED) if disturbed else (GAINED if change > 1 else LOST, None)
    elif NOISY in (cell.verdict, best.verdict):
        verdict, why = NOISY, cell.noisy_reason if cell.verdict == NOISY else best.noisy
    elif UNDECIDED in (cell.verdict, best.verdict):
        verdict = UNDECIDED
    else:
        verdict = SAME
    return KernelChange(*key[:2], name, base_speedup, head_speedup, change, verdict, why)


def _held(i: InstanceChange) -> tuple[str | None, bool]:
    """An instance's winner, and whether it is tied with another mode, as the comparison counts it at head: head's
    where the comparison counted its best baseline's change (another mode winning beyond noise, or the same mode's
    latency moving), else base's, so that a winner changing within noise moves no count."""
    if i.best_changed and (i.mode_changed or i.base_best == i.head_best):
        return i.head_best, len(i.head_ties) > 1
    return i.base_best, len(i.base_ties) > 1


def _geomean(medians: list[dict[str, float]], mode: str) -> float | None:
    """The geometric mean of eager / mode over the instances where both ranked (measured ok, quiet enough)."""
    logs = [math.log(m[REFERENCE] / m[mode]) for m in medians if m[REFERENCE] > 0 and m[mode] > 0]
    return math.exp(sum(logs) / len(logs)) if logs else None  # NaN compares False: left out


def _figures(b_ms: Medians, h_ms: Medians, instances: list[InstanceChange],
             cells: dict[tuple[str, str, str], CellChange]) -> list[ModeFigures]:
    """Wins (and those of them tied within noise) and geomeans vs eager per preset and mode, over the instances both
    runs measured (else they mislead). Head's figures are base's with the comparison's counted changes applied: an
    instance's winner where its best baseline changed (`_held`), a cell's median where it changed (slower, faster,
    now failing, now ok); what moved within noise moves none of them (an A/A pair's figures are equal)."""
    counted = set(REGRESSION_VERDICTS + IMPROVEMENT_VERDICTS)

    def head(key: tuple[str, str]) -> dict[str, float]:
        moved = {m for m in MODES if (c := cells.get((*key, m))) is not None and c.verdict in counted}
        return {m: h_ms[key][m] if m in moved else v for m, v in b_ms[key].items()}

    out = []
    for preset in dict.fromkeys(i.preset for i in instances):
        mine = [i for i in instances if i.preset == preset]
        won = {"base": [(i.base_best, len(i.base_ties) > 1) for i in mine], "head": [_held(i) for i in mine]}
        keys = [(preset, i.workload) for i in mine]
        medians = {"base": [b_ms[k] for k in keys], "head": [head(k) for k in keys]}
        for m in MODES:
            tied = {s: [t for winner, t in w if winner == m] for s, w in won.items()}
            geo = {s: _geomean(v, m) if m in COMPILED else None for s, v in medians.items()}
            out.append(ModeFigures(preset, m, len(tied["base"]), len(tied["head"]), geo["base"], geo["head"],
                                   sum(tied["base"]), sum(tied["head"])))
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
                 repo_dir: Path | None = None, history: Sequence[str | os.PathLike[str]] = (),
                 together: bool = False, joint: Collection[str] = ()) -> Comparison:
    """Compare the runs of commits `base` and `head` (hashes or prefixes) of one machine: from a results directory
    (those two files with their samples, and the rest of the directory and the `history` directories for the
    cells' history), or from a results table with samples. CompareError across versions unless
    `allow_cross_versions`; `workloads` restricts the comparison (the PR flow measures only some). `head_machine`
    names another machine for the head run (one machine per PyTorch version: compare the versions at one commit).
    With `repo_dir`, a commit that is no hash prefix of a run is resolved as a git ref there (HEAD~1, a branch), and
    the source differences between the commits decide what is attributed to them. `together`: base and head were
    measured at once; `joint`: workloads whose source changed, where the repository is not at hand (the PR flow)."""
    if isinstance(source, pd.DataFrame):
        base_table, head_table, base_run, head_run = pairs.split_pair(source, base, head, machine, head_machine)
        warnings: list[str] = []
        tables = [source]
    else:
        b, h, warnings = pairs.pick_pair(source, base, head, machine, head_machine, repo_dir)
        check_versions(pairs.header_info(b), pairs.header_info(h), allow_cross_versions)  # before any parsing
        base_table, head_table, base_run, head_run, loading = pairs.load_pair(source, b, h)
        warnings = warnings + loading
        tables = _history_tables(source, history, head_run.machine)
    if base_run.machine != head_run.machine and head_machine is None:
        raise CompareError(f"base ran on {base_run.machine} and head on {head_run.machine}: compare runs of one "
                           "machine (pass --machine)")
    check_versions(base_run, head_run, allow_cross_versions)
    record = None if isinstance(source, pd.DataFrame) or base_run.machine != head_run.machine else \
        pairing.find(default_cells_dir(source), head_run.machine, head_run.torch, base_run.commit, head_run.commit)
    if record is not None:  # judged as the paired measurement was: its scope, its rule, its families
        rule, workloads = as_recorded(rule or ChangeRule(), record), workloads or record.scope or None
        repo_dir, together, joint = None, True, (*joint, *record.joint)
    unaffected, note, reach = _unaffected(base_run, head_run, repo_dir, (base_table, head_table), workloads)
    runs = [_run_key(base_run), _run_key(head_run)]
    context = Context(history_of(tables, head_run.gpu, head_run.torch, runs, rule), together,
                      frozenset(joint) | frozenset(reach), record)
    comparison = compare_tables(base_table, head_table, base_run, head_run, rule, workloads, unaffected, context)
    comparison.warnings = warnings
    comparison.notes += [note] if note else []
    comparison.scope = record.scope_text if record is not None else ""
    comparison.stopped = record.stopped if record is not None else ""
    return comparison


def as_recorded(rule: ChangeRule, record: pairing.PairedRecord) -> ChangeRule:
    """The rule a paired measurement was decided by, where the caller asks for the default test: its confirmation,
    margin and looks come from the record."""
    if rule.test != NOISE_TEST:
        return rule
    return paired.as_recorded(rule, record)


def _history_tables(results_dir: str | os.PathLike[str], history: Sequence[str | os.PathLike[str]],
                    machine: str) -> list[pd.DataFrame]:
    """The runs the cells' history is read from: the results directory's runs of the head's machine (a nightly's
    earlier nights), and every run of the `history` directories (another store of the same GPU, the nightly's
    results for a PR)."""
    own = pairs.load_history(results_dir)
    own = own[own["machine"].astype(str) == machine] if not own.empty else own
    return [own, *(pairs.load_history(d) for d in history)]


def _run_key(r: RunInfo) -> tuple[str, str, str]:
    return (r.commit, r.machine, r.torch)


def history_of(tables: Sequence[pd.DataFrame], gpu: str, torch: str, exclude: Sequence[tuple[str, str, str]],
               rule: ChangeRule | None = None) -> History:
    """The cells' history for a comparison: the runs of `tables` on `gpu` under `torch`, the compared ones left
    out."""
    rule = rule or ChangeRule()
    return noise.history_of(tables, gpu, torch, exclude, ties=rule.noise, host=rule.host)


def _unaffected(b: RunInfo, h: RunInfo, repo_dir: Path | None, tables: tuple[pd.DataFrame, ...] = (),
                workloads: Collection[str] | None = None) -> tuple[set[str], str, tuple[str, ...]]:
    """The workloads the source differences between the two commits cannot move (none unless git can tell and
    the runs share GPU, torch and triton), a note saying what the source change reaches, counting the workloads the
    runs' `tables` measured (within `workloads`, when the comparison is restricted to them), and the workloads it
    reaches."""
    if repo_dir is None or any(getattr(b, k) != getattr(h, k) for k in ("gpu", "torch", "triton")):
        return set(), "", ()
    reach = attribution.source_changes(b.commit, h.commit, repo_dir)
    if reach is None:
        return set(), "", ()
    unaffected = set(catalog.workload_names()) - set(reach.workloads)
    if not unaffected:
        return set(), "", tuple(reach.workloads)
    measured = {str(w) for t in tables for w in t["workload"].unique()}
    counted = unaffected & (measured if workloads is None else measured & set(workloads))
    if not counted:
        return unaffected, "", tuple(reach.workloads)
    n = f"{len(counted)} workload{'s' if len(counted) != 1 else ''} measured"
    if b.commit == h.commit:
        note = (f"source: both runs are of commit {h.commit[:8]}, so timing changes of the {n} are reported as "
                f"'{SOURCE_UNCHANGED}' and not counted")
    else:
        what = "no workload" if not reach.workloads else ", ".join(reach.workloads)
        note = (f"source: the changes between the commits reach {what}; timing changes of the other {n} are "
                f"reported as '{SOURCE_UNCHANGED}' and not counted")
    return unaffected, note, tuple(reach.workloads)


def compare_versions(results_dir: str | os.PathLike[str], base_torch: str, head_torch: str,
                     machine: str | None = None, head_machine: str | None = None, base: str | None = None,
                     head: str | None = None, allow_cross_versions: bool = False, rule: ChangeRule | None = None,
                     repo_dir: Path | None = None, history: Sequence[str | os.PathLike[str]] = ()) -> Comparison:
    """torch `base_torch` vs `head_torch` on one kind of machine: the runs picked by version (pairs.version_pair:
    head's latest run, base at the same commit or the nearest), torch and triton allowed to differ, another GPU
    refused unless `allow_cross_versions`. The notes say how base was chosen."""
    b, h, warnings, how = pairs.version_pair(results_dir, base_torch, head_torch, machine, head_machine, base, head,
                                             repo_dir)
    check_versions(pairs.header_info(b), pairs.header_info(h), allow_cross_versions, ("torch", "triton"))
    comparison = compare_files(results_dir, b, h, rule, history=history)
    comparison.notes.insert(0, f"runs picked by torch version: head {h.commit[:8]} on {h.machine} (torch {h.torch}, "
                               f"its latest run), base {b.commit[:8]} on {b.machine} (torch {b.torch}, {how})")
    comparison.warnings = warnings + comparison.warnings
    return comparison


def compare_files(results_dir: str | os.PathLike[str], b: RunFile, h: RunFile, rule: ChangeRule | None = None,
                  repo_dir: Path | None = None, history: Sequence[str | os.PathLike[str]] = ()) -> Comparison:
    """Compare two runs already picked (their files in `results_dir` with their cell stores; the directory's other
    runs and the `history` directories for the cells' history), whatever versions they were measured with: the
    caller decided that they are worth comparing. With `repo_dir`, cells the source differences cannot reach are
    reported as SOURCE_UNCHANGED (same versions only)."""
    base_table, head_table, base_run, head_run, loading = pairs.load_pair(results_dir, b, h)
    unaffected, note, reach = _unaffected(base_run, head_run, repo_dir, (base_table, head_table))
    tables = _history_tables(results_dir, history, head_run.machine)
    runs = [_run_key(base_run), _run_key(head_run)]
    context = Context(history_of(tables, head_run.gpu, head_run.torch, runs, rule), joint=frozenset(reach))
    comparison = compare_tables(base_table, head_table, base_run, head_run, rule, unaffected=unaffected,
                                context=context)
    comparison.notes += [note] if note else []
    comparison.warnings = loading
    return comparison


__all__ = ["EXIT_FAIL_ON", "EXIT_OK", "FAIL_ON", "CellChange", "ChangeRule", "CompareError", "Comparison", "Context",
           "InstanceChange", "KernelChange", "ModeFigures", "RunInfo", "check_versions", "code_unchanged",
           "compare_files", "compare_runs", "compare_tables", "compare_versions", "history_of", "launch_floor",
           "same_versions"]
