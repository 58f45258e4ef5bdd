"""A compiled cell records what it ran: a hash of inductor's generated code and of the launch configs chosen."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from tracker.measure import fingerprint

ROOT = Path(__file__).resolve().parent.parent


class _Launcher:
    def __init__(self, config: str) -> None:
        self.config = config


def _module(tmp_path: Path, name: str, source: str, **kernels: list[str]) -> types.ModuleType:
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    module = types.ModuleType(name)
    module.__file__ = str(path)
    for kernel, configs in kernels.items():
        setattr(module, kernel, types.SimpleNamespace(launchers=[_Launcher(c) for c in configs]))
    return module


@pytest.fixture
def loaded(monkeypatch):
    """Stand-in for inductor's PyCodeCache.modules."""
    from torch._inductor.codecache import PyCodeCache

    modules: list[types.ModuleType] = []
    monkeypatch.setattr(PyCodeCache, "modules", modules)
    return modules


def test_the_same_code_and_configs_give_the_same_fingerprint(tmp_path, loaded):
    loaded.append(_module(tmp_path, "a", "kernel source", triton_k0=["XBLOCK: 64, num_warps: 4"]))
    first = fingerprint.compiled_fingerprint()
    assert first == fingerprint.compiled_fingerprint()
    assert first["modules"] == 1 and first["triton_kernels"] == 1 and len(first["code"]) == fingerprint.DIGITS


def test_another_autotuning_choice_changes_only_the_autotune_hash(tmp_path, loaded):
    loaded.append(_module(tmp_path, "a", "kernel source", triton_k0=["XBLOCK: 64, num_warps: 4"]))
    first = fingerprint.compiled_fingerprint()
    loaded[0].triton_k0.launchers = [_Launcher("XBLOCK: 128, num_warps: 8")]
    second = fingerprint.compiled_fingerprint()
    assert second["code"] == first["code"] and second["autotune"] != first["autotune"]


def test_other_generated_code_changes_the_code_hash(tmp_path, loaded):
    loaded.append(_module(tmp_path, "a", "kernel source"))
    first = fingerprint.compiled_fingerprint()
    loaded[0] = _module(tmp_path, "b", "other kernel source")
    assert fingerprint.compiled_fingerprint()["code"] != first["code"]
    assert first["autotune"] is None  # no Triton kernel: nothing was autotuned


def test_modules_loaded_before_the_cell_are_left_out(tmp_path, loaded):
    loaded.append(_module(tmp_path, "earlier", "another cell's code"))
    before = fingerprint.loaded_modules()
    assert fingerprint.compiled_fingerprint(before) is None
    loaded.append(_module(tmp_path, "a", "kernel source"))
    assert fingerprint.compiled_fingerprint(before)["modules"] == 1


def _measured(workload: str, mode: str, cache: Path) -> list:
    code = ("import json, sys\nfrom tracker.measure.harness import Settings, measure_cell\n"
            "c = measure_cell('tiny', sys.argv[1], sys.argv[2], device='cpu', "
            "settings=Settings(warmup_ms=1, rep_ms=5, warmup_calls=2))\n"
            "print(json.dumps([c.status, c.fingerprint]))")
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache)}  # a cold run gives each cell its own cache
    out = subprocess.run([sys.executable, "-c", code, workload, mode], capture_output=True, text=True, cwd=ROOT,
                         check=True, env=env)
    return json.loads(out.stdout.splitlines()[-1])


@pytest.mark.slow
def test_two_cold_compiles_in_fresh_processes_agree_and_eager_has_none(tmp_path):
    a = _measured("diff_cfg_blend", "default", tmp_path / "cache-a")
    b = _measured("diff_cfg_blend", "default", tmp_path / "cache-b")
    assert a[0] == b[0] == "ok" and a[1]["code"] == b[1]["code"]
    assert _measured("diff_cfg_blend", "eager", tmp_path / "cache-c") == ["ok", None]


def test_what_differs_between_identical_compiles_is_left_out():
    a = "# kernel path: /tmp/tmpa1/inductor/4a/c4a.py\nhook=<function f at 0x7f00ab12>"
    b = "# kernel path: /tmp/tmpzz/inductor/4a/c4a.py\nhook=<function f at 0x7f99cd34>"
    assert fingerprint.normalised(a) == fingerprint.normalised(b)
    assert fingerprint.normalised("x = a / b") == "x = a / b"
