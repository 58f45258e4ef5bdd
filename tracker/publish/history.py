"""The report's plots of one machine and preset over time: its figures (wins, geomeans) over commits and across
PyTorch versions, and the best mode of each instance at each commit (a heat strip); from the analysis' history."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd

from tracker.analyse import best as analysis
from tracker.publish import plots

MAX_VERSIONS_OVER_COMMITS = 3  # PyTorch versions drawn over commits (the newest); the version plot has all


def _per_commit(frame: pd.DataFrame, pos: Mapping[str, int], columns: Mapping[str, str]) -> dict[str, list[float]]:
    """mode -> value per commit position (NaN where this series has no run), from columns named per mode."""
    out = {m: [math.nan] * len(pos) for m in columns}
    for r in frame.to_dict("records"):
        for m, col in columns.items():
            out[m][pos[str(r["commit"])]] = float(r[col])
    return out


def history_plots(a: analysis.Analysis, machine: str, preset: str, modes: Sequence[str],
                  instances: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """The preset's figures over commits and across PyTorch versions, and its best-mode heat strip: the
    analysis' history series (one per PyTorch version: a colour per mode, a line style per version), drawn."""
    by_version = analysis.history(a, "torch", machine)
    by_version = by_version[by_version["preset"] == preset]
    over_commits = analysis.history(a, "commit", machine)
    over_commits = over_commits[over_commits["preset"] == preset]
    if over_commits.empty:
        return {}, []
    versions = list(dict.fromkeys(by_version["torch"].astype(str)))  # oldest to newest
    shown = versions[::-1][:MAX_VERSIONS_OVER_COMMITS]
    first_seen = over_commits.groupby("commit", observed=True)["date"].min().sort_values(kind="stable")
    pos = {str(c): i for i, c in enumerate(first_seen.index)}
    dense = len(pos) > 12  # then dates say more than hashes
    labels = ([d.strftime("%Y-%m-%d") for d in first_seen] if dense else [str(c)[:7] for c in first_seen.index])
    xlabel = ("commit date" if dense else "commit") + ", oldest to newest"
    wins_cols = {m: f"wins_{m}" for m in modes if f"wins_{m}" in over_commits}
    geo_cols = {m: f"geomean_{m}" for m in modes if f"geomean_{m}" in over_commits}
    wins, geo = {}, {}
    for v in shown:
        frame = over_commits[over_commits["torch"] == v]
        key = v if len(shown) > 1 else ""
        wins[key], geo[key] = _per_commit(frame, pos, wins_cols), _per_commit(frame, pos, geo_cols)
    out = {"commits": plots.series_plot(labels, wins, geo, xlabel, f"{preset}: over commits"
                                        + (f" (torch {shown[0]})" if len(shown) == 1 else ""))}
    notes = []
    if len(pos) == 1:
        notes.append("One commit so far: the lines over commits start with the next one.")
    if len(versions) > len(shown):
        notes.append(f"Over commits: the {len(shown)} newest of {len(versions)} PyTorch versions; all are in the "
                     "plot across versions.")
    if len(versions) > 1:
        vlabels = [f"{t}\n{str(c)[:7]}" for t, c in zip(by_version["torch"], by_version["commit"], strict=True)]
        vpos = {str(c): i for i, c in enumerate(vlabels)}
        frame = by_version.assign(commit=vlabels)  # one x per version
        out["versions"] = plots.series_plot(vlabels, {"": _per_commit(frame, vpos, wins_cols)},
                                            {"": _per_commit(frame, vpos, geo_cols)},
                                            "PyTorch version (its latest commit measured)",
                                            f"{preset}: across PyTorch versions")
    else:
        notes.append(f"One PyTorch version so far ({versions[0] if versions else '?'}): the plot across versions "
                     "appears once a second one is measured.")
    timeline = analysis.best_mode_timeline(a, machine)
    timeline = timeline[timeline["preset"] == preset]
    row = {w: i for i, w in enumerate(instances)}
    strips = []
    for v in shown:
        winners: list[list[str | None]] = [[None] * len(pos) for _ in instances]
        tied = [[False] * len(pos) for _ in instances]
        for r in timeline[timeline["torch"] == v].to_dict("records"):
            i, j = row.get(str(r["workload"])), pos.get(str(r["commit"]))
            if i is not None and j is not None:
                winners[i][j], tied[i][j] = str(r["winner"]), len(r["ties"]) > 1
        strips.append(plots.Strip(f"torch {v}" if len(shown) > 1 else "", winners, tied))
    out["strip"] = plots.heat_strip(instances, labels, strips, modes, xlabel,
                                    f"{preset}: best mode per instance at each commit (blank: no winner)")
    return out, notes


__all__ = ["MAX_VERSIONS_OVER_COMMITS", "history_plots"]
