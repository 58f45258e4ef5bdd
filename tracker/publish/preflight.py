"""What `publish` checks before it writes anything: that the output directory is a site it may replace, and that the
results describe themselves consistently (each machine's machine.json, the suite's benchmarks.json) and hold no link
or special file (asv's publish reads every file there, through links); and how it replaces the site: built in a
folder beside it, then moved into its place (`replacing`).

asv publish empties its output directory before writing the site. A directory holding anything else (a user's
notes, a thesis) is refused unless it carries MARKER, which every site `publish` writes gets, or is a site an earlier
version of compile-baselines wrote (its index.html links the report). asv's pages show each machine's machine.json as
the machine's description; one that no result file beside it agrees with would publish a contradiction (another GPU,
another torch), so it is refused, as `merge` refuses it.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from tracker.errors import ToolError, UsageError
from tracker.store import atomic, confined
from tracker.store.asvfiles import VERSION_KEYS
from tracker.store.results import list_runs

MARKER = ".compile-baselines-site"  # in a site's root: publish may replace this directory
# Beside the site: .SITE.publish-PID, the new site being built; .SITE.replaced-PID, the old one being replaced
BUILDING, REPLACED = ".publish-", ".replaced-"
_EARLIER_SITE = 'id="nav-li-baseline-report"'  # the report link every earlier site's index.html carries
_MACHINE_KEYS = ("machine", *VERSION_KEYS)
_REWRITE = "`compile-baselines merge RESULTS --results-dir NEW` writes one from the result files"


class PreflightError(ToolError):
    pass


class UnusableOutput(UsageError):
    """--out names a place publish cannot write a site to without losing what is there (exit 2: choose another)."""


def check_output(site: Path) -> None:
    """UnusableOutput unless `site` is absent, empty, or a site publish wrote (MARKER, or an earlier version's)."""
    if not site.exists():
        return
    if not site.is_dir():
        raise UnusableOutput(f"output {site} is a file, not a directory: choose another --out")
    if not any(site.iterdir()) or (site / MARKER).is_file() or _earlier_site(site):
        return
    raise UnusableOutput(f"output {site} is not empty and is not a site compile-baselines wrote (no {MARKER}): "
                         "publish replaces its output directory, so choose a new or empty one")


def _earlier_site(site: Path) -> bool:
    try:
        return (site / "report" / "index.html").is_file() and _EARLIER_SITE in confined.read_text(
            site, site / "index.html")
    except (OSError, ValueError):
        return False


def mark(site: Path) -> None:
    """Mark `site` as one publish wrote (and may replace)."""
    (site / MARKER).write_text("written by `compile-baselines publish`, which replaces this directory each time\n",
                               encoding="utf-8")


def check_results(results_dir: Path) -> None:
    """PreflightError naming the file and what to do when a machine folder with result files has no readable
    machine.json, when a machine.json agrees with none of the result files beside it, or when benchmarks.json (the
    suite's description asv publishes from) cannot be read, or when a link or special file is anywhere in the
    results (asv reads them all, through links). No result file at all: ResultsError (list_runs's)."""
    if strays := confined.strays(results_dir):
        more = f" (and {len(strays) - 1} more)" if len(strays) > 1 else ""
        raise PreflightError(f"{strays[0]}{more}: asv publish would read through it; remove it from the results")
    runs, _ = list_runs(results_dir)
    for folder in sorted({r.path.parent for r in runs}):
        entry = _machine_entry(folder / "machine.json")
        params = [r.params for r in runs if r.path.parent == folder]  # oldest first
        if not any(_agrees(entry, p) for p in params):
            newest = params[-1]
            differ = ", ".join(f"{k} {entry[k]} (the results: {newest.get(k)})" for k in _MACHINE_KEYS
                               if k in entry and k in newest and str(entry[k]) != str(newest[k]))
            raise PreflightError(f"{folder / 'machine.json'} contradicts every result file beside it ({differ}): "
                                 f"asv's pages would show it; fix it, or delete it and merge ({_REWRITE})")
    _check_benchmark_list(Path(results_dir) / "benchmarks.json")


def _machine_entry(path: Path) -> dict[str, object]:
    if not path.is_file():
        raise PreflightError(f"{path} is missing: asv publish needs each machine's machine.json beside its result "
                             f"files; restore it ({_REWRITE})")
    try:
        entry = confined.read_json(path.parent, path)
    except (OSError, ValueError) as e:
        raise PreflightError(f"{path} is not readable JSON ({e}): fix it, or delete it and merge ({_REWRITE})"
                             ) from None
    if not isinstance(entry, dict):
        raise PreflightError(f"{path} is not an asv machine file: fix it, or delete it and merge ({_REWRITE})")
    return entry


def _agrees(entry: dict[str, object], params: dict[str, str]) -> bool:
    return all(str(entry[k]) == str(params[k]) for k in _MACHINE_KEYS if k in entry and k in params)


def _check_benchmark_list(path: Path) -> None:
    """benchmarks.json, when present, must be asv's suite description (publish writes it when absent)."""
    if not path.exists():
        return
    from asv.benchmarks import Benchmarks

    try:
        data = json.loads(confined.read_text(path.parent, path))
        ok = isinstance(data, dict) and data.get("version") == Benchmarks.api_version and all(
            isinstance(v, dict) and "name" in v for k, v in data.items() if k != "version")
        why = "" if ok else f"not asv's suite description, version {Benchmarks.api_version}"
    except (OSError, ValueError, RecursionError) as e:
        why = " ".join(str(e).split())
    if why:
        raise PreflightError(f"{path} cannot be read ({why}): delete it and publish again, which writes it anew")


def _beside(site: Path, kind: str) -> list[Path]:
    return confined.folders(site.parent, f".{glob.escape(site.name)}{kind}*", warn=confined.quiet)


def finish_interrupted(site: Path) -> list[str]:
    """Roll back what an interrupted publish left beside `site`, one line each: a site half built is deleted; an old
    site moved aside goes back in place when `site` is missing (the publish died between its two moves), else is
    deleted. Only under `replacing`'s lock, where what is found is a dead publish's."""
    done = []
    for build in _beside(site, BUILDING):
        shutil.rmtree(build, ignore_errors=True)
        done.append(f"removed {build}, a site an interrupted publish left half built")
    for old in _beside(site, REPLACED):
        if not site.exists():
            os.replace(old, site)
            done.append(f"restored {site}, which an interrupted publish had moved to {old}")
        else:
            shutil.rmtree(old, ignore_errors=True)
            done.append(f"removed {old}, the site an interrupted publish replaced")
    return done


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr)


