#!/usr/bin/env bash
# The shipped heuristics.db's own figures, as a user gets them with the CLI (CPU only; no GPU needed):
# held-out regret (3 seeds), between grid points, and tuner show; split.py splits the held-out pooled
# regret into uniform and mixed-length cells. Run from the repository root on a copy of heuristics.db.
set -euo pipefail
out=benchmarks/results/shipped-db-2026-12-07
db=${DB:-/tmp/shipped/h.db}
for s in 0 1 2; do
  .venv/bin/tuner evaluate --db "$db" --device "NVIDIA H200" --seed $s > $out/seed$s.txt
  .venv/bin/tuner evaluate --db "$db" --device "NVIDIA H200" --seed $s --json > /tmp/shipped-seed$s.json
done
.venv/bin/tuner evaluate --db "$db" --device "NVIDIA H200" --between > $out/between.txt
.venv/bin/tuner show --db "$db" > $out/show.txt
.venv/bin/python $out/split.py /tmp/shipped-seed{0,1,2}.json > $out/split.txt
