"""The two runs a comparison reads: base and head, each one commit on one machine under one torch version.

From a results directory, the pair is picked on the files' headers first (`pick_pair`), so that a comparison the
caller refuses (tracker.analyse.compare.check_versions) costs no parsing; then only those two files are read, with
their samples (`load_pair`). A commit is a hash prefix, or a git ref resolved in the repository (HEAD~1, a branch);
with none given, the machine's latest two runs are compared (`default_pair`). From a results table, the pair is
split out of it (`split_pair`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from tracker.errors import ToolError, UsageError
from tracker.stats import float_or_none
from tracker.store.commits import commit_with_results
from tracker.store.results import (
    NoSuchRun,
    RunFile,
    default_cells_dir,
    fingerprints,
    list_runs,
    load_runs,
    select_runs,
    stored_numbers,
)


class CompareError(ToolError):
    pass


class MachineNeeded(CompareError, UsageError):
    """The runs asked for are on several machines and none was named: an input mistake (exit 2)."""


@dataclass(frozen=True)
class RunInfo:
    """What one run was measured with."""

    commit: str
    machine: str
    date: str
    gpu: str
    torch: str
    triton: str
    cuda: str = "unknown"
    driver: str = "unknown"
    launch_us: float | None = None


def _pick(runs: list[RunFile], machine: str | None, commit: str, other: str, unreadable: list[str]) -> RunFile:
    """The one run of `commit` (on `machine`, or the one machine that has both commits)."""
    chosen = select_runs(runs, machine, commit, unreadable)
    if machine is None:
        theirs = {r.machine for r in select_runs(runs, None, other)}
        both = sorted({r.machine for r in chosen} & theirs)
        if len(both) > 1:
            raise MachineNeeded(f"several machines measured both {commit} and {other} ({', '.join(both)}): "
                                "pass --machine")
        if both:
            chosen = [r for r in chosen if r.machine == both[0]]
        elif len({r.machine for r in chosen}) > 1:
            machines = ", ".join(sorted({r.machine for r in chosen}))
            raise MachineNeeded(f"{commit} was measured on several machines ({machines}) and none of them measured "
                                f"{other}: pass --machine")
    torches = sorted({r.torch for r in chosen})
    if len(torches) > 1:
        raise CompareError(f"{commit} on {chosen[0].machine} was measured with several torch versions "
                           f"({', '.join(torches)}): keep one machine name per torch version")
    return chosen[-1]


def _run_info(table: pd.DataFrame, params: dict[str, str] | None = None) -> RunInfo:
    row = table.iloc[0]
    params = params or {}
    launch = float_or_none(row["launch_us"]) if "launch_us" in table else None
    return RunInfo(str(row["commit"]), str(row["machine"]), pd.Timestamp(row["date"]).isoformat(), str(row["gpu"]),
                   str(row["torch"]), str(row["triton"]), params.get("cuda", "unknown"),
                   params.get("driver", "unknown"), launch)


def _split(table: pd.DataFrame, machine: str | None, commit: str) -> pd.DataFrame:
    t = table[table["commit"].astype(str).str.lower().str.startswith(commit.lower())]
    if machine is not None:
        t = t[t["machine"].astype(str) == machine]
    if t.empty:
        raise CompareError(f"no results for commit {commit!r}" + (f" on {machine}" if machine else ""))
    for key in ("commit", "machine", "torch"):
        if t[key].nunique() > 1:
            values = ", ".join(sorted(t[key].astype(str).unique()))
            raise CompareError(f"{commit!r} matches several runs ({key}: {values}): pass a longer commit or --machine")
    return t.reset_index(drop=True)


def split_pair(table: pd.DataFrame, base: str, head: str, machine: str | None = None,
               head_machine: str | None = None) -> tuple[pd.DataFrame, pd.DataFrame, RunInfo, RunInfo]:
    """The base and head runs' rows of a results table (commits as hashes or prefixes) and their RunInfo."""
    tb, th = _split(table, machine, base), _split(table, head_machine or machine, head)
    bi, hi = _run_info(tb), _run_info(th)
    if (bi.commit, bi.machine, bi.torch) == (hi.commit, hi.machine, hi.torch):
        raise CompareError(f"base and head are the same run ({bi.commit[:12]}): nothing to compare")
    return tb, th, bi, hi


