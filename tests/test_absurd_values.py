"""Finite but absurd values (1e308 ms, a subnormal latency, a compile of 1e300 s, a launch floor of 1e308 us) are no
measurement: read as impossible, they warn once, never win, and leave every output free of numpy warnings and of
non-JSON numbers. A run whose cells were all skipped is not recorded, and a results directory holding one (as an
older version wrote it) still summarizes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from test_results import instance, write_result_file

from tracker import cli
from tracker.stats import LATENCY_MS

ROOT = Path(__file__).resolve().parent.parent
GOOD = {"eager": 0.5, "default": 0.4, "reduce-overhead": 0.45, "max-autotune": 0.41,
        "max-autotune-no-cudagraphs": 0.39}


def _strict_json(text: str) -> Any:
    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} is not JSON")
    return json.loads(text, parse_constant=refuse)


def _outputs(results: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> dict[str, str]:
    """summary in every format, compare as JSON and table, and the report, with every warning an error."""
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for argv in (["summary"], ["summary", "--format", "md"], ["summary", "--format", "json"],
                     ["compare", "--format", "json", "--allow-cross-versions"],
                     ["compare", "--format", "table", "--allow-cross-versions"],
                     ["report", "--out", str(tmp_path / "report")]):
            code = cli.main([*argv, "--results-dir", str(results)])
            captured = capsys.readouterr()
            assert code == 0 and "Traceback" not in captured.err, (argv, captured.err)
            out[" ".join(argv[:3])] = captured.out
    return out


ABSURD = {
    "latency 1e308 ms": ({"default": 1e308}, {}),
    "latency 1e-300 ms": ({"default": 1e-300}, {}),
    "subnormal latency": ({"max-autotune": 5e-324}, {}),
    "latency a day and a bit": ({"eager": LATENCY_MS[1] * 1.01}, {}),
    "confidence bound 1e308": ({"default": {"median": 0.4, "ci": (0.39, 1e308)}}, {}),
    "compile time 1e300 s": ({}, {"baselines.Baseline.track_compile_time": [1e300, 12.0, 12.0, 12.0, 12.0]}),
    "peak memory 1e308 MiB": ({}, {"baselines.Baseline.track_peak_memory": [1e308, 1.0, 1.0, 1.0, 1.0]}),
    "compiles' slowest 1e308 ms": ({}, {"baselines.Baseline.track_compiles_max": [0.5, 1e308, 0.45, 0.41, 0.39]}),
}


@pytest.mark.parametrize("case", list(ABSURD))
def test_an_absurd_value_warns_never_wins_and_every_output_stays_clean(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    cells, rows = ABSURD[case]
    results = tmp_path / "results"
    write_result_file(results, instance("prefill", "llm_rmsnorm", GOOD), commit="a" * 40)
    short = [[f"'{p}'"] for p in ("prefill",)] + [["'llm_rmsnorm'"], [f"'{m}'" for m in GOOD]]
    extra = {name: [values, short, "1", 1_767_225_700_000, 1.0] for name, values in rows.items()}
    head = write_result_file(results, instance("prefill", "llm_rmsnorm", {**GOOD, **cells}), commit="b" * 40,
                             date_ms=1_767_225_700_000, params=short, extra=extra)
    out = _outputs(results, capsys, tmp_path)
    summary = _strict_json(out["summary --format json"])
    _strict_json(out["compare --format json"])
    (run,) = [r for r in summary["runs"] if r["commit"].startswith("b")]
    text = json.dumps(summary)
    assert "1e+308" not in text and "e-300" not in text and "5e-324" not in text
    assert head.exists()
    if cells:  # the absurd cell is failed, so another mode wins
        (mode,) = cells
        assert all(mode != winner for winner in _winners(run))


def _winners(run: dict[str, Any]) -> list[str]:
    winners = [w for p in run["presets"].values() for w in p["winners"].values()]
    assert winners
    return winners


def test_a_launch_floor_of_1e308_us_is_no_floor(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    write_result_file(results, instance("prefill", "llm_rmsnorm", GOOD), commit="a" * 40, launch_us=1e308)
    write_result_file(results, instance("prefill", "llm_rmsnorm", GOOD), commit="b" * 40, launch_us=1e308,
                      date_ms=1_767_225_700_000)
    _strict_json(_outputs(results, capsys, tmp_path)["summary --format json"])


def test_a_summary_of_a_run_whose_every_cell_was_skipped_says_so(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """As an older version recorded such a run (every value NaN, asv's n/a), after real runs."""
    results = tmp_path / "results"
    write_result_file(results, instance("prefill", "llm_rmsnorm", GOOD), commit="a" * 40)
    write_result_file(results, {}, commit="b" * 40, date_ms=1_767_225_700_000)
    for fmt in ("table", "md", "json"):
        assert cli.main(["summary", "--results-dir", str(results), "--format", fmt]) == 0
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err
        assert "holds no measured or failed cell (every cell skipped or not run" in captured.err
    assert cli.main(["summary", "--results-dir", str(results), "--commit", "aaaa"]) == 0


@pytest.mark.slow
def test_a_run_whose_every_cell_is_skipped_records_nothing_and_says_so(tmp_path: Path) -> None:
    results = tmp_path / "results"
    write_result_file(results, instance("tiny", "llm_rmsnorm", {"eager": 0.02}), commit="a" * 40, gpu="cpu")
    before = sorted((p, p.read_bytes()) for p in results.rglob("*") if p.is_file())
    env = dict(os.environ, HOME=str(tmp_path), PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-m", "tracker.cli", "run", "--results-dir", str(results), "--preset",
                          "prefill", "--workload", "llm_kl_divergence_loss", "--mode", "eager", "--kernel", "none",
                          "--commit", "b" * 40, "--device", "cpu"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    errors = [line for line in out.stderr.splitlines() if "error:" in line]
    assert out.returncode == 1 and len(errors) == 1 and "Traceback" not in out.stderr, out.stderr
    assert errors[0] == ("compile-baselines run: error: the one cell was skipped (preset prefill: "
                         "llm_kl_divergence_loss's inputs and outputs take 4.0 GiB, more than the 1 GiB a CPU "
                         f"measures; measure it on a CUDA device): nothing was recorded in {results}; pick cells this "
                         "host can measure (`list` names the presets)")
    assert sorted((p, p.read_bytes()) for p in results.rglob("*") if p.is_file()) == before
    assert cli.main(["summary", "--results-dir", str(results)]) == 0


CPU_TINY = ROOT / "tests" / "fixtures" / "cpu-tiny" / "results"


def test_an_instance_measured_ok_only_too_noisily_still_has_its_winner(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The real CPU run, where llm_rmsnorm's eager cell is too noisy to judge (72% spread), its default cell made
    impossible (1e308 ms): the winner comes from the modes measured ok (eager), and says how it won."""
    import itertools
    import shutil

    results = tmp_path / "results"
    shutil.copytree(CPU_TINY, results)
    (path,) = (results / "cpu-laptop").glob("bc844535-*.json")
    data = json.loads(path.read_text())
    row = data["results"]["baselines.Baseline.track_latency"]
    index = list(itertools.product(*row[1])).index(("'tiny'", "'llm_rmsnorm'", "'default'"))
    row[0][index] = 1e308
    path.write_text(json.dumps(data))
    assert cli.main(["summary", "--format", "json", "--results-dir", str(results)]) == 0
    out, err = capsys.readouterr()
    tiny = _strict_json(out)["runs"][0]["presets"]["tiny"]
    assert "tiny/llm_rmsnorm/default = 1e+308 ms" in err
    assert tiny["winners"] == {"llm_rmsnorm": "eager", "diff_cfg_blend": "eager"}
    assert "llm_rmsnorm: won by eager among cells all too noisy to judge" in tiny["notes"]
    assert not any("no mode measured ok" in n for n in tiny["notes"])
    assert {u["workload"]: u["mode"] for u in tiny["too_noisy"]}["llm_rmsnorm"] == "eager"  # still said to be noisy
