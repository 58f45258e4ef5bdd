"""`compile-baselines report`: a static, self-contained HTML page answering "which baseline should I beat, and
did that change?": per preset the latest run's table, history plots, best-mode timelines, compile cost, how
close each cell comes to the GPU's roofline, and the kernels under test against the best baseline.

The figures (best mode, ties, wins, geomeans) are the analysis layer's, the same the terminal summary prints;
this module only arranges them into view models (Cell, Row, KernelRow, PresetSection, MachineSection) and renders
the page (templates/report.html.j2). The roofline figures come from tracker/publish/roofline.py, the plots over
time from tracker/publish/history.py; plots are inline SVG (tracker/publish/plots.py), and nothing is loaded from
elsewhere.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pandas as pd

from tracker import metrics
from tracker.analyse import best as analysis
from tracker.analyse import breakeven
from tracker.errors import ToolError
from tracker.publish import plots
from tracker.publish.escape import finalize_html, visible
from tracker.publish.history import history_plots
from tracker.publish.roofline import GPU_PEAKS, GpuPeak, Throughput, Work, declared_work, gpu_peak, throughput
from tracker.publish.summaryjson import preset_summary
from tracker.publish.sweeps import SweepView, sweep_views
from tracker.publish.target import Target, target_text
from tracker.publish.units import (
    MICRO,
    calls,
    count,
    margin,
    ms_fixed,
    ms_plain,
    percent,
    speedup,
    speedup_precise,
    spread,
    us,
)
from tracker.stats import float_or_none, relative_spread, too_noisy
from tracker.store import atomic, confined, results
from tracker.store.asvfiles import benchmark_class
from tracker.store.cells import RunKey
from workloads import catalog
from workloads.modes import COMPILED, HEAD_TO_HEAD, MODES, REFERENCE

TEMPLATES = Path(__file__).resolve().parent / "templates"


class ReportError(ToolError):
    pass


# --- what the page shows ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Cell:
    mode: str
    status: str  # ok | failed | skipped | missing
    median_ms: float | None = None
    speedup: float | None = None  # eager median / this median
    best: bool = False  # the analysis' winner (fastest median)
    tied: bool = False  # within noise of the winner (the analysis' tie set)
    throughput: Throughput | None = None
    compile_s: float | None = None
    peak_mem_mib: float | None = None
    title: str = ""  # hover text: the figures behind the cell, or why it did not measure
    too_noisy: bool = False  # its samples spread over more than stats.TOO_NOISY_SPREAD of the median


@dataclass(frozen=True)
class Row:
    workload: str
    domain: str
    cells: tuple[Cell, ...]
    winner: str | None
    ties: tuple[str, ...]
    host_bound: bool
    intensity: float | None
    asv_link: str | None
    target: str | None = None  # the baseline to beat, in the summary's words (tracker.publish.target)


@dataclass(frozen=True)
class KernelRow:
    """A kernel under test in the latest run, against that run's best baseline (analysis.kernel_rows)."""

    workload: str
    candidate: str
    status: str  # ok | failed | skipped
    median_ms: float | None
    best_baseline: str | None
    best_ms: float | None
    speedup_vs_best: float | None
    speedup_vs_eager: float | None
    within_noise: bool
    host_bound: bool
    reason: str  # why a failed or skipped kernel did not measure
    title: str  # hover text: the figures behind the row, or the reason


@dataclass(frozen=True)
class VersionView:
    """One machine's preset across torch versions, each version's latest run (analysis.history(axis="torch")):
    the best mode per instance, and the geomean speedup vs eager per mode."""

    versions: tuple[str, ...]  # in version order
    commits: tuple[str, ...]  # each version's run
    best: tuple[tuple[str, tuple[str | None, ...]], ...]  # (workload, winner per version; None: not measured)
    geomeans: tuple[tuple[str, tuple[float | None, ...]], ...]  # (mode, geomean per version)

    def changed(self, winners: tuple[str | None, ...]) -> bool:
        """Whether an instance's best mode differs between the versions that measured it."""
        return len({w for w in winners if w is not None}) > 1


@dataclass
class PresetSection:
    preset: str
    rows: list[Row]
    figures: dict[str, Any]  # summaryjson.preset_summary: the numbers `compile-baselines summary` prints
    plots: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    kernels: list[KernelRow] = field(default_factory=list)
    versions: VersionView | None = None  # when the machine has runs of two or more torch versions


