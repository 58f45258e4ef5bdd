"""The stages show in the folders and imports point one way: measure -> store -> analyse -> publish -> github.

A module of tracker/ imports only from its own package or from a lower layer (function-level imports count
too); the workloads never import the tracker or the suite; no two modules import each other, even indirectly.
A function fits on a screen, and each command has one home: a module of tracker/commands/ with its parser and its
handler.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Lowest first. Foundation modules sit at tracker/'s top level; every stage may use them.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("tracker.errors", "tracker.paths", "tracker.stats", "tracker.metrics"),
    ("tracker.measure",),
    ("tracker.store",),
    ("tracker.analyse",),
    ("tracker.publish",),
    ("tracker.github", "tracker.runner", "tracker.adopt"),
    ("tracker.flows",),
    ("tracker.commands",),
    ("tracker.cliparse",),
    ("tracker.cli",),
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every module `path` imports, absolute names (relative imports resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)  # `from pkg import module`
    return out


def _modules(top: str) -> dict[str, Path]:
    return {_module_name(p): p for p in sorted((ROOT / top).rglob("*.py"))}


def _layer(module: str) -> tuple[int, str] | None:
    for i, layer in enumerate(LAYERS):
        for unit in layer:
            if module == unit or module.startswith(unit + "."):
                return i, unit
    return None


def test_every_tracker_module_belongs_to_a_layer():
    assert [m for m in _modules("tracker") if m != "tracker" and _layer(m) is None] == []


def test_tracker_imports_point_down_the_stages():
    wrong = []
    for module, path in _modules("tracker").items():
        here = _layer(module)
        if here is None:
            continue
        for target in _imports(path):
            there = _layer(target)
            if there is None or there[1] == here[1]:
                continue
            if there[0] >= here[0]:
                wrong.append(f"{module} imports {target}")
    assert wrong == []


def test_workloads_import_neither_the_tracker_nor_the_suite():
    wrong = [f"{m} imports {t}" for m, p in _modules("workloads").items() for t in _imports(p)
             if t.split(".")[0] in ("tracker", "benchmarks")]
    assert wrong == []


def test_the_suite_uses_only_measure_store_and_the_foundation():
    allowed = (0, 1, 2)
    wrong = [f"{m} imports {t}" for m, p in _modules("benchmarks").items() for t in _imports(p)
             if t.startswith("tracker.") and (_layer(t) or (99,))[0] not in allowed]
    assert wrong == []


def test_no_import_cycles_between_modules():
    modules = {**_modules("tracker"), **_modules("workloads")}
    graph = {m: {t for t in _imports(p) if t in modules and t != m} for m, p in modules.items()}
    # a package's __init__ importing its own modules is not a cycle worth naming
    state: dict[str, int] = {}
    cycles: list[str] = []

    def visit(m: str, stack: list[str]) -> None:
        state[m] = 1
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                cycles.append(" -> ".join([*stack[stack.index(t):], t]))
            elif t not in state:
                visit(t, [*stack, t])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert cycles == []


MAX_FUNCTION_LINES = 60
# Functions allowed to be longer, by module.name, each with the reason: none needed so far.
LONG_FUNCTIONS: dict[str, str] = {}


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[tuple[str, int]]:
    """(name, lines) of each function in `source` longer than `limit`: from its `def` to its last line, docstring,
    comments and nested functions included."""
    return [(node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None
            and node.end_lineno - node.lineno + 1 > limit]


def test_the_length_rule_counts_a_function_from_def_to_its_last_line():
    body = '    """Docstring."""\n' + "    x = 1\n" * 58
    assert long_functions(f"def fits():\n{body}") == []  # 60 lines
    assert long_functions(f"def one_too_many():\n{body}    return x\n") == [("one_too_many", 61)]
    nested = body.replace("\n    ", "\n        ")
    assert long_functions(f"class C:\n    def method(self):\n    {nested}        # the end\n        return 1\n") == [
        ("method", 62)]


def test_no_function_is_longer_than_60_lines():
    long = [f"{module}.{name}: {lines} lines ({path.relative_to(ROOT)})"
            for top in ("tracker", "workloads", "benchmarks") for module, path in _modules(top).items()
            for name, lines in long_functions(path.read_text(encoding="utf-8"))
            if f"{module}.{name}" not in LONG_FUNCTIONS]
    assert long == []


COMMAND_MODULES = ("list", "measure", "run", "merge", "summary", "import_csv", "compare", "rm", "pr", "bisect", "issue",
                   "comment", "report", "init", "publish", "results", "track")


def test_each_command_has_one_module_with_its_parser_and_its_handler():
    """tracker/commands/<name>.py holds a command's parser (`add`) and its handler (`main`); tracker/cli.py only
    dispatches to them and holds no handler of its own."""
    modules = {p.stem: ast.parse(p.read_text(encoding="utf-8")) for p in (ROOT / "tracker" / "commands").glob("*.py")
               if not p.stem.startswith("_")}
    defined = {name: {n.name for n in tree.body if isinstance(n, ast.FunctionDef)} for name, tree in modules.items()}
    assert sorted(defined) == sorted(COMMAND_MODULES)
    assert {name: sorted({"add", "main"} - names) for name, names in defined.items() if {"add", "main"} - names} == {}
    cli = ast.parse((ROOT / "tracker" / "cli.py").read_text(encoding="utf-8"))
    assert [n.name for n in cli.body if isinstance(n, ast.FunctionDef) and n.name.startswith("cmd_")] == []


def test_library_code_returns_values_and_leaves_printing_and_exit_codes_to_the_commands():
    mains = {f"{module}.{node.name}" for module, path in _modules("tracker").items()
             if not module.startswith("tracker.commands") and module != "tracker.cli"
             for node in ast.parse(path.read_text(encoding="utf-8")).body
             if isinstance(node, ast.FunctionDef) and node.name.endswith("_main")}
    assert mains == set()  # each command's printing and exit code live in its module of tracker/commands/
