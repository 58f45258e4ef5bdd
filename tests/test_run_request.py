"""`compile-baselines run` as a request: what the command line leaves open comes from the policy, and everything
that can refuse the run does so before anything is measured or written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracker.errors import UsageError
from tracker.paths import ASV_CONF
from tracker.runner.policy import RUN_REP_MS
from tracker.runner.request import RunRequest, prepare
from workloads.errors import UnknownName

COMMIT, DATE_MS = "a" * 40, 1_795_392_000_000
CPU = {"device": "cpu", "machine": "cpu-box", "commit": COMMIT, "date_ms": DATE_MS, "kernels": ["none"]}


def test_what_the_command_line_leaves_open_is_the_policys(tmp_path: Path) -> None:
    results = tmp_path / "results"
    run = prepare(RunRequest(workloads=["llm_rmsnorm"], modes=["eager", "default"], **CPU), ASV_CONF, str(results))
    assert [str(c) for c in run.cells] == ["tiny llm_rmsnorm eager", "tiny llm_rmsnorm default"]
    cfg = run.config
    assert (cfg.device, cfg.jobs, cfg.replicates, cfg.gpus, cfg.settings.rep_ms) == ("cpu", 1, 1, (), RUN_REP_MS)
    assert (cfg.machine, cfg.commit, run.date_ms, run.presets) == ("cpu-box", COMMIT, DATE_MS, ["tiny"])
    assert cfg.store_root == (tmp_path / "cells").resolve() and run.conf.results_dir == str(results)
    given = prepare(RunRequest(workloads=["llm_rmsnorm"], modes=["eager"], jobs=3, replicates=2, rep_ms=50.0,
                               **CPU), ASV_CONF, str(results)).config
    assert (given.jobs, given.replicates, given.settings.rep_ms) == (3, 2, 50.0)


@pytest.mark.parametrize(("asked", "says"), [
    ({"cells": ["tiny/llm_rmsnorm/max-autotune"], "modes": ["eager"]}, "--cell 'tiny/llm_rmsnorm/max-autotune' is not"),
    ({"presets": ["prefill"], "workloads": ["llm_rmsnorm"], "modes": ["eager"], "shard": (2, 2)}, "no cells selected"),
    ({"workloads": ["llm_rmsnorm"], "gpus": "0"}, "--gpus picks CUDA devices"),
    ({"workloads": ["llm_rmsnorm"], "machine": "two words"}, "machine name 'two words'"),
    ({"workloads": ["llm_rmsnrom"]}, "did you mean llm_rmsnorm?"),
])
def test_a_run_that_cannot_be_done_as_asked_is_refused_before_anything_is_written(
        tmp_path: Path, asked: dict[str, object], says: str) -> None:
    with pytest.raises((UsageError, UnknownName), match=says):
        prepare(RunRequest(**{**CPU, **asked}), ASV_CONF, str(tmp_path / "results"))
    assert list(tmp_path.iterdir()) == []
