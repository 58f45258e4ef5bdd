"""`compile-baselines pr`: a pull request's whole flow on a GPU host: find what it changed, measure that at its
base and at its head, compare, render, and post (or update) the one PR comment.

Only the workloads whose code changed are measured (a domain module: the workloads it defines; a kernel module:
the workloads of its candidates, whose modes they are judged against), or all of them when the harness or the
dependency pins changed. Each side is measured in a temporary git worktree of its commit, so the code measured is
that commit's, whatever is checked out here; on a GPU host both sides at once (`measure`). The measuring step takes
a runner callable, so tests inject a fake.
"""

from __future__ import annotations

import ast
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from tracker.analyse import compare, confirm
from tracker.analyse.attribution import select_workloads
from tracker.errors import ToolError, UsageError
from tracker.github.client import GitHubError, check_pr, from_env, repository
from tracker.github.comment import upsert_comment
from tracker.paths import REPO_ROOT
from tracker.publish import prcomment, units
from tracker.store.commits import CommitError, git, resolve_ref

ROOT = REPO_ROOT


@dataclass(frozen=True)
class Side:
    """What the PR measures at one of its commits."""

    label: str  # "base" or "head"
    commit: str
    workloads: tuple[str, ...]


@dataclass(frozen=True)
class Command:
    """`compile-baselines run ...` for one side of the PR, run inside that side's worktree."""

    label: str  # "base" or "head": what its output lines start with
    argv: list[str]
    cwd: Path


# runner(commands) -> their exit codes: runs the commands at once, each in its own worktree.
Runner = Callable[[Sequence[Command]], list[int]]


class PrFlowError(ToolError):
    pass


# ---------------------------------------------------------------------------------------------------- git


def _resolve(ref: str, repo_dir: Path) -> str:
    try:
        return resolve_ref(ref, repo_dir)
    except CommitError as e:
        raise PrFlowError(f"{e}: fetch it (actions/checkout with fetch-depth: 0) or pass a commit hash") from None


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


# ---------------------------------------------------------------------------------------------------- measuring


def run_commands(commands: Sequence[Command]) -> list[int]:
    """The real runner: the commands at once, their output (progress, each run's summary) on our stderr, each line
    after its side's label, so that stdout carries the comment alone (`compile-baselines pr ... > comment.md`)."""
    sys.stdout.flush()
    sys.stderr.flush()
    procs = []
    try:
        for c in commands:
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(c.cwd), env.get("PYTHONPATH")]))
            procs.append(subprocess.Popen(c.argv, cwd=c.cwd, env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True, errors="replace"))
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
    if cells:  # a confirmation: these cells only, in `replicates` compiles whatever their mode
        return [*command, "--cell", *cells, "--replicates", str(replicates), "--replicate-all-modes"]
    # The first pass compiles each cell once: a PR asks what changed, and confirmation gives every cell that moved
    # its compiles on both sides (pr_main).
    return [*command, "--replicates", "1"]


