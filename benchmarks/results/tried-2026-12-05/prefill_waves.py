"""prefill_wave_weight picked on off-grid seeds 1-2 (H200); reported on seed 3 (H200) and, as the H200 db's
choices on H100 times, seeds 3-4 (../h100-2026-12-05/); the grid hold-out (seeds 0-2) on the shipped db's cells.
usage (repository root, prefill-waves.patch applied, after ../prefill-tiles/score.sh and ../h100-2026-12-05/score.sh decompressed the sets):
PYTHONPATH=. python benchmarks/results/tried-2026-12-05/prefill_waves.py 0 1 2 ..."""
import math
import random
import sys

from dispatcher.predictor_config import PredictorConfig
from tuner.analysis.evaluate import _as_measured, evaluate_offgrid, load_table, overall, score

SETS = [("offgrid1", "/tmp/prefill-tiles/offgrid1.db", None), ("offgrid2", "/tmp/prefill-tiles/offgrid2.db", None),
        ("offgrid3", "/tmp/prefill-tiles/offgrid3.db", None),
        ("h100-3", "/tmp/h100-2026-12-05/offgrid3.db", "NVIDIA H100 80GB HBM3"),
        ("h100-4", "/tmp/h100-2026-12-05/offgrid4.db", "NVIDIA H100 80GB HBM3")]
full, dev = load_table("heuristics.db", "NVIDIA H200")
cells = sorted(full.by_cell, key=lambda c: c.key())
for w in map(float, sys.argv[1:]):
    cfg = PredictorConfig(prefill_wave_weight=w)
    out = []
    for name, path, on in SETS:
        r = evaluate_offgrid("heuristics.db", path, "NVIDIA H200", config=cfg, measured_on=on)
        o, c = r["overall"]["learned"], r["configs"]
        ok = sum(v["learned"]["regret_geomean"] <= 1.02 and v["learned"]["regret_max"] <= 1.10 for v in c.values())
        slow = sum(v["learned"]["speedup_vs_vllm-2026"] < 1 for v in c.values())
        beyond = sum(v["learned"]["slower_than_vllm-2026"] for v in c.values())
        pre = [v["learned"] for k, v in c.items() if k.startswith("prefill")]
        n = sum(v["n"] for v in pre)
        pgm = math.exp(sum(v["n"] * math.log(v["regret_geomean"]) for v in pre) / n)
        out.append(f"{name} {o['regret_geomean']:.4f}/{o['regret_max']:.2f} prefill {pgm:.4f} ok {ok} slow {slow}/{beyond}")
    ho = []
    for seed in (0, 1, 2):
        held = set(random.Random(seed).sample(cells, round(0.2 * len(cells))))
        train = full.subset([c for c in cells if c not in held])
        configs = score(train, _as_measured(full, held), dev, ("learned",), cfg)
        pre = [v["learned"] for k, v in configs.items() if k.startswith("prefill") and v["learned"]["n"]]
        n = sum(v["n"] for v in pre)
        pgm = math.exp(sum(v["n"] * math.log(v["regret_geomean"]) for v in pre) / n)
        ho.append(f"{overall(configs)['learned']['regret_geomean']:.4f}/{pgm:.4f}")
    print(f"prefill_wave_weight {w}: " + " | ".join(out) + " | hold-out all/prefill " + " ".join(ho), flush=True)
