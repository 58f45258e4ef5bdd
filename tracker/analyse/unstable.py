"""Cells too noisy to judge: an ok cell whose samples spread (IQR) over more than stats.TOO_NOISY_SPREAD of its
median. Such a timing was disturbed while it ran (on a loaded CPU host, or by other GPU work): its median is no
figure to rank modes by, so every view that shows the cell says so instead of ranking it silently."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracker.stats import TOO_NOISY_SPREAD, relative_spread, too_noisy
from tracker.store.results import CELL_KEYS, RUN_KEYS

COLUMNS = [*RUN_KEYS, *CELL_KEYS, "median_ms", "spread"]


def unstable_cells(table: pd.DataFrame, max_spread: float = TOO_NOISY_SPREAD) -> pd.DataFrame:
    """The ok cells of `table` whose relative IQR exceeds `max_spread`, widest first within a run and preset."""
    ok = table[table["status"] == "ok"]
    out = ok[too_noisy(ok["median_ms"], ok["q25"], ok["q75"], max_spread)]
    spread = [relative_spread(*x) for x in zip(out["median_ms"], out["q25"], out["q75"], strict=True)]
    out = out.assign(spread=np.array(spread, dtype=float))
    out = out.sort_values([*RUN_KEYS, "preset", "spread"], ascending=[True] * (len(RUN_KEYS) + 1) + [False],
                          kind="stable")
    return out[COLUMNS].astype({k: str for k in [*RUN_KEYS, *CELL_KEYS]}).reset_index(drop=True)