def measure(sides: Sequence[Side], repo_dir: Path, results_dir: Path, machine: str, jobs: int | None,
            presets: Sequence[str] | None, runner: Runner, cells: Sequence[str] = (),
            replicates: int | None = None, modes: Sequence[str] | None = None) -> None:
    """Measure each side in a temporary worktree of its commit, recording into `results_dir` (only `cells`, to
    `replicates` compiles each, when given).

    With `jobs` of 2 and more (a GPU host) the sides run at once, half the workers each. They share the results' cell
    store and with it its GPU lock, so their timings alternate on the GPU and whatever drifts in the meantime
    (clocks, temperature, the host's load) falls on both sides alike, not on the one measured second. With fewer (a
    CPU host, where timing runs on the cores compiling would take) one side after the other."""
    together = jobs is not None and jobs >= 2 and len(sides) > 1
    each = max(1, jobs // len(sides)) if together and jobs else jobs
    with tempfile.TemporaryDirectory(prefix="compile-baselines-pr-") as tmp:
        commands = []
        try:
            for side in sides:
                tree = Path(tmp) / side.commit[:12]
                git(["worktree", "add", "--detach", "--quiet", str(tree), side.commit], repo_dir)
                commands.append(Command(side.label, run_command_line(side.commit, side.workloads, results_dir,
                                                                     machine, each, presets, cells, replicates,
                                                                     modes), tree))
            codes = runner(commands) if together else [rc for c in commands for rc in runner([c])]
        finally:
            for c in commands:
                git(["worktree", "remove", "--force", str(c.cwd)], repo_dir)
    for side, rc in zip(sides, codes, strict=True):
        if rc != 0:
            raise PrFlowError(f"measuring {side.commit[:12]} failed (exit {rc}); its log is above")


# ---------------------------------------------------------------------------------------------------- the flow


def _target(repo: str | None, pr: int | None) -> tuple[str, str] | None:
    """(owner, name) of the repository to comment on, or None to print the comment."""
    if repo is None and pr is None:
        return None
    if repo is None or pr is None:
        raise UsageError("a repository and a PR number go together (or neither, to print the comment)")
    check_pr(pr)
    return repository(repo)


def publish(body: str, changed: bool, target: tuple[str, str] | None, pr: int | None, env: Mapping[str, str],
            only_on_change: bool = True) -> None:
    """Append to the job summary when in Actions, then comment (or print without a token or a PR). The body is
    printed on stdout, alone; what happened to it goes to stderr."""
    summary = env.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as f:
            f.write(body + "\n")
    if target is None:
        sys.stdout.write(body)
        return
    owner, name = target
    where = f"{owner}/{name}#{pr}"
    try:
        outcome = upsert_comment(from_env(env), owner, name, int(pr or 0), body, only_on_change, changed)
    except GitHubError as e:
        raise PrFlowError(f"could not comment on {where}: {e}") from None
    if outcome.action == "printed":
        sys.stdout.write(body)
        print(f"not posted to {where}: GITHUB_TOKEN is not set (the comment body is printed on stdout)",
              file=sys.stderr)
    elif outcome.action == "skipped":
        print(f"no comment on {where}: nothing changed and there is no earlier comment to update", file=sys.stderr)
    else:
        print(f"{outcome.action} comment {outcome.comment_id} on {where}: {outcome.url}", file=sys.stderr)


def pr_main(base_ref: str, head_ref: str, repo: str | None = None, pr: int | None = None,
            results_dir: str | os.PathLike[str] = ".asv/results", jobs: int | None = None,
            machine: str | None = None, presets: Sequence[str] | None = None, env: Mapping[str, str] | None = None,
            runner: Runner | None = None, repo_dir: str | os.PathLike[str] = ROOT, only_on_change: bool = True,
            fail_on: str = "never", scope: Sequence[str] | None = None,
            history: Sequence[str | os.PathLike[str]] = (), modes: Sequence[str] | None = None) -> int:
    """`compile-baselines pr`: exit 0, or 3 when `fail_on` holds; errors raise (CLI: 1, usage 2).

    A comment is created only when something changed (`only_on_change`), an earlier one is always updated.
    `scope`: the workloads this repository measures (a kernel repository's own); None: every one. `history`: results
    directories whose runs tell each cell's noise (the nightly's). Base and head are measured in one session, so the
    comparison leaves out the run-to-run noise of runs on other days; every workload measured is one whose source
    the PR changed, so each instance's modes are judged together (tracker.analyse.judge). `modes`: only these (None:
    all five)."""
    if fail_on not in compare.FAIL_ON:
        raise ValueError(f"fail_on is one of {', '.join(compare.FAIL_ON)}, not {fail_on!r}")
    target = _target(repo, pr)
    env = os.environ if env is None else env
    if target is not None:
        from_env(env)  # a malformed token fails now, not after the measuring
    repo_dir, results = Path(repo_dir).resolve(), Path(results_dir).resolve()
    machine = machine or socket.gethostname()
    base, head = _resolve(base_ref, repo_dir), _resolve(head_ref, repo_dir)
    files = changed_files(base, head, repo_dir)
    selection = select_workloads(files)
    if scope is not None:
        selection = selection.within(scope)
    log = sys.stderr
    print(f"pr: base {base[:12]} ({base_ref}), head {head[:12]} ({head_ref}), "
          f"{units.count(len(files), 'changed file')}; {selection.describe()}", file=log)
    if not selection.workloads:
        publish(prcomment.render_skipped(base, head, files), False, target, pr, env, only_on_change)
        return compare.EXIT_OK
    sides = []
    for label, commit in (("base", base), ("head", head)):
        there = workloads_at(commit, repo_dir)
        if names := tuple(w for w in selection.workloads if there is None or w in there):
            sides.append(Side(label, commit, names))
            print(f"pr: measuring {units.count(len(names), 'workload')} at {commit[:12]}", file=log)
    measure(sides, repo_dir, results, machine, jobs, presets, runner or run_commands, modes=modes)
    rule = compare.ChangeRule(confirm=(confirm.COMPILES, confirm.COMPILES))
    judge = {"workloads": selection.workloads, "rule": rule, "history": history, "together": True,
             "joint": selection.workloads}
    comparison = compare.compare_runs(results, base, head, machine, **judge)
    cells = confirm.candidates(comparison)
    if cells:
        # Each side's further compiles in one run, not a run per compile: they compile side by side, so a run costs
        # about the same whatever the number of compiles in it (docs/runner.md).
        print(f"pr: {units.count(len(cells), 'cell')} moved; measuring each again until it has {confirm.COMPILES} "
              "compiles a side", file=log)
        measure(sides, repo_dir, results, machine, jobs, presets, runner or run_commands, confirm.cell_names(cells),
                confirm.COMPILES, modes)
        comparison = compare.compare_runs(results, base, head, machine, **judge)
    for w in comparison.warnings:
        print(f"warning: {w}", file=log)
    body = prcomment.render_comment(comparison, scope=selection.describe().capitalize() + ".")
    publish(body, comparison.changed, target, pr, env, only_on_change)
    return compare.EXIT_FAIL_ON if comparison.fails(fail_on) else compare.EXIT_OK
