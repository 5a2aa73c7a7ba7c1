"""The requests' KV lengths of a measured batch with a given batch size, mean and longest request.

The sweep lays out every batch by `one_long`, the canonical distribution: one request at max_kv_len
and the others as equal as the mean allows (the "one long request among short ones" of continuous
batching, where the kernels' rankings differ most from a uniform batch). `spread` is a second
distribution with the same batch size, mean and longest (lengths evenly spaced down from the longest), to
check whether those statistics, not the layout, decide the ranking. Both keep the sum exactly batch x mean. A batch
whose kv_balance is given (dispatcher/balance.py) is laid out by `balanced`, to that balance."""
from __future__ import annotations

from dispatcher.balance import tiered
from dispatcher.problem import AttentionProblem


def one_long(p: AttentionProblem) -> list[int]:
    """max_kv_len for the first request; the rest share what is left, one token apart at most."""
    b, total, top = p.batch_size, p.batch_size * p.kv_len, p.max_kv_len
    if b == 1:
        return [top]
    base, extra = divmod(total - top, b - 1)
    return [top] + [base + 1] * extra + [base] * (b - 1 - extra)


def spread(p: AttentionProblem) -> list[int]:
    """Lengths evenly spaced down from max_kv_len (none under q_len) by the step that makes the sum
    batch x mean: a second layout with the canonical one's statistics."""
    b, total, top, floor = p.batch_size, p.batch_size * p.kv_len, p.max_kv_len, p.q_len
    if b == 1:
        return [top]

    def ramp(step: float) -> list[int]:
        return [top] + [max(floor, int(top - step * i)) for i in range(1, b)]
    lo, hi = 0.0, float(top)              # sum(ramp) falls as the step grows: bisect for the total
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if sum(ramp(mid)) > total else (lo, mid)
    lens = ramp(hi)
    short = total - sum(lens)             # what integer rounding left: one token each, longest first
    for i in range(1, b):
        if short <= 0:
            break
        take = min(short, top - lens[i])
        lens[i] += take
        short -= take
    return lens


LAYOUTS = {"one-long": one_long, "spread": spread}


def balanced(p: AttentionProblem) -> list[int]:
    """Lengths with p's three statistics and its kv_balance (to within a token's rounding): requests at
    the longest carry the tokens over the mean that the balance asks for (dispatcher/balance.py)."""
    if not p.kv_balance:
        return one_long(p)
    return tiered(p.batch_size, p.kv_len, p.max_kv_len, p.kv_balance, p.q_len)


def lengths(p: AttentionProblem, layout: str = "balanced") -> list[int]:
    """The requests' KV lengths of `p` laid out by `layout` (balanced: by p's kv_balance, the canonical
    layout where that is 0)."""
    if layout == "balanced":
        out = balanced(p)
    elif layout not in LAYOUTS:
        raise ValueError(f"length layout {layout!r} is not one of balanced, {', '.join(LAYOUTS)}")
    else:
        out = LAYOUTS[layout](p)
    assert len(out) == p.batch_size and sum(out) == p.batch_size * p.kv_len and max(out) == p.max_kv_len
    return out
