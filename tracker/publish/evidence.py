"""A verdict's evidence in the reader's unit: what was compared, by how much it moved, how sure, on how much.

"3.50 ms → 3.73 ms, +6.6% (95% CI +4.9..+8.3%), 3 compiles a side": the geometric means of the two sides'
compiles (what the noise test compares; the tables' before and after are the best compiles), the change, its
confidence interval and the compiles each side had. A cell judged by the fixed bands (its noise unknown) says its
band and p-value instead; a cell of a shared baseline, that one measurement served both sides. Each number in the
reader's unit (tracker.publish.units), so the comment, the terminal table and the report say the same.
"""

from __future__ import annotations

from tracker.analyse.compare import CellChange, InstanceChange
from tracker.analyse.verdicts import SHARED_BASELINE
from tracker.publish.units import ARROW, DASH, MICRO, band, change, count, interval, ms, p_is


def compiles(n: tuple[int, int] | None, arrow: str = ARROW) -> str:
    if n is None:
        return ""
    base, head = n
    if base == head:
        return f"{count(head, 'compile')} a side"
    return f"{base} {arrow} {head} compiles"


def cell_evidence(x: CellChange, micro: str = MICRO, arrow: str = ARROW, level: float = 0.95) -> str:
    """One cell's evidence; "" for a cell not judged on its times (missing, failed on either side)."""
    if x.ratio is None:
        return ""
    if (x.noise or "").startswith(SHARED_BASELINE):
        return f"{SHARED_BASELINE}: one measurement for both sides"
    if x.ci is not None and x.means_ms is not None:
        means = f"{ms(x.means_ms[0], micro)} {arrow} {ms(x.means_ms[1], micro)}"
        parts = [means, f"{change(x.ratio)} ({interval(x.ci, level)})", compiles(x.compiles, arrow)]
        return ", ".join(p for p in parts if p)
    fixed = f"band {band(x.threshold)}" if x.threshold is not None else ""
    p = "" if x.p_value is None else p_is(x.p_value)
    return ", ".join(s for s in (change(x.ratio), fixed, p, compiles(x.compiles, arrow)) if s)


def latency_evidence(i: InstanceChange, level: float = 0.95) -> str:
    """An instance's best latency: its change and, where the noise test judged it, the interval."""
    if i.ratio is None:
        return ""
    if i.ci is not None:
        return f"{change(i.ratio)} ({interval(i.ci, level)})"
    return change(i.ratio) + (f", band {band(i.threshold)}" if i.threshold is not None else "")


# ms, change and interval are the reader's units, kept importable from here
__all__ = ["DASH", "cell_evidence", "change", "compiles", "interval", "latency_evidence", "ms"]
