"""The study's figures from the results table, per run (commit, machine, torch) and preset, and their history.

Over the instances the study analyses (workloads.names.applies: every workload in prefill and tiny, all but the
decode-invariant ones in decode), from ok cells only:
- best mode: the fastest median (the study's definition; failed or incorrect cells never win, nor do cells too
  noisy to judge, whose medians rank nothing while their instance has a cell that is not; equal medians go to the
  earlier mode of MODES, eager first); an instance gets a winner whenever a mode measured ok;
- wins per mode (all five, zeros included) and per domain;
- geomean speedup vs eager per compiled mode, over the instances where both eager and the mode are ok;
- head-to-head default vs max-autotune-no-cudagraphs over every instance where both are ok (`h2h_instances`:
  how many; 0 when either mode was not measured): wins and the average margin |default - mancg| / default * 100
  over the instances each side wins (the study's definition);
- the noise-aware view: the modes tied with the winner, and host-bound instances (the rules: tracker.stats'
  NoiseModel and HostBound);
- kernels under test ("kernel:<name>" rows): each against the best baseline of its own run (`kernel_rows`);
  they are never a mode, so they never win, nor enter a geomean.

Everything is computed for all runs at once on numpy arrays (one (instance x mode) matrix), so a year of
nightly history is analysed in well under a second. Serialising the figures is publish's job
(tracker.publish.summaryjson).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tracker.stats import TOO_NOISY_SPREAD, HostBound, NoiseModel, too_noisy
from tracker.store.results import CELL_KEYS, RUN_KEYS
from workloads.kernels.registry import candidate_name
from workloads.modes import COMPILED, HEAD_TO_HEAD, MODES, REFERENCE
from workloads.names import DECODE_INVARIANT

INSTANCE_KEYS = [*RUN_KEYS, "preset", "workload"]


@dataclass
class Analysis:
    """`instances`: one row per (run, preset, workload) the study analyses; `figures`: one row per (run, preset);
    `domain_wins`: (run, preset, domain, mode) -> wins; `kernels`: one row per candidate cell (KERNEL_COLUMNS)."""

    instances: pd.DataFrame
    figures: pd.DataFrame
    domain_wins: pd.DataFrame
    noise: NoiseModel = field(default_factory=NoiseModel)
    host: HostBound = field(default_factory=HostBound)
    kernels: pd.DataFrame = field(default_factory=lambda: _empty_kernels())


def study_instances(table: pd.DataFrame) -> pd.Series:
    """Rows of the instances the study analyses: every workload in prefill (and tiny), 18 in decode."""
    return ~((table["preset"] == "decode") & table["workload"].isin(DECODE_INVARIANT))


def baseline_rows(table: pd.DataFrame) -> pd.Series:
    """Rows of the five compile modes: a kernel under test ("kernel:<name>") is judged against them, never one."""
    return table["mode"].isin(MODES)


def _matrix(codes: np.ndarray, modes: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    out = np.full((n, len(MODES)), np.nan)
    out[codes, modes] = values
    return out


def instance_table(table: pd.DataFrame, noise: NoiseModel | None = None, host: HostBound | None = None,
                   max_spread: float = TOO_NOISY_SPREAD) -> pd.DataFrame:
    """One row per instance with its medians per mode (`ms_<mode>`), winner (None when no mode is ok; `winner_noisy`
    when every ok cell of the instance is too noisy to judge) with its compiles (count, median, slowest), runner-up
    and margin, tie set (modes within noise of the winner, fastest first), host-bound flag and failed modes."""
    noise, host = noise or NoiseModel(), host or HostBound()
    t = table[study_instances(table) & baseline_rows(table)]
    if t.empty:
        return _empty_instances()
    groups = t.groupby(INSTANCE_KEYS, observed=True, sort=False)
    codes = groups.ngroup().to_numpy()
    n = int(codes.max()) + 1
    first = np.unique(codes, return_index=True)[1]
    inst = t.iloc[first][[*INSTANCE_KEYS, "date", "gpu", "triton", "domain", "launch_us"]].reset_index(drop=True)
    mode_idx = t["mode"].cat.codes.to_numpy()  # categories start with MODES (tracker.store.results)
    ok, has_clean = _ranked(t, codes, n, max_spread)
    med = _matrix(codes[ok], mode_idx[ok], t["median_ms"].to_numpy()[ok], n)
    lo = _matrix(codes[ok], mode_idx[ok], t["ci_low"].to_numpy()[ok], n)
    hi = _matrix(codes[ok], mode_idx[ok], t["ci_high"].to_numpy()[ok], n)
    # Compiles of one cell differ (autotuning's draw): the winner's slowest compile bounds what it reliably gives,
    # so a mode whose best lies within the winner's compiles is tied with it.
    spread = {c: _matrix(codes[ok], mode_idx[ok], t[col].to_numpy(dtype=float)[ok], n) if col in t else
              np.full((n, len(MODES)), np.nan) for c, col in (("n", "compiles"), ("median", "compiles_median_ms"),
                                                              ("max", "compiles_max_ms"))}
    hi = np.fmax(hi, spread["max"])
    failed = np.zeros((n, len(MODES)), dtype=bool)
    bad = (t["status"] == "failed").to_numpy()
    failed[codes[bad], mode_idx[bad]] = True

    has_ok = ~np.isnan(med).all(axis=1)
    filled = np.where(np.isnan(med), np.inf, med)
    order = np.argsort(filled, axis=1, kind="stable")  # stable: equal medians keep MODES order
    rows = np.arange(n)
    win, second = order[:, 0], order[:, 1]
    win_ms = np.where(has_ok, filled[rows, win], np.nan)
    second_ms = filled[rows, second]
    has_second = np.isfinite(second_ms)
    tied = noise.tied(win_ms[:, None], hi[rows, win][:, None], med, lo)
    tied[rows, win] = has_ok

    mode_names = np.array(MODES, dtype=object)
    inst["winner"] = np.where(has_ok, mode_names[win], None)
    inst["winner_noisy"] = has_ok & ~has_clean  # won among cells all too noisy to judge
    inst["winner_ms"] = win_ms
    inst["winner_compiles"] = np.where(has_ok, spread["n"][rows, win], np.nan)
    inst["winner_compiles_median_ms"] = np.where(has_ok, spread["median"][rows, win], np.nan)
    inst["winner_compiles_max_ms"] = np.where(has_ok, spread["max"][rows, win], np.nan)
    inst["runner_up"] = np.where(has_ok & has_second, mode_names[second], None)
    inst["runner_up_ms"] = np.where(has_second, second_ms, np.nan)
    inst["margin_pct"] = np.where(has_ok & has_second, (second_ms - win_ms) / win_ms * 100, np.nan)
    inst["ties"] = [tuple(mode_names[order[i][tied[i][order[i]]]]) for i in range(n)]
    inst["tie"] = tied.sum(axis=1) > 1
    inst["host_bound"] = host.bound(win_ms, inst["launch_us"].to_numpy())
    inst["failed_modes"] = [tuple(mode_names[failed[i]]) for i in range(n)]
    for j, m in enumerate(MODES):
        inst[f"ms_{m}"] = med[:, j]
    return inst


def _ranked(t: pd.DataFrame, codes: np.ndarray, n: int, max_spread: float) -> tuple[np.ndarray, np.ndarray]:
    """(the rows whose medians rank, per instance whether it has an ok cell not too noisy to judge). A cell too noisy
    to judge ranks nothing (no win, no geomean, no margin; tracker.analyse.unstable lists it) while its instance has
    a cell that is not: an instance measured ok only too noisily still gets its winner from the modes measured ok,
    as a cell's best compile is chosen (tracker.store.cells.combine)."""
    measured = (t["status"] == "ok").to_numpy()
    clean = measured & ~too_noisy(t["median_ms"], t["q25"], t["q75"], max_spread)
    has_clean = np.bincount(codes[clean], minlength=n).astype(bool)
    return clean | (measured & ~has_clean[codes]), has_clean


