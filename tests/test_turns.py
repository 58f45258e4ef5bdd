"""Turns (tracker.measure.cudainit.Turns): at most N holders at once, across threads and processes; a holder that
dies gives its turn back. The runner bounds with them the processes of a GPU that create their CUDA context at once,
and those of a run that go on past it (the rest, started ahead, wait with their CUDA ready)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tracker.measure.cudainit import ENV_TURNS, Turns, from_env, spec


def test_n_turns_hold_n_at_once_and_the_next_goes_on_when_one_is_given_back(tmp_path: Path) -> None:
    turns = Turns(str(tmp_path / "t"), 2)
    first, second = turns.held(), turns.held()
    first.__enter__()
    second.__enter__()
    got = threading.Event()

    def third() -> None:
        with turns.held():
            got.set()

    waiting = threading.Thread(target=third)
    waiting.start()
    assert not got.wait(0.3)  # both turns are held
    first.__exit__(None, None, None)
    assert got.wait(10)
    waiting.join()
    second.__exit__(None, None, None)


def test_a_process_that_dies_holding_a_turn_gives_it_back(tmp_path: Path) -> None:
    prefix = str(tmp_path / "t")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom tracker.measure.cudainit import Turns\n"
         f"with Turns({prefix!r}, 1).held():\n    print('held', flush=True)\n    time.sleep(60)"],
        stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parent.parent)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    got = threading.Event()

    def take() -> None:
        with Turns(prefix, 1).held():
            got.set()

    waiting = threading.Thread(target=take, daemon=True)
    waiting.start()
    assert not got.wait(0.3)
    holder.kill()
    holder.wait()
    assert got.wait(10)


def test_a_worker_reads_its_turns_from_the_variable_the_runner_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_TURNS, spec("/store/turn-0", 8))
    turns = from_env(ENV_TURNS)
    assert turns is not None and turns.paths == [f"/store/turn-0-{k}" for k in range(8)]
    monkeypatch.delenv(ENV_TURNS)
    assert from_env(ENV_TURNS) is None
