"""A verdict's evidence in the reader's unit: what was compared, by how much it moved, how sure, on how much.

"3.50 ms → 3.73 ms, +6.6% (95% CI +4.9..+8.3%), 3 compiles a side": the geometric means of the two sides'
compiles (what the noise test compares; the tables' before and after are the best compiles), the change, its
confidence interval and the compiles each side had. A cell judged by the fixed bands (its noise unknown) says its
band and p-value instead. One function per unit, so the comment, the terminal table and the report say the same.
"""

from __future__ import annotations

import math

from tracker.analyse.compare import CellChange, InstanceChange

DASH = "\u2013"  # what a missing value looks like


def ms(x: float | None, micro: str = "µs", dash: str = DASH) -> str:
    """A latency in ms as it is shown: µs below a millisecond, 3 significant digits."""
    if x is None:
        return dash
    return f"{_digits(x * 1000)} {micro}" if x < 1 else f"{_digits(x)} ms"


def _digits(x: float) -> str:
    """3 significant digits, trailing zeros kept (3.50, not 3.5), no trailing point (100, not 100.)."""
    return f"{x:#.3g}".rstrip(".")


def change(ratio: float) -> str:
    """A ratio as a signed percentage: 1.066 -> "+6.6%"."""
    if not math.isfinite(ratio):
        return "+∞%" if ratio > 0 else DASH
    pct = (ratio - 1) * 100
    return f"{pct:+.1f}%" if abs(pct) < 100 else f"{pct:+.0f}%"


def interval(ci: tuple[float, float], level: float = 0.95) -> str:
    """"95% CI +4.9..+8.3%"."""
    lo, hi = (change(x).removesuffix("%") for x in ci)
    return f"{level:.0%} CI {lo}..{hi}%"


def compiles(n: tuple[int, int] | None, arrow: str = "→") -> str:
    if n is None:
        return ""
    base, head = n
    if base == head:
        return f"{head} compile{'s' if head != 1 else ''} a side"
    return f"{base} {arrow} {head} compiles"


def cell_evidence(x: CellChange, micro: str = "µs", arrow: str = "→", level: float = 0.95) -> str:
    """One cell's evidence; "" for a cell not judged on its times (missing, failed on either side)."""
    if x.ratio is None:
        return ""
    if x.ci is not None and x.means_ms is not None:
        means = f"{ms(x.means_ms[0], micro)} {arrow} {ms(x.means_ms[1], micro)}"
        parts = [means, f"{change(x.ratio)} ({interval(x.ci, level)})", compiles(x.compiles, arrow)]
        return ", ".join(p for p in parts if p)
    band = f"band ±{x.threshold:.0%}" if x.threshold is not None else ""
    p = "" if x.p_value is None else ("p < 0.001" if x.p_value < 0.001 else f"p = {x.p_value:.3f}")
    return ", ".join(s for s in (change(x.ratio), band, p, compiles(x.compiles, arrow)) if s)


def latency_evidence(i: InstanceChange, level: float = 0.95) -> str:
    """An instance's best latency: its change and, where the noise test judged it, the interval."""
    if i.ratio is None:
        return ""
    if i.ci is not None:
        return f"{change(i.ratio)} ({interval(i.ci, level)})"
    return change(i.ratio) + (f", band ±{i.threshold:.0%}" if i.threshold is not None else "")


__all__ = ["cell_evidence", "change", "compiles", "interval", "latency_evidence", "ms"]