def _empty_instances() -> pd.DataFrame:
    """instance_table's columns, with their dtypes (numbers as floats, flags as bools), for a run of no instance."""
    numbers = ["launch_us", "winner_ms", "winner_compiles", "winner_compiles_median_ms", "winner_compiles_max_ms",
               "runner_up_ms", "margin_pct", *(f"ms_{m}" for m in MODES)]
    cols = {c: object for c in [*INSTANCE_KEYS, "date", "gpu", "triton", "domain", "winner", "runner_up", "ties",
                                "failed_modes"]}
    cols |= dict.fromkeys(numbers, float) | {"tie": bool, "host_bound": bool, "winner_noisy": bool}
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in cols.items()})


def _figures(inst: pd.DataFrame) -> pd.DataFrame:
    """Per (run, preset): instances, wins_<mode>, geomean_<mode>, h2h_instances, h2h_<side>_wins/_margin_pct, ties,
    host_bound."""
    keys = [*RUN_KEYS, "preset"]
    inst = inst[inst["winner"].notna()].copy()
    eager = inst[f"ms_{REFERENCE}"].to_numpy()
    cols: dict[str, Any] = {"instances": inst["winner"].notna()}
    for m in MODES:
        cols[f"wins_{m}"] = inst["winner"] == m
    for m in COMPILED:
        cols[f"_log_{m}"] = np.log(eager / inst[f"ms_{m}"].to_numpy())  # NaN where either is not ok
    first, second = HEAD_TO_HEAD
    d, a = inst[f"ms_{first}"].to_numpy(), inst[f"ms_{second}"].to_numpy()
    margin = np.abs(d - a) / d * 100
    cols["h2h_instances"] = np.isfinite(d) & np.isfinite(a)  # both measured ok
    for side, wins in ((first, d < a), (second, a < d)):
        cols[f"h2h_{side}_wins"] = wins
        cols[f"_h2h_{side}_margin"] = np.where(wins, margin, np.nan)
    cols["ties"] = inst["tie"]
    cols["host_bound"] = inst["host_bound"]
    frame = pd.DataFrame(cols, index=inst.index)
    frame = pd.concat([inst[[*keys, "date", "gpu", "triton", "launch_us"]], frame], axis=1)
    g = frame.groupby(keys, observed=True, sort=False)
    out = g[["date", "gpu", "triton", "launch_us"]].first()
    sums = g[[c for c in cols if not c.startswith("_")]].sum()
    out = out.join(sums.astype(int))
    for m in COMPILED:
        out[f"geomean_{m}"] = np.exp(g[f"_log_{m}"].mean())
    for side in HEAD_TO_HEAD:
        out[f"h2h_{side}_margin_pct"] = g[f"_h2h_{side}_margin"].mean()
    return out.reset_index().sort_values(["date", *keys], kind="stable").reset_index(drop=True)


