"""The summary's JSON: the study's figures per run and preset (tracker.analyse.best's analysis) in a stable shape,
which `compile-baselines summary --format json` prints and the text, markdown and HTML views are rendered from.

`{"runs": [{"commit", "machine", "gpu", "torch", "presets": {"prefill": {"instances", "wins", "tied_wins", "winners",
"targets", "ties", "geomean_vs_eager", "head_to_head", "head_to_head_instances", "domain_wins", "host_bound", "notes",
"kernels", "break_even"}}}]}`, runs also carrying "triton", "date" and "launch_us". `wins`, `winners`,
`geomean_vs_eager` and `head_to_head` follow the study's definitions exactly (fastest median wins); `tied_wins` counts,
per mode, those of its wins where another mode is within noise of it (the tie rule, tracker.stats.NoiseModel: a run of
the same code can give them to another mode); `targets` gives, per instance, the baseline to beat
(tracker.publish.target): `{"mode", "ms", "compiles", "compiles_median_ms", "compiles_max_ms", "runner_up",
"runner_up_ms"}`, the winner's best compile, how many fresh compiles it is the best of (1 when the run recorded none),
their median and slowest, and the runner-up and its median (null when no other mode measured ok); `ties` lists, for
instances where more than one mode is within noise of the winner, those modes, fastest first; `host_bound` the instances
whose fastest cell is within k launch floors. `kernels` lists the kernels under test measured in the run (skipped ones
left out), each against the run's best baseline: `{"workload", "candidate", "median_ms", "best_baseline",
"speedup_vs_best", "speedup_vs_eager", "correct", "within_noise", "host_bound", "reason"}` (`kernel_json`); a failed or
incorrect one has `correct` false and null median and speedups. `head_to_head_instances` counts the instances where both
default and max-autotune-no-cudagraphs measured ok (0: the head-to-head was not measured, its wins are 0 and margins
null). `break_even` (tracker.analyse.breakeven) lists, per instance and compiled mode with eager and the mode ok,
`{"workload", "mode", "compile_s", "eager_ms", "mode_ms", "calls"}`: the calls after which the mode's first-call compile
time is repaid by its time saved per call against eager; `calls` null: never (not faster than eager).

The document starts with "format", the shape's version (tracker.store.formats.SUMMARY): a stored summary is read back
through `formats.SUMMARY.read`, which migrates an older one and refuses a newer one.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from tracker.analyse.best import Analysis, analyse, kernel_rows
from tracker.analyse.breakeven import break_even
from tracker.analyse.unstable import unstable_cells
from tracker.publish.target import Target
from tracker.stats import float_or_none
from tracker.store import formats
from tracker.store.results import RUN_KEYS
from workloads.catalog import domains
from workloads.modes import COMPILED, HEAD_TO_HEAD, MODES, REFERENCE


def _rounded(x: Any, digits: int) -> float | None:
    f = float_or_none(x)
    return None if f is None else round(f, digits)


_INSTANCE_FIELDS = ("workload", "domain", "winner", "winner_noisy", "ties", "tie", "host_bound", "failed_modes",
                    f"ms_{REFERENCE}",
                    "winner_ms", "winner_compiles", "winner_compiles_median_ms", "winner_compiles_max_ms", "runner_up",
                    "runner_up_ms")


def _records(frame: pd.DataFrame, columns: list[str]) -> list[dict[str, Any]]:
    """Rows as plain dicts, built column-wise (itertuples on a wide frame is slow in pandas 3)."""
    values = [frame[c].astype(object if c not in ("commit", "machine", "torch", "preset", "workload", "domain", "gpu",
                                                   "triton") else str).tolist() for c in columns]
    return [dict(zip(columns, row, strict=True)) for row in zip(*values, strict=True)]


def preset_summary(analysis: Analysis, commit: str, machine: str, torch: str, preset: str,
                   table: pd.DataFrame | None = None) -> dict[str, Any]:
    """One run's figures for one preset, in the stable JSON shape (the module docstring); `table`: the results
    table the analysis was made from, for the compile break-even (empty without it)."""
    def pick(frame: pd.DataFrame) -> pd.DataFrame:
        return frame[(frame["commit"] == commit) & (frame["machine"] == machine) & (frame["torch"] == torch)
                     & (frame["preset"] == preset)]

    fig = pick(analysis.figures)
    fig_rec = _records(fig, list(fig.columns))[0] if len(fig) else None
    kernels = [kernel_json(k) for k in _records(pick(kernel_rows(analysis)), _KERNEL_FIELDS)]
    be = [] if table is None else [break_even_json(b) for b in _records(pick(break_even(table)), _BREAK_EVEN_FIELDS)]
    noisy = [] if table is None else [_too_noisy_json(u) for u in _records(pick(unstable_cells(table)),
                                                                             ["workload", "mode", "spread"])]
    return _preset_dict(fig_rec, _records(pick(analysis.instances), list(_INSTANCE_FIELDS)), kernels, be, noisy)


def _too_noisy_json(u: dict[str, Any]) -> dict[str, Any]:
    return {"workload": u["workload"], "mode": u["mode"], "spread": _rounded(u["spread"], 3)}


_BREAK_EVEN_FIELDS = ["workload", "mode", "compile_s", "eager_ms", "mode_ms", "calls"]


def break_even_json(b: dict[str, Any]) -> dict[str, Any]:
    """One (instance, compiled mode) of the compile break-even: `calls` an int, or None for never."""
    calls = b["calls"]
    return {"workload": b["workload"], "mode": b["mode"], "compile_s": _rounded(b["compile_s"], 3),
            "eager_ms": _rounded(b["eager_ms"], 6), "mode_ms": _rounded(b["mode_ms"], 6),
            "calls": None if calls is None or (isinstance(calls, float) and math.isnan(calls)) else int(calls)}


_KERNEL_FIELDS = ["workload", "candidate", "status", "reason", "median_ms", "best_baseline", "speedup_vs_best",
                  "speedup_vs_eager", "within_noise", "host_bound"]


def kernel_json(k: dict[str, Any]) -> dict[str, Any]:
    """One candidate in the summary JSON: its figures against the best baseline, then the noise-aware qualifiers
    and the reason."""
    return {
        "workload": k["workload"], "candidate": k["candidate"], "median_ms": _rounded(k["median_ms"], 6),
        "best_baseline": k["best_baseline"], "speedup_vs_best": _rounded(k["speedup_vs_best"], 3),
        "speedup_vs_eager": _rounded(k["speedup_vs_eager"], 3), "correct": k["status"] == "ok",
        "within_noise": bool(k["within_noise"]), "host_bound": bool(k["host_bound"]), "reason": k["reason"] or None,
    }


def _preset_dict(r: dict[str, Any] | None, inst: list[dict[str, Any]], kernels: list[dict[str, Any]],
                 break_even_rows: list[dict[str, Any]], noisy: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    won = [x for x in inst if isinstance(x["winner"], str)]
    domain_wins = {d: {m: 0 for m in MODES} for d in domains() if any(x["domain"] == d for x in won)}
    for x in won:
        domain_wins[x["domain"]][x["winner"]] += 1

    def fig(name: str) -> Any:
        return r[name] if r is not None else None

    return {
        "instances": len(won),
        "wins": {m: int(fig(f"wins_{m}") or 0) for m in MODES},
        "tied_wins": {m: sum(1 for x in won if x["winner"] == m and x["tie"]) for m in MODES},
        "winners": {x["workload"]: x["winner"] for x in won},
        "targets": {x["workload"]: target.json() for x in won if (target := Target.of_instance(x)) is not None},
        "ties": {x["workload"]: list(x["ties"]) for x in won if x["tie"]},
        "geomean_vs_eager": {m: _rounded(fig(f"geomean_{m}"), 3) for m in COMPILED},
        "head_to_head": {side: {"wins": int(fig(f"h2h_{side}_wins") or 0),
                                "avg_margin_pct": _rounded(fig(f"h2h_{side}_margin_pct"), 2)}
                         for side in HEAD_TO_HEAD},
        "head_to_head_instances": int(fig("h2h_instances") or 0),
        "domain_wins": domain_wins,
        "host_bound": [x["workload"] for x in won if x["host_bound"]],
        "notes": _notes(inst),
        "kernels": kernels,
        "break_even": break_even_rows,
        "too_noisy": noisy or [],
    }


def _notes(inst: list[dict[str, Any]]) -> list[str]:
    """What the figures leave out and why: instances no mode won (every cell failed: one measured ok only too noisily
    still has its winner among those cells, tracker.analyse.best), winners among cells all too noisy, eager missing,
    failed modes."""
    notes = []
    for x in inst:
        if not isinstance(x["winner"], str):
            notes.append(f"{x['workload']}: no mode measured ok: not counted")
        elif x["winner_noisy"]:
            notes.append(f"{x['workload']}: won by {x['winner']} among cells all too noisy to judge")
        elif math.isnan(x[f"ms_{REFERENCE}"]):
            notes.append(f"{x['workload']}: no ok eager cell: left out of the geomeans")
        if x["failed_modes"]:
            notes.append(f"{x['workload']}: failed: {', '.join(x['failed_modes'])}")
    return notes


def summary_json(table: pd.DataFrame, commit: str | None = None, machine: str | None = None,
                 analysis: Analysis | None = None) -> dict[str, Any]:
    """`{"runs": [...]}` for every run of `table` (optionally one machine and/or commit prefix), oldest first."""
    analysis = analysis or analyse(table)
    keys = [*RUN_KEYS, "preset"]
    f = analysis.figures
    if machine is not None:
        f = f[f["machine"] == machine]
    if commit is not None:
        f = f[f["commit"].astype(str).str.startswith(commit)]
    inst: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for x in _records(analysis.instances, [*keys, *_INSTANCE_FIELDS]):
        inst.setdefault(tuple(x[k] for k in keys), []).append(x)
    kernels: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for k in _records(kernel_rows(analysis), [*keys, *_KERNEL_FIELDS]):
        kernels.setdefault(tuple(k[c] for c in keys), []).append(kernel_json(k))
    noisy: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for u in _records(unstable_cells(table), [*keys, "workload", "mode", "spread"]):
        noisy.setdefault(tuple(u[c] for c in keys), []).append(_too_noisy_json(u))
    be: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for b in _records(break_even(table), [*keys, *_BREAK_EVEN_FIELDS]):
        be.setdefault(tuple(b[c] for c in keys), []).append(break_even_json(b))
    # A run's presets are those it measured instances of: one whose every instance no mode won (all too noisy, say)
    # has no figures, and is still shown, saying why
    figures = {tuple(r[k] for k in keys): r for r in _records(f, list(f.columns))}
    measured = analysis.instances.drop_duplicates(keys)[[*keys, "date", "gpu", "triton", "launch_us"]]
    measured = measured[measured["machine"].astype(str) == machine] if machine is not None else measured
    if commit is not None:
        measured = measured[measured["commit"].astype(str).str.startswith(commit)]
    runs: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in _records(measured.sort_values(["date", *keys], kind="stable"), list(measured.columns)):
        key = (r["commit"], r["machine"], r["torch"])
        run = runs.setdefault(key, {
            "commit": r["commit"], "machine": r["machine"], "gpu": r["gpu"], "torch": r["torch"],
            "triton": r["triton"], "date": pd.Timestamp(r["date"]).isoformat(),
            "launch_us": _rounded(r["launch_us"], 2), "presets": {}})
        preset_key = (*key, r["preset"])
        run["presets"][r["preset"]] = _preset_dict(figures.get(preset_key), inst.get(preset_key, []),
                                                   kernels.get(preset_key, []), be.get(preset_key, []),
                                                   noisy.get(preset_key, []))
    return formats.SUMMARY.stamp({"runs": list(runs.values())})


__all__ = ["break_even_json", "kernel_json", "preset_summary", "summary_json"]
