"""The one explicit registry of the 23 workloads, in the study's table order."""

from __future__ import annotations

from workloads import diffusion, llm, rl, vlm
from workloads.names import WORKLOAD_NAMES, check_preset, check_workload
from workloads.spec import Workload

_BY_NAME: dict[str, Workload] = {w.name: w for m in (llm, vlm, diffusion, rl) for w in m.WORKLOADS}
if set(_BY_NAME) != set(WORKLOAD_NAMES):
    raise ImportError(f"workload registry out of sync with names.py: {sorted(set(_BY_NAME) ^ set(WORKLOAD_NAMES))}")

WORKLOADS: tuple[Workload, ...] = tuple(_BY_NAME[n] for n in WORKLOAD_NAMES)


def get(name: str) -> Workload:
    return _BY_NAME[check_workload(name)]


def instances(preset: str) -> list[Workload]:
    """The workloads the study measures in `preset`: 23 in prefill (and tiny), 18 in decode."""
    check_preset(preset)
    return [w for w in WORKLOADS if w.applies_to(preset)]
