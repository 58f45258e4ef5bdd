"""`compile-baselines <command>`: argument parsing and exit codes only; the work is in the modules."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import socket
import sys
import textwrap
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tracker.analyse.verdicts import FAIL_ON, TESTS
from tracker.errors import EXIT_FAILED, EXIT_USAGE, ToolError, UsageError
from tracker.paths import HTML_SUBDIR, REPO_ROOT, RESULTS_SUBDIR, project_repo, workspace
from workloads.errors import UnknownName, WorkloadsError
from workloads.names import MODES

ROOT = REPO_ROOT
FORMATS_COMPARE = ("table", "md", "json")  # tracker.publish.comparison.FORMATS, without loading pandas


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


def _number(kind: type, minimum: float, strict: bool) -> Callable[[str], Any]:
    """An argparse type: a finite number of `kind` above `minimum` (or at least it, unless `strict`)."""
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value) or value < minimum or (strict and value == minimum):
            raise argparse.ArgumentTypeError(f"{text!r}: give a number {'>' if strict else '>='} {minimum:g}")
        return value

    return parse


POSITIVE, NON_NEGATIVE, COUNT = _number(float, 0, True), _number(float, 0, False), _number(int, 0, False)
AT_LEAST_ONE = _number(int, 1, False)


DESCRIPTION = """\
Measure eager and the four torch.compile modes on the study's 23 workloads, record them as asv results, and
track which mode is the baseline your kernel has to beat: per run (summary), between two runs (compare), as a
PR comment (pr) and as an HTML report (report, publish)."""

EPILOG = """\
everyday use:
  compile-baselines run                         measure (tiny preset on CPU, prefill + decode on CUDA)
  compile-baselines summary                     the best mode per workload in the latest run
  compile-baselines compare                     the latest two runs, as a table in a terminal
  compile-baselines compare --base HEAD~1 --head HEAD --only-changed
  compile-baselines rm --commit 1a2b3c4d        list a run to drop; add --yes to drop it

`compile-baselines COMMAND --help` has every option of a command.
exit status: 0 done, 1 the work failed (the error says why), 2 a mistake in the command line or its inputs,
3 compare/pr/track --fail-on held, 130 interrupted, 141 the reader of the output went away (`run | head`)."""


RESULTS_HELP = ("asv results directory (default: .asv/results of the kernel repository it runs in or "
                "COMPILE_BASELINES_REPO names, else asv.conf.json's)")


def _date(end_of_day: bool = False, recorded: bool = False) -> Callable[[str], int]:
    """An argparse type: ms since the epoch or an ISO date/time (tracker.store.commits.parse_date_ms); `recorded`:
    a run's date, which asv takes between 2000 and 2100 (tracker.store.asvjson.date_problem)."""
    def parse(text: str) -> int:
        from tracker.store.asvjson import date_problem
        from tracker.store.commits import parse_date_ms

        try:
            ms = parse_date_ms(text, end_of_day)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        if recorded and (problem := date_problem(ms)):
            raise argparse.ArgumentTypeError(problem)
        return ms
    return parse


def _factor(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value >= 1 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"takes a ratio of at least 1, e.g. 1.1 for 10%, not {text!r}")
    return value


def version_text() -> str:
    """'compile-baselines 0.1.0 (commit 1a2b3c4d5e6f, /path/to/checkout)': the package's version and, since it is
    installed from a checkout, which commit of which checkout runs."""
    from importlib import metadata

    from tracker.store.commits import CommitError, git

    try:
        version = metadata.version("compile-baselines")
    except metadata.PackageNotFoundError:
        version = "(not installed)"
    try:
        commit = git(["rev-parse", "HEAD"], ROOT, timeout=10).strip()[:12]
    except CommitError:
        commit = "unknown"
    return f"compile-baselines {version} (commit {commit}, {ROOT})"


