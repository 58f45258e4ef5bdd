"""The errors the CLI reports as one line instead of a traceback, and the exit code each gives.

- `ToolError` (exit 1): the tool could not do what was asked: an input file that cannot be read, a service that
  failed, an operation refused to keep the results whole.
- `UsageError` (exit 2): what was asked is wrong: a value the command line gave, a combination of them, or what they
  ask of the inputs (results of several machines and no machine named).

A comparison that finds what `--fail-on` names exits 3 (tracker.analyse.verdicts); that is an answer, not an error.
Each module subclasses these for its own errors. Library code words them about the input (the value and what it
must be); a check on a parameter names the parameter (`parameter="fail_on"`), and the CLI shows it as the option
the user typed (`--fail-on`). Any other exception out of the library is a bug: the CLI shows its traceback.
"""

from __future__ import annotations

from typing import ClassVar

EXIT_FAILED, EXIT_USAGE = 1, 2


class ToolError(Exception):
    exit_code: ClassVar[int] = EXIT_FAILED


class UsageError(ToolError):
    """A mistake in what was asked (a blank selector, one that matches nothing, a value out of range): one clear
    line, exit code 2. `parameter`: the library parameter the value came in, named before the message."""

    exit_code: ClassVar[int] = EXIT_USAGE

    def __init__(self, message: str, parameter: str | None = None) -> None:
        super().__init__(f"{parameter} {message}" if parameter else message)
        self.message = message
        self.parameter = parameter

    def as_option(self) -> str:
        """The message as the command line says it: the parameter as its option (fail_on: --fail-on)."""
        return f"--{self.parameter.replace('_', '-')} {self.message}" if self.parameter else self.message
