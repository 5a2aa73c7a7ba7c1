#!/usr/bin/env bash
# CPU replay of committed H200 and H100 databases (no device; needs setup.sh's .venv and the sqlite3 command):
# the shipped heuristics.db with measured random mixed batches (H200 mixed seeds) imported as the families'
# mixed cells, scored on the other seeds and the serving replay; then two rules tried instead.
#   bash benchmarks/results/tried-random-corrections/run.sh > benchmarks/results/tried-random-corrections/run.txt
set -euo pipefail
D=benchmarks/results/tried-random-corrections; R=benchmarks/results
W=$(mktemp -d); trap 'git worktree remove --force "$W/tree" 2>/dev/null || true; rm -rf "$W"' EXIT
T=".venv/bin/tuner"; PY=".venv/bin/python"
unpack() { xz -dc $R/$1.db.xz > $W/$2.db; }
unpack h200-2026-12-06/mixed1 mixed1; unpack h200-2026-12-06/mixed2 mixed2; unpack h200-2026-12-06/mixed3 mixed3
unpack prefill-tiles/mixed4 mixed4; unpack h200-2026-12-06/replay replay
for n in mixed1 mixed2 mixed3 mixed4; do $T export --db $W/$n.db --out $W/$n.jsonl > /dev/null; done
# each set's mixed batches by KV dtype (and all of them): seed1-bf16.jsonl, mixed3-fp8.jsonl, ...
$PY - $W <<'PY'
import json, sys
w = sys.argv[1]
for n, tag in (("mixed1", "seed1"), ("mixed2", "mixed2"), ("mixed3", "mixed3"), ("mixed4", "mixed4")):
    outs = {k: open(f"{w}/{tag}-{k}.jsonl", "w") for k in ("bf16", "fp8", "all")}
    for line in open(f"{w}/{n}.jsonl"):
        m = json.loads(line)["measurement"]
        if m["max_kv_len"] > m["kv_len"]:
            outs[m["kv_dtype"]].write(line)
            outs["all"].write(line)
PY
cp heuristics.db $W/shipped.db
for v in bf16 fp8 all; do cp heuristics.db $W/$v.db && $T import $W/seed1-$v.jsonl --db $W/$v.db > /dev/null; done
# the FP8 skew grid's canonical mixed cells (one long request among equal short ones) replaced by seed 1's
cp $W/fp8.db $W/fp8-only-random.db
sqlite3 $W/fp8-only-random.db "attach '$W/shipped.db' as s;
  delete from measurements where max_kv_len > kv_len and problem_key in (select problem_key from s.measurements where max_kv_len > kv_len);
  delete from winners where max_kv_len > kv_len and problem_key in (select problem_key from s.winners where max_kv_len > kv_len);"
for db in shipped bf16 fp8 all fp8-only-random; do
  for n in mixed2 mixed3 mixed4 replay; do
    $T evaluate --db $W/$db.db --device "NVIDIA H200" --offgrid $W/$n.db --json > $W/$db-$n.json 2>/dev/null &
  done
done
wait
echo "## regret gm/max per mixed configuration (BF16 KV first), H200 mixed seeds 2-4 and the serving replay"
echo "## shipped: the FP8 skew grid's 134 canonical mixed batches; +bf16 / +fp8 / +all: seed 1's mixed batches of"
echo "## that KV dtype imported beside them; fp8-only-random: seed 1's FP8 batches instead of the canonical ones"
for n in mixed2 mixed3 mixed4 replay; do
  for db in shipped bf16 fp8 all fp8-only-random; do
    name=$db; [ $db != shipped ] && [ $db != fp8-only-random ] && name="+$db"
    $PY $D/summarize.py "$name" $n $W/$db-$n.json
  done
