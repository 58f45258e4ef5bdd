"""`compile-baselines compare --format table`: a comparison for the terminal, in the manner of `asv compare`: the
headline, then one row per cell (before, after and their ratio, of what its verdict compared; the verdict; the
evidence), then what the PR comment says beside its tables: the best baselines that changed, the winners that
changed within noise or unconfirmed, every kernel's speedup over the best baseline, wins and geomeans per mode, the
instances only one run has; then what the verdicts rest on.

The first column marks what changed: `+` slower or now failing, `-` faster or now ok, `~` too noisy to judge (the
row says why), `?` moved on fewer compiles than the rule asks (unconfirmed, not counted) or undecided. The counts
line counts each apart; the footer says the rule that applied (tracker.publish.ruletext).
"""

from __future__ import annotations

import textwrap
from dataclasses import replace
from functools import partial

from tracker.analyse.changes import CellChange, Comparison, InstanceChange
from tracker.analyse.compare import IMPROVEMENT_VERDICTS, NOISY, REGRESSION_VERDICTS, UNCONFIRMED, UNDECIDED
from tracker.publish import units
from tracker.publish.escape import shown
from tracker.publish.evidence import (
    COLUMNS_NOTE,
    best_ratio,
    cell_evidence,
    compared_ms,
    kernel_noisy_words,
    latency_evidence,
)
from tracker.publish.prcomment import FIGURES_NOTE, headline, listed_cells, unconfirmed_winners, within_noise
from tracker.publish.ruletext import rule_text
from tracker.publish.units import PLAIN_ARROW, PLAIN_DASH, PLAIN_MICRO, PLAIN_TIMES, ms, ratio, speedup

# plain ASCII for any terminal
_ms = partial(ms, micro=PLAIN_MICRO, dash=PLAIN_DASH)
_ratio = partial(ratio, times=PLAIN_TIMES, dash=PLAIN_DASH)
_speedup = partial(speedup, times=PLAIN_TIMES, dash=PLAIN_DASH)


def _mark(verdict: str) -> str:
    if verdict in REGRESSION_VERDICTS:
        return "+"
    if verdict in IMPROVEMENT_VERDICTS:
        return "-"
    return {NOISY: "~", UNCONFIRMED: "?", UNDECIDED: "?"}.get(verdict, " ")


def _columns(rows: list[tuple[str, ...]], right: set[int]) -> list[str]:
    rows = [tuple(shown(v) for v in r) for r in rows]  # a candidate's name is the results': one line, shown
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(v.rjust(w) if i in right else v.ljust(w) for i, (v, w) in enumerate(zip(r, widths, strict=True)))
            .rstrip() for r in rows]


def _cell_rows(cells: list[CellChange], max_spread: float) -> list[str]:
    """A row per cell: before, after and ratio of what its verdict compared (evidence.compared_ms), its verdict,
    the cell, its evidence."""
    rows = [("", "before", "after", "ratio", "verdict", "preset", "workload", "mode", "evidence")]
    rows += [(_mark(x.verdict), *(_ms(v) for v in compared_ms(x)), _ratio(x.ratio),
              x.verdict + (f" ({x.compiled})" if x.compiled and x.significant else "")
              + (" [method]" if x.method else ""), x.preset, x.workload,
              x.mode, cell_evidence(x, micro=PLAIN_MICRO, arrow=PLAIN_ARROW, max_spread=max_spread)) for x in cells]
    return _columns(rows, right={1, 2, 3})


def _winners(title: str, instances: list[InstanceChange]) -> list[str]:
    if not instances:
        return []
    return ["", f"{title}: " + ", ".join(f"{i.workload} {i.preset} ({i.base_best} -> {i.head_best})"
                                         for i in instances)]


def _instance_lines(c: Comparison) -> list[str]:
    """The best baselines that changed, and the winners that changed without counting, as the comment says them."""
    lines = []
    if c.best_changes:
        lines += ["", f"best baseline changed ({len(c.best_changes)}):"]
        lines += [f"  {i.preset} {i.workload}: {i.base_best or 'none'} -> {i.head_best or 'none'}, "
                  f"{_ms(i.base_ms)} -> {_ms(i.head_ms)} ({_ratio(best_ratio(i))}): {i.reason}"
                  + (f"; latency {latency_evidence(i)}" if i.ratio is not None else "") for i in c.best_changes]
    lines += _winners("winner changed within noise (not counted)", within_noise(c))
    lines += _winners("winner changed, unconfirmed (not counted)", unconfirmed_winners(c))
    return lines


