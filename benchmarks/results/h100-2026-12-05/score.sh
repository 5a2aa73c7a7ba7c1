#!/usr/bin/env bash
# usage (repository root): bash benchmarks/results/h100-2026-12-05/score.sh > benchmarks/results/h100-2026-12-05/score.txt
# The shipped heuristics.db (learned on the H200) chooses for every shape of off-grid seeds 3 and 4 and mixed seed 5;
# each choice is scored with the times the H100 measured for it there (tuner evaluate --measured-on).
set -euo pipefail
here=$(dirname "$0"); w=/tmp/h100-2026-12-05; mkdir -p $w
T=".venv/bin/tuner"
for s in offgrid3 offgrid4 mixed5; do
  [ -f $w/$s.db ] || xz -dc $here/$s.db.xz > $w/$s.db
  echo "+ tuner evaluate --db heuristics.db --device \"NVIDIA H200\" --offgrid $s.db --measured-on \"NVIDIA H100 80GB HBM3\""
  COLUMNS=200 $T evaluate --db heuristics.db --device "NVIDIA H200" --offgrid $w/$s.db --measured-on "NVIDIA H100 80GB HBM3"
  $T evaluate --db heuristics.db --device "NVIDIA H200" --offgrid $w/$s.db --measured-on "NVIDIA H100 80GB HBM3" \
    --json > $w/$s.json
done
# seed 3 on the H200's times (../prefill-tiles/offgrid3.db.xz), restricted to the 579 shapes the H100 measured
[ -f $w/offgrid3-h200.db ] || xz -dc $here/../prefill-tiles/offgrid3.db.xz > $w/offgrid3-h200.db
python3 - $w/offgrid3.db $w/offgrid3-h200.db <<'PY'
import sqlite3, sys
keep = {k for (k,) in sqlite3.connect(sys.argv[1]).execute("select distinct problem_key from measurements where status = 'ok'")}
c = sqlite3.connect(sys.argv[2])
c.executemany("delete from measurements where problem_key = ?",
              [(k,) for (k,) in c.execute("select distinct problem_key from measurements").fetchall() if k not in keep])
c.commit()
PY
echo "+ tuner evaluate --db heuristics.db --device \"NVIDIA H200\" --offgrid offgrid3-h200.db (the same 579 shapes, H200 times)"
$T evaluate --db heuristics.db --device "NVIDIA H200" --offgrid $w/offgrid3-h200.db --json > $w/offgrid3-h200.json
echo "+ python benchmarks/targets.py offgrid3.json offgrid4.json mixed5.json offgrid3-h200.json"
python3 benchmarks/targets.py $w/offgrid3.json $w/offgrid4.json $w/mixed5.json $w/offgrid3-h200.json