def _domain_wins(inst: pd.DataFrame) -> pd.DataFrame:
    keys = [*RUN_KEYS, "preset", "domain"]
    won = inst[inst["winner"].notna()]
    counts = won.groupby([*keys, "winner"], observed=True).size().rename("wins").reset_index()
    return counts.rename(columns={"winner": "mode"})


def analyse(table: pd.DataFrame, noise: NoiseModel | None = None, host: HostBound | None = None,
            max_spread: float = TOO_NOISY_SPREAD) -> Analysis:
    noise, host = noise or NoiseModel(), host or HostBound()
    inst = instance_table(table, noise, host, max_spread)
    return Analysis(inst, _figures(inst), _domain_wins(inst), noise, host, _kernel_table(table, inst, noise, host))


# ---------------------------------------------------------------------------------------------------- kernels

KERNEL_COLUMNS = [
    *RUN_KEYS, "date", "gpu", "preset", "workload", "domain", "candidate", "mode", "status", "reason", "correct",
    "median_ms", "ci_low", "ci_high", "best_baseline", "best_ms", "best_ties", "eager_ms", "speedup_vs_best",
    "speedup_vs_eager", "within_noise", "host_bound", "compile_s", "peak_mem_mib", "launch_us",
]
_STR_KEYS = [*RUN_KEYS, "gpu", "preset", "workload", "domain"]


def _empty_kernels() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object) for c in KERNEL_COLUMNS})


def _as_str(frame: pd.DataFrame, columns: list[str]) -> dict[str, np.ndarray]:
    return {c: frame[c].astype(str).to_numpy() for c in columns}


