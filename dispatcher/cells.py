"""Cells: the lattice decisions are made, cached and counted on, and the sizes that stand for them."""
from __future__ import annotations

import math

# Decisions are made, cached and counted per cell: the batch size exactly (kernels re-split their work
# at batch sizes that are not powers of two), q_len and kv_len to 1/CELLS_PER_OCTAVE of an octave
# (within +-4.4%, where kernel times change smoothly). A shape counts as measured when a measurement
# lies in its cell; any other shape is predicted at its cell's representative sizes.
CELLS_PER_OCTAVE = 8


def size_cell(n: int) -> int:
    """The cell of a size: round(CELLS_PER_OCTAVE * log2(n))."""
    return round(CELLS_PER_OCTAVE * math.log2(n))


def cell_size(k: int) -> int:
    """The representative size of cell k (a size in that cell, the nearest integer to its centre)."""
    return round(2 ** (k / CELLS_PER_OCTAVE))


# Prefill kernels (FA3, FMHAv2, cuDNN) run a query in tiles of Q_TILE rows: one just past a multiple of
# Q_TILE pays for a nearly empty tile (benchmarks/results/prefill-tiles/), so no cell straddles one.
Q_TILE = 128


def q_tiles(q_len: int) -> int:
    return -(-q_len // Q_TILE)


def q_cell(q_len: int) -> tuple[int, int]:
    """What identifies a q_len's cell: its eighth of an octave and its query tiles."""
    return size_cell(q_len), q_tiles(q_len)


def snap(n: int) -> int:
    """The representative size of n's eighth of an octave (AttentionProblem.cell then keeps a q_len
    within its query tile); sizes up to 13 are their own."""
    return cell_size(size_cell(n))


def snap_below(n: int) -> int:
    """The largest representative size (snap's) at most n: a clamped size stays a representative, so
    that a cell's representative is its own."""
    k = size_cell(n)
    return cell_size(k) if cell_size(k) <= n else cell_size(k - 1)


def longest_request(batch_size: int, mean: int, q_len: int) -> int:
    """The longest a request of a batch with this mean KV length can be: every other one keeps its
    q_len new tokens."""
    return batch_size * mean - (batch_size - 1) * q_len
