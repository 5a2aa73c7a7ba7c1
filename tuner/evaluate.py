"""Held-out evaluation: fit the table on most measured buckets, choose for the rest, and compare
the chosen pipeline's measured time with the oracle (the fastest accurate pipeline) and with what
the hand-written rules would have run there."""
from __future__ import annotations

import math
import random
from collections import defaultdict

from dispatcher import store
from dispatcher.dispatch import Dispatcher, default_timing_mode, resolve_device
from dispatcher.pipeline import candidates
from dispatcher.policy import max_relerr
from dispatcher.registry import eligible, load_registry
from dispatcher.rules import RULES, resolve
from dispatcher.table import Table, Timing, noise_us


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def p95(xs: list[float]) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, math.ceil(0.95 * len(s)) - 1)] if s else float("nan")


def config_of(b) -> str:
    return f"{b.phase} {b.num_qo_heads}/{b.num_kv_heads} pg{b.page_size} kv={b.kv_dtype} out={b.out_dtype}"


def load_table(db, device):
    conn = store.open_readonly(db)
    if conn is None:
        raise ValueError(f"{store.default_path(db)} does not exist; run tuner sweep first")
    try:
        envs = store.environments(conn)
        dev = resolve_device(device or (envs[-1]["device_name"] if envs else None), envs)
        mode = default_timing_mode(dev)
        ids = [e["id"] for e in envs if e["device_name"] == dev.name and e["timing_mode"] == mode]
        return Table.from_rows(store.ok_measurements(conn, ids)), dev
    finally:
        conn.close()


def evaluate(db=None, device: str | None = None, holdout: float = 0.2, seed: int = 0,
             methods=("learned", "nearest")) -> dict:
    full, dev = load_table(db, device)
    registry = load_registry()
    buckets = sorted(full.by_bucket, key=lambda b: b.key())
    if not buckets:
        raise ValueError(f"no ok measurements for {dev.name} in {store.default_path(db)}")
    rng = random.Random(seed)
    held = set(rng.sample(buckets, max(1, round(holdout * len(buckets)))))
    train = Table()
    for b in buckets:
        if b not in held:
            for t in full.timings(b):
                train.add(b, t)
    choosers = {m: Dispatcher(train, dev, registry, learned=(m == "learned")) for m in methods}
    rows = defaultdict(lambda: defaultdict(list))
    for b in sorted(held, key=lambda b: b.key()):
        budget = max_relerr(b.kv_dtype, b.out_dtype)
        measured = {t.pipeline.id: t for t in full.timings(b) if t.relerr is None or t.relerr <= budget}
        if not measured:
            continue
        oracle = min(measured.values(), key=lambda t: t.median_us)
        cands = candidates(registry, b, dev)
        passed = {k: r for k, s in registry.items() if (r := eligible(s, b, dev))}
        rule_t = {r: measured.get(getattr(resolve(r, b, dev, cands, passed)[0], "id", None)) for r in RULES}
        g = rows[config_of(b)]
        for m, d in choosers.items():
            chosen = measured.get(d.choose(b).pipeline)
            if chosen is None:
                g[f"{m}:unmeasured"].append(1)
                continue
            g[f"{m}:regret"].append(chosen.median_us / oracle.median_us)
            for r, rt in rule_t.items():
                if rt is not None:
                    g[f"{m}:vs:{r}"].append(rt.median_us / chosen.median_us)
                    if chosen.median_us - rt.median_us > noise_us(chosen, rt):
                        g[f"{m}:slower:{r}"].append(chosen.median_us / rt.median_us)
    return {"device": dev.name, "buckets": len(buckets), "held_out": len(held), "seed": seed,
            "configs": {c: summarize(g, methods) for c, g in sorted(rows.items())},
            "oracle_vs_rules": oracle_vs_rules(full, dev, registry)}


def summarize(g, methods) -> dict:
    out = {}
    for m in methods:
        reg = g[f"{m}:regret"]
        out[m] = {"n": len(reg), "regret_geomean": geomean(reg), "regret_p95": p95(reg),
                  "regret_max": max(reg, default=float("nan")), "unmeasured_choice": len(g[f"{m}:unmeasured"]),
                  **{f"speedup_vs_{r}": geomean(g[f"{m}:vs:{r}"]) for r in RULES},
                  **{f"slower_than_{r}": len(g[f"{m}:slower:{r}"]) for r in RULES},
                  **{f"worst_vs_{r}": max(g[f"{m}:slower:{r}"], default=1.0) for r in RULES}}
    return out


def oracle_vs_rules(full: Table, dev, registry) -> dict:
    """On every measured bucket: how much faster the best pipeline is than each rule's pick."""
    acc = defaultdict(lambda: defaultdict(list))
    for b in full.by_bucket:
        budget = max_relerr(b.kv_dtype, b.out_dtype)
        measured = {t.pipeline.id: t for t in full.timings(b) if t.relerr is None or t.relerr <= budget}
        if not measured:
            continue
        best = min(t.median_us for t in measured.values())
        cands = candidates(registry, b, dev)
        passed = {k: r for k, s in registry.items() if (r := eligible(s, b, dev))}
        for r in RULES:
            pick = resolve(r, b, dev, cands, passed)[0]
            t: Timing | None = measured.get(pick.id) if pick else None
            if t is not None:
                acc[config_of(b)][r].append(t.median_us / best)
    return {c: {r: {"n": len(v), "geomean": geomean(v), "max": max(v)} for r, v in d.items()}
            for c, d in sorted(acc.items())}
