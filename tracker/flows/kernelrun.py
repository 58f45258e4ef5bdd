"""A side's run of its kernels under test, in round 1 of a kernel-only change (tracker.flows.baseline).

The flow hands this file's text to `python -c` in the side's worktree, followed by what the change touched and the
arguments of that side's `run`:

    python -c SCRIPT [--files FILE ...] [--baseline RECORD] -- run --commit C --workload W ...

It lists the kernels under test of those workloads and presets as the side's own code declares them (its registry
and its plugins, so a kernel added or removed by the change is measured only where it exists), then becomes that
`run` (the side's `tracker.cli` run as its main module, as `python -m` runs it):

- the **changed** kernels (no `--baseline`): those declared in the FILEs (every one where no file is named: a change
  to the candidates' registry reaches them all), as `--cell`s; a side without any measures nothing. A side whose
  code cannot list them (a version of the workloads package without the registry or the catalog it asks) measures
  every cell it is asked for, as a full round 1 would: the flow then shares only the cells it lacks.
- the **baseline** (`--baseline RECORD`, the run of the modes at head, `--kernel none`): the modes, and the kernels
  declared outside the FILEs, whose code the change did not touch: measured once for both sides like the modes.
  Their cells are written to RECORD, one a line, so the flow shares them and nothing else (a kernel new at head is
  no baseline).

It imports nothing at the top: run this way, its imports are the side's own modules (the worktree comes first on the
path), not this version's.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Sequence


def _values(argv: Sequence[str], flag: str) -> list[str]:
    """The values of a `nargs="+"` option of `run`'s command line."""
    if flag not in argv:
        return []
    after = list(argv[argv.index(flag) + 1:])
    return after[:next((i for i, a in enumerate(after) if a.startswith("-")), len(after))]


def _module_path(module: str) -> str:
    return module.replace(".", "/") + ".py"


def kernel_cells(argv: Sequence[str], files: Sequence[str] | None = None, changed: bool = True) -> list[str] | None:
    """PRESET/WORKLOAD/MODE of the kernels under test of the workloads and presets `run` is asked for (the flow
    names both), as this process's code declares them: those declared in `files` (`changed`), or outside them (not
    `changed`); every one where `files` is None. None where that code cannot tell, or no preset is named. Only the
    workloads package is asked (its registry and catalog): what a run's own planning would find."""
    presets, workloads = _values(argv, "--preset"), _values(argv, "--workload")
    if not presets:
        return None
    try:
        from workloads import catalog
        from workloads.kernels import registry

        found = [c for c in registry.candidates()
                 if files is None or (_module_path(c.fn.__module__) in files) == changed]
        return [f"{p}/{w}/{registry.MODE_PREFIX}{c.name}" for p in presets for w in workloads
                if catalog.applies(p, w) for c in found if c.workload == w]
    except (ImportError, AttributeError, TypeError):
        return None


def command(argv: Sequence[str]) -> list[str] | None:
    """The `run` command line this side's call becomes (its arguments after `python`); None: nothing to measure."""
    argv = list(argv)
    own, run = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else ([], argv)
    files = _values(own, "--files") if "--files" in own else None
    prefix = ["-m", "tracker.cli"]
    if "--baseline" in own:
        # every kernel is changed where no file is named (the registry changed): none is a baseline then
        cells = (kernel_cells(run, files, changed=False) or []) if files is not None else []
        _write(own[own.index("--baseline") + 1], "".join(f"{c}\n" for c in cells))
        if cells and "--kernel" in run:  # `--kernel none`: the modes alone, and now these kernels beside them
            at = run.index("--kernel")
            run[at + 1:at + 1 + len(_values(run, "--kernel"))] = sorted({c.split("/")[1] + ":" + c.split(":", 1)[1]
                                                                        for c in cells})
        return [*prefix, *run]
    cells = kernel_cells(run, files)
    if cells is None:
        print("run: this commit's code cannot list its kernels under test: measuring every cell", flush=True)
        return [*prefix, *run]
    if not cells:
        print(f"run: no kernel under test of {' '.join(_values(run, '--workload'))} at this commit: nothing to "
              "measure", flush=True)
        return None
    return [*prefix, *run, "--cell", *cells]


def _write(path: str, text: str) -> None:
    """`text` into `path` whole or not at all (tracker.store.atomic's way, which this script cannot import)."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".kernelrun-")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def main(argv: Sequence[str]) -> int:
    """Become the side's `run` (`command`), as `python -m tracker.cli` would run it, in this process: the modules that
    listed the kernels (torch among them) are not imported twice, and the run's fork server is started before they
    are, where the side's version has one to start; 0 where there is nothing to measure."""
    server = None
    try:
        from tracker.runner.forkserver import early

        server = early()
    except (ImportError, AttributeError):  # a version before it
        pass
    line = command(argv)
    if line is None:
        if server is not None:
            server.close()
        return 0
    import runpy

    sys.argv = [line[1], *line[2:]]  # what `python -m` leaves in argv: the module's name, then its arguments
    runpy.run_module(line[1], run_name="__main__", alter_sys=True)  # tracker.cli exits with the run's status
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
