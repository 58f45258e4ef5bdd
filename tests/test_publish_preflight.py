"""publish never deletes a user's files and never publishes results that contradict themselves: a non-empty output
that is not a site it wrote, a machine.json that no result file beside it agrees with, a missing machine.json, an
unreadable benchmarks.json and a link among the results are each refused in one line naming the path, before anything
is written. A publish that fails or is killed leaves the previous site whole (or none), and the next one finishes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tracker import cli
from tracker.errors import ToolError
from tracker.publish import preflight
from tracker.publish import site as publish

ROOT = Path(__file__).resolve().parent.parent
CPU_TINY = ROOT / "tests" / "fixtures" / "cpu-tiny" / "results"  # two real CPU runs of machine cpu-laptop


@pytest.fixture
def results(tmp_path: Path) -> Path:
    return Path(shutil.copytree(CPU_TINY, tmp_path / "results"))


def tree(root: Path) -> list[tuple[str, bytes]]:
    return sorted((str(p.relative_to(root)), p.read_bytes()) for p in root.rglob("*") if p.is_file())


FOREIGN: dict[str, Callable[[Path], None]] = {
    "a file": lambda d: (d / "notes.txt").write_text("my notes"),
    "a folder": lambda d: (d / "thesis").mkdir() or (d / "thesis" / "ch1.tex").write_text("\\chapter{}"),
    "a hidden file": lambda d: (d / ".env").write_text("SECRET=1"),
    "an asv site without our report": lambda d: (d / "index.html").write_text("<html>asv</html>"),
}


@pytest.mark.parametrize("what", list(FOREIGN))
def test_a_folder_of_the_user_s_own_files_is_refused_and_left_alone(results: Path, tmp_path: Path, what: str,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    FOREIGN[what](out)
    before = tree(out)
    assert cli.main(["publish", "--results-dir", str(results), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == (f"compile-baselines publish: error: output {out} is not empty and is not a site compile-baselines "
                   f"wrote (no {preflight.MARKER}): publish replaces its output directory, so choose a new or empty "
                   "one\n")
    assert tree(out) == before
    assert not (results / "benchmarks.json").exists()  # refused before anything was written anywhere


def test_a_file_in_place_of_the_output_directory_is_refused(results: Path, tmp_path: Path) -> None:
    (tmp_path / "site").write_text("keep me")
    with pytest.raises(preflight.UnusableOutput, match="is a file, not a directory"):
        publish.publish(results, None, tmp_path / "site", warn=print)
    assert (tmp_path / "site").read_text() == "keep me"


@pytest.mark.slow
def test_a_site_publish_wrote_is_replaced_and_marked_again(results: Path, tmp_path: Path) -> None:
    out = tmp_path / "site"
    out.mkdir()  # an empty folder is fine
    assert cli.main(["publish", "--results-dir", str(results), "--out", str(out)]) == 0
    assert (out / preflight.MARKER).is_file()
    (out / "stale.html").write_text("from an earlier publish")  # the site is the tool's: replaced whole
    assert cli.main(["publish", "--results-dir", str(results), "--out", str(out)]) == 0
    assert (out / preflight.MARKER).is_file() and not (out / "stale.html").exists()


def test_a_site_an_earlier_version_wrote_without_the_marker_is_its_own(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "report").mkdir(parents=True)
    (site / "report" / "index.html").write_text("<html>report</html>")
    (site / "index.html").write_text(f"<ul>{publish.REPORT_LINK}</ul>")
    preflight.check_output(site)  # accepted: no error


def _machine(results: Path) -> Path:
    return results / "cpu-laptop" / "machine.json"


CONTRADICTIONS = {"another GPU": {"gpu": "NVIDIA H100 80GB HBM3"}, "torch 1.0.0": {"torch": "1.0.0"},
                  "another machine": {"machine": "elsewhere"}, "another triton": {"triton": "3.5.1"}}


@pytest.mark.parametrize("what", list(CONTRADICTIONS))
def test_a_machine_json_contradicting_its_results_is_refused_naming_it(results: Path, tmp_path: Path, what: str,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    entry = json.loads(_machine(results).read_text())
    _machine(results).write_text(json.dumps({**entry, **CONTRADICTIONS[what]}))
    assert cli.main(["publish", "--results-dir", str(results), "--out", str(tmp_path / "site")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"error: {_machine(results)} contradicts every result file beside it (" in err
    (key, value), = CONTRADICTIONS[what].items()
    assert f"{key} {value} (the results: " in err
    assert not (tmp_path / "site").exists()


def test_a_machine_json_of_the_newest_torch_agrees_with_a_history_of_several(results: Path) -> None:
    """One machine name across a torch bump: its machine.json is the newest run's, the older files differ."""
    (older,) = (results / "cpu-laptop").glob("5d800df4-*.json")
    data = json.loads(older.read_text())
    data["params"]["torch"] = "2.12.0+cpu"
    older.write_text(json.dumps(data))
    preflight.check_results(results)  # accepted: no error


@pytest.mark.parametrize("damage", ["missing", "truncated", "a list"])
def test_a_missing_or_unreadable_machine_json_is_named(results: Path, damage: str) -> None:
    path = _machine(results)
    if damage == "missing":
        path.unlink()
    else:
        path.write_text('{"machine": "cpu-lap' if damage == "truncated" else "[]")
    with pytest.raises(preflight.PreflightError) as e:
        preflight.check_results(results)
    assert str(e.value).startswith(str(path)) and "merge RESULTS --results-dir NEW" in str(e.value)


