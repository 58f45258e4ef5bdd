"""A verdict's evidence in the reader's unit: what was compared, by how much it moved, how sure, on how much.

A row's before, after and ratio describe one quantity, the one its verdict compared (`compared_ms`): the geometric
means of the two sides' compiles where the noise test judged the cell, its best compiles (the recorded latency)
where the fixed bands did. The evidence then says "+6.6% (95% CI +4.9..+8.3%), mean of 3 compiles a side, best
compile 3.46 ms → 3.73 ms": the change, its confidence interval, the compiles each side had and, where those are
several, the best compiles the summary's baselines are. A cell judged by the fixed bands says its band and p-value
instead; a cell too noisy to judge says why (`noisy_words`); a cell of a shared baseline, that one measurement
served both sides. An instance's best latency is its best compile on each side, old winner then new (`best_ratio`);
its evidence names what was judged (`latency_evidence`). Each number in
the reader's unit (tracker.publish.units), so the comment, the terminal table and the report say the same.
"""

from __future__ import annotations

from tracker.analyse.changes import CellChange, InstanceChange
from tracker.analyse.verdicts import DISTURBED, HALF_BAND, NOISY, SHARED_BASELINE
from tracker.publish.units import ARROW, DASH, MICRO, band, change, count, interval, ms, p_is, spread
from tracker.stats import TOO_NOISY_SPREAD

# What a cell row's before, after and ratio are (compared_ms), said under the rows
COLUMNS_NOTE = ("before, after, ratio: the compiles' geometric means where a cell was judged against its noise, its "
                "best compiles where the fixed bands judged it")


def compiles(n: tuple[int, int] | None, arrow: str = ARROW, of: str = "") -> str:
    """The compiles each side had; `of` ("mean", "best") says what of them was compared, where some side had
    several."""
    if n is None:
        return ""
    base, head = n
    several = f"{of} of " if of and max(n) > 1 else ""
    if base == head:
        return f"{several}{count(head, 'compile')} a side"
    return f"{several.replace('mean of', 'means of')}{base} {arrow} {head} compiles"


def compared_ms(x: CellChange) -> tuple[float | None, float | None]:
    """What a cell's verdict compared, base and head: its compiles' geometric means (the noise test), else its best
    compiles; its ratio is head / base of these."""
    return x.means_ms if x.means_ms is not None else (x.base_ms, x.head_ms)


def cell_evidence(x: CellChange, micro: str = MICRO, arrow: str = ARROW, level: float = 0.95,
                  max_spread: float = TOO_NOISY_SPREAD) -> str:
    """One cell's evidence, and why it is too noisy to judge where it is; "" for a cell not judged on its times
    (missing, failed on either side)."""
    if x.ratio is None:
        return ""
    if (x.noise or "").startswith(SHARED_BASELINE):
        return f"{SHARED_BASELINE}: one measurement for both sides"
    if x.ci is not None and x.means_ms is not None:
        best = (f"best compile {ms(x.base_ms, micro)} {arrow} {ms(x.head_ms, micro)}"
                if x.compiles and max(x.compiles) > 1 and x.base_ms is not None and x.head_ms is not None else "")
        parts = [f"{change(x.ratio)} ({interval(x.ci, level)})", compiles(x.compiles, arrow, "mean"), best]
    else:
        fixed = f"band {band(x.threshold)}" if x.threshold is not None else ""
        p = "" if x.p_value is None else p_is(x.p_value)
        parts = [change(x.ratio), fixed, p, compiles(x.compiles, arrow, "best")]
    text = ", ".join(p for p in parts if p)
    return text + (f"; {noisy_words(x, max_spread)}" if x.verdict == NOISY else "")


def noisy_words(x: CellChange, max_spread: float = TOO_NOISY_SPREAD) -> str:
    """Why a cell is too noisy to judge (its `noisy_reason`), with its numbers."""
    moved = change(x.ratio) if x.ratio is not None else DASH
    if x.noisy_reason == DISTURBED:
        return f"too noisy: samples spread {spread(x.spread)} of the median, over {spread(max_spread)} (disturbed)"
    if x.noisy_reason == HALF_BAND:
        return f"too noisy: moved {moved}, beyond half its {band(x.threshold)} band on samples that differ"
    return "too noisy to judge"


def kernel_noisy_words(reason: str | None, max_spread: float = TOO_NOISY_SPREAD) -> str:
    """Why a kernel's speedup change is too noisy to judge, from its reason's code."""
    if reason == DISTURBED:
        return f"a cell's samples spread over {spread(max_spread)}: disturbed"
    if reason == HALF_BAND:
        return "the kernel or the best baseline moved beyond half its band on samples that differ"
    return ""


def best_ratio(i: InstanceChange) -> float | None:
    """An instance's best latency, head over base: the new winner's best compile over the old winner's."""
    return i.head_ms / i.base_ms if i.base_ms and i.head_ms else None


def latency_evidence(i: InstanceChange, level: float = 0.95) -> str:
    """An instance's best latency as it was judged: its change and, where the noise test judged it, the interval;
    where one mode's own cell carried it (a winner of both sides, or tied with the other side's), that mode's
    compiles, named."""
    if i.ratio is None:
        return ""
    judged = change(i.ratio) + (f" ({interval(i.ci, level)})" if i.ci is not None else
                                f", band {band(i.threshold)}" if i.threshold is not None else "")
    if i.judged_on is None:
        return judged
    what = "compiles' means" if i.ci is not None else "best compile"
    return f"judged on {i.judged_on}'s {what}: {judged}"


# ms, change and interval are the reader's units, kept importable from here
__all__ = ["COLUMNS_NOTE", "DASH", "best_ratio", "cell_evidence", "change", "compared_ms", "compiles", "interval",
           "kernel_noisy_words", "latency_evidence", "ms", "noisy_words"]
