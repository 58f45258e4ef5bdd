"""`compile-baselines summary`: the study's tables for one run (the latest by default) as text, markdown or JSON.

The JSON form is a stable interface, built by tracker.publish.summaryjson (its docstring describes the shape); the
text and markdown forms are rendered from it here.
"""

from __future__ import annotations

import json
import os
import textwrap
from collections.abc import Collection
from pathlib import Path
from typing import Any

import jinja2

from tracker.analyse import breakeven
from tracker.analyse.best import analyse
from tracker.errors import UsageError
from tracker.publish import escape
from tracker.publish.summaryjson import summary_json
from tracker.publish.target import Target, target_text
from tracker.publish.units import (
    FORMATS,
    PLAIN_DASH,
    PLAIN_MICRO,
    calls,
    count,
    factor,
    margin,
    ms_plain,
    speedup_precise,
    spread,
    us,
)
from tracker.stats import TOO_NOISY_SPREAD, HostBound, NoiseModel
from tracker.store.cells import default_cells_dir
from tracker.store.commits import commit_with_results
from tracker.store.results import RunFile, list_runs, load_runs, select_runs
from workloads.kernels.registry import MODE_PREFIX
from workloads.modes import COMPILED, HEAD_TO_HEAD, MODES, REFERENCE, REGISTRY, short

BREAK_EVEN_NOTE = f"break-even: {breakeven.LIMITS}"

WIDTH = 100
WORKLOAD_COLUMN = 51  # where the winning workloads start in the text table
# The modes the text table abbreviates, in its legend's order: the longest names first.
_ABBREVIATED = sorted((m for m in REGISTRY if m.short != m.name), key=lambda m: -len(m.name))

# Inline templates: the whole rendered text of this module, kept beside the code that fills it.
TEXT = """\
{% for run in runs %}
{{ run.machine }} · commit {{ run.commit[:8] }} ({{ run.date[:10] }})
{{ run.gpu }} · torch {{ run.torch }} · triton {{ run.triton }} · launch floor {{ run.floor }}
{{ noise_note }}
{{ legend }}
{% for preset, p in run.presets.items() %}

{{ preset }}: {{ count(p.instances, 'instance') }}
  {{ "%-26s %5s %5s %8s" % ("", "", "", "geomean") }}
  {{ "%-26s %5s %5s %8s  %s" % ("mode", "wins", "tied", "vs eager", "winning workloads") }}
{% for row in p.rows %}
  {{ "%-26s %5d %5d %8s  " % (row.mode, row.wins, row.tied, row.geomean) }}{{ row.workloads }}
{% endfor %}
  {{ p.h2h }}
  {{ "%-14s" % "wins by domain" }}{% for m in modes %}{{ "%8s" % short(m) }}{% endfor %}

{% for d, wins in p.domain_wins.items() %}
  {{ "%-14s" % d }}{% for m in modes %}{{ "%8d" % wins[m] }}{% endfor %}

{% endfor %}
{% for line in p.lines %}
{{ line }}
{% endfor %}
{% if p.target_lines %}
  baseline to beat:
{% for line in p.target_lines %}
{{ line }}
{% endfor %}
{% endif %}
{% if p.kernel_lines %}
  kernels vs best baseline:
{% for line in p.kernel_lines %}
{{ line }}
{% endfor %}
{% endif %}
{% if p.break_even %}
  compile break-even: {{ break_even_meaning }}
  {{ "%-32s" % "workload" }}{% for m in compiled %}{{ "%8s" % short(m) }}{% endfor %}

{% for row in p.break_even %}
  {{ "%-32s" % row.workload }}{% for c in row.calls %}{{ "%8s" % c }}{% endfor %}

{% endfor %}
{% endif %}
{% endfor %}
{% if run.break_even_note %}
{{ run.break_even_note }}
{% endif %}
{% endfor %}
{% for w in warnings %}
warning: {{ w }}
{% endfor %}
"""

