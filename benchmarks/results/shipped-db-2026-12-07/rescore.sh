#!/usr/bin/env bash
# The committed H200 off-grid seeds 1-4 and mixed seeds 1-4, scored on the CPU with this tree and the shipped
# db (targets.py's brief lines): unchanged by this session's dispatcher changes. Run from the repository root.
set -euo pipefail
R=benchmarks/results; W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
xz -dc $R/h200-2026-12-05/offgrid-seed1.db.xz > $W/o1.db; xz -dc $R/h200-2026-12-06/offgrid2.db.xz > $W/o2.db
xz -dc $R/prefill-tiles/offgrid3.db.xz > $W/o3.db; xz -dc $R/h200-offgrid4-waves/offgrid4.db.xz > $W/o4.db
for i in 1 2 3; do xz -dc $R/h200-2026-12-06/mixed$i.db.xz > $W/m$i.db; done
xz -dc $R/prefill-tiles/mixed4.db.xz > $W/m4.db; cp heuristics.db $W/h.db
echo "tree $(git describe --always --dirty)"
for s in o1 o2 o3 o4 m1 m2 m3 m4; do
  .venv/bin/tuner evaluate --db $W/h.db --device "NVIDIA H200" --offgrid $W/$s.db --json > $W/e-$s.json
  .venv/bin/python -c "import json, sys; sys.path.insert(0, 'benchmarks'); from targets import brief
print(sys.argv[2], brief(json.load(open(sys.argv[1])), 'now'))" $W/e-$s.json $s
done
