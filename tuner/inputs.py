"""Inputs of one problem as a serving engine holds them (paged KV cache, page table) and the fp32
reference output on the same (dequantized) inputs. Never all zeros: random normal values."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch

from dispatcher.problem import AttentionProblem

from .lengths import lengths

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
    page_table: torch.Tensor     # [batch, pages of the longest request] int32, pages shuffled, 0-padded
    seq_lens: torch.Tensor       # [batch] int32, each request's KV length
    kv_indptr: torch.Tensor      # [batch+1] int32, into kv_indices
    kv_indices: torch.Tensor     # each request's pages, one after another
    last_page_len: torch.Tensor  # [batch] int32
    qo_indptr: torch.Tensor      # [batch+1] int32
    ref: torch.Tensor            # fp32 reference rows, see check_rows()
    o_scale: float               # static scale for FP8 output
    lens: tuple[int, ...] = ()   # the requests' KV lengths (tuner/lengths.py), as the tensors hold them

    @property
    def sm_scale(self) -> float:
        return 1.0 / math.sqrt(self.problem.head_dim)

    def checked_requests(self) -> list[int]:
        """The requests compared with the reference: the longest and the shortest (in a uniform
        batch, the first two)."""
        if len(set(self.lens)) == 1:
            return list(range(min(len(self.lens), CHECK_REQUESTS)))
        order = range(len(self.lens))
        return sorted({max(order, key=self.lens.__getitem__), min(order, key=self.lens.__getitem__)})

    def check_rows(self) -> torch.Tensor:
        """Indices (into the flattened [batch*q_len] output) compared with the reference."""
        p = self.problem
        n = min(p.q_len, CHECK_QUERIES)
        rows = [b * p.q_len + i for b in self.checked_requests() for i in range(p.q_len - n, p.q_len)]
        return torch.tensor(rows, dtype=torch.long)


def _kv_values(shape, dtype: str, device: str, gen: torch.Generator) -> tuple[torch.Tensor, float]:
    x = torch.randn(shape, device=device, dtype=torch.bfloat16, generator=gen)
    if dtype != "fp8":
        return x.to(TORCH_DTYPES[dtype]), 1.0
    scale = float(x.abs().amax()) / FP8_MAX * 1.05      # per-tensor static scale, as vLLM's k/v_scale
    return (x.float() / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), scale


def make_inputs(p: AttentionProblem, device: str = "cpu", seed: int = 0) -> PagedInputs:
    """A paged batch of p's requests: at p.seq_lens where it has them, else laid out by the canonical
    distribution of its batch size, mean and longest request (tuner/lengths.py)."""
    lens = list(p.seq_lens or lengths(p))
    gen = torch.Generator(device=device).manual_seed(seed)
    pages = [math.ceil(n / p.page_size) for n in lens]
    num_pages = sum(pages)
    kv, scale = _kv_values((num_pages, 2, p.num_kv_heads, p.page_size, p.head_dim), p.kv_dtype, device, gen)
    perm = torch.randperm(num_pages, device="cpu", generator=torch.Generator().manual_seed(seed)).to(torch.int32)
    indptr = [0]
    for n in pages:
        indptr.append(indptr[-1] + n)
    table = torch.zeros((p.batch_size, max(pages)), dtype=torch.int32)
    for b, n in enumerate(pages):
        table[b, :n] = perm[indptr[b]:indptr[b + 1]]
    i32 = dict(dtype=torch.int32, device=device)
    q = torch.randn((p.batch_size * p.q_len, p.num_qo_heads, p.head_dim), device=device,
                    dtype=TORCH_DTYPES[p.q_dtype if p.q_dtype != "fp8" else "bf16"], generator=gen)
    x = PagedInputs(
        problem=p, device=device, q=q, q_scale=float(q.abs().amax()) / FP8_MAX * 1.05, kv_cache=kv,
        k_scale=scale, v_scale=scale, page_table=table.to(device), seq_lens=torch.tensor(lens, **i32),
        kv_indptr=torch.tensor(indptr, **i32), kv_indices=perm.to(device),
        last_page_len=torch.tensor([(n - 1) % p.page_size + 1 for n in lens], **i32),
        qo_indptr=torch.arange(p.batch_size + 1, **i32) * p.q_len, ref=torch.empty(0), o_scale=1.0,
        lens=tuple(lens))
    x.ref = reference(x)
    x.o_scale = max(float(x.ref.abs().amax()) * 1.25 / FP8_MAX, 1e-8)
    return x


def rotated(x: PagedInputs, copies: int) -> list[PagedInputs]:
    """`x` and copies of it with their own KV cache (same values), to rotate through when timing."""
    return [x] + [dataclasses.replace(x, kv_cache=x.kv_cache.clone()) for _ in range(copies - 1)]


def allowed_keys(p: AttentionProblem, q_positions: torch.Tensor, device, kv_len: int | None = None) -> torch.Tensor:
    """[n_q, kv_len] bool: causal with the new tokens at the end, and the sliding window; `kv_len`:
    the request's own length (default: the problem's mean, which is every request's in a uniform batch)."""
    n = kv_len or p.kv_len
    keys = torch.arange(n, device=device)
    m = torch.ones((len(q_positions), n), dtype=torch.bool, device=device)
    if p.causal:
        m &= keys[None, :] <= q_positions[:, None]
    if p.window_left >= 0:
        m &= keys[None, :] >= q_positions[:, None] - p.window_left
    return m


def gather_request(x: PagedInputs, b: int, which: int) -> torch.Tensor:
    """K (which=0) or V (1) of request b as fp32 [kv_heads, its KV length, head_dim], dequantized."""
    p, n = x.problem, x.lens[b]
    pages = x.kv_cache[x.page_table[b, : math.ceil(n / p.page_size)].long(), which].float()   # [P, Hkv, page, D]
    t = pages.permute(1, 0, 2, 3).reshape(p.num_kv_heads, -1, p.head_dim)[:, :n]
    return t * (x.k_scale if which == 0 else x.v_scale)


def reference(x: PagedInputs) -> torch.Tensor:
    """fp32 attention for the rows of check_rows(), computed per request over its own KV length."""
    p = x.problem
    rows = x.check_rows().view(-1, min(p.q_len, CHECK_QUERIES))
    out = []
    for b, r in zip(x.checked_requests(), rows):
        k = gather_request(x, b, 0).repeat_interleave(p.group_size, 0)
        v = gather_request(x, b, 1).repeat_interleave(p.group_size, 0)
        q = x.q[r.to(x.q.device)].float().transpose(0, 1)             # [H, n, D]
        pos = (r - b * p.q_len + x.lens[b] - p.q_len).to(q.device)
        s = (q @ k.transpose(1, 2)) * x.sm_scale
        s = s.masked_fill(~allowed_keys(p, pos, q.device, x.lens[b])[None], float("-inf"))
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
