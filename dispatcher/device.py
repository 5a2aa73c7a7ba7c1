"""What the host device is. Light: torch is imported only when a local device is described."""
from __future__ import annotations

import platform
from dataclasses import dataclass, field


@dataclass(frozen=True)
class DeviceInfo:
    name: str                       # "NVIDIA H200", or "CPU (model name)"
    kind: str                       # "cuda" | "cpu"
    compute_capability: tuple[int, int] | None = None
    sm_count: int = 0
    memory_bytes: int = 0
    versions: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    index: int = 0

    @property
    def sm(self) -> int:
        """Compute capability as one number (90 for SM90); 0 on the CPU."""
        cc = self.compute_capability
        return cc[0] * 10 + cc[1] if cc else 0

    @property
    def torch_device(self) -> str:
        return f"cuda:{self.index}" if self.kind == "cuda" else "cpu"


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return f"CPU ({line.split(':', 1)[1].strip()})"
    except OSError:
        pass
    return f"CPU ({platform.processor() or platform.machine()})"


def _versions() -> dict[str, str]:
    import torch
    v = {"torch": torch.__version__, "cuda": torch.version.cuda or "", "python": platform.python_version()}
    try:
        import flashinfer  # optional extra
        v["flashinfer"] = flashinfer.__version__
    except Exception:  # noqa: BLE001 (absent or broken: both mean "no flashinfer")
        v["flashinfer"] = ""
    return v


def folded(name: str) -> str:
    """A device name as matched: "nvidia  h200" is NVIDIA H200 (case and spacing are not part of it)."""
    return " ".join(str(name).split()).casefold()


def describe(device: str | None = "auto") -> DeviceInfo:
    """Describe a local device: "auto" (a GPU when present, else the CPU), "cpu", "cuda" or "cuda:N"."""
    spec = (device or "auto").lower()
    if spec not in ("auto", "cpu") and not spec.startswith("cuda"):
        raise ValueError(f"device {device!r} is not a local device; use auto, cpu, cuda or cuda:N")
    import torch
    if spec == "auto":
        spec = "cuda" if torch.cuda.is_available() else "cpu"
    if spec == "cpu":
        return DeviceInfo(name=cpu_name(), kind="cpu", versions=_versions())
    if not torch.cuda.is_available():
        raise ValueError(f"device {device!r} asked for, but this host has no CUDA device; ask for cpu (or auto)")
    index = int(spec.split(":", 1)[1]) if ":" in spec else 0
    if index >= torch.cuda.device_count():
        raise ValueError(f"device {device!r} does not exist; this host has {torch.cuda.device_count()} CUDA device(s)")
    p = torch.cuda.get_device_properties(index)
    v = _versions()
    try:
        v["driver"] = str(torch.cuda.driver_version()) if hasattr(torch.cuda, "driver_version") else ""
    except Exception:  # noqa: BLE001
        v["driver"] = ""
    return DeviceInfo(name=p.name, kind="cuda", compute_capability=(p.major, p.minor),
                      sm_count=p.multi_processor_count, memory_bytes=p.total_memory, versions=v, index=index)


def named(name: str, compute_capability: tuple[int, int] | None = None, sm_count: int = 0) -> DeviceInfo:
    """A device known only by its recorded description (for decisions about a GPU not on this host)."""
    kind = "cpu" if name.startswith("CPU") else "cuda"
    return DeviceInfo(name=name, kind=kind, compute_capability=compute_capability, sm_count=sm_count)


# Well-known descriptions, for tests and for asking about GPUs one does not have (memory as torch reports it
# on the GPUs measured in benchmarks/results/; the B200's was never measured here).
H200 = DeviceInfo(name="NVIDIA H200", kind="cuda", compute_capability=(9, 0), sm_count=132,
                  memory_bytes=150109880320)
H100 = DeviceInfo(name="NVIDIA H100 80GB HBM3", kind="cuda", compute_capability=(9, 0), sm_count=132,
                  memory_bytes=85017493504)
B200 = DeviceInfo(name="NVIDIA B200", kind="cuda", compute_capability=(10, 0), sm_count=148)
KNOWN = {d.name: d for d in (H200, H100, B200)}
