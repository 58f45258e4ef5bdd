"""A GPU's memory ledger shared by processes: real processes reserve made-up sizes against a made-up budget (this
machine has no GPU), hold them a while, and write down when they held what."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tracker.runner.memledger import PATIENCE_S, MemoryLedger, ledger_path

ROOT = Path(__file__).resolve().parent.parent
GiB = 2**30

HOLDER = """
import json, sys, time
from pathlib import Path
from tracker.runner.memledger import MemoryLedger
path, budget, nbytes, hold_s, log, patience = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), \
    sys.argv[5], float(sys.argv[6])
with MemoryLedger(Path(path), budget, poll_s=0.005, patience_s=patience).reserved(nbytes) as waited:
    start = time.time()
    print("in", flush=True)
    time.sleep(hold_s)
    end = time.time()
Path(log).write_text(json.dumps({"bytes": nbytes, "start": start, "end": end, "waited": waited}))
"""


def _holder(tmp_path: Path, name: str, nbytes: int, budget: int, hold_s: float,
            patience_s: float = PATIENCE_S) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", HOLDER, str(ledger_path(tmp_path, "0")), str(budget), str(nbytes),
                             str(hold_s), str(tmp_path / f"{name}.json"), str(patience_s)], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE)


def _logs(tmp_path: Path, names: list[str]) -> list[dict]:
    return [json.loads((tmp_path / f"{n}.json").read_text()) for n in names]


def _until_in_line(tmp_path: Path, pid: int) -> None:
    deadline = time.monotonic() + 30
    while pid not in json.loads(ledger_path(tmp_path, "0").read_text() or "{}").get("waiting", []):
        assert time.monotonic() < deadline
        time.sleep(0.01)


def _most_held_at_once(logs: list[dict]) -> int:
    events = sorted([(x["start"], x["bytes"]) for x in logs] + [(x["end"], -x["bytes"]) for x in logs],
                    key=lambda e: (e[0], e[1]))  # a release before a reservation at the same instant
    held = most = 0
    for _, change in events:
        held += change
        most = max(most, held)
    return most


@pytest.mark.slow
def test_processes_never_hold_more_than_the_budget_together_and_all_get_their_turn(tmp_path: Path) -> None:
    sizes = [3, 5, 2, 6, 4, 1, 5, 3]  # GiB, against a budget of 10: at most two or three at once
    names = [f"p{i}" for i in range(len(sizes))]
    procs = [_holder(tmp_path, n, s * GiB, 10 * GiB, 0.15) for n, s in zip(names, sizes, strict=True)]
    assert all(p.wait(60) == 0 for p in procs)
    logs = _logs(tmp_path, names)
    assert _most_held_at_once(logs) <= 10 * GiB
    assert sum(x["waited"] > 0.05 for x in logs) >= 3  # some had to wait: the test could have failed
    assert MemoryLedger(ledger_path(tmp_path, "0"), 10 * GiB).held() == {}  # every reservation given back


@pytest.mark.slow
def test_a_smaller_measurement_that_fits_goes_ahead_of_a_larger_one_that_does_not(tmp_path: Path) -> None:
    budget = 8 * GiB
    first = _holder(tmp_path, "first", 2 * GiB, budget, 0.8)
    assert first.stdout.readline() == "in\n"
    alone = _holder(tmp_path, "alone", budget, budget, 0.2)  # the whole budget: a measurement again alone
    _until_in_line(tmp_path, alone.pid)  # it is in line before the next one asks
    later = _holder(tmp_path, "later", 1 * GiB, budget, 0.2)
    assert all(p.wait(60) == 0 for p in (first, alone, later))
    logs = dict(zip(["first", "alone", "later"], _logs(tmp_path, ["first", "alone", "later"]), strict=True))
    assert logs["later"]["end"] <= logs["first"]["end"]  # it fitted beside the first, so it did not wait for it
    assert logs["alone"]["start"] >= max(logs["first"]["end"], logs["later"]["end"])  # the GPU emptied for it


@pytest.mark.slow
def test_a_measurement_that_has_waited_its_patience_is_overtaken_by_none(tmp_path: Path) -> None:
    budget, patience = 8 * GiB, 0.2
    first = _holder(tmp_path, "first", 2 * GiB, budget, 0.8, patience)
    assert first.stdout.readline() == "in\n"
    alone = _holder(tmp_path, "alone", budget, budget, 0.3, patience)
    _until_in_line(tmp_path, alone.pid)
    time.sleep(patience + 0.1)
    later = _holder(tmp_path, "later", 1 * GiB, budget, 0.1, patience)
    _until_in_line(tmp_path, later.pid)
    big = _holder(tmp_path, "big", 20 * GiB, budget, 0.1, patience)  # more than the budget: alone too, in its turn
    assert all(p.wait(60) == 0 for p in (first, alone, later, big))
    logs = dict(zip(["first", "alone", "later", "big"], _logs(tmp_path, ["first", "alone", "later", "big"]),
                    strict=True))
    assert logs["alone"]["start"] >= logs["first"]["end"]  # it waited for the GPU to empty
    assert logs["later"]["start"] >= logs["alone"]["end"]  # and the smaller one, though it fitted, did not overtake it
    assert logs["big"]["start"] >= max(logs["alone"]["end"], logs["later"]["end"])


def test_a_reservation_of_a_process_that_died_is_given_back(tmp_path: Path) -> None:
    ledger = MemoryLedger(ledger_path(tmp_path, "GPU-5e1c"), 4 * GiB, poll_s=0.005)
    dead = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    with ledger.reserved(3 * GiB, owner=dead.pid):
        assert ledger.held() == {dead.pid: 3 * GiB}
        os.kill(dead.pid, signal.SIGKILL)
        dead.wait()
        with ledger.reserved(3 * GiB) as waited:  # fits only once the dead process's 3 GiB are gone
            assert ledger.held() == {os.getpid(): 3 * GiB} and waited < 5


def test_a_damaged_ledger_reads_as_empty(tmp_path: Path) -> None:
    path = ledger_path(tmp_path, "0")
    path.write_text("{not json")
    ledger = MemoryLedger(path, GiB)
    assert ledger.held() == {}
    with ledger.reserved(GiB):
        assert ledger.held() == {os.getpid(): GiB}