MARKDOWN = """\
{% for run in runs %}
### {{ run.machine }} · {{ run.commit[:8]|code }} ({{ run.date[:10] }}) · {{ run.gpu }} · torch {{ run.torch }}

Triton {{ run.triton }}, launch floor {{ run.floor }}; {{ noise_note }}.
{% for preset, p in run.presets.items() %}

#### {{ preset }}: {{ count(p.instances, 'instance') }}

| Mode | Wins | Of them tied | Geomean vs eager | Winning workloads |
|---|---:|---:|---:|---|
{% for row in p.rows %}
| {{ row.mode }} | {{ row.wins }} | {{ row.tied }} | {{ row.geomean }} | {{ row.md_workloads }} |
{% endfor %}

{{ p.md_h2h }}

| Wins by domain |{% for m in modes %} {{ m }} |{% endfor %}

|---|{% for m in modes %}---:|{% endfor %}

{% for d, wins in p.domain_wins.items() %}
| {{ d }} |{% for m in modes %} {{ wins[m] }} |{% endfor %}

{% endfor %}

{% for line in p.md_lines %}
- {{ line }}
{% endfor %}
{% if p.md_target_lines %}

Baseline to beat:

{% for line in p.md_target_lines %}
- {{ line }}
{% endfor %}
{% endif %}
{% if p.md_kernel_lines %}

Kernels vs best baseline:

{% for line in p.md_kernel_lines %}
- {{ line }}
{% endfor %}
{% endif %}
{% if p.break_even %}

Compile break-even: {{ break_even_meaning }}.

| Workload |{% for m in compiled %} {{ m }} |{% endfor %}

|---|{% for m in compiled %}---:|{% endfor %}

{% for row in p.break_even %}
| {{ row.workload }} |{% for c in row.calls %} {{ c }} |{% endfor %}

{% endfor %}
{% endif %}
{% endfor %}
{% if run.break_even_note %}

{{ break_even_note }}
{% endif %}

{% endfor %}
{% for w in warnings %}
> warning: {{ w }}
{% endfor %}
"""

_ENV = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False,
                          trim_blocks=True, lstrip_blocks=True)
_ENV.globals["short"] = short
_ENV.globals["count"] = count
# The markdown form: every {{ }} escaped as markdown unless written as markdown already (tracker.publish.escape)
_MD_ENV = escape.markdown_env()
_MD_ENV.globals["count"] = count
_MD_ENV.filters["code"] = escape.code


def _wrap(items: list[str], indent: int, prefix: str = "") -> str:
    text = prefix + (", ".join(items) if items else "-")
    lines = textwrap.wrap(text, WIDTH - indent, break_on_hyphens=False) or ["-"]
    return ("\n" + " " * indent).join(lines)


def _faster(speedup: float) -> str:
    """A speedup (baseline time / kernel time) as words that say which side is faster: "1.15x faster than",
    "1.25x slower than" (the inverse, 1 / 0.8), "as fast as" where it rounds to 1."""
    if factor(speedup) == factor(1.0):
        return "as fast as"
    return f"{factor(speedup)} faster than" if speedup > 1 else f"{factor(1 / speedup)} slower than"


def kernel_line(k: dict[str, Any], code: Any = str, text: Any = str, too_noisy: bool = False) -> str:
    """One kernel under test against the run's best baseline, from its summary JSON entry: "llm_rmsnorm
    triton_rmsnorm: 1.02x faster than best (max-autotune-no-cudagraphs), 5.4x faster than eager". `code` formats
    the candidate's name and `text` its failure's reason (markdown: a code span, escaped text); `too_noisy`: its own
    cell's samples spread too much to judge (the summary's list)."""
    head = f"{k['workload']} {code(k['candidate'])}: "
    if not k["correct"]:
        return head + f"failed, not counted: {text(k['reason'] or 'no reason recorded')}"
    if k["speedup_vs_best"] is None:
        return head + f"{ms_plain(k['median_ms'])}, no baseline to compare with (no mode measured ok and ranked)"
    parts = [f"{_faster(k['speedup_vs_best'])} best ({k['best_baseline']})"]
    if k["speedup_vs_eager"] is not None and k["best_baseline"] != REFERENCE:
        parts.append(f"{_faster(k['speedup_vs_eager'])} {REFERENCE}")
    # why a speedup may not be a real one
    notes = [n for n, on in (("too noisy to judge", too_noisy), ("within noise", k.get("within_noise")),
                             ("host-bound", k.get("host_bound"))) if on]
    return head + ", ".join(parts) + (f"; {', '.join(notes)}" if notes else "")


