"""The third statistic of a mixed batch: how its KV tokens spread over the requests.

kv_balance = sum over requests of min(length, mean) / (batch x mean), in (0, 1]. One long request among
requests near the mean (the sweep's canonical layout) keeps it near 1; a few long requests among many short
ones push it down. Batch size, mean and longest alone do not tell these apart, and FlashInfer's balanced
split-KV plan costs up to twice as much in the second: its chunks must cover every short request too
(benchmarks/results/waves/balance_bias.txt). Pure arithmetic, so that AttentionProblem stays cheap to key."""
from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat

BALANCE_CELLS = 10          # decisions are cached per tenth of balance (FA2's plan cost moves ~12% a tenth)
TOLERANCE = 0.01            # a given balance this far outside the possible range is clamped, not refused
CANONICAL_WITHIN = 5e-4     # a balance this close to the canonical layout's is that layout (kv_balance 0)


def balance_of(lens: Sequence[int]) -> float:
    """The balance of requests with these KV lengths."""
    total = sum(lens)
    return sum(map(min, lens, repeat(total / len(lens)))) / total      # in C: once per serving step


def mean_of(total: int, count: int, longest: int, q_len: int = 1) -> int:
    """The mean KV length a batch of `count` requests holding `total` tokens is keyed by: rounded to the
    nearest token, or up where rounding down would leave the longest request more than that mean allows
    (every other request keeps its q_len new tokens: lengths 1, 1, 1, 2 have mean 2, not 1)."""
    nearest = max(1, int(total / count + 0.5))
    return nearest if longest <= count * nearest - (count - 1) * q_len else -(-total // count)


def canonical_balance(batch: int, mean: int, longest: int) -> float:
    """The balance of one request at `longest` and the others alike: the most a batch with these
    statistics can have (only one request holds tokens over the mean)."""
    return 1.0 - (longest - mean) / (batch * mean)


def least_balance(batch: int, mean: int, longest: int, q_len: int = 1) -> float:
    """The least balance possible: as many requests as the tokens allow at `longest`, one at what
    is left, the others at q_len (every request keeps its new tokens)."""
    total = batch * mean
    if longest <= mean or batch == 1 or longest <= q_len:
        return 1.0
    full, rest = divmod(total - batch * q_len, longest - q_len)
    full = min(full, batch)
    over = full * (longest - mean) + (max(0, q_len + rest - mean) if full < batch else 0)
    return 1.0 - over / total


def bounds(batch: int, mean: int, longest: int, q_len: int = 1) -> tuple[float, float]:
    """The least and the most kv_balance a batch of these statistics can have (the most: canonical)."""
    return least_balance(batch, mean, longest, q_len), canonical_balance(batch, mean, longest)


def within(balance: float, batch: int, mean: int, longest: int, q_len: int = 1) -> float:
    """`balance` clamped to what a batch of these statistics allows (a mean rounded to whole tokens
    moves the range a little); 0.0 for a uniform batch."""
    if longest <= mean:
        return 0.0
    lo, hi = bounds(batch, mean, longest, q_len)
    return min(max(balance, lo), hi)


def balance_cell(balance: float) -> int:
    return round(BALANCE_CELLS * balance)


def stored(balance: float, lo: float, hi: float) -> float:
    """kv_balance as a problem holds it: clamped to [lo, hi], 0.0 where that is the canonical layout's."""
    v = min(max(balance, lo), hi)
    return 0.0 if hi - v < CANONICAL_WITHIN else v


def key_cell(balance: float, lo: float, hi: float) -> int:
    """The balance cell of kv_balance `balance` (0: canonical) in a batch whose range is [lo, hi]."""
    return balance_cell(stored(balance, lo, hi) or hi) if balance else balance_cell(hi)


def cell_balance(balance: float, lo: float, hi: float) -> float:
    """The representative kv_balance of the cell `balance` lies in (key_cell): 0.0 where that cell holds the
    canonical layout's, else the cell's centre clamped to the range (in the cell, as the range is an
    interval, and never within CANONICAL_WITHIN of hi, or the cell would hold hi)."""
    k = key_cell(balance, lo, hi)
    if balance_cell(hi) == k:
        return 0.0
    return min(max(k / BALANCE_CELLS, lo), hi)


def tiered(batch: int, mean: int, longest: int, balance: float, q_len: int = 1) -> list[int]:
    """Lengths with these statistics and (to within a token's rounding) this balance: requests at
    `longest` carry the tokens over the mean the balance asks for, one request takes what is left of
    them, the others share the rest alike. The sweep's layout for a batch whose balance is given."""
    total = batch * mean
    balance = within(balance, batch, mean, longest, q_len) or 1.0
    over = (1.0 - balance) * total                  # tokens over the mean, in requests above it
    full = max(1, min(batch - 1, int(over // (longest - mean)))) if longest > mean else 1
    part = mean + int(round(over - full * (longest - mean)))
    part = min(max(part, q_len), longest)
    lens = [longest] * full + ([part] if full < batch - 1 else [])
    rest = batch - len(lens)
    left = total - sum(lens)
    if rest == 0:
        lens[-1] += left
        return lens
    base, extra = divmod(left, rest)
    if base < q_len:                                # too little left: take it from the partial request
        need = (q_len - base) * rest - extra
        lens[-1] -= need
        base, extra = q_len, 0
    return lens + [base + 1] * extra + [base] * (rest - extra)
