#!/usr/bin/env bash
# The main job, small: install, measure 2 workloads x 5 modes (+ their reference kernels) on the tiny preset
# through asv's result format, print the summary and write the HTML report. A few minutes on 2 CPU cores.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash tools/setup.sh
.venv/bin/compile-baselines run --preset tiny --workload llm_rmsnorm diff_cfg_blend
.venv/bin/compile-baselines report --out .asv/report
echo
echo "compile-baselines is installed in .venv: '. .venv/bin/activate' puts it on your PATH, then e.g."
echo "  compile-baselines summary     # the best mode per workload, again"
echo "  compile-baselines --help      # every command"
