"""A child for tests/test_forkserver.py: `main([ACTION, FILE])` as the fork server runs it.

report: write what the child sees (its environment's FORK_TEST variable, CUDA_VISIBLE_DEVICES as the C library's
getenv reads it, the CUDA driver's way, directory, session) to FILE as JSON, a line to stderr, and exit with status
3. hang: start a grandchild that sleeps, write its pid to FILE, and sleep. loaded MODULE: write whether MODULE was
imported (by its server: the child imports nothing) to FILE, and exit."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import time


def _c_getenv(name: str = "CUDA_VISIBLE_DEVICES") -> str | None:
    libc = ctypes.CDLL(None)
    libc.getenv.restype = ctypes.c_char_p
    value = libc.getenv(name.encode())
    return None if value is None else value.decode()


def main(argv: list[str]) -> int:
    action, path, *more = argv
    if action == "loaded":
        with open(path, "w") as f:
            json.dump(more[0] in sys.modules, f)
        return 0
    if action == "report":
        seen = {"var": os.environ.get("FORK_TEST"), "server_var": os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK"),
                "cwd": os.getcwd(), "own_session": os.getsid(0) == os.getpid(), "cuda_visible": _c_getenv()}
        with open(path, "w") as f:
            json.dump(seen, f)
        print("the last line of stderr", file=sys.stderr)
        return 3
    grandchild = subprocess.Popen(["sleep", "120"])
    with open(path, "w") as f:
        f.write(str(grandchild.pid))
    time.sleep(120)
    return 0
