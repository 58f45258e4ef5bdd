"""`compile-baselines run`: what the command line asked of a run, turned into its cells and its configuration (the
policy's defaults where it left them open), with everything that can refuse the run checked before anything is
measured, and what to note of it before it starts (`notes`)."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracker.errors import UsageError
from tracker.measure.settings import Settings
from tracker.paths import project_repo, workspace
from tracker.runner import gpus as host_gpus
from tracker.runner import policy
from tracker.runner.config import RunConfig
from tracker.runner.plan import CellId, plan
from tracker.runner.schedule import shard
from tracker.store import asvfiles, commits
from tracker.store.cells import check_commit, check_machine_name, default_cells_dir
from workloads import catalog
from workloads.modes import AUTOTUNED_MODES
from workloads.names import MODES, is_plugin_workload


@dataclass(frozen=True)
class RunRequest:
    """What a run was asked for, as given; None: the policy's default (tracker.runner.policy)."""

    presets: list[str] | None = None
    workloads: list[str] | None = None  # names, or NAMESPACE.* for a plugin's
    modes: list[str] | None = None
    kernels: list[str] | None = None  # all (None), none, NAME or WORKLOAD:NAME
    cells: list[str] | None = None  # only these, PRESET/WORKLOAD/MODE
    shard: tuple[int, int] | None = None  # (i, n): the i-th of n
    device: str | None = None
    gpus: str | None = None  # all, N or indices (tracker.runner.gpus.select)
    machine: str | None = None  # None: the hostname
    commit: str | None = None  # None: HEAD of the repository recorded under
    date_ms: int | None = None
    jobs: int | None = None  # None or 0: the policy's
    cells_dir: str | None = None  # None: beside the results directory
    cell_timeout_s: float = 1800.0
    warm_cache: str | None = None  # None: a cold compile cache per cell
    retry_failed: bool = False
    replicates: int | None = None
    replicate_all_modes: bool = False
    fresh_processes: bool = False  # every measurement in a process of its own (RunConfig.stay off)
    warmup_ms: float = Settings.warmup_ms
    rep_ms: float | None = None  # None: the run's budget (policy.default_rep_ms)
    warmup_calls: int = Settings.warmup_calls
    time_limit_s: float | None = None
    cpu_threads: int = Settings.cpu_threads


@dataclass(frozen=True)
class Prepared:
    """A run that passed every check: its cells, where it records them, and how it measures them."""

    cells: list[CellId]
    config: RunConfig
    conf: Any  # asv's config, its results directory the run's
    presets: list[str]
    repo: Path
    date_ms: int


def prepare(request: RunRequest, config: Path, results_dir: str | None = None) -> Prepared:
    """The run's cells and configuration. Everything that can refuse the run does so here, before anything is
    measured: the cells asked for, the GPUs, the machine and commit (they name the result file), and a results
    directory that must take it."""
    device = policy.device(request.device)
    presets = request.presets or policy.default_presets(device)
    cells = select_cells(request, presets)
    gpus = pick_gpus(device, request.gpus)
    machine = check_machine_name(socket.gethostname() if request.machine is None else request.machine)
    conf = asvfiles.load_conf(config, asvfiles.results_dir_for(config, results_dir))
    repo = project_repo()
    commit, date_ms = commits.resolve(request.commit, repo, request.date_ms)
    check_commit(commit)
    policy.autotune_settle()  # the workers read it: a bad value refuses the run here
    asvfiles.check_writable(conf.results_dir)
    settings = Settings(warmup_ms=request.warmup_ms, rep_ms=request.rep_ms or policy.default_rep_ms(),
                        warmup_calls=request.warmup_calls, time_limit_s=request.time_limit_s,
                        cpu_threads=request.cpu_threads)
    cfg = RunConfig(
        # absolute: the workers run in the repository root, whatever the working directory here
        store_root=Path(request.cells_dir or default_cells_dir(conf.results_dir)).resolve(),
        machine=machine, commit=commit, jobs=request.jobs or policy.default_jobs(device, len(gpus)), device=device,
        settings=settings, cell_timeout_s=request.cell_timeout_s,
        warm_cache_dir=Path(request.warm_cache).resolve() if request.warm_cache else None,  # the workers' cwd differs
        retry_failed=request.retry_failed, replicates=request.replicates or policy.default_replicates(device),
        replicated_modes=None if request.replicate_all_modes else AUTOTUNED_MODES, gpus=gpus,
        memory_budget=policy.memory_budget(gpus) if gpus else None, runs_per_gpu=policy.runs_per_gpu(),
        together=policy.default_together(device),
        stay=not request.fresh_processes)
    return Prepared(cells, cfg, conf, presets, repo, date_ms)


def select_cells(request: RunRequest, presets: list[str]) -> list[CellId]:
    """The cells of the presets, workloads, modes and kernels asked for, then only those listed, then the shard's;
    UsageError when an unknown name or the selection leaves none."""
    cells = plan(presets, catalog.expand(request.workloads) if request.workloads else None,
                 request.modes or MODES, kernels=[k for k in request.kernels or ["all"] if k != "none"])
    if request.cells:
        cells = listed_cells(request.cells, cells)
    if request.shard:
        cells = shard(cells, *request.shard)
    if not cells:
        raise UsageError("no cells selected: check --preset/--workload/--mode")
    return cells


def listed_cells(listed: list[str], planned: list[CellId]) -> list[CellId]:
    """The cells named PRESET/WORKLOAD/MODE among those planned; a name that is not one of them is a usage error."""
    by_name = {f"{c.preset}/{c.workload}/{c.mode}": c for c in planned}
    unknown = [x for x in listed if x not in by_name]
    if unknown:
        raise UsageError(f"--cell {unknown[0]!r} is not a cell of this run (PRESET/WORKLOAD/MODE, e.g. "
                         "prefill/llm_rmsnorm/default, within --preset/--workload/--mode)")
    return [by_name[x] for x in dict.fromkeys(listed)]


def pick_gpus(device: str, spec: str | None) -> tuple[str, ...]:
    """The GPUs a run on `device` measures on: those `spec` picks among this host's, all of one model; none on a
    CPU, where a spec is a usage error."""
    if device != "cuda":
        if spec:
            raise UsageError("--gpus picks CUDA devices; this run measures on the CPU")
        return ()
    host = host_gpus.visible()
    gpus = host_gpus.select(spec, host)
    host_gpus.check_one_model(gpus, host, host_gpus.nvidia_smi(), os.environ.get("CUDA_DEVICE_ORDER"))
    return gpus


def notes(run: Prepared, default_results_dir: bool) -> list[str]:
    """When the record will not be what the user thinks: uncommitted changes measured under a commit that lacks
    them, or a kernel repository's workloads filed in compile-baselines' own checkout (`default_results_dir`: no
    results directory was given)."""
    commit, said = run.config.commit, []
    if dirty := commits.uncommitted(commit, run.repo):
        said.append(f"{len(dirty)} file(s) in {run.repo} have uncommitted changes (e.g. {dirty[0]}): they are "
                    f"measured but recorded under commit {commit[:12]}, which lacks them")
    if workspace() is None and default_results_dir and all(is_plugin_workload(c.workload) for c in run.cells):
        said.append(f"plugin workloads, recorded under compile-baselines' own commit {commit[:12]} into "
                    f"{run.conf.results_dir}: run from your kernel repository (cd into it), or set "
                    "COMPILE_BASELINES_REPO and pass --results-dir (docs/plugins.md)")
    return said
