#!/usr/bin/env bash
# usage (repository root, BASE as in benchmarks/results/waves/balance.sh):
#   BASE=/tmp/base bash benchmarks/results/h100-mixed6-7/score.sh > benchmarks/results/h100-mixed6-7/score.txt
# Mixed seeds 6 and 7, drawn and measured (on an H100) after kv_balance's settings were picked: the shipped
# H200 db's choices on the H100's times, before kv_balance (3c6a5ab: the code reads a copy marked schema 4)
# and now; then the targets (benchmarks/targets.py) now.
set -euo pipefail
here=benchmarks/results/h100-mixed6-7; w=/tmp/waves; root=$PWD
for s in mixed6 mixed7; do
  [ -f $w/h100-$s.db ] || xz -dc $here/$s.db.xz > $w/h100-$s.db
  cp $w/h100-$s.db $w/h100-$s-v4.db
  python3 -c "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute(\"update meta set value = '4' where key = 'schema_version'\"); c.commit()" $w/h100-$s-v4.db
done
sed -n '/^summary=/,/^}$/p' benchmarks/results/waves/balance.sh > $w/score-fn.sh
source $w/score-fn.sh; here=$root
H100=(--measured-on "NVIDIA H100 80GB HBM3")
for s in mixed6 mixed7; do
  score "before (partial 1.4)" h100-$s-v4 base "${H100[@]}"
  score "now" h100-$s '"fp8_unbalanced": 2.0, "unbalanced_wave_power": 1.6' "${H100[@]}"
done
for s in mixed6 mixed7; do
  .venv/bin/tuner evaluate --db heuristics.db --device "NVIDIA H200" --offgrid $w/h100-$s.db "${H100[@]}" --json \
    > $w/$s.json
done
(cd $w && python3 $root/benchmarks/targets.py mixed6.json mixed7.json)
