"""How much memory a problem's inputs take, without torch (the CLI and REST check sizes before any
tensor exists)."""
from __future__ import annotations

import math

from dispatcher.problem import AttentionProblem

from .lengths import lengths

L2_BYTES = 60 * 2**20     # H100/H200 L2 (the rotation target below is a multiple of it)


def kv_bytes(p: AttentionProblem) -> int:
    """The paged KV cache of the whole batch, as make_inputs lays it out (each request its own pages)."""
    pages = sum(math.ceil(n / p.page_size) for n in (p.seq_lens or lengths(p)))
    elem = 1 if p.kv_dtype == "fp8" else 2
    return pages * 2 * p.num_kv_heads * p.page_size * p.head_dim * elem


def working_bytes(p: AttentionProblem) -> int:
    """What one problem's inputs, outputs and a gathered KV copy may take, as a fit check."""
    q = p.batch_size * p.q_len * p.num_qo_heads * p.head_dim * 2
    return 2 * kv_bytes(p) + 4 * q


def rotation_copies(kv_bytes: int) -> int:
    """How many copies of the KV cache to rotate through so that a call cannot hit in L2 what the
    previous call left there (every layer of a real model reads its own cache): enough copies to
    span two L2s (at most 8), for problems whose cache is smaller than that. Larger caches stream anyway."""
    if kv_bytes >= 2 * L2_BYTES:
        return 1
    return min(8, math.ceil(2 * L2_BYTES / max(kv_bytes, 1)))
