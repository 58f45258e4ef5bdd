"""The modes a cell is measured in, as data: eager and the four torch.compile modes of the study.

Every stage reads a mode's facts here: the harness what torch.compile is called with, the runner which modes
autotune and what a cell costs, the analysis the reference and the head-to-head, the renderers a mode's short name
and colour. Another torch.compile mode or another compile backend is one more entry. Importable without torch:
asv imports the benchmark suite in every benchmark process.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mode:
    name: str  # as results, command lines and docs/workloads.md name it
    backend: str | None  # torch.compile's backend; None: not compiled (eager)
    compile_mode: str | None  # torch.compile's mode=; None: the backend's own default
    # Whether its compiles benchmark candidate kernels and launch configs and keep the fastest: two compiles of one
    # cell can choose differently, so its cells are measured in several compiles (tracker.runner.remaining) and judged
    # against their spread (tracker.analyse.judge, noise).
    autotuned: bool
    cudagraphs: bool  # whether the compiled function replays CUDA graphs
    short: str  # in the text summary's narrow columns
    colour: str  # in the report's plots and tables (Okabe-Ito, colour-blind safe)
    # Rough seconds a cell takes; only the ratios matter: they balance shards and order the runner's queue.
    cost: float

    @property
    def compiled(self) -> bool:
        return self.backend is not None

    def compile_options(self) -> dict[str, str]:
        """The keyword arguments torch.compile is called with, beside dynamic=False."""
        if self.backend is None:
            raise ValueError(f"mode {self.name!r} is not compiled")
        return {"backend": self.backend} | ({} if self.compile_mode is None else {"mode": self.compile_mode})


# Eager first: it is the reference every speedup is taken against; then the study's order.
REGISTRY: tuple[Mode, ...] = (
    Mode("eager", None, None, autotuned=False, cudagraphs=False, short="eager", colour="#7f7f7f", cost=6.0),
    Mode("default", "inductor", "default", autotuned=False, cudagraphs=False, short="default", colour="#0072b2",
         cost=20.0),
    Mode("reduce-overhead", "inductor", "reduce-overhead", autotuned=False, cudagraphs=True, short="r-o",
         colour="#e69f00", cost=22.0),
    Mode("max-autotune", "inductor", "max-autotune", autotuned=True, cudagraphs=True, short="max-at",
         colour="#009e73", cost=30.0),
    Mode("max-autotune-no-cudagraphs", "inductor", "max-autotune-no-cudagraphs", autotuned=True, cudagraphs=False,
         short="mancg", colour="#cc79a7", cost=28.0),
)

BY_NAME: dict[str, Mode] = {m.name: m for m in REGISTRY}
MODES: tuple[str, ...] = tuple(BY_NAME)
REFERENCE: str = "eager"  # what compiles nothing: every speedup is taken against it
COMPILED: tuple[str, ...] = tuple(m.name for m in REGISTRY if m.compiled)
AUTOTUNED_MODES: tuple[str, ...] = tuple(m.name for m in REGISTRY if m.autotuned)
# The study's head-to-head: inductor's default against its fastest mode without CUDA graphs.
HEAD_TO_HEAD: tuple[str, str] = ("default", "max-autotune-no-cudagraphs")


def short(name: str) -> str:
    """A mode's short name; any other name (a kernel under test's "kernel:<name>") as it is."""
    mode = BY_NAME.get(name)
    return name if mode is None else mode.short


def _check() -> None:
    if len(BY_NAME) != len(REGISTRY) or len({m.short for m in REGISTRY}) != len(REGISTRY):
        raise ValueError("two modes share a name or a short name")
    if MODES[0] != REFERENCE or BY_NAME[REFERENCE].compiled:
        raise ValueError(f"the reference mode {REFERENCE!r} comes first and compiles nothing")
    if not set(HEAD_TO_HEAD) <= set(COMPILED):
        raise ValueError(f"the head-to-head {HEAD_TO_HEAD} names modes that are not compiled modes")


_check()
