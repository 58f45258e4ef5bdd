"""What a posted PR comment said, read back for the tests that check a later `compare` says the same of stored runs.

The renderer may change after a comment was posted (a new line, a new count in the headline); the verdicts may not:
these are the rows of its tables (best-baseline changes, significant cells, kernels, every cell), as posted."""

from __future__ import annotations


def verdict_rows(markdown: str) -> list[str]:
    """The table rows of a comment's tables of verdicts, in order (not the runs' table or the wins and geomeans)."""
    rows, keep = [], False
    for line in markdown.splitlines():
        if line.startswith("####") or line.startswith("<details>"):
            keep = not line.startswith("#### Wins")
        elif line.startswith("| Run |"):
            keep = False
        elif keep and line.startswith("| ") and not line.startswith("| Workload |"):
            rows.append(line)
    return rows
