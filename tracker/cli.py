"""`compile-baselines <command>`: dispatches what tracker.cliparse parsed; the work is in the modules."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tracker.cliparse import build_parser
from tracker.errors import EXIT_FAILED, EXIT_USAGE, ToolError, UsageError
from tracker.paths import HTML_SUBDIR, REPO_ROOT, RESULTS_SUBDIR, project_repo, workspace
from workloads.errors import UnknownName, WorkloadsError
from workloads.names import MODES

ROOT = REPO_ROOT


EXIT_CLOSED_PIPE = 128 + signal.SIGPIPE  # what a shell reports for `yes | head -1`'s yes: 141


def _conf_path(args: argparse.Namespace) -> Path:
    return Path(args.config)


def _in_workspace(args: argparse.Namespace, subdir: Path) -> str | None:
    """`subdir` of the kernel repository the command works for (paths.workspace), where the project's own asv
    config would put it into compile-baselines' checkout; None otherwise."""
    here = workspace()
    return str(here / subdir) if here is not None and _conf_path(args).resolve() == ROOT / "asv.conf.json" else None


def _results_dir(args: argparse.Namespace) -> str:
    if args.results_dir:
        return args.results_dir
    from tracker.store import asvfiles

    return _in_workspace(args, RESULTS_SUBDIR) or asvfiles.load_conf(_conf_path(args)).results_dir


def cmd_list(args: argparse.Namespace) -> int:
    from workloads import catalog, plugins
    from workloads.registry import WORKLOADS
    from workloads.shapes import describe

    for w in WORKLOADS:
        print(f"{w.name:32} {w.domain:10} {'prefill only' if w.decode_invariant else 'prefill, decode':16} "
              f"{', '.join(w.tags)}")
    extra = catalog.plugin_workloads()
    if extra or plugins.REGISTRY.plugin_errors:
        print("plugin workloads (presets of their own):")
    for w in extra:
        print(f"  {w.name:30} {w.domain:10} {describe(w.presets)}; {', '.join(w.tags)}  "
              f"({plugins.REGISTRY.sources[w.name.split('.')[0]]})")
    for name, why in plugins.REGISTRY.plugin_errors.items():
        print(f"  workload plugin {name} skipped: {why}")
    print(f"modes: {', '.join(MODES)}\npresets: {', '.join(catalog.preset_names())}")
    from workloads.kernels.registry import REGISTRY

    print("kernels under test (--kernel):")
    for c in REGISTRY.candidates():
        state = "" if c.enabled else f", disabled: {c.disabled_reason}"
        print(f"  {c.key:48} {', '.join(c.devices)}{state}  ({c.source})")
    for name, why in REGISTRY.plugin_errors.items():
        print(f"  plugin {name} skipped: {why}")
    return 0


def cmd_measure(args: argparse.Namespace) -> int:
    from tracker.measure.harness import Settings, measure_cell

    settings = Settings(warmup_ms=args.warmup_ms, rep_ms=args.rep_ms or Settings.rep_ms,
                        warmup_calls=args.warmup_calls, time_limit_s=args.time_limit,
                        cudagraph_mark_step=args.cudagraph_mark_step, cpu_threads=args.cpu_threads)
    mode = f"kernel:{args.kernel}" if args.kernel else args.mode
    result = measure_cell(args.preset, args.workload, mode, device=args.device, settings=settings)
    d = result.as_dict()
    if args.json:
        d["n_samples"] = len(d["samples_ms"])
        if not args.all_samples:
            d.pop("samples_ms")
        print(json.dumps(d, indent=1))
    else:
        rows = [("cell", f"{args.preset} / {args.workload} / {mode} on {result.device}"),
                ("status", result.status + (f" ({result.reason})" if result.reason else ""))]
        if result.ok:
            rows += [("median", f"{result.median_ms:.4f} ms"),
                     ("p25 / p99", f"{result.p25_ms:.4f} / {result.p99_ms:.4f} ms"),
                     ("samples", str(len(result.samples_ms))), ("compile", f"{result.compile_s:.2f} s"),
                     ("vs eager", f"correct (error {result.error_vs_eager:.2g})")]
            if result.peak_mem_bytes is not None:
                rows.append(("peak memory", f"{result.peak_mem_bytes / 2**20:.1f} MiB"))
        rows += [("seconds", ", ".join(f"{k} {v:.3f}" for k, v in result.phase_s.items()) or "-"),
                 ("launch floor", f"{result.launch_us:.1f} us" if result.launch_us else "-"),
                 ("host", ", ".join(f"{k} {v}" for k, v in result.host.items() if k in ("gpu", "torch", "triton")))]
        for k, v in rows:
            print(f"{k:>13}  {v}")
    if result.status == "skipped":  # nothing measured: the work asked for was not done
        print(f"compile-baselines measure: skipped: {result.reason}", file=sys.stderr)
    elif result.device == "cpu":  # said of the timings just taken
        _warn_if_busy("measure", "cpu")
    return 0 if result.ok else 1