@contextlib.contextmanager
def replacing(site: Path, say: Callable[[str], object] = _to_stderr) -> Iterator[Path]:
    """A new folder beside `site` to build the new site in, put in `site`'s place when the block ends (`_swap`),
    deleted when it raises: `site` is the old site or the new one, whole, and what an interrupted publish leaves
    beside it is rolled back by the next one (`finish_interrupted`; `say` each line). Holds a lock on the folder
    `site` is in; under it, `site` is checked (`check_output`) before anything is written."""
    site.parent.mkdir(parents=True, exist_ok=True)
    with atomic.locked(site.parent, directory=True):
        for line in finish_interrupted(site):
            say(f"publish: {line}")
        check_output(site)
        build = site.with_name(f".{site.name}{BUILDING}{os.getpid()}")
        build.mkdir()
        try:
            yield build
            _swap(build, site)
        except BaseException:
            shutil.rmtree(build, ignore_errors=True)
            raise


def _swap(build: Path, site: Path) -> None:
    """`build` in `site`'s place: the old site moved aside, the new one moved in, the old one deleted. Two renames:
    a failure of the second moves the old site back; a process killed between them leaves `site` missing and the
    old site aside, which the next publish puts back."""
    old = site.with_name(f".{site.name}{REPLACED}{os.getpid()}")
    moved = site.exists()
    if moved:
        os.replace(site, old)
    try:
        os.replace(build, site)
    except BaseException:
        if moved:
            os.replace(old, site)
        raise
    shutil.rmtree(old, ignore_errors=True)


__all__ = ["MARKER", "PreflightError", "UnusableOutput", "check_output", "check_results", "finish_interrupted",
           "mark", "replacing"]
