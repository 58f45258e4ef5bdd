"""The GPUs of a host that one run measures on (`run --gpus`), and which of them each measurement gets.

Every GPU has its own lock and its own two timing cores (tracker.runner.pool.RunConfig), so measurements on
different GPUs never wait for each other; the compile workers are shared by all of them. A measurement starts on the
GPU with the least expected work in flight, so the heavy cells spread over the GPUs instead of queueing on one.
"""

from __future__ import annotations

import os
import threading


def visible() -> tuple[str, ...]:
    """This host's GPUs as CUDA_VISIBLE_DEVICES names them (indices or UUIDs): its own list when set, else every
    device the driver reports (counted without creating a CUDA context)."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return tuple(x.strip() for x in listed.split(",") if x.strip())
    import torch

    return tuple(str(i) for i in range(torch.cuda.device_count()))


def select(spec: str | None, gpus: tuple[str, ...]) -> tuple[str, ...]:
    """`--gpus`: "all" (the default), N (the first N) or a list of indices into `gpus` ("0,2,5"; one index: "3,").
    A spec this host cannot meet is a ValueError (a usage error: exit 2)."""
    if not gpus:
        raise ValueError("--gpus: this host has no CUDA device")
    if spec is None or spec == "all":
        return gpus
    if spec.isdigit():
        n = int(spec)
        if not 1 <= n <= len(gpus):
            raise ValueError(f"--gpus {spec}: this host has {len(gpus)} GPUs")
        return gpus[:n]
    try:
        picked = [int(x) for x in spec.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--gpus takes all, a count or a list of indices such as 0,2,5, not {spec!r}") from None
    if not picked or len(set(picked)) != len(picked) or not all(0 <= i < len(gpus) for i in picked):
        raise ValueError(f"--gpus {spec}: indices 0 to {len(gpus) - 1}, each once")
    return tuple(gpus[i] for i in picked)


class GpuSlots:
    """Which GPU (its position in the run's list) a measurement gets: the least expected work in flight, ties to
    the first."""

    def __init__(self, count: int) -> None:
        self._load = [0.0] * count
        self._lock = threading.Lock()

    def acquire(self, cost: float) -> int:
        with self._lock:
            slot = min(range(len(self._load)), key=lambda k: (self._load[k], k))
            self._load[slot] += cost
            return slot

    def release(self, slot: int, cost: float) -> None:
        with self._lock:
            self._load[slot] -= cost
