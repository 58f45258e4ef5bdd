"""`compile-baselines compare`: a comparison (tracker.analyse.compare) as a terminal table
(tracker.publish.comparetable), as markdown, the PR comment's body (tracker.publish.prcomment), or as JSON in a stable
shape (`comparison_json`)."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from tracker.analyse.changes import Comparison
from tracker.analyse.compare import EXIT_FAIL_ON, ChangeRule, compare_runs, compare_versions
from tracker.analyse.judge import NOISE_TEST
from tracker.analyse.pairs import default_pair
from tracker.analyse.verdicts import NOISY
from tracker.analyse.versionattribution import Attribution, attribute
from tracker.errors import UsageError
from tracker.publish import attributiontext
from tracker.publish.comparetable import render_table
from tracker.publish.escape import shown
from tracker.publish.evidence import kernel_noisy_words, noisy_words
from tracker.publish.prcomment import headline, listed_cells, render_comment
from tracker.publish.units import FORMATS
from tracker.store import formats
from tracker.store.asvjson import RunFile


def _round(x: Any) -> Any:
    if isinstance(x, float):
        return None if math.isnan(x) or math.isinf(x) else float(f"{x:.6g}")
    if isinstance(x, dict):
        return {k: _round(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_round(v) for v in x]
    return x


def comparison_json(c: Comparison, only_changed: bool = False) -> dict[str, Any]:
    """The stable JSON shape of a comparison (keys fixed; floats to 6 significant digits; null for none), its version
    first ("format": tracker.store.formats.COMPARISON, which reads a stored one back, migrated). The rule has a
    "factor" only when the comparison was given one; "test" says how cells were judged (tracker.analyse.changetest):
    "alpha", "floor", "prior_df", "run_floor", "resolve" and "ci_level" are the noise test's, "p_value" to
    "replicated_autotuned_small_change" the fixed bands' (cells of unknown noise), "same_within", "same_pairs" and
    "max_compiles" the paired test's (runs measured in pairs: the PR flow), "launch_jitter" the share of the launch
    floor every change must exceed in time. A cell judged by the noise or the paired test has its "ci", "resolution",
    "means_ms" and "noise" (null otherwise; "noise" is "fixed bands" for the bands); an undecided cell's "more" says
    about how many more compiles a side would decide it. A cell's "ratio" is head / base of its "means_ms" where it
    has them, else of its "base_ms" and "head_ms" (the best compiles). A cell or kernel too noisy to judge says why:
    "noisy_reason" ("disturbed", "half band") and "reason" in words (null otherwise). An instance's "base_ms" and
    "head_ms" are its winners' best compiles, its "ratio" the change its best latency was judged on ("judged_on": the
    mode whose own cell carried it; null: best against best). The "figures" are wins (and "tied": of them within
    noise) and geomeans vs eager per mode, head's moved from base's only by the changes the comparison counted.
    "scope": what was measured, where a paired record says; "stopped": why its rounds stopped with cells left to
    decide ("": they did not). `only_changed`: the instances, cells and kernels lists
    keep only what changed, and the instances and cells the headline names (best latencies undecided; cells too
    noisy, unconfirmed, undecided, source unchanged); the summary still counts the whole comparison."""
    rule = asdict(c.rule)
    factor = {} if c.rule.factor is None else {"factor": c.rule.factor}
    instances, cells, kernels = c.instances, c.cells, c.kernels
    if only_changed:
        instances, cells, kernels = c.best_changes + c.undecided_best, listed_cells(c, only_changed), c.kernel_changes
    return _round(formats.COMPARISON.stamp({
        "base": asdict(c.base), "head": asdict(c.head),
        "summary": {"changed": c.changed, "best_changed": len(c.best_changes), "regressions": len(c.regressions),
                    "improvements": len(c.improvements), "noisy": len(c.noisy),
                    "kernel_changes": len(c.kernel_changes), "cells": len(c.cells), "instances": len(c.instances),
                    "unjudged": len(c.unjudged), "method": sum(x.method for x in c.cells),
                    "unconfirmed": len(c.unconfirmed), "undecided": len(c.undecided),
                    "undecided_best": len(c.undecided_best)},
        "rule": {k: rule[k] for k in ("test", "alpha", "floor", "prior_df", "run_floor", "resolve", "ci_level",
                                      "p_value",
                                      "min_change", "small_change", "autotuned_change", "autotuned_modes",
                                      "replicated_change", "replicated_autotuned_small_change", "launch_jitter",
                                      "max_spread", "confirm", "same_within", "same_pairs", "max_compiles")}
        | {"small_below_ms": c.rule.noise.small_below_ms, "host_bound_k": c.rule.host.k} | factor,
        "instances": [asdict(i) for i in instances],
        "cells": [asdict(x) | {"reason": noisy_words(x, c.rule.max_spread) if x.verdict == NOISY else None}
                  for x in cells],
        "kernels": [asdict(k) | {"reason": kernel_noisy_words(k.noisy_reason, c.rule.max_spread) or None}
                    for k in kernels],
        "figures": [asdict(f) for f in c.figures],
        "added": [list(k) for k in c.added], "removed": [list(k) for k in c.removed],
        "notes": c.notes, "warnings": c.warnings, "scope": c.scope, "stopped": c.stopped,
    }))


def _when(r: RunFile) -> str:
    return dt.datetime.fromtimestamp(r.date_ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


@dataclass(frozen=True)
class CompareRequest:
    """What a comparison is asked (`compile-baselines compare`'s options). `base`/`head`: hash prefixes, or git refs
    resolved in `repo_dir`; None: the machine's latest run (head) and the run before it (base). `factor`: a change
    must also exceed this ratio; `confirm`: the compiles (base, head) a change needs to count; `test`: the change test
    (all three ChangeRule's). `base_torch`/`head_torch` (both or neither): compare two torch versions, the runs picked
    by version (base and head, when given, narrow the choice). `history`: more results directories for the cells'
    noise. `attribute_changes` (--attribute): when both the commit and torch differ between the two runs, say which
    one moved each change (tracker.analyse.versionattribution)."""

    results_dir: str | os.PathLike[str]
    base: str | None
    head: str | None
    machine: str | None = None
    head_machine: str | None = None
    allow_cross_versions: bool = False
    factor: float | None = None
    confirm: tuple[int, int] = (0, 0)
    test: str = NOISE_TEST
    repo_dir: Path | None = None
    base_torch: str | None = None
    head_torch: str | None = None
    history: Sequence[str | os.PathLike[str]] = ()
    attribute_changes: bool = False


@dataclass(frozen=True)
class Compared:
    """A comparison and, when asked for (`attribute_changes`), which change moved what (None when only the commit or
    only torch changed)."""

    comparison: Comparison
    attribute_changes: bool = False
    attribution: Attribution | None = None


def pick(request: CompareRequest) -> tuple[CompareRequest, str]:
    """`request` with the runs it leaves out (base, head or both) picked by date, and what was picked in words ("" when
    nothing was: both given, or torch versions compared)."""
    base, head = request.base, request.head
    if request.base_torch is not None or (base is not None and head is not None):
        return request, ""
    b, h = default_pair(request.results_dir, base, head, request.machine, request.repo_dir, request.head_machine)
    picked = " and ".join(f"{side} {r.commit[:8]} ({_when(r)})" for side, r, given in
                          (("base", b, base), ("head", h, head)) if given is None)
    if request.head_machine is not None:
        said = f"{picked}: the latest run of each machine, base on {shown(b.machine)}, head on {shown(h.machine)}"
    else:
        why = "the latest run" if base is not None else "the run before head" if head is not None else \
            "the latest two runs"
        said = f"{picked}: {why} on {shown(h.machine)}"
    return replace(request, base=b.commit, head=h.commit, machine=b.machine), said


def compare(request: CompareRequest) -> Compared:
    """The comparison `request` asks for (the runs it leaves out picked as `pick` does), with its attribution."""
    if (request.base_torch is None) != (request.head_torch is None):
        raise UsageError("base_torch and head_torch go together: compare one torch version with another")
    rule = ChangeRule(test=request.test, factor=request.factor, confirm=request.confirm)
    r, _ = pick(request)
    if r.base_torch is not None and r.head_torch is not None:
        c = compare_versions(r.results_dir, r.base_torch, r.head_torch, r.machine, r.head_machine, r.base, r.head,
                             r.allow_cross_versions, rule, r.repo_dir, r.history)
    else:
        assert r.base is not None and r.head is not None  # picked
        c = compare_runs(r.results_dir, r.base, r.head, r.machine, r.allow_cross_versions, rule,
                         head_machine=r.head_machine, repo_dir=r.repo_dir, history=r.history)
    attribution = attribute(r.results_dir, c, r.repo_dir) if r.attribute_changes else None
    return Compared(c, r.attribute_changes, attribution)


def render(compared: Compared, fmt: str, only_changed: bool = False) -> str:
    """The comparison as a terminal table, markdown (the PR comment's body) or JSON. With an attribution, its section
    follows the best-baseline changes (md) or the table (table), or is the JSON's "attribution" (null when only the
    commit or only torch changed)."""
    if fmt not in FORMATS:
        raise ValueError(f"fmt is one of {', '.join(FORMATS)}, not {fmt!r}")
    c, attribution = compared.comparison, compared.attribution
    if fmt == "table":
        text = render_table(c, only_changed)
        return text + ("\n" + attributiontext.render_text(attribution) if attribution else "")
    if fmt == "md":
        return render_comment(c, only_changed=only_changed,
                              attribution=attributiontext.render_md(attribution) if attribution else "")
    extra = {"attribution": attributiontext.attribution_json(attribution) if attribution else None}
    extra = extra if compared.attribute_changes else {}
    return json.dumps(comparison_json(c, only_changed) | extra, indent=1) + "\n"


def verdict_line(c: Comparison, fail_on: str) -> str:
    """The comparison's headline in one line (the terminal table's first), and the exit code when `fail_on` holds."""
    return (f"compare {c.base.commit[:8]} -> {c.head.commit[:8]} on {shown(c.head.machine)}: {shown(headline(c))}"
            + (f" (--fail-on {fail_on}: exit {EXIT_FAIL_ON})" if c.fails(fail_on) else ""))


__all__ = ["FORMATS", "CompareRequest", "Compared", "compare", "comparison_json", "pick", "render", "verdict_line"]
