"""The baseline to beat, per instance, in one wording for the summary (text, markdown), the HTML report and the
summary JSON's numbers.

A cell measured in several fresh compiles records its best one (tracker.store.cells.combine), and that is the
baseline: torch.compile gave it, and a user who keeps the compile cache keeps it. Saying only "beat 277.6 us" would
hide that a fresh compile of the same mode lands at its median over compiles, and that the next mode may sit
between the two; so the target says how many compiles it is the best of, their median, and the runner-up.
A run that recorded no compiles (older runs, an imported study) measured one compile a cell, and says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tracker.publish import units
from tracker.publish.units import PLAIN_MICRO
from tracker.stats import float_or_none
from workloads.modes import REFERENCE


@dataclass(frozen=True)
class Target:
    """An instance's best baseline: the winning mode's best compile, the spread of its compiles, the runner-up."""

    mode: str
    ms: float  # the winner's median: its best compile's
    compiles: int  # fresh compiles the winner was measured in (1 when the run recorded none)
    compiles_median_ms: float  # the median over those compiles (= ms with one compile)
    compiles_max_ms: float  # the slowest compile
    runner_up: str | None
    runner_up_ms: float | None

    @classmethod
    def of_instance(cls, x: Mapping[str, Any]) -> Target | None:
        """From a row of the analysis' instance table (tracker.analyse.best.instance_table); None without a winner."""
        if not isinstance(x.get("winner"), str):
            return None
        ms = float(x["winner_ms"])
        n = float_or_none(x.get("winner_compiles"))
        runner_up = x.get("runner_up") if isinstance(x.get("runner_up"), str) else None
        return cls(x["winner"], ms, int(n) if n else 1, float_or_none(x.get("winner_compiles_median_ms")) or ms,
                   float_or_none(x.get("winner_compiles_max_ms")) or ms, runner_up,
                   float_or_none(x.get("runner_up_ms")) if runner_up else None)

    def json(self) -> dict[str, Any]:
        """The summary JSON's `targets` entry (times in ms, 6 decimals like the other figures)."""
        def r(v: float | None) -> float | None:
            return None if v is None or math.isnan(v) else round(v, 6)

        return {"mode": self.mode, "ms": r(self.ms), "compiles": self.compiles,
                "compiles_median_ms": r(self.compiles_median_ms), "compiles_max_ms": r(self.compiles_max_ms),
                "runner_up": self.runner_up, "runner_up_ms": r(self.runner_up_ms)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Target:
        return cls(d["mode"], d["ms"], d["compiles"], d["compiles_median_ms"], d["compiles_max_ms"], d["runner_up"],
                   d["runner_up_ms"])


def target_text(t: Target, name: Callable[[str], str] = str, micro: str = PLAIN_MICRO) -> str:
    """"beat 277.6 us: the best of 3 compiles of max-autotune-no-cudagraphs (median 323.6 us; default 279.0 us)",
    or with one compile "beat 93.57 us: 1 compile of default (max-autotune-no-cudagraphs 96.34 us)"; eager, which
    compiles nothing, "beat 9.892 ms: eager, measured once (max-autotune-no-cudagraphs 9.945 ms)". `name` formats
    mode names (the text summary's short names), `micro` the µs unit; latencies to 4 significant digits."""
    def latency(x: float) -> str:
        return units.ms(x, micro, digits=4)

    # eager compiles nothing: its replicates are measurements in fresh processes
    if t.compiles > 1:
        many = "measurements" if t.mode == REFERENCE else "compiles"
        what = f"the best of {t.compiles} {many} of {name(t.mode)}"
        context = [f"median {latency(t.compiles_median_ms)}"]
    else:
        what = f"{name(t.mode)}, measured once" if t.mode == REFERENCE else f"1 compile of {name(t.mode)}"
        context = []
    if t.runner_up is not None and t.runner_up_ms is not None:
        context.append(f"{name(t.runner_up)} {latency(t.runner_up_ms)}")
    return f"beat {latency(t.ms)}: {what}" + (f" ({'; '.join(context)})" if context else "")


__all__ = ["Target", "target_text"]