def _kernel_lines(c: Comparison, only_changed: bool) -> list[str]:
    kernels = c.kernel_changes if only_changed else c.kernels
    if not kernels:
        return []
    rows = [("preset", "workload", "kernel", "before", "after", "change", "verdict")]
    rows += [(k.preset, k.workload, k.kernel, _speedup(k.base_speedup), _speedup(k.head_speedup), _ratio(k.change),
              k.verdict + (f" ({why})" if (why := kernel_noisy_words(k.noisy_reason, c.rule.max_spread)) else ""))
             for k in kernels]
    return ["", "kernels under test: speedup over the best baseline", *_columns(rows, right={3, 4, 5})]


def _figure_lines(c: Comparison) -> list[str]:
    if not c.figures:
        return []
    rows = [("preset", "mode", "wins", "of them tied", "geomean vs eager")]
    rows += [(f.preset, f.mode, f"{f.base_wins} -> {f.head_wins}", f"{f.base_tied} -> {f.head_tied}",
              PLAIN_DASH if f.base_geomean is None and f.head_geomean is None else
              f"{_speedup(f.base_geomean)} -> {_speedup(f.head_geomean)}") for f in c.figures]
    note = textwrap.wrap(FIGURES_NOTE + ".", 100, break_on_hyphens=False)
    return ["", "wins and geomean speedup vs eager, per mode (instances both runs measured)",
            *_columns(rows, right=set()), *note]


def _only_in(c: Comparison) -> list[str]:
    lines = [f"{title}: " + ", ".join(f"{w} {p}" for p, w in keys) for title, keys in
             (("instances only in head", c.added), ("instances only in base", c.removed)) if keys]
    return ["", *lines] if lines else []


def render_table(c: Comparison, only_changed: bool = False) -> str:
    """The comparison as plain text for a terminal; `only_changed`: only the cells that moved (the headline's) and
    the kernels whose speedup changed."""
    # the results' names each shown on one line, cut (escape.shown), whatever they hold
    b, h = (replace(r, **{k: shown(getattr(r, k)) for k in ("machine", "gpu", "torch", "triton")})
            for r in (c.base, c.head))
    torch = f"torch {b.torch} -> {h.torch}" if b.torch != h.torch else f"torch {h.torch}"
    triton = f"triton {b.triton} -> {h.triton}" if b.triton != h.triton else f"triton {h.triton}"
    base = b.commit[:8] + (f" on {b.machine}" if b.machine != h.machine else "")
    lines = [f"compare {base} -> {h.commit[:8]} on {h.machine} · {h.gpu} · {torch} · {triton}", shown(headline(c)), ""]
    lines += [f"note: {shown(n)}" for n in c.notes] + ([f"note: {shown(c.stopped)}"] if c.stopped else [])
    cells = listed_cells(c, only_changed)
    if cells:
        lines += [*_cell_rows(cells, c.rule.max_spread), COLUMNS_NOTE]
    else:
        lines.append("no cell changed beyond noise" if only_changed else "no cells")
    lines += _instance_lines(c) + _kernel_lines(c, only_changed) + _figure_lines(c) + _only_in(c)
    same = (len(c.cells) - len(c.regressions) - len(c.improvements) - len(c.noisy) - len(c.unconfirmed)
            - len(c.undecided))
    unconfirmed = f"{len(c.unconfirmed)} unconfirmed, not counted (?), " if c.unconfirmed else ""
    unconfirmed += f"{len(c.undecided)} undecided (?), " if c.undecided else ""
    lines += ["", f"{units.count(len(c.instances), 'instance')} and {units.count(len(c.cells), 'cell')}: "
                  f"{len(c.regressions)} slower or now failing (+), {len(c.improvements)} faster or now ok (-), "
                  f"{len(c.noisy)} too noisy to judge (~), "
                  f"{unconfirmed}{same} otherwise"
              + (f"; {len(c.cells) - len(cells)} not shown (--only-changed)" if only_changed else "")]
    lines.append(rule_text(c))
    return "\n".join(lines) + "\n"


__all__ = ["render_table"]
