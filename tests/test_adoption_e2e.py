"""A newcomer's path, end to end on the CPU, as docs/plugins.md's Start gives it: `init` a kernel repository, commit
it, install it beside this project into a scratch target with pip, and from inside it run twice (a commit apart),
compare the two runs and print the PR comment without a token (a change to the kernel alone: the candidate measured
in pairs, eager once for both commits). Everything lands in the kernel repository, under its commits, and the study's
asv grid is the one it is without a plugin.

One workload on the tiny preset in eager (and its candidate): no compiles; the whole path took 134 s on a busy 2-core
host, its `pr` 101 s (it ends when the candidate's pairs decide it: how noisy the host is decides how many rounds).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workloads.names import ENV_PLUGINS, MODES, PRESET_NAMES, WORKLOAD_NAMES

ROOT = Path(__file__).resolve().parent.parent
REF = "c30913a34f8d40dc30ed91adcacb8885a2e115d9"  # the commit that added .github/workflows/kernel-repo.yml
FAST = ["--mode", "eager", "--machine", "ci-box", "--rep-ms", "20", "--warmup-ms", "2", "--warmup-calls", "2"]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("setuptools") is None,
                       reason="pip builds the kernel repository with the environment's setuptools (no network)"),
]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                          capture_output=True, text=True).stdout.strip()


class Newcomer:
    """Commands as a user types them, from a working directory of their choice, with the kernel repository
    installed into `site` (a scratch pip target) beside this checkout."""

    def __init__(self, tmp: Path) -> None:
        self.tmp, self.repo, self.site = tmp, tmp / "acme-kernels", tmp / "site"
        (tmp / "home").mkdir()
        self.env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_TOKEN", "COMPILE_BASELINES_REPO")}
        self.env.update(HOME=str(tmp / "home"), PYTHONPATH=os.pathsep.join([str(ROOT), str(self.site)]),
                        ASV_PYTHONPATH=str(self.site))  # asv's processes drop PYTHONPATH
        self.env[ENV_PLUGINS] = "acme"  # this test's plugin alone, whatever else is installed here

    def cli(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([sys.executable, "-m", "tracker.cli", *args], cwd=cwd or self.repo, env=self.env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done

    def install(self) -> None:
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                        "--target", str(self.site), str(self.repo)], check=True, env=self.env, capture_output=True,
                       timeout=300)


def test_a_kernel_repository_from_init_to_a_pr_comment_on_cpu(tmp_path: Path) -> None:
    user = Newcomer(tmp_path)
    user.cli("init", "--dir", "acme-kernels", "--namespace", "acme", "--ref", REF, cwd=tmp_path)
    _git(user.repo, "init", "-q")
    _git(user.repo, "add", "-A")
    _git(user.repo, "commit", "-qm", "start")
    user.install()
    first = _git(user.repo, "rev-parse", "HEAD")

    run = user.cli("run", "--workload", "acme.*", *FAST)
    assert "2 cells: 2 ok, 0 failed, 0 skipped" in run.stdout  # eager and the candidate torch_reference
    assert f"run: commit {first[:12]}, machine ci-box, device cpu, presets tiny" in run.stderr
    results = user.repo / ".asv" / "results"
    assert len(list((results / "ci-box").glob(f"{first[:8]}-*.json"))) == 1
    assert not (ROOT / ".asv" / "results" / "ci-box").exists()  # nothing written into this checkout
    assert _git(user.repo, "status", "--porcelain") == ""  # init's .gitignore covers what runs and pip leave

    kernels = user.repo / "acme_kernels" / "kernels.py"
    kernels.write_text(kernels.read_text().replace("torch.nn.functional.silu(x)", "x * torch.sigmoid(x)"))
    run = user.cli("run", "--workload", "acme.*", *FAST)  # the change, measured before it is committed
    assert (f"run: note: 1 file(s) in {user.repo.resolve()} have uncommitted changes (e.g. acme_kernels/kernels.py): "
            f"they are measured but recorded under commit {first[:12]}, which lacks them") in run.stderr
    _git(user.repo, "commit", "-qam", "silu written out")
    second = _git(user.repo, "rev-parse", "HEAD")
    user.cli("run", "--workload", "acme.*", *FAST)

    compared = json.loads(user.cli("compare", "--format", "json").stdout)
    assert (compared["base"]["commit"], compared["head"]["commit"]) == (first, second)
    assert {(c["preset"], c["workload"], c["mode"]) for c in compared["cells"]} == {
        ("tiny", "acme.silu", "eager"), ("tiny", "acme.silu", "kernel:torch_reference")}
    assert compared["added"] == compared["removed"] == []
    assert all(c["base_ms"] and c["head_ms"] for c in compared["cells"])  # every number in place

    # A kernel-only PR, measured afresh: the candidate at both commits in pairs, eager (its baseline) once, at head
    fresh = tmp_path / "pr" / "results"
    started = time.monotonic()
    pr = user.cli("pr", "--base", "HEAD~1", "--head", "HEAD", "--mode", "eager", "--machine", "ci-box",
                  "--results-dir", str(fresh))
    print(f"kernel-only pr: {time.monotonic() - started:.0f} s")
    assert pr.stdout.startswith("<!-- compile-baselines:pr-comment -->\n")
    assert "Only kernels under test changed" in pr.stdout and "shared baseline: one measurement" in pr.stdout
    assert "wins by domain" not in pr.stderr  # each side's progress, not its summary; its kernel in five compiles
    assert re.search(r"^base \| \[1/5\] tiny acme\.silu kernel:torch_reference( #\d)?: ok", pr.stderr, re.M)
    assert f"`{first[:8]}` → `{second[:8]}` on **ci-box**" in pr.stdout
    assert "Measured acme.silu (acme_kernels/kernels.py changed)." in pr.stdout
    assert "| acme.silu | tiny | torch_reference |" in pr.stdout and "tokens=" not in pr.stdout
    assert "prefill" not in pr.stdout and "llm_rmsnorm" not in pr.stdout

    suite = json.loads((results / "benchmarks.json").read_text())  # as asv's discovery saw it, plugin installed
    assert suite["baselines.Baseline.track_latency"]["params"] == [
        [repr(p) for p in PRESET_NAMES], [repr(w) for w in WORKLOAD_NAMES], [repr(m) for m in MODES]]
    assert suite["baselines.Baseline.track_latency"]["version"] == "1"
    presets, workloads, modes = suite["baselines.PluginBaseline.track_latency"]["params"]
    assert (presets[0], workloads, modes) == ("'tiny'", ["'acme.silu'"], [repr(m) for m in MODES])
    assert all(p == "'tiny'" or p.startswith("'tokens=") for p in presets)
