"""Grid hold-out on the shipped grid's cells, fitting on the rest plus extra measured cells of another db."""
# usage: PYTHONPATH=. python benchmarks/results/mixed-residual/holdout_same_cells.py NEW_DB OLD_DB (OLD_DB: the db before, its cells sampled)
import random, sys, json
from tuner.analysis.evaluate import load_table, score, overall, _as_measured
base, dev = load_table(sys.argv[2], "NVIDIA H200")
more, _ = load_table(sys.argv[1], "NVIDIA H200")
cells = sorted(base.by_cell, key=lambda c: c.key())
for seed in (0, 1, 2):
    held = set(random.Random(seed).sample(cells, round(0.2 * len(cells))))
    for name, t in (("shipped", base), ("with extra", more)):
        train = t.subset([c for c in t.by_cell if c not in held])
        configs = score(train, _as_measured(base, held), dev, ("learned",))
        o = overall(configs)["learned"]
        pre = [v["learned"] for k, v in configs.items() if k.startswith("prefill")]
        import math
        n = sum(v["n"] for v in pre); gm = math.exp(sum(v["n"] * math.log(v["regret_geomean"]) for v in pre) / n)
        print(seed, name, f"gm {o['regret_geomean']:.4f} n {o['n']} max {o['regret_max']:.3f} within {o['configs_within_target']}/{o['configs']} | prefill gm {gm:.4f} n {n}")
