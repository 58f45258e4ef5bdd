"""Text from the results reaches no reader as markup or as a control sequence, whatever the results say.

Anyone who can push to the results branch writes the machine's name and fields (gpu, torch, triton, CUDA, driver),
the candidates' names and the failure reasons. Each of those fields holds a hostile value here (HTML, a script, a
markdown link and image, a mention, an issue reference, a bare URL, a table's pipe, a backtick, terminal escapes,
a bidi override, a zero-width space, a newline), and each medium a reader sees is checked by class: the PR comment,
the tracking issue and the job summary (markdown), the report and asv's pages (HTML), the terminal (summary,
compare); the JSON keeps every value exactly.
"""

from __future__ import annotations

import ast
import itertools
import json
import re
import shlex
import shutil
import unicodedata
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from tracker.analyse.compare import compare_runs
from tracker.analyse.nightsteps import BEST, Step
from tracker.cli import main
from tracker.measure.cellresult import CellResult
from tracker.publish import escape, nightly, prcomment, summary
from tracker.publish.markdown import MARKER
from tracker.publish.report import build_page, machine_files
from tracker.store import results
from tracker.store.cells import CellStore, RunKey

SMOKE = Path(__file__).resolve().parent / "fixtures" / "h100-smoke"  # a real H100 run, two commits
BASE, HEAD = "406ada5b157fdcf0f90746faab1f15bf97d0ccc3", "44379fbfe364539aa913d296093ad8e0d4dd4c55"
CANDIDATE = "triton_rmsnorm"


def hostile(field: str) -> str:
    """A value for `field` holding every kind of trouble, tagged with the field's name so that each can be found."""
    return (f'{field}-tag"><img src=x onerror=alert(1)><script>alert(1)</script>'
            f"\x1b]0;title\x07\x1b[2J\x9b31m\u202eevil\u200b @octocat #12 GH-3 owner/repo#4 "
            "[x](javascript:alert(1)) ![i](https://evil.example/p.png) www.evil.example a|b `c` **d** $\\frac{$ \\q "
            f"<!-- compile-baselines:pr-comment -->\nnext line")


FIELDS = {k: hostile(k) for k in ("machine", "gpu", "torch", "triton", "cuda", "driver")}
CANDIDATE_NAME = hostile("candidate")
REASON = hostile("reason")


def _set(row: list[Any], columns: list[str], at: tuple[str, ...], value: Any) -> None:
    params = row[columns.index("params")]
    combos = [tuple(ast.literal_eval(v) for v in c) for c in itertools.product(*params)]
    row[columns.index("result")][combos.index(at)] = value


def _rename_candidate(data: dict[str, Any]) -> None:
    for name, row in data["results"].items():
        if name.startswith("candidates."):
            params = row[data["result_columns"].index("params")]
            params[1] = [repr(f"llm_rmsnorm:{CANDIDATE_NAME}") if ast.literal_eval(v) == f"llm_rmsnorm:{CANDIDATE}"
                         else v for v in params[1]]


