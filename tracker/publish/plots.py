"""The report's plots: matplotlib (Agg) figures rendered to inline SVG strings.

Each function takes plain data (labels, per-mode series) and returns one `<svg>` element, so the report page
needs no image files and no JavaScript. Colours are the modes' own (workloads.modes) and shared with the
report's tables.
"""

from __future__ import annotations

import html
import io
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")  # no display on CI and runners; selecting it before pyplot is imported is the documented way

import matplotlib.pyplot as plt
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from tracker.publish.escape import visible
from workloads.modes import BY_NAME, REFERENCE

_FALLBACK_COLORS = ("#56b4e9", "#d55e00", "#f0e442", "#000000")
RC = {
    "svg.fonttype": "none",  # text stays text: smaller files, and the page's font renders it
    "text.parse_math": False,  # a label from the results ("2.1$\\frac{$") is text, never TeX that fails to parse
    "svg.hashsalt": "compile-baselines",  # stable element ids: the same data gives the same page
    "font.size": 8.5,
    "axes.titlesize": 9.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#e4e4e4",
    "grid.linewidth": 0.6,
    "legend.frameon": False,
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Helvetica", "Arial"],
}


def mode_color(mode: str, modes: Sequence[str] = ()) -> str:
    """A mode's colour (workloads.modes); another series (a kernel under test) gets one of the fallbacks."""
    if mode in BY_NAME:
        return BY_NAME[mode].colour
    extra = [m for m in modes if m not in BY_NAME]
    return _FALLBACK_COLORS[extra.index(mode) % len(_FALLBACK_COLORS)] if mode in extra else "#000000"


def to_svg(fig: Figure, title: str) -> str:
    """The figure as an inline <svg> with an accessible title; closes the figure."""
    buf = io.StringIO()
    with plt.rc_context(RC):
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]  # drop the XML declaration and DOCTYPE: the element is embedded in HTML
    # labels from the results: matplotlib escapes their markup; what a reader would not see is shown as escapes
    svg = visible(svg, keep="\n\t")
    label = html.escape(visible(title), quote=True)
    return re.sub(r"<svg\b", lambda _: f'<svg role="img" aria-label="{label}" class="plot"', svg, count=1)


def _figure(width: float, height: float, ncols: int = 1) -> tuple[Figure, list]:
    with plt.rc_context(RC):
        fig, axes = plt.subplots(1, ncols, figsize=(width, height), squeeze=False, layout="constrained")
    return fig, list(axes[0])


def _tick_labels(ax, labels: Sequence[str], max_ticks: int = 12) -> None:
    """Categorical x ticks; thinned when there are many (a year of nightlies), the last one always kept."""
    n = len(labels)
    step = max(1, math.ceil(n / max_ticks))
    idx = sorted(set(range(0, n, step)) | ({n - 1} if n else set()))
    rotate = len(idx) > 5
    ax.set_xticks(idx)
    ax.set_xticklabels([labels[i] for i in idx], rotation=40 if rotate else 0, ha="right" if rotate else "center",
                       rotation_mode="anchor", fontsize=7.5)
    ax.set_xlim(-0.5, n - 0.5)


def _mode_legend(ax, modes: Sequence[str], extra: Sequence = ()) -> None:
    handles = [Line2D([], [], color=mode_color(m, modes), marker="o", ms=3.5, lw=1.4, label=m) for m in modes]
    ax.legend(handles=[*handles, *extra], loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7.5)


LINESTYLES = ("-", "--", ":")  # one per series group (PyTorch version), newest first


def series_plot(x_labels: Sequence[str], wins: Mapping[str, Mapping[str, Sequence[float]]],
                geomean: Mapping[str, Mapping[str, Sequence[float]]], xlabel: str, title: str,
                group_name: str = "torch") -> str:
    """Two panels over the same x: wins per mode, and geomean speedup vs eager per mode (1.0 = eager).

    `wins` and `geomean` map a group (a PyTorch version; one group "" when there is one) to mode -> values per x
    (NaN where the group has no run): a colour per mode, a line style per group, so groups never zigzag."""
    groups = list(wins) or list(geomean)
    modes = list(dict.fromkeys(m for g in groups for m in (*wins.get(g, {}), *geomean.get(g, {}))))
    dense = len(x_labels) > 30  # a year of nightlies: lines only
    with plt.rc_context(RC):
        fig, (ax_w, ax_g) = _figure(9.0, 2.9, ncols=2)
        x = range(len(x_labels))
        for gi, group in enumerate(groups):
            style = {"ls": LINESTYLES[gi % len(LINESTYLES)], "lw": 1.0 if dense else 1.4,
                     "marker": None if dense else "o", "ms": 3.5}
            for mode in modes:
                color = mode_color(mode, modes)
                if mode in wins.get(group, {}):
                    ax_w.plot(x, wins[group][mode], color=color, **style)
                if mode in geomean.get(group, {}) and mode != REFERENCE:
                    ax_g.plot(x, geomean[group][mode], color=color, **style)
        ax_g.axhline(1.0, color=mode_color(REFERENCE), lw=1, ls="-.")
        ax_w.set_ylabel("instances won (count)")
        ax_w.set_title("Wins per mode (fastest median)")
        ax_w.yaxis.get_major_locator().set_params(integer=True)
        ax_w.set_ylim(bottom=0)
        ax_g.set_ylabel("geomean speedup vs eager (x)")
        ax_g.set_title("Geomean speedup vs eager")
        for ax in (ax_w, ax_g):
            _tick_labels(ax, x_labels)
            ax.set_xlabel(xlabel)
        extra = [Line2D([], [], color=mode_color(REFERENCE), lw=1, ls="-.", label=f"{REFERENCE} = 1.0")]
        if len(groups) > 1:
            extra += [Line2D([], [], color="#333333", lw=1.2, ls=LINESTYLES[i % len(LINESTYLES)],
                             label=f"{group_name} {g}") for i, g in enumerate(groups)]
        _mode_legend(ax_g, modes, extra)
        fig.suptitle(title, fontsize=10, x=0.01, ha="left")
    return to_svg(fig, title)


