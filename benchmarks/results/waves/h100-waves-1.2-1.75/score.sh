#!/usr/bin/env bash
# usage (repository root, BASE as in ../balance.sh): BASE=/tmp/base bash \
#   benchmarks/results/waves/h100-waves-1.2-1.75/score.sh > benchmarks/results/waves/h100-waves-1.2-1.75/score.txt
# The shipped H200 db's choices scored on the H100's times of the 1.2- and 1.75-wave points (measured after
# fp8_unbalanced was picked: a report set), before kv_balance (3c6a5ab) and now.
set -euo pipefail
here=benchmarks/results/waves/h100-waves-1.2-1.75; w=/tmp/waves
for s in long12 spread12 long175 spread175; do
  [ -f $w/h100-$s.db ] || xz -dc $here/$s.db.xz > $w/h100-$s.db
  # the code before reads schema 4: a copy marked so (it ignores the kv_balance column)
  cp $w/h100-$s.db $w/h100-$s-v4.db
  python3 -c "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute(\"update meta set value = '4' where key = 'schema_version'\"); c.commit()" $w/h100-$s-v4.db
done
sed -n '/^summary=/,/^}$/p' benchmarks/results/waves/balance.sh > $w/score-fn.sh
here_root=$PWD; source $w/score-fn.sh; here=$here_root
for s in long12 spread12 long175 spread175; do
  score "before (partial 1.4)" h100-$s-v4 base --measured-on "NVIDIA H100 80GB HBM3"
  score "fp8_unbalanced 1.2" h100-$s 1.2 --measured-on "NVIDIA H100 80GB HBM3"
done
