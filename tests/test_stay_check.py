"""tools/stay_check.py reproduces what it printed for the two committed 4-GPU runs (tests/fixtures/h200-stay): one
whose further compiles went to processes that stayed, one with a fresh process each."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = Path("tests/fixtures/h200-stay")


def test_the_stay_check_reproduces_its_recorded_h200_figures() -> None:
    stores = [str(p.relative_to(ROOT)) for run in ("e", "ef")
              for p in sorted((ROOT / FIXTURE / "x4" / f"cells-{run}").glob("*/*/torch-*"))]
    out = subprocess.run([sys.executable, "tools/stay_check.py", *stores], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    assert out == (ROOT / FIXTURE / "stay-check-x4.txt").read_text()


def test_a_store_that_is_not_there_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "tools/stay_check.py", str(tmp_path / "none")], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.strip() == f"stay_check: no cell store at {tmp_path / 'none'}"
