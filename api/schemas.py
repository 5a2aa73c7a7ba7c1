"""Request and response models. Problem rules live in dispatcher.AttentionProblem, not here."""
from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, ConfigDict, Field

MAX_PROBLEMS_PER_REQUEST = 1024
MAX_SWEEP_PROBLEMS = 256          # an explicit list per sweep job
MAX_PRESET_PROBLEMS = 4096        # what a preset sweep may expand to


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


class SweepCreate(BaseModel):
    """A preset model with options, or an explicit list of problems. The database is the daemon's own:
    no request can name a path on the host."""
    model_config = ConfigDict(extra="forbid")
    model: Optional[str] = Field(None, description="a preset: llama4-scout, llama-3.1-8b, ...")
    tp: Optional[list[int]] = None
    phases: list[str] = ["decode", "prefill"]
    kv_dtypes: list[str] = ["bf16", "fp8"]
    out_dtypes: list[str] = ["bf16", "fp8"]
    page_sizes: Optional[list[int]] = None
    grid: Optional[str] = Field(None, description="quick | full (default: full on a GPU, quick on the CPU)")
    problems: Optional[list[ProblemIn]] = Field(None, max_length=MAX_SWEEP_PROBLEMS)


class SweepPublic(BaseModel):
    id: str
    kind: str
    state: str
    total: int
    done: int
    progress: float
    eta_s: Optional[float]
    measured: int
    counts: dict
    error: Optional[str]
    created_at: float
    started_at: Optional[float]
    finished_at: Optional[float]