def _warn_if_busy(command: str, device: str | None) -> None:
    from tracker.measure.hostinfo import busy_warning
    from tracker.runner import policy

    if policy.device(device) == "cpu" and (warning := busy_warning()):
        print(f"{command}: warning: {warning}", file=sys.stderr)


def _parse_shard(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise UsageError(f"--shard takes i/n, e.g. 1/4, not {text!r}") from None
    if not 1 <= i <= n:
        raise UsageError(f"--shard {text}: i must be between 1 and n")
    return i, n


def cmd_run(args: argparse.Namespace) -> int:
    from tracker.measure.harness import Settings
    from tracker.runner import policy
    from tracker.runner import pool as runner
    from tracker.store import asvfiles, commits
    from tracker.store.cells import check_commit, check_machine_name, default_cells_dir

    device = policy.device(args.device)
    presets = args.preset or policy.default_presets(device)
    from workloads import catalog

    cells = runner.plan(presets, catalog.expand(args.workload) if args.workload else None, args.mode or MODES,
                        kernels=[k for k in args.kernel or ["all"] if k != "none"])
    if args.cell:
        cells = _listed_cells(args.cell, cells)
    shard = _parse_shard(args.shard)
    if shard:
        cells = runner.shard(cells, *shard)
    if not cells:
        raise UsageError("no cells selected: check --preset/--workload/--mode")
    gpus: tuple[str, ...] = ()
    if device == "cuda":
        from tracker.runner import gpus as host_gpus

        host = host_gpus.visible()
        gpus = host_gpus.select(args.gpus, host)
        host_gpus.check_one_model(gpus, host, host_gpus.nvidia_smi(), os.environ.get("CUDA_DEVICE_ORDER"))
    elif args.gpus:
        raise UsageError("--gpus picks CUDA devices; this run measures on the CPU")
    # Everything that can refuse the run does so before anything is measured: the machine and commit name the
    # result file, the results directory must take it.
    machine = check_machine_name(socket.gethostname() if args.machine is None else args.machine)
    conf = asvfiles.load_conf(_conf_path(args), _results_dir(args))
    repo = project_repo()
    commit, date_ms = commits.resolve(args.commit, repo, args.date)
    check_commit(commit)
    asvfiles.check_writable(conf.results_dir)
    jobs = args.jobs or policy.default_jobs(device, len(gpus))
    cfg = runner.RunConfig(
        # absolute: the workers run in the repository root, whatever the working directory here
        store_root=Path(args.cells_dir or default_cells_dir(conf.results_dir)).resolve(),
        machine=machine, commit=commit, jobs=jobs, device=device,
        settings=Settings(warmup_ms=args.warmup_ms, rep_ms=args.rep_ms or policy.default_rep_ms(),
                          warmup_calls=args.warmup_calls, time_limit_s=args.time_limit, cpu_threads=args.cpu_threads),
        cell_timeout_s=args.cell_timeout,
        warm_cache_dir=Path(args.warm_cache).resolve() if args.warm_cache else None,  # the workers' cwd differs
        retry_failed=args.retry_failed,
        replicates=args.replicates or policy.default_replicates(device),
        replicated_modes=None if args.replicate_all_modes else runner.AUTOTUNED_MODES, gpus=gpus)
    print(f"run: commit {commit[:12]}, machine {cfg.machine}, device {device}"
          + (f" ({len(gpus)} GPUs: {','.join(gpus)})" if len(gpus) > 1 else "") + f", presets {', '.join(presets)}"
          + (f", shard {args.shard}" if shard else ""), file=sys.stderr)
    _where_notes(args, cells, repo, commit, conf.results_dir)
    _warn_if_busy("run", device)
    outcome = runner.run_suite(cells, cfg, conf, date_ms)
    failed = [(c, r) for c, r in outcome.cells.items() if r.get("status") == "failed"]
    print(f"\n{len(outcome.cells)} cells: {outcome.count('ok')} ok, {len(failed)} failed, "
          f"{outcome.count('skipped')} skipped in {outcome.wall_s:.0f} s; results: {outcome.results_file}")
    for cell, r in failed:
        print(f"  failed: {cell}: {r.get('reason', '')[:150]}")
    _print_summary_after_run(conf.results_dir, commit, cfg.machine)
    return 0


def _where_notes(args: argparse.Namespace, cells: list[Any], repo: Path, commit: str, results_dir: str) -> None:
    """Say when the record will not be what the user thinks: uncommitted changes measured under a commit that lacks
    them, or a kernel repository's workloads filed in compile-baselines' own checkout."""
    from tracker.store import commits
    from workloads.names import is_plugin_workload

    if dirty := commits.uncommitted(commit, repo):
        print(f"run: note: {len(dirty)} file(s) in {repo} have uncommitted changes (e.g. {dirty[0]}): they are "
              f"measured but recorded under commit {commit[:12]}, which lacks them", file=sys.stderr)
    if workspace() is None and args.results_dir is None and all(is_plugin_workload(c.workload) for c in cells):
        print(f"run: note: plugin workloads, recorded under compile-baselines' own commit {commit[:12]} into "
              f"{results_dir}: run from your kernel repository (cd into it), or set COMPILE_BASELINES_REPO and pass "
              "--results-dir (docs/plugins.md)", file=sys.stderr)


def _listed_cells(listed: list[str], planned: list[Any]) -> list[Any]:
    """The cells named PRESET/WORKLOAD/MODE among those planned; a name that is not one of them is a usage error."""
    by_name = {f"{c.preset}/{c.workload}/{c.mode}": c for c in planned}
    unknown = [x for x in listed if x not in by_name]
    if unknown:
        raise UsageError(f"--cell {unknown[0]!r} is not a cell of this run (PRESET/WORKLOAD/MODE, e.g. "
                         "prefill/llm_rmsnorm/default, within --preset/--workload/--mode)")
    return [by_name[x] for x in dict.fromkeys(listed)]


def _print_summary_after_run(results_dir: str, commit: str, machine: str) -> None:
    try:
        from tracker.publish import summary
    except ImportError:
        return
    print()
    print(summary.render_text(results_dir, commit=commit, machine=machine))


def cmd_merge(args: argparse.Namespace) -> int:
    from tracker.store import merge

    written = merge.merge_results([Path(s) for s in args.sources], Path(_results_dir(args)),
                                  cells_dirs=[Path(c) for c in args.cells_dir] if args.cells_dir else None,
                                  dest_cells=Path(args.dest_cells_dir) if args.dest_cells_dir else None)
    for path in written:
        print(f"merged into {path}")
    return 0


def cmd_summary(args: argparse.Namespace) -> int:
    from tracker.publish.summary import summary_main

    return summary_main(_results_dir(args), args.commit, args.machine, args.format, repo_dir=project_repo())


def cmd_import_csv(args: argparse.Namespace) -> int:
    from tracker.store.studycsv import import_main

    return import_main(args.file, _results_dir(args), args.machine, args.torch, args.gpu, args.commit, args.date,
                       triton=args.triton, driver=args.driver, cuda=args.cuda, launch_us=args.launch_us)


def cmd_comment(args: argparse.Namespace) -> int:
    from tracker.github.comment import comment_main

    return comment_main(args.repo, args.pr, args.body_file, args.only_on_change, None, os.environ)


def cmd_report(args: argparse.Namespace) -> int:
    from tracker.publish.report import report_main

    return report_main(_results_dir(args), args.out)


def cmd_publish(args: argparse.Namespace) -> int:
    from tracker.publish.site import publish_main

    return publish_main(_results_dir(args), _in_workspace(args, HTML_SUBDIR), args.out, config=args.config)


def _compare_format(args: argparse.Namespace) -> str:
    """--format, else a table on a terminal and markdown (the PR comment, as before) into a pipe or --out."""
    if args.format:
        return str(args.format)
    return "table" if args.out is None and sys.stdout.isatty() else "md"


def cmd_compare(args: argparse.Namespace) -> int:
    from tracker.analyse.confirm import COMPILES
    from tracker.publish.comparison import compare_main

    if args.confirm and (args.base is None or args.head is None or args.base_torch):
        raise UsageError("--confirm needs --base and --head (the runs to confirm a change between)")
    if (args.base_torch is None) != (args.head_torch is None):
        raise UsageError("--base-torch and --head-torch go together: compare one torch version with another")
    if args.confirm:
        from tracker.runner.remeasure import confirm_head
        from tracker.store import asvfiles

        confirm_head(asvfiles.load_conf(_conf_path(args), _results_dir(args)), args.base, args.head, args.machine,
                     args.head_machine, args.allow_cross_versions, jobs=args.jobs, repo_dir=project_repo(),
                     history=args.history)
    return compare_main(_results_dir(args), args.base, args.head, args.machine, _compare_format(args), args.fail_on,
                        args.out, args.allow_cross_versions, head_machine=args.head_machine, factor=args.factor,
                        only_changed=args.only_changed, repo_dir=project_repo(), base_torch=args.base_torch,
                        head_torch=args.head_torch,
                        confirm=(0, COMPILES) if args.confirm or args.confirmed_only else (0, 0),
                        attribute_changes=args.attribute, history=args.history, test=args.test)


def cmd_rm(args: argparse.Namespace) -> int:
    from tracker.store.cells import default_cells_dir
    from tracker.store.remove import Selection, rm_main

    results_dir = _results_dir(args)
    sel = Selection(args.commit, args.machine, args.torch, args.since, args.until)
    if sel.empty():
        raise UsageError("say which runs to remove: --commit, --machine, --torch, --since or --until")
    return rm_main(results_dir, args.cells_dir or default_cells_dir(results_dir), sel, args.yes,
                   repo_dir=project_repo())


def cmd_pr(args: argparse.Namespace) -> int:
    from tracker.github.prflow import pr_main

    if (args.repo is None) != (args.pr is None):
        raise UsageError("--repo and --pr go together")
    from workloads import catalog

    scope = catalog.expand(args.workload) if args.workload else None
    from tracker.runner import gpus, policy

    device = policy.device(None)
    # The run's own default for both sides together: on a GPU host they run at once, half of it each (prflow.measure)
    jobs = args.jobs or policy.default_jobs(device, len(gpus.visible()) if device == "cuda" else 0)
    return pr_main(args.base, args.head, args.repo, args.pr, _results_dir(args), jobs, args.machine,
                   args.preset, env=os.environ, only_on_change=not args.always_comment, fail_on=args.fail_on,
                   scope=scope, repo_dir=project_repo(), history=args.history, modes=args.mode)


def cmd_issue(args: argparse.Namespace) -> int:
    from tracker.github.tracking import issue_main

    return issue_main(args.repo, args.title, args.body_file, os.environ)


def cmd_init(args: argparse.Namespace) -> int:
    from tracker.adopt.scaffold import init

    scaffold, written, hand_edit = init(args.dir, args.namespace, args.ref, args.force)
    for path in written:
        print(f"wrote {path}")
    if hand_edit:
        print(f"\n{Path(args.dir) / 'pyproject.toml'} exists and was left as it is: add these lines to it\n")
        print(hand_edit)
    print(f"next (docs/plugins.md): pip install -e {args.dir} beside compile-baselines; `compile-baselines list` "
          f"then shows {scaffold.namespace}.silu. Commit the repository (git init; git add -A; git commit), and from "
          f"inside it `compile-baselines run --workload '{scaffold.namespace}.*'` measures it, recorded under its "
          "commit into its .asv/")
    return 0


def _remote(args: argparse.Namespace) -> Any:
    from tracker.github.gitauth import git_env
    from tracker.store.gitbranch import Remote

    return Remote(project_repo(), args.remote, git_env(os.environ))


def cmd_results(args: argparse.Namespace) -> int:
    from tracker.store import resultsbranch

    if args.action == "fetch":
        return resultsbranch.fetch_main(_remote(args), args.branch, Path(_results_dir(args)), args.machine,
                                        args.commit, project_repo())
    if args.action == "store":
        return resultsbranch.store_main(_remote(args), args.branch, [Path(s) for s in args.sources], args.note)
    if args.branch:
        return resultsbranch.previous_main(args.machine, args.commit, project_repo(), remote=_remote(args),
                                           branch=args.branch)
    return resultsbranch.previous_main(args.machine, args.commit, project_repo(), results_dir=Path(_results_dir(args)))


def cmd_track(args: argparse.Namespace) -> int:
    from tracker.publish.nightly import NightOptions, track_main

    options = NightOptions(args.confirmed_only, args.attribute, args.allow_cross_versions)
    return track_main(_results_dir(args), args.commit, args.out, args.machine, options, project_repo(), args.fail_on)


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "list": cmd_list, "measure": cmd_measure, "run": cmd_run, "merge": cmd_merge, "summary": cmd_summary,
    "import-csv": cmd_import_csv, "comment": cmd_comment, "report": cmd_report, "publish": cmd_publish,
    "compare": cmd_compare, "rm": cmd_rm, "pr": cmd_pr, "issue": cmd_issue, "init": cmd_init,
    "results": cmd_results, "track": cmd_track,
}



