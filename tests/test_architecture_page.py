"""docs/architecture.md and the README's Layout block say where things are; these tests keep them true.

Every file the page's "Where each decision lives" table names exists, and every name it puts in parentheses after a
file is defined in that file; the stage diagram names every stage folder, in the order tests/test_architecture.py
layers them, and only files and folders that exist; the README's Layout names only what exists and every stage; and
the page's convention that files are written through tracker/store/atomic.py holds outside the modules it excuses.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.test_architecture import LAYERS

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "architecture.md"
README = ROOT / "README.md"

_TICKED = re.compile(r"`([^`]+)`")
_FILE_NAME = re.compile(r"^[\w.-]+\.(py|md|j2|yml|toml)$")


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start:] if end < 0 else text[start:end]


def table_rows(text: str) -> list[tuple[str, str]]:
    """(decision, place) of each row of the page's "Where each decision lives" table."""
    rows = []
    for line in _section(text, "## Where each decision lives").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) == 2 and cells[0] not in ("decision", "---"):
            rows.append((cells[0], cells[1]))
    return rows


def places(place: str) -> list[tuple[str, list[str]]]:
    """The files a row's place names, each with the names it says are defined there: `path` (`Name`, `Class.attr`).
    A bare file name (`nightsteps.py`) lies in the folder of the file named before it."""
    out: list[tuple[str, list[str]]] = []
    for token in _TICKED.findall(place):
        if "/" in token:
            out.append((token, []))
        elif _FILE_NAME.match(token):
            assert out, f"{token}: a bare file name needs a path before it"
            out.append((str(Path(out[-1][0]).parent / token), []))
        else:
            assert out, f"{token}: a name needs the file it is defined in before it"
            out[-1][1].append(token)
    return out


