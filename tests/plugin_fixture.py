"""A kernel repository made visible to this interpreter as pip would install it, without pip: its package
directory on sys.path and a dist-info whose entry_points.txt is written from its own pyproject.toml (so the
test reads what the repository declares, never a copy that could drift). What
tests/fixtures/kernels_plugin/ checks in by hand, generated.

Subprocesses see it through PYTHONPATH, and asv's own processes through ASV_PYTHONPATH (asv drops PYTHONPATH);
an installed plugin needs neither.

The tests load only the plugins they put in place: conftest sets COMPILE_BASELINES_PLUGINS to none, and these helpers
add the entry points of what they install to it, so a kernel repository installed beside the project changes nothing
the tests see.
"""

from __future__ import annotations

import os
import sys
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from workloads import plugins
from workloads.kernels import registry as kernel_registry
from workloads.names import ENV_PLUGINS

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


def entry_point_names(path: Path) -> list[str]:
    """The names of the entry points that the dist-infos in `path` declare."""
    return [line.split("=", 1)[0].strip() for f in sorted(path.glob("*.dist-info/entry_points.txt"))
            for line in f.read_text(encoding="utf-8").splitlines() if "=" in line and not line.startswith("[")]


def enabled(*names: str) -> str:
    """COMPILE_BASELINES_PLUGINS listing `names` beside those it lists now."""
    now = [n for n in os.environ.get(ENV_PLUGINS, "").split(",") if n]
    return ",".join(dict.fromkeys([*now, *names]))


def on_sys_path(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    """The packages and dist-infos in `path` importable, and their plugins loaded, for the test's duration."""
    monkeypatch.syspath_prepend(str(path))
    monkeypatch.setenv(ENV_PLUGINS, enabled(*entry_point_names(path)))


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
    allowed = os.environ.get(ENV_PLUGINS)
    os.environ[ENV_PLUGINS] = enabled(*entry_point_names(tmp))
    reset_registries()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*paths, *filter(None, [os.environ.get("PYTHONPATH")])])}
    env["ASV_PYTHONPATH"] = env["PYTHONPATH"]
    try:
        yield env
    finally:
        for p in paths:
            sys.path.remove(p)
        if allowed is None:
            os.environ.pop(ENV_PLUGINS, None)
        else:
            os.environ[ENV_PLUGINS] = allowed
        for name in [m for m in sys.modules if m.split(".")[0] in packages]:
            del sys.modules[name]
        reset_registries()
