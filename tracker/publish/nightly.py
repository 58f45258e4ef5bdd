"""`compile-baselines track`: what the nightly's tracking issue says.

Every machine measured at a commit is compared (`compare --format md --fail-on best-change`) with its previous
measured run (tracker.store.resultsbranch: the nearest first-parent ancestor with a run of that machine), and every
other machine measured at the commit with the first, in name order (one machine per PyTorch line: the lines against
each other at one commit). Each comparison in which a best baseline changed is one section of the issue's body,
"## TITLE", a blank line, the comparison's markdown and a blank line. Then, for each machine measured at the commit,
the steps its stored history shows among its latest runs (tracker.analyse.nightsteps: a change that no
night-to-night comparison called, found on the nights after it, with the night, commit and torch it happened at)
are a section of their own when an instance's best latency stepped. Last, the sections other steps wrote into a
folder (`bisect --out`: the commit that moved a machine's best baseline, found on the GPU host), each file as it is.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tracker.analyse.confirm import COMPILES
from tracker.analyse.nightsteps import BEST, Step, recent_steps
from tracker.errors import ToolError
from tracker.publish import comparison
from tracker.publish.comparison import CompareRequest
from tracker.publish.escape import code, md
from tracker.publish.units import change, ms, p_value
from tracker.store import atomic, confined
from tracker.store.commits import resolve_ref
from tracker.store.resultsbranch import previous_run, stored_in_dir

Say = Callable[[str], object]


class TrackError(ToolError):
    pass


@dataclass(frozen=True)
class Section:
    title: str
    markdown: str


@dataclass(frozen=True)
class NightOptions:
    """How each machine's run is compared with its previous one (compare's flags of the same names)."""

    confirmed_only: bool = False  # count only changes measured again at head (after `compare --confirm`)
    attribute: bool = False  # when the commit and torch both changed: which one moved each change
    allow_cross_versions: bool = False  # torch (or the GPU) may differ between the two runs


def body(sections: list[Section]) -> str:
    """The issue's body: each section's title (machine names, escaped) and its markdown."""
    return "".join(f"## {md(s.title)}\n\n{s.markdown}\n" for s in sections)


def measured_at(results_dir: Path, commit: str, machines: list[str] | None = None) -> list[str]:
    """The machines (of `machines`, else all) with a run of `commit` in `results_dir`, in name order."""
    names = machines if machines is not None else [p.name for p in confined.folders(results_dir, "*", confined.quiet)]
    return sorted(m for m in set(names) if commit[:8] in stored_in_dir(results_dir, m))


def best_change(request: CompareRequest, warn: Say) -> str | None:
    """The comparison's markdown when a best baseline changed, None when none did; its warnings and headline said
    through `warn` (as `compare --format md --fail-on best-change` says them on stderr)."""
    compared = comparison.compare(request)
    c = compared.comparison
    for w in c.warnings:
        warn(f"warning: {w}")
    text = comparison.render(compared, "md")
    warn(comparison.verdict_line(c, "best-change"))
    return text if c.fails("best-change") else None


Compare = Callable[[CompareRequest, Say], "str | None"]  # best_change's signature


def _changed(compare: Compare, title: str, request: CompareRequest, warn: Say) -> Section | None:
    """The comparison's markdown as a section when a best baseline changed, None when none did."""
    try:
        markdown = compare(request, warn)
    except ToolError as e:
        raise TrackError(f"{title}: {e}") from None
    return Section(title, markdown) if markdown is not None else None


Steps = Callable[[Path, str], "Section | None"]  # (results_dir, machine) -> the section of its history's steps


