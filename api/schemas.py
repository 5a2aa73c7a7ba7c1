"""Request and response models. Problem rules live in dispatcher.AttentionProblem, not here."""
from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, ConfigDict, Field

MAX_PROBLEMS_PER_REQUEST = 1024


class ProblemIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    phase: str = Field(description="decode | prefill")
    num_qo_heads: int
    num_kv_heads: int
    head_dim: int
    page_size: int
    batch_size: int
    kv_len: int
    q_len: int = 1
    q_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    out_dtype: str = "bf16"
    causal: bool = True
    window_left: int = -1
    has_sinks: bool = False


class ProblemQuery(ProblemIn):
    device: Optional[str] = Field(None, description="auto | cpu | cuda[:N] | a device name in the database")


class DecisionPublic(BaseModel):
    kernel: str
    q_dtype: str
    fused_out_quant: bool
    expected_us: Optional[float]
    source: str
    device: str
    reason: str
    pipeline: str
    tactic: dict
    q_quant: bool
    out_quant: bool
    relerr: Optional[float]


class DecisionsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    problems: list[ProblemIn] = Field(max_length=MAX_PROBLEMS_PER_REQUEST)
    device: Optional[str] = None


class DecisionsPublic(BaseModel):
    decisions: list[DecisionPublic]
    count: int
