"""Serving replay: continuous batching simulated, each sampled step's real decode batch (its requests' KV
lengths) timed as the vLLM plugin would run it and as vLLM 0.33 runs it (XQA for every SM90 decode).

    python benchmarks/serving_replay.py steps --out steps.jsonl          # the step batches, as problems
    tuner sweep --problems steps.jsonl --device cuda --db replay.db      # time them (the H200)
    python benchmarks/serving_replay.py report --db replay.db [--seed 0] [--decide heuristics.db]

Workloads (Llama-4-Scout geometry, TP1 and TP4, page 16; FP8 KV with FP8 output, and BF16):
  seed   640 requests, concurrency 128, ~1k prompt and ~1k output tokens;
  long   concurrency 128, 10% of requests with ~32k of context;
  low    concurrency 8-32, one ~32k request at a time among short ones.
`STEPS` steady-state steps per workload are sampled evenly after the first requests finish. The
plugin's run per step is decided by the plugin's own code for the step's mean and longest length, as for
a step outside a FULL CUDA graph (vLLM's PIECEWISE mode, eager, or a batch above the capture sizes;
under FULL graphs the kernel is fixed at capture instead): XQA or vLLM's native decode wrapper (the
fa2-tc pipeline, with FlashInfer's own split or a fixed one), and with FP8 output XQA writing FP8 itself
where fused.py fuses the layer (else a separate quant). Totals are of measured times
only; steps the harness could not time are counted and left out."""
from __future__ import annotations

import argparse
import random
import sqlite3
from collections.abc import Callable

from dispatcher.problem import AttentionProblem
from tuner.problem_files import write_problems

STEPS = 8
GEOMETRY = {"tp1": (40, 8), "tp4": (10, 2)}
DTYPES = {"fp8": ("fp8", "fp8"), "bf16": ("bf16", "bf16")}
VLLM_033 = "trtllm-xqa[enable_pdl=true]"        # vLLM 0.33's SM90 decode (PDL on, FlashInfer's default)
NATIVE = "fa2-tc[fixed_split_size=0]"            # vLLM's native decode wrapper


def workload(name: str, rng: random.Random) -> tuple[int, Callable[[], tuple[int, int]]]:
    """(concurrency, new_request() -> (prompt, output) tokens)."""
    if name == "seed":
        return 128, lambda: (int(rng.gauss(1000, 200)), int(rng.uniform(800, 1200)))
    if name == "long":
        return 128, lambda: ((int(rng.gauss(32000, 2000)) if rng.random() < 0.1 else int(rng.gauss(1000, 200))),
                             int(rng.uniform(800, 1200)))
    return rng.choice((8, 16, 32)), lambda: (int(rng.gauss(1000, 200)), int(rng.uniform(200, 600)))


def simulate(name: str, seed: int = 0, total: int = 640) -> list[list[int]]:
    """The decode batch (KV lengths) of every step until `total` requests are done."""
    rng = random.Random(seed)
    conc, new = workload(name, rng)
    started, active, steps = 0, [], []
    long_active = False
    while started < total or active:
        while len(active) < conc and started < total:
            prompt, out = new()
            if name == "low" and not long_active:          # one ~32k request at a time
                prompt, long_active = int(rng.gauss(32000, 2000)), True
            active.append([max(1, prompt), max(1, out), prompt > 16000])
            started += 1
        steps.append([r[0] for r in active])
        for r in active:
            r[0] += 1
            r[1] -= 1
        for r in [r for r in active if r[1] <= 0]:
            long_active = long_active and not r[2]
            active.remove(r)
    return steps