def _resolve(runs: list[RunFile], ref: str, repo_dir: Path | None, unreadable: Sequence[str] = ()) -> str:
    """`ref` as a commit with results: a hash prefix of one as given, else the commit git resolves it to
    (tracker.store.commits.commit_with_results: UnknownRef otherwise)."""
    return commit_with_results(ref, [r.commit for r in runs], repo_dir, bool(unreadable))


def pick_pair(results_dir: str | os.PathLike[str], base: str, head: str, machine: str | None = None,
              head_machine: str | None = None,
              repo_dir: Path | None = None) -> tuple[RunFile, RunFile, list[str]]:
    """The base and head runs' files in a results directory (nothing parsed beyond their headers), and the
    warnings about files that could not be listed. Commits are hash prefixes, or git refs resolved in `repo_dir`
    (HEAD~1, a branch, a tag) when no result's commit starts with them."""
    runs, warnings = list_runs(results_dir)
    base, head = _resolve(runs, base, repo_dir, warnings), _resolve(runs, head, repo_dir, warnings)
    b, h = _pick(runs, machine, base, head, warnings), _pick(runs, head_machine or machine, head, base, warnings)
    if (b.commit, b.machine, b.torch) == (h.commit, h.machine, h.torch):
        raise CompareError(f"base and head are the same run ({b.commit[:12]} on {b.machine}): nothing to compare")
    return b, h, warnings


def default_pair(results_dir: str | os.PathLike[str], base: str | None, head: str | None, machine: str | None = None,
                 repo_dir: Path | None = None, head_machine: str | None = None) -> tuple[RunFile, RunFile]:
    """The runs to compare when --base or --head is left out: head, the machine's latest run (by date); base, its
    run before head's. The machine: `machine`, else the only one with results. With `head_machine`, two machines'
    runs: head, the latest run of head_machine (of `head` when given); base, the latest run of `machine` (of `base`
    when given)."""
    runs, unreadable = list_runs(results_dir)
    machines = sorted({r.machine for r in runs})
    if head_machine is not None:
        if machine is None:
            raise MachineNeeded("--head-machine needs --machine, the base's machine")
        sides = []
        for on, ref, other in ((machine, base, head), (head_machine, head, base)):
            mine = select_runs(runs, on, None, unreadable)
            sides.append(mine[-1] if ref is None else
                         _pick(mine, on, _resolve(mine, ref, repo_dir, unreadable), other or ref, unreadable))
        return sides[0], sides[1]
    if machine is None and len(machines) > 1:
        raise MachineNeeded(f"results of several machines ({', '.join(machines)}): pass --machine (and --head-machine "
                            "to compare two of them), or --base and --head")
    mine = select_runs(runs, machine or machines[0])  # oldest first
    h = mine[-1] if head is None else _pick(mine, None, _resolve(mine, head, repo_dir, unreadable), base or head,
                                            unreadable)
    if base is not None:
        return _pick(mine, None, _resolve(mine, base, repo_dir, unreadable), head or base, unreadable), h
    earlier = [r for r in mine[:mine.index(h)] if r.commit != h.commit]
    if not earlier:
        alone = len({r.commit for r in mine}) == 1
        raise NoSuchRun(f"no run on {h.machine} before {h.commit[:8]} to compare it with: "
                        + ("it is the machine's only commit measured; measure another (commit a change, `run` "
                           "again), or compare two machines (--machine A --head-machine B)" if alone else
                           "pass --base"))
    return earlier[-1], h


METHOD_KEYS = ("flush_mib", "host_us")  # recorded per cell by the grown flush (tracker.measure.harness)


def torch_matches(version: str, wanted: str) -> bool:
    """`wanted` is the version or its leading part: 2.11 matches 2.11.0+cu130, not 2.1 (as `rm --torch`)."""
    return version == wanted or version.startswith((wanted + ".", wanted + "+"))


