"""Code comments and docstrings state a rule and its reason; the measurements behind it live in docs/.

A comment that cites a fixture, a run's label, a trial or "the H100" is a lab notebook entry: it goes stale when
the code changes and hides the evidence from the docs that should hold it (docs/verdicts.md, docs/runner.md).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# What evidence looks like when it is cited: a fixture path, a run label (h100-a, h100-torch-...), a numbered
# trial, a measurement "on the H100" or "of a full H100 run".
EVIDENCE = re.compile(
    r"tests/fixtures/|\bh100-[a-z0-9]|\btrials? \d|\b(on|of) (an|the|a full) H100\b|\bH100 (run|host)\b",
    re.IGNORECASE,
)


def _notes(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring in `path`."""
    src = path.read_text(encoding="utf-8")
    out = [(t.start[0], t.string) for t in tokenize.generate_tokens(io.StringIO(src).readline)
           if t.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                out.append((node.body[0].lineno, doc))
    return out


def test_code_comments_cite_no_measurements():
    cited = [f"{p.relative_to(ROOT)}:{line}: {m.group(0)}"
             for top in ("tracker", "workloads", "benchmarks") for p in sorted((ROOT / top).rglob("*.py"))
             for line, text in _notes(p) for m in [EVIDENCE.search(text)] if m]
    assert cited == []


def test_the_pattern_catches_what_it_is_for():
    for text in ("tests/fixtures/h100-aa3", "runs h100-c and h100-d", "trial 2's plants", "measured on the H100",
                 "in a full H100 run", "the H100 host's CPU"):
        assert EVIDENCE.search(text), text
    for text in ("nvidia-smi's lines \"0, GPU-<uuid>, NVIDIA H100 80GB HBM3\"", "an H100 PCIe or NVL has other peaks",
                 "docs/verdicts.md has the measurements"):
        assert not EVIDENCE.search(text), text
