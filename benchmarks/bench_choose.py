"""Lookup cost of Dispatcher.choose() (warm, in-process) beside a plain Python copy of vLLM's rule.

    .venv/bin/python benchmarks/bench_choose.py [--db heuristics.db] [--device "NVIDIA H200"]

Each call is timed on its own with perf_counter_ns (the timer's own cost, measured on an empty
call, is reported and subtracted); p50 and p99 over 200k calls per case, interleaved in rounds.
"warm" cases repeat one problem (the exact-problem dict); "new shape in a decided cell" asks a
problem not asked before whose cell was decided (kv lengths within 4.4% of one another): the cell
key is computed and looked up, the problem remembered. Then what surrounds a lookup, timed per call
over fewer calls: building the problem (fields, or a step's 128 seq_lens), deciding a cell never
asked before, and the first choose() of an asked problem after a reload (Dispatcher.swap_table)."""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

from dispatcher import AttentionProblem, load


def vllm_rule(num_qo_heads, num_kv_heads, num_tokens, max_seq_len, dcp_world_size, kv_cache_dtype,
              q_dtype, is_prefill, force_use_trtllm=None, has_sinks=False, has_spec=False, sm=90):
    """The decision logic of vLLM's use_trtllm_attention (2026), written out in plain Python with the
    platform checks reduced to an SM number, as the baseline a rule costs."""
    if force_use_trtllm is not None and not force_use_trtllm:
        return False
    if dcp_world_size > 1:
        return False
    if sm not in (90, 100, 103, 120, 121) or (is_prefill and sm == 90):
        return False
    if num_qo_heads % num_kv_heads != 0:
        return False
    if has_spec and not is_prefill:
        return True
    if q_dtype == "fp8":
        return True
    if has_sinks:
        return True
    if force_use_trtllm is None:
        if is_prefill:
            return kv_cache_dtype == "auto"
        if sm in (90, 120, 121) and kv_cache_dtype.startswith("fp8"):
            return True
        return num_tokens <= 256 and kv_cache_dtype == "auto"
    return True


def percentiles(fn, n: int, overhead: float) -> tuple[float, float]:
    ts = []
    clock = time.perf_counter_ns
    for _ in range(n):
        t = clock()
        fn()
        ts.append(clock() - t)
    ts.sort()
    return (max(ts[n // 2] - overhead, 0) / 1e3, max(ts[int(n * 0.99)] - overhead, 0) / 1e3)


def new_shapes_in_a_cell(d, base: dict, n: int, overhead: float) -> tuple[float, float]:
    """choose() for problems not asked before, in one decided cell: each call's problem is dropped
    from the exact-problem cache beforehand (outside the timed region)."""
    shapes = [AttentionProblem(**base, batch_size=12, kv_len=k) for k in range(1840, 1915)]
    d.choose(shapes[0])
    ts, clock = [], time.perf_counter_ns
    for i in range(n):
        p = shapes[i % len(shapes)]
        d.decided.asked.pop(p, None)
        t = clock()
        d.choose(p)
        ts.append(clock() - t)
    ts.sort()
    return (max(ts[n // 2] - overhead, 0) / 1e3, max(ts[int(n * 0.99)] - overhead, 0) / 1e3)


def timed_once(calls: list, overhead: float) -> tuple[float, float]:
    """p50 and p99 of calls each made once (their setup outside the timed region)."""
    ts, clock = [], time.perf_counter_ns
    for fn in calls:
        t = clock()
        fn()
        ts.append(clock() - t)
    ts.sort()
    n = len(ts)
    return (max(ts[n // 2] - overhead, 0) / 1e3, max(ts[int(n * 0.99)] - overhead, 0) / 1e3)


def around_a_lookup(d, base: dict, overhead: float) -> dict[str, tuple[float, float]]:
    """What a serving step pays beside the lookup: building its problem, a cell's first decision,
    and the first choose() of an asked problem once keep_fresh has swapped in a reloaded table."""
    lens = [1900 + 37 * (i % 29) for i in range(127)] + [16000]
    out = {"building an AttentionProblem": timed_once(
               [lambda k=k: AttentionProblem(**base, batch_size=12, kv_len=k) for k in range(1000, 21000)], overhead),
           "AttentionProblem.from_seq_lens, 128 requests": timed_once(
               [lambda: AttentionProblem.from_seq_lens(**base, seq_lens=lens)] * 5000, overhead)}
    fresh = [AttentionProblem(**base, batch_size=b, kv_len=k) for b in range(1, 97, 5) for k in (700, 3000, 11000)]
    out["first choose() of a cell (deciding it)"] = timed_once([lambda p=p: d.choose(p) for p in fresh], overhead)
    t, asked = time.perf_counter(), len(d.decided.asked)
    d.swap_table(d.table)                    # what keep_fresh does after a reload: the asked ones decided again
    print(f"swap_table (keep_fresh's thread): {asked} asked problems decided again in "
          f"{(time.perf_counter() - t) * 1e3:.0f} ms")
    out["first choose() after a reload"] = timed_once([lambda p=p: d.choose(p) for p in fresh], overhead)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", default="heuristics.db")
    ap.add_argument("--device", default="NVIDIA H200")
    ap.add_argument("--calls", type=int, default=200_000)
    a = ap.parse_args()
    d = load(a.db, a.device)
    base = dict(phase="decode", num_qo_heads=40, num_kv_heads=8, head_dim=128, page_size=16,
                kv_dtype="fp8", out_dtype="fp8")
    cases = {"measured": AttentionProblem(**base, batch_size=16, kv_len=2048),
             "learned": AttentionProblem(**base, batch_size=16, kv_len=131072),   # beyond the measured grid
             "learned, off the grid": AttentionProblem(**base, batch_size=12, kv_len=1900),
             "rule": AttentionProblem(**{**base, "head_dim": 64}, batch_size=12, kv_len=1900)}    # never measured
    fns = {k: (lambda p=p: d.choose(p)) for k, p in cases.items()}
    equal = {k: AttentionProblem(**{f: getattr(p, f) for f in p.to_dict()}) for k, p in cases.items()}
    fns.update({f"{k} (equal, new object)": (lambda p=p: d.choose(p)) for k, p in equal.items()})
    fns["vllm rule (plain Python)"] = lambda: vllm_rule(40, 8, 12, 1900, 1, "fp8_e4m3", "bf16", False)
    sources = {k: d.choose(p).source for k, p in cases.items()}
    for f in fns.values():
        f()
    overhead = statistics.median(percentiles(lambda: None, 20000, 0)[0] * 1e3 for _ in range(3))
    res = {k: [] for k in fns}
    cell = "new shape in a decided cell"
    res[cell] = []
    for _ in range(5):                        # interleaved rounds
        for k, f in fns.items():
            res[k].append(percentiles(f, a.calls // 5, overhead))
        res[cell].append(new_shapes_in_a_cell(d, base, a.calls // 5, overhead))
    res.update({k: [v] for k, v in around_a_lookup(d, base, overhead).items()})
    out = {"python": platform.python_version(), "cpu": platform.processor() or platform.machine(),
           "timer_overhead_ns": overhead, "sources": sources, "cases": {}}
    rule_p50 = statistics.median(r[0] for r in res["vllm rule (plain Python)"])
    for k, rs in res.items():
        p50, p99 = statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs)
        out["cases"][k] = {"p50_us": round(p50, 3), "p99_us": round(p99, 3), "p50_vs_rule": round(p50 / rule_p50, 2)}
        print(f"{k:44s} p50 {p50:6.3f} us  p99 {p99:6.3f} us  ({p50 / rule_p50:.2f}x the rule)")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
