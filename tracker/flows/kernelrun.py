"""A side's run of its kernels under test alone, in round 1 of a kernel-only change (tracker.flows.baseline).

The flow hands this file's text to `python -c` in the side's worktree, followed by the arguments of that side's
`run` (`run --commit C --workload W ... --replicates 1 --replicate-all-modes`). It lists the kernels under test of
those workloads and presets as the side's own code declares them (its registry and its plugins, so a kernel added or
removed by the change is measured only where it exists), then becomes the side's `run` of those cells (`--cell`
each). A side without any measures nothing. A side whose code cannot list them (a version of the workloads package
without the registry or the catalog it asks) measures every cell it is asked for, as a full round 1 would: the flow
then shares only the cells it lacks.

It imports nothing at the top: run this way, its imports are the side's own modules (the worktree comes first on the
path), not this version's.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence


def _values(argv: Sequence[str], flag: str) -> list[str]:
    """The values of a `nargs="+"` option of `run`'s command line."""
    if flag not in argv:
        return []
    after = list(argv[argv.index(flag) + 1:])
    return after[:next((i for i, a in enumerate(after) if a.startswith("-")), len(after))]


def kernel_cells(argv: Sequence[str]) -> list[str] | None:
    """PRESET/WORKLOAD/MODE of every kernel under test of the workloads and presets `run` is asked for (the flow
    names both), as this process's code declares them; None where that code cannot tell, or no preset is named.
    Only the workloads package is asked (its registry and catalog): what a run's own planning would find."""
    presets, workloads = _values(argv, "--preset"), _values(argv, "--workload")
    if not presets:
        return None
    try:
        from workloads import catalog
        from workloads.kernels import registry

        found = registry.candidates()
        return [f"{p}/{w}/{registry.MODE_PREFIX}{c.name}" for p in presets for w in workloads
                if catalog.applies(p, w) for c in found if c.workload == w]
    except (ImportError, AttributeError, TypeError):
        return None


def main(argv: Sequence[str]) -> int:
    """Become `run` of the kernels' cells (or of everything asked, where they cannot be listed); 0 without any."""
    cells = kernel_cells(argv)
    command = [sys.executable, "-m", "tracker.cli", *argv]
    if cells is None:
        print("run: this commit's code cannot list its kernels under test: measuring every cell", flush=True)
    elif not cells:
        print(f"run: no kernel under test of {' '.join(_values(argv, '--workload'))} at this commit: nothing to "
              "measure", flush=True)
        return 0
    else:
        command += ["--cell", *cells]
    sys.stdout.flush()
    os.execv(sys.executable, command)
    return 0  # not reached: execv replaces this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
