"""Which workloads of one module a change of its source reaches, by the top-level definitions the change touched.

A module of workloads defines several (workloads/llm.py: eleven), each a `Workload("name", ...)` whose builder and
timed function are top-level definitions of the module. A change to one function reaches the workloads that use it,
directly or through other definitions of the module, and no other: measuring the module's other workloads costs a PR
most of its time and can only show noise. Anything this cannot follow reaches every workload of the module, as a
change of the file does: statements other than definitions, imports and assignments (they run at import and may do
anything), a name defined twice, a workload not declared by a literal `Workload("name", ...)`, a source that does
not parse. Comments, docstrings and the order of definitions change no workload.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Collection, Iterator
from dataclasses import dataclass

DECLARE = "Workload"  # workloads.spec.Workload, called by that name in every module of workloads


@dataclass(frozen=True)
class Module:
    """One version of a module, as far as its workloads go."""
    definitions: dict[str, str]  # top-level name -> its statement's dump (docstrings left out)
    uses: dict[str, frozenset[str]]  # top-level name -> the names its statement mentions
    declared: dict[str, str]  # workload -> the dump of its Workload(...) call
    declared_uses: dict[str, frozenset[str]]  # workload -> the names its call mentions
    rest: tuple[str, ...]  # every other top-level statement's dump, in order


def reached(old: str, new: str, workloads: Collection[str]) -> frozenset[str] | None:
    """Those of `workloads` (the ones the module defines) that the change from source `old` to `new` reaches; None
    where it cannot tell (the module's docstring), i.e. all of them."""
    try:
        before, after = parse(old), parse(new)
    except (SyntaxError, ValueError):
        return None
    if before is None or after is None or before.rest != after.rest or before.declared.keys() != after.declared.keys():
        return None
    if not set(workloads) <= set(after.declared):
        return None
    changed = {n for n in before.definitions.keys() | after.definitions.keys()
               if before.definitions.get(n) != after.definitions.get(n)}
    return frozenset(w for w in workloads
                     if before.declared[w] != after.declared[w]
                     or changed & (_closure(before, w) | _closure(after, w)))


def parse(source: str) -> Module | None:
    """The module's definitions and declared workloads; None where a name is defined twice, a workload declared twice
    or inside a function or class (what surrounds it there is not followed)."""
    definitions: dict[str, str] = {}
    uses: dict[str, frozenset[str]] = {}
    declared: dict[str, str] = {}
    declared_uses: dict[str, frozenset[str]] = {}
    rest: list[str] = []
    for node in _without_docstrings(ast.parse(source)).body:
        calls = list(_declarations(node))
        if calls and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            return None
        for name, call in calls:
            if name in declared:
                return None
            declared[name], declared_uses[name] = ast.dump(call), _names(call)
        statement = _blanked(node) if calls else node
        names = _bound(node)
        if names is None:
            rest.append(ast.dump(statement))
            continue
        for name in names:
            if name in definitions:
                return None
            definitions[name], uses[name] = ast.dump(statement), _names(statement)
    return Module(definitions, uses, declared, declared_uses, tuple(rest))


def _closure(module: Module, workload: str) -> set[str]:
    """The top-level names a workload's declaration reaches, through the definitions that mention one another."""
    seen: set[str] = set()
    todo = list(module.declared_uses[workload])
    while todo:
        name = todo.pop()
        if name in seen or name not in module.definitions:
            continue
        seen.add(name)
        todo.extend(module.uses[name])
    return seen


def _bound(node: ast.stmt) -> list[str] | None:
    """The top-level names a definition, an import or an assignment to plain names binds; None for another
    statement."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.Import | ast.ImportFrom):
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            return None
        return [(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"] or None
    targets = node.targets if isinstance(node, ast.Assign) else \
        [node.target] if isinstance(node, ast.AnnAssign) and node.value is not None else []
    if targets and all(isinstance(t, ast.Name) for t in targets):
        return [t.id for t in targets if isinstance(t, ast.Name)]
    return None


def _declarations(node: ast.AST) -> Iterator[tuple[str, ast.Call]]:
    """Each `Workload("name", ...)` call within `node`, with its name."""
    for call in ast.walk(node):
        if isinstance(call, ast.Call) and _called(call) == DECLARE and call.args \
                and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
            yield call.args[0].value, call


def _called(call: ast.Call) -> str | None:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


class _Blank(ast.NodeTransformer):
    """Each workload's declaration as its name alone: a statement declaring several is the same where only they
    differ, and each declaration is compared on its own."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if _called(node) == DECLARE and node.args and isinstance(node.args[0], ast.Constant):
            return ast.Constant(f"<workload {node.args[0].value}>")
        return self.generic_visit(node)


def _blanked(node: ast.stmt) -> ast.AST:
    return _Blank().visit(copy.deepcopy(node))


def _names(node: ast.AST) -> frozenset[str]:
    return frozenset(n.id for n in ast.walk(node) if isinstance(n, ast.Name))


def _without_docstrings(tree: ast.Module) -> ast.Module:
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.body \
                and _is_docstring(node.body[0]):
            node.body = node.body[1:] or [ast.Pass()]
    return tree


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
