"""Start each measurement's process by forking one that has already imported torch, dynamo, inductor and Triton.

Every cell's first measurement runs in a process of its own: its own compile caches, CUDA context and autotuning (a
process may then stay for further compiles of other cells, tracker.runner.resident). Started as a
fresh interpreter, each process first spent seconds of CPU importing torch and the compiler, on the cores the other
cells compile on (docs/runner.md). The server imports them once and forks a child per measurement. It
never initializes CUDA (a forked child could not use a context made before the fork; `torch.cuda.is_available`
asks NVML here, see SERVER_ENV), so each child still creates its own, as a fresh process would.

The server is `python -m tracker.runner.forkserver MODULE...` (the modules to import first). It reads one request
per line on stdin and answers on stdout, both JSON:

    {"id": 1, "module": "tracker.runner.worker", "argv": [...], "env": {...}, "cwd": "...", "stderr": "FILE"}
    -> {"id": 1, "pid": 4242}, and once the child has exited {"id": 1, "status": 0} (-N: killed by signal N)
    {"preload": ["torch._inductor.compile_fx", ...]}: more modules, imported before the next fork of a child that
    wants them; no answer. A request with "preloaded": false is forked at once, before any still to be imported:
    a measurement that compiles nothing does not wait seconds for the compiler's import at the start of a run.

A child runs `MODULE.main(argv)` in a session of its own (so a kill of its group ends its compile workers too), with
exactly `env` as its environment, `cwd` as its directory, stdout discarded and stderr written to FILE.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from tracker.errors import ToolError
from tracker.paths import REPO_ROOT

# What every measurement imports (the harness, torch, dynamo, which torch's own functions import on first call,
# Triton's timer), and what only a compiled cell's does: a run of eager and kernel cells alone spares inductor's
# import, a third of the server's
BASE = ("tracker.runner.worker", "torch._dynamo", "triton.testing")
COMPILER = ("torch._inductor.compile_fx", "torch._inductor.runtime.benchmarking")
PRELOAD = BASE + COMPILER
# The server's environment on top of the runner's: torch.cuda.is_available() asks NVML, not the CUDA driver.
SERVER_ENV = {"PYTORCH_NVML_BASED_CUDA_CHECK": "1"}


class ForkServerError(ToolError):
    pass


@dataclass(eq=False)
class Child:
    """A launched child: its pid once the server has forked it, its exit status once it has exited (None: unknown,
    the server exited first)."""

    id: int
    server: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    pid: int | None = None
    status: int | None = None
    forked: threading.Event = field(default_factory=threading.Event)
    exited: threading.Event = field(default_factory=threading.Event)


class ForkServer:
    """The runner's side: starts the server on the first launch (again if it has exited), launches, waits, kills."""

    def __init__(self, preload: tuple[str, ...] = PRELOAD) -> None:
        self.preload = preload
        self._proc: subprocess.Popen[bytes] | None = None
        self._children: dict[int, Child] = {}
        self._next_id = 0
        self._lock = threading.Lock()
        self._starting: threading.Thread | None = None
        self._booting: subprocess.Popen[bytes] | None = None  # a server still importing
        self.closed = False

    def launch(self, module: str, argv: list[str], env: dict[str, str], cwd: Path, stderr: Path,
               preloaded: bool = True) -> Child:
        """Fork a child running `module`; `preloaded`: with every module asked for by `preload_more` imported first
        (False: at once, with what the server has imported so far)."""
        with self._lock:
            proc = self._running()
            self._next_id += 1
            child = self._children[self._next_id] = Child(self._next_id, proc)
            request = {"id": child.id, "module": module, "argv": argv, "env": env, "cwd": str(cwd),
                       "stderr": str(stderr), "preloaded": preloaded}
            try:
                assert proc.stdin is not None
                proc.stdin.write(json.dumps(request).encode() + b"\n")
                proc.stdin.flush()
            except OSError as exc:
                self._children.pop(child.id)
                raise ForkServerError(f"the fork server stopped taking requests: {exc}") from exc
        return child

    def preload_more(self, modules: tuple[str, ...]) -> None:
        """The server imports `modules` too (if it can) before it forks the next child that is to have them (see
        `launch`): what a run learns it needs once the server is started."""
        with self._lock:
            proc = self._running()
            try:
                assert proc.stdin is not None
                proc.stdin.write(json.dumps({"preload": list(modules)}).encode() + b"\n")
                proc.stdin.flush()
            except OSError as exc:
                raise ForkServerError(f"the fork server stopped taking requests: {exc}") from exc

    def start_in_background(self) -> None:
        """Start the server now, in a thread, rather than on the first launch: it imports for seconds. A launch (and
        `close`) waits for it; one that fails to start is tried again, and its error raised, by the first launch."""

        def start() -> None:
            with self._lock, contextlib.suppress(ForkServerError):
                self._running()

        self._starting = threading.Thread(target=start, daemon=True)
        self._starting.start()

    def wait(self, child: Child, timeout: float | None) -> bool:
        """True once the child has exited (or its server has, so that nothing more will be known of it)."""
        return child.exited.wait(timeout)

    def kill(self, child: Child) -> None:
        """Kill the child's session: the child and every process it started (also when its server has exited, which
        leaves its status unknown; once the server has reaped it, its pid may belong to another process)."""
        if child.forked.wait(10) and child.pid is not None and child.status is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signal.SIGKILL)

    def close(self) -> None:
        """The server told to exit once its children have; one still importing (nothing launched) is killed."""
        self.closed = True
        if self._starting is not None:
            if self._starting.is_alive() and (booting := self._booting) is not None:
                booting.kill()
            self._starting.join()
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is not None:
            with contextlib.suppress(OSError):
                assert proc.stdin is not None
                proc.stdin.close()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def _running(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        proc = subprocess.Popen([sys.executable, "-m", __name__, *self.preload], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=REPO_ROOT,
                                env={**os.environ, **SERVER_ENV}, start_new_session=True)
        assert proc.stdout is not None
        self._booting = proc
        ready = proc.stdout.readline()
        self._booting = None
        try:
            message = json.loads(ready)
        except ValueError:
            proc.kill()
            raise ForkServerError(f"the fork server did not start (exit status {proc.wait()})") from None
        if "error" in message:
            proc.kill()
            raise ForkServerError(f"the fork server did not start: {message['error']}")
        self._proc = proc
        threading.Thread(target=self._read, args=(proc, proc.stdout), daemon=True).start()
        return proc

    def _read(self, proc: subprocess.Popen[bytes], out: BinaryIO) -> None:
        for line in out:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            with self._lock:
                child = self._children.get(message["id"])
            if child is None:
                continue
            if "pid" in message:
                child.pid = message["pid"]
                child.forked.set()
            else:
                child.status = message["status"]
                with self._lock:
                    self._children.pop(child.id, None)
                child.exited.set()
        with self._lock:  # the server has exited: nothing more will be heard of its children
            orphans = [c for c in self._children.values() if c.server is proc]
            for c in orphans:
                self._children.pop(c.id)
        for c in orphans:
            c.forked.set()
            c.exited.set()


_EARLY: ForkServer | None = None


def early() -> ForkServer:
    """This process's server for `run`, started in the background by the first to ask: `run` itself, before its own
    imports, or earlier still the process that becomes a `run` (a PR side's, tracker.flows.kernelrun, before it lists
    its kernels), so that the server's import of torch overlaps theirs."""
    global _EARLY
    if _EARLY is None or _EARLY.closed:
        _EARLY = ForkServer(BASE)
        _EARLY.start_in_background()
    return _EARLY


def stderr_tail(path: Path, limit: int = 4096) -> str:
    """The last `limit` bytes a child wrote to its stderr file, as text ("" if none)."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - limit))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


# The server (python -m tracker.runner.forkserver MODULE...).

def _preload(modules: list[str]) -> list[str]:
    loaded = []
    for name in modules:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
            loaded.append(name)
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        raise ForkServerError("importing the preloaded modules initialized CUDA")
    return loaded


def _freeze() -> None:
    import gc

    gc.freeze()  # the preloaded objects stay shared with the children rather than copied as the collector touches them


def _serve(requests: int, replies: int) -> None:
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that SIGCHLD writes to the wakeup pipe
    children: dict[int, int] = {}  # pid -> request id
    pending = b""
    wanted: list[str] = []  # asked for by "preload", imported before the next fork of a child that wants them

    def reply(message: dict[str, Any]) -> None:
        os.write(replies, json.dumps(message).encode() + b"\n")

    while True:
        ready, _, _ = select.select([requests, wake_r], [], [])
        if wake_r in ready:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_r, 4096)
        while children and (pid_status := os.waitpid(-1, os.WNOHANG))[0]:
            pid, status = pid_status
            if pid in children:
                reply({"id": children.pop(pid), "status": os.waitstatus_to_exitcode(status)})
        if requests not in ready:
            continue
        data = os.read(requests, 1 << 16)
        if not data:
            return  # the runner has gone: its children finish on their own
        pending += data
        *lines, pending = pending.split(b"\n")
        for line in lines:
            request = json.loads(line)
            if "preload" in request:
                wanted += request["preload"]
                continue
            if wanted and request.get("preloaded", True):
                _preload(wanted)
                _freeze()
                wanted = []
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _child(request, (replies, wake_r, wake_w))
            children[pid] = request["id"]
            reply({"id": request["id"], "pid": pid})


def _child(request: dict[str, Any], server_fds: tuple[int, ...]) -> None:
    code = 1
    try:
        os.setsid()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for fd in server_fds:
            os.close(fd)
        devnull = os.open(os.devnull, os.O_RDWR)
        err = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        os.dup2(err, 2)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        config = sys.modules.get("torch._inductor.config")
        if config is not None and hasattr(config, "decide_compile_threads"):
            config.compile_threads = config.decide_compile_threads()  # the server read its own environment's
        code = importlib.import_module(request["module"]).main(request["argv"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code or 0)


def main(modules: list[str]) -> int:
    replies = os.dup(1)
    os.dup2(2, 1)  # whatever the preloaded modules print stays off the replies
    try:
        loaded = _preload(modules)
    except BaseException as exc:
        os.write(replies, json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode() + b"\n")
        return 1
    os.write(replies, json.dumps({"ready": loaded}).encode() + b"\n")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the runner stops the children; Ctrl-C must not end the server
    _freeze()
    _serve(0, replies)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