def track(results_dir: Path, commit: str, repo_dir: Path, machines: list[str] | None = None,
          options: NightOptions = NightOptions(), compare: Compare = best_change,
          say: Say = print, steps: Steps | None = None, warn: Say = lambda _: None) -> list[Section]:
    """The sections of the tracking issue for `commit` (a hash or a git ref of `repo_dir`): one per comparison in
    which a best baseline changed, each machine's with its previous run first, then the PyTorch lines', then each
    machine's steps (`steps`, default: its history's, tracker.analyse.nightsteps). `say`: what was compared, and
    what came of it; `warn`: what each comparison says besides (its warnings and headline)."""
    head = resolve_ref(commit, repo_dir)
    tonight = measured_at(results_dir, head, machines)
    if not tonight:
        say(f"no machine{' of ' + ', '.join(machines) if machines else ''} was measured at {head[:12]}: "
            "nothing to compare")
    sections = []
    for machine in tonight:
        prev = previous_run(machine, head, repo_dir, results_dir=results_dir)
        if prev is None:
            say(f"{machine}: no earlier measured commit; nothing to compare")
            continue
        request = CompareRequest(results_dir, prev, head, machine, allow_cross_versions=options.allow_cross_versions,
                                 repo_dir=repo_dir, confirm=(0, COMPILES) if options.confirmed_only else (0, 0),
                                 attribute_changes=options.attribute)
        found = _changed(compare, machine, request, warn)
        say(f"{machine}: best baseline {'changed' if found else 'unchanged'} since {prev[:12]}")
        sections += [found] if found else []
    for other in tonight[1:]:
        title = f"{tonight[0]} vs {other}"
        request = CompareRequest(results_dir, head, head, tonight[0], other, allow_cross_versions=True,
                                 repo_dir=repo_dir)
        found = _changed(compare, title, request, warn)
        say(f"{title}: best baselines {'differ' if found else 'agree'} at {head[:12]}")
        sections += [found] if found else []
    for machine in tonight:
        found = (steps or steps_section)(results_dir, machine)
        if found:
            say(f"{machine}: a best latency stepped in its history's latest runs")
            sections.append(found)
    return sections


def steps_section(results_dir: Path, machine: str) -> Section | None:
    """The steps of `machine`'s history, as a section, when an instance's best latency stepped."""
    from tracker.store.results import load_results

    steps = recent_steps(load_results(results_dir, machine=machine).table, machine)
    if not any(s.mode == BEST for s in steps):
        return None
    return Section(f"{machine}: steps in its history", steps_markdown(steps))


def steps_markdown(steps: list[Step]) -> str:
    """The steps as the tracking issue shows them: best latencies first, then cells, largest first."""
    rows = sorted(steps, key=lambda s: s.mode != BEST)
    lines = ["Levels that changed and stayed changed over the latest nights (a step, found once the runs after it "
             "agree; the night is the first run at the new level):", "",
             "| Workload | Preset | Mode | Night | Commit | torch | Before | After | Change | p |",
             "|---|---|---|---|---|---|---:|---:|---:|---:|"]
    for s in rows:
        mode = "**best latency**" if s.mode == BEST else md(s.mode)
        lines.append(f"| {md(s.workload)} | {md(s.preset)} | {mode} | {md(s.date[:16])} | {code(s.commit[:8])} | "
                     f"{md(s.torch)} | {ms(s.before_ms)} | {ms(s.after_ms)} | {change(s.ratio)} | "
                     f"{p_value(s.p_value)} |")
    return "\n".join(lines) + "\n"


def written_sections(folder: Path | None) -> list[str]:
    """The sections other steps wrote into `folder` (its *.md, in name order), each as it is; none without it."""
    if folder is None or not folder.is_dir():
        return []
    return [confined.read_text(folder, p).rstrip("\n") + "\n\n" for p in confined.files(folder, "*.md")]


def write_body(results_dir: str | os.PathLike[str], commit: str, out: str, machines: list[str] | None,
               options: NightOptions, repo_dir: Path, more: Path | None = None,
               warn: Say = lambda _: None) -> list[Section]:
    """`out` holds the tracking issue's body when a best baseline changed, and does not exist when none did (so that
    its presence says so); `more`: a folder of sections other steps wrote, appended to the body (never a body of
    their own). The comparisons written, one section each (none: `out` removed); `warn`: as track's."""
    root = Path(results_dir)
    if not root.is_dir():
        raise TrackError(f"results directory {root} does not exist: fetch the results first, or pass --results-dir")
    sections = track(root, commit, repo_dir, machines, options, warn=warn)
    if sections:
        atomic.write_text(out, body(sections) + "".join(written_sections(more)))
    else:
        Path(out).unlink(missing_ok=True)
    return sections


__all__ = ["NightOptions", "Section", "TrackError", "best_change", "body", "measured_at", "steps_markdown",
           "steps_section", "track", "write_body", "written_sections"]