def _preset_view(p: dict[str, Any]) -> dict[str, Any]:
    winners: dict[str, list[str]] = {}
    for workload, mode in p["winners"].items():
        winners.setdefault(mode, []).append(workload)
    modes = sorted(p["wins"], key=lambda m: -p["wins"][m])  # the study's order: most wins first
    rows = [{"mode": m, "wins": p["wins"][m], "tied": p.get("tied_wins", {}).get(m, 0),
             "geomean": speedup_precise(p["geomean_vs_eager"].get(m), PLAIN_DASH),
             "workloads": _wrap(sorted(winners.get(m, [])), WORKLOAD_COLUMN),
             "md_workloads": ", ".join(sorted(winners.get(m, []))) or "—"} for m in modes]
    h = p["head_to_head"]

    def side(mode: str) -> str:
        pct = h[mode]["avg_margin_pct"]
        return f"{mode} {h[mode]['wins']}" + (f" (avg margin {margin(pct)})" if pct is not None else "")

    def lines(name: Any) -> list[str]:
        ties = [f"{w} ({' ~ '.join(name(m) for m in modes_)})" for w, modes_ in p["ties"].items()]
        out = [f"ties within noise ({len(ties)}): " + (", ".join(ties) if ties else "none"),
               f"host-bound ({len(p['host_bound'])}): " + (", ".join(p["host_bound"]) or "none")]
        noisy = p.get("too_noisy", [])
        if noisy:  # never silent: these medians rank nothing
            out.append(f"TOO NOISY TO JUDGE ({len(noisy)} cell{'s' if len(noisy) != 1 else ''}: samples spread over "
                       f"more than {spread(TOO_NOISY_SPREAD)} of the median, so their medians rank nothing where "
                       "another mode measured ok): "
                       + ", ".join(f"{u['workload']} {name(u['mode'])} ({spread(u['spread'])})" for u in noisy))
        return out + [f"note: {n}" for n in p["notes"]]

    kernels = p.get("kernels", [])
    targets = {w: Target.from_json(t) for w, t in p.get("targets", {}).items()}
    return {"instances": p["instances"], "rows": rows, "domain_wins": p["domain_wins"], "md_lines": lines(str),
            "md_target_lines": [f"{w}: {target_text(t)}" for w, t in targets.items()],
            "target_lines": [_fill_keeping_units(f"{w}: {target_text(t, short)}")
                             for w, t in targets.items()],
            "md_kernel_lines": [escape.ours(kernel_line(k, escape.code, escape.md, _noisy(p, k))) for k in kernels],
            "kernel_lines": [textwrap.fill(kernel_line(k, too_noisy=_noisy(p, k)), WIDTH, initial_indent="    ",
                                           subsequent_indent="      ", break_on_hyphens=False) for k in kernels],
            "h2h": _h2h(p, side), "md_h2h": _h2h(p, side, width=None), "break_even": _break_even_rows(p["break_even"]),
            "lines": [textwrap.fill(line, WIDTH, initial_indent="  ", subsequent_indent="    ",
                                    break_on_hyphens=False) for line in lines(short)]}


def _noisy(p: dict[str, Any], k: dict[str, Any]) -> bool:
    """Whether a kernel's own cell is among the preset's cells too noisy to judge."""
    return any(u["workload"] == k["workload"] and u["mode"] == f"{MODE_PREFIX}{k['candidate']}"
               for u in p.get("too_noisy", []))


