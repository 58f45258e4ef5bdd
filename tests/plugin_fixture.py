"""A kernel repository made visible to this interpreter as pip would install it, without pip: its package
directory on sys.path and a dist-info whose entry_points.txt is written from its own pyproject.toml (so the
test reads what the repository declares, never a copy that could drift). What
tests/fixtures/kernels_plugin/ checks in by hand, generated.

Subprocesses see it through PYTHONPATH, and asv's own processes through ASV_PYTHONPATH (asv drops PYTHONPATH);
an installed plugin needs neither.
"""

from __future__ import annotations

import os
import sys
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from workloads import plugins
from workloads.kernels import registry as kernel_registry

EXAMPLE_REPO = Path(__file__).resolve().parent.parent / "examples" / "kernel-repo"


def write_dist_info(project: Path, into: Path) -> Path:
    """`into/<name>-<version>.dist-info` with METADATA and the entry points of `project`'s pyproject.toml."""
    meta = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    dist = into / f"{meta['name'].replace('-', '_')}-{meta['version']}.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {meta['name']}\nVersion: {meta['version']}\n")
    groups = meta.get("entry-points", {})
    (dist / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) + "\n" for group, eps in groups.items()))
    return dist


def reset_registries() -> None:
    plugins.REGISTRY.reset()
    kernel_registry.REGISTRY.reset()


@contextmanager
def installed(project: Path, tmp: Path, packages: tuple[str, ...]) -> Iterator[dict[str, str]]:
    """`project` importable with its entry points for the duration; yields the environment a subprocess needs.
    `packages`: its top-level package names, forgotten afterwards."""
    write_dist_info(project, tmp)
    paths = [str(tmp), str(project)]
    sys.path[:0] = paths
    reset_registries()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*paths, *filter(None, [os.environ.get("PYTHONPATH")])])}
    env["ASV_PYTHONPATH"] = env["PYTHONPATH"]
    try:
        yield env
    finally:
        for p in paths:
            sys.path.remove(p)
        for name in [m for m in sys.modules if m.split(".")[0] in packages]:
            del sys.modules[name]
        reset_registries()
