"""What the dispatcher answers."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

Source = Literal["measured", "nearest", "learned", "rule"]


@dataclass(frozen=True, slots=True)
class Decision:
    kernel: str
    q_dtype: str                 # the dtype the kernel takes the query in; differs from the model's: quantize q
    fused_out_quant: bool        # the kernel writes FP8 itself: enable fused FP8-out attention
    expected_us: float | None    # measured (or predicted) pipeline time; None from a rule
    source: Source
    device: str
    reason: str
    pipeline: str = ""
    tactic: tuple[tuple[str, Any], ...] = ()
    q_quant: bool = False
    out_quant: bool = False      # a separate FP8 quant op follows the kernel
    relerr: float | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["tactic"] = dict(self.tactic)
        return d