def _fill_keeping_units(line: str) -> str:
    """A target line wrapped to the width, never between a number and its unit (a no-break space holds them)."""
    held = line.replace(" us", "\xa0us").replace(" ms", "\xa0ms")
    return textwrap.fill(held, WIDTH, initial_indent="    ", subsequent_indent="      ",
                         break_on_hyphens=False).replace("\xa0", " ")


def _h2h(p: dict[str, Any], side: Any, width: int | None = WIDTH - 2) -> str:
    """The head-to-head line: the study's figures where both modes measured ok on some instance, else says so;
    wrapped to `width` (None: one line, for markdown)."""
    n = p.get("head_to_head_instances", 0)
    if not n:
        return f"head-to-head {' vs '.join(HEAD_TO_HEAD)}: not measured (no instance has both measured ok)"
    line = f"head-to-head over {count(n, 'instance')}: {' vs '.join(side(m) for m in HEAD_TO_HEAD)}"
    return line if width is None else textwrap.fill(line, width, subsequent_indent="    ", break_on_hyphens=False)


def _break_even_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per workload, the calls to break even of each compiled mode measured ok with eager ("-": not measured)."""
    by_workload: dict[str, dict[str, str]] = {}
    for b in rows:
        by_workload.setdefault(b["workload"], {})[b["mode"]] = calls(b["calls"])
    return [{"workload": w, "calls": [calls.get(m, "-") for m in COMPILED]} for w, calls in by_workload.items()]


def _view(summary: dict[str, Any]) -> list[dict[str, Any]]:
    runs = []
    for r in summary["runs"]:
        floor = us(r["launch_us"], PLAIN_MICRO) if r.get("launch_us") is not None else "not recorded"
        note = (textwrap.fill(BREAK_EVEN_NOTE, WIDTH, break_on_hyphens=False)
                if any(p.get("break_even") for p in r["presets"].values()) else "")
        # the results' names on one line each, cut, in the table as in markdown (escape.shown)
        names = {k: escape.shown(r.get(k, "")) for k in ("machine", "gpu", "torch", "triton")}
        runs.append({**r, **names, "floor": floor, "presets": {k: _preset_view(v) for k, v in r["presets"].items()},
                     "break_even_note": note})
    return runs


def _noise_note(noise: NoiseModel, host: HostBound, wrap: bool = False) -> str:
    small = us(noise.small_below_ms * 1000, PLAIN_MICRO, decimals=None)
    text = (f"wins: the fastest median (the study's count), tied: another mode within noise of it (within "
            f"{noise.rel_band:.0%}, {noise.small_rel_band:.0%} < {small}"
            f"{', overlapping 99% CIs' if noise.use_ci else ''} or the winner's compiles; another run of the same "
            f"code may give it to that mode); host-bound <= {host.k:g} floors")
    return textwrap.fill(text, WIDTH, break_on_hyphens=False) if wrap else text


def render(summary: dict[str, Any], fmt: str = "table", warnings: list[str] | None = None,
           noise: NoiseModel | None = None, host: HostBound | None = None) -> str:
    """The summary dict (summaryjson's shape) as text (table), markdown (md) or JSON."""
    if fmt == "json":
        return json.dumps(summary, indent=1) + "\n"
    if fmt not in FORMATS:
        raise ValueError(f"unknown summary format {fmt!r}; choose from {', '.join(FORMATS)}")
    template = _ENV.from_string(TEXT) if fmt == "table" else _MD_ENV.from_string(MARKDOWN)
    legend = ", ".join(f"{m.short} = {m.name}" for m in _ABBREVIATED)
    note = _noise_note(noise or NoiseModel(), host or HostBound(), fmt == "table")
    return template.render(runs=_view(summary), warnings=warnings or [], modes=MODES, legend=legend, compiled=COMPILED,
                           noise_note=escape.ours(note),
                           break_even_note=BREAK_EVEN_NOTE, break_even_meaning=breakeven.MEANING)


def pick_runs(results_dir: str | os.PathLike[str], commit: str | None = None, machine: str | None = None,
              repo_dir: Path | None = None) -> tuple[list[RunFile], list[str]]:
    """The files of the requested run: the given commit (all torch versions; a hash prefix, or a git ref resolved in
    `repo_dir`), else the latest run's commit, on `machine`. Without `machine`, the runs asked for must be of one
    machine (UsageError naming them otherwise). ResultsError when there is nothing to show."""
    runs, warnings = list_runs(results_dir)
    if commit is not None:
        commit = commit_with_results(commit, [r.commit for r in runs], repo_dir, bool(warnings))
    chosen = select_runs(runs, machine, commit, warnings)
    machines = sorted({r.machine for r in chosen})
    if machine is None and len(machines) > 1:
        raise UsageError(f"results of several machines ({', '.join(machines)})"
                         + (f" for commit {commit[:12]}" if commit else "") + ": pass --machine")
    if commit is None:
        latest = chosen[-1]  # list_runs sorts by date
        chosen = [r for r in chosen if r.commit == latest.commit and r.machine == latest.machine]
    return chosen, warnings


def summary_for(results_dir: str | os.PathLike[str], commit: str | None = None, machine: str | None = None,
                noise: NoiseModel | None = None, host: HostBound | None = None,
                repo_dir: Path | None = None,
                workloads: Collection[str] | None = None) -> tuple[dict[str, Any], list[str]]:
    """The summary JSON of the run asked for (pick_runs) and its warnings; `workloads`: only theirs (the figures
    then count those instances alone), UsageError when the run measured none of them."""
    files, warnings = pick_runs(results_dir, commit, machine, repo_dir)
    loaded = load_runs(files, cells_dir=default_cells_dir(results_dir))
    if workloads is not None:
        measured = set(loaded.table["workload"].astype(str))
        if not measured & set(workloads):
            run = ", ".join(sorted({f"{r.machine} {r.commit[:8]}" for r in files}))
            raise UsageError(f"the run ({run}) measured none of {', '.join(workloads)}; it measured "
                             f"{', '.join(sorted(measured)) or 'nothing'}")
        loaded.table = loaded.table[loaded.table["workload"].astype(str).isin(workloads)].reset_index(drop=True)
    analysis = analyse(loaded.table, noise, host)
    return summary_json(loaded.table, analysis=analysis), warnings + loaded.warnings + _nothing_ok(loaded.table, files)


def _nothing_ok(table: Any, files: list[RunFile]) -> list[str]:
    """A run with no cell measured ok is a result, but an empty summary must not hide it: what failed, and why; or
    that its files hold no cell at all (every one skipped, as asv records it, or not run)."""
    if table.empty:
        names = ", ".join(sorted({f"{r.machine} {r.commit[:8]}" for r in files}))
        return [f"no cell measured ok: the run ({names}) holds no measured or failed cell (every cell skipped or not "
                "run; `compile-baselines rm` drops it)"]
    if (table["status"] == "ok").any():
        return []
    failed = table[table["status"] == "failed"]
    reasons = failed["reason"].astype(str).str.slice(0, 120).value_counts()
    why = "; ".join(f"{n} x {reason}" for reason, n in reasons.head(3).items())
    more = f"; and {len(reasons) - 3} other reason(s)" if len(reasons) > 3 else ""
    return [f"no cell measured ok: {len(failed)} failed, {int((table['status'] == 'skipped').sum())} skipped"
            + (f" ({why}{more})" if why else "")]


def render_text(results_dir: str | os.PathLike[str], commit: str | None = None, machine: str | None = None) -> str:
    """The one-screen summary of a run (the latest by default), what `compile-baselines run` prints at its end."""
    summary, warnings = summary_for(results_dir, commit, machine)
    return render(summary, "table", warnings)


__all__ = ["FORMATS", "render", "render_text", "summary_for", "summary_json"]