def defined_names(path: Path) -> set[str]:
    """The module-level names `path` defines (functions, classes, assignments), and `Class.member` for what its
    classes define (methods, fields)."""
    names: set[str] = set()

    def targets(node: ast.stmt) -> list[str]:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return [node.name]
        if isinstance(node, ast.Assign):  # `A = ...`, and `A, B = ...`
            flat = [e for t in node.targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
            return [t.id for t in flat if isinstance(t, ast.Name)]
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            return [node.target.id]
        return []

    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        names.update(targets(node))
        if isinstance(node, ast.ClassDef):
            names.update(f"{node.name}.{member}" for child in node.body for member in targets(child))
    return names


def missing_places(text: str, root: Path = ROOT) -> list[str]:
    wrong = []
    for decision, place in table_rows(text):
        named = places(place)
        if not named:
            wrong.append(f"{decision[:40]}...: names no file")
        for rel, names in named:
            path = root / rel
            if not path.exists() or (rel.endswith("/") and not path.is_dir()):
                wrong.append(f"{rel}: no such file or folder")
            elif names and path.suffix != ".py":
                wrong.append(f"{rel}: names {names} in a file that is not Python")
            elif names:
                wrong.extend(f"{rel}: defines no {n}" for n in names if n not in defined_names(path))
    return wrong


def test_every_file_and_name_the_one_place_table_names_is_there() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert len(table_rows(text)) >= 30
    assert missing_places(text) == []


def test_the_table_check_catches_a_moved_name_a_missing_file_and_a_row_without_a_place(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("X = 1\nY, Z = 2, 3\nclass C:\n    field: int = 0\n"
                                             "    def method(self): ...\ndef f(): ...\n", encoding="utf-8")
    (tmp_path / "pkg" / "other.py").write_text("", encoding="utf-8")
    good = ("## Where each decision lives\n\n| decision | one place |\n| --- | --- |\n"
            "| a | `pkg/mod.py` (`X`, `Z`, `C`, `C.field`, `C.method`, `f`), `other.py` |\n| b | `pkg/` |\n")
    assert missing_places(good, tmp_path) == []
    bad = good + ("| c | `pkg/mod.py` (`select_workloads`) |\n| d | `pkg/gone.py` |\n| e | nowhere |\n"
                  "| f | `pkg/mod.py` (`C.nothing`) |\n")
    assert missing_places(bad, tmp_path) == ["pkg/mod.py: defines no select_workloads", "pkg/gone.py: no such file or "
                                             "folder", "e...: names no file", "pkg/mod.py: defines no C.nothing"]


def _diagram(text: str) -> list[str]:
    block = _section(text, "## The stages").split("```")[1]
    return [line for line in block.splitlines() if line.strip()]


def test_the_stage_diagram_names_the_stages_in_the_order_they_are_layered() -> None:
    lines = _diagram(PAGE.read_text(encoding="utf-8"))
    stages = [m.group(1) for line in lines if (m := re.match(r"^ (tracker/\S+)", line))]
    as_modules = [s.rstrip("/").removesuffix(".py").replace("/", ".") for s in stages]
    assert as_modules == [unit for layer in LAYERS[1:] for unit in layer]
    foundation = next(line for line in lines if "foundation" in line)
    assert re.findall(r"tracker/\w+\.py", foundation) == [f"{u.replace('.', '/')}.py" for u in LAYERS[0]]
    named = {t for line in lines for t in re.findall(r"(?:tracker|workloads|benchmarks)/[\w/]*(?:\.py)?", line)}
    assert sorted(t for t in named if not (ROOT / t).exists()) == []


def _layout(text: str) -> list[str]:
    block = _section(text, "## Layout").split("```")[1]
    return [line for line in block.splitlines() if line.strip()]


def test_the_readme_layout_names_what_exists_and_every_stage() -> None:
    lines = _layout(README.read_text(encoding="utf-8"))
    top = [m.group(1) for line in lines if (m := re.match(r"^([.\w-]+/?)\s", line))]
    nested = [m.group(1) for line in lines if (m := re.match(r"^  ([\w.]+/?)\s", line))]
    assert sorted(t for t in top if not (ROOT / t).exists()) == []
    parents = {"kernels/": "workloads"}
    assert sorted(t for t in nested if not (ROOT / parents.get(t, "tracker") / t).exists()) == []
    stages = {u.removeprefix("tracker.") + (".py" if (ROOT / f"{u.replace('.', '/')}.py").is_file() else "/")
              for layer in LAYERS[1:] for u in layer}
    assert stages <= set(nested)
    assert {"workloads/", "benchmarks/", "tracker/", "tools/", "tests/", "docs/"} <= set(top)


# Modules that write files in place, and why (docs/architecture.md, "Conventions"): a published site is rebuilt
# whole by each `publish`, whose asv empties the folder first.
WRITES_IN_PLACE = {"tracker/publish/site.py", "tracker/publish/filesite.py", "tracker/publish/preflight.py"}


def writes_in_place(path: Path) -> list[int]:
    """Lines of `path` that write a file other than through tracker/store/atomic.py: a `write_text` or
    `write_bytes` call on anything but the atomic module, or an `open` for writing."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in ("write_text", "write_bytes"):
            if not (isinstance(f.value, ast.Name) and f.value.id == "atomic"):
                lines.append(node.lineno)
        elif isinstance(f, ast.Name) and f.id == "open" and len(node.args) > 1:
            mode = node.args[1]
            if isinstance(mode, ast.Constant) and isinstance(mode.value, str) and set(mode.value) & set("wx"):
                lines.append(node.lineno)
    return lines


def test_files_are_written_through_atomic_outside_the_excused_modules() -> None:
    found = {str(p.relative_to(ROOT)): writes_in_place(p) for p in sorted((ROOT / "tracker").rglob("*.py"))
             if p.name != "atomic.py"}
    assert sorted(m for m, lines in found.items() if lines and m not in WRITES_IN_PLACE) == []
    assert sorted(m for m in WRITES_IN_PLACE if not found.get(m)) == []  # an excuse no longer needed goes


def test_the_write_check_catches_a_plain_write(tmp_path: Path) -> None:
    mod = tmp_path / "m.py"
    mod.write_text("from pathlib import Path\nfrom tracker.store import atomic\n"
                   "Path('a').write_text('x')\natomic.write_text('b', 'y')\nopen('c', 'w')\nopen('d')\n"
                   "open('e', 'a')\n", encoding="utf-8")
    assert writes_in_place(mod) == [3, 5]
