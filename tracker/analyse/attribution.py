"""Which workloads a change of the source can move: the files two commits differ in, mapped to workloads, and
within a module of workloads, the workloads whose definitions the change touched (tracker.analyse.sourcediff).

A cell whose workload the change cannot reach (and measured under the same GPU, torch and triton) moved for
another reason than the change: the compiler drew other kernels or launch configs, or the machine timed it
differently. compare reports such a move as "source unchanged" and does not count it; the PR flow measures
only the workloads the change can reach.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from tracker.analyse import sourcediff
from tracker.store.commits import CommitError, git
from workloads import catalog

# Files whose change can move every cell: the harness, the suite, the shared workload contract, the pins; and the
# runner's files that decide how a cell is measured: the worker, its environment (cores, caches, settings), what runs
# beside it on its GPU (the scheduler, the memory ledger) and the loop that starts it.
HARNESS = ("tracker/measure/harness.py", "tracker/measure/gpulock.py", "tracker/measure/cudainit.py",
           "tracker/stats.py", "tracker/runner/worker.py", "tracker/runner/workerenv.py", "tracker/runner/config.py",
           "tracker/runner/schedule.py", "tracker/runner/memledger.py", "tracker/runner/pool.py", "benchmarks/",
           "workloads/spec.py", "workloads/presets.py", "workloads/names.py", "workloads/registry.py",
           "workloads/__init__.py", "pyproject.toml", "asv.conf.json")
# Files that change which candidates exist or how they load: every workload that has a candidate.
KERNEL_HARNESS = ("workloads/kernels/registry.py", "workloads/kernels/__init__.py")


@dataclass(frozen=True)
class Selection:
    workloads: tuple[str, ...]  # in the study's order
    everything: bool
    reasons: tuple[str, ...]  # one per changed file that selected something: "path: what"
    # Every file that selected something is a kernel under test's (a kernel module, in-tree or a plugin's, or the
    # candidates' registry): the workloads' own code and the harness are the same on both sides, so are their modes
    kernel_only: bool = False

    def within(self, scope: Iterable[str]) -> Selection:
        """The selection restricted to `scope` (a kernel repository measures its own workloads only)."""
        keep = set(scope)
        return Selection(tuple(w for w in self.workloads if w in keep), self.everything, self.reasons,
                         self.kernel_only)

    def describe(self) -> str:
        if not self.workloads:
            return "nothing to measure" + (f" ({'; '.join(self.reasons)})" if self.reasons else "")
        what = "all workloads" if self.everything else ", ".join(self.workloads)
        return f"measured {what} ({'; '.join(self.reasons)})"


def _module_path(module: str) -> str:
    return module.replace(".", "/") + ".py"


def workload_modules() -> dict[str, list[str]]:
    """Source file -> the workloads it defines (each Workload's builder lives in its domain module)."""
    from workloads.registry import all_workloads

    out: dict[str, list[str]] = {}
    for w in all_workloads():
        out.setdefault(_module_path(w.builder.__module__), []).append(w.name)
    return out


def kernel_modules() -> dict[str, list[str]]:
    """Source file -> the workloads of the candidates it declares."""
    return {path: [w for w, _ in kernels] for path, kernels in kernel_declarations().items()}


def kernel_declarations() -> dict[str, list[tuple[str, str]]]:
    """Source file -> (workload, mode) of each candidate it declares ("kernel:NAME")."""
    from workloads.kernels.registry import candidates

    out: dict[str, list[tuple[str, str]]] = {}
    for c in candidates():
        out.setdefault(_module_path(c.fn.__module__), []).append((c.workload, c.mode))
    return out


def select_workloads(changed: Iterable[str], workloads_by_file: Mapping[str, list[str]] | None = None,
                     kernels_by_file: Mapping[str, list[str]] | None = None,
                     reached: Mapping[str, frozenset[str]] | None = None) -> Selection:
    """The workloads a change to `changed` (repository paths) can affect; `reached`: of a module of workloads, those
    whose definitions the change touched (`definitions_reached`; a module it does not name: all of its workloads)."""
    workloads_by_file = workload_modules() if workloads_by_file is None else workloads_by_file
    kernels_by_file = kernel_modules() if kernels_by_file is None else kernels_by_file
    all_kernel_workloads = sorted({w for ws in kernels_by_file.values() for w in ws})
    chosen: set[str] = set()
    reasons: list[str] = []
    everything = False
    kernels = True  # so far, only kernel files selected something
    for path in sorted(set(changed)):
        if any(path == h or (h.endswith("/") and path.startswith(h)) for h in HARNESS):
            everything, kernels = True, False
            reasons.append(f"{path}: the harness, all workloads")
        elif reached is not None and path in reached and path in workloads_by_file:
            touched = [w for w in workloads_by_file[path] if w in reached[path]]
            chosen.update(touched)
            kernels = kernels and not touched
            reasons.append(f"{path} changed: the code of {', '.join(touched)}" if touched else
                           f"{path} changed, but no workload's code in it (comments, docstrings or definitions none "
                           "uses)")
        elif path in workloads_by_file:
            chosen.update(workloads_by_file[path])
            kernels = False
            reasons.append(f"{path} changed")
        elif path in kernels_by_file:
            chosen.update(kernels_by_file[path])
            reasons.append(f"{path} changed")
        elif path in KERNEL_HARNESS or (path.startswith("workloads/kernels/") and path.endswith(".py")):
            chosen.update(all_kernel_workloads)  # a new or unknown kernel module: every workload with a kernel
            reasons.append(f"{path}: all workloads with kernels under test")
        elif path.startswith("workloads/") and path.endswith(".py"):
            everything, kernels = True, False  # a helper the domain modules may share
            reasons.append(f"{path}: shared by workloads, all workloads")
    known = catalog.workload_names()
    names = known if everything else tuple(w for w in known if w in chosen)
    return Selection(tuple(names), everything, tuple(reasons), kernels and bool(names))


def source_changes(base: str, head: str, repo_dir: Path) -> Selection | None:
    """The workloads the source differences between two commits can move; None when git cannot tell (a commit
    not in the repository, no git)."""
    try:
        files = [line for line in git(["diff", "--name-only", base, head], repo_dir).splitlines() if line]
    except CommitError:
        return None
    return select_workloads(files, reached=definitions_reached(files, base, head, repo_dir))


def definitions_reached(files: Iterable[str], old: str, new: str, repo_dir: Path,
                        workloads_by_file: Mapping[str, list[str]] | None = None) -> dict[str, frozenset[str]]:
    """Of each module of workloads among `files`, the workloads whose definitions differ between commits `old` and
    `new`, where that can be told (tracker.analyse.sourcediff; a module it cannot tell of is left out: all of its
    workloads)."""
    workloads_by_file = workload_modules() if workloads_by_file is None else workloads_by_file
    out: dict[str, frozenset[str]] = {}
    for path in files:
        if path not in workloads_by_file:
            continue
        try:
            before, after = (git(["show", f"{commit}:{path}"], repo_dir) for commit in (old, new))
        except CommitError:  # added or removed: every workload it defines
            continue
        found = sourcediff.reached(before, after, workloads_by_file[path])
        if found is not None:
            out[path] = found
    return out
