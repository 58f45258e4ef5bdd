"""`compile-baselines bisect`'s words: the first bad commit and its evidence (the PR comment's unit: the change, its
interval, the compiles a side), or the narrowed range, then each step, the commits skipped and why, and, where the
ends were measured under different torch, what that means for a bisection of the commits (tracker.analyse.bisection).

`render_md` is a section of the nightly's tracking issue ("## TITLE", as `track` writes its sections); `headline` is
the one line a terminal gets first.
"""

from __future__ import annotations

from tracker.analyse.bisection import (
    BAD,
    BUDGET,
    FOUND,
    GOOD,
    NO_CHANGE,
    SKIPPED,
    SKIPS,
    Bisection,
    Commit,
    Probe,
    key,
    moved_cells,
)
from tracker.analyse.verdicts import FASTER, SAME, SLOWER
from tracker.publish.evidence import cell_evidence
from tracker.publish.units import ARROW, DASH, MICRO, PLAIN_ARROW, PLAIN_MICRO, count


def _md(text: str) -> str:  # a table cell's one escape
    return text.replace("|", "\\|")


def _commit(c: Commit, code: str = "`") -> str:
    return f"{code}{c.sha[:8]}{code} '{c.subject}'"


def _evidence(b: Bisection, p: Probe, plain: bool = False) -> str:
    """The cells of the change a step moved in its direction (else all of them), each with its evidence."""
    micro, arrow = (PLAIN_MICRO, PLAIN_ARROW) if plain else (MICRO, ARROW)
    cells = moved_cells(p, b.change) if p.outcome == BAD else [x for x in p.cells if key(x) in b.change or not b.change]
    said = [f"{'/'.join(key(x))} {_verdict(x.verdict, p.outcome)}: {cell_evidence(x, micro, arrow) or DASH}"
            for x in cells]
    return "; ".join(said) or p.why


def _verdict(verdict: str, outcome: str) -> str:
    """A cell's verdict, and where the paired test left it open, the end whose level placed the commit."""
    if verdict in (SAME, SLOWER, FASTER) or outcome not in (GOOD, BAD):
        return verdict
    return f"{verdict}, at the {outcome} end's level"


def headline(b: Bisection, plain: bool = False) -> str:
    """What the bisection found, in one line."""
    code = "" if plain else "`"
    r = b.range
    if b.stopped == FOUND and (bad := r.first_bad) is not None:
        p = b.evidence
        against = "" if p is None else ("its parent" if p.against == r.good.sha else p.against[:8])
        said = f": {_evidence(b, p, plain)}, against {against}" if p is not None else ""
        return f"first bad: {_commit(bad, code)}{said}"
    if b.stopped == NO_CHANGE:
        return (f"no change: {code}{r.good.sha[:8]}{code} and {code}{r.bad.sha[:8]}{code} measure the same in pairs "
                f"under torch {b.today}: no commit of the range moved "
                f"{'/'.join(b.cells[0]) if len(b.cells) == 1 else count(len(b.cells), 'cell')}")
    if b.stopped in (BUDGET, SKIPS):
        why = f"past the budget ({b.budget_s:.0f} s)" if b.stopped == BUDGET else "the commits between were skipped"
        return (f"narrowed, {why}: the first bad is one of {count(len(r.suspects), 'commit')} after "
                f"{code}{r.good.sha[:8]}{code}: " + ", ".join(_commit(c, code) for c in r.suspects))
    return (f"undecided: between {code}{r.good.sha[:8]}{code} and {code}{r.bad.sha[:8]}{code} no cell changed, but "
            f"not every cell is the same: {b.probes[0].why if b.probes else ''}")


def _torch(b: Bisection) -> list[str]:
    t = b.ends
    if t is None or not t.changed:
        return []
    r = b.range
    lines = ["", f"The ends were measured under different torch: `{r.commits[0].sha[:8]}` under {t.good}, "
                 f"`{r.commits[-1].sha[:8]}` under {t.bad}. This bisection is of the commit range under today's torch "
                 f"({b.today})" + (": under it the commits moved nothing, so the change came with torch." if
                                   b.stopped == NO_CHANGE else ".")]
    if t.attribution:
        lines += ["", "Which change moved it, from the stored runs (`compare --attribute`):"]
        lines += [f"- {a.preset} {a.workload} {'best baseline' if a.mode is None else a.mode}: {a.change}, moved by "
                  f"**{a.cause}** ({a.why})" for a in t.attribution]
    return lines


def _called(b: Bisection, p: Probe, first: bool) -> str:
    if first:
        return "the change" if p.outcome == BAD else "no change" if p.outcome == GOOD else "undecided"
    return {BAD: "**bad**", GOOD: "good", SKIPPED: "skipped"}[p.outcome]


def render_md(b: Bisection) -> str:
    """The section: the headline, the torch it measured under, the steps, the commits skipped."""
    r = b.range
    title = f"{b.machine}: bisection of {r.commits[0].sha[:8]}..{r.commits[-1].sha[:8]}"
    lines = [f"## {title}", "", headline(b), *_torch(b), "",
             "| Step | Commit | Against | Called | Evidence | Wall time |", "|---:|---|---|---|---|---:|"]
    for n, p in enumerate(b.probes):
        lines.append(f"| {n + 1} | `{p.commit[:8]}` {_md(repr(b.subject(p.commit)))} | `{p.against[:8]}` | "
                     f"{_called(b, p, n == 0)} | {_md(_evidence(b, p))} | {p.seconds:.0f} s |")
    skipped = [(r.commits[i], why) for i, why in sorted(r.skipped.items())]
    if skipped:
        lines += ["", "Skipped, as git bisect skips a commit it cannot test:"]
        lines += [f"- {_commit(c)}: {why}" for c, why in skipped]
    lines += ["", f"{count(len(r.commits) - 1, 'commit')} in the range (first parents), "
                  f"{count(len(b.probes), 'step')} in {b.seconds:.0f} s of a {b.budget_s:.0f} s budget; each step "
                  f"measured {', '.join('/'.join(c) for c in (list(b.change) or b.cells))} at a commit and at the good "
                  f"end in pairs until decided, under torch {b.today}. "
                  + (f"The runs of {', '.join(s[:8] for s in b.stored)} are in the results as machine {b.machine}."
                     if b.stored else "")]
    return "\n".join(lines).rstrip() + "\n"


def render_text(b: Bisection) -> str:
    """For a terminal: the headline, then one line a step."""
    lines = [headline(b, plain=True)]
    for n, p in enumerate(b.probes):
        lines.append(f"  step {n + 1}: {p.commit[:8]} against {p.against[:8]}: {_called(b, p, n == 0).strip('*')}"
                     f" ({_evidence(b, p, plain=True)}; {p.seconds:.0f} s)")
    lines += [f"  skipped {b.range.commits[i].sha[:8]}: {why}" for i, why in sorted(b.range.skipped.items())]
    return "\n".join(lines) + "\n"


__all__ = ["headline", "render_md", "render_text"]
