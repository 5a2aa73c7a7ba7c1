#!/usr/bin/env bash
# usage (repository root): bash benchmarks/results/tried-prune-refinement/run.sh > benchmarks/results/tried-prune-refinement/run.txt
set -euo pipefail
here=$(dirname "$0"); mkdir -p /tmp/prune
cp heuristics.db /tmp/prune/shipped.db
xz -dc benchmarks/results/h100-2026-12-06-mixedsweep/mixedsweep.db.xz > /tmp/prune/h100-mixedsweep.db
for db in shipped h100-mixedsweep; do
  for k in 1000 1.25; do PYTHONPATH=. .venv/bin/python $here/replay.py /tmp/prune/$db.db $k; done
done
