"""tile_weight picked on off-grid seeds 1-2 (seed 3 reports): the shipped db (with the tile set) at each weight, and the
grid hold-out on the cells of the db before (score.sh makes /tmp/prefill-tiles/*.db first).
usage (repository root): PYTHONPATH=. python benchmarks/results/prefill-tiles/tile_weight.py 0 0.5 1 ... > tile_weight.txt"""
import random, sys, math
from tuner.analysis.evaluate import load_table, score, overall, _as_measured, evaluate_offgrid
from dispatcher.predictor_config import PredictorConfig
base, dev = load_table("/tmp/prefill-tiles/before.db", "NVIDIA H200")
more, _ = load_table("heuristics.db", "NVIDIA H200")
cells = sorted(base.by_cell, key=lambda c: c.key())
for tw in map(float, sys.argv[1:]):
    cfg = PredictorConfig(tile_weight=tw)
    out = []
    for s in ("offgrid1", "offgrid2", "offgrid3"):
        f = f"/tmp/prefill-tiles/{s}.db"
        r = evaluate_offgrid("heuristics.db", f, "NVIDIA H200", config=cfg)
        o = r["overall"]["learned"]; c = r["configs"]
        ok = sum(v['learned']['regret_geomean'] <= 1.02 and v['learned']['regret_max'] <= 1.10 for v in c.values())
        slow = sum(v['learned']['speedup_vs_vllm-2026'] < 1 for v in c.values())
        beyond = sum(v['learned']['slower_than_vllm-2026'] for v in c.values())
        out.append(f"{s} {o['regret_geomean']:.4f}/{o['regret_max']:.2f} ok {ok} slow {slow}/{beyond}")
    ho = []
    for seed in (0, 1, 2):
        held = set(random.Random(seed).sample(cells, round(0.2 * len(cells))))
        train = more.subset([c for c in more.by_cell if c not in held])
        configs = score(train, _as_measured(base, held), dev, ("learned",), cfg)
        pre = [v["learned"] for k, v in configs.items() if k.startswith("prefill")]
        n = sum(v["n"] for v in pre); gm = math.exp(sum(v["n"] * math.log(v["regret_geomean"]) for v in pre) / n)
        ho.append(f"{overall(configs)['learned']['regret_geomean']:.4f}/{gm:.4f}")
    print(f"tile_weight {tw}: " + " | ".join(out) + " | hold-out all/prefill " + " ".join(ho), flush=True)
