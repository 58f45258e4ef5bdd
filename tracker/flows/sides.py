"""The two sides of a change: which commits, what each measures, the `run` command of each, and running them.

Each side is measured in a temporary git worktree of its commit (`worktrees`), so the code measured is that
commit's, whatever is checked out here. A side's `run` is that commit's own command line (`python -m tracker.cli
run` in its worktree): a base older than this checkout measures with its own harness, and the flow passes it only
options every version since has taken. The measuring step takes a runner callable, so tests inject a fake.
"""

from __future__ import annotations

import ast
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from tracker.errors import ToolError
from tracker.store.commits import CommitError, UnknownRef, git, resolve_ref


class FlowError(ToolError):
    pass


@dataclass(frozen=True)
class Side:
    """What the flow measures at one of its commits."""

    label: str  # "base" or "head"
    commit: str
    workloads: tuple[str, ...]


@dataclass(frozen=True)
class Command:
    """`compile-baselines run ...` for one side, run inside that side's worktree; `env`: variables set for it (the
    GPU it measures on), `cpus`: the cores it may use (None: any)."""

    label: str  # what its output lines start with: "base", "head", "base@1" ...
    argv: list[str]
    cwd: Path
    env: Mapping[str, str] = field(default_factory=dict)
    cpus: frozenset[int] | None = None


# runner(commands) -> their exit codes: runs the commands at once, each in its own worktree.
Runner = Callable[[Sequence[Command]], list[int]]


def resolve(ref: str, repo_dir: Path) -> str:
    try:
        return resolve_ref(ref, repo_dir)
    except UnknownRef as e:  # in the words every command uses, what to do added: a mistake of the input (exit 2)
        raise UnknownRef(f"{e}: fetch it (actions/checkout with fetch-depth: 0) or pass a commit hash") from None


def changed_files(base: str, head: str, repo_dir: Path) -> list[str]:
    """What head changed since it left base (three dots: the merge base, so base's own later commits do not count)."""
    return [line for line in git(["diff", "--name-only", f"{base}...{head}"], repo_dir).splitlines() if line]


def workloads_at(commit: str, repo_dir: Path) -> tuple[str, ...] | None:
    """WORKLOAD_NAMES as of `commit` (None when it cannot be read): a side measures only what exists there."""
    try:
        source = git(["show", f"{commit}:workloads/names.py"], repo_dir)
        for node in ast.parse(source).body:
            if isinstance(node, ast.AnnAssign | ast.Assign):
                targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
                if any(isinstance(t, ast.Name) and t.id == "WORKLOAD_NAMES" for t in targets) and node.value:
                    return tuple(ast.literal_eval(node.value))
    except (CommitError, SyntaxError, ValueError):
        pass
    return None


@contextlib.contextmanager
def worktrees(sides: Sequence[Side], repo_dir: Path) -> Iterator[dict[str, Path]]:
    """A temporary worktree of each side's commit, by label; removed on the way out, whatever happened."""
    with tempfile.TemporaryDirectory(prefix="compile-baselines-pr-") as tmp:
        trees: dict[str, Path] = {}
        try:
            for side in sides:
                tree = Path(tmp) / side.commit[:12]
                if tree not in trees.values():
                    git(["worktree", "add", "--detach", "--quiet", str(tree), side.commit], repo_dir)
                trees[side.label] = tree
            yield trees
        finally:
            for tree in dict.fromkeys(trees.values()):
                git(["worktree", "remove", "--force", str(tree)], repo_dir)


def run_commands(commands: Sequence[Command]) -> list[int]:
    """The real runner: the commands at once, their output (progress, each run's summary) on our stderr, each line
    after its label, so that stdout carries the comment alone (`compile-baselines pr ... > comment.md`)."""
    sys.stdout.flush()
    sys.stderr.flush()
    procs = []
    try:
        for c in commands:
            env = {**os.environ, **c.env}
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(c.cwd), os.environ.get("PYTHONPATH")]))
            proc = subprocess.Popen(c.argv, cwd=c.cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, errors="replace")
            procs.append(proc)
            if c.cpus and hasattr(os, "sched_setaffinity"):
                # Before the run starts any thread or worker: they inherit it
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(proc.pid, c.cpus)
        echoes = [threading.Thread(target=_echo, args=(c.label, p.stdout), daemon=True)
                  for c, p in zip(commands, procs, strict=True)]
        for t in echoes:
            t.start()
        codes = [p.wait() for p in procs]
        for t in echoes:
            t.join()
        return codes
    except BaseException:
        # Interrupted: each run is asked to stop as on Ctrl-C, so it ends its own cell workers (each in a session of
        # its own) rather than leaving them running.
        for p in procs:
            p.send_signal(signal.SIGINT)
        for p in procs:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
        raise


def _echo(label: str, out: TextIO | None) -> None:
    for line in out or ():
        sys.stderr.write(f"{label} | {line}")
        sys.stderr.flush()


def run_command_line(commit: str, workloads: Sequence[str], results_dir: Path, machine: str, jobs: int | None,
                     presets: Sequence[str] | None, cells: Sequence[str] = (), replicates: int | None = None,
                     modes: Sequence[str] | None = None) -> list[str]:
    """One side's `run`: the workloads (and presets) given, one compile a cell; or `cells` only, to `replicates`
    compiles each whatever their mode (a round of the paired measurement)."""
    # `python -m tracker.cli` rather than the `compile-baselines` script: the script imports the installed
    # (head) checkout, this imports the worktree's code (cwd first on sys.path), whose workers do the same.
    command = [sys.executable, "-m", "tracker.cli", "run", "--commit", commit, "--machine", machine,
               "--results-dir", str(results_dir), "--workload", *workloads]
    if presets:
        command += ["--preset", *presets]
    if modes:
        command += ["--mode", *modes]
    if jobs:
        command += ["-j", str(jobs)]
    if cells:
        return [*command, "--cell", *cells, "--replicates", str(replicates), "--replicate-all-modes"]
    return [*command, "--replicates", "1"]


def check_codes(commands: Sequence[Command], codes: Sequence[int]) -> None:
    for c, rc in zip(commands, codes, strict=True):
        if rc != 0:
            commit = c.argv[c.argv.index("--commit") + 1] if "--commit" in c.argv else c.label
            raise FlowError(f"measuring {commit[:12]} failed (exit {rc}); its log is above")


__all__ = ["Command", "FlowError", "Runner", "Side", "changed_files", "check_codes", "resolve", "run_command_line",
           "run_commands", "workloads_at", "worktrees"]
