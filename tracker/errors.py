"""The one base class of the errors the CLI reports as one line (exit 1) instead of a traceback:
bad input files, failed services, refused operations. Each module subclasses it for its own errors."""


class ToolError(Exception):
    pass
