"""The PR comment: a Comparison rendered as markdown (tracker/publish/templates/comment.md.j2), with the hidden markers
that `comment` finds it by, fitted into GitHub's 65,536-character limit without ever losing the headline."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jinja2

from tracker.analyse.changes import CellChange, Comparison, InstanceChange, ModeFigures
from tracker.analyse.compare import REGRESSION_VERDICTS, same_versions
from tracker.analyse.verdicts import CODE_UNCHANGED, NOISY, SOURCE_UNCHANGED, UNCONFIRMED, UNDECIDED, UNKNOWN
from tracker.publish import units
from tracker.publish.escape import as_ours, code, markdown_env, ours
from tracker.publish.evidence import (
    COLUMNS_NOTE,
    best_ratio,
    cell_evidence,
    compared_ms,
    kernel_noisy_words,
    latency_evidence,
)
from tracker.publish.markdown import MARKER, MAX_BODY_CHARS, fit
from tracker.publish.ruletext import confirm_text, rule_md
from tracker.stats import TOO_NOISY_SPREAD
from workloads.kernels.registry import MODE_PREFIX as KERNEL_PREFIX

TEMPLATES = Path(__file__).resolve().parent / "templates"
# What the wins and geomeans of a comparison are (tracker.analyse.compare.ModeFigures), said under their table
FIGURES_NOTE = ("tied: wins within noise of another mode. Head's figures move from base's only where the comparison "
                "counted a change (a best baseline, a cell): what moved within noise moves none of them")


# Every {{ }} is escaped as markdown (tracker.publish.escape) unless it is the numbers' text, a code span or ours.
_ENV = markdown_env(loader=jinja2.FileSystemLoader(TEMPLATES))
_ENV.filters.update({name: as_ours(f) for name, f in dict(
    ms=units.ms, ratio=units.ratio, p=units.p_value, p_is=units.p_is, pct=units.band, speedup=units.speedup,
    spread=units.spread, us=units.us,
    evidence=lambda x, limit=TOO_NOISY_SPREAD: cell_evidence(x, max_spread=limit).replace("|", "\\|"),
    latency=latency_evidence, kernel_noisy=lambda k, limit: kernel_noisy_words(k.noisy_reason, limit)).items()})
# numbers for the filters above to write, not text
_ENV.filters.update(compared=compared_ms, best_ratio=best_ratio, code=code, short=lambda s: str(s)[:8])


def versions(c: Comparison) -> str:
    """"torch 2.11.0 vs 2.9.1" (head vs base) when the two runs' torch versions differ, else ""."""
    return f"torch {c.head.torch} vs {c.base.torch}" if c.head.torch != c.base.torch else ""


def headline(c: Comparison) -> str:
    """One line: the torch versions when they differ, what changed, and what could not be judged or is not the
    change's (never hidden in a table row)."""
    lead = f"{versions(c)} · " if versions(c) else ""
    return lead + _changes(c)


def _changes(c: Comparison) -> str:
    def cells(n: int) -> str:
        return units.count(n, "cell")

    extras = []
    if c.unjudged:  # moved beyond the band, but one side kept no samples: never hidden behind "No change"
        extras.append(f"{cells(len(c.unjudged))} moved beyond noise bands, unjudged (no samples)")
    if c.noisy:
        extras.append(f"{cells(len(c.noisy))} too noisy to judge")
    if c.unconfirmed:  # moved on fewer compiles than the rule asks: never silent, never counted
        extras.append(f"{len(c.unconfirmed)} unconfirmed (not counted)")
    if c.undecided_best:  # a best latency the budget could not decide is no unchanged best baseline
        extras.append(f"{units.count(len(c.undecided_best), 'best latency', 'best latencies')} undecided")
    if c.undecided:  # neither changed nor the same after the budget: never called "same"
        extras.append(f"{cells(len(c.undecided))} undecided")
    for moved, what in ((c.source_unchanged, "source"), (c.code_unchanged, "compiled code")):
        if moved:
            extras.append(f"{cells(len(moved))} moved with {'its' if len(moved) == 1 else 'their'} {what} unchanged "
                          "(not counted)")
    if not c.changed:
        return " · ".join(["No change found", *extras]) if extras else "No change"
    parts = [f"Best baselines changed: {len(c.best_changes)}", f"significant regressions: {len(c.regressions)}",
             f"improvements: {len(c.improvements)}"]
    if c.kernel_changes:
        parts.append(f"kernel speedups changed: {len(c.kernel_changes)}")
    return " · ".join(parts + extras)


# Cells that moved without a counted verdict, which the headline still names: never hidden by --only-changed.
_NAMED = (NOISY, UNCONFIRMED, UNDECIDED, SOURCE_UNCHANGED, CODE_UNCHANGED, UNKNOWN)


