"""What a measurement ran on: GPU, driver, CUDA, torch, triton, CPU model, hostname."""

from __future__ import annotations

import importlib.util
import os
import platform
import re
import shutil
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path


@dataclass(frozen=True)
class HostInfo:
    device: str  # "cuda" or "cpu"
    gpu: str  # GPU name, or "cpu" where there is none
    driver: str
    cuda: str
    torch: str
    triton: str
    cpu: str
    hostname: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _nvidia_driver() -> str:
    """The kernel module's version from /proc, else nvidia-smi's: every measurement's process asks, and reading a file
    spares each one a subprocess on the cores its neighbours compile on."""
    try:
        with open("/proc/driver/nvidia/version") as f:
            words = f.readline().split()  # NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Wed ...
        return next(w for w in words if w[:1].isdigit() and "." in w)
    except (OSError, StopIteration):
        pass
    if shutil.which("nvidia-smi") is None:
        return "unknown"
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.strip().splitlines()[0] if out.strip() else "unknown"


def triton_version() -> str:
    try:
        import triton
    except ImportError:
        return "none"
    return triton.__version__


def busy_warning(cores: int | None = None, load: float | None = None) -> str | None:
    """A warning when the host is busier than its `cores` (default: those this process may run on): a load average
    over the last minute above their number means CPU timings wait for cores, slower and noisier; None otherwise
    or where the load cannot be read."""
    if load is None:
        try:
            load = os.getloadavg()[0]
        except OSError:
            return None
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if load <= cores:
        return None
    return (f"this host is busier than its cores (load average {load:.1f} over the last minute, {cores} "
            f"core{'s' if cores != 1 else ''}): CPU timings will be slower and noisier than on an idle host")


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def torch_version_files() -> Iterator[str]:
    """The text of the installed torch's version.py (torch.version), read without importing torch; none where it
    cannot be read."""
    try:
        spec = importlib.util.find_spec("torch")
        for folder in (spec.submodule_search_locations or []) if spec else []:
            yield (Path(folder) / "version.py").read_text(encoding="utf-8")
    except (OSError, ImportError, ValueError):
        return


def cuda_build() -> bool:
    """Whether the installed torch is built for CUDA (`torch.version.cuda`), without importing torch."""
    return any(re.search(r"^cuda\b[^=]*=\s*['\"]", text, re.M) for text in torch_version_files())


@cache
def host_info(device: str | None = None) -> HostInfo:
    """The live environment. `device` None picks cuda when available."""
    import torch

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    on_gpu = device == "cuda"
    return HostInfo(
        device=device,
        gpu=torch.cuda.get_device_name() if on_gpu else "cpu",
        driver=_nvidia_driver() if on_gpu else "none",
        cuda=(torch.version.cuda or "none") if on_gpu else "none",
        torch=torch.__version__,
        triton=triton_version(),
        cpu=_cpu_model(),
        hostname=socket.gethostname(),
    )
