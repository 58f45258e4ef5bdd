"""`compile-baselines compare` called with a request instead of its command line, for the tests that read several
comparisons of one results directory."""

from __future__ import annotations

import os
from typing import Any

from tracker.commands.compare import show
from tracker.publish.comparison import CompareRequest


def run_compare(results_dir: str | os.PathLike[str], base: str | None, head: str | None,
                    machine: str | None = None, fmt: str = "md", fail_on: str = "never",
                    out: str | os.PathLike[str] | None = None, *, only_changed: bool = False, **request: Any) -> int:
    """The command's exit code, its output written as the command writes it (`out` or stdout, and stderr); `request`:
    the rest of CompareRequest's fields."""
    return show(CompareRequest(results_dir, base, head, machine, **request), fmt, fail_on, out, only_changed)