def notes_heading(c: Comparison) -> str:
    """What the comparison's notes are about: other versions, another way of measuring, or (the source note alone)
    only which workloads the change reaches."""
    if not same_versions(c.base, c.head):
        return "Versions differ"
    # compare's source note (analyse.compare._unaffected) says what the change reaches, nothing of the method
    return "Method differs" if any(not n.startswith("source: ") for n in c.notes) else "Note"


def listed_cells(c: Comparison, only_changed: bool = False) -> list[CellChange]:
    """The cells a rendering lists: every one, or with `only_changed` those the headline counts or names (significant
    changes, and cells too noisy to judge, unconfirmed, moved with their source unchanged or unjudged)."""
    return [x for x in c.cells if x.significant or x.verdict in _NAMED] if only_changed else c.cells


def within_noise(c: Comparison) -> list[InstanceChange]:
    """Instances whose winner changed within noise: said, not counted."""
    return [i for i in c.instances if i.mode_changed and not i.best_changed and not i.unconfirmed]


def unconfirmed_winners(c: Comparison) -> list[InstanceChange]:
    return [i for i in c.instances if i.mode_changed and i.unconfirmed]


def _view(c: Comparison, scope: str | None = None, only_changed: bool = False, attribution: str = "") -> dict[str, Any]:
    explained = {(i.preset, i.workload) for i in c.best_changes}
    significant = [x for x in c.cells if x.significant and not x.mode.startswith(KERNEL_PREFIX)]
    significant.sort(key=lambda x: (x.verdict not in REGRESSION_VERDICTS, (x.preset, x.workload) in explained))
    geomeans: dict[str, list[ModeFigures]] = {}
    for f in c.figures:
        geomeans.setdefault(f.preset, []).append(f)
    return {
        "skipped": False, "scope": scope,
        "c": c, "headline": headline(c), "marker": ours(MARKER), "changed": "true" if c.changed else "false",
        "list_all": list_all(c),
        "best": c.best_changes, "cells": significant, "kernels": c.kernel_changes if only_changed else c.kernels,
        "details": listed_cells(c, only_changed), "only_changed": only_changed,
        "geomeans": geomeans, "rule": c.rule, "added": c.added, "removed": c.removed,
        "within_noise": within_noise(c), "unconfirmed_winners": unconfirmed_winners(c),
        "notes_heading": notes_heading(c), "figures_note": ours(FIGURES_NOTE),
        "columns_note": ours(COLUMNS_NOTE),
        "method": sum(x.method for x in c.cells), "attribution": ours(attribution.rstrip("\n")),
        "unconfirmed": c.unconfirmed, "fewer": confirm_text(c.rule), "rule_text": ours(rule_md(c)),
        "undecided": c.undecided, "undecided_best": c.undecided_best,
    }


def list_all(c: Comparison) -> str:
    """The command that lists every row a cut comment leaves out (its machine quoted for a shell)."""
    return (f"compile-baselines compare --base {c.base.commit[:8]} --head {c.head.commit[:8]} "
            f"--machine {shlex.quote(c.head.machine)}")


def _render(view: dict[str, Any], limits: dict[str, int | None]) -> str:
    return _ENV.get_template("comment.md.j2").render(**view, limits=limits)


def render_comment(c: Comparison, max_chars: int = MAX_BODY_CHARS, scope: str | None = None,
                   only_changed: bool = False, attribution: str = "") -> str:
    """The PR comment (markdown with the hidden markers), fitted into `max_chars` by cutting rows: every cell's
    details first, then the significant cells, the kernels and the changed instances; never the headline.
    `scope` says what was measured (the PR flow: which workloads, and why). `only_changed` (compare
    --only-changed): the details list only the cells that moved (listed_cells), and only the kernels whose speedup
    changed are shown. `attribution`: a
    markdown section (compare --attribute: which change moved each one) placed after the best-baseline changes and
    never cut."""
    view = _view(c, scope if scope is not None else (c.scope or None), only_changed, attribution)
    limits: dict[str, int | None] = {"details": None, "cells": None, "kernels": None, "best": None}
    text = _render(view, limits)
    for section in limits:
        if len(text) <= max_chars:
            break
        lo, hi = 0, len(view[section])  # the most rows of this section that still fit
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if len(_render(view, {**limits, section: mid})) <= max_chars:
                lo = mid
            else:
                hi = mid - 1
        limits[section] = lo
        text = _render(view, limits)
    # Only the fixed parts are left: cut the end, the headline is at the top.
    return fit(text, "\n\n… (cut at GitHub's comment size limit)\n", max_chars)


def render_skipped(base: str, head: str, files: list[str], reasons: Sequence[str] = ()) -> str:
    """The PR comment when no change reaches a measurement: nothing was measured. `reasons`: why the modules of
    workloads that changed reach none (tracker.analyse.attribution.Selection.reasons)."""
    return _ENV.get_template("comment.md.j2").render(skipped=True, marker=ours(MARKER), changed="false", base=base,
                                                     head=head, files=files, reasons=reasons)
