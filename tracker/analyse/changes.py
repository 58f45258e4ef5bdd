"""What a comparison of two runs found (tracker.analyse.compare makes it): each cell's change and verdict, each
instance's best baseline and best latency, each kernel under test's speedup over the best baseline, the modes' wins and
geomeans, and the Comparison holding them, with the lists its readers ask for (regressions, undecided, ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tracker.analyse.judge import ChangeRule
from tracker.analyse.pairs import RunInfo
from tracker.analyse.verdicts import (
    CODE_UNCHANGED,
    FAIL_ON,
    GAINED,
    IMPROVEMENT_VERDICTS,
    LOST,
    NOISY,
    NOW_FAILS,
    NOW_OK,
    REGRESSION_VERDICTS,
    SOURCE_UNCHANGED,
    UNCONFIRMED,
    UNDECIDED,
    UNKNOWN,
)


@dataclass(frozen=True)
class CellChange:
    preset: str
    workload: str
    mode: str  # a compile mode or "kernel:NAME"
    base_ms: float | None
    head_ms: float | None
    ratio: float | None  # head / base
    p_value: float | None
    threshold: float | None  # the relative change this cell had to exceed
    spread: float | None  # the larger relative IQR of the two measurements
    verdict: str
    compiled: str | None = None  # what the compiled code did between the runs (COMPILED_SAME ...); None: unknown
    compiles: tuple[int, int] | None = None  # fresh compiles measured (base, head)
    method: bool = False  # changed, host-bound, and the runs were measured differently: the method can explain it
    ci: tuple[float, float] | None = None  # the ratio's confidence interval (the noise test)
    resolution: float | None = None  # the smallest change the comparison could have claimed here (the noise test)
    means_ms: tuple[float, float] | None = None  # the compiles' geometric means (base, head), what the test compared
    noise: str | None = None  # what the cell's noise was read from ("fixed bands": none was known)
    more: int | None = None  # undecided: about how many more compiles a side would decide it
    noisy_reason: str | None = None  # why it is too noisy to judge (verdicts.DISTURBED, HALF_BAND)

    @property
    def significant(self) -> bool:
        return self.verdict in REGRESSION_VERDICTS + IMPROVEMENT_VERDICTS


@dataclass(frozen=True)
class InstanceChange:
    preset: str
    workload: str
    base_best: str | None
    head_best: str | None
    base_ties: tuple[str, ...]
    head_ties: tuple[str, ...]
    base_ms: float | None
    head_ms: float | None
    ratio: float | None
    p_value: float | None
    threshold: float | None  # the band the best latency had to leave
    latency_verdict: str  # the best latency's own change (old winner at base vs new winner at head)
    mode_changed: bool  # another mode wins and the old winner is not in its tie set
    best_changed: bool  # mode_changed backed by a judged cell change, or the best latency changed
    reason: str
    host_bound: bool
    unconfirmed: bool = False  # moved beyond noise only on fewer compiles than the rule asks: listed, not counted
    ci: tuple[float, float] | None = None  # the best latency's ratio's confidence interval (the noise test)
    # The mode whose own cell the best latency's change (ratio, ci) was judged on, its compiles' means: the winner of
    # both sides, or a mode tied with the other side's winner; None: base's winner's best against head's
    judged_on: str | None = None


@dataclass(frozen=True)
class KernelChange:
    preset: str
    workload: str
    kernel: str
    base_speedup: float | None  # best baseline / kernel: > 1 means the kernel beats every mode
    head_speedup: float | None
    change: float | None  # head_speedup / base_speedup
    verdict: str  # GAINED, LOST, SAME, NOISY, UNDECIDED, UNKNOWN, NOW_FAILS, NOW_OK, FAILS, ADDED, REMOVED
    noisy_reason: str | None = None  # NOISY: why, of the kernel's cell or the best baseline's (CellChange's)

    @property
    def changed(self) -> bool:
        return self.verdict in (GAINED, LOST, NOW_FAILS, NOW_OK)


@dataclass(frozen=True)
class ModeFigures:
    """A mode's wins and geomean speedup vs eager over the instances both runs measured. Head's are base's with the
    comparison's counted changes applied (compare._figures): nothing that moved within noise moves them."""

    preset: str
    mode: str
    base_wins: int  # instances the mode wins (the fastest median, the study's count) ...
    head_wins: int
    base_geomean: float | None
    head_geomean: float | None
    base_tied: int = 0  # ... of which another mode is within noise of it (tracker.stats.NoiseModel's tie rule)
    head_tied: int = 0


@dataclass
class Comparison:
    base: RunInfo
    head: RunInfo
    rule: ChangeRule
    cells: list[CellChange]
    instances: list[InstanceChange]
    kernels: list[KernelChange]
    figures: list[ModeFigures]
    added: list[tuple[str, str]]  # instances (preset, workload) only head measured
    removed: list[tuple[str, str]]
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    scope: str = ""  # what was measured, in words (the PR flow's scope, kept in its paired record)
    stopped: str = ""  # why a paired measurement's rounds stopped with cells left to decide (its record's words)

    @property
    def best_changes(self) -> list[InstanceChange]:
        return [i for i in self.instances if i.best_changed]

    @property
    def regressions(self) -> list[CellChange]:
        return [c for c in self.cells if c.verdict in REGRESSION_VERDICTS]

    @property
    def improvements(self) -> list[CellChange]:
        return [c for c in self.cells if c.verdict in IMPROVEMENT_VERDICTS]

    @property
    def source_unchanged(self) -> list[CellChange]:
        """Cells that moved beyond noise although nothing they depend on changed: not counted."""
        return [c for c in self.cells if c.verdict == SOURCE_UNCHANGED]

    @property
    def code_unchanged(self) -> list[CellChange]:
        """Compiled cells that moved beyond noise with the same generated code under the same versions: not counted."""
        return [c for c in self.cells if c.verdict == CODE_UNCHANGED]

    @property
    def unconfirmed(self) -> list[CellChange]:
        """Cells that moved beyond their band on fewer compiles than the rule asks: listed, not counted."""
        return [c for c in self.cells if c.verdict == UNCONFIRMED]

    @property
    def noisy(self) -> list[CellChange]:
        return [c for c in self.cells if c.verdict == NOISY]

    @property
    def undecided(self) -> list[CellChange]:
        """Cells neither changed nor the same within the margin after every compile the budget allowed."""
        return [c for c in self.cells if c.verdict == UNDECIDED]

    @property
    def undecided_best(self) -> list[InstanceChange]:
        """Instances whose best latency is neither changed nor the same (its cell, or the cells it is judged on, are
        undecided): never read as unchanged because it is not among the best-baseline changes."""
        return [i for i in self.instances if i.latency_verdict == UNDECIDED and not i.best_changed]

    @property
    def unjudged(self) -> list[CellChange]:
        """Cells that moved beyond their band where one side has no samples (an imported study): not judged."""
        return [c for c in self.cells if c.verdict == UNKNOWN]

    @property
    def kernel_changes(self) -> list[KernelChange]:
        return [k for k in self.kernels if k.changed]

    @property
    def changed(self) -> bool:
        """Anything worth a notification: a best baseline, a significant cell or a kernel's speedup."""
        return bool(self.best_changes or self.regressions or self.improvements or self.kernel_changes)

    def fails(self, fail_on: str) -> bool:
        if fail_on not in FAIL_ON:
            raise ValueError(f"fail_on is one of {', '.join(FAIL_ON)}, not {fail_on!r}")
        return {"best-change": bool(self.best_changes), "regression": bool(self.regressions),
                "never": False}[fail_on]
