"""`compile-baselines compare`: a comparison (tracker.analyse.compare) as markdown, the PR comment's body
(tracker.publish.prcomment), or as JSON in a stable shape (`comparison_json`)."""

from __future__ import annotations

import json
import math
import os
import sys
from dataclasses import asdict
from typing import Any

from tracker.analyse.compare import EXIT_FAIL_ON, EXIT_OK, FAIL_ON, Comparison, compare_runs
from tracker.publish.prcomment import headline, render_comment
from tracker.store import atomic

FORMATS = ("md", "json")


def _round(x: Any) -> Any:
    if isinstance(x, float):
        return None if math.isnan(x) or math.isinf(x) else float(f"{x:.6g}")
    if isinstance(x, dict):
        return {k: _round(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_round(v) for v in x]
    return x


def comparison_json(c: Comparison) -> dict[str, Any]:
    """The stable JSON shape of a comparison (keys fixed; floats to 6 significant digits; null for none)."""
    rule = asdict(c.rule)
    return _round({
        "base": asdict(c.base), "head": asdict(c.head),
        "summary": {"changed": c.changed, "best_changed": len(c.best_changes), "regressions": len(c.regressions),
                    "improvements": len(c.improvements), "noisy": len(c.noisy),
                    "kernel_changes": len(c.kernel_changes), "cells": len(c.cells), "instances": len(c.instances)},
        "rule": {k: rule[k] for k in ("p_value", "min_change", "small_change", "autotuned_change", "autotuned_modes",
                                      "max_spread")} | {"small_below_ms": c.rule.noise.small_below_ms,
                                                        "host_bound_k": c.rule.host.k},
        "instances": [asdict(i) for i in c.instances],
        "cells": [asdict(x) for x in c.cells],
        "kernels": [asdict(k) for k in c.kernels],
        "figures": [asdict(f) for f in c.figures],
        "added": [list(k) for k in c.added], "removed": [list(k) for k in c.removed],
        "notes": c.notes, "warnings": c.warnings,
    })


def compare_main(results_dir: str | os.PathLike[str], base: str, head: str, machine: str | None = None,
                 fmt: str = "md", fail_on: str = "never", out: str | os.PathLike[str] | None = None,
                 allow_cross_versions: bool = False, head_machine: str | None = None) -> int:
    """`compile-baselines compare`: the comparison as markdown (the PR comment's body) or JSON, to `out` or
    stdout. Exit 0, or EXIT_FAIL_ON (3) when the --fail-on condition holds; errors raise (CLI: 1, usage 2)."""
    if fmt not in FORMATS:
        raise ValueError(f"--format takes {', '.join(FORMATS)}, not {fmt!r}")
    if fail_on not in FAIL_ON:
        raise ValueError(f"--fail-on takes {', '.join(FAIL_ON)}, not {fail_on!r}")
    c = compare_runs(results_dir, base, head, machine, allow_cross_versions, head_machine=head_machine)
    for w in c.warnings:
        print(f"warning: {w}", file=sys.stderr)
    text = render_comment(c) if fmt == "md" else json.dumps(comparison_json(c), indent=1) + "\n"
    if out is not None:
        atomic.write_text(out, text)
    else:
        sys.stdout.write(text)
    failed = c.fails(fail_on)
    print(f"compare {c.base.commit[:8]} -> {c.head.commit[:8]} on {c.head.machine}: {headline(c)}"
          + (f" (--fail-on {fail_on}: exit {EXIT_FAIL_ON})" if failed else ""), file=sys.stderr)
    return EXIT_FAIL_ON if failed else EXIT_OK


__all__ = ["FORMATS", "compare_main", "comparison_json"]