def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            code = COMMANDS[args.command](args)
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        return code
    except BrokenPipeError:
        # The reader of our output went away (`run | head`): as CPython's docs on SIGPIPE recommend, send the rest of
        # the output to devnull so that the flush at exit does not fail again, and end as a process that SIGPIPE
        # ended does for its shell (128 + 13), quietly: what was measured is recorded.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_CLOSED_PIPE
    except OSError as e:  # a file where a directory should be, a read-only directory, a full disk
        print(f"compile-baselines {args.command}: error: {e.strerror or e}"
              + (f": {e.filename}" if e.filename else ""), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"compile-baselines {args.command}: interrupted"
              + INTERRUPTED.get(args.command, ""), file=sys.stderr)
        return 130
    except (ToolError, WorkloadsError) as e:  # any other exception is a bug: its traceback says where
        print(f"compile-baselines {args.command}: error: {_line(e)}", file=sys.stderr)
        return _exit_code(e)


def _line(e: ToolError | WorkloadsError) -> str:
    return e.as_option() if isinstance(e, UsageError) else str(e)


def _exit_code(e: ToolError | WorkloadsError) -> int:
    """A ToolError's own code; the workloads' errors as the tracker's: an unknown name is a usage error."""
    if isinstance(e, ToolError):
        return e.exit_code
    return EXIT_USAGE if isinstance(e, UnknownName) else EXIT_FAILED


# What an interrupt leaves behind, per command that writes (the others leave nothing to resume).
_MEASURED = "; finished cells are kept, run again to resume"
INTERRUPTED = {
    "run": _MEASURED, "pr": _MEASURED, "compare": _MEASURED,
    "rm": "; the runs listed as removed are gone, the others untouched: rm again finishes or rolls back the one it "
          "was removing",
    "merge": "; the files listed as merged are complete, the others untouched: merge again to finish (merging the "
             "same input twice gives the same result)",
}


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None,
                  line: str | None = None) -> None:
    """Our own warnings (a plugin skipped, say) as one line, as the commands print theirs; others as Python would."""
    if category.__module__.split(".")[0] in ("tracker", "workloads"):
        print(f"warning: {message}", file=file or sys.stderr)
    else:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


if __name__ == "__main__":
    sys.exit(main())
