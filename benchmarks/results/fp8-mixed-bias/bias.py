"""How far the shipped table's learned times are from the measured ones on the H200's random mixed FP8-KV
batches, by region, and where the choices that miss by more than 5% fall (run.sh says how it is run).

Usage: bias.py HEURISTICS_DB PREDICTOR_CONFIG_JSON MIXED_DB...   (each MIXED_DB: a random mixed set measured on
the H200; the JSON file: PredictorConfig settings, {} for the shipped ones)"""
import collections
import math
import sys

from dispatcher.dispatch import default_timing_mode, load, read_rows
from dispatcher.predictor_config import PredictorConfig
from dispatcher.table import measured_problems

FAMILIES = {"xqa": "trtllm-xqa[", "fa2-tc split auto": "fa2-tc[fixed_split_size=0]",
            "fa2-tc split 1024": "fa2-tc[fixed_split_size=1024]"}


def region(p) -> tuple:
    b = "batch <=16" if p.batch_size <= 16 else "batch 17-64" if p.batch_size <= 64 else "batch >64"
    s = "max/mean <2.5" if p.skew < 2.5 else "max/mean 2.5-8" if p.skew < 8 else "max/mean >=8"
    return f"{p.num_qo_heads}/{p.num_kv_heads}", b, s


def family(pid: str) -> str | None:
    return next((f for f, prefix in FAMILIES.items() if pid.startswith(prefix)), None)


def table(title: str, logs: dict, count: collections.Counter) -> None:
    print(title)
    print(f"{'heads':6s} {'batch':12s} {'skew':15s} {'n':>4s} " + " ".join(f"{f:>18s}" for f in FAMILIES))
    for r in sorted(count):
        cells = [logs.get((r, f), []) for f in FAMILIES]
        print(f"{r[0]:6s} {r[1]:12s} {r[2]:15s} {count[r]:4d} "
              + " ".join(f"{math.exp(sum(c) / len(c)):18.3f}" if c else f"{'-':>18s}" for c in cells))


def main(heuristics: str, config: str, sets: list[str]) -> None:
    d = load(heuristics, "NVIDIA H200", predictor=PredictorConfig.from_file(config))
    ratios = collections.defaultdict(list)       # (region, family) -> log(predicted / measured)
    priors = collections.defaultdict(list)       # the same for the prior alone: uniform batches, no corrections
    misses = collections.Counter()               # (region, chosen family -> best family) with regret > 1.05
    count = collections.Counter()
    for db in sets:
        for p, ts in measured_problems(read_rows(db, d.device, default_timing_mode(d.device))).items():
            if p.kv_dtype != "fp8" or p.skew <= 1:
                continue
            r = region(p)
            count[r] += 1
            predicted = {t.pipeline.id: t.median_us for t in d.model.predict(p.cell())}
            prior = ({t.pipeline.id: t.median_us for t in d.model._uniform.ragged_prior(p.cell())}
                     if d.model._corrects(p.cell()) else {})
            for pid, t in ts.items():
                if family(pid) and pid in predicted:
                    ratios[(r, family(pid))].append(math.log(predicted[pid] / t.median_us))
                if family(pid) and pid in prior:
                    priors[(r, family(pid))].append(math.log(prior[pid] / t.median_us))
            dec = d.choose(p)
            chosen = ts.get(dec.pipeline)
            best = min(ts.values(), key=lambda t: t.median_us)
            if chosen and chosen.median_us / best.median_us > 1.05:
                misses[(r, f"{family(chosen.pipeline.id)} -> {family(best.pipeline.id)}")] += 1
    table("learned / measured time, geometric mean over the batches' pipelines of each kernel family", ratios, count)
    table("\nthe prior alone (uniform batches, before the measured mixed batches correct it) / measured time",
          priors, count)
    print("\nchoices more than 5% slower than the fastest: chosen -> fastest family")
    for (r, what), n in sorted(misses.items()):
        print(f"{r[0]:6s} {r[1]:12s} {r[2]:15s} {n:3d}  {what}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