@pytest.fixture(scope="module")
def hostile_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The smoke run with a hostile value in every field the results say; the candidate failed at head (its
    reason hostile, in the cell store)."""
    root = tmp_path_factory.mktemp("hostile")
    shutil.copytree(SMOKE / "results", root / "results")
    for path in (root / "results").glob("*/*.json"):
        data = json.loads(path.read_text())
        if path.name == "machine.json":
            data.update(FIELDS)
        else:
            data["params"].update(FIELDS)
            _rename_candidate(data)
            if data["commit_hash"] == HEAD:
                row = data["results"]["candidates.Candidate.track_latency"]
                _set(row, data["result_columns"], ("decode", f"llm_rmsnorm:{CANDIDATE_NAME}"), None)
        path.write_text(json.dumps(data))
    store = CellStore(root / "cells", RunKey(FIELDS["machine"], HEAD, FIELDS["torch"]))
    store.put(CellResult.from_json(
        {"preset": "decode", "workload": "llm_rmsnorm", "mode": f"kernel:{CANDIDATE_NAME}", "device": "cuda",
               "status": "failed", "reason": REASON, "samples_ms": []}))
    return root / "results"


# ---------------------------------------------------------------------------------------------------- the checks

_HIDDEN = {"Cc", "Cf", "Cs", "Zl", "Zp"}


def hidden_characters(text: str, keep: str = "\n") -> list[str]:
    """The characters of `text` a reader would not see as themselves (controls, bidi, zero-width)."""
    return sorted({f"U+{ord(c):04X}" for c in text if c not in keep and unicodedata.category(c) in _HIDDEN})


OUR_TAGS = {"<details>", "</details>", "</summary>", "<sub>", "</sub>", "<!-- compile-baselines:pr-comment -->",
            "<!-- compile-baselines:changed=true -->", "<!-- compile-baselines:changed=false -->"}


def _table_cells(line: str) -> int:
    """The cell separators of a markdown table row: the pipes no backslash escapes."""
    n, i = 0, 0
    while i < len(line):
        if line[i] == "\\":
            i += 2
            continue
        n += line[i] == "|"
        i += 1
    return n


def markdown_problems(text: str) -> list[str]:
    """What in `text` would render as something a value put there: HTML, a link or image, a mention, a reference,
    a bare URL, a table row with cells of its own, a character a reader cannot see."""
    problems = [f"hidden {c}" for c in hidden_characters(text)]
    prose = re.sub(r"(`+)[^`].*?\1", "", text)  # a code span's text is literal
    problems += [f"tag {t}" for t in re.findall(r"<[A-Za-z/!][^>]*>", prose)
                 if t not in OUR_TAGS and not t.startswith("<summary>")]
    problems += [f"link {m}" for m in re.findall(r"(?<!\\)\]\(", prose)]
    problems += [f"mention {m}" for m in re.findall(r"(?<![\w&])@[A-Za-z0-9][\w/-]*", prose)]
    problems += [f"reference {m}" for m in re.findall(r"(?<![\w&])#[0-9]+|\bGH-[0-9]+", prose)]
    problems += [f"url {m}" for m in re.findall(r"\w+://\S+|\bwww\.\S+", prose)]
    for block in re.findall(r"(?:^\|.*\n?)+", text, flags=re.M):  # a row of fewer cells is padded, not more
        rows = block.splitlines()
        problems += [f"table row {r[:60]!r}" for r in rows if _table_cells(r) > _table_cells(rows[0])]
    return problems


def shows_each(text: str, fields: list[str]) -> list[str]:
    """The fields whose value did not reach `text` (each value starts with its tag)."""
    return [f for f in fields if f"{f}-tag" not in text]


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))


def html_problems(page: str) -> list[str]:
    """Elements and attributes no value should make: a script, an image, an event handler, a javascript: URL."""
    parser = _Tags()
    parser.feed(page)
    problems = [f"<{t}>" for t, _ in parser.tags if t in ("script", "img", "iframe", "object", "embed")]
    problems += [f"{t} {k}" for t, attrs in parser.tags for k, v in attrs
                 if k.startswith("on") or (v or "").strip().lower().startswith("javascript:")]
    return problems + [f"hidden {c}" for c in hidden_characters(page, keep="\n\t")]


# ---------------------------------------------------------------------------------------------------- markdown


def test_the_pr_comment_shows_every_field_as_text(hostile_dir: Path) -> None:
    c = compare_runs(hostile_dir, BASE[:8], HEAD[:8])
    body = prcomment.render_comment(c)
    assert markdown_problems(body) == []
    assert shows_each(body, [*FIELDS, "candidate"]) == []
    assert body.startswith(MARKER) and body.count(MARKER) == 1  # a value cannot forge the marker


def test_a_cut_comment_suggests_a_command_with_the_machine_quoted(hostile_dir: Path) -> None:
    c = compare_runs(hostile_dir, BASE[:8], HEAD[:8])
    body = prcomment.render_comment(c, max_chars=6000)
    assert "more not shown" in body and markdown_problems(body) == []
    command = re.search(r"(`+)(compile-baselines compare .*?)\1", body)
    assert command is not None
    words = shlex.split(command.group(2).replace("\\|", "|"))
    assert words[words.index("--machine") + 1] == escape.visible(FIELDS["machine"])


def test_the_skipped_comment_shows_refs_in_code_spans() -> None:
    body = prcomment.render_skipped("main`<img src=x>", "@octocat", [])
    assert markdown_problems(body) == []


def test_the_tracking_issue_shows_every_field_as_text(hostile_dir: Path, tmp_path: Path) -> None:
    from comparecli import run_compare

    out = tmp_path / "comparison.md"
    run_compare(hostile_dir, BASE[:8], HEAD[:8], fmt="md", out=out)
    step = Step(preset="prefill", workload="llm_rmsnorm", mode=BEST, date="2026-11-23T20:00", commit=HEAD,
                torch=FIELDS["torch"], before_ms=0.1, after_ms=0.12, p_value=0.001, runs_after=3)
    sections = [nightly.Section(FIELDS["machine"], out.read_text()),
                nightly.Section(f"{FIELDS['machine']}: steps in its history", nightly.steps_markdown([step]))]
    body = nightly.body(sections)
    assert markdown_problems(body) == []
    assert shows_each(body, [*FIELDS, "candidate"]) == []
    headings = re.findall(r"^#+ .*", body, flags=re.M)  # a value's newline starts no heading of its own
    assert all(h.startswith(("## machine-tag", "### compile-baselines: ", "#### ")) for h in headings), headings


def test_the_attribution_section_shows_versions_as_text() -> None:
    from tracker.analyse.pairs import RunInfo
    from tracker.analyse.verdicts import UNDECIDED
    from tracker.analyse.versionattribution import Attributed, Attribution, DecisiveRun
    from tracker.publish.attributiontext import render_md

    def run(commit: str) -> RunInfo:
        return RunInfo(commit=commit, date="2026-11-23", machine=FIELDS["machine"], gpu=FIELDS["gpu"],
                       torch=FIELDS["torch"], triton=FIELDS["triton"], cuda=FIELDS["cuda"], driver=FIELDS["driver"])

    decisive = DecisiveRun(HEAD, FIELDS["torch"], FIELDS["machine"], ("prefill",), ("llm_rmsnorm",),
                           (f"llm_rmsnorm:{CANDIDATE_NAME}",))
    item = Attributed("decode", "llm_rmsnorm", f"kernel:{CANDIDATE_NAME}", hostile("change"), UNDECIDED,
                      hostile("why"))
    text = render_md(Attribution(run(BASE), run(HEAD), [], [item], decisive))
    prose, command, after = re.split(r"^`{3,}$", text, flags=re.M)
    assert markdown_problems(prose + after) == [] and shows_each(prose, ["torch", "candidate", "change", "why"]) == []
    assert hidden_characters(command) == [] and command.strip("\n").count("\n") == 0  # one line, visible
    words = shlex.split(command)  # a command a reader can paste: each value one word
    assert words[words.index("--machine") + 1] == escape.visible(FIELDS["machine"])


def test_the_job_summary_gets_the_escaped_comment(hostile_dir: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from tracker.github.forge import GitHubForge

    c = compare_runs(hostile_dir, BASE[:8], HEAD[:8])
    job_summary = tmp_path / "summary.md"
    forge = GitHubForge({"GITHUB_STEP_SUMMARY": str(job_summary)})
    body = prcomment.render_comment(c)
    forge.job_summary(body)
    forge.comment(body, c.changed)
    written = job_summary.read_text()
    assert markdown_problems(written) == [] and shows_each(written, list(FIELDS)) == []
    assert markdown_problems(capsys.readouterr().out) == []


def test_the_summary_in_markdown_shows_every_field_as_text(hostile_dir: Path) -> None:
    data, warnings = summary.summary_for(hostile_dir)
    text = summary.render(data, "md", [*warnings, hostile("warning")])
    assert markdown_problems(text) == []
    assert shows_each(text, ["machine", "gpu", "torch", "triton", "candidate", "reason", "warning"]) == []


# ---------------------------------------------------------------------------------------------------- HTML


def test_the_report_shows_every_field_as_text(hostile_dir: Path) -> None:
    loaded = results.load_results(hostile_dir)
    page = build_page(loaded.table, "../index.html", machine_files(hostile_dir))
    assert html_problems(page) == []
    assert shows_each(page, [*FIELDS, "candidate"]) == []


def test_the_report_names_machines_of_different_timers_as_text(hostile_dir: Path, tmp_path: Path) -> None:
    other = tmp_path / "results"
    shutil.copytree(hostile_dir, other)
    machine_json = next(other.glob("*/machine.json"))
    cpu = machine_json.parent.with_name("cpu-box")
    shutil.copytree(machine_json.parent, cpu)
    for path in cpu.glob("*.json"):
        data = json.loads(path.read_text())
        (data.get("params", data)).update(machine=hostile("second"), gpu="cpu")
        path.write_text(json.dumps(data))
    loaded = results.load_results(other)
    page = build_page(loaded.table, None, machine_files(other))
    assert html_problems(page) == [] and "second-tag" in page


def test_asv_index_is_made_inert(hostile_dir: Path, tmp_path: Path) -> None:
    from tracker.publish.site import inert_index, script_json

    site = tmp_path / "site"
    site.mkdir()
    index = {"benchmarks": {"baselines.Baseline.track_latency": {"code": "<img src=x onerror=alert(1)>",
                                                                  "pretty_name": "<b>x</b>",
                                                                  "param_names": ["preset", "workload", "mode"]},
                            "evil<img src=x>": {"code": "", "param_names": []},
                            "ok.Bench.track": {"code": "", "param_names": ["<script>"]}},
             "params": {"machine": [FIELDS["machine"]], "<img src=x>": ["1"]},
             "machines": {FIELDS["machine"]: {"gpu": FIELDS["gpu"], "<b>key</b>": "v"}}}
    (site / "index.json").write_text(json.dumps(index))
    said = inert_index(site)
    out = json.loads((site / "index.json").read_text())
    assert list(out["benchmarks"]) == ["baselines.Baseline.track_latency"] and len(said) == 3
    assert "<" not in json.dumps([out["benchmarks"], out["machines"][FIELDS["machine"]], list(out["params"])])
    assert out["params"]["machine"] == [FIELDS["machine"]]  # the machine's name still finds its graphs
    assert "</script>" not in script_json({"p-workload": ["'</script><script>alert(1)</script>'"]})


# ---------------------------------------------------------------------------------------------------- terminal


@pytest.mark.parametrize("argv", [["summary"], ["summary", "--format", "md"],
                                  ["compare", "--base", BASE[:8], "--head", HEAD[:8], "--format", "table"],
                                  ["compare", "--base", BASE[:8], "--head", HEAD[:8], "--format", "md"]])
def test_the_terminal_gets_no_control_sequence(hostile_dir: Path, capsys: pytest.CaptureFixture[str],
                                               argv: list[str]) -> None:
    assert main([*argv, "--results-dir", str(hostile_dir)]) == 0
    out, err = capsys.readouterr()
    assert hidden_characters(out) == [] and hidden_characters(err) == []
    assert "machine-tag" in out and "x1b" in out  # shown, as an escape
    assert not [line for line in (out + err).splitlines() if line.startswith("next line")]  # no line of a value's


def test_an_error_line_naming_a_hostile_value_is_visible(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", "--results-dir", str(tmp_path / "x\x1b[2J\u202e")]) != 0
    err = capsys.readouterr().err
    assert hidden_characters(err) == [] and "x\\x1b[2J\\u202e" in err


# ---------------------------------------------------------------------------------------------------- JSON


def test_json_keeps_every_value_exactly(hostile_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", "--format", "json", "--results-dir", str(hostile_dir)]) == 0
    run = json.loads(capsys.readouterr().out)["runs"][0]
    assert {k: run[k] for k in ("machine", "gpu", "torch", "triton")} == {k: FIELDS[k] for k in
                                                                          ("machine", "gpu", "torch", "triton")}
    assert main(["compare", "--base", BASE[:8], "--head", HEAD[:8], "--format", "json", "--results-dir",
                 str(hostile_dir)]) == 0
    head = json.loads(capsys.readouterr().out)["head"]
    assert {k: head[k] for k in FIELDS} == FIELDS


# ---------------------------------------------------------------------------------------------------- the escapes


@pytest.mark.parametrize("char", ["\x00", "\x07", "\x08", "\r", "\x1b", "\x7f", "\x85", "\x9b", "\u061c", "\u200b",
                                  "\u200e", "\u202a", "\u202e", "\u2066", "\u2069", "\u2028", "\u2029", "\ufeff",
                                  "\U000e0041", "\ud800"])
def test_visible_shows_each_hidden_character_as_its_escape(char: str) -> None:
    shown = escape.visible(f"a{char}b")
    n = ord(char)
    assert shown == "a" + (f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}") + "b"
    assert hidden_characters(shown, keep="") == [] and shown.encode("utf-8")  # a lone surrogate no longer fails


def test_visible_keeps_what_it_is_asked_to_and_plain_text_as_it_is() -> None:
    assert escape.visible("a\nb\tc", keep="\n\t") == "a\nb\tc"
    assert escape.visible("a\nb") == "a\\x0ab"
    assert escape.visible("4.2 µs · → \u00d7") == "4.2 µs · → \u00d7"


@pytest.mark.parametrize("value, rendered_as", [
    ("<img src=x>", "&lt;img src=x&gt;"), ("a & b", "a &amp; b"), ("[x](y)", "\\[x\\](y)"),
    ("![i](u)", "!\\[i\\](u)"), ("a|b", "a\\|b"), ("`c`", "\\`c\\`"), ("**b**", "\\*\\*b\\*\\*"),
    ("\\", "\\\\"), ("$x$", "\\$x\\$"), ("@octocat", "@&#8203;octocat"), ("#12", "#&#8203;12"),
    ("GH-12", "GH-&#8203;12"), ("o/r#3", "o/r#&#8203;3"), ("https://e.x", "https:&#8203;//e.x"),
    ("www.e.x", "www&#8203;.e.x"), ("a\nb", "a\\\\x0ab"), ("llm_rmsnorm", "llm_rmsnorm"),
    ("2.11.0+cu130", "2.11.0+cu130"), ("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"),
])
def test_md_writes_a_value_as_literal_text(value: str, rendered_as: str) -> None:
    assert escape.md(value) == rendered_as


def test_code_spans_hold_any_value_on_one_line() -> None:
    assert escape.code("abc") == "`abc`"
    assert escape.code("a`b") == "``a`b``" and escape.code("`x") == "`` `x ``"
    assert escape.code("a|b\nc") == "`a\\|b\\x0ac`"


def test_a_markdown_template_escapes_every_value_unless_marked_as_ours() -> None:
    env = escape.markdown_env()
    template = env.from_string("{{ v }} {{ v|safe }} {{ ours }}")
    assert template.render(v="<b>", ours=escape.ours("<sub>")) == "&lt;b&gt; <b> <sub>"


# ---------------------------------------------------------------------------------------------------- sizes, depths


@pytest.fixture(scope="module")
def huge_name_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The smoke run under a machine name of a megabyte (a result file written by hand)."""
    root = tmp_path_factory.mktemp("huge") / "results"
    shutil.copytree(SMOKE / "results", root)
    for path in root.glob("*/*.json"):
        data = json.loads(path.read_text())
        (data if path.name == "machine.json" else data.get("params", {})).update(machine="M" * 1_000_000)
        path.write_text(json.dumps(data))
    return root


