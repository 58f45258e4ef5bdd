#!/usr/bin/env bash
# Issue 36's measurement on a host of several GPUs (the device tool's nvidia-h100-x4), in one command of at most
# 10 minutes, from the repository root of a copy of the working tree (no .git), results under $OUT:
#   1. the host (GPUs, topology, cores, memory, versions);
#   2. a cold full run: `run --preset prefill decode -j 0 --gpus all` into a fresh results directory, its wall time;
#      stopped by SIGINT (what finished is kept) when it would overrun the budget;
#   3. `tools/bench_runner.py phases` on its cell store (the phase table, each GPU's lock share over the run and its
#      middle, each GPU over time) and `tools/simulate_gpus.py` on it (1, 2, 4, 8 GPUs);
#   4. with 100 s left and unless INIT_BENCH=0, CUDA's start in 16 processes a GPU at once, forked as the runner's
#      workers are, with and without the init gate (tools/cuda_init_bench.py);
#   5. everything packed into $OUT: four-gpu-LABEL.tgz (results, cell store, logs) and summary-LABEL.txt.
#
#   bash tools/device/four_gpu_run.sh [LABEL]          # LABEL: the asv machine name (default h100x4-a)
#
# Settings (environment): COMMIT (the hash to record under; default: the head of .device/repo.bundle, else a commit
# of this tree made here), DATE_MS (default now), BUDGET_S (seconds the whole script may take, default 470),
# PRESETS (default "prefill decode"), GPUS_ARG (default "--gpus all"), RUN_ARGS (more options for `run`),
# INIT_BENCH (1), SIMULATE (1), PYTHON (python3). On a CPU (tests/test_device_script.py): PRESETS=tiny GPUS_ARG=
# INIT_BENCH=0 RUN_ARGS="--device cpu --workload ...".
# Asv comes from carried wheels (.whl, ../shared/DEVICE.md) when the host lacks it. The script never stops at a
# failed step: each step's exit status is logged, and what exists is packed whatever happened (trap on EXIT).
set -u
export PYTHONUNBUFFERED=1
ROOT=$PWD
LABEL=${1:-h100x4-a}
: "${OUT:?OUT must name the folder whose files come back}"
BUDGET_S=${BUDGET_S:-470}
PRESETS=${PRESETS:-prefill decode}
GPUS_ARG=${GPUS_ARG---gpus all}
RUN_ARGS=${RUN_ARGS:-}
PY=${PYTHON:-python3}
WORK=${WORK:-/tmp/cb-$LABEL}
rm -rf "$WORK"
mkdir -p "$WORK" "$OUT" || { echo "cannot make $WORK or $OUT" >&2; exit 1; }
SUMMARY=$WORK/summary-$LABEL.txt
exec > >(tee -a "$WORK/script-$LABEL.log") 2>&1

step() { echo "== $(date -u +%H:%M:%S) [${SECONDS}s] $*"; }
note() { echo "$*" | tee -a "$SUMMARY"; }
left() { echo $(( BUDGET_S - SECONDS )); }

