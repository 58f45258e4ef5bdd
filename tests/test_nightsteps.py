"""Steps in a machine's history (tracker.analyse.nightsteps): the night a level changed and stayed changed, found on
the nights after it, and none over nights of unchanged code.

The history is six real cold full H100 runs of the same workload code on other machines and days (runs c, d of
tests/fixtures/h100-aa2, e of h100-aa3, f, g of h100-aa4, h of h100-aa5), filed as one machine's nights. The planted
nights are constructed: copies of run h with one instance's cells slower by a known factor (named so below).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tracker.analyse.nightsteps import BEST, recent_steps
from tracker.publish.nightly import steps_markdown
from tracker.store.results import load_results

FIXTURES = Path(__file__).resolve().parent / "fixtures"
NIGHTS = ["h100-aa2", "h100-aa3", "h100-aa4", "h100-aa5"]
MACHINE = "h100-night"
SLOWER = ("prefill", "llm_swiglu_mlp")  # the constructed nights' slower instance


@pytest.fixture(scope="module")
def real_nights() -> pd.DataFrame:
    t = pd.concat([load_results(FIXTURES / d / "results").table for d in NIGHTS], ignore_index=True)
    for col in ("commit", "machine", "torch"):
        t[col] = t[col].astype(str)
    t["commit"] = t["commit"] + "-" + t["machine"]  # six runs, two of one commit: each its own night
    t["machine"] = MACHINE
    return t.sort_values("date", kind="stable").reset_index(drop=True)


def constructed_nights(real: pd.DataFrame, factor: float, count: int) -> pd.DataFrame:
    """`count` nights after the real ones: copies of the last real night, the SLOWER instance's times x `factor`."""
    last = real[real["commit"] == real["commit"].iloc[-1]]
    nights = []
    for n in range(1, count + 1):
        night = last.copy()
        night["commit"] = f"{'c' * 7}{n}-constructed"
        night["date"] = night["date"] + pd.Timedelta(days=n)
        hit = (night["preset"].astype(str) == SLOWER[0]) & (night["workload"].astype(str) == SLOWER[1])
        for col in ("median_ms", "compiles_median_ms", "compiles_max_ms", "compiles_mean_ms", "q25", "q75"):
            night.loc[hit, col] = night.loc[hit, col] * factor
        nights.append(night)
    return pd.concat([real, *nights], ignore_index=True)


def test_six_real_nights_of_unchanged_code_show_no_step(real_nights: pd.DataFrame) -> None:
    assert recent_steps(real_nights, MACHINE, recent=6) == []


def test_a_six_percent_step_is_found_at_its_night_once_two_nights_agree(real_nights: pd.DataFrame) -> None:
    one = constructed_nights(real_nights, 1.06, 1)
    assert [s for s in recent_steps(one, MACHINE) if s.mode == BEST] == []  # one night: a night's noise or a step
    three = constructed_nights(real_nights, 1.06, 3)
    steps = recent_steps(three, MACHINE)
    best = [s for s in steps if s.mode == BEST]
    assert [(s.preset, s.workload) for s in best] == [SLOWER]
    (step,) = best
    assert step.commit == "ccccccc1-constructed" and step.runs_after == 3
    # after: the last real night's best x 1.06; before: the six real nights' mean, which drew other compiles
    last_best = real_nights[(real_nights["commit"] == real_nights["commit"].iloc[-1])
                            & (real_nights["preset"] == SLOWER[0]) & (real_nights["workload"] == SLOWER[1])]
    assert step.after_ms == pytest.approx(last_best["median_ms"].min() * 1.06, rel=1e-6)
    assert 1.03 < step.ratio < 1.09
    assert {(s.preset, s.workload) for s in steps} == {SLOWER}  # its cells stepped too, nothing else did
    text = steps_markdown(steps)
    assert "| llm_swiglu_mlp | prefill | **best latency** |" in text and "`ccccccc1`" in text


def test_a_step_older_than_the_recent_nights_is_not_reported_again(real_nights: pd.DataFrame) -> None:
    five = constructed_nights(real_nights, 1.06, 5)
    assert [s for s in recent_steps(five, MACHINE, recent=3) if s.mode == BEST] == []
    assert [s.workload for s in recent_steps(five, MACHINE, recent=5) if s.mode == BEST] == [SLOWER[1]]
