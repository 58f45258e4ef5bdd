"""Benchmark (not a test) of CUDA's start in many processes at once: what the runner's workers pay in their
cuda_init phase, measured apart from everything else they do.

    python tools/cuda_init_bench.py --per-gpu 16 --gpus 0 1 2 3 --out init.json

For each variant it starts processes that each create a CUDA context on one GPU (CUDA_VISIBLE_DEVICES of that GPU
alone) at the same instant, as the runner's do (tracker.measure.harness.init_cuda), and prints per variant the
seconds of cuInit (torch.cuda.is_available), of the context and cuBLAS handle, and of waiting for a turn where a
gate (tracker.measure.cudainit) bounds how many start at once on a GPU:
- forked: children of the runner's fork server (tracker.runner.forkserver), the runner's own path;
- fresh: new interpreters that import torch first (their import is not counted), for comparison with the fork;
- one process alone, the per-GPU count on one GPU, and the per-GPU count on every GPU; with gates of --turns.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tracker.measure import cudainit
from tracker.paths import REPO_ROOT
from tracker.runner.forkserver import ForkServer

MODULE = "tools.cuda_init_bench"


def main_child(argv: list[str]) -> int:
    """In a worker: wait for the start instant, then time cuInit, the gate's turn and the context; write FILE."""
    out, start_at, gate = argv[0], float(argv[1]), argv[2] if len(argv) > 2 else ""
    import torch

    from tracker.measure.harness import init_cuda

    time.sleep(max(0.0, start_at - time.time()))
    t0 = time.time()
    available = torch.cuda.is_available()
    t1 = time.time()
    turn = cudainit.InitGate(gate.rpartition(",")[0], int(gate.rpartition(",")[2])).held() if gate else None
    if turn is not None:
        turn.__enter__()
    t2 = time.time()
    if available:
        init_cuda()
    t3 = time.time()
    if turn is not None:
        turn.__exit__(None, None, None)
    Path(out).write_text(json.dumps({"late_s": t0 - start_at, "cuinit_s": t1 - t0, "wait_s": t2 - t1,
                                     "context_s": t3 - t2, "gpu": os.environ.get("CUDA_VISIBLE_DEVICES")}))
    return 0


main = main_child  # the fork server runs MODULE.main(argv)


def _variant(name: str, gpus: list[str], per_gpu: int, turns: int, fresh: bool, server: ForkServer,
             tmp: Path) -> dict:
    start_at = time.time() + (8.0 if fresh else 2.0)
    outs, waits = [], []
    for gpu in gpus:
        for k in range(per_gpu):
            out = tmp / f"{name}-{gpu}-{k}.json"
            gate = cudainit.spec(str(tmp / f"{name}-gpu{gpu}.init"), turns) if turns else ""
            argv = [str(out), f"{start_at:.3f}", gate]
            env = {**os.environ, "CUDA_VISIBLE_DEVICES": gpu, "PYTHONPATH": str(REPO_ROOT)}
            if fresh:
                waits.append(subprocess.Popen([sys.executable, "-c", f"import sys, {MODULE} as m; "
                                               "sys.exit(m.main_child(sys.argv[1:]))", *argv], env=env, cwd=REPO_ROOT))
            else:
                child = server.launch(MODULE, argv, env, REPO_ROOT, tmp / f"{name}-{gpu}-{k}.err")
                waits.append(child)
            outs.append(out)
    for w in waits:
        w.wait(300) if isinstance(w, subprocess.Popen) else server.wait(w, 300)
    rows = [json.loads(o.read_text()) for o in outs if o.exists()]
    summary = {"variant": name, "processes": len(outs), "measured": len(rows)}
    for key in ("late_s", "cuinit_s", "wait_s", "context_s"):
        xs = sorted(r[key] for r in rows)
        if xs:
            summary[key] = {"median": round(statistics.median(xs), 3), "max": round(xs[-1], 3)}
    return summary


def run(gpus: list[str], per_gpu: int, turns: list[int], fresh: bool) -> list[dict]:
    server = ForkServer(preload=(MODULE, "torch._dynamo", "torch._inductor.compile_fx"))
    variants = [("alone", gpus[:1], 1, 0), (f"{per_gpu}-on-one", gpus[:1], per_gpu, 0),
                (f"{per_gpu}-on-each", gpus, per_gpu, 0),
                *((f"{per_gpu}-on-each-gate{t}", gpus, per_gpu, t) for t in turns)]
    out = []
    with tempfile.TemporaryDirectory(prefix="cb-init-") as tmp:
        try:
            _variant("start-the-server", gpus[:1], 1, 0, False, server, Path(tmp))  # its imports are not timed
            for name, on, n, t in variants:
                out.append(_variant(f"forked-{name}", on, n, t, False, server, Path(tmp)))
                print(json.dumps(out[-1]), flush=True)
            if fresh:
                out.append(_variant(f"fresh-{per_gpu}-on-each", gpus, per_gpu, 0, True, server, Path(tmp)))
                print(json.dumps(out[-1]), flush=True)
        finally:
            server.close()
    return out


def cli() -> int:
    a = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    a.add_argument("--gpus", nargs="+", default=["0"])
    a.add_argument("--per-gpu", type=int, default=16)
    a.add_argument("--turns", type=int, nargs="*", default=[2, 4])
    a.add_argument("--fresh", action="store_true", help="also fresh interpreters (slow: each imports torch)")
    a.add_argument("--out")
    args = a.parse_args()
    rows = run(args.gpus, args.per_gpu, args.turns, args.fresh)
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(cli())
