"""The GPUs of a host that one run measures on (`run --gpus`): which, of one model, and how much memory each has.

Every GPU has its own lock and its own two timing cores (tracker.runner.workerenv), so measurements on
different GPUs never wait for each other; the compile workers are shared by all of them. Which GPU each measurement
gets is the scheduler's (tracker.runner.schedule). A run's results are keyed by one GPU model, so the GPUs it
measures on must all be of that model (`check_one_model`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

from tracker.errors import UsageError


def visible() -> tuple[str, ...]:
    """This host's GPUs as CUDA_VISIBLE_DEVICES names them (indices or UUIDs): its own list when set, else every
    device the driver reports (counted without creating a CUDA context)."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return tuple(x.strip() for x in listed.split(",") if x.strip())
    import torch

    return tuple(str(i) for i in range(torch.cuda.device_count()))


def listed() -> tuple[str, ...]:
    """`visible`, without importing torch: CUDA_VISIBLE_DEVICES's list when set, else nvidia-smi's (which creates no
    CUDA context either); () on a host without either. What a flow that only hands GPUs out to runs asks."""
    if os.environ.get("CUDA_VISIBLE_DEVICES") is not None:
        return visible()
    listing = nvidia_smi()
    return tuple(g.index for g in parse_listing(listing)) if listing else ()


def select(spec: str | None, gpus: tuple[str, ...]) -> tuple[str, ...]:
    """`--gpus`: "all" (the default), N (the first N) or a list of indices into `gpus` ("0,2,5"; one index: "3,").
    A spec this host cannot meet is a UsageError."""
    if not gpus:
        raise UsageError("--gpus: this host has no CUDA device")
    if spec is None or spec == "all":
        return gpus
    if spec.isdigit():
        n = int(spec)
        if not 1 <= n <= len(gpus):
            raise UsageError(f"--gpus {spec}: this host has {len(gpus)} GPUs")
        return gpus[:n]
    try:
        picked = [int(x) for x in spec.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--gpus takes all, a count or a list of indices such as 0,2,5, not {spec!r}") from None
    if not picked or len(set(picked)) != len(picked) or not all(0 <= i < len(gpus) for i in picked):
        raise UsageError(f"--gpus {spec}: indices 0 to {len(gpus) - 1}, each once")
    return tuple(gpus[i] for i in picked)


def file_key(gpu: str) -> str:
    """A GPU as CUDA_VISIBLE_DEVICES names it, as part of a file name: its lock's, its memory ledger's."""
    return "".join(c if c.isalnum() else "_" for c in gpu)


NVIDIA_SMI = ["nvidia-smi", "--query-gpu=index,uuid,name", "--format=csv,noheader"]


@dataclass(frozen=True)
class HostGpu:
    """One GPU as nvidia-smi lists it: its index (PCI bus order), UUID and model name."""

    index: str
    uuid: str
    name: str


NVIDIA_SMI_MEMORY = ["nvidia-smi", "--query-gpu=index,uuid,memory.total", "--format=csv,noheader,nounits"]


def nvidia_smi(run: Callable[..., subprocess.CompletedProcess[str]] = subprocess.run,
               command: list[str] = NVIDIA_SMI) -> str | None:
    """What `nvidia-smi --query-gpu=index,uuid,name --format=csv,noheader` (or `command`) prints, or None where it
    cannot say. nvidia-smi asks the driver (NVML): unlike torch, it creates no CUDA context, so the parent holds no GPU
    memory."""
    if shutil.which(command[0]) is None:
        return None
    try:
        return run(command, capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def parse_listing(text: str) -> list[HostGpu]:
    """nvidia-smi's lines "0, GPU-<uuid>, NVIDIA H100 80GB HBM3"; other lines (a message) are left out."""
    gpus = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",", 2)]
        if len(fields) == 3 and fields[0].isdigit() and fields[1].startswith("GPU-"):
            gpus.append(HostGpu(*fields))
    return gpus


def _listed(entry: str, listing: list[HostGpu]) -> HostGpu | None:
    """The GPU a CUDA_VISIBLE_DEVICES entry names: an index, or a UUID or a unique prefix of one (CUDA takes
    both). None for what nvidia-smi's GPU list cannot map, e.g. a MIG instance."""
    found = [g for g in listing if (g.index == entry if entry.isdigit() else g.uuid.startswith(entry))]
    return found[0] if len(found) == 1 else None


def memory_bytes(picked: tuple[str, ...], listing: str | None) -> int | None:
    """The least memory of the GPUs `picked` (CUDA_VISIBLE_DEVICES entries) in bytes, from nvidia-smi's lines
    "0, GPU-<uuid>, 81559" (`NVIDIA_SMI_MEMORY`, MiB); None where the listing cannot say for each of them."""
    if listing is None:
        return None
    rows = [HostGpu(*fields) for line in listing.splitlines()
            if len(fields := [f.strip() for f in line.split(",", 2)]) == 3 and fields[0].isdigit()
            and fields[1].startswith("GPU-") and fields[2].isdigit()]
    found = [_listed(e, rows) for e in picked]
    if not found or any(g is None for g in found):
        return None
    return min(int(g.name) for g in found if g is not None) * 2**20


def check_one_model(picked: tuple[str, ...], host: tuple[str, ...], listing: str | None,
                    device_order: str | None) -> None:
    """Refuse (UsageError) GPUs of more than one model: a run's results are keyed by the GPU model
    (asv's machine entry "gpu"). `picked` and `host` as `select` takes and returns them, `listing` nvidia-smi's
    output (`nvidia_smi`), `device_order` CUDA_DEVICE_ORDER.

    Without a listing (no nvidia-smi, e.g. a container without the driver's tools, or it failed) nothing is checked:
    the other way to read the models, torch, would create a CUDA context here, and a missing tool is no reason to
    refuse a run. GPUs the listing cannot map (a MIG instance) are left out of the check."""
    if listing is None or len(picked) < 2:
        return
    gpus = parse_listing(listing)
    if len({g.name for g in gpus}) < 2:
        return
    if any(e.isdigit() for e in picked) and device_order != "PCI_BUS_ID":
        # CUDA numbers the GPUs fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID, nvidia-smi in PCI bus order. On
        # a host of one model the two agree; on this one an index may name another model than nvidia-smi's.
        models = ", ".join(f"{g.index}: {g.name}" for g in gpus)
        raise UsageError(f"--gpus: this host's GPUs are of different models (nvidia-smi: {models}) and CUDA "
                         "numbers them fastest first, so which index is which model is unknown: set "
                         "CUDA_DEVICE_ORDER=PCI_BUS_ID (nvidia-smi's numbering) or name the GPUs by UUID in "
                         "CUDA_VISIBLE_DEVICES, and pick GPUs of one model")
    model = {e: g.name for e in host if (g := _listed(e, gpus)) is not None}
    if len({model[e] for e in picked if e in model}) < 2:
        return

    def named(e: str) -> str:  # by its --gpus index, and as CUDA_VISIBLE_DEVICES names it where that differs
        k = host.index(e)
        return f"{k}: {model[e]}" if e == str(k) else f"{k} ({e}): {model[e]}"

    of_model: dict[str, list[str]] = {}
    for k, e in enumerate(host):
        if e in model:
            of_model.setdefault(model[e], []).append(str(k))
    hint = " or ".join(f"--gpus {','.join(ks)}{',' if len(ks) == 1 else ''} ({name})" for name, ks in of_model.items())
    raise UsageError(f"--gpus picks GPUs of different models ({', '.join(named(e) for e in picked if e in model)}) "
                     f"and a run's results are keyed by one GPU model: measure one model a run, e.g. {hint}")