done
echo; echo "## The BF16 prior against seeds 1-3's BF16 mixed batches (bf16_fit.py)"
$PY $D/bf16_fit.py heuristics.db "NVIDIA H200" bf16 $W/mixed1.db $W/mixed2.db $W/mixed3.db
echo; echo "## Issue 25's targets (benchmarks/targets.py)"
for n in mixed2 mixed3 mixed4 replay; do
  for db in shipped fp8 fp8-only-random; do cp $W/$db-$n.json $W/$n-$db.json; $PY benchmarks/targets.py $W/$n-$db.json; done
done | sed "s|$W/||"

echo; echo "## Which sets are imported matters more than how many: two seeds' FP8 mixed batches imported, scored on the"
echo "## other seeds and the replay (FP8-KV mixed configurations pooled: regret gm/max, shipped -> with them)"
sets="mixed1 mixed2 mixed3 mixed4 replay"
for pair in "mixed1 mixed2" "mixed3 mixed4" "mixed1 mixed3" "mixed2 mixed4" "mixed1 mixed4"; do
  name=${pair// /+}; cp heuristics.db $W/$name.db
  for s in $pair; do f=$W/$s-fp8.jsonl; [ $s = mixed1 ] && f=$W/seed1-fp8.jsonl; $T import $f --db $W/$name.db > /dev/null; done
  for n in $sets; do
    case " $pair " in *" $n "*) continue ;; esac
    $T evaluate --db $W/$name.db --device "NVIDIA H200" --offgrid $W/$n.db --json > $W/$name-$n.json 2>/dev/null &
  done
  wait
  line="imported $name:"
  for n in $sets; do
    case " $pair " in *" $n "*) continue ;; esac
    [ -f $W/shipped-$n.json ] || $T evaluate --db heuristics.db --device "NVIDIA H200" --offgrid $W/$n.db --json > $W/shipped-$n.json 2>/dev/null
    line="$line $($PY $D/summarize.py fp8pair $n $W/shipped-$n.json $W/$name-$n.json)"
  done
  echo "$line"
done

echo; echo "## Two rules, not data (README, last part), pooled regret gm/max: the shipped model, then sibling.py (an FP8/FP8"
echo "## family borrowing its BF16-out sibling's corrections), then bf16-rules.patch's BF16CHUNK (a BF16 fixed split"
echo "## costs one wave of its chunks) and BF16CHUNK + BF16XQA (XQA with BF16 KV: one wave at the longest too)"
git worktree add -q --detach $W/tree 29d8347
git -C $W/tree apply "$PWD/$D/bf16-rules.patch"
cp heuristics.db $D/sibling.py $W/tree/
unpack h100-2026-12-06-grid/h100grid h100grid
unpack h100-2026-12-05/mixed5 h100-mixed5; unpack h100-mixed6-7/mixed6 h100-mixed6; unpack h100-mixed6-7/mixed7 h100-mixed7
H100="NVIDIA H100 80GB HBM3"
rules() {   # NAME ENV... -- TUNER...: pooled regret on every mixed set, each with its device's table
  name=$1; shift
  for n in mixed1 mixed2 mixed3 mixed4 replay h100-mixed5 h100-mixed6 h100-mixed7; do
    case $n in h100*) db=$W/h100grid.db; dev=$H100;; *) db=heuristics.db; dev="NVIDIA H200";; esac
    (cd $W/tree && env "$@" evaluate --db $db --device "$dev" --offgrid $W/$n.db --json > $W/rule-$name-$n.json 2>/dev/null) &
  done
  wait
  line="$name:"
  for n in mixed1 mixed2 mixed3 mixed4 replay h100-mixed5 h100-mixed6 h100-mixed7; do
    line="$line $n $($PY -c "import json,sys; o = json.load(open(sys.argv[1]))['overall']['learned']
print(f\"{o['regret_geomean']:.4f}/{o['regret_max']:.2f}\")" $W/rule-$name-$n.json)"
  done
  echo "$line"
}
APY=$PWD/$PY
rules shipped $APY -m tuner
rules sibling $APY sibling.py
rules bf16-chunk BF16CHUNK=1 $APY -m tuner
rules bf16-chunk+xqa BF16CHUNK=1 BF16XQA=1 $APY -m tuner

