"""The README's set-up as a newcomer follows it: two commands, then the one line that makes the bare command work,
which the quickstart also prints at its end; after it, `compile-baselines summary` runs as docs/ write it."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ACTIVATE = ". .venv/bin/activate"


def set_up_section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text[text.index("## Set up"):text.index("\n## ", text.index("## Set up") + 1)]


def test_the_readme_sets_up_in_two_commands_then_says_the_line_that_puts_the_command_on_the_path() -> None:
    section = set_up_section()
    blocks = re.findall(r"```\n(.*?)```", section, flags=re.S)
    assert [b.strip() for b in blocks] == ["bash tools/quickstart.sh", "bash tools/test.sh"]
    after = section[section.rindex("```") + 3:]
    first_paragraph = after.strip().split("\n\n")[0]
    assert f"`{ACTIVATE}`" in first_paragraph and "`.venv/bin/compile-baselines`" in first_paragraph


def test_the_quickstart_ends_by_saying_how_to_run_the_command() -> None:
    lines = (ROOT / "tools" / "quickstart.sh").read_text(encoding="utf-8").strip().splitlines()
    said = [line for line in lines if line.startswith("echo")]
    assert said and lines[-len(said):] == said  # the last thing it does
    assert any(f"'{ACTIVATE}'" in line for line in said) and any("compile-baselines summary" in line for line in said)


def test_docs_plugins_starts_in_the_environment_the_readme_made() -> None:
    text = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    start = re.search(r"## Start\n\n```\n(.*?)```", text, flags=re.S)
    assert start is not None and start.group(1).startswith(ACTIVATE)


@pytest.mark.skipif(not (ROOT / ".venv" / "bin" / "activate").is_file(), reason="no .venv: the set-up has not run")
def test_after_that_line_the_bare_command_works() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = "/usr/bin:/bin"  # a new shell's: no compile-baselines on it yet
    results = ROOT / "tests" / "fixtures" / "cpu-tiny" / "results"
    bare = subprocess.run(["bash", "-c", "compile-baselines --version"], cwd=ROOT, env=env, capture_output=True,
                          text=True)
    assert bare.returncode == 127  # command not found, as the newcomer saw
    done = subprocess.run(["bash", "-c", f"{ACTIVATE} && compile-baselines summary --results-dir {results}"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "tiny: 2 instances" in done.stdout