@dataclass
class MachineSection:
    machine: str
    meta: list[tuple[str, str]]
    peak: GpuPeak | None
    gpu: str
    presets: list[PresetSection]
    runs: int
    sweeps: list[SweepView] = field(default_factory=list)  # plugin workloads' shape sweeps (publish/sweeps.py)

    @property
    def timer(self) -> str:
        """What timed this machine's cells (HTML): the cell records its device, and a CPU cell (gpu "cpu") is timed
        by the harness' CPU timer (tracker.measure.harness.cpu_bench), a CUDA cell by do_bench."""
        if self.gpu == "cpu":
            return ("a CPU timer (<code>time.perf_counter</code> around single calls, in do_bench's result shape; "
                    "no GPU)")
        return "<code>triton.testing.do_bench</code>"


def timers(sections: Sequence[MachineSection]) -> list[Any]:
    """The timers of the page's machines, each once, as HTML; named per machine (escaped) where they differ."""
    from markupsafe import Markup

    by_timer: dict[str, list[str]] = {}
    for s in sections:
        by_timer.setdefault(s.timer, []).append(s.machine)
    if len(by_timer) == 1:
        return [Markup(t) for t in by_timer]
    return [Markup("{} ({})").format(Markup(t), visible(", ".join(machines), keep="\n\t"))
            for t, machines in by_timer.items()]


def asv_link(asv_index: str | None, machine: str, preset: str, workload: str) -> str | None:
    """asv's history graph of one instance (all modes), in asv's URL-hash syntax (parameter values as reprs)."""
    if not asv_index:
        return None
    q = "&".join(f"{k}={quote(v, safe='')}" for k, v in
                 (("machine", machine), ("p-preset", repr(preset)), ("p-workload", repr(workload))))
    latency = metrics.benchmark_names(benchmark_class(workload, REFERENCE))["latency"]
    return f"{asv_index}#{latency}?{q}"


def _cell(r: Mapping[str, Any] | None, mode: str, eager_ms: float | None, winner: str | None,
          ties: Sequence[str], work: Work | None, peak: GpuPeak | None) -> Cell:
    if r is None:
        return Cell(mode, "missing", title="not measured in this run")
    status, reason = str(r["status"]), str(r.get("reason") or "")
    if status == "skipped":
        return Cell(mode, "skipped", title=f"skipped: {reason or 'not measured in this preset'}")
    median = float_or_none(r.get("median_ms"))
    if status != "ok" or median is None:
        return Cell(mode, "failed", title=f"failed: {reason or 'no reason recorded'}")
    vs_eager = eager_ms / median if eager_ms else None
    tp = throughput(work, median, peak)
    lo, hi = float_or_none(r.get("ci_low")), float_or_none(r.get("ci_high"))
    compile_s, mem = float_or_none(r.get("compile_s")), float_or_none(r.get("peak_mem_mib"))
    lines = [f"median {ms_plain(median)}" + (f" (99% CI {lo:.4g} to {hi:.4g})" if lo is not None and hi is not None
                                             else "")]
    if vs_eager is not None:
        lines.append(f"{speedup_precise(vs_eager)}x {REFERENCE}")
    if tp:
        lines.append(tp.detail + (f"; {tp.pct_of_peak:.2g}% of peak" if tp.pct_of_peak is not None else ""))
    if compile_s is not None:
        lines.append(f"compile {compile_s:.1f} s")
    if mem is not None:
        lines.append(f"peak memory {mem:.1f} MiB")
    others = [m for m in ties if m != mode] if mode in ties else []
    if mode == winner:
        lines.insert(0, "best: fastest median" + (f"; tied within noise with {', '.join(others)}" if others else ""))
    elif others:
        lines.insert(0, "tie: within noise of the best (" + ", ".join(others) + ")")
    tied = bool(others) and mode != winner
    q25, q75 = float_or_none(r.get("q25")), float_or_none(r.get("q75"))
    noisy = bool(too_noisy(median, q25, q75))  # no quartiles: not flagged
    if noisy:
        relative = relative_spread(median, q25, q75)
        lines.insert(0, f"TOO NOISY TO JUDGE: its samples spread (IQR) over {spread(relative)} of the median")
    return Cell(mode, "ok", median, vs_eager, best=mode == winner, tied=tied, throughput=tp, compile_s=compile_s,
                peak_mem_mib=mem, title="\n".join(lines), too_noisy=noisy)


