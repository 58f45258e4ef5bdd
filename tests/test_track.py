"""`compile-baselines track`, the nightly's tracking step: each machine measured at a commit against its previous
measured run, the PyTorch lines (one machine each) against each other, and the body of the tracking issue made of
the comparisons in which a best baseline changed; none changed: no body."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from comparecli import run_compare
from gitrepos import commit_all, origin_and_clone

from tracker import cli
from tracker.errors import ToolError
from tracker.publish.comparison import CompareRequest
from tracker.publish.nightly import NightOptions, Section, TrackError, body, track

ROOT = Path(__file__).resolve().parent.parent
# a PR's base and head on an H100, the head with changes planted in workloads/vlm.py that move best baselines
PLANT = ROOT / "tests" / "fixtures" / "h100-plant-confirm" / "results"
PLANT_BASE = "h100-p/45e09f3f-existing-py_opt_torch_.venv_bin_python3.json"
PLANT_HEAD = "h100-p/9cbf8b1f-existing-py_opt_torch_.venv_bin_python3.json"


def stub_runs(results: Path, runs: dict[str, tuple[str, ...]]) -> None:
    for machine, commits in runs.items():
        (results / machine).mkdir(parents=True)
        (results / machine / "machine.json").write_text("{}")
        for c in commits:
            (results / machine / f"{c[:8]}-existing-py.json").write_text("{}")


def no_steps(results: Path, machine: str) -> None:
    """The history's steps of stub result files: none (they hold no numbers)."""


class FakeCompare:
    """best_change's stand-in: the comparisons it was asked (what each request says of the runs and the rule), and a
    best-baseline change on the machines in `changed`."""

    FIELDS = ("base", "head", "machine", "head_machine", "allow_cross_versions", "confirm", "attribute_changes")

    def __init__(self, changed: set[str]) -> None:
        self.changed, self.calls = changed, []

    def __call__(self, request: CompareRequest, warn: Callable[[str], object]) -> str | None:
        self.calls.append({k: getattr(request, k) for k in self.FIELDS})
        changed = request.machine in self.changed and request.head_machine is None
        return f"{request.machine} -> {request.head_machine}: max-autotune -> default\n" if changed else None


def test_each_machine_against_its_previous_run_then_the_lines_against_the_first(tmp_path: Path) -> None:
    _, work, (c0, c1, c2) = origin_and_clone(tmp_path)
    results = tmp_path / "results"
    stub_runs(results, {"h100-torch-stable": (c0, c2), "h100-torch-nightly": (c0, c1, c2), "h100-torch-new": (c2,),
                        "h100-torch-retired": (c0,)})
    compare, said = FakeCompare({"h100-torch-stable"}), []
    sections = track(results, "HEAD", work, options=NightOptions(confirmed_only=True, attribute=True,
                                                                 allow_cross_versions=True),
                     compare=compare, say=said.append, steps=no_steps)
    night = {"head_machine": None, "allow_cross_versions": True, "confirm": (0, 3), "attribute_changes": True}
    lines = {"base": c2, "head": c2, "machine": "h100-torch-new", "allow_cross_versions": True, "confirm": (0, 0),
             "attribute_changes": False}
    assert compare.calls == [
        # night to night (tonight's machines in name order); a machine first measured tonight has no previous run
        {**night, "base": c1, "head": c2, "machine": "h100-torch-nightly"},
        {**night, "base": c0, "head": c2, "machine": "h100-torch-stable"},
        # tonight's commit across PyTorch lines: each other machine against the first
        {**lines, "head_machine": "h100-torch-nightly"},
        {**lines, "head_machine": "h100-torch-stable"},
    ]
    assert said == ["h100-torch-new: no earlier measured commit; nothing to compare",
                    f"h100-torch-nightly: best baseline unchanged since {c1[:12]}",
                    f"h100-torch-stable: best baseline changed since {c0[:12]}",
                    f"h100-torch-new vs h100-torch-nightly: best baselines agree at {c2[:12]}",
                    f"h100-torch-new vs h100-torch-stable: best baselines agree at {c2[:12]}"]
    assert sections == [Section("h100-torch-stable", "h100-torch-stable -> None: max-autotune -> default\n")]
    assert body(sections) == "## h100-torch-stable\n\nh100-torch-stable -> None: max-autotune -> default\n\n"


def test_one_machine_of_a_kernel_repository_against_its_previous_run_only(tmp_path: Path) -> None:
    _, work, (c0, _, c2) = origin_and_clone(tmp_path)
    results = tmp_path / "results"
    stub_runs(results, {"h100-torch-stable": (c0, c2), "h100-torch-nightly": (c2,)})
    compare = FakeCompare(set())
    assert track(results, c2, work, machines=["h100-torch-stable"], compare=compare, say=lambda _: None,
                 steps=no_steps) == []
    assert compare.calls == [{"base": c0, "head": c2, "machine": "h100-torch-stable", "head_machine": None,
                              "allow_cross_versions": False, "confirm": (0, 0), "attribute_changes": False}]


