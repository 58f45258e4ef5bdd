"""The command line of `compile-baselines`: the top-level parser (its description, examples, --version and
--config) with each command's subparser from tracker.commands, and argparse's mistakes as one line. tracker.cli
dispatches what it parses."""

from __future__ import annotations

import argparse
import difflib
from typing import Any, NoReturn

from tracker.commands import COMMANDS
from tracker.paths import REPO_ROOT

DESCRIPTION = """\
Measure eager and the four torch.compile modes on the study's workloads, record them as asv results, and
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


# ---------------------------------------------------------------------------------------------------- the parser


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
    for command in COMMANDS.values():  # in the order `--help` lists them
        command.add(commands)
    return parser