def preset_rows(cells: pd.DataFrame, instances: pd.DataFrame, preset: str, modes: Sequence[str],
                peak: GpuPeak | None, asv_index: str | None) -> list[Row]:
    """One run's table for one preset: a row per instance, a cell per mode. `cells` are the run's rows of the
    results table, `instances` its rows of the analysis' instance table (winner, ties, host-bound)."""
    verdicts = {str(r["workload"]): r for r in instances[instances["preset"] == preset].to_dict("records")}
    sub = cells[cells["preset"] == preset]
    rows = []
    for workload in (w for w in catalog.workload_names() if w in set(sub["workload"].astype(str))):
        by_mode = {str(r["mode"]): r for r in sub[sub["workload"] == workload].to_dict("records")}
        eager = by_mode.get(REFERENCE)
        eager_ms = float_or_none(eager["median_ms"]) if eager and eager["status"] == "ok" else None
        v = verdicts.get(workload, {})
        # no winner reads NaN in the instance table's records: none of its modes ranked
        winner = v.get("winner") if isinstance(v.get("winner"), str) else None
        ties = tuple(v.get("ties") or ()) if winner else ()
        work = declared_work(workload, preset)
        rows.append(Row(
            workload, str(next(iter(by_mode.values()))["domain"]),
            tuple(_cell(by_mode.get(m), m, eager_ms, winner, ties, work, peak) for m in modes),
            winner, ties, bool(v.get("host_bound", False)), work.intensity if work else None,
            asv_link(asv_index, str(cells["machine"].iloc[0]), preset, workload),
            target_text(t, micro=MICRO) if (t := Target.of_instance(v)) is not None else None))
    return rows


def _kernel_title(k: Mapping[str, Any], median: float | None, best: float | None) -> str:
    if k["status"] == "skipped":
        return f"skipped: {k['reason'] or 'not measured in this preset'}"
    if k["status"] != "ok":
        return f"failed, never counted as fast: {k['reason'] or 'no reason recorded'}"
    lo, hi = float_or_none(k["ci_low"]), float_or_none(k["ci_high"])
    lines = [f"median {ms_plain(median)}" + (f" (99% CI {lo:.4g} to {hi:.4g})" if lo is not None and hi is not None
                                             else "")]
    if best is not None:
        lines.append(f"best baseline {k['best_baseline']}: {ms_plain(best)}")
    if k["within_noise"]:
        lines.append("within noise of the best baseline: the two are tied")
    if k["host_bound"]:
        lines.append("host-bound: the faster of the two is within a few launch floors, so it measures the host")
    compile_s = float_or_none(k["compile_s"])
    if compile_s is not None:
        lines.append(f"first call (compile) {compile_s:.3g} s")
    return "\n".join(lines)


def kernel_section(a: analysis.Analysis, run: RunKey, preset: str) -> list[KernelRow]:
    """The kernels under test of one run and preset, in workload then candidate order; skipped ones included,
    with their reason (the summary leaves them out)."""
    rows = analysis.kernel_rows(a, commit=run.commit, machine=run.machine, include_skipped=True)
    rows = rows[(rows["torch"] == run.torch) & (rows["preset"] == preset)]
    out = []
    for k in rows.to_dict("records"):
        median, best = float_or_none(k["median_ms"]), float_or_none(k["best_ms"])
        out.append(KernelRow(
            str(k["workload"]), str(k["candidate"]), str(k["status"]), median, k["best_baseline"], best,
            float_or_none(k["speedup_vs_best"]), float_or_none(k["speedup_vs_eager"]), bool(k["within_noise"]),
            bool(k["host_bound"]), str(k["reason"] or ("no reason recorded" if k["status"] != "ok" else "")),
            _kernel_title(k, median, best)))
    return out


# --- compile cost ----------------------------------------------------------------------------------------