def track_command(monkeypatch: pytest.MonkeyPatch, results: Path, out: Path, work: Path, *options: str) -> int:
    """`compile-baselines track` of HEAD in the clone `work`."""
    monkeypatch.setenv("COMPILE_BASELINES_REPO", str(work))
    return cli.main(["track", "--results-dir", str(results), "--out", str(out), *options])


def test_the_body_is_written_when_a_best_baseline_changed_and_removed_when_none_did(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, work, (c0, _, c2) = origin_and_clone(tmp_path, touch="workloads/vlm.py")
    results = tmp_path / "results"
    refile(PLANT / PLANT_BASE, results, c0)
    refile(PLANT / PLANT_HEAD, results, c2)
    out = tmp_path / "issue.md"
    assert track_command(monkeypatch, results, out, work, "--fail-on", "best-change") == 3
    direct = tmp_path / "direct.md"
    assert run_compare(results, c0, c2, "h100-p", "md", "best-change", direct, repo_dir=work) == 3
    assert out.read_text() == f"## h100-p\n\n{direct.read_text()}\n"
    assert "Best baselines changed: " in out.read_text()
    # the next night measures the same code again: nothing changed, and no stale body is left to post
    refile(PLANT / PLANT_HEAD, results, next_commit(work))
    assert track_command(monkeypatch, results, out, work, "--fail-on", "best-change") == 0
    assert not out.exists()


def test_the_bisections_the_gpu_jobs_wrote_follow_the_comparisons_and_never_make_a_body_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, work, (c0, _, c2) = origin_and_clone(tmp_path, touch="workloads/vlm.py")
    results, bisections, out = tmp_path / "results", tmp_path / "bisections", tmp_path / "issue.md"
    refile(PLANT / PLANT_BASE, results, c0)
    refile(PLANT / PLANT_HEAD, results, c2)
    bisections.mkdir()
    (bisections / "stable.md").write_text("## h100-p-bisect: bisection of a..b\n\nfirst bad: `c` 'd'\n")
    (bisections / "nightly.md").write_text("## h100-n-bisect: bisection of e..f\n\nno change\n")
    assert track_command(monkeypatch, results, out, work, "--bisections", str(bisections)) == 0
    text = out.read_text()
    assert text.startswith("## h100-p\n\n") and text.endswith(
        "## h100-n-bisect: bisection of e..f\n\nno change\n\n## h100-p-bisect: bisection of a..b\n\n"
        "first bad: `c` 'd'\n\n")
    # no best baseline changed: no body, whatever a bisection wrote; a folder no job wrote: nothing added
    refile(PLANT / PLANT_HEAD, results, next_commit(work))
    assert track_command(monkeypatch, results, out, work, "--bisections", str(bisections)) == 0
    assert not out.exists()
    assert cli.main(["track", "--results-dir", str(results), "--out", str(out), "--bisections",
                     str(tmp_path / "none")]) == 0


def refile(run: Path, results: Path, commit: str) -> None:
    """A real result file filed under a commit of the test repository (its numbers untouched)."""
    text = run.read_text()
    old = json.loads(text)["commit_hash"]
    target = results / run.parent.name / run.name.replace(old[:8], commit[:8], 1)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text.replace(old, commit))
    (target.parent / "machine.json").write_text((run.parent / "machine.json").read_text())


def next_commit(work: Path) -> str:
    """One more commit on the clone's main, changing the same workload file."""
    path = work / "workloads" / "vlm.py"
    path.write_text(path.read_text() + "# again\n")
    return commit_all(work, "c3")


def test_a_comparison_that_fails_names_its_machine_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    _, work, (c0, _, c2) = origin_and_clone(tmp_path)
    results = tmp_path / "results"
    stub_runs(results, {"h100-torch-stable": (c0, c2)})

    def broken(request: CompareRequest, warn: Callable[[str], object]) -> str | None:
        raise ToolError(f"{request.results_dir}/h100-torch-stable/x.json is not an asv result file")

    with pytest.raises(TrackError, match=r"^h100-torch-stable: .*is not an asv result file$"):
        track(results, c2, work, compare=broken, say=lambda _: None)
    monkeypatch.setenv("COMPILE_BASELINES_REPO", str(work))
    assert cli.main(["track", "--results-dir", str(results), "--out", str(tmp_path / "issue.md")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("compile-baselines track: error: h100-torch-stable: ") and err.count("\n") == 1
    assert not (tmp_path / "issue.md").exists()
    assert cli.main(["track", "--results-dir", str(tmp_path / "none"), "--out", str(tmp_path / "issue.md")]) == 1
    assert "results directory" in capsys.readouterr().err
