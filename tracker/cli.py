"""`compile-baselines <command>`: hands what tracker.cliparse parsed to the one library function that does the
command, and turns the tool's errors into one line and an exit code (tracker.errors); the work is in the modules."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tracker.cliparse import build_parser
from tracker.errors import EXIT_FAILED, EXIT_USAGE, ToolError, UsageError
from tracker.paths import HTML_SUBDIR, REPO_ROOT, project_repo, workspace_subdir
from workloads.errors import UnknownName, WorkloadsError

ROOT = REPO_ROOT
EXIT_INTERRUPTED = 128 + signal.SIGINT  # what a shell reports for a command Ctrl-C ended: 130
EXIT_CLOSED_PIPE = 128 + signal.SIGPIPE  # what a shell reports for `yes | head -1`'s yes: 141


def _results_dir(args: argparse.Namespace) -> str:
    from tracker.store import asvfiles

    return asvfiles.results_dir_for(args.config, args.results_dir)


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


def _compare_format(args: argparse.Namespace) -> str:
    """--format, else a table on a terminal and markdown (the PR comment, as before) into a pipe or --out."""
    if args.format:
        return str(args.format)
    return "table" if args.out is None and sys.stdout.isatty() else "md"


# ---------------------------------------------------------------------------------------------------- the commands


def cmd_list(args: argparse.Namespace) -> int:
    from tracker.publish.listing import list_main

    return list_main()


def cmd_measure(args: argparse.Namespace) -> int:
    from tracker.measure.harness import Settings
    from tracker.measure.onecell import measure_main

    settings = Settings(warmup_ms=args.warmup_ms, rep_ms=args.rep_ms or Settings.rep_ms,
                        warmup_calls=args.warmup_calls, time_limit_s=args.time_limit,
                        cudagraph_mark_step=args.cudagraph_mark_step, cpu_threads=args.cpu_threads)
    mode = f"kernel:{args.kernel}" if args.kernel else args.mode
    return measure_main(args.preset, args.workload, mode, args.device, settings, args.json, args.all_samples)


def cmd_run(args: argparse.Namespace) -> int:
    from tracker.runner.request import RunRequest, run_main

    request = RunRequest(
        presets=args.preset, workloads=args.workload, modes=args.mode, kernels=args.kernel, cells=args.cell,
        shard=_parse_shard(args.shard), device=args.device, gpus=args.gpus, machine=args.machine, commit=args.commit,
        date_ms=args.date, jobs=args.jobs, cells_dir=args.cells_dir, cell_timeout_s=args.cell_timeout,
        warm_cache=args.warm_cache, retry_failed=args.retry_failed, replicates=args.replicates,
        replicate_all_modes=args.replicate_all_modes, warmup_ms=args.warmup_ms, rep_ms=args.rep_ms,
        warmup_calls=args.warmup_calls, time_limit_s=args.time_limit, cpu_threads=args.cpu_threads)
    return run_main(request, Path(args.config), args.results_dir)


def cmd_merge(args: argparse.Namespace) -> int:
    from tracker.store.merge import merge_main

    return merge_main([Path(s) for s in args.sources], Path(_results_dir(args)),
                      cells_dirs=[Path(c) for c in args.cells_dir] if args.cells_dir else None,
                      dest_cells=Path(args.dest_cells_dir) if args.dest_cells_dir else None)


def cmd_summary(args: argparse.Namespace) -> int:
    from tracker.publish.summary import summary_main
    from workloads import catalog

    return summary_main(_results_dir(args), args.commit, args.machine, args.format, repo_dir=project_repo(),
                        workloads=catalog.expand(args.workload) if args.workload else None)


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

    return publish_main(_results_dir(args), workspace_subdir(args.config, HTML_SUBDIR), args.out, config=args.config)


def cmd_compare(args: argparse.Namespace) -> int:
    if args.confirm and (args.base is None or args.head is None or args.base_torch):
        raise UsageError("--confirm needs --base and --head (the runs to confirm a change between)")
    if (args.base_torch is None) != (args.head_torch is None):
        raise UsageError("--base-torch and --head-torch go together: compare one torch version with another")
    from tracker.analyse.confirm import COMPILES
    from tracker.publish.comparison import compare_main

    if args.confirm:
        _confirm(args)
    return compare_main(_results_dir(args), args.base, args.head, args.machine, _compare_format(args), args.fail_on,
                        args.out, args.allow_cross_versions, head_machine=args.head_machine, factor=args.factor,
                        only_changed=args.only_changed, repo_dir=project_repo(), base_torch=args.base_torch,
                        head_torch=args.head_torch,
                        confirm=(0, COMPILES) if args.confirm or args.confirmed_only else (0, 0),
                        attribute_changes=args.attribute, history=args.history, test=args.test)


def _confirm(args: argparse.Namespace) -> None:
    """compare --confirm: measure again at head, in this checkout, each cell that moved."""
    from tracker.runner.remeasure import confirm_head
    from tracker.store import asvfiles

    confirm_head(asvfiles.load_conf(Path(args.config), _results_dir(args)), args.base, args.head, args.machine,
                 args.head_machine, args.allow_cross_versions, jobs=args.jobs, repo_dir=project_repo(),
                 history=args.history)


def cmd_rm(args: argparse.Namespace) -> int:
    from tracker.store.cells import default_cells_dir
    from tracker.store.remove import Selection, rm_main

    results_dir = _results_dir(args)
    selection = Selection(args.commit, args.machine, args.torch, args.since, args.until)
    if selection.empty():
        raise UsageError("say which runs to remove: --commit, --machine, --torch, --since or --until")
    return rm_main(results_dir, args.cells_dir or default_cells_dir(results_dir), selection, args.yes,
                   repo_dir=project_repo())


def cmd_pr(args: argparse.Namespace) -> int:
    if (args.repo is None) != (args.pr is None):
        raise UsageError("--repo and --pr go together")
    from tracker.flows.pr import PrRequest, pr_main
    from tracker.flows.rounds import Budget
    from tracker.github.forge import GitHubForge
    from tracker.runner import policy
    from workloads import catalog

    forge = GitHubForge.for_pr(args.repo, args.pr, os.environ, only_on_change=not args.always_comment)
    request = PrRequest(args.base, args.head, Path(_results_dir(args)),
                        args.jobs or policy.default_jobs_here(),  # both sides together: at once on a GPU host
                        args.machine, args.preset, args.mode, catalog.expand(args.workload) if args.workload else None,
                        args.history, args.fail_on, Budget(args.budget, args.max_compiles, args.compiles),
                        project_repo(), args.full)
    return pr_main(request, forge)


def cmd_bisect(args: argparse.Namespace) -> int:
    from tracker.flows.bisect import BisectRequest, bisect_main
    from tracker.flows.rounds import Budget
    from tracker.runner import policy

    request = BisectRequest(args.good, args.bad, args.cell, args.instance, Path(_results_dir(args)), args.machine,
                            args.from_machine, args.confirmed_only, args.history,
                            args.jobs or policy.default_jobs_here(), Budget(args.budget, args.max_compiles),
                            Path(args.out) if args.out else None, project_repo())
    return bisect_main(request)


def cmd_issue(args: argparse.Namespace) -> int:
    from tracker.github.tracking import issue_main

    return issue_main(args.repo, args.title, args.body_file, os.environ)


def cmd_init(args: argparse.Namespace) -> int:
    from tracker.adopt.scaffold import init_main

    return init_main(args.dir, args.namespace, args.ref, args.force)


def cmd_results(args: argparse.Namespace) -> int:
    from tracker.store import resultsbranch

    if args.action == "fetch":
        return resultsbranch.fetch_main(_remote(args), args.branch, Path(_results_dir(args)), args.machine,
                                        args.commit, project_repo())
    if args.action == "store":
        return resultsbranch.store_main(_remote(args), args.branch, [Path(s) for s in args.sources], args.note)
    if args.branch is not None:
        return resultsbranch.previous_main(args.machine, args.commit, project_repo(), remote=_remote(args),
                                           branch=args.branch)
    return resultsbranch.previous_main(args.machine, args.commit, project_repo(), results_dir=Path(_results_dir(args)))


def _remote(args: argparse.Namespace) -> Any:
    """--remote of the repository, git authenticated with GITHUB_TOKEN when set (made only when used: in Actions it
    masks the token in the log)."""
    from tracker.github.gitauth import git_env
    from tracker.store.gitbranch import Remote

    return Remote(project_repo(), args.remote, git_env(os.environ))


def cmd_track(args: argparse.Namespace) -> int:
    from tracker.publish.nightly import NightOptions, track_main

    options = NightOptions(args.confirmed_only, args.attribute, args.allow_cross_versions)
    return track_main(_results_dir(args), args.commit, args.out, args.machine, options, project_repo(), args.fail_on,
                      Path(args.bisections) if args.bisections else None)


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "list": cmd_list, "measure": cmd_measure, "run": cmd_run, "merge": cmd_merge, "summary": cmd_summary,
    "import-csv": cmd_import_csv, "comment": cmd_comment, "report": cmd_report, "publish": cmd_publish,
    "compare": cmd_compare, "rm": cmd_rm, "pr": cmd_pr, "bisect": cmd_bisect, "issue": cmd_issue, "init": cmd_init,
    "results": cmd_results, "track": cmd_track,
}

# What an interrupt leaves behind, per command that writes (the others leave nothing to resume).
_MEASURED = "; finished cells are kept, run again to resume"
INTERRUPTED = {
    "run": _MEASURED, "pr": _MEASURED, "compare": _MEASURED,
    "bisect": "; the runs of the steps that finished are in the results directory",
    "rm": "; the runs listed as removed are gone, the others untouched: rm again finishes or rolls back the one it "
          "was removing",
    "merge": "; the files listed as merged are complete, the others untouched: merge again to finish (merging the "
             "same input twice gives the same result)",
}


# ---------------------------------------------------------------------------------------------------- exit codes


def main(argv: list[str] | None = None) -> int:
    """Run one command; every line it writes passes through VisibleStream: no text from the results reaches a
    terminal as a control sequence (tracker.publish.escape)."""
    from tracker.publish.escape import VisibleStream

    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = VisibleStream(sys.stdout), VisibleStream(sys.stderr)  # type: ignore[assignment]
    try:
        return _main(argv)
    finally:
        sys.stdout, sys.stderr = streams


def _main(argv: list[str] | None) -> int:
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
        return EXIT_FAILED
    except KeyboardInterrupt:
        print(f"compile-baselines {args.command}: interrupted"
              + INTERRUPTED.get(args.command, ""), file=sys.stderr)
        return EXIT_INTERRUPTED
    except (ToolError, WorkloadsError) as e:  # any other exception is a bug: its traceback says where
        print(f"compile-baselines {args.command}: error: {_line(e)}", file=sys.stderr)
        return _exit_code(e)


def _line(e: ToolError | WorkloadsError) -> str:
    """The error's one line, a library parameter it names shown as the option the user typed."""
    return e.as_option() if isinstance(e, UsageError) else str(e)


def _exit_code(e: ToolError | WorkloadsError) -> int:
    """A ToolError's own code; the workloads' errors as the tracker's: an unknown name is a usage error."""
    if isinstance(e, ToolError):
        return e.exit_code
    return EXIT_USAGE if isinstance(e, UnknownName) else EXIT_FAILED


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None,
                  line: str | None = None) -> None:
    """Our own warnings (a plugin skipped, say) as one line, as the commands print theirs; others as Python would."""
    if category.__module__.split(".")[0] in ("tracker", "workloads"):
        print(f"warning: {message}", file=file or sys.stderr)
    else:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


if __name__ == "__main__":
    sys.exit(main())
