#!/usr/bin/env bash
# The shipped table's learned times against the H200's measured random mixed FP8-KV batches (seeds 1-4), by region:
# with the corrections' spread term on every pipeline (the rule before 5550853), then as shipped.
#   bash benchmarks/results/fp8-mixed-bias/run.sh > benchmarks/results/fp8-mixed-bias/run.txt
set -euo pipefail
R=benchmarks/results; W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
xz -dc $R/h200-2026-12-06/mixed1.db.xz > $W/m1.db; xz -dc $R/h200-2026-12-06/mixed2.db.xz > $W/m2.db
xz -dc $R/h200-2026-12-06/mixed3.db.xz > $W/m3.db; xz -dc $R/prefill-tiles/mixed4.db.xz > $W/m4.db
echo "tree $(git rev-parse --short HEAD), heuristics.db sha256 $(sha256sum heuristics.db | cut -c1-8)"
echo '{"mixed_residual_std_waves": 0, "mixed_residual_std_scope": 0}' > $W/before.json; echo '{}' > $W/shipped.json
for v in before shipped; do
  echo; echo "## $v"
  PYTHONPATH=. ${PY:-.venv/bin/python} $R/fp8-mixed-bias/bias.py heuristics.db $W/$v.json $W/m1.db $W/m2.db $W/m3.db $W/m4.db
done