def _best_baselines(table: pd.DataFrame, inst: pd.DataFrame) -> pd.DataFrame:
    """Per instance with a winner: the best baseline (the summary's best mode), its median, 99% CI and tie set,
    and eager's median; keyed by INSTANCE_KEYS as strings."""
    won = inst[inst["winner"].notna()]
    best = pd.DataFrame({**_as_str(won, INSTANCE_KEYS), "best_baseline": won["winner"].to_numpy(),
                         "best_ms": won["winner_ms"].to_numpy(dtype=float), "best_ties": won["ties"].to_numpy(),
                         "eager_ms": won[f"ms_{REFERENCE}"].to_numpy(dtype=float)})
    cells = table[baseline_rows(table) & (table["status"] == "ok")]
    ci = pd.DataFrame({**_as_str(cells, INSTANCE_KEYS), "best_baseline": cells["mode"].astype(str).to_numpy(),
                       "best_ci_low": cells["ci_low"].to_numpy(), "best_ci_high": cells["ci_high"].to_numpy()})
    return best.merge(ci, on=[*INSTANCE_KEYS, "best_baseline"], how="left")


def _kernel_table(table: pd.DataFrame, inst: pd.DataFrame, noise: NoiseModel, host: HostBound) -> pd.DataFrame:
    """One row per candidate cell (KERNEL_COLUMNS), against the best baseline of the same run and preset."""
    k = table[~baseline_rows(table)]
    if k.empty:
        return _empty_kernels()
    k = k.sort_values(["date", "machine", "torch", "preset", "workload", "mode"], kind="stable")
    # only the instances that have candidates: a year of history has few of them
    near = table["commit"].isin(k["commit"].unique()) & table["workload"].isin(k["workload"].unique())
    near_inst = inst["commit"].isin(k["commit"].unique()) & inst["workload"].isin(k["workload"].unique())
    out = pd.DataFrame({**_as_str(k, _STR_KEYS), "date": k["date"].to_numpy()})
    mode = k["mode"].astype(str).to_numpy()
    out["candidate"] = [candidate_name(m) for m in mode]
    out["mode"] = mode
    for c in ("status", "reason"):
        out[c] = k[c].astype(str).to_numpy()
    for c in ("median_ms", "ci_low", "ci_high", "compile_s", "peak_mem_mib", "launch_us"):
        out[c] = k[c].to_numpy(dtype=float)
    out = out.merge(_best_baselines(table[near], inst[near_inst]), on=INSTANCE_KEYS, how="left")
    ok = (out["status"] == "ok").to_numpy()
    ms = np.where(ok, out["median_ms"].to_numpy(dtype=float), np.nan)  # a failed cell has no time: never fast
    best, eager = out["best_ms"].to_numpy(dtype=float), out["eager_ms"].to_numpy(dtype=float)
    out["median_ms"] = ms
    out["speedup_vs_best"] = best / ms
    out["speedup_vs_eager"] = eager / ms
    # Candidate and best baseline are tied by the rule that ties modes with the winner.
    out["within_noise"] = noise.tied_pair(ms, out["ci_low"].to_numpy(dtype=float), out["ci_high"].to_numpy(dtype=float),
                                          best, out["best_ci_low"].to_numpy(dtype=float),
                                          out["best_ci_high"].to_numpy(dtype=float))
    # Like an instance: host-bound when the faster of the two cells is.
    out["host_bound"] = ok & host.bound(np.fmin(ms, best), out["launch_us"].to_numpy(dtype=float))
    # skipped: not measured, so neither correct nor incorrect
    out["correct"] = pd.array(np.where(out["status"] == "skipped", None, ok), dtype="boolean")
    out["best_ties"] = [tuple(t) if isinstance(t, tuple) else () for t in out["best_ties"]]
    out["best_baseline"] = out["best_baseline"].astype(object).where(out["best_baseline"].notna(), None)
    return out[KERNEL_COLUMNS]


