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
import re
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
from tracker.runner.progress import PROGRESS_ONLY
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


def merge_base(base: str, head: str, repo_dir: Path) -> str:
    """Where head left base: the commit `changed_files` compares head with."""
    return git(["merge-base", base, head], repo_dir).strip()


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


# Top-level folders a side's run never imports: left out of its worktree (this repository's test fixtures are 96% of
# its files, and writing them out was most of a side's start).
NOT_CHECKED_OUT = ("tests", "docs")


@contextlib.contextmanager
def worktrees(sides: Sequence[Side], repo_dir: Path) -> Iterator[dict[str, Path]]:
    """A temporary worktree of each side's commit, by label, without the NOT_CHECKED_OUT folders; removed on the way
    out, whatever happened."""
    with tempfile.TemporaryDirectory(prefix="compile-baselines-pr-") as tmp:
        trees: dict[str, Path] = {}
        try:
            for side in sides:
                tree = Path(tmp) / side.commit[:12]
                new = tree not in trees.values()
                if new:
                    git(["worktree", "add", "--detach", "--quiet", "--no-checkout", str(tree), side.commit], repo_dir)
                trees[side.label] = tree  # removed on the way out from here on
                if new:
                    _check_out(tree)
            yield trees
        finally:
            for tree in dict.fromkeys(trees.values()):
                git(["worktree", "remove", "--force", str(tree)], repo_dir)


def _check_out(tree: Path) -> None:
    """The worktree's files but NOT_CHECKED_OUT's: those are marked skip-worktree in its index (what a sparse
    checkout does, without the repository-wide config it needs), so git sees the worktree clean."""
    git(["reset", "--quiet"], tree)  # the index from HEAD, no file written yet
    left_out = git(["ls-files", "-z", "--", *(f":(top){d}" for d in NOT_CHECKED_OUT)], tree)
    if left_out:
        git(["update-index", "-z", "--skip-worktree", "--stdin"], tree, stdin=left_out)
    git(["checkout-index", "--all", "--quiet"], tree)


def run_commands(commands: Sequence[Command]) -> list[int]:
    """The real runner: the commands at once, their progress on our stderr, each line after its label, so that stdout
    carries the comment alone (`compile-baselines pr ... > comment.md`); each run is asked for its progress only
    (PROGRESS_ONLY) and what it prints beyond (a run of an older version prints its summary) is held back
    (`Condenser`), its last lines shown where the run fails."""
    sys.stdout.flush()
    sys.stderr.flush()
    procs = []
    try:
        for c in commands:
            env = {**os.environ, **c.env, PROGRESS_ONLY: "1"}
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(c.cwd), os.environ.get("PYTHONPATH")]))
            proc = subprocess.Popen(c.argv, cwd=c.cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, errors="replace")
            procs.append(proc)
            if c.cpus and hasattr(os, "sched_setaffinity"):
                # Before the run starts any thread or worker: they inherit it
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(proc.pid, c.cpus)
        shown = [Condenser(c.label) for c in commands]
        echoes = [threading.Thread(target=_echo, args=(k, p.stdout), daemon=True) for k, p in zip(shown, procs,
                                                                                                   strict=True)]
        for t in echoes:
            t.start()
        codes = [p.wait() for p in procs]
        for t in echoes:
            t.join()
        for k, rc in zip(shown, codes, strict=True):
            if rc != 0:
                k.show_held()
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


# The line a run prints when it has measured everything, before its summary: "14 cells: 14 ok, 0 failed, ..."
_OUTCOME = re.compile(r"^\d+ cells?: \d+ ok, \d+ failed, \d+ skipped in ")
_HELD = ("run: commit ", "GPU lock held ")  # each run's header and its lock's share: said once a run, not progress