class _Version(argparse.Action):
    """--version, worked out only when asked for (it runs git)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        print(version_text())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="compile-baselines", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=_Version, nargs=0, help="the version and the checkout's commit, then exit")
    parser.add_argument("--config", default=str(ROOT / "asv.conf.json"), help="asv config (default: the project's)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, summary: str, example: str, more: str = "") -> argparse.ArgumentParser:
        """A subcommand: `summary` in the command list and atop its --help, then `more`; `example` under it."""
        text = textwrap.fill(summary[0].upper() + summary[1:] + "." + more, 100)
        return sub.add_parser(name, help=summary, description=text,
                              epilog="example:\n  " + example.replace("\n", "\n  "),
                              formatter_class=argparse.RawDescriptionHelpFormatter)

    command("list", "the 23 workloads, the modes, the presets and the kernels under test",
            "compile-baselines list")

    def timing(p: argparse.ArgumentParser) -> None:
        g = p.add_argument_group("measurement settings (defaults: the study's, but run's --rep-ms)")
        g.add_argument("--warmup-ms", type=NON_NEGATIVE, default=100.0, help="do_bench warmup budget (ms)")
        g.add_argument("--rep-ms", type=POSITIVE, default=None,
                       help="do_bench measurement budget (ms; default: measure 1000, the study's; run 500 a cell)")
        g.add_argument("--warmup-calls", type=COUNT, default=20, help="direct calls after compiling")
        g.add_argument("--time-limit", type=POSITIVE, default=None, help="seconds for a whole cell, compile included")
        g.add_argument("--cpu-threads", type=_number(int, 1, False), default=1, metavar="N",
                       help="on a CPU: the threads a cell compiles its kernels for and runs on (default 1: steady "
                            "timings on a shared or busy host)")

    m = command("measure", "measure one cell in this process, without asv, and print it",
                "compile-baselines measure --preset tiny --workload llm_rmsnorm --mode default\n"
                "compile-baselines measure --preset decode --workload llm_rmsnorm --kernel triton_rmsnorm --json")
    m.add_argument("--preset", required=True, help="input shapes: tiny runs on a CPU (see `list`)")
    m.add_argument("--workload", required=True, metavar="WORKLOAD", help="see `list`")
    what = m.add_mutually_exclusive_group(required=True)
    what.add_argument("--mode", choices=MODES, help="eager or a torch.compile mode")
    what.add_argument("--kernel", metavar="NAME", help="a registered candidate of WORKLOAD instead of a mode")
    m.add_argument("--device", choices=("cpu", "cuda"), default=None, help="default: cuda when available")
    m.add_argument("--json", action="store_true", help="print the result as JSON")
    m.add_argument("--all-samples", action="store_true", help="with --json: include every sample")
    m.add_argument("--cudagraph-mark-step", action="store_true",
                   help="call torch.compiler.cudagraph_mark_step_begin() before each call (not the study's way)")
    timing(m)

    r = command("run", "measure cells (a fresh process each) and record them as asv results, then print the summary",
                "compile-baselines run --workload llm_rmsnorm llm_layernorm -j 4\n"
                "compile-baselines run --commit v1.2 --date 2026-11-23", more=(
                    " An interrupted run resumes: finished cells are kept (the cell store) and not measured again."
                    " Exit status: 0 when the cells were measured and recorded (failed cells too: a failure is data),"
                    " 1 when nothing was recorded (every cell skipped, e.g. prefill on a CPU host) or the run failed,"
                    " 2 for a mistake in the arguments."))
    r.add_argument("--preset", nargs="+",
                   help="default: tiny on CPU, prefill+decode on CUDA (and plugins' presets likewise; see `list`)")
    r.add_argument("--workload", nargs="+", metavar="WORKLOAD",
                   help="names, or NAMESPACE.* for a plugin's workloads (default: all, plugins' included)")
    r.add_argument("--mode", nargs="+", choices=MODES, help="default: all five")
    r.add_argument("--kernel", nargs="+", metavar="K",
                   help="kernels under test: all (default), none, NAME or WORKLOAD:NAME (see `list`)")
    r.add_argument("--machine", help="asv machine name (default: hostname)")
    r.add_argument("--commit", help="record under this commit: a hash or a git ref (default: HEAD)")
    r.add_argument("--date", type=_date(recorded=True), metavar="WHEN",
                   help="the commit's date, as asv orders runs: 2026-11-23, 2026-11-23T10:00:00Z (UTC unless an "
                        "offset is given) or ms since the epoch (default: from git, else now)")
    r.add_argument("-j", "--jobs", type=COUNT,
                   help="cells at once (default, or 0: 1 on CPU; on CUDA one per core, up to 16 a GPU)")
    r.add_argument("--shard", help="i/n: run the i-th of n cost-balanced shards (one a host)")
    r.add_argument("--gpus", metavar="SPEC",
                   help="the GPUs of this host to measure on, all of one model: all (default), N (the first N), "
                        "or indices 0,2,5")
    r.add_argument("--device", choices=("cpu", "cuda"), help="default: cuda when available")
    r.add_argument("--results-dir", help=RESULTS_HELP)
    r.add_argument("--cells-dir", help="the cell store (default: beside the results directory)")
    r.add_argument("--cell-timeout", type=POSITIVE, default=1800.0, help="kill a cell's process after this (s)")
    r.add_argument("--warm-cache", help="persistent compile cache directory (default: cold, a fresh one per cell)")
    r.add_argument("--retry-failed", action="store_true", help="measure failed cells again")
    r.add_argument("--replicates", type=AT_LEAST_ONE, default=None, metavar="N",
                   help="fresh compiles per cell of the autotuned modes (max-autotune, max-autotune-no-cudagraphs), "
                        "each in its own process; the best is recorded with the spread (default: 3 on CUDA, 1 on "
                        "CPU; a cell already measured gets the replicates it lacks)")
    r.add_argument("--replicate-all-modes", action="store_true", help="--replicates applies to every mode")
    r.add_argument("--cell", nargs="+", metavar="P/W/M",
                   help="only these cells, PRESET/WORKLOAD/MODE (how a candidate change is re-measured)")
    timing(r)

    g = command("merge", "combine the results directories of shards into one",
                "compile-baselines merge shard1/results shard2/results --results-dir .asv/results",
                more=" A measurement wins over a failure; merging the same shards again changes nothing (a retried "
                     "step is safe); a directory merged into itself is refused.")
    g.add_argument("sources", nargs="+", help="asv results directories of the shards")
    g.add_argument("--results-dir", help="destination (default: as for run)")
    g.add_argument("--cells-dir", nargs="+", metavar="DIR",
                   help="the shards' cell stores, whose failure reasons come along (default: beside each source)")
    g.add_argument("--dest-cells-dir", help="the destination's cell store (default: beside --results-dir)")

    def reading(p: argparse.ArgumentParser) -> None:
        p.add_argument("--results-dir", help=RESULTS_HELP)

    s = command("summary", "wins, geomeans, margins, domains, ties of the latest (or a given) run",
                "compile-baselines summary\ncompile-baselines summary --commit HEAD~1 --format md")
    reading(s)
    s.add_argument("--commit", help="a hash, a prefix, or a git ref such as HEAD~1 (default: the latest run)")
    s.add_argument("--machine", help="asv machine name (needed when several are present)")
    s.add_argument("--format", choices=("table", "md", "json"), default="table",
                   help="table: text for a terminal (default); md: markdown; json: a stable shape for scripts")

    c = command("import-csv", "turn the study's results CSV into asv results",
                "compile-baselines import-csv tests/fixtures/study/raw_results.csv --machine h100 --torch 2.9.1 "
                "--gpu 'NVIDIA H100 80GB HBM3'")
    reading(c)
    c.add_argument("file", help="CSV with columns workload, shape_preset, domain, tag, mode, status, ...")
    c.add_argument("--machine", required=True, help="asv machine name to record under")
    c.add_argument("--torch", required=True, help="torch version the CSV was measured with, e.g. 2.9.1")
    c.add_argument("--gpu", help="GPU name, e.g. 'NVIDIA H100 80GB HBM3'")
    c.add_argument("--commit", help="commit hash (default: derived from the file's content)")
    c.add_argument("--date", type=_date(recorded=True), metavar="WHEN",
                   help="2026-11-23, 2026-11-23T10:00:00Z or ms since the epoch (default: the file's time)")
    c.add_argument("--triton", help="triton version, if known")
    c.add_argument("--driver", help="GPU driver version, if known")
    c.add_argument("--cuda", help="CUDA version, if known")
    c.add_argument("--launch-us", type=POSITIVE, help="the measuring host's launch floor, if known (us)")

    d = command("compare", "base vs head: which cells changed beyond noise, and which best modes",
                "compile-baselines compare\n"
                "compile-baselines compare --base HEAD~1 --head HEAD --only-changed --factor 1.2\n"
                "compile-baselines compare --base main --head 1a2b3c4d --format md --out comment.md\n"
                "compile-baselines compare --machine h100-c --head-machine h100-d\n"
                "compile-baselines compare --base-torch 2.9.1 --head-torch 2.11.0 --format table\n"
                "compile-baselines compare --base C1 --head C2 --base-torch 2.11 --head-torch 2.12 --attribute",
                more=" Without --base and --head: the machine's latest two runs (by date), or with --head-machine "
                     "the two machines' latest runs. With --base-torch and "
                     "--head-torch: head's latest run with that torch, base's at the same commit or the nearest. "
                     "With --attribute, when both the commit and torch differ: which of them moved each change.")
    reading(d)
    d.add_argument("--base", help="base commit: a hash, a prefix, or a git ref such as HEAD~1, a branch or a tag "
                                  "(default: the run before head)")
    d.add_argument("--head", help="head commit, as --base (default: the machine's latest run)")
    d.add_argument("--machine", help="asv machine name (needed when several are present)")
    d.add_argument("--head-machine", help="the head's machine, when it differs (one machine per PyTorch version, two "
                                          "hosts); without --base and --head: each machine's latest run")
    d.add_argument("--base-torch", metavar="VERSION",
                   help="compare torch versions: the base's, or its start (2.11 matches 2.11.0+cu130); with "
                        "--head-torch")
    d.add_argument("--head-torch", metavar="VERSION", help="compare torch versions: the head's; with --base-torch")
    d.add_argument("--format", choices=FORMATS_COMPARE,
                   help="table: for a terminal (default on a terminal), what the PR comment says; md: the PR "
                        "comment (default into a pipe or --out); json: a stable shape for scripts")
    d.add_argument("--only-changed", action="store_true",
                   help="list only the cells, best modes and kernel speedups that changed, and the cells the "
                        "headline names (too noisy, unconfirmed, source unchanged)")
    d.add_argument("--factor", type=_factor, metavar="F",
                   help="also require a change beyond F (e.g. 1.2: 20%% slower or faster) on top of the noise rule; "
                        "only ever makes a verdict stricter")
    d.add_argument("--fail-on", choices=FAIL_ON, default="never", help="exit 3 when this happens")
    d.add_argument("--out", help="write the comparison here instead of standard output")
    d.add_argument("--allow-cross-versions", action="store_true", help="compare across GPUs or PyTorch versions")
    d.add_argument("--confirm", action="store_true",
                   help="before judging, measure every cell that moved again at head, in this checkout (its code, "
                        "its torch, a GPU host), in 3 more fresh compiles; count only changes that hold on them all")
    d.add_argument("--confirmed-only", action="store_true",
                   help="count only changes whose head cells have 3 compiles (after a --confirm); list the rest as "
                        "unconfirmed")
    d.add_argument("-j", "--jobs", type=COUNT, help="with --confirm: cells at once (default as for run)")
    d.add_argument("--history", nargs="+", default=[], metavar="DIR",
                   help="results directories whose runs of the same GPU and torch tell each cell's noise, beside the "
                        "head machine's own earlier runs (docs/verdicts.md)")
    d.add_argument("--test", choices=TESTS, default=TESTS[0],
                   help="noise: each cell against its own noise, the comparison's false alarms kept under 5%% "
                        "(default); bands: the fixed bands of earlier versions")
    d.add_argument("--attribute", action="store_true",
                   help="when both the commit and torch differ between base and head: say which one moved each best "
                        "baseline and significant cell, from a cross run (head's commit under base's torch, or base's "
                        "commit under head's), or name the one `run` that decides it (docs/versions.md)")

    x = command("rm", "remove runs from the results (and their cells), like `asv rm`",
                "compile-baselines rm --commit 1a2b3c4d          # lists what it would remove\n"
                "compile-baselines rm --commit HEAD --machine h100 --yes\n"
                "compile-baselines rm --torch 2.9 --until 2026-06-30 --yes",
                more=" Selectors combine (all must hold). Without --yes nothing is removed: it lists what would be. A "
                     "blank selector, or one that matches no run, is refused (exit 2); a path that cannot be written "
                     "is refused before anything is moved (exit 1). What an interrupted rm left is rolled back or "
                     "finished by the next rm --yes or run.")
    reading(x)
    x.add_argument("--commit", help="a hash, a prefix, or a git ref such as HEAD~1")
    x.add_argument("--machine", help="asv machine name")
    x.add_argument("--torch", metavar="VERSION", help="torch version, or its start: 2.11 matches 2.11.0+cu130")
    x.add_argument("--since", type=_date(), metavar="WHEN",
                   help="runs whose commit date is on or after this (2026-11-23, 2026-11-23T10:00:00Z)")
    x.add_argument("--until", type=_date(end_of_day=True), metavar="WHEN",
                   help="runs whose commit date is on or before this (a bare date includes its whole day)")
    x.add_argument("--cells-dir", help="the cell store (default: beside the results directory)")
    x.add_argument("--yes", action="store_true", help="remove them (default: only list them)")

    q = command("pr", "measure what a PR changed at base and head (at once on a GPU host), compare, comment",
                "compile-baselines pr --base origin/main --head HEAD --repo OWNER/NAME --pr 42")
    reading(q)
    q.add_argument("--base", required=True, help="base ref")
    q.add_argument("--head", required=True, help="head ref")
    q.add_argument("--repo", help="OWNER/NAME to comment on (with --pr)")
    q.add_argument("--pr", type=int, help="pull request number (with --repo)")
    q.add_argument("-j", "--jobs", type=COUNT,
                   help="cells at once, both sides together (default: run's); from 2 on, base and head run at once, "
                        "half each, their timings alternating on the GPU")
    q.add_argument("--machine", help="asv machine name (default: hostname)")
    q.add_argument("--preset", nargs="+", help="default: as run's")
    q.add_argument("--mode", nargs="+", choices=MODES, help="only these modes (default: all five)")
    q.add_argument("--workload", nargs="+", metavar="WORKLOAD",
                   help="measure only these among what the PR changed: names or NAMESPACE.* (a kernel repository)")
    q.add_argument("--fail-on", choices=FAIL_ON, default="never", help="exit 3 when this happens")
    q.add_argument("--always-comment", action="store_true", help="create the comment even when nothing changed")
    q.add_argument("--history", nargs="+", default=[], metavar="DIR",
                   help="results directories whose runs of the same GPU and torch tell each cell's noise (the "
                        "nightly's results branch)")

    i = command("issue", "open or update the one tracking issue (GITHUB_TOKEN, GITHUB_API_URL)",
                "compile-baselines issue --repo OWNER/NAME --title 'Best baselines' --body-file body.md")
    i.add_argument("--repo", required=True, help="OWNER/NAME")
    i.add_argument("--title", required=True, help="the issue's title")
    i.add_argument("--body-file", required=True, help="markdown file with the body")

    k = command("comment", "post or update the one PR comment (GITHUB_TOKEN, GITHUB_API_URL)",
                "compile-baselines compare --base main --head HEAD --out comment.md\n"
                "compile-baselines comment --repo OWNER/NAME --pr 42 --body-file comment.md --only-on-change")
    k.add_argument("--repo", required=True, help="OWNER/NAME")
    k.add_argument("--pr", required=True, type=int, help="pull request number")
    k.add_argument("--body-file", required=True, help="markdown file with the body (e.g. compare --out)")
    k.add_argument("--only-on-change", action="store_true", help="create no comment when nothing changed")

    o = command("report", "write a self-contained HTML report of the results",
                "compile-baselines report --out site/report")
    reading(o)
    o.add_argument("--out", required=True, help="output directory")

    n = command("init", "write what a kernel repository needs to plug its own workloads and kernels in",
                "compile-baselines init --dir ../my-kernels --namespace mykernels", more=(
                    " The entry points (pyproject.toml, or the lines to add to yours), a workload skeleton with a "
                    "tiny preset and a sweep, a candidate skeleton, the caller of the reusable workflow, pinned "
                    "to this compile-baselines commit, and a .gitignore for what runs leave there (an existing one "
                    "is added to). Existing files are never overwritten without --force."))
    n.add_argument("--dir", default=".", help="the repository to write into (default: here)")
    n.add_argument("--namespace", help="the workloads' namespace (default: from the directory's name)")
    n.add_argument("--ref", help="the compile-baselines commit the workflow pins (default: this checkout's HEAD)")
    n.add_argument("--force", action="store_true", help="overwrite files that exist")

    u = command("publish", "asv publish (renders with no network) plus the report next to it",
                "compile-baselines publish --out site",
                more=" The output directory is replaced whole, so it must be new, empty, or a site publish wrote "
                     "(marked by its .compile-baselines-site file).")
    reading(u)
    u.add_argument("--out", help="output directory (default: .asv/html of the kernel repository it runs in, else "
                                 "asv.conf.json's html_dir): new, empty, or a site publish wrote")

    b = command("results", "fetch results from a git branch, store results on it, find a machine's previous run",
                "compile-baselines results store shard1/results shard2/results --branch asv-results\n"
                "compile-baselines results previous --branch asv-results --machine h100-torch-stable\n"
                "compile-baselines results fetch --branch asv-results --machine h100-torch-stable --commit C "
                "--results-dir R", more=(
                    " The branch holds a results directory (one folder per machine) and is read from and pushed to "
                    "a remote of the repository, with git's credentials or GITHUB_TOKEN (docs/runner.md)."))
    actions = b.add_subparsers(dest="action", required=True, metavar="ACTION")

    def action(name: str, summary: str, example: str) -> argparse.ArgumentParser:
        p = actions.add_parser(name, help=summary, description=summary[0].upper() + summary[1:] + ".",
                               epilog=f"example:\n  {example}", formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("--remote", default="origin", help="the git remote the branch is on (default: origin)")
        return p

    bf = action("fetch", "copy results from the branch into a results directory: all, a machine's or one run's",
                "compile-baselines results fetch --branch asv-results --machine h100-torch-stable --commit 1a2b3c4d")
    bf.add_argument("--branch", required=True, help="the branch the results are on (none yet: nothing fetched)")
    bf.add_argument("--machine", help="only this machine's results")
    bf.add_argument("--commit", help="only the runs of this commit (a hash, a prefix or a git ref), with their "
                                     "machine.json")
    bf.add_argument("--results-dir", help="where to (default: as for run); its machine.json and benchmarks.json "
                                          "files are kept")
    bs = action("store", "merge results into the branch's tip and push it; merged again on the new tip after a "
                "push race", "compile-baselines results store .asv/results --branch asv-results --note 'nightly'")
    bs.add_argument("sources", nargs="+", help="asv results directories to store (as `merge` combines them)")
    bs.add_argument("--branch", required=True, help="the branch to store on (created when it does not exist)")
    bs.add_argument("--note", help="added to the commit message in parentheses, e.g. which CI run stored them")
    bp = action("previous", "print the nearest earlier first-parent commit with a run of the machine (or nothing)",
                "compile-baselines results previous --branch asv-results --machine h100-torch-stable")
    bp.add_argument("--machine", required=True, help="asv machine name (one per kind of GPU and PyTorch line)")
    bp.add_argument("--commit", default="HEAD", help="the commit to look back from (default: HEAD)")
    bp.add_argument("--branch", help="the runs on this branch (default: those in --results-dir)")
    reading(bp)

    t = command("track", "compare each machine measured at a commit with its previous run, and the machines with "
                "each other", "compile-baselines track --out issue.md --confirmed-only --attribute", more=(
                    " What the nightly's tracking issue says: the comparisons in which a best baseline changed, one "
                    "section each, are written to --out; without any, --out is removed (docs/runner.md)."))
    reading(t)
    t.add_argument("--out", required=True, help="the tracking issue's body (written only when a best baseline changed)")
    t.add_argument("--commit", default="HEAD", help="the commit measured (default: HEAD)")
    t.add_argument("--machine", nargs="+", help="only these machines (default: every machine measured at the commit)")
    t.add_argument("--confirmed-only", action="store_true",
                   help="against the previous run, count only changes measured again at head (after compare --confirm)")
    t.add_argument("--attribute", action="store_true",
                   help="against the previous run: when the commit and torch both changed, which one moved each change")
    t.add_argument("--allow-cross-versions", action="store_true",
                   help="against the previous run: torch or the GPU may differ (the machines are always compared "
                        "across versions)")
    t.add_argument("--fail-on", choices=("best-change", "never"), default="never",
                   help="exit 3 when a best baseline changed")
    return parser


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
