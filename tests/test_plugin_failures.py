"""A plugin (a workload or a kernel entry point) that fails on import in any way, sys.exit included, is skipped with
one warning line naming it; the study's workloads and the in-tree kernels go on. Ctrl-C while importing one still
interrupts."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from plugin_fixture import enabled, entry_point_names, on_sys_path

from workloads import plugins
from workloads.kernels import registry as kernels
from workloads.names import WORKLOAD_NAMES

ROOT = Path(__file__).resolve().parent.parent
GROUPS = {"workload": plugins.ENTRY_POINT_GROUP, "kernel": kernels.ENTRY_POINT_GROUP}
FAILURES = {
    "sys.exit(3)": ("import sys\nsys.exit(3)\n", "SystemExit: 3"),
    "sys.exit()": ("import sys\nsys.exit()\n", "SystemExit"),
    "a message to sys.exit": ("raise SystemExit('no GPU here,\\nbye')\n", "SystemExit: no GPU here,"),
    "a BaseException of its own": ("class Odd(BaseException): pass\nraise Odd('odd')\n", "Odd: odd"),
    "an ImportError": ("import no_such_module_anywhere_cb\n", "ModuleNotFoundError: No module named"),
    "a syntax error": ("def broken(:\n", "SyntaxError"),
}


def _install(where: Path, kind: str, failure: str) -> str:
    """A one-module plugin of `kind` that fails on import as `failure` says, seen by importlib.metadata."""
    module = f"cb_failing_{kind}_{abs(hash(failure)) % 10**8}"
    (where / f"{module}.py").write_text(FAILURES[failure][0])
    info = where / f"{module}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{GROUPS[kind]}]\nfailing = {module}\n")
    return module


@pytest.fixture
def fresh() -> Iterator[None]:
    plugins.REGISTRY.reset()
    kernels.REGISTRY.reset()
    yield
    plugins.REGISTRY.reset()
    kernels.REGISTRY.reset()


@pytest.mark.parametrize("failure", list(FAILURES))
@pytest.mark.parametrize("kind", list(GROUPS))
def test_a_plugin_failing_on_import_is_skipped_with_one_warning_naming_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh: None, kind: str, failure: str) -> None:
    module = _install(tmp_path, kind, failure)
    on_sys_path(monkeypatch, tmp_path)
    warning = plugins.PluginWarning if kind == "workload" else kernels.PluginWarning
    with pytest.warns(warning) as record:
        loaded = plugins.REGISTRY.workloads() if kind == "workload" else kernels.REGISTRY.candidates()
    (only,) = [w for w in record if issubclass(w.category, warning)]
    text = str(only.message)
    assert f"{kind} plugin 'failing' ({module}) skipped: {FAILURES[failure][1]}" in text and "\n" not in text
    if kind == "workload":
        assert loaded == []  # the study's 23 are not plugins: workloads.catalog lists them beside
    else:
        assert {c.key for c in loaded} >= {"llm_rmsnorm:torch_fp32"}  # the in-tree kernels still load
    registry = plugins.REGISTRY if kind == "workload" else kernels.REGISTRY
    assert set(registry.plugin_errors) == {"failing"}


@pytest.mark.parametrize("kind", list(GROUPS))
def test_ctrl_c_while_a_plugin_imports_still_interrupts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        fresh: None, kind: str) -> None:
    (tmp_path / "cb_slow_plugin.py").write_text("raise KeyboardInterrupt\n")
    info = tmp_path / "cb_slow_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cb-slow-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{GROUPS[kind]}]\nslow = cb_slow_plugin\n")
    on_sys_path(monkeypatch, tmp_path)
    with pytest.raises(KeyboardInterrupt):
        plugins.REGISTRY.workloads() if kind == "workload" else kernels.REGISTRY.candidates()


@pytest.mark.slow
def test_list_with_plugins_that_exit_lists_the_built_ins_and_warns_once_each(tmp_path: Path) -> None:
    modules = {kind: _install(tmp_path, kind, "sys.exit(3)") for kind in GROUPS}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(tmp_path)]),
               COMPILE_BASELINES_PLUGINS=enabled(*entry_point_names(tmp_path)))
    done = subprocess.run([sys.executable, "-m", "tracker.cli", "list"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        f"warning: workload plugin 'failing' ({modules['workload']}) skipped: SystemExit: 3",
        f"warning: kernel plugin 'failing' ({modules['kernel']}) skipped: SystemExit: 3"]
    assert all(name in done.stdout for name in WORKLOAD_NAMES) and "llm_rmsnorm:torch_fp32" in done.stdout
