"""`compile-baselines compare --format table`: a comparison for the terminal, in the manner of `asv compare`: the
headline, then one row per cell (before, after, ratio, verdict), then the best baselines and kernel speedups that
changed, then what the verdicts rest on.

The first column marks what changed: `+` slower or now failing, `-` faster or now ok, `~` too noisy to judge, `?`
moved on fewer compiles than the rule asks (unconfirmed, not counted). The footer says the rule that applied
(tracker.publish.ruletext).
"""

from __future__ import annotations

from functools import partial

from tracker.analyse.compare import (
    IMPROVEMENT_VERDICTS,
    NOISY,
    REGRESSION_VERDICTS,
    SAME,
    UNCONFIRMED,
    CellChange,
    Comparison,
)
from tracker.publish.evidence import cell_evidence
from tracker.publish.prcomment import headline
from tracker.publish.ruletext import rule_text
from tracker.publish.units import PLAIN_ARROW, PLAIN_DASH, PLAIN_MICRO, PLAIN_TIMES, ms, ratio

# plain ASCII for any terminal
_ms = partial(ms, micro=PLAIN_MICRO, dash=PLAIN_DASH)
_ratio = partial(ratio, times=PLAIN_TIMES, dash=PLAIN_DASH)


def _mark(verdict: str) -> str:
    if verdict in REGRESSION_VERDICTS:
        return "+"
    if verdict in IMPROVEMENT_VERDICTS:
        return "-"
    return {NOISY: "~", UNCONFIRMED: "?"}.get(verdict, " ")


def _columns(rows: list[tuple[str, ...]], right: set[int]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(v.rjust(w) if i in right else v.ljust(w) for i, (v, w) in enumerate(zip(r, widths, strict=True)))
            .rstrip() for r in rows]


def _cell_rows(cells: list[CellChange]) -> list[str]:
    rows = [("", "before", "after", "ratio", "verdict", "preset", "workload", "mode", "evidence")]
    rows += [(_mark(x.verdict), _ms(x.base_ms), _ms(x.head_ms), _ratio(x.ratio),
              x.verdict + (f" ({x.compiled})" if x.compiled and x.significant else "")
              + (" [method]" if x.method else ""), x.preset, x.workload,
              x.mode, cell_evidence(x, micro=PLAIN_MICRO, arrow=PLAIN_ARROW)) for x in cells]
    return _columns(rows, right={1, 2, 3})


def render_table(c: Comparison, only_changed: bool = False) -> str:
    """The comparison as plain text for a terminal; `only_changed`: only the cells whose verdict is a change."""
    torch = f"torch {c.base.torch} -> {c.head.torch}" if c.base.torch != c.head.torch else f"torch {c.head.torch}"
    triton = (f"triton {c.base.triton} -> {c.head.triton}" if c.base.triton != c.head.triton else
              f"triton {c.head.triton}")
    base = c.base.commit[:8] + (f" on {c.base.machine}" if c.base.machine != c.head.machine else "")
    lines = [f"compare {base} -> {c.head.commit[:8]} on {c.head.machine} · {c.head.gpu} · {torch} · {triton}",
             headline(c), ""]
    lines += [f"note: {n}" for n in c.notes]
    cells = [x for x in c.cells if x.significant] if only_changed else c.cells
    if cells:
        lines += _cell_rows(cells)
    else:
        lines.append("no cell changed beyond noise" if only_changed else "no cells")
    if c.best_changes:
        lines += ["", f"best baseline changed ({len(c.best_changes)}):"]
        lines += [f"  {i.preset} {i.workload}: {i.base_best or 'none'} -> {i.head_best or 'none'}: {i.reason}"
                  for i in c.best_changes]
    kernels = c.kernel_changes if only_changed else [k for k in c.kernels if k.verdict != SAME]
    if kernels:
        lines += ["", "kernel speedup over the best baseline:"]
        lines += [f"  {k.preset} {k.workload} {k.kernel}: {_ratio(k.base_speedup)} -> {_ratio(k.head_speedup)} "
                  f"{k.verdict}" for k in kernels]
    same = len(c.cells) - len(c.regressions) - len(c.improvements) - len(c.noisy) - len(c.unconfirmed)
    unconfirmed = f"{len(c.unconfirmed)} unconfirmed, not counted (?), " if c.unconfirmed else ""
    lines += ["", f"{len(c.cells)} cells: {len(c.regressions)} slower or now failing (+), {len(c.improvements)} "
                  f"faster or now ok (-), {len(c.noisy)} too noisy to judge (~), {unconfirmed}{same} otherwise"
              + (f"; {len(c.cells) - len(cells)} not shown (--only-changed)" if only_changed else "")]
    lines.append(rule_text(c))
    return "\n".join(lines) + "\n"


__all__ = ["render_table"]
