"""The nightly past one host: each PyTorch version's cells shared out over `hosts` GPU runners (`run --shard i/n`, a
matrix), then one `merge` before the store. The workflow's own scripts run here on CPU shards: a `compile-baselines`
on PATH hands them to the CLI with a tiny selection of cells added (the presets' names are the workflow's; what a CPU
measures in seconds replaces them)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_workflows import WORKFLOWS, cli_invocations, step_with

from tracker.store.results import load_results

ROOT = Path(__file__).resolve().parent.parent
NIGHTLY = WORKFLOWS["nightly"]
COMMIT = "c" * 40
TINY = ["--preset", "tiny", "--workload", "llm_rmsnorm", "diff_cfg_blend", "rl_dpo_loss", "vlm_vision_rmsnorm_pool",
        "--mode", "eager", "--kernel", "none", "--warmup-ms", "5", "--rep-ms", "50", "--commit", COMMIT]


def shards_of(hosts: str) -> list[int]:
    """The bench job's matrix of shards for the `hosts` input, its expression evaluated as Actions would."""
    expression = NIGHTLY["jobs"]["bench"]["strategy"]["matrix"]["shard"]
    table, default = re.fullmatch(r"\$\{\{ fromJSON\('(.*)'\)\[inputs\.hosts \|\| '(\d)'\] \}\}", expression).groups()
    return json.loads(table)[hosts or default]


def test_the_hosts_input_makes_a_shard_a_host_and_a_scheduled_run_one() -> None:
    hosts = NIGHTLY["on"]["workflow_dispatch"]["inputs"]["hosts"]
    assert hosts["default"] == "1" and NIGHTLY["on"]["schedule"]
    assert [shards_of(n) for n in hosts["options"]] == [list(range(1, int(n) + 1)) for n in hosts["options"]]
    assert shards_of("") == [1]  # a scheduled run has no inputs
    assert NIGHTLY["jobs"]["bench"]["strategy"]["matrix"]["channel"] == [
        m["channel"] for m in NIGHTLY["jobs"]["bench"]["strategy"]["matrix"]["include"]]


def test_the_shards_are_merged_once_before_the_store() -> None:
    measure = step_with(NIGHTLY, "bench", "run")
    assert '--shard "$SHARD/$HOSTS"' in measure["run"]
    assert measure["env"]["SHARD"] == "${{ matrix.shard }}" and measure["env"]["HOSTS"] == "${{ inputs.hosts || '1' }}"
    jobs = NIGHTLY["jobs"]
    assert jobs["merge"]["needs"] == "bench" and jobs["store"]["needs"] == "merge"
    assert not jobs["merge"].get("runs-on", "").startswith("self-hosted")
    uploads = [s for s in jobs["bench"]["steps"] if s.get("uses", "").startswith("actions/upload-artifact")]
    # each shard's results once (beside them, the night's bisection section, which the track job reads)
    assert [u["with"]["name"] for u in uploads if u["with"]["name"].startswith("shard-")] == [
        "shard-${{ matrix.channel }}-${{ matrix.shard }}"]
    merged = cli_invocations(step_with(NIGHTLY, "merge", "merge")["run"])[0]
    assert merged[1] == "$RUNNER_TEMP/shards/shard-*/results"


SHIM = """#!/usr/bin/env bash
# the workflow's `compile-baselines`, with a tiny selection added to `run` (later options replace earlier ones)
if [[ "$1" == run ]]; then exec "{python}" -m tracker.cli "$@" {tiny}; fi
exec "{python}" -m tracker.cli "$@"
"""


def _step(script: str, env: dict[str, str], **more: str) -> None:
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], env={**env, **more}, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr


def _cells(results: Path) -> set[tuple[str, str, str, str]]:
    table = load_results(results).table
    return {(r.preset, r.workload, r.mode, r.status) for r in table.itertuples()}


@pytest.mark.slow
def test_the_matrix_s_commands_on_two_cpu_shards_merge_to_the_cells_of_an_unsharded_run(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "compile-baselines").write_text(SHIM.format(python=sys.executable, tiny=" ".join(TINY)))
    (bin_dir / "compile-baselines").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HOME": str(tmp_path / "home"),
           "PYTHONPATH": str(ROOT), "CHANNEL": "stable", "BENCH_MACHINE": "cpu"}
    (tmp_path / "home").mkdir()
    measure, merge = step_with(NIGHTLY, "bench", "run")["run"], step_with(NIGHTLY, "merge", "merge")["run"]
    for shard in shards_of("2"):  # each runner's RUNNER_TEMP, then what the download puts under the merge job's
        temp = tmp_path / f"runner-{shard}"
        _step(measure, env, SHARD=str(shard), HOSTS="2", RUNNER_TEMP=str(temp))
        for part in ("results", "cells"):
            shutil.copytree(temp / part, tmp_path / "merge-job" / "shards" / f"shard-stable-{shard}" / part)
    _step(merge, env, RUNNER_TEMP=str(tmp_path / "merge-job"))
    _step(measure, env, SHARD="1", HOSTS="1", RUNNER_TEMP=str(tmp_path / "one-host"))
    merged, whole = _cells(tmp_path / "merge-job" / "merged" / "results"), _cells(tmp_path / "one-host" / "results")
    assert merged == whole and len({c for c in whole if c[3] == "ok"}) == 4  # the other modes: not run, alike
    parts = [{c for c in _cells(tmp_path / f"runner-{s}" / "results") if c[3] == "ok"} for s in (1, 2)]
    assert parts[0] and parts[1] and not parts[0] & parts[1]  # each host measured its own share