def cost_plot(rows: Sequence[Row], modes: Sequence[str], preset: str) -> str | None:
    compile_s = {m: [c.compile_s for r in rows for c in r.cells if c.mode == m and c.compile_s] for m in modes}
    mem = {m: [c.peak_mem_mib for r in rows for c in r.cells if c.mode == m and c.peak_mem_mib] for m in modes}
    if not any(compile_s.values()) and not any(mem.values()):
        return None
    return plots.cost_plot(modes, compile_s, mem, f"{preset}: compile time and peak memory per mode (latest run)")


# --- the page --------------------------------------------------------------------------------------------

def _meta(latest: pd.DataFrame, run: RunKey, machine_info: Mapping[str, Any]) -> list[tuple[str, str]]:
    first = latest.iloc[0]

    def pick(key: str) -> str:
        v = first[key] if key in latest.columns else machine_info.get(key)
        return str(v) if v not in (None, "") else "unknown"

    launch = float_or_none(first["launch_us"]) if "launch_us" in latest.columns else None
    return [("commit", run.commit), ("date", pd.Timestamp(first["date"]).strftime("%Y-%m-%d %H:%M UTC")),
            ("machine", run.machine), ("gpu", pick("gpu")), ("driver", pick("driver")), ("cuda", pick("cuda")),
            ("torch", run.torch), ("triton", pick("triton")),
            ("launch floor", us(launch) if launch else "unknown")]


def version_view(a: analysis.Analysis, machine: str, preset: str) -> VersionView | None:
    """The preset's best mode per instance and geomeans per mode by torch version, each version's latest run; None
    with fewer than two versions."""
    hist = analysis.history(a, "torch", machine)
    hist = hist[hist["preset"].astype(str) == preset]
    if len(hist) < 2:
        return None
    versions = tuple(hist["torch"].astype(str))
    commits = tuple(hist["commit"].astype(str))
    inst = a.instances
    inst = inst[(inst["machine"] == machine) & (inst["preset"].astype(str) == preset)]
    winners: dict[str, list[str | None]] = {}
    for i, (torch, commit) in enumerate(zip(versions, commits, strict=True)):
        run = inst[(inst["torch"].astype(str) == torch) & (inst["commit"].astype(str) == commit)]
        for r in run.itertuples(index=False):
            column = winners.setdefault(str(r.workload), [None] * len(versions))
            column[i] = r.winner if isinstance(r.winner, str) else None
    known = catalog.workload_names()
    order = sorted(winners, key=lambda w: known.index(w) if w in known else len(known))
    geomeans = tuple((m, tuple(float_or_none(g) for g in hist[f"geomean_{m}"])) for m in COMPILED
                     if f"geomean_{m}" in hist)
    return VersionView(versions, commits, tuple((w, tuple(winners[w])) for w in order), geomeans)


def latest_run(table: pd.DataFrame, a: analysis.Analysis, machine: str) -> RunKey:
    """The machine's newest run: latest commit date; at one date, the newest PyTorch (in the analysis' version
    order, which history(axis="torch") follows)."""
    versions = analysis.history(a, "torch", machine)["torch"].astype(str)
    rank = {v: i for i, v in enumerate(dict.fromkeys(versions))}
    runs = table[table["machine"] == machine].groupby(["commit", "torch"], observed=True)["date"].max().reset_index()
    runs["_v"] = runs["torch"].astype(str).map(lambda v: rank.get(v, -1))
    last = runs.sort_values(["date", "_v"], kind="stable").iloc[-1]
    return RunKey(machine=machine, commit=str(last["commit"]), torch=str(last["torch"]))


