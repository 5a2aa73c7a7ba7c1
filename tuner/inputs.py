"""Inputs of one problem as a serving engine holds them (paged KV cache, page table) and the fp32
reference output on the same (dequantized) inputs. Never all zeros: random normal values."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch

from dispatcher.problem import AttentionProblem

TORCH_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp8": torch.float8_e4m3fn}
FP8_MAX = 448.0
CHECK_REQUESTS = 2        # requests compared with the reference
CHECK_QUERIES = 256       # of those, the last query rows (they see the most keys)


@dataclass
class PagedInputs:
    problem: AttentionProblem
    device: str
    q: torch.Tensor              # [batch*q_len, qo_heads, head_dim], model dtype
    q_scale: float               # static scale for an FP8 query
    kv_cache: torch.Tensor       # [pages, 2, kv_heads, page_size, head_dim] (HND), kv dtype
    k_scale: float
    v_scale: float
    page_table: torch.Tensor     # [batch, pages_per_request] int32, pages shuffled
    seq_lens: torch.Tensor       # [batch] int32
    kv_indptr: torch.Tensor      # [batch+1] int32, into kv_indices
    kv_indices: torch.Tensor     # flattened page table
    last_page_len: torch.Tensor  # [batch] int32
    qo_indptr: torch.Tensor      # [batch+1] int32
    ref: torch.Tensor            # fp32 reference rows, see check_rows()
    o_scale: float               # static scale for FP8 output

    @property
    def sm_scale(self) -> float:
        return 1.0 / math.sqrt(self.problem.head_dim)

    def check_rows(self) -> torch.Tensor:
        """Indices (into the flattened [batch*q_len] output) compared with the reference."""
        p = self.problem
        n = min(p.q_len, CHECK_QUERIES)
        rows = [b * p.q_len + i for b in range(min(p.batch_size, CHECK_REQUESTS)) for i in range(p.q_len - n, p.q_len)]
        return torch.tensor(rows, dtype=torch.long)


def _kv_values(shape, dtype: str, device: str, gen: torch.Generator) -> tuple[torch.Tensor, float]:
    x = torch.randn(shape, device=device, dtype=torch.bfloat16, generator=gen)
    if dtype != "fp8":
        return x.to(TORCH_DTYPES[dtype]), 1.0
    scale = float(x.abs().amax()) / FP8_MAX * 1.05      # per-tensor static scale, as vLLM's k/v_scale
    return (x.float() / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), scale


def make_inputs(p: AttentionProblem, device: str = "cpu", seed: int = 0) -> PagedInputs:
    gen = torch.Generator(device=device).manual_seed(seed)
    pages_per = math.ceil(p.kv_len / p.page_size)
    num_pages = p.batch_size * pages_per
    kv, scale = _kv_values((num_pages, 2, p.num_kv_heads, p.page_size, p.head_dim), p.kv_dtype, device, gen)
    k_scale = v_scale = scale
    perm = torch.randperm(num_pages, device="cpu", generator=torch.Generator().manual_seed(seed))
    table = perm.view(p.batch_size, pages_per).to(torch.int32).to(device)
    i32 = dict(dtype=torch.int32, device=device)
    q = torch.randn((p.batch_size * p.q_len, p.num_qo_heads, p.head_dim), device=device,
                    dtype=TORCH_DTYPES[p.q_dtype if p.q_dtype != "fp8" else "bf16"], generator=gen)
    x = PagedInputs(
        problem=p, device=device, q=q, q_scale=float(q.abs().amax()) / FP8_MAX * 1.05, kv_cache=kv,
        k_scale=k_scale, v_scale=v_scale, page_table=table, seq_lens=torch.full((p.batch_size,), p.kv_len, **i32),
        kv_indptr=torch.arange(p.batch_size + 1, **i32) * pages_per, kv_indices=table.flatten().contiguous(),
        last_page_len=torch.full((p.batch_size,), (p.kv_len - 1) % p.page_size + 1, **i32),
        qo_indptr=torch.arange(p.batch_size + 1, **i32) * p.q_len, ref=torch.empty(0), o_scale=1.0)
    x.ref = reference(x)
    x.o_scale = max(float(x.ref.abs().amax()) * 1.25 / FP8_MAX, 1e-8)
    return x


def rotated(x: PagedInputs, copies: int) -> list[PagedInputs]:
    """`x` and copies of it with their own KV cache (same values), to rotate through when timing."""
    return [x] + [dataclasses.replace(x, kv_cache=x.kv_cache.clone()) for _ in range(copies - 1)]


def allowed_keys(p: AttentionProblem, q_positions: torch.Tensor, device) -> torch.Tensor:
    """[n_q, kv_len] bool: causal with the new tokens at the end, and the sliding window."""
    keys = torch.arange(p.kv_len, device=device)
    m = torch.ones((len(q_positions), p.kv_len), dtype=torch.bool, device=device)
    if p.causal:
        m &= keys[None, :] <= q_positions[:, None]
    if p.window_left >= 0:
        m &= keys[None, :] >= q_positions[:, None] - p.window_left
    return m


def gather_request(x: PagedInputs, b: int, which: int) -> torch.Tensor:
    """K (which=0) or V (1) of request b as fp32 [kv_heads, kv_len, head_dim], dequantized."""
    p = x.problem
    pages = x.kv_cache[x.page_table[b].long(), which].float()       # [P, Hkv, page, D]
    t = pages.permute(1, 0, 2, 3).reshape(p.num_kv_heads, -1, p.head_dim)[:, : p.kv_len]
    return t * (x.k_scale if which == 0 else x.v_scale)


def reference(x: PagedInputs) -> torch.Tensor:
    """fp32 attention for the rows of check_rows(), computed per request."""
    p = x.problem
    rows = x.check_rows().view(-1, min(p.q_len, CHECK_QUERIES))
    out = []
    for b, r in enumerate(rows):
        k = gather_request(x, b, 0).repeat_interleave(p.group_size, 0)
        v = gather_request(x, b, 1).repeat_interleave(p.group_size, 0)
        q = x.q[r.to(x.q.device)].float().transpose(0, 1)             # [H, n, D]
        pos = (r - b * p.q_len + p.kv_len - p.q_len).to(q.device)
        s = (q @ k.transpose(1, 2)) * x.sm_scale
        s = s.masked_fill(~allowed_keys(p, pos, q.device)[None], float("-inf"))
        out.append((s.softmax(-1) @ v).transpose(0, 1))                # [n, H, D]
    return torch.cat(out)


def relative_error(out: torch.Tensor, x: PagedInputs, fp8_out: bool) -> float:
    got = out[x.check_rows().to(out.device)].float()
    if fp8_out:
        got = got * x.o_scale
    ref = x.ref.to(got.device)
    if not torch.isfinite(got).all():
        return float("inf")
    return float((got - ref).norm() / ref.norm())
