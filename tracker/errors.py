"""The base classes of the errors the CLI reports as one line instead of a traceback: `ToolError` (exit 1) for bad
input files, failed services and refused operations, `UsageError` (exit 2) for a mistake in the command's
arguments, or in what they ask of the inputs (results of several machines and no --machine). Each module subclasses
them for its own errors."""


class ToolError(Exception):
    pass


class UsageError(ToolError):
    """A mistake in the command line (a blank selector, one that matches nothing): one clear line, exit code 2."""
