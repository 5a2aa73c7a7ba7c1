"""Pick K shapes from measured off-grid pools at random (mode random:SEED) or by the grid model's doubt
(mode doubt: tuner/search/adaptive.py's order); write their measurements, marked alone, for tuner import."""
import json, random, sys, lzma, pathlib, tempfile
from dispatcher.dispatch import load, device_of, default_timing_mode
from dispatcher.measurements import read_rows
from dispatcher.table import problem_of
from tuner.search.adaptive import doubt
from tuner.transfer import export_jsonl
grid_db, dev_name, k, mode, out, *pools = sys.argv[1:]
mode, _, seed = mode.partition(":")
k = int(k)
d = load(grid_db, dev_name)
dev = d.device
model = d.model
cands = []
for pool in pools:
    rows = read_rows(pool, dev, default_timing_mode(dev))
    probs = {}
    for r in rows:
        probs.setdefault(r["problem_key"], problem_of(r))
    cands += [(pool, key, p) for key, p in probs.items()]
if mode == "random":
    random.Random(int(seed or 0)).shuffle(cands)
    pick = cands[:k]
else:
    scored = sorted(cands, key=lambda c: doubt(c[2].cell(), model), reverse=True)
    pick = scored[:k]
keys = {(pool, key) for pool, key, _ in pick}
with open(out, "w") as f:
    for pool in pools:
        tmp = pathlib.Path(tempfile.mkdtemp()) / "x.jsonl"
        export_jsonl(pool, tmp)
        for line in open(tmp):
            item = json.loads(line)
            if (pool, item["measurement"]["problem_key"]) in keys:
                item["measurement"]["alone"] = 1
                f.write(json.dumps(item) + "\n")
print(mode, len(pick), "of", len(cands))
