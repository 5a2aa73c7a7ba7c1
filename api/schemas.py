"""Request and response models. Problem rules live in dispatcher.AttentionProblem, not here."""
from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from dispatcher.problem import DEFAULTS, LIMITS

MAX_PROBLEMS_PER_REQUEST = 1024
MAX_SWEEP_PROBLEMS = 256          # an explicit list per sweep job
MAX_PRESET_PROBLEMS = 4096        # what a preset sweep may expand to


def _range(field: str, what: str) -> str:
    lo, hi = LIMITS[field]
    return f"{what} ({lo} <= {field} <= {hi})"


class ProblemIn(BaseModel):
    """The fields of dispatcher.AttentionProblem, with its defaults; it checks the ranges (a 422 naming the field)."""
    model_config = ConfigDict(extra="forbid")
    phase: str = Field(description="decode | prefill")
    num_qo_heads: int = Field(description=_range("num_qo_heads", "query heads per GPU"))
    num_kv_heads: int = Field(description=_range("num_kv_heads", "KV heads per GPU"))
    head_dim: int = Field(DEFAULTS["head_dim"], description=_range("head_dim", "head size"))
    page_size: int = Field(DEFAULTS["page_size"], description=_range("page_size", "tokens per KV-cache page"))
    batch_size: Optional[int] = Field(None, description=_range("batch_size", "requests") + "; required unless "
                                      "seq_lens is given")
    kv_len: Optional[int] = Field(None, description=_range("kv_len", "KV tokens per request (the mean in a mixed "
                                                                     "batch), the new ones included") +
                                  "; required unless seq_lens is given")
    max_kv_len: Optional[int] = Field(None, description=_range("max_kv_len", "the longest request's KV tokens "
                                                                             "(default: kv_len, every request alike)") +
                                      "; 0 is the default too")
    kv_balance: Optional[float] = Field(None, description="a mixed batch's sum(min(length, mean)) / (batch x mean), "
                                        "0 < kv_balance <= 1 (default: one long request, the others alike)")
    seq_lens: Optional[list[int]] = Field(None, max_length=LIMITS["batch_size"][1],
                                          description="every request's KV tokens: batch_size, kv_len, max_kv_len "
                                          "and kv_balance come from them (any also given must agree)")
    q_len: Optional[int] = Field(None, description=_range("q_len", "new tokens per request") + "; default 1 in "
                                 "decode, required in prefill")
    q_dtype: str = Field(DEFAULTS["q_dtype"], description="the query's dtype as the model gives it (default: fp16 "
                         "where kv_dtype or out_dtype is fp16, else bf16); a decision's q_dtype is what its kernel "
                         "reads")
    kv_dtype: str = DEFAULTS["kv_dtype"]
    out_dtype: str = DEFAULTS["out_dtype"]
    causal: bool = DEFAULTS["causal"]
    window_left: int = Field(DEFAULTS["window_left"], description=_range("window_left", "sliding window, -1: none"))
    has_sinks: bool = DEFAULTS["has_sinks"]

    @field_validator("num_qo_heads", "num_kv_heads", "head_dim", "page_size", "batch_size", "kv_len", "max_kv_len",
                     "q_len", "window_left", mode="before")
    @classmethod
    def _not_a_flag(cls, v: Any) -> Any:
        if isinstance(v, bool):                 # JSON true is not a size (pydantic would read it as 1)
            raise ValueError(f"{str(v).lower()} is not a whole number")
        return v

    @model_validator(mode="before")
    @classmethod
    def _device_is_the_requests(cls, v: Any) -> Any:
        """A problem in a body with its own device: pydantic's "Extra inputs are not permitted" said not where."""
        if isinstance(v, dict) and "device" in v and "device" not in cls.model_fields:
            raise ValueError("'device' is not a problem's field: POST /v1/decisions takes one device for all its "
                             "problems, beside 'problems' ({\"device\": ..., \"problems\": [...]}); a sweep runs on "
                             "the daemon's own device")
        return v

    @field_validator("seq_lens", mode="before")
    @classmethod
    def _comma_separated(cls, v: Any) -> Any:
        """`seq_lens=64,64,2524` as the CLI's --seq-lens takes it, beside `seq_lens=64&seq_lens=64&...`."""
        items = [v] if isinstance(v, str) else v
        if isinstance(items, list) and any(isinstance(x, bool) for x in items):
            raise ValueError("a request's length is true or false, not a whole number")
        if isinstance(items, list) and any(isinstance(x, str) and "," in x for x in items):
            return [part.strip() for x in items for part in (x.split(",") if isinstance(x, str) else [x])]
        return items


class ProblemQuery(ProblemIn):
    device: Optional[str] = Field(None, description="auto | cpu | cuda[:N] | a device name in the database")
    explain: bool = Field(False, description="also what the decision was chosen from (slower: for reading, not "
                                             "serving)")


class ConsideredPublic(BaseModel):
    pipeline: str
    us: Optional[float] = Field(description="the time the decision ranked: measured at the problem's cell, "
                                            "predicted at its cell, or the nearest measured shape's")
    relerr: Optional[float]
    note: str = Field(description="chosen, why it was passed over, or empty")
    rule_pick: bool = Field(description="the built-in rule's pick")


class ExplanationPublic(BaseModel):
    timings: str = Field(description="where the times come from (or why the rule decides)")
    considered: list[ConsideredPublic] = Field(description="every pipeline the problem could run, fastest first")
    ineligible: dict[str, list[str]] = Field(description="each kernel that cannot serve the problem, with why")
    rule: str


class DecisionPublic(BaseModel):
    kernel: str
    q_dtype: str
    fused_out_quant: bool
    expected_us: Optional[float]
    source: str
    device: str
    reason: str
    pipeline: str
    tactic: dict[str, Any]
    q_quant: bool
    out_quant: bool
    relerr: Optional[float]


class DecisionExplainedPublic(DecisionPublic):
    explain: Optional[ExplanationPublic] = Field(None, description="with explain=true: what it was chosen from")


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
    tp: Optional[list[int]] = Field(None, max_length=8, description="tensor-parallel sizes that divide the heads")
    phases: list[str] = Field(["decode", "prefill"], max_length=2)
    kv_dtypes: list[str] = Field(["bf16", "fp8"], max_length=3)
    out_dtypes: list[str] = Field(["bf16", "fp8"], max_length=3)
    page_sizes: Optional[list[int]] = Field(None, max_length=4, description="page sizes the kernels take: 16, 32, 64, "
                                                                            "128")
    grid: Optional[str] = Field(None, description="quick | full | dense | mixed (default: full on a GPU, quick on "
                                                  "the CPU; mixed: FP8 decode's skew axis, so decode and fp8 in the "
                                                  "request)")
    tiles: bool = Field(False, description="also the sizes where kernels change pace with the daemon's GPU "
                                           "(tuner/tiles.py): decode near one wave of its SMs, prefill queries "
                                           "just past multiples of 128 rows")
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
    counts: dict[str, int]
    error: Optional[str]
    cancel_requested: bool = Field(False, description="DELETE came while it ran: it stops after its current problem")
    created_at: float
    started_at: Optional[float]
    finished_at: Optional[float]
