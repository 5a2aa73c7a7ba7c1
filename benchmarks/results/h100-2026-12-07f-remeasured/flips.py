"""For each table and pair of runs of one set: the configurations whose per-configuration verdict (regret gm and
max within benchmarks/targets.py's bounds) differs between the two runs' times, for the learned decisions and for
the remeasured ones."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from targets import misses, scored  # noqa: E402


def verdicts(path: Path, method: str) -> dict[str, bool]:
    r = json.loads(path.read_text())
    is_mixed = any(k.endswith("mixed") for k in r["configs"])
    cfgs = scored(r, is_mixed, method)
    gm, mx = (1.03, 1.15) if is_mixed else (1.02, 1.10)
    missed = {m.split(" (")[0] for m in misses(cfgs, gm, mx)}
    return {k: k not in missed for k in cfgs}


work, pairs = Path(sys.argv[1]), [p.split(":") for p in sys.argv[2:]]
for table in ("shipped", "h100grid"):
    for method in ("learned", "remeasured"):
        for a, b in pairs:
            va, vb = verdicts(work / f"{table}-{a}.json", method), verdicts(work / f"{table}-{b}.json", method)
            both = sorted(va.keys() & vb.keys())
            flips = [k for k in both if va[k] != vb[k]]
            print(f"{table:8s} {method:10s} {a:7s}/{b:12s} within target: {sum(va[k] for k in both):2d} / "
                  f"{sum(vb[k] for k in both):2d} of {len(both):2d}; differ: {len(flips)}"
                  + (f" ({'; '.join(flips)})" if flips else ""))
