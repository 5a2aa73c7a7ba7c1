"""How often a measured batch ran faster than a measured batch it dominates (no more requests, each no
longer), per phase: where the dominated floor (dispatcher/floor.py) holds. usage: monotone.py DB DEVICE"""
import sys
from collections import Counter

from tuner.analysis.evaluate import load_table

table, _ = load_table(sys.argv[1], sys.argv[2])
pairs, faster = Counter(), Counter()
for fam, cells in table.by_family.items():
    uniform = [c for c in cells if c.skew == 1]
    for big in uniform:
        for small in cells:
            if small == big or small.batch_size > big.batch_size or small.max_kv_len > big.kv_len \
                    or small.q_len > big.q_len:
                continue
            for pid, t in table.by_cell[big].items():
                s = table.by_cell[small].get(pid)
                if s is None:
                    continue
                pairs[big.phase] += 1
                ratio = t.median_us / s.median_us
                for cut in (0.95, 0.9, 0.8):
                    faster[(big.phase, cut)] += ratio < cut
for phase in sorted(pairs):
    print(f"{sys.argv[1].rsplit('/', 1)[-1]} {phase}: {pairs[phase]} (dominating, dominated) pairs of one pipeline; "
          + ", ".join(f"{faster[(phase, c)]} ({100 * faster[(phase, c)] / pairs[phase]:.2f}%) faster than {c}x"
                      for c in (0.95, 0.9, 0.8)))