class Condenser:
    """What `pr` shows of one run's output: its progress (a line per measurement), its notes, warnings and outcome,
    and the cells that failed; not its header, nor the summary it prints after its outcome (runs of versions before
    PROGRESS_ONLY print one whatever they are told). What it holds back it keeps: `show_held` prints the last lines."""

    def __init__(self, label: str, out: TextIO | None = None, keep: int = 60) -> None:
        self.label, self.out, self.keep = label, out, keep
        self.held: list[str] = []
        self.summary = False  # past the outcome line

    def feed(self, line: str) -> None:
        text = line.rstrip("\n")
        shown = not self.summary and bool(text.strip()) and not text.startswith(_HELD)
        shown = shown or (self.summary and text.lstrip().startswith(("failed:", "warning")))
        self.summary = self.summary or bool(_OUTCOME.match(text))
        if shown:
            self._write(text)
        else:
            self.held = [*self.held[-(self.keep - 1):], text]

    def show_held(self) -> None:
        """The lines held back, the last `keep` of them: the run failed, its log tells why."""
        for text in self.held:
            self._write(text)
        self.held = []

    def _write(self, text: str) -> None:
        out = self.out or sys.stderr
        out.write(f"{self.label} | {text}\n")
        out.flush()


def _echo(shown: Condenser, out: TextIO | None) -> None:
    for line in out or ():
        shown.feed(line)


def run_command_line(commit: str, workloads: Sequence[str], results_dir: Path, machine: str, jobs: int | None,
                     presets: Sequence[str] | None, cells: Sequence[str] = (), replicates: int | None = None,
                     modes: Sequence[str] | None = None) -> list[str]:
    """One side's `run`: the workloads (and presets) given, one compile a cell, or `replicates` each; or `cells`
    only, to `replicates` compiles each whatever their mode (a round of the paired measurement)."""
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
    if replicates:  # every cell of the workloads that many compiles (a kernel-only change's kernels, kernelrun)
        return [*command, "--replicates", str(replicates), "--replicate-all-modes"]
    return [*command, "--replicates", "1"]


def modes_command_line(commit: str, workloads: Sequence[str], results_dir: Path, machine: str,
                       presets: Sequence[str] | None, modes: Sequence[str] | None = None,
                       kernels: Sequence[str] = ()) -> list[str]:
    """A side's `run` of the workloads' modes and of `kernels` (WORKLOAD:NAME; none by default), each in as many
    compiles as `run` gives it by default (the nightly's baseline): a kernel-only change's baseline, measured once
    for both sides."""
    command = [sys.executable, "-m", "tracker.cli", "run", "--commit", commit, "--machine", machine,
               "--results-dir", str(results_dir), "--workload", *workloads, "--kernel", *(kernels or ["none"])]
    if presets:
        command += ["--preset", *presets]
    return command + (["--mode", *modes] if modes else [])


def kernels_command_line(run_argv: Sequence[str], files: Sequence[str] | None = None,
                         record: Path | None = None) -> list[str]:
    """A side's `run` (`run_command_line`) of its kernels under test declared in `files` (every one where None), as
    its own code lists them; with `record`, its `run` of the modes (`modes_command_line`) and of the kernels declared
    elsewhere, listed in `record` (tracker.flows.kernelrun, handed to `python -c` in the side's worktree)."""
    from tracker.flows import kernelrun

    if list(run_argv[:4]) != [sys.executable, "-m", "tracker.cli", "run"]:
        raise ValueError(f"not a side's run: {' '.join(run_argv[:4])}")
    own = (["--files", *files] if files is not None else []) + (["--baseline", str(record)] if record else [])
    return [sys.executable, "-c", Path(kernelrun.__file__).read_text(encoding="utf-8"), *own, "--", *run_argv[3:]]


def check_codes(commands: Sequence[Command], codes: Sequence[int]) -> None:
    for c, rc in zip(commands, codes, strict=True):
        if rc != 0:
            commit = c.argv[c.argv.index("--commit") + 1] if "--commit" in c.argv else c.label
            raise FlowError(f"measuring {commit[:12]} failed (exit {rc}); its log is above")


__all__ = ["PROGRESS_ONLY", "Command", "Condenser", "FlowError", "Runner", "Side", "changed_files", "check_codes",
           "kernels_command_line", "modes_command_line", "resolve", "run_command_line", "run_commands",
           "workloads_at", "worktrees"]
