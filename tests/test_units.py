"""tracker.publish.units: every number a reader sees, in one unit per kind, formatted in one place. The numbers
here are constructed examples, not measurements."""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path

from tracker.publish import units
from tracker.publish.units import (
    DASH,
    FORMATS,
    PLAIN_DASH,
    PLAIN_MICRO,
    TIMES,
    band,
    calls,
    change,
    factor,
    interval,
    margin,
    ms,
    ms_fixed,
    ms_plain,
    p_is,
    p_value,
    percent,
    ratio,
    speedup,
    speedup_precise,
    spread,
    us,
)

ROOT = Path(__file__).resolve().parent.parent
UNITS_FILE = ROOT / "tracker" / "publish" / "units.py"
PUBLISH = ROOT / "tracker" / "publish"
CONSTANTS = {name for name in units.__all__ if name.isupper()}


def test_a_latency_switches_to_microseconds_below_a_millisecond_and_keeps_its_digits() -> None:
    assert [ms(x) for x in (0.0925, 1.5, 12.0, 3.5, None)] == ["92.5 µs", "1.50 ms", "12.0 ms", "3.50 ms", DASH]
    assert ms(0.1, PLAIN_MICRO, PLAIN_DASH) == "100 us" and ms(None, dash=PLAIN_DASH) == "-"  # no trailing point
    assert [ms(x, PLAIN_MICRO, digits=4) for x in (0.279, 93.57)] == ["279.0 us", "93.57 ms"]
    # what rounds to 1000 µs reads in ms, and a latency past the digits has no exponent
    assert [ms(0.9996), ms(0.99996, digits=4), ms(1234.4), ms(12345.6, digits=4)] == [
        "1.00 ms", "1.000 ms", "1234 ms", "12346 ms"]
    assert [ms_fixed(x) for x in (0.0421, 0.25, 12.34)] == ["42.1 µs", "0.250 ms", "12.3 ms"]
    assert ms_plain(0.0123456) == "0.01235 ms"
    assert [us(4.567), us(4.567, decimals=2), us(20.0, PLAIN_MICRO, decimals=None), us(None)] == [
        "4.6 µs", "4.57 µs", "20 us", DASH]


def test_ratios_and_speedups() -> None:
    assert [ratio(1.0712), ratio(None), ratio(0.5, times="x", dash="-")] == [f"1.07{TIMES}", DASH, "0.50x"]
    assert [speedup(1.371), speedup(0.0421), speedup(None)] == [f"1.37{TIMES}", f"0.042{TIMES}", DASH]
    assert [factor(1.153), factor(12.34)] == ["1.15x", "12.3x"]
    assert [speedup_precise(1.68749), speedup_precise(None), speedup_precise(None, "-")] == ["1.687", DASH, "-"]


def test_percentages_say_which_kind_they_are() -> None:
    assert [change(x) for x in (1.066, 0.5, 3.0, 1.0)] == ["+6.6%", "-50.0%", "+200%", "+0.0%"]
    assert change(math.inf) == "+∞%" and change(math.nan) == DASH  # never "inf" or "nan"
    assert interval((1.049, 1.083)) == "95% CI +4.9..+8.3%"
    assert [band(0.1), band(None)] == ["±10%", DASH]
    assert [spread(0.234), spread(None)] == ["23%", DASH]
    assert [percent(x) for x in (42.4, 4.24, 0.424, 0.004)] == ["42%", "4.2%", "0.42%", "<0.01%"]
    assert margin(7.5812) == "7.58%"


def test_p_values_and_counts() -> None:
    assert [p_value(x) for x in (1e-9, 0.0312, None)] == ["<0.001", "0.031", DASH]
    assert [p_is(1e-9), p_is(0.0312)] == ["p < 0.001", "p = 0.031"]
    assert [calls(x) for x in (None, 12, 12345, 123456, 2_500_000, 7e9)] == [
        "never", "12", "12.3k", "123k", "2.5M", "7G"]


# --- each formatter and constant once ---------------------------------------------------------------------

def _sources(top: Path, suffix: str = "*.py") -> list[Path]:
    return [p for p in sorted(top.rglob(suffix)) if p != UNITS_FILE]


def test_no_renderer_defines_a_formatter_the_units_module_has() -> None:
    """(The analysis computes a ratio or a p-value under those names; a renderer formats them, here only.)"""
    names = set(units.__all__)
    again = [f"{p.relative_to(ROOT)}:{node.lineno}: def {node.name}" for p in _sources(PUBLISH)
             for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
             if isinstance(node, ast.FunctionDef) and node.name in names]
    assert again == []


def _spelled_again(node: ast.AST) -> bool:
    """A units constant assigned under its name, or its value (the formats, the dash, the times sign) spelled out."""
    if isinstance(node, ast.Assign):
        named = any(isinstance(t, ast.Name) and t.id in CONSTANTS for t in node.targets)
        return named or (isinstance(node.value, ast.Constant) and node.value.value in (DASH, TIMES))
    return isinstance(node, ast.Tuple) and _literal(node) and ast.literal_eval(node) == FORMATS


def test_no_module_spells_the_dash_the_times_sign_or_the_formats_again() -> None:
    again = [f"{p.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}" for p in _sources(ROOT / "tracker")
             for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))) if _spelled_again(node)]
    assert again == []


def _literal(node: ast.AST) -> bool:
    try:
        ast.literal_eval(node)
    except ValueError:
        return False
    return True


# A number formatted right before a latency unit or a ratio's sign: the unit's formatting, done outside units.py.
_UNIT_AFTER = re.compile("^\\s?(ms|µs|us)\\b|^\u00d7")


def _unit_formatted_inline(path: Path, root: Path = ROOT) -> list[str]:
    hits = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.JoinedStr):
            continue
        for value, after in zip(node.values, node.values[1:], strict=False):
            if (isinstance(value, ast.FormattedValue) and value.format_spec is not None
                    and isinstance(after, ast.Constant) and _UNIT_AFTER.match(str(after.value))):
                hits.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node)}")
    return hits


def test_the_renderers_format_latencies_and_ratios_only_through_units() -> None:
    assert [hit for p in _sources(PUBLISH) for hit in _unit_formatted_inline(p)] == []
    template = re.compile("\"%[^\"]*(ms|µs|us|\u00d7)\"|format\\([^)]*\\)\\s*}}\\s*(&times;|\u00d7|ms\\b|µs|us\\b)")
    assert [f"{p.name}:{n}" for p in _sources(PUBLISH, "*.j2")
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if template.search(line)] == []


def test_the_checks_catch_what_they_look_for(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text('a = f"{x:.2f} ms"\nb = f"{x:.2f}\u00d7"\nc = f"{ms(x)} ms"\nd = f"{n:d} runs"\n',
                      encoding="utf-8")
    assert [h.split(": ", 1)[0] for h in _unit_formatted_inline(sample, tmp_path)] == ["sample.py:1", "sample.py:2"]