def test_a_megabyte_name_is_shown_cut_and_the_comment_keeps_its_tables(huge_name_dir: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    body = prcomment.render_comment(compare_runs(huge_name_dir, BASE[:8], HEAD[:8]))
    assert len(body) < 20_000 and "| machine | " in body and "(999500 more characters)" in body
    assert main(["summary", "--results-dir", str(huge_name_dir)]) == 0
    out, err = capsys.readouterr()
    assert len(out) + len(err) < 20_000


@pytest.mark.parametrize("command", [["merge", "SRC", "--results-dir", "DEST"], ["publish", "--out", "DEST"],
                                     ["report", "--out", "DEST"], ["summary"]])
def test_a_machine_json_nested_too_deeply_is_one_line_or_ignored(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                 command: list[str]) -> None:
    results = tmp_path / "results"
    shutil.copytree(SMOKE / "results", results)
    (results / "h100-smoke" / "machine.json").write_text('{"machine": "h100-smoke", "x": ' + "[" * 100_000
                                                          + "]" * 100_000 + "}")
    argv = [str(results) if a == "SRC" else str(tmp_path / "out") if a == "DEST" else a for a in command]
    code = main([*argv] if command[0] == "merge" else [*argv, "--results-dir", str(results)])
    err = capsys.readouterr().err
    assert "Traceback" not in err and "RecursionError" not in err
    if code:
        assert code == 1 and "machine.json is not readable JSON (JSON nested too deeply)" in err


def test_cut_keeps_a_short_value_and_says_how_much_a_long_one_lost() -> None:
    assert escape.cut("h100-smoke") == "h100-smoke"
    assert escape.cut("x" * 501) == "x" * 500 + "… (1 more character)"
