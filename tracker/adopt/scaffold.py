"""`compile-baselines init`: the files a kernel repository needs to plug its workloads and kernels in.

It writes the entry points (a pyproject.toml, or the lines to add to an existing one), a package with a
workload skeleton (a tiny preset and a sweep) and a candidate skeleton, and the caller of the reusable workflow
(.github/workflows/kernel-repo.yml) pinned to the compile-baselines commit that wrote them, and a .gitignore for
what runs leave in the repository. It never overwrites a file unless told to (a .gitignore is only added to).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import jinja2

from tracker.errors import ToolError, UsageError
from tracker.paths import REPO_ROOT
from tracker.store import atomic
from tracker.store.commits import CommitError, git
from workloads.names import NAMESPACE

TEMPLATES = Path(__file__).parent / "templates"
# Where the reusable workflow lives (asv.conf.json's project_url names the same repository).
REPOSITORY = "compile-baselines/compile-baselines"
WORKFLOW = ".github/workflows/compile-baselines.yml"
GITIGNORE = ".gitignore"
_FULL_SHA = re.compile(r"[0-9a-f]{40}")


class InitError(ToolError):
    pass


@dataclass(frozen=True)
class Scaffold:
    namespace: str
    package: str
    dist: str
    ref: str  # the compile-baselines commit the caller workflow pins
    repository: str = REPOSITORY

    def context(self) -> dict[str, str]:
        try:
            version = "v" + metadata.version("compile-baselines")
        except metadata.PackageNotFoundError:
            version = "v0"
        return {"namespace": self.namespace, "package": self.package, "dist": self.dist, "ref": self.ref,
                "repository": self.repository, "version": version,
                "entry_points": render("entry_points.toml.j2", namespace=self.namespace, package=self.package)}


def render(template: str, **context: str) -> str:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), keep_trailing_newline=True,
                             undefined=jinja2.StrictUndefined, autoescape=False)
    return env.get_template(template).render(**context)


def namespace_for(directory: Path) -> str:
    """A namespace from a directory's name: `my-kernels` -> `my_kernels`."""
    name = re.sub(r"[^a-z0-9_]", "_", directory.resolve().name.lower()).strip("_")
    return name if name and name[0].isalpha() else f"k_{name}"


def own_commit() -> str:
    """The full hash of the compile-baselines checkout running this: what the caller workflow pins."""
    try:
        commit = git(["rev-parse", "HEAD"], REPO_ROOT).strip()
    except CommitError:
        commit = ""
    if not _FULL_SHA.fullmatch(commit):
        raise InitError(f"{REPO_ROOT} is not a git checkout of compile-baselines: pass --ref with the full hash of "
                        "the compile-baselines commit the workflow should use")
    return commit


def files(s: Scaffold) -> dict[str, str]:
    """Repository path -> content, pyproject.toml included."""
    ctx = s.context()
    return {
        "pyproject.toml": render("pyproject.toml.j2", **ctx),
        f"{s.package}/__init__.py": render("init.py.j2", **ctx),
        f"{s.package}/workloads.py": render("workloads.py.j2", **ctx),
        f"{s.package}/kernels.py": render("kernels.py.j2", **ctx),
        WORKFLOW: render("caller.yml.j2", **ctx),
        GITIGNORE: render("gitignore.j2", **ctx),
    }


def _ignore_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


def add_ignores(path: Path, text: str) -> bool:
    """Append to an existing .gitignore the patterns of `text` it lacks (with their comment); False when it has them
    all. A .gitignore is only ever added to, never rewritten."""
    old = path.read_text(encoding="utf-8")
    missing = [line for line in _ignore_lines(text) if line not in _ignore_lines(old)]
    if not missing:
        return False
    head = text.splitlines()[0]
    atomic.write_text(path, old + ("" if old.endswith("\n") or not old else "\n") + "\n".join([head, *missing]) + "\n")
    return True


def init(directory: str | os.PathLike[str], namespace: str | None = None, ref: str | None = None,
         force: bool = False) -> tuple[Scaffold, list[Path], str | None]:
    """Write the scaffold into `directory`: what was written (the names, the paths), and the entry-point lines to
    add by hand when a pyproject.toml was there already (it is never rewritten). Before writing anything: InitError
    when a file exists (unless `force`), UsageError when a name is not usable."""
    root = Path(directory)
    namespace = namespace or namespace_for(root)
    if not NAMESPACE.fullmatch(namespace):
        raise UsageError(f"namespace {namespace!r}: use lower-case letters, digits and _, starting with a letter")
    if ref is not None and not _FULL_SHA.fullmatch(ref):
        raise UsageError(f"{ref!r}: give the full 40-hex commit hash (workflows are pinned to commits)",
                         parameter="ref")
    package = namespace if namespace.endswith("kernels") else f"{namespace}_kernels"
    s = Scaffold(namespace, package, package.replace("_", "-"), ref or own_commit())
    wanted = files(s)
    hand_edit = None
    if (root / "pyproject.toml").exists():
        wanted.pop("pyproject.toml")
        hand_edit = s.context()["entry_points"]
    ignores = wanted.pop(GITIGNORE) if (root / GITIGNORE).exists() else None
    existing = [p for p in wanted if (root / p).exists()]
    if existing and not force:
        raise InitError(f"{', '.join(existing)} already exist in {root}: move them aside or pass --force")
    written = [root / GITIGNORE] if ignores is not None and add_ignores(root / GITIGNORE, ignores) else []
    for rel, text in wanted.items():
        path = root / rel
        atomic.write_text(path, text)
        written.append(path)
    return s, written, hand_edit
