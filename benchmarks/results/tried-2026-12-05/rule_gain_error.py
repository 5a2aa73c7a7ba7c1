"""Grid hold-out: how far a learned decision's predicted gain over the rule's pick is from the measured gain."""
import math, random, sys
from collections import defaultdict
from dispatcher.dispatch import Dispatcher
from dispatcher.policy import max_relerr
from dispatcher.registry import load_registry
from dispatcher.rules import rule_pick
from dispatcher.pipeline import candidates
from tuner.analysis.evaluate import load_table
full, dev = load_table("heuristics.db", "NVIDIA H200")
reg = load_registry()
cells = sorted(full.by_cell, key=lambda c: c.key())
err = defaultdict(list)
for seed in (0, 1, 2):
    held = set(random.Random(seed).sample(cells, round(0.2 * len(cells))))
    d = Dispatcher(full.subset([c for c in cells if c not in held]), dev, reg, learned=True)
    for b in held:
        m = {pid: t for pid, t in full.by_cell[b].items() if t.relerr is None or t.relerr <= max_relerr(b.kv_dtype, b.out_dtype)}
        dec = d.choose(b)
        r = rule_pick("vllm-0.33", b, dev, reg, candidates(reg, b, dev))[0].id
        if dec.source != "learned" or dec.pipeline == r or r not in m or dec.pipeline not in m: continue
        pred = {t.pipeline.id: t.median_us for t in d.model.predict(b)}
        pg = pred[r] / pred[dec.pipeline]; mg = m[r].median_us / m[dec.pipeline].median_us
        err[b.phase].append((pg, mg))
for ph, xs in err.items():
    over = sorted(math.log(pg) - math.log(mg) for pg, mg in xs)
    q = lambda f: math.exp(over[min(len(over) - 1, int(f * len(over)))])
    wrong = [(pg, mg) for pg, mg in xs if mg < 1]
    print(ph, len(xs), "overestimate of gain p50 %.3f p75 %.3f p90 %.3f p95 %.3f" % (q(.5), q(.75), q(.9), q(.95)),
          "| wrong side:", len(wrong), "their predicted gains:", sorted(round(pg, 3) for pg, mg in wrong)[:20])
