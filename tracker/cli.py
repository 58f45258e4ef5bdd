"""`compile-baselines <command>`: parses the command line (tracker.cliparse), hands it to the command's module
(tracker.commands), and turns the tool's errors into one line and an exit code (tracker.errors)."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import warnings
from collections.abc import Callable
from typing import Any

from tracker import commands
from tracker.cliparse import build_parser
from tracker.errors import EXIT_FAILED, EXIT_USAGE, ToolError, UsageError
from tracker.paths import REPO_ROOT
from workloads.errors import UnknownName, WorkloadsError

ROOT = REPO_ROOT
EXIT_INTERRUPTED = 128 + signal.SIGINT  # what a shell reports for a command Ctrl-C ended: 130
EXIT_CLOSED_PIPE = 128 + signal.SIGPIPE  # what a shell reports for `yes | head -1`'s yes: 141


# Each command's handler (tracker.commands), and what an interrupt of it leaves behind.
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {name: c.main for name, c in commands.COMMANDS.items()}
INTERRUPTED = {name: c.interrupted for name, c in commands.COMMANDS.items() if c.interrupted}


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
