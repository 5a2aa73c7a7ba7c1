"""The mixed decode batches a database's learned choice misses: regret over THRESHOLD or slower than the
vllm-2026 rule beyond noise, with each pipeline's measured, predicted and prior time (the prior: the uniform
model's ragged_prior, before the measured mixed batches correct it) and how many measured mixed batches
corrected it. usage (repository root, sets in /tmp/waves as ../waves/score.sh leaves them):
    python misses.py DB SET[,SET...] [--threshold 1.05] [--kv-dtype fp8|bf16]"""
import argparse

from dispatcher.dispatch import Dispatcher, default_timing_mode, read_rows
from dispatcher.pipeline import candidates
from dispatcher.policy import max_relerr
from dispatcher.registry import load_registry
from dispatcher.rules import rule_pick
from dispatcher.table import measured_problems, noise_us
from tuner.analysis.evaluate import load_table


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("db")
    ap.add_argument("sets")
    ap.add_argument("--threshold", type=float, default=1.05)
    ap.add_argument("--kv-dtype", default="fp8")
    a = ap.parse_args()
    full, dev = load_table(a.db, "NVIDIA H200")
    reg = load_registry()
    d = Dispatcher(full, dev, reg, learned=True)
    for s in a.sets.split(","):
        ms = measured_problems(read_rows(f"/tmp/waves/{s}.db", dev, default_timing_mode(dev)))
        for b in sorted(ms, key=lambda b: b.key()):
            if b.phase != "decode" or b.kv_dtype != a.kv_dtype or b.skew == 1:
                continue
            budget = max_relerr(b.kv_dtype, b.out_dtype)
            m = {k: t for k, t in ms[b].items() if t.relerr is None or t.relerr <= budget}
            best = min(m.values(), key=lambda t: t.median_us)
            dec = d.choose(b)
            ch = m.get(dec.pipeline)
            rule = rule_pick("vllm-2026", b, dev, reg, candidates(reg, b, dev))[0]
            rt = m.get(getattr(rule, "id", None))
            slow = rt is not None and ch is not None and ch.median_us - rt.median_us > noise_us(ch, rt)
            regret = ch.median_us / best.median_us if ch else float("nan")
            if not (regret > a.threshold or slow):
                continue
            waves = b.batch_size * b.num_kv_heads / dev.sm_count
            print(f"{s} {b.num_qo_heads}/{b.num_kv_heads} out={b.out_dtype} batch {b.batch_size} x {b.kv_len}, longest "
                  f"{b.max_kv_len} (skew {b.skew:.1f}, kv_balance {b.balance:.2f}, {waves:.2f} waves): regret "
                  f"{regret:.3f}" + (f", {ch.median_us / rt.median_us:.3f}x vllm-2026" if slow else ""))
            pred = {t.pipeline.id: t.median_us for t in d.model.predict(b)}
            prior = {t.pipeline.id: t.median_us for t in d.model._uniform.ragged_prior(b)} if d.model._uniform else {}
            for pid, role in {dec.pipeline: "chosen", best.pipeline.id: "fastest",
                              getattr(rule, "id", ""): "vllm-2026"}.items():
                if pid in m:
                    print(f"    {role:9s} {pid:45s} measured {m[pid].median_us:6.1f} predicted {pred.get(pid, 0):6.1f} "
                          f"prior {prior.get(pid, 0):6.1f} (corrected by {d.model.mixed_residuals(b, pid)})")


if __name__ == "__main__":
    main()
