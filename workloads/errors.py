"""The errors the workloads raise about what they are asked for and what a plugin declares.

The workloads import nothing from the tracker, so these are a base of their own; the CLI reports them as it does
the tracker's errors, in one line: `UnknownName` as a usage error (exit 2), the rest as errors the tool could not
get past (exit 1). A workload that breaks the contract of workloads.spec is a ValueError: the workload's bug, not
something a user asked for.
"""

from __future__ import annotations


class WorkloadsError(Exception):
    """What the workloads cannot give: one line, the CLI's exit code 1 unless a subclass says otherwise."""


class UnknownName(WorkloadsError, KeyError):
    """A name that is no workload, preset, mode or candidate known here: the CLI's exit code 2. A KeyError too (a
    lookup that failed), whose line is its message rather than KeyError's quoted key."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class WorkloadClash(WorkloadsError, ValueError):
    """A workload name that is, or could be taken for, another's: two plugins with one namespace, a plugin's
    workload without its namespace or outside it, a name declared twice."""


def failure_line(exc: BaseException) -> str:
    """A plugin's failure in one line: its exception's type and first line (sys.exit(3) is "SystemExit: 3")."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