BENCHMARKS = {"truncated": '{"baselines.Baseline.track_latency": {"na', "another version": '{"version": 1}',
              "a list": "[1, 2]", "entries not objects": '{"version": 2, "x": 3}', "not UTF-8": b"\xff\xfe"}


@pytest.mark.parametrize("damage", list(BENCHMARKS))
def test_an_unreadable_benchmarks_json_is_one_line_saying_to_delete_it(results: Path, tmp_path: Path, damage: str,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    path = results / "benchmarks.json"
    content = BENCHMARKS[damage]
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    assert cli.main(["publish", "--results-dir", str(results), "--out", str(tmp_path / "site")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"compile-baselines publish: error: {path} cannot be read (")
    assert err.rstrip().endswith("delete it and publish again, which writes it anew")


def test_results_without_any_result_file_say_so(tmp_path: Path) -> None:
    (tmp_path / "results" / "box").mkdir(parents=True)
    (tmp_path / "results" / "box" / "machine.json").write_text("{}")
    with pytest.raises(ToolError, match="no asv result files in"):
        preflight.check_results(tmp_path / "results")


def test_a_link_or_fifo_among_the_results_is_refused_before_asv_reads_through_it(
        results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "secret.json").write_text('{"token": "the runner\'s"}')
    os.symlink(tmp_path / "secret.json", results / "cpu-laptop" / "aaaaaaaa-env.json")
    os.mkfifo(results / "cpu-laptop" / "bbbbbbbb-env.json")
    assert cli.main(["publish", "--results-dir", str(results), "--out", str(tmp_path / "site")]) == 1
    assert capsys.readouterr().err == (
        f"compile-baselines publish: error: {results / 'cpu-laptop' / 'aaaaaaaa-env.json'} is a symlink, which is "
        "never followed (and 1 more): asv publish would read through it; remove it from the results\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results", "secret.json"]  # no site, nothing beside


# --- an interrupted publish -------------------------------------------------------------------------------------


def beside(site: Path) -> list[str]:
    return sorted(p.name for p in site.parent.iterdir() if p.name != "results")


def build_a_site(build: Path, text: str) -> None:
    """What publish puts in its build folder, in small: a marked site."""
    preflight.mark(build)
    (build / "index.html").write_text(text)


def test_a_publish_that_fails_half_way_leaves_the_previous_site_whole_and_nothing_beside(tmp_path: Path) -> None:
    site = tmp_path / "site"
    with preflight.replacing(site) as build:
        build_a_site(build, "first")
    with pytest.raises(OSError, match="No space left on device"), preflight.replacing(site) as build:
        (build / "index.html").write_text("half of the second")
        raise OSError(28, "No space left on device")
    assert (site / "index.html").read_text() == "first" and beside(site) == ["site"]


def test_what_a_first_publish_killed_mid_build_leaves_is_removed_by_the_next(tmp_path: Path) -> None:
    site = tmp_path / "site"
    dead = tmp_path / f".site{preflight.BUILDING}4242"  # constructed: what SIGKILL leaves mid-build
    (dead / "graphs").mkdir(parents=True)
    (dead / "index.json").write_text("{")
    said: list[str] = []
    with preflight.replacing(site, say=said.append) as build:
        build_a_site(build, "second")
    assert said == [f"publish: removed {dead}, a site an interrupted publish left half built"]
    assert (site / "index.html").read_text() == "second" and beside(site) == ["site"]


def test_a_publish_killed_between_its_two_moves_is_rolled_back_by_the_next(tmp_path: Path) -> None:
    site = tmp_path / "site"
    with preflight.replacing(site) as build:
        build_a_site(build, "first")
    old = tmp_path / f".site{preflight.REPLACED}4242"  # constructed: the old site moved aside, the new not in yet
    os.replace(site, old)
    (tmp_path / f".site{preflight.BUILDING}4242").mkdir()
    said: list[str] = []
    assert preflight.finish_interrupted(site) == [
        f"removed {tmp_path / f'.site{preflight.BUILDING}4242'}, a site an interrupted publish left half built",
        f"restored {site}, which an interrupted publish had moved to {old}"]
    assert (site / "index.html").read_text() == "first" and beside(site) == ["site"]
    os.replace(site, old)
    with preflight.replacing(site, say=said.append) as build:
        assert (site / "index.html").read_text() == "first"  # in place again before the new one is built
        build_a_site(build, "second")
    assert (site / "index.html").read_text() == "second" and beside(site) == ["site"]


@pytest.mark.slow
def test_a_first_publish_killed_at_any_moment_never_locks_the_next_one_out(results: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    argv = [sys.executable, "-m", "tracker.cli", "publish", "--results-dir", str(results), "--out", str(site)]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not list(tmp_path.glob(f".site{preflight.BUILDING}*/graphs")) and time.monotonic() < deadline:
        time.sleep(0.05)  # killed once asv has begun writing the site
    proc.kill()
    proc.wait()
    assert not site.exists() and beside(site) != ["site"]  # a half-built site beside, as SIGKILL leaves it
    assert cli.main(["publish", "--results-dir", str(results), "--out", str(site)]) == 0
    assert (site / preflight.MARKER).is_file() and (site / "report" / "index.html").is_file()
    assert beside(site) == ["site"]
