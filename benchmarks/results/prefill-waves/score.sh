#!/usr/bin/env bash
# CPU replay of measured off-grid sets, each decided with a device's table, three ways: "shipped", as shipped
# before prefill_between_keep was on; with the prefill wave rule of ../tried-prefill-waves/ (both from its
# worktree and patch, 7b8995e: later commits change mixed decode and that setting only, so its other decisions
# are today's); "keep", with PredictorConfig.prefill_between_keep 4 (the default then; 12 since
# benchmarks/results/prefill-keep/).
# usage: score.sh NAME=DB.xz:DEVICE:TABLE[:MEASURED_ON] ... (TABLE: the heuristics.db to decide with, .xz or
# not; MEASURED_ON: score on another device's times in DB, tuner evaluate --measured-on), e.g.
#   bash benchmarks/results/prefill-waves/score.sh "og1=benchmarks/results/h200-2026-12-05/offgrid-seed1.db.xz:NVIDIA H200:heuristics.db"
set -euo pipefail
[ $# -gt 0 ] || { sed -n 2,8p "$0"; exit 2; }
P=benchmarks/results/tried-prefill-waves
W=$(mktemp -d)
trap 'git worktree remove --force "$W/tree" 2>/dev/null || true; rm -rf "$W"' EXIT
git worktree add -q --detach $W/tree 7b8995e
git -C $W/tree apply "$PWD/$P/experiment.patch"
cp $P/with_rule.py $W/tree/
PY=${PY:-$PWD/.venv/bin/python}
RULE='{"tile": 128, "kernels": ["fa3", "cudnn"], "kv": ["bf16"]}'
echo '{"prefill_between_keep": 4}' > $W/keep.json
for spec in "$@"; do
  IFS='=' read -r name rest <<< "$spec"; IFS=':' read -r set device table measured_on <<< "$rest"
  xz -dc "$set" > $W/$name.db
  case $table in *.xz) xz -dc "$table" > $W/$name-table.db ;; *) cp "$table" $W/$name-table.db ;; esac
  on=(); [ -n "${measured_on:-}" ] && on=(--measured-on "$measured_on")
  args=(evaluate --db $W/$name-table.db --device "$device" --offgrid $W/$name.db "${on[@]}" --json)
  (cd $W/tree && PW="" $PY with_rule.py "${args[@]}") > $W/$name-shipped.json
  (cd $W/tree && PW="$RULE" $PY with_rule.py "${args[@]}") > $W/$name-waves.json
  $PY -m tuner "${args[@]}" --predictor-config $W/keep.json > $W/$name-keep.json
  for how in shipped waves keep; do
    $PY $P/summarize.py $how $name < $W/$name-$how.json
    $PY benchmarks/targets.py $W/$name-$how.json | sed "s|$W/||"
  done
done