@dataclass(frozen=True)
class Strip:
    """One heat strip: the winning mode (None: no winner) and whether it tied, per instance (row) and x."""

    label: str
    winners: Sequence[Sequence[str | None]]
    tied: Sequence[Sequence[bool]]


def heat_strip(instances: Sequence[str], columns: Sequence[str], strips: Sequence[Strip], modes: Sequence[str],
               xlabel: str, title: str) -> str:
    """Which mode won each instance (rows) at each x (columns), one strip per group (PyTorch version) sharing
    the x axis; a dot marks a tie within noise, blank = no winner (not measured, or every mode failed)."""
    index = {m: i for i, m in enumerate(modes)}
    cmap = ListedColormap([mode_color(m, modes) for m in modes]).with_extremes(bad="#ffffff")
    with plt.rc_context(RC):
        rows = max(len(instances), 1)
        # room for instance names and the legend, then columns wide enough for their labels (capped: a year
        # of nightlies becomes a dense strip with thinned labels)
        width = min(9.5, 4.6 + 0.5 * max(len(columns), 1))
        fig, axes = plt.subplots(len(strips), 1, figsize=(width, 0.9 + (0.35 + 0.17 * rows) * len(strips)),
                                 squeeze=False, sharex=True, layout="constrained")
        for ax, strip in zip(axes[:, 0], strips, strict=True):
            grid = [[index.get(w, math.nan) if w else math.nan for w in row] for row in strip.winners]
            ax.imshow(grid, aspect="auto", cmap=cmap, vmin=-0.5, vmax=len(modes) - 0.5, interpolation="nearest")
            dots = [(c, r) for r, row in enumerate(strip.tied) for c, t in enumerate(row) if t]
            if dots:
                ax.scatter([c for c, _ in dots], [r for _, r in dots], s=14 if len(columns) <= 60 else 4,
                           color="white", edgecolors="black", linewidths=0.6, zorder=3)
            ax.set_yticks(range(len(instances)))
            ax.set_yticklabels(instances, fontsize=7)
            ax.grid(False)
            ax.tick_params(length=0)
            for spine in ax.spines.values():
                spine.set_visible(False)
            if strip.label:
                ax.set_title(strip.label, loc="left", fontsize=8.5)
        _tick_labels(axes[-1, 0], columns)
        axes[-1, 0].set_xlabel(xlabel)
        handles = [Patch(color=mode_color(m, modes), label=m) for m in modes]
        handles.append(Line2D([], [], marker="o", ls="", ms=4, mfc="white", mec="black",
                              label="tie within noise"))
        axes[0, 0].legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7.5)
        fig.suptitle(title, fontsize=10, x=0.01, ha="left")
    return to_svg(fig, title)


def cost_plot(modes: Sequence[str], compile_s: Mapping[str, Sequence[float]],
              peak_mem_mib: Mapping[str, Sequence[float]], title: str) -> str:
    """Compile seconds and peak memory per mode: one dot per instance, the bar is the median."""
    with plt.rc_context(RC):
        fig, (ax_c, ax_m) = _figure(9.0, 2.6, ncols=2)
        for ax, data, label in ((ax_c, compile_s, "compile time (s)"), (ax_m, peak_mem_mib, "peak memory (MiB)")):
            positive = [v for m in modes for v in data.get(m, ()) if v > 0]
            for i, mode in enumerate(modes):
                values = [v for v in data.get(mode, ()) if v > 0]
                if not values:
                    continue
                color = mode_color(mode, modes)
                median = sorted(values)[len(values) // 2]
                ax.barh(i, median, color=color, alpha=0.35, height=0.6)
                # deterministic jitter: the same data draws the same picture
                jitter = [((k * 0.618) % 1 - 0.5) * 0.45 for k in range(len(values))]
                ax.scatter(values, [i + j for j in jitter], s=8, color=color, zorder=3)
            if not positive:
                ax.text(0.5, 0.5, "not recorded" + (" (CUDA only)" if ax is ax_m else ""), transform=ax.transAxes,
                        ha="center", va="center", color="#667085")
            ax.set_yticks(range(len(modes)))
            ax.set_yticklabels(modes)
            ax.invert_yaxis()
            if positive and max(positive) / min(positive) > 50:
                ax.set_xscale("log")
            ax.set_xlabel(label + (", log scale" if ax.get_xscale() == "log" else ""))
            ax.grid(axis="y", visible=False)
        ax_c.set_title("Compile time per instance (bar: median)")
        ax_m.set_title("Peak memory per instance (bar: median)")
        ax_m.set_yticklabels([])
        fig.suptitle(title, fontsize=10, x=0.01, ha="left")
    return to_svg(fig, title)
