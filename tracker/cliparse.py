"""The command line of `compile-baselines`: every command's options, help and examples, and the types that check a
value as it is parsed. One builder a command; tracker.cli dispatches what they parse."""

from __future__ import annotations

import argparse
import difflib
import math
import textwrap
from collections.abc import Callable
from typing import Any, NoReturn

from tracker.analyse.verdicts import FAIL_ON, TESTS
from tracker.paths import REPO_ROOT
from tracker.publish.units import FORMATS
from workloads.modes import AUTOTUNED_MODES
from workloads.names import MODES

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

Commands = Any  # argparse's subparsers action, whose class argparse keeps private


# ---------------------------------------------------------------------------------------------------- value types


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
AT_LEAST_TWO = _number(int, 2, False)


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
        commit = git(["rev-parse", "HEAD"], REPO_ROOT, timeout=10).strip()[:12]
    except CommitError:
        commit = "unknown"
    return f"compile-baselines {version} (commit {commit}, {REPO_ROOT})"


class _Version(argparse.Action):
    """--version, worked out only when asked for (it runs git)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        print(version_text())
        parser.exit()


# ---------------------------------------------------------------------------------------------------- the parser


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose mistakes are one line, as every other error of the CLI, not a usage block first; an
    option the command does not have is named with the command, and the closest it has suggested."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")

    def parse_args(self, args: Any = None, namespace: Any = None) -> argparse.Namespace:  # type: ignore[override]
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            command = _command_parser(self, parsed)
            command.error(unrecognized(extras, command))
        return parsed


def _command_parser(parser: argparse.ArgumentParser, parsed: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)command's parser that `parsed` went through: `results fetch`'s for `results fetch ...`."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(getattr(parsed, action.dest, None) or "")
            return parser if chosen is None else _command_parser(chosen, parsed)
    return parser


def unrecognized(extras: list[str], parser: argparse.ArgumentParser) -> str:
    """"unrecognized argument --comit; did you mean --commit?": what the command does not take, and the closest of
    its options to the first option-like one."""
    named = [e for e in extras if e.startswith("-")] or extras  # the words after an unknown option are its value
    words = f"unrecognized argument{'s' if len(named) > 1 else ''} {' '.join(named)}"
    options = [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
    for extra in (e.split("=")[0] for e in named if e.startswith("--")):
        close = difflib.get_close_matches(extra, options, n=1, cutoff=0.6)
        if close:
            return f"{words}; did you mean {close[0]}?"
    return words + f" (`{parser.prog} --help` lists its options)"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="compile-baselines", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=_Version, nargs=0, help="the version and the checkout's commit, then exit")
    parser.add_argument("--config", default=str(REPO_ROOT / "asv.conf.json"),
                        help="asv config (default: the project's)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in BUILDERS:  # in the order `--help` lists them
        add(commands)
    return parser


def _command(commands: Commands, name: str, summary: str, example: str, more: str = "") -> argparse.ArgumentParser:
    """A subcommand: `summary` in the command list and atop its --help, then `more`; `example` under it."""
    text = textwrap.fill(summary[0].upper() + summary[1:] + "." + more, 100)
    return commands.add_parser(name, help=summary, description=text,
                               epilog="example:\n  " + example.replace("\n", "\n  "),
                               formatter_class=argparse.RawDescriptionHelpFormatter)


def _results_dir_option(command: argparse.ArgumentParser) -> None:
    command.add_argument("--results-dir", help=RESULTS_HELP)


def _timing_options(command: argparse.ArgumentParser) -> None:
    timing = command.add_argument_group("measurement settings (defaults: the study's, but run's --rep-ms)")
    timing.add_argument("--warmup-ms", type=NON_NEGATIVE, default=100.0, help="do_bench warmup budget (ms)")
    timing.add_argument("--rep-ms", type=POSITIVE, default=None,
                        help="do_bench measurement budget (ms; default: measure 1000, the study's; run 500 a cell)")
    timing.add_argument("--warmup-calls", type=COUNT, default=20, help="direct calls after compiling")
    timing.add_argument("--time-limit", type=POSITIVE, default=None, help="seconds for a whole cell, compile included")
    timing.add_argument("--cpu-threads", type=AT_LEAST_ONE, default=1, metavar="N",
                        help="on a CPU: the threads a cell compiles its kernels for and runs on (default 1: steady "
                             "timings on a shared or busy host)")


def _list(commands: Commands) -> None:
    _command(commands, "list",
             "the workloads (the study's 23 and the plugins'), the modes, the presets and the kernels under test",
             "compile-baselines list")


def _measure(commands: Commands) -> None:
    measure = _command(
        commands, "measure", "measure one cell in this process, without asv, and print it",
        "compile-baselines measure --preset tiny --workload llm_rmsnorm --mode default\n"
        "compile-baselines measure --preset decode --workload llm_rmsnorm --kernel triton_rmsnorm --json", more=(
            " Its compile time is the first call's with inductor's compile cache, which is kept between commands:"
            " warm once the cell was compiled, so faster than run's, which gives each cell a fresh cache (cold;"
            " run --warm-cache keeps one). The output says which it was."))
    measure.add_argument("--preset", required=True, help="input shapes: tiny runs on a CPU (see `list`)")
    measure.add_argument("--workload", required=True, metavar="WORKLOAD", help="see `list`")
    what = measure.add_mutually_exclusive_group(required=True)
    what.add_argument("--mode", choices=MODES, help="eager or a torch.compile mode")
    what.add_argument("--kernel", metavar="NAME", help="a registered candidate of WORKLOAD instead of a mode")
    measure.add_argument("--device", choices=("cpu", "cuda"), default=None, help="default: cuda when available")
    measure.add_argument("--json", action="store_true", help="print the result as JSON")
    measure.add_argument("--all-samples", action="store_true", help="with --json: include every sample")
    measure.add_argument("--cudagraph-mark-step", action="store_true",
                         help="call torch.compiler.cudagraph_mark_step_begin() before each call (not the study's way)")
    _timing_options(measure)


def _run(commands: Commands) -> None:
    run = _command(
        commands, "run", "measure cells (a fresh process each) and record them as asv results, then print the summary",
        "compile-baselines run --workload llm_rmsnorm llm_layernorm -j 4\n"
        "compile-baselines run --commit v1.2 --date 2026-11-23", more=(
            " An interrupted run resumes: finished cells are kept (the cell store) and not measured again."
            " Exit status: 0 when the cells were measured and recorded (failed cells too: a failure is data),"
            " 1 when nothing was recorded (every cell skipped, e.g. prefill on a CPU host) or the run failed (a"
            " measurement the cell store could not keep, a full disk: the run stops, what was kept before stays),"
            " 2 for a mistake in the arguments."))
    run.add_argument("--preset", nargs="+",
                     help="default: tiny on CPU, prefill+decode on CUDA (and plugins' presets likewise; see `list`)")
    run.add_argument("--workload", nargs="+", metavar="WORKLOAD",
                     help="names, or NAMESPACE.* for a plugin's workloads (default: all, plugins' included)")
    run.add_argument("--mode", nargs="+", choices=MODES, help="default: all five")
    run.add_argument("--kernel", nargs="+", metavar="K",
                     help="kernels under test: all (default), none, NAME or WORKLOAD:NAME (see `list`)")
    run.add_argument("--machine", help="asv machine name (default: hostname)")
    run.add_argument("--commit", help="record under this commit: a hash or a git ref (default: HEAD)")
    run.add_argument("--date", type=_date(recorded=True), metavar="WHEN",
                     help="the commit's date, as asv orders runs: 2026-11-23, 2026-11-23T10:00:00Z (UTC unless an "
                          "offset is given) or ms since the epoch (default: from git, else now)")
    run.add_argument("-j", "--jobs", type=COUNT,
                     help="cells at once (default, or 0: 1 on CPU; on CUDA one per core, up to 16 a GPU)")
    run.add_argument("--shard", help="i/n: run the i-th of n cost-balanced shards (one a host)")
    run.add_argument("--gpus", metavar="SPEC",
                     help="the GPUs of this host to measure on, all of one model: all (default), N (the first N), "
                          "or indices 0,2,5")
    run.add_argument("--device", choices=("cpu", "cuda"), help="default: cuda when available")
    _results_dir_option(run)
    run.add_argument("--cells-dir", help="the cell store (default: beside the results directory)")
    run.add_argument("--cell-timeout", type=POSITIVE, default=1800.0, help="kill a cell's process after this (s)")
    run.add_argument("--warm-cache", help="persistent compile cache directory (default: cold, a fresh one per cell, "
                                          "so compile times are a first compile's; `measure` reuses inductor's own)")
    run.add_argument("--retry-failed", action="store_true", help="measure failed cells again")
    run.add_argument("--replicates", type=AT_LEAST_ONE, default=None, metavar="N",
                     help=f"fresh compiles per cell of the autotuned modes ({', '.join(AUTOTUNED_MODES)}), "
                          "each in its own process; the best is recorded with the spread (default: 3 on CUDA, 1 on "
                          "CPU; a cell already measured gets the replicates it lacks)")
    run.add_argument("--replicate-all-modes", action="store_true", help="--replicates applies to every mode")
    run.add_argument("--cell", nargs="+", metavar="P/W/M",
                     help="only these cells, PRESET/WORKLOAD/MODE (how a candidate change is re-measured)")
    _timing_options(run)


def _merge(commands: Commands) -> None:
    merge = _command(commands, "merge", "combine the results directories of shards into one",
                     "compile-baselines merge shard1/results shard2/results --results-dir .asv/results",
                     more=" A measurement wins over a failure; merging the same shards again changes nothing (a "
                          "retried step is safe); a directory merged into itself is refused; a folder it would write "
                          "into that is not writable is refused before anything is written.")
    merge.add_argument("sources", nargs="+", help="asv results directories of the shards")
    merge.add_argument("--results-dir", help="destination (default: as for run)")
    merge.add_argument("--cells-dir", nargs="+", metavar="DIR",
                       help="the shards' cell stores, whose failure reasons come along (default: beside each source)")
    merge.add_argument("--dest-cells-dir", help="the destination's cell store (default: beside --results-dir)")


def _summary(commands: Commands) -> None:
    summary = _command(commands, "summary", "wins, geomeans, margins, domains, ties of the latest (or a given) run",
                       "compile-baselines summary\ncompile-baselines summary --commit HEAD~1 --format md\n"
                       "compile-baselines summary --workload llm_rmsnorm      # what to beat for it")
    _results_dir_option(summary)
    summary.add_argument("--commit", help="a hash, a prefix, or a git ref such as HEAD~1 (default: the latest run)")
    summary.add_argument("--machine", help="asv machine name (needed when several are present)")
    summary.add_argument("--workload", nargs="+", metavar="WORKLOAD",
                         help="only these workloads, names or NAMESPACE.* (the baseline to beat for them; the wins and "
                              "geomeans then count their instances alone)")
    summary.add_argument("--format", choices=FORMATS, default="table",
                         help="table: text for a terminal (default); md: markdown; json: a stable shape for scripts")


def _import_csv(commands: Commands) -> None:
    importing = _command(commands, "import-csv", "turn the study's results CSV into asv results",
                         "compile-baselines import-csv tests/fixtures/study/raw_results.csv --machine h100 --torch "
                         "2.9.1 --gpu 'NVIDIA H100 80GB HBM3'")
    _results_dir_option(importing)
    importing.add_argument("file", help="CSV with columns workload, shape_preset, domain, tag, mode, status, ...")
    importing.add_argument("--machine", required=True, help="asv machine name to record under")
    importing.add_argument("--torch", required=True, help="torch version the CSV was measured with, e.g. 2.9.1")
    importing.add_argument("--gpu", help="GPU name, e.g. 'NVIDIA H100 80GB HBM3'")
    importing.add_argument("--commit", help="commit hash (default: derived from the file's content)")
    importing.add_argument("--date", type=_date(recorded=True), metavar="WHEN",
                           help="2026-11-23, 2026-11-23T10:00:00Z or ms since the epoch (default: the file's time)")
    importing.add_argument("--triton", help="triton version, if known")
    importing.add_argument("--driver", help="GPU driver version, if known")
    importing.add_argument("--cuda", help="CUDA version, if known")
    importing.add_argument("--launch-us", type=POSITIVE, help="the measuring host's launch floor, if known (us)")


def _compare(commands: Commands) -> None:
    compare = _command(
        commands, "compare", "base vs head: which cells changed beyond noise, and which best modes",
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
    _results_dir_option(compare)
    _which_runs_options(compare)
    _verdict_options(compare)
    _confirm_options(compare)


def _which_runs_options(compare: argparse.ArgumentParser) -> None:
    compare.add_argument("--base", help="base commit: a hash, a prefix, or a git ref such as HEAD~1, a branch or a "
                                        "tag (default: the run before head)")
    compare.add_argument("--head", help="head commit, as --base (default: the machine's latest run)")
    compare.add_argument("--machine", help="asv machine name (needed when several are present)")
    compare.add_argument("--head-machine", help="the head's machine, when it differs (one machine per PyTorch "
                                                "version, two hosts); without --base and --head: each machine's "
                                                "latest run")
    compare.add_argument("--base-torch", metavar="VERSION",
                         help="compare torch versions: the base's, or its start (2.11 matches 2.11.0+cu130); with "
                              "--head-torch")
    compare.add_argument("--head-torch", metavar="VERSION",
                         help="compare torch versions: the head's; with --base-torch")


def _verdict_options(compare: argparse.ArgumentParser) -> None:
    compare.add_argument("--format", choices=FORMATS,
                         help="table: for a terminal (default on a terminal), what the PR comment says; md: the PR "
                              "comment (default into a pipe or --out); json: a stable shape for scripts")
    compare.add_argument("--only-changed", action="store_true",
                         help="list only the cells, best modes and kernel speedups that changed, and the cells the "
                              "headline names (too noisy, unconfirmed, source unchanged)")
    compare.add_argument("--factor", type=_factor, metavar="F",
                         help="also require a change beyond F (e.g. 1.2: 20%% slower or faster) on top of the noise "
                              "rule; only ever makes a verdict stricter")
    compare.add_argument("--fail-on", choices=FAIL_ON, default="never", help="exit 3 when this happens")
    compare.add_argument("--out", help="write the comparison here instead of standard output")
    compare.add_argument("--allow-cross-versions", action="store_true",
                         help="compare across GPUs or PyTorch versions")


def _confirm_options(compare: argparse.ArgumentParser) -> None:
    compare.add_argument("--confirm", action="store_true",
                         help="before judging, measure every cell that moved again at head, in this checkout (its "
                              "code, its torch, a GPU host), in 3 more fresh compiles; count only changes that hold "
                              "on them all")
    compare.add_argument("--confirmed-only", action="store_true",
                         help="count only changes whose head cells have 3 compiles (after a --confirm); list the rest "
                              "as unconfirmed")
    compare.add_argument("-j", "--jobs", type=COUNT, help="with --confirm: cells at once (default as for run)")
    compare.add_argument("--history", nargs="+", default=[], metavar="DIR",
                         help="results directories whose runs of the same GPU and torch tell each cell's noise, "
                              "beside the head machine's own earlier runs (docs/verdicts.md)")
    compare.add_argument("--test", choices=TESTS, default=TESTS[0],
                         help="noise: each cell against its own noise, the comparison's false alarms kept under 5%% "
                              "(default); bands: the fixed bands of earlier versions")
    compare.add_argument("--attribute", action="store_true",
                         help="when both the commit and torch differ between base and head: say which one moved each "
                              "best baseline and significant cell, from a cross run (head's commit under base's "
                              "torch, or base's commit under head's), or name the one `run` that decides it "
                              "(docs/versions.md)")


def _rm(commands: Commands) -> None:
    rm = _command(commands, "rm", "remove runs from the results (and their cells), like `asv rm`",
                  "compile-baselines rm --commit 1a2b3c4d          # lists what it would remove\n"
                  "compile-baselines rm --commit HEAD --machine h100 --yes\n"
                  "compile-baselines rm --torch 2.9 --until 2026-06-30 --yes",
                  more=" Selectors combine (all must hold). Without --yes nothing is removed: it lists what would be. "
                       "A blank selector, or one that matches no run, is refused (exit 2); a path that cannot be "
                       "written is refused before anything is moved (exit 1). What an interrupted rm left is rolled "
                       "back or finished by the next rm --yes or run.")
    _results_dir_option(rm)
    rm.add_argument("--commit", help="a hash, a prefix, or a git ref such as HEAD~1")
    rm.add_argument("--machine", help="asv machine name")
    rm.add_argument("--torch", metavar="VERSION", help="torch version, or its start: 2.11 matches 2.11.0+cu130")
    rm.add_argument("--since", type=_date(), metavar="WHEN",
                    help="runs whose commit date is on or after this (2026-11-23, 2026-11-23T10:00:00Z)")
    rm.add_argument("--until", type=_date(end_of_day=True), metavar="WHEN",
                    help="runs whose commit date is on or before this (a bare date includes its whole day)")
    rm.add_argument("--cells-dir", help="the cell store (default: beside the results directory)")
    rm.add_argument("--yes", action="store_true", help="remove them (default: only list them)")


def _pr(commands: Commands) -> None:
    pr = _command(commands, "pr", "measure what a PR changed at base and head (at once on a GPU host), compare, "
                  "comment", "compile-baselines pr --base origin/main --head HEAD --repo OWNER/NAME --pr 42")
    _results_dir_option(pr)
    pr.add_argument("--base", required=True, help="base ref")
    pr.add_argument("--head", required=True, help="head ref")
    pr.add_argument("--repo", help="OWNER/NAME to comment on (with --pr)")
    pr.add_argument("--pr", type=int, help="pull request number (with --repo)")
    pr.add_argument("-j", "--jobs", type=COUNT,
                    help="cells at once, both sides together (default: run's); from 2 on, base and head run at once, "
                         "half each, their timings alternating on the GPU")
    pr.add_argument("--machine", help="asv machine name (default: hostname)")
    pr.add_argument("--preset", nargs="+", help="default: as run's")
    pr.add_argument("--mode", nargs="+", choices=MODES, help="only these modes (default: all five)")
    pr.add_argument("--workload", nargs="+", metavar="WORKLOAD",
                    help="measure only these among what the PR changed: names or NAMESPACE.* (a kernel repository)")
    pr.add_argument("--fail-on", choices=FAIL_ON, default="never", help="exit 3 when this happens")
    pr.add_argument("--always-comment", action="store_true", help="create the comment even when nothing changed")
    pr.add_argument("--history", nargs="+", default=[], metavar="DIR",
                    help="results directories whose runs of the same GPU and torch tell each cell's noise (the "
                         "nightly's results branch); where only kernels under test changed, a run there of this "
                         "machine and torch and of the base's workload code is their baseline")
    pr.add_argument("--budget", type=POSITIVE, default=240.0, metavar="SECONDS",
                    help="wall time for measuring (default 240): base and head are measured in pairs, round after "
                         "round, while cells are undecided; the round after the first starts while time is left, a "
                         "later one only while the last one's time is still left")
    pr.add_argument("--max-compiles", type=AT_LEAST_TWO, default=10, metavar="N",
                    help="the most compiles a side a cell gets (default 10)")
    pr.add_argument("--compiles", type=AT_LEAST_TWO, metavar="N",
                    help="exactly N paired compiles a side for every cell, whatever the verdicts (a measurement of "
                         "the real change; no budget)")
    pr.add_argument("--full", action="store_true",
                    help="every cell in pairs at base and head even where only kernels under test changed (by "
                         "default their baseline, the modes' cells, is measured once for both sides, or taken from a "
                         "--history run of the base's workload code)")


def _bisect(commands: Commands) -> None:
    bisect = _command(
        commands, "bisect", "find the commit between a good and a bad one that moved the cells named, measuring them "
        "in pairs at midpoints of the range",
        "compile-baselines bisect --good v1.2 --bad main --cell prefill/llm_rmsnorm/default\n"
        "compile-baselines bisect --good HEAD~8 --bad HEAD --from-machine h100 --confirmed-only --out bisect.md", more=(
            " Each step measures a commit of the first-parent history between them against the range's good end, both"
            " compiled fresh in pairs round after round until each cell is decided (as pr does), and calls it good,"
            " bad or skipped (it cannot be measured, or stays undecided); about log2(commits) steps. The first"
            " step measures bad against good: what changed there, and which way, is the change. The runs of the"
            " commits measured after good go into the results directory as machine --machine (docs/runner.md)."))
    _results_dir_option(bisect)
    bisect.add_argument("--good", required=True, help="a commit without the change (a ref or a hash)")
    bisect.add_argument("--bad", required=True, help="a later commit with it")
    bisect.add_argument("--cell", nargs="+", default=[], metavar="P/W/M", help="the cells that changed")
    bisect.add_argument("--instance", nargs="+", default=[], metavar="P/W",
                        help="instances whose best baseline changed: their winners at either end (with "
                             "--from-machine), else their every mode")
    bisect.add_argument("--from-machine", metavar="M",
                        help="the machine whose stored runs of good and bad show the change: without --cell or "
                             "--instance, the instances whose best baseline changed there; when torch changed between "
                             "the two runs too, which one moved it (compare --attribute)")
    bisect.add_argument("--confirmed-only", action="store_true",
                        help="of --from-machine's changes, only those measured again at bad (after compare --confirm)")
    bisect.add_argument("--machine", help="asv machine name its runs are recorded as (default: the --from-machine "
                                          "or the hostname, then -bisect)")
    bisect.add_argument("--history", nargs="+", default=[], metavar="DIR",
                        help="results directories whose runs of the same GPU and torch tell each cell's noise")
    bisect.add_argument("-j", "--jobs", type=COUNT, help="cells at once, both sides together (default: run's)")
    bisect.add_argument("--budget", type=POSITIVE, default=900.0, metavar="SECONDS",
                        help="wall time in all (default 900); no step starts with less time left than a step took, "
                             "and past it the narrowed range is named")
    bisect.add_argument("--max-compiles", type=AT_LEAST_TWO, default=10, metavar="N",
                        help="the most compiles a side a cell gets in a step (default 10)")
    bisect.add_argument("--out", help="write the result as a markdown section of the tracking issue (only when there "
                                      "was a change to bisect)")


def _issue(commands: Commands) -> None:
    issue = _command(commands, "issue", "open or update the one tracking issue (GITHUB_TOKEN, GITHUB_API_URL)",
                     "compile-baselines issue --repo OWNER/NAME --title 'Best baselines' --body-file body.md")
    issue.add_argument("--repo", required=True, help="OWNER/NAME")
    issue.add_argument("--title", required=True, help="the issue's title")
    issue.add_argument("--body-file", required=True, help="markdown file with the body")


def _comment(commands: Commands) -> None:
    comment = _command(
        commands, "comment", "post or update the one PR comment (GITHUB_TOKEN, GITHUB_API_URL)",
        "compile-baselines compare --base main --head HEAD --out comment.md\n"
        "compile-baselines comment --repo OWNER/NAME --pr 42 --body-file comment.md --only-on-change")
    comment.add_argument("--repo", required=True, help="OWNER/NAME")
    comment.add_argument("--pr", required=True, type=int, help="pull request number")
    comment.add_argument("--body-file", required=True, help="markdown file with the body (e.g. compare --out)")
    comment.add_argument("--only-on-change", action="store_true", help="create no comment when nothing changed")


def _report(commands: Commands) -> None:
    report = _command(commands, "report", "write a self-contained HTML report of the results",
                      "compile-baselines report --out site/report")
    _results_dir_option(report)
    report.add_argument("--out", required=True, help="output directory")


def _init(commands: Commands) -> None:
    init = _command(
        commands, "init", "write what a kernel repository needs to plug its own workloads and kernels in",
        "compile-baselines init --dir ../my-kernels --namespace mykernels", more=(
            " The entry points (pyproject.toml, or the lines to add to yours), a workload skeleton with a "
            "tiny preset and a sweep, a candidate skeleton, the caller of the reusable workflow, pinned "
            "to this compile-baselines commit, and a .gitignore for what runs leave there (an existing one "
            "is added to). Existing files are never overwritten without --force."))
    init.add_argument("--dir", default=".", help="the repository to write into (default: here)")
    init.add_argument("--namespace", help="the workloads' namespace (default: from the directory's name)")
    init.add_argument("--ref", help="the compile-baselines commit the workflow pins (default: this checkout's HEAD)")
    init.add_argument("--force", action="store_true", help="overwrite files that exist")


def _publish(commands: Commands) -> None:
    publish = _command(commands, "publish", "asv publish (renders with no network) plus the report next to it",
                       "compile-baselines publish --out site",
                       more=" The output directory is replaced whole, so it must be new, empty, or a site publish "
                            "wrote (marked by its .compile-baselines-site file).")
    _results_dir_option(publish)
    publish.add_argument("--out", help="output directory (default: .asv/html of the kernel repository it runs in, "
                                       "else asv.conf.json's html_dir): new, empty, or a site publish wrote")


def _results(commands: Commands) -> None:
    results = _command(
        commands, "results", "fetch results from a git branch, store results on it, find a machine's previous run",
        "compile-baselines results store shard1/results shard2/results --branch asv-results\n"
        "compile-baselines results previous --branch asv-results --machine h100-torch-stable\n"
        "compile-baselines results fetch --branch asv-results --machine h100-torch-stable --commit C "
        "--results-dir R", more=(
            " The branch holds a results directory (one folder per machine) and is read from and pushed to "
            "a remote of the repository, with git's credentials or GITHUB_TOKEN (docs/runner.md)."))
    actions = results.add_subparsers(dest="action", required=True, metavar="ACTION")
    _results_fetch(actions)
    _results_store(actions)
    _results_previous(actions)


def _action(actions: Commands, name: str, summary: str, example: str) -> argparse.ArgumentParser:
    """An action of `results`: `summary` in its list and atop its --help, `example` under it."""
    action = _command(actions, name, summary, example)
    action.add_argument("--remote", default="origin", help="the git remote the branch is on (default: origin)")
    return action


def _results_fetch(actions: Commands) -> None:
    fetch = _action(actions, "fetch", "copy results from the branch into a results directory: all, a machine's or "
                    "one run's", "compile-baselines results fetch --branch asv-results --machine h100-torch-stable "
                    "--commit 1a2b3c4d")
    fetch.add_argument("--branch", required=True, help="the branch the results are on (none yet: nothing fetched)")
    fetch.add_argument("--machine", help="only this machine's results")
    fetch.add_argument("--commit", help="only the runs of this commit (a hash, a prefix or a git ref), with their "
                                        "machine.json")
    fetch.add_argument("--results-dir", help="where to (default: as for run); its machine.json and benchmarks.json "
                                             "files are kept")


def _results_store(actions: Commands) -> None:
    store = _action(actions, "store", "merge results into the branch's tip and push it; merged again on the new tip "
                    "after a push race",
                    "compile-baselines results store .asv/results --branch asv-results --note 'nightly'")
    store.add_argument("sources", nargs="+", help="asv results directories to store (as `merge` combines them)")
    store.add_argument("--branch", required=True, help="the branch to store on (created when it does not exist)")
    store.add_argument("--note", help="added to the commit message in parentheses, e.g. which CI run stored them")


def _results_previous(actions: Commands) -> None:
    previous = _action(actions, "previous", "print the nearest earlier first-parent commit with a run of the machine "
                       "(or nothing)", "compile-baselines results previous --branch asv-results --machine "
                       "h100-torch-stable")
    previous.add_argument("--machine", required=True, help="asv machine name (one per kind of GPU and PyTorch line)")
    previous.add_argument("--commit", default="HEAD", help="the commit to look back from (default: HEAD)")
    previous.add_argument("--branch", help="the runs on this branch (default: those in --results-dir)")
    _results_dir_option(previous)


def _track(commands: Commands) -> None:
    track = _command(
        commands, "track", "compare each machine measured at a commit with its previous run, and the machines with "
        "each other", "compile-baselines track --out issue.md --confirmed-only --attribute", more=(
            " What the nightly's tracking issue says: the comparisons in which a best baseline changed, one "
            "section each, are written to --out; without any, --out is removed (docs/runner.md)."))
    _results_dir_option(track)
    track.add_argument("--out", required=True,
                       help="the tracking issue's body (written only when a best baseline changed)")
    track.add_argument("--commit", default="HEAD", help="the commit measured (default: HEAD)")
    track.add_argument("--machine", nargs="+",
                       help="only these machines (default: every machine measured at the commit)")
    track.add_argument("--confirmed-only", action="store_true",
                       help="against the previous run, count only changes measured again at head (after compare "
                            "--confirm)")
    track.add_argument("--attribute", action="store_true",
                       help="against the previous run: when the commit and torch both changed, which one moved each "
                            "change")
    track.add_argument("--allow-cross-versions", action="store_true",
                       help="against the previous run: torch or the GPU may differ (the machines are always compared "
                            "across versions)")
    track.add_argument("--fail-on", choices=("best-change", "never"), default="never",
                       help="exit 3 when a best baseline changed")
    track.add_argument("--bisections", metavar="DIR",
                       help="a folder of bisect --out sections (the GPU jobs'): appended to the body when it is "
                            "written")


BUILDERS: tuple[Callable[[Commands], None], ...] = (
    _list, _measure, _run, _merge, _summary, _import_csv, _compare, _rm, _pr, _bisect, _issue, _comment, _report,
    _init, _publish, _results, _track,
)
