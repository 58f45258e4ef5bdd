"""The reader's units: how every rendered text shows a latency, a ratio, a speedup, a percentage, a p-value.

One function per unit, so the terminal table, the summary, the PR comment and the report say the same number the
same way. The defaults are the markdown and HTML forms (µs, the multiplication sign, an en dash for a missing
value); a terminal gets the plain ASCII forms (PLAIN_*). Imports nothing heavy: the CLI names FORMATS without
loading pandas.
"""

from __future__ import annotations

import math

DASH, TIMES, MICRO, ARROW = "\u2013", "\u00d7", "µs", "→"  # a missing value, a ratio, microseconds, base to head
PLAIN_DASH, PLAIN_TIMES, PLAIN_MICRO, PLAIN_ARROW = "-", "x", "us", "->"  # the same in plain ASCII, for any terminal

FORMATS = ("table", "md", "json")  # what `summary` and `compare` print: for a terminal, markdown, a stable JSON


# --- latency ---------------------------------------------------------------------------------------------

def ms(x: float | None, micro: str = MICRO, dash: str = DASH, digits: int = 3) -> str:
    """A latency in ms as it is shown: µs below a millisecond (what rounds to 1000 µs reads 1.00 ms), `digits`
    significant digits."""
    if x is None:
        return dash
    if float(f"{x * 1000:.{digits}g}") < 1000:
        return f"{_significant(x * 1000, digits)} {micro}"
    return f"{_significant(x, digits)} ms"


def _significant(x: float, digits: int) -> str:
    """`digits` significant digits, trailing zeros kept (3.50, not 3.5), no trailing point (100, not 100.), and no
    exponent (1234, not 1.23e+03)."""
    return f"{x:#.{digits}g}".rstrip(".") if abs(x) < 10**digits - 0.5 else f"{x:.0f}"


def ms_fixed(x: float) -> str:
    """A latency in ms with fixed decimals (the report's table): µs below 0.1 ms, then 3 decimals, 1 from 10 ms."""
    if x < 0.1:
        return f"{x * 1e3:.1f} µs"
    return f"{x:.3f} ms" if x < 10 else f"{x:.1f} ms"


def ms_plain(x: float) -> str:
    """A latency in ms, 4 significant digits, whatever its size (hover texts, a kernel without a baseline)."""
    return f"{x:.4g} ms"


def us(x: float | None, micro: str = MICRO, decimals: int | None = 1, dash: str = DASH) -> str:
    """A time already in µs: a launch floor to `decimals`; None: a rule's setting, as it was set ("20 µs")."""
    if x is None:
        return dash
    return f"{x:g} {micro}" if decimals is None else f"{x:.{decimals}f} {micro}"


# --- ratios and speedups ---------------------------------------------------------------------------------

def ratio(x: float | None, times: str = TIMES, dash: str = DASH) -> str:
    """head / base, 2 decimals: 1.0712 -> "1.07" and the sign."""
    return dash if x is None else f"{x:.2f}{times}"


def speedup(x: float | None, times: str = TIMES, dash: str = DASH) -> str:
    """A speedup, 2 decimals, or 2 significant digits below 0.1 (a kernel far behind: 0.042)."""
    if x is None:
        return dash
    return f"{x:.2f}{times}" if x >= 0.1 else f"{x:.2g}{times}"


def factor(x: float) -> str:
    """A speedup in words' company ("1.15x faster than"), 3 significant digits."""
    return f"{x:.3g}x"


def speedup_precise(x: float | None, dash: str = DASH) -> str:
    """A speedup to 3 decimals, without its sign (the caller adds it): a geomean, a cell's against eager."""
    return dash if x is None else f"{x:.3f}"


# --- percentages -----------------------------------------------------------------------------------------

def change(r: float) -> str:
    """A ratio as a signed percentage: 1.066 -> "+6.6%"."""
    if not math.isfinite(r):
        return "+∞%" if r > 0 else DASH
    pct = (r - 1) * 100
    return f"{pct:+.1f}%" if abs(pct) < 100 else f"{pct:+.0f}%"


def interval(ci: tuple[float, float], level: float = 0.95) -> str:
    """A ratio's confidence interval as changes: "95% CI +4.9..+8.3%"."""
    lo, hi = (change(x).removesuffix("%") for x in ci)
    return f"{level:.0%} CI {lo}..{hi}%"


def band(x: float | None, dash: str = DASH) -> str:
    """A relative band either side: 0.1 -> "±10%"."""
    return dash if x is None else f"±{x:.0%}"


def spread(x: float | None, dash: str = DASH) -> str:
    """A relative spread (IQR / median): 0.23 -> "23%"."""
    return dash if x is None else f"{x:.0%}"


def percent(pct: float) -> str:
    """A share given in percent (of a GPU's peak), to the precision it deserves: "42%", "4.2%", "0.42%"."""
    if pct < 0.01:
        return "<0.01%"
    return f"{pct:.0f}%" if pct >= 10 else f"{pct:.1f}%" if pct >= 1 else f"{pct:.2g}%"


def margin(pct: float) -> str:
    """A head-to-head margin given in percent: "7.58%"."""
    return f"{pct:.2f}%"


# --- significance and counts -----------------------------------------------------------------------------

def p_value(x: float | None, dash: str = DASH) -> str:
    """A p-value for a table column: "<0.001", "0.012"."""
    return dash if x is None else "<0.001" if x < 0.001 else f"{x:.3f}"


def p_is(x: float | None) -> str:
    """A p-value in a sentence: "p < 0.001", "p = 0.012"."""
    return "p < 0.001" if x is not None and x < 0.001 else f"p = {p_value(x)}"


def count(n: int, noun: str, plural: str | None = None) -> str:
    """A count with its noun: "1 cell", "3 cells", "0 instances"; `plural` where adding an s is wrong."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def calls(n: int | None) -> str:
    """A number of calls, 3 significant digits with k, M, G: "12.3k"; None: "never"."""
    if n is None:
        return "never"
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if n >= div:
            x = n / div
            return f"{x:.0f}{unit}" if x >= 100 else f"{x:.3g}{unit}"
    return str(n)


__all__ = ["ARROW", "DASH", "FORMATS", "MICRO", "PLAIN_ARROW", "PLAIN_DASH", "PLAIN_MICRO", "PLAIN_TIMES", "TIMES",
           "band", "calls", "change", "count", "factor", "interval", "margin", "ms", "ms_fixed", "ms_plain",
           "p_is", "p_value", "percent", "ratio", "speedup", "speedup_precise", "spread", "us"]
