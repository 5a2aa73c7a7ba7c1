"""A local plane: log(value) as locally linear in a shape's features (log2 sizes and the hardware
terms of dispatcher/predictor.py), a weighted least-squares plane through the K nearest measured
points (ridge-regularised, so a feature that does not vary, such as q_len in decode, costs nothing).
Attention time is close to linear in tokens x KV length at large sizes and flat at small ones, which
such local planes follow. Pure Python: it runs once per decided cell, never on the hot path."""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Prediction:
    us: float
    rel_error: float   # the local fit's residual (relative), used as the prediction's noise
    support: int       # measured points used


def _solve(a: list[list[float]], b: list[float]) -> list[float] | None:
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        piv = max(range(c, n), key=lambda r: abs(m[r][c]))
        if abs(m[piv][c]) < 1e-12:
            return None
        m[c], m[piv] = m[piv], m[c]
        for r in range(n):
            if r != c:
                f = m[r][c] / m[c][c]
                for k in range(c, n + 1):
                    m[r][k] -= f * m[c][k]
    return [m[i][n] / m[i][i] for i in range(n)]


def fit_plane(points: list[tuple[tuple[float, ...], float]], at: tuple[float, ...], k_nearest: int = 6,
              ridge: float = 1e-3, monotone: bool | tuple[bool, ...] = True) -> Prediction | None:
    """points: (features, value) measured; at: the features to predict at. `monotone`: the value
    never falls as these features grow (a time as sizes grow; not a ratio between two times), for
    all features or per feature."""
    if not points:
        return None
    near = sorted(points, key=lambda p: math.dist(p[0], at))[:k_nearest]
    if len(near) < 3:
        x, t = near[0]
        return Prediction(t, 0.25, len(near))
    dim = len(at)
    ata = [[0.0] * (dim + 1) for _ in range(dim + 1)]
    aty = [0.0] * (dim + 1)
    rows = []
    for x, t in near:
        d = math.dist(x, at)
        w = 1.0 / (0.25 + d * d)
        row = [1.0] + [xi - ai for xi, ai in zip(x, at)]
        y = math.log(t)
        rows.append((row, y, w))
        for i in range(dim + 1):
            aty[i] += w * row[i] * y
            for j in range(dim + 1):
                ata[i][j] += w * row[i] * row[j]
    for i in range(1, dim + 1):
        ata[i][i] += ridge
    beta = _solve(ata, aty)
    if beta is None:
        return None
    rising = monotone if isinstance(monotone, tuple) else (monotone,) * dim
    if any(r and b < 0 for r, b in zip(rising, beta[1:])):
        # more work never takes less time: a falling slope is noise, so flatten it and refit the level
        beta[1:] = [max(b, 0.0) if r else b for r, b in zip(rising, beta[1:])]
        wsum = sum(w for _, _, w in rows)
        beta[0] = sum(w * (y - sum(b * r for b, r in zip(beta[1:], row[1:]))) for row, y, w in rows) / wsum
    resid = [y - sum(b * r for b, r in zip(beta, row)) for row, y, _ in rows]
    rel = math.sqrt(sum(e * e for e in resid) / len(resid))
    return Prediction(math.exp(beta[0]), max(rel, 0.01), len(near))
