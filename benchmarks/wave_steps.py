"""What a decode batch costs either side of one wave, per kernel: the measured time per 1k tokens of KV
(uniform batches, page 16, 2k tokens or more, each kernel's own split) by CTAs over SMs, with the
split rule's busiest-SM load (dispatcher/kernels.toml `split_kv`). The data behind each rule's `waves`.

    python benchmarks/wave_steps.py heuristics.db offgrid-seed1.db ... [--device "NVIDIA H200"]
"""
from __future__ import annotations

import argparse
from collections import defaultdict

from dispatcher.measurements import read_rows
from dispatcher.registry import load_registry
from dispatcher.resolve import default_timing_mode
from dispatcher.table import measured_problems
from tuner.analysis.evaluate import load_table

DEFAULT_SPLIT = {"trtllm-xqa": (("enable_pdl", False),), "fa2-tc": (("fixed_split_size", 0),), "cudnn": ()}


def collect(dbs: list[str], device_name: str) -> tuple[dict, int, int]:
    _, device = load_table(dbs[0], device_name)
    points: dict = defaultdict(list)
    for db in dbs:
        held = measured_problems(read_rows(db, device, default_timing_mode(device)))
        for p, timings in held.items():
            if p.phase != "decode" or p.skew > 1 or p.page_size != 16 or p.kv_len < 2048:
                continue
            for t in timings.values():
                pipe = t.pipeline
                if pipe.kernel in DEFAULT_SPLIT and pipe.tactic == DEFAULT_SPLIT[pipe.kernel] and not pipe.q_quant \
                        and not pipe.out_quant and not pipe.fused_out_quant:
                    points[(pipe.kernel, p.kv_dtype, p.num_kv_heads)].append((p.batch_size, p.kv_len, t.median_us))
    return points, device.sm_count, device.sm


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dbs", nargs="+")
    ap.add_argument("--device", default="NVIDIA H200")
    args = ap.parse_args()
    points, sms, device_sm = collect(args.dbs, args.device)
    reg = load_registry()
    print("| kernel | KV | KV heads | batch | CTAs / SMs | busiest-SM load | us per 1k KV tokens | shapes |")
    print("|---|---|---|---|---|---|---|---|")
    for (kernel, kv, heads), pts in sorted(points.items()):
        rule = reg[kernel].split_rule(kv)
        if rule is None or not rule.applies_to(device_sm) or not sms:
            continue
        by_load: dict = defaultdict(list)
        for b, kv_len, us in pts:
            load = rule.busiest_sm(b, heads, kv_len, sms)
            if load >= 0.5:
                by_load[load].append((b, rule.fill(b, heads, kv_len, sms), 1000 * us / kv_len))
        for load, got in sorted(by_load.items())[:4]:
            batches, fills, per_1k = zip(*got)
            print(f"| {kernel} | {kv} | {heads} | {min(batches)}-{max(batches)} | {min(fills):.2f}-{max(fills):.2f} "
                  f"| {load:g} | {min(per_1k):.1f}-{max(per_1k):.1f} | {len(got)} |")

if __name__ == "__main__":
    main()