def version_pair(results_dir: str | os.PathLike[str], base_torch: str, head_torch: str, machine: str | None = None,
                 head_machine: str | None = None, base: str | None = None, head: str | None = None,
                 repo_dir: Path | None = None) -> tuple[RunFile, RunFile, list[str], str]:
    """The runs that compare torch `base_torch` (base) with `head_torch` (head): head, the latest run with
    head_torch (of `head` when given; on head_machine or machine when given); base, a run with base_torch of the
    same commit when there is one, else the nearest by date (of `base` when given), on head's machine when it has
    one. Returns the two runs, the warnings, and how base was chosen (said in the notes)."""
    runs, warnings = list_runs(results_dir)

    def side(torch: str, on: str | None, name: str, ref: str | None) -> list[RunFile]:
        chosen = [r for r in runs if torch_matches(r.torch, torch) and (on is None or r.machine == on)]
        if not chosen:
            have = ", ".join(sorted({f"{r.torch} on {r.machine}" for r in runs}))
            raise CompareError(f"--{name}-torch {torch}: no run with that torch version"
                               + (f" on {on}" if on else "") + f"; results have torch {have}")
        if ref is not None:
            chosen = select_runs(chosen, None, _resolve(chosen, ref, repo_dir, warnings), warnings)
        return chosen

    h = side(head_torch, head_machine or machine, "head", head)[-1]  # oldest first: the latest
    bases = side(base_torch, machine, "base", base)
    same = [r for r in bases if r.commit == h.commit]
    pool = same or bases
    pool = [r for r in pool if r.machine == h.machine] or pool
    b = min(pool, key=lambda r: (abs(r.date_ms - h.date_ms), -r.date_ms))
    if (b.commit, b.machine, b.torch) == (h.commit, h.machine, h.torch):
        raise CompareError(f"--base-torch {base_torch} and --head-torch {head_torch} select the same run "
                           f"({b.commit[:12]} on {b.machine}, torch {b.torch}): nothing to compare")
    how = ("the given commit" if base is not None else "the same commit" if same else
           "the nearest run by date (no run of head's commit has it)")
    return b, h, warnings, how


def header_info(r: RunFile) -> RunInfo:
    """A run's versions as its file's header records them: enough to refuse a comparison before parsing."""
    return RunInfo(r.commit, r.machine, "", *(r.params.get(k, "unknown") for k in ("gpu", "torch", "triton")))


def load_pair(results_dir: str | os.PathLike[str], b: RunFile,
              h: RunFile) -> tuple[pd.DataFrame, pd.DataFrame, RunInfo, RunInfo, list[str]]:
    """The two runs' cells with their samples and fingerprints (only those two files and their cell stores are
    read), their RunInfo and the warnings."""
    cells_dir = default_cells_dir(results_dir)
    loaded = load_runs([b, h], with_samples=True, cells_dir=cells_dir)
    t = loaded.table
    t["fingerprint"] = fingerprints(t, cells_dir)
    for key in METHOD_KEYS:  # how each cell was measured, where its run recorded it
        t[key] = stored_numbers(t, cells_dir, key)
    torch = t["torch"].astype(str)
    tb = t[(t["commit"] == b.commit) & (t["machine"] == b.machine) & (torch == b.torch)].reset_index(drop=True)
    th = t[(t["commit"] == h.commit) & (t["machine"] == h.machine) & (torch == h.torch)].reset_index(drop=True)
    for side, frame, run in (("base", tb, b), ("head", th, h)):
        if frame.empty:
            raise CompareError(f"the {side} run {run.commit[:12]} on {run.machine} has no readable cells ({run.path})")
    return tb, th, _run_info(tb, b.params), _run_info(th, h.params), loaded.warnings


def load_history(results_dir: str | os.PathLike[str]) -> pd.DataFrame:
    """Every run of a results directory without samples: the cells' history (a missing directory: none). Files
    that cannot be read are left out; the pair itself is read strictly by load_pair."""
    if not Path(results_dir).is_dir():
        return pd.DataFrame()
    return load_runs(list_runs(results_dir)[0]).table


__all__ = ["METHOD_KEYS", "CompareError", "MachineNeeded", "RunInfo", "default_pair", "header_info", "load_history",
           "load_pair",
           "pick_pair", "split_pair", "torch_matches", "version_pair"]
