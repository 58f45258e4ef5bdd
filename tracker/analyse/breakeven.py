"""Compile break-even, the study's second question: when does compiling pay off?

Per instance and compiled mode, over the instances where eager and the mode both measured ok:

    calls to break even = compile seconds / (eager time per call - mode time per call)

rounded up to a whole call, where the compile seconds are the mode's cell's compile_time metric (its first call,
compiling included) and the times per call are the cells' medians. Where the mode is not faster than eager it never
pays off: `calls` is None. The compile time is what the cell measured: the results do not record whether its
compile cache was cold (a fresh one per cell, the runner's default) or warm (`run --warm-cache` with a filled
cache), so a figure is as cold or as warm as the run that made it.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tracker.analyse.best import INSTANCE_KEYS, baseline_rows, study_instances
from workloads.modes import COMPILED, REFERENCE

# The figure's meaning and its limits, in the words every report (text, markdown, HTML) shows beside it
MEANING = "calls until the time saved vs eager repays the compile time (first call)"
LIMITS = ("never = not faster than eager; compile times as this run measured them (the results do not record "
          "whether the compile cache was cold or warm)")

BREAK_EVEN_COLUMNS = [*INSTANCE_KEYS, "mode", "compile_s", "eager_ms", "mode_ms", "saved_ms", "calls"]


def break_even(table: pd.DataFrame) -> pd.DataFrame:
    """One row per (run, preset, workload, compiled mode) where eager and the mode are ok and the mode's compile
    time is recorded: BREAK_EVEN_COLUMNS, `saved_ms` = eager_ms - mode_ms (negative: slower than eager), `calls`
    the calls to break even (an int; None: never, the mode is not faster than eager)."""
    t = table[study_instances(table) & baseline_rows(table) & (table["status"] == "ok")]
    keys = [*INSTANCE_KEYS]
    frame = pd.DataFrame({**{k: t[k].astype(str).to_numpy() for k in keys},
                          "mode": t["mode"].astype(str).to_numpy(),
                          "median_ms": t["median_ms"].to_numpy(dtype=float),
                          "compile_s": t["compile_s"].to_numpy(dtype=float)})
    eager = frame[frame["mode"] == REFERENCE][[*keys, "median_ms"]].rename(columns={"median_ms": "eager_ms"})
    modes = frame[frame["mode"].isin(COMPILED)].rename(columns={"median_ms": "mode_ms"})
    out = modes.merge(eager, on=keys, how="inner")
    out = out[np.isfinite(out["compile_s"]) & np.isfinite(out["eager_ms"]) & np.isfinite(out["mode_ms"])]
    out = out.assign(saved_ms=out["eager_ms"] - out["mode_ms"])
    out["calls"] = pd.Series([math.ceil(c * 1e3 / s) if s > 0 else None
                              for c, s in zip(out["compile_s"], out["saved_ms"], strict=True)],
                             index=out.index, dtype=object)
    order = {m: i for i, m in enumerate(COMPILED)}
    out = out.assign(_m=out["mode"].map(order)).sort_values([*keys, "_m"], kind="stable")
    return out[BREAK_EVEN_COLUMNS].reset_index(drop=True)


__all__ = ["BREAK_EVEN_COLUMNS", "LIMITS", "MEANING", "break_even"]