def sampled(steps: list[list[int]], n: int = STEPS) -> list[list[int]]:
    """n steps evenly spaced over the steady state (from the first finished request to the last start)."""
    full = [s for s in steps if len(s) == max(map(len, steps))]
    return [full[i * (len(full) - 1) // max(1, n - 1)] for i in range(n)] if full else []


def step_problems(seed: int = 0) -> list[tuple[str, AttentionProblem]]:
    out = []
    for wl in ("seed", "long", "low"):
        for i, lens in enumerate(sampled(simulate(wl, seed))):
            for tp, (hq, hkv) in GEOMETRY.items():
                for dt, (kv, o) in DTYPES.items():
                    p = AttentionProblem.from_seq_lens(seq_lens=lens, phase="decode", num_qo_heads=hq,
                                                       num_kv_heads=hkv, head_dim=128, page_size=16,
                                                       kv_dtype=kv, out_dtype=o)
                    out.append((f"{wl} {tp} {dt} step{i}", p))
    return out


def measured(db: str) -> dict[str, dict[str, float]]:
    con = sqlite3.connect(db)
    rows = con.execute("select problem_key, pipeline, median_us from measurements where status = 'ok'")
    out: dict[str, dict[str, float]] = {}
    for key, pipe, us in rows:
        out.setdefault(key, {})[pipe] = us
    return out


def plugin_run(answers, p: AttentionProblem) -> str:
    """The pipeline the plugin runs for p, decided by its own code for a step outside a FULL CUDA graph
    (decode.decide, fused.measured_answer): XQA, or vLLM's native decode with FlashInfer's own or a fixed
    split, and with FP8 output XQA writing it itself where the layer was fused."""
    from dispatcher.integrations.vllm.decode import DecodeState, decide
    fused = p.out_dtype == "fp8" and fused_layer(answers, p)
    fields = dict(phase="decode", num_qo_heads=p.num_qo_heads, num_kv_heads=p.num_kv_heads, head_dim=p.head_dim,
                  page_size=p.page_size, window_left=p.window_left, q_dtype="bf16", kv_dtype=p.kv_dtype,
                  out_dtype="fp8" if fused else "bf16")
    choice, _ = decide(answers, DecodeState(None, native="fa2-tc", fields=fields), p.batch_size, p.kv_len,
                       p.max_kv_len, per_step=True)
    if choice is not None and not choice.xqa:
        native = f"fa2-tc[fixed_split_size={choice.split}]" if choice.split else NATIVE
        return native + ("+out-quant" if p.out_dtype == "fp8" else "")
    return VLLM_033 + ("+fused-out" if fused else "+out-quant" if p.out_dtype == "fp8" else "")


def fused_layer(answers, p: AttentionProblem) -> bool:
    """fused_output_quant_supported's answer for the step's layer (fused.py, with vLLM's defaults: page 16,
    a BF16 model)."""
    from dispatcher.integrations.vllm.fused import fp8_out_fields, measured_answer
    key = (p.num_qo_heads, p.num_kv_heads, p.head_dim, p.page_size, p.window_left)
    if key not in _FUSED:
        _FUSED[key] = measured_answer(answers, fp8_out_fields(*key, q_dtype="bf16"))[0]
    return _FUSED[key]


_FUSED: dict[tuple[int, ...], bool] = {}


def report(seed: int, db: str, decide: str | None) -> None:
    from dispatcher.integrations.vllm.answers import Answers
    from dispatcher.integrations.vllm.settings import Settings
    answers = Answers(Settings(db=decide or "heuristics.db", device="NVIDIA H200"))
    times = measured(db)
    totals: dict[str, list[float]] = {}
    missing = 0
    for name, p in step_problems(seed):
        t = times.get(p.key(), {})
        mine, theirs = t.get(plugin_run(answers, p)), t.get(VLLM_033 + ("+out-quant" if p.out_dtype == "fp8" else ""))
        if mine is None or theirs is None:
            missing += 1
            continue
        acc = totals.setdefault(name.rsplit(" ", 1)[0], [0.0, 0.0, 0])
        acc[0] += mine
        acc[1] += theirs
        acc[2] += 1
    print("| workload tp dtypes | steps | plugin (us, sum) | vLLM 0.33 (us, sum) | vLLM / plugin |")
    print("|---|---|---|---|---|")
    for g, (mine, theirs, n) in sorted(totals.items()):
        print(f"| {g} | {n} | {mine:.1f} | {theirs:.1f} | {theirs / mine:.3f}x |")
    print(f"{missing} step batches without a measurement of both")


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("steps")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", required=True)
    r = sub.add_parser("report")
    r.add_argument("--seed", type=int, default=0, help="the seed the steps were made with")
    r.add_argument("--db", required=True)
    r.add_argument("--decide", default=None, help="the database the plugin decides from (default heuristics.db)")
    a = ap.parse_args()
    if a.cmd == "steps":
        rows = step_problems(a.seed)
        write_problems(a.out, (p for _, p in rows))
        print(f"{len(rows)} step batches -> {a.out}")
    else:
        report(a.seed, a.db, a.decide)


if __name__ == "__main__":
    main()
