"""`compare --attribute`: which change, the commit or torch, moved each best baseline and significant cell
(tracker.analyse.versionattribution), as the markdown section of the comparison (the nightly tracking issue shows
it), as plain text after the terminal table, and as JSON."""

from __future__ import annotations

import re
from dataclasses import asdict
from typing import Any

from tracker.analyse.verdicts import BY_UNDECIDED
from tracker.analyse.versionattribution import Attributed, Attribution
from tracker.publish.escape import md, visible

HEADING = "#### Commit or torch: which change moved it"


def _what(a: Attributed) -> str:
    return "best baseline" if a.mode is None else a.mode


def _runs(a: Attribution) -> str:
    b, h = a.base, a.head
    return (f"{b.commit[:8]} under torch {b.torch} -> {h.commit[:8]} under torch {h.torch}: the commit and torch both "
            "changed")


def _routes(a: Attribution) -> list[str]:
    if not a.routes:
        b, h = a.base, a.head
        return [f"no cross run: neither {h.commit[:8]} under torch {b.torch} nor {b.commit[:8]} under torch {h.torch} "
                "was measured"]
    return [f"cross run {r.cross.commit[:8]} under torch {r.cross.torch} on {r.cross.machine}: the commit alone is "
            f"{r.commit.base.commit[:8]} -> {r.commit.head.commit[:8]} under torch {r.commit.head.torch}, torch alone "
            f"{r.torch.base.torch} -> {r.torch.head.torch} at {r.torch.head.commit[:8]}" for r in a.routes]


def _decisive(a: Attribution) -> list[str]:
    d = a.decisive
    if d is None:
        return []
    return [f"No cross run decides the {len(a.by(BY_UNDECIDED))} undecided changes. The one run that does: "
            f"{d.commit[:8]} under torch {d.torch}; with torch {d.torch} installed, then `compare --attribute` again:",
            d.command()]


def render_md(a: Attribution) -> str:
    """The section: the runs, the cross runs used, one row per change, and the run that decides the undecided.
    What the results say (versions, machines, names) is escaped as markdown text (tracker.publish.escape)."""
    lines = [HEADING, "", md(_runs(a)).replace(" -&gt; ", " → ") + "."]
    lines += [f"- {md(line).replace(' -&gt; ', ' → ')}" for line in _routes(a)]
    if not a.items:
        lines += ["", "Nothing moved beyond noise between the two runs: nothing to attribute."]
        return "\n".join(lines) + "\n"
    lines += ["", "| Workload | Preset | What | Change | Moved by | Each change alone |", "|---|---|---|---|---|---|"]
    lines += [f"| {md(x.workload)} | {md(x.preset)} | {md(_what(x))} | {md(x.change)} | **{md(x.cause)}** | "
              f"{md(x.why)} |" for x in a.items]
    decisive = _decisive(a)
    if decisive:  # a fenced block shows its text as it is, but for a line of backticks that would end it
        fence = "`" * max(3, max((len(r) for r in re.findall("`+", decisive[1])), default=0) + 1)
        lines += ["", md(decisive[0]), "", fence, visible(decisive[1]), fence]
    return "\n".join(lines) + "\n"


def render_text(a: Attribution) -> str:
    """The same for a terminal: plain text after the comparison's table."""
    lines = ["commit or torch: " + _runs(a)] + [f"  {line}" for line in _routes(a)]
    if not a.items:
        return "\n".join([*lines, "  nothing moved beyond noise: nothing to attribute"]) + "\n"
    width = max(len(x.cause) for x in a.items)
    lines += [f"  {x.cause:<{width}}  {x.preset}  {x.workload}  {_what(x)}: {x.change} ({x.why})" for x in a.items]
    decisive = _decisive(a)
    if decisive:
        lines += [decisive[0], "  " + decisive[1]]
    return "\n".join(lines) + "\n"


def attribution_json(a: Attribution) -> dict[str, Any]:
    """A stable shape: the two runs, the cross runs used, one entry per change, the run that decides (or null)."""
    return {"base": asdict(a.base), "head": asdict(a.head),
            "cross_runs": [asdict(r.cross) for r in a.routes],
            "items": [asdict(x) for x in a.items],
            "decisive_run": None if a.decisive is None else asdict(a.decisive) | {"command": a.decisive.command()}}


__all__ = ["HEADING", "attribution_json", "render_md", "render_text"]
