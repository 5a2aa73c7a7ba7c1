"""The worst shapes over 1.08x (each configuration's three worst, as `tuner evaluate --json` lists them) of
the sets given, and how often each (chosen, best) kernel pair is among them. usage: worst.py EVAL.json ..."""
import json
import sys
from collections import Counter

pairs: Counter = Counter()
for path in sys.argv[1:]:
    for config, scores in json.load(open(path))["configs"].items():
        for w in scores["learned"]["worst"]:
            if w["regret"] > 1.08:
                print(f"{path.rsplit('/', 1)[-1]:10s} {config[8:38]:30s} {w['shape']:34s} {w['regret']:.3f}  "
                      f"{w['chose']} {w['chose_us']:.1f} us, best {w['best']} {w['best_us']:.1f} us")
                pairs[(w["chose"].split("+")[0], w["best"].split("+")[0])] += 1
counts = ", ".join(f"{a} -> {b}: {n}" for (a, b), n in pairs.most_common())
print(f"{sum(pairs.values())} shapes; chosen -> best: {counts}")