pack() {
  local rc=$?
  step "packing into $OUT"
  cp "$SUMMARY" "$OUT/" 2>/dev/null
  local parts=()
  for part in "$WORK"/results "$WORK"/cells "$WORK"/*.txt "$WORK"/*.log "$WORK"/*.json; do
    [[ -e "$part" ]] && parts+=("${part#"$WORK"/}")
  done
  (cd "$WORK" && tar czf "$OUT/four-gpu-$LABEL.tgz" --exclude='*.lock' --exclude='*.init-*' "${parts[@]}") \
    || echo "packing failed"
  ls -la "$OUT"
  echo "script exit status $rc after ${SECONDS}s"
}
trap pack EXIT

step "host"
if ! "$PY" -c 'import asv' 2>/dev/null; then
  if ls .whl/*.whl >/dev/null 2>&1; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
      || note "installing the carried wheels failed"
    export PYTHONPATH=/tmp/site:${PYTHONPATH:-} ASV_PYTHONPATH=/tmp/site
  else
    note "asv is not installed and no wheels were carried (.whl): the run cannot record its results"
  fi
fi
{
  date -u; uname -r; nproc; free -g | head -2
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,persistence_mode --format=csv,noheader
  nvidia-smi topo -m
  "$PY" -c 'import torch, triton, asv; print("torch", torch.__version__, "triton", triton.__version__, "asv", asv.__version__)'
  echo "CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset}"
} > "$WORK/machine-$LABEL.txt" 2>&1
cat "$WORK/machine-$LABEL.txt"

if [[ -z "${COMMIT:-}" && -f .device/repo.bundle ]]; then
  COMMIT=$(git bundle list-heads .device/repo.bundle HEAD 2>/dev/null | awk '{print $1; exit}')
fi
if [[ -z "${COMMIT:-}" ]]; then  # a commit of this very tree, so the results name what was measured
  git -c init.defaultBranch=main init -q "$WORK/tree" \
    && tar -C "$ROOT" --exclude=./.git --exclude=./.venv --exclude=./.whl --exclude=./.device -cf - . \
       | tar -C "$WORK/tree" -xf -
  COMMIT=$(cd "$WORK/tree" && git add -A && git -c user.name=device -c user.email=device@localhost \
           commit -qm "the measured tree" && git rev-parse HEAD)
  rm -rf "$WORK/tree"
fi
DATE_MS=${DATE_MS:-$(( $(date +%s) * 1000 ))}
note "label $LABEL, commit ${COMMIT:-none}, date $DATE_MS, presets $PRESETS, $GPUS_ARG $RUN_ARGS"
[[ -n "${COMMIT:-}" ]] || { note "no commit to record under"; exit 1; }

step "the cold run"
RUN_LIMIT=$(( $(left) - 70 ))  # phases, the simulation and the packing after it
(( RUN_LIMIT >= 60 )) || RUN_LIMIT=60
start_ns=$(date +%s%N)
# shellcheck disable=SC2086  # the presets, the GPU option and RUN_ARGS are words
timeout -s INT -k 30 "$RUN_LIMIT" "$PY" -m tracker.cli run --preset $PRESETS -j 0 $GPUS_ARG --machine "$LABEL" \
  --commit "$COMMIT" --date "$DATE_MS" --results-dir "$WORK/results" $RUN_ARGS > "$WORK/log-run-$LABEL.txt" 2>&1
rc=$?
wall_ms=$(( ($(date +%s%N) - start_ns) / 1000000 ))
note "run: exit status $rc, wall_s $(( wall_ms / 1000 )).$(printf '%03d' $(( wall_ms % 1000 ))) (limit ${RUN_LIMIT}s$([[ $rc == 124 || $rc == 130 ]] && echo ': STOPPED AT THE LIMIT'))"
grep -E "^run:|measurements to make|GPU lock held|^[0-9]+ cells:|failed:" "$WORK/log-run-$LABEL.txt" | tee -a "$SUMMARY"
tail -3 "$WORK/log-run-$LABEL.txt"

STORE=$(find "$WORK/cells/$LABEL" -mindepth 2 -maxdepth 2 -name 'torch-*' -type d 2>/dev/null | head -1)
if [[ -n "$STORE" ]]; then
  step "phases"
  timeout 60 "$PY" tools/bench_runner.py phases "$STORE" > "$WORK/phases-$LABEL.txt" 2>&1
  note "phases: exit status $?"
  head -200 "$WORK/phases-$LABEL.txt" | tee -a "$SUMMARY"
  if [[ "${SIMULATE:-1}" == 1 && $(left) -gt 40 ]]; then
    step "simulation from this run's costs"
    timeout $(( $(left) - 20 )) "$PY" tools/simulate_gpus.py "$STORE" --gpus 1 2 4 8 > "$WORK/simulate-$LABEL.txt" 2>&1
    note "simulate: exit status $?"
    tee -a "$SUMMARY" < "$WORK/simulate-$LABEL.txt"
  fi
else
  note "no cell store under $WORK/cells/$LABEL: nothing was measured"
fi
if [[ "${INIT_BENCH:-1}" == 1 && $(left) -gt 100 ]]; then
  step "CUDA's start in many processes at once"
  GPU_LIST=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | tr '\n' ' ')
  # shellcheck disable=SC2086  # one argument a GPU
  timeout $(( $(left) - 20 )) "$PY" tools/cuda_init_bench.py --gpus ${GPU_LIST:-0} --per-gpu 16 --turns 4 \
    --out "$WORK/cuda-init-$LABEL.json" > "$WORK/cuda-init-$LABEL.txt" 2>&1
  note "cuda init bench: exit status $?"
  grep '^{' "$WORK/cuda-init-$LABEL.txt" | tee -a "$SUMMARY"
fi

[[ $rc == 0 ]]
