"""What a sweep on the daemon may measure: the same bounds for a token-holder's POST /v1/sweeps and
for the misses the daemon tunes on its own (api/jobs.py)."""
from __future__ import annotations

from dispatcher import AttentionProblem
from dispatcher.device import DeviceInfo
from tuner.sizes import working_bytes


def max_sweep_bytes(device: DeviceInfo) -> int:
    """The largest problem a sweep may allocate: a quarter of the device's memory, 2 GiB on the CPU."""
    return device.memory_bytes // 4 if device.kind == "cuda" else 2 * 2**30


def gpu_memory_for(p: AttentionProblem) -> int:
    """The least GPU memory on which a sweep may measure `p` (max_sweep_bytes the other way round)."""
    return 4 * working_bytes(p)


def too_big(p: AttentionProblem, device: DeviceInfo) -> str | None:
    """Why `p` may not be swept on `device` (its size), or None."""
    limit = max_sweep_bytes(device)
    need = working_bytes(p)
    if need <= limit:
        return None
    shown, most = f"~{need / 2**30:.2f} GiB", f"{limit / 2**30:.2f} GiB"
    if shown[1:] == most:                       # just over: "2.00 GiB ... at most 2.00 GiB" reads as if it fits
        shown, most = f"{need:,} bytes", f"{limit:,} bytes ({most})"
    return f"needs {shown}; a sweep may allocate at most {most} per problem on {device.name}"