def kernel_rows(source: Analysis | pd.DataFrame, *, commit: str | None = None, machine: str | None = None,
                include_skipped: bool = False, noise: NoiseModel | None = None,
                host: HostBound | None = None) -> pd.DataFrame:
    """Every kernel under test against the best baseline of its own run (same commit, machine, torch, preset):
    one row per candidate cell, columns KERNEL_COLUMNS, oldest run first, then preset, workload, candidate.

    `source`: an Analysis (its noise and host models apply), or a results table (analysed here with `noise` and
    `host`). `speedup_*` = baseline median / candidate median (>1: the candidate is faster), NaN unless the
    candidate measured ok; `correct` is False for a failed cell (incorrect output, error, OOM: `reason` says
    which) and NA for a skipped one, which is left out unless `include_skipped`. `best_baseline` is the fastest
    mode (None when no mode measured ok); `within_noise`: candidate and best baseline tied by the analysis'
    noise rule; `host_bound`: the faster of the two within k launch floors. `commit` is a prefix."""
    if isinstance(source, Analysis):
        rows = source.kernels
    else:
        noise, host = noise or NoiseModel(), host or HostBound()
        rows = _kernel_table(source, instance_table(source, noise, host), noise, host)
    keep = np.ones(len(rows), dtype=bool)
    if machine is not None:
        keep &= (rows["machine"] == machine).to_numpy()
    if commit is not None:
        keep &= rows["commit"].astype(str).str.lower().str.startswith(commit.lower()).to_numpy()
    if not include_skipped:
        keep &= (rows["status"] != "skipped").to_numpy()
    return rows[keep].reset_index(drop=True)


# ---------------------------------------------------------------------------------------------------- history


def _version_key(version: str) -> tuple[Any, ...]:
    try:
        from packaging.version import InvalidVersion, Version

        try:
            return (0, Version(version))
        except InvalidVersion:
            pass
    except ImportError:
        pass
    return (1, tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", version)))


def history(analysis: Analysis, axis: str = "commit", machine: str | None = None) -> pd.DataFrame:
    """The figures (analysis.figures' columns) as series per machine and preset: over commits (every run, by
    date; filter on torch for one version's line), or over torch versions (each version's latest run, in version
    order)."""
    fig = analysis.figures if machine is None else analysis.figures[analysis.figures["machine"] == machine]
    versions = sorted(fig["torch"].astype(str).unique(), key=_version_key)
    fig = fig.assign(_r=fig["torch"].astype(str).map({v: i for i, v in enumerate(versions)}))
    if axis == "commit":  # by date; runs of one commit under several torch versions in version order
        out = fig.sort_values(["machine", "preset", "date", "_r"], kind="stable")
    elif axis == "torch":
        latest = fig.sort_values("date", kind="stable").groupby(["machine", "torch", "preset"], observed=True).tail(1)
        out = latest.sort_values(["machine", "preset", "_r"], kind="stable")
    else:
        raise ValueError(f"history axis is 'commit' or 'torch', not {axis!r}")
    return out.drop(columns="_r").reset_index(drop=True)


def best_mode_timeline(analysis: Analysis, machine: str | None = None) -> pd.DataFrame:
    """Per instance and (machine, torch) series, the best mode at each commit by date; `changed` marks a new
    winner, `changed_beyond_noise` one whose predecessor is not among the new winner's ties."""
    inst = analysis.instances
    if machine is not None:
        inst = inst[inst["machine"] == machine]
    inst = inst[inst["winner"].notna()].sort_values(["machine", "torch", "preset", "workload", "date"], kind="stable")
    cols = [*INSTANCE_KEYS, "date", "winner", "winner_ms", "runner_up", "margin_pct", "ties", "host_bound"]
    out = inst[cols].reset_index(drop=True)
    prev = out.groupby(["machine", "torch", "preset", "workload"], observed=True)["winner"].shift(1)
    out["previous"] = prev
    out["changed"] = prev.notna() & (prev != out["winner"])
    outside = np.array([p not in t for p, t in zip(prev, out["ties"], strict=True)], dtype=bool)
    out["changed_beyond_noise"] = out["changed"] & outside
    return out


__all__ = ["CELL_KEYS", "KERNEL_COLUMNS", "Analysis", "analyse", "best_mode_timeline", "history", "instance_table",
           "kernel_rows"]
