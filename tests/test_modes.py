"""A mode is data: workloads/modes.py says what torch.compile is called with, which modes autotune or replay CUDA
graphs, their short names and colours, and every stage reads it there; no stage spells a mode's name itself."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tracker.runner.costs import Costs, expected_cost
from tracker.runner.plan import CellId, Job
from tracker.runner.schedule import Scheduler
from workloads import modes
from workloads.modes import AUTOTUNED_MODES, BY_NAME, COMPILED, HEAD_TO_HEAD, MODES, REFERENCE, REGISTRY, Mode

ROOT = Path(__file__).resolve().parent.parent
REGISTRY_FILE = ROOT / "workloads" / "modes.py"
# The names that stand for a mode: every name and short name (the study's five and "r-o", "max-at", "mancg").
MODE_WORDS = frozenset({m.name for m in REGISTRY} | {m.short for m in REGISTRY})
HYPHENATED = tuple(w for w in MODE_WORDS if "-" in w)  # never English: a mode wherever they occur


def test_the_study_s_five_modes_in_its_order_eager_first() -> None:
    assert MODES == ("eager", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
    assert MODES[0] == REFERENCE and MODES[1:] == COMPILED
    assert HEAD_TO_HEAD == ("default", "max-autotune-no-cudagraphs")


def test_what_torch_compile_is_called_with() -> None:
    assert not BY_NAME["eager"].compiled
    with pytest.raises(ValueError, match="not compiled"):
        BY_NAME["eager"].compile_options()
    for name in COMPILED:
        assert BY_NAME[name].compile_options() == {"backend": "inductor", "mode": name}
    # another backend is one entry: its options say so, and no mode= when the backend has none
    aot = Mode("aot-eager", "aot_eager", None, autotuned=False, cudagraphs=False, short="aot", colour="#000000",
               cost=10.0)
    assert aot.compiled and aot.compile_options() == {"backend": "aot_eager"}


def test_the_max_autotune_modes_autotune_and_the_cuda_graph_modes_are_named() -> None:
    assert AUTOTUNED_MODES == ("max-autotune", "max-autotune-no-cudagraphs")
    assert [m.name for m in REGISTRY if m.cudagraphs] == ["reduce-overhead", "max-autotune"]
    assert modes.short("max-autotune-no-cudagraphs") == "mancg" and modes.short("kernel:mine") == "kernel:mine"


@pytest.mark.slow
def test_the_harness_calls_torch_compile_with_the_registry_s_options(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from tracker.measure.harness import Settings, measure_cell

    calls: list[dict] = []

    def fake_compile(fn, **kwargs):
        calls.append(kwargs)
        return fn

    monkeypatch.setattr(torch, "compile", fake_compile)
    quick = Settings(warmup_ms=1, rep_ms=2, warmup_calls=1)
    for name in MODES:
        cell = measure_cell("tiny", "diff_cfg_blend", name, device="cpu", settings=quick, launch_us=1.0)
        assert cell.status == "ok", cell.reason
    assert calls == [{"dynamic": False, **BY_NAME[m].compile_options()} for m in COMPILED]


def test_the_runner_costs_and_orders_cells_by_the_registry() -> None:
    gemm = "llm_swiglu_mlp"  # tagged gemm: the autotuned modes tune its templates
    assert [expected_cost(CellId("prefill", "llm_rmsnorm", m)) for m in MODES] == [m.cost for m in REGISTRY]
    assert [expected_cost(CellId("prefill", gemm, m)) - BY_NAME[m].cost for m in MODES] == [
        30.0 if BY_NAME[m].autotuned else 0.0 for m in MODES]
    cells = [CellId("prefill", w, m) for w in ("llm_rmsnorm", gemm) for m in MODES]
    schedule = Scheduler([Job(c) for c in cells], Costs(), gpus=1, workers=len(cells))
    order = [s.job.cell for s in iter(schedule.start, None)]
    assert next(c for c in order if c.mode != REFERENCE) == CellId("prefill", gemm, "max-autotune")  # the costliest
    assert [c.mode for c in order[:2]] == [REFERENCE] * 2  # eager compiles nothing: it keeps the GPU busy meanwhile


def _documentation(tree: ast.AST) -> set[int]:
    """ids of the string constants that are documentation: a bare string statement (docstrings included)."""
    return {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)}


def _spelled_modes(path: Path, root: Path = ROOT) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = _documentation(tree)
    return [f"{path.relative_to(root)}:{node.lineno}: {node.value!r}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
            and (node.value in MODE_WORDS or any(w in node.value for w in HYPHENATED))]


def test_no_code_outside_the_registry_spells_a_mode_s_name() -> None:
    """`"eager"`, `startswith("max-autotune")`, `{"reduce-overhead": ...}` or a head-to-head in prose hard-code what
    the registry says; documentation may name modes (a docstring, a comment)."""
    files = [p for top in ("tracker", "benchmarks", "workloads", "tools") for p in sorted((ROOT / top).rglob("*.py"))
             if p != REGISTRY_FILE]
    assert [hit for p in files for hit in _spelled_modes(p)] == []


def test_no_template_spells_a_mode_s_name() -> None:
    quoted = re.compile("|".join(rf"([\"']){re.escape(w)}\1" for w in sorted(MODE_WORDS)))
    hits = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}" for p in sorted((ROOT / "tracker").rglob("*.j2"))
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            if quoted.search(line) or any(w in line for w in HYPHENATED)]
    assert hits == []


def test_the_scan_finds_a_mode_spelled_in_code(tmp_path: Path) -> None:
    """The check above is only as good as what it catches."""
    sample = tmp_path / "sample.py"
    sample.write_text('"""Docstrings may say max-autotune."""\n'
                      'def f(mode):\n    """eager"""\n    return mode.startswith("max-autotune") or mode == "eager"\n'
                      'SHORT = {"mancg": 1}\nnote = f"a {1} vs reduce-overhead"\n', encoding="utf-8")
    found = sorted(_spelled_modes(sample, tmp_path))
    assert found == ["sample.py:4: 'eager'", "sample.py:4: 'max-autotune'", "sample.py:5: 'mancg'",
                     "sample.py:6: ' vs reduce-overhead'"]
