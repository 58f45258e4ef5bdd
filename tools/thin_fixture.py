"""Shrink measured runs for committing as fixtures: every stored sample list (cell store files, asv result files)
becomes at most 100 evenly spaced order statistics (tracker.stats.thin). Medians, quartiles and CIs stay as they
were measured, from every sample; only the samples kept for tests are fewer.

    python tools/thin_fixture.py tests/fixtures/NAME
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tracker.stats import thin

KEEP = 100


def thin_file(path: Path) -> bool:
    data = json.loads(path.read_text())
    if not isinstance(data, dict):
        return False
    if isinstance(data.get("samples_ms"), list):  # a cell store record
        data["samples_ms"] = thin(data["samples_ms"], KEEP)
    elif "samples" in data.get("result_columns", ()):  # an asv result file
        col = data["result_columns"].index("samples")
        for row in data["results"].values():
            if len(row) > col and row[col]:
                row[col] = [thin(s, KEEP) if s else s for s in row[col]]
    else:
        return False
    path.write_text(json.dumps(data, sort_keys=True))
    return True


def main(argv: list[str]) -> int:
    done = sum(thin_file(p) for d in argv for p in Path(d).rglob("*.json"))
    print(f"thinned {done} files", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