def build_sections(table: pd.DataFrame, a: analysis.Analysis, asv_index: str | None = None,
                   machine_info: Mapping[str, Mapping[str, Any]] | None = None) -> list[MachineSection]:
    """Everything the page shows, per machine (newest first): the results table's cells arranged with the
    analysis' verdicts (`a` is tracker.analyse.best.analyse(table))."""
    modes = [m for m in MODES if m in set(table["mode"].astype(str))]
    sections = []
    machines = table.groupby("machine", observed=True)["date"].max().sort_values(ascending=False).index
    for machine in map(str, machines):
        run = latest_run(table, a, machine)
        in_run = (table["commit"] == run.commit) & (table["machine"] == machine) & (table["torch"] == run.torch)
        latest = table[in_run]
        inst = a.instances
        inst = inst[(inst["commit"] == run.commit) & (inst["machine"] == machine) & (inst["torch"] == run.torch)]
        gpu = str(latest["gpu"].iloc[0])
        peak = gpu_peak(gpu)
        presets = []
        for preset in (p for p in catalog.preset_names() if p in set(latest["preset"].astype(str))):
            rows = preset_rows(latest, inst, preset, modes, peak, asv_index)
            figures = preset_summary(a, run.commit, machine, run.torch, preset, table=latest)
            section = PresetSection(preset, rows, figures, kernels=kernel_section(a, run, preset),
                                    versions=version_view(a, machine, preset))
            section.plots, section.notes = history_plots(a, machine, preset, modes, [r.workload for r in rows])
            cost = cost_plot(rows, modes, preset)
            if cost:
                section.plots["cost"] = cost
            presets.append(section)
        runs = table[table["machine"] == machine].groupby(["commit", "torch"], observed=True).ngroups
        sections.append(MachineSection(machine, _meta(latest, run, (machine_info or {}).get(machine, {})), peak, gpu,
                                       presets, runs, sweep_views({p.preset: (p.rows, p.kernels) for p in presets})))
    return sections


def environment() -> Any:
    """The report templates' jinja2 environment, with the figures' filters."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True, finalize=finalize_html,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(ms=ms_fixed, pct=percent, x=speedup, geomean=speedup_precise, margin=margin)
    env.globals.update(reference=REFERENCE, head_to_head=HEAD_TO_HEAD, count=count,
                       break_even_meaning=breakeven.MEANING, break_even_limits=breakeven.LIMITS)
    return env


def render(sections: Sequence[MachineSection], modes: Sequence[str], asv_index: str | None,
           generated: dt.datetime) -> str:
    from markupsafe import Markup

    return environment().get_template("report.html.j2").render(
        sections=sections, modes=modes, mode_colors={m: plots.mode_color(m, modes) for m in modes},
        asv_index=asv_index, generated=generated.strftime("%Y-%m-%d %H:%M UTC"), peaks=[p for _, p in GPU_PEAKS],
        timers=timers(sections), calls=calls,
        svg=Markup)  # the plots are our own matplotlib output


def machine_files(results_dir: Path) -> dict[str, dict[str, Any]]:
    """asv's machine.json of each machine: driver and CUDA versions live there, not in the results table."""
    out = {}
    for path in confined.files(results_dir, "*/machine.json", warn=confined.quiet):  # the results' reader warns
        try:
            data = confined.read_json(results_dir, path)
        except (OSError, ValueError):
            continue
        out[str(data.get("machine", path.parent.name))] = data
    return out


def build_page(table: pd.DataFrame, asv_index: str | None = None,
               machine_info: Mapping[str, Mapping[str, Any]] | None = None,
               generated: dt.datetime | None = None) -> str:
    a = analysis.analyse(table)
    sections = build_sections(table, a, asv_index, machine_info)
    modes = [m for m in MODES if m in set(table["mode"].astype(str))]
    return render(sections, modes, asv_index, generated or dt.datetime.now(dt.UTC))


def write_report(results_dir: str | os.PathLike[str], out: str | os.PathLike[str], *, asv_index: str | None = None,
                 warn: Callable[[str], object]) -> int:
    """Write `<out>/index.html` from the results in `results_dir`, the results' warnings said through `warn` first;
    its size in bytes. `asv_index`: the URL of asv's published index.html relative to the report, when it is
    published beside it."""
    results_dir = Path(results_dir)
    loaded = results.load_results(results_dir)
    for warning in loaded.warnings:
        warn(f"report: warning: {warning}")
    if loaded.table.empty:
        raise ReportError(f"no measured cells in {results_dir}: run `compile-baselines run` or pass --results-dir")
    html = build_page(loaded.table, asv_index, machine_files(results_dir))
    atomic.write_text(Path(out) / "index.html", html)  # an OSError (read-only, a file in the way) is the CLI's one line
    return len(html)


def written(index: Path, size: int) -> str:
    """What `compile-baselines report` says of the report it wrote (`index`: where it is, once in place)."""
    return f"report: {index.resolve()} ({size // 1024} KiB, self-contained)"
