"""The one base class of the errors the CLI reports as one line (exit 1) instead of a traceback:
bad input files, failed services, refused operations. Each module subclasses it for its own errors; InputError
marks those that are the user's mistake (exit 2)."""


class ToolError(Exception):
    pass


class InputError(ToolError):
    """A mistake in what was asked for that only the inputs reveal (results of several machines and no --machine):
    one line like every ToolError, but exit 2, as a mistake in the command line."""
