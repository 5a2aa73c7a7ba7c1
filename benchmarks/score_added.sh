#!/usr/bin/env bash
# Shapes measured on a GPU (tuner sweep --problems: a tile set, a set of batch rows), added to that GPU's table and
# scored on its committed off-grid and mixed-batch sets three ways: the table without them; with them as measured alone (corrections
# near them, as the sweep stores --problems rows); with them as grid rows (points of the estimators). The shipped
# prefill tile set is grid rows, and better so: pooled 1.0018-1.0024 on H200 seeds 1-4, 1.0024-1.0028 read as
# corrections (benchmarks/results/prefill-tiles/alone-vs-grid.txt).
#   bash benchmarks/score_added.sh h200 A.db[.xz] [B.db[.xz] ...]   # the shipped db; H200 off-grid seeds 1-4, mixed 1-4
#   bash benchmarks/score_added.sh h100 A.db[.xz] [B.db[.xz] ...]   # the H100 grid; H100 seeds 3-8, prefill-waves pw1-5,
#                                                                   # mixed 6-7
# Off-grid lines: pooled regret, configurations within issue 24's gm 1.02 and max 1.10; mixed lines (mN): every
# batch's regret, FP8-KV configurations within issue 25's gm 1.03 and max 1.15 (targets.py's criteria).
# An argument named offgridN, offgrid-seedN, mixedN or mixed-seedN (.db or .db.xz: a fresh off-grid or mixed-batch
# seed, e.g. offgrid9) is scored, not added.
# Run from anywhere; about 30-90 s.
set -euo pipefail
gpu=${1:-}; shift || true
case $gpu in
  h200) dev="NVIDIA H200" ;;
  h100) dev="NVIDIA H100 80GB HBM3" ;;
  *) echo "usage: score_added.sh h200|h100 ADDED.db[.xz]... (got '$gpu')" >&2; exit 2 ;;
esac
[ $# -gt 0 ] || { echo "give at least one database of shapes to add (or an offgridN database to score)" >&2; exit 2; }
args=()
for f in "$@"; do
  [ -f "$f" ] || { echo "no such file: $f" >&2; exit 2; }
  args+=("$(realpath "$f")")
done
cd "$(dirname "$0")/.."
R=benchmarks/results; W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
T=.venv/bin/tuner; PY=.venv/bin/python
u() { xz -dcf "$1" > "$W/$2.db"; }       # -f: a plain .db passes through
case $gpu in
  h200) cp heuristics.db "$W/table.db"
        u $R/h200-2026-12-05/offgrid-seed1.db.xz s1; u $R/h200-2026-12-06/offgrid2.db.xz s2
        u $R/prefill-tiles/offgrid3.db.xz s3; u $R/h200-offgrid4-waves/offgrid4.db.xz s4; sets=(s1 s2 s3 s4)
        for i in 1 2 3; do u $R/h200-2026-12-06/mixed$i.db.xz m$i; done; u $R/prefill-tiles/mixed4.db.xz m4
        sets+=(m1 m2 m3 m4) ;;
  h100) u $R/h100-2026-12-06-grid/h100grid.db.xz table
        u $R/h100-2026-12-05/offgrid3.db.xz s3; u $R/h100-2026-12-05/offgrid4.db.xz s4
        u $R/h100-offgrid5-tiered/offgrid5.db.xz s5; u $R/h100-2026-12-07c-mixed-sweep/offgrid6.db.xz s6
        u $R/h100-2026-12-07e-alone/offgrid7.db.xz s7; u $R/h100-2026-12-07e-alone/offgrid8.db.xz s8
        sets=(s3 s4 s5 s6 s7 s8)
        for i in 1 2 3 4 5; do u $R/prefill-waves/pw$i.db.xz pw$i; sets+=(pw$i); done
        for i in 6 7; do u $R/h100-mixed6-7/mixed$i.db.xz m$i; sets+=(m$i); done ;;
esac
echo "tree $(git describe --always --dirty), $dev, table sha256 $(sha256sum "$W/table.db" | cut -c1-8)"
holds() {   # db: how many measurements of $dev it holds
  $PY -c "import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from measurements m join \
environments e on e.id = m.env_id where e.device_name = ?', (sys.argv[2],)).fetchone()[0])" "$1" "$dev"
}
grid_rows() {   # db: how many of $dev's measurements are grid rows (not measured alone; before schema 6 all were)
  $PY -c "import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
alone = 'coalesce(m.alone, 0)' if 'alone' in [r[1] for r in c.execute('pragma table_info(measurements)')] else '0'
print(c.execute(f'select count(*) from measurements m join environments e on e.id = m.env_id where e.device_name = ? \
and {alone} = 0', (sys.argv[2],)).fetchone()[0])" "$1" "$dev"
}
cp "$W/table.db" "$W/alone.db"; cp "$W/table.db" "$W/grid.db"
for f in "${args[@]}"; do
  name=$(basename "$f"); name=${name%.xz}; name=${name%.db}
  if [[ $name =~ ^(offgrid|mixed)(-seed)?([0-9]+)$ ]]; then
    s=${BASH_REMATCH[1]:0:1}${BASH_REMATCH[3]}; s=${s/o/s}          # s9 for offgrid9, m8 for mixed8
    [[ " ${sets[*]} " == *" $s "* ]] && { echo "$f: ${BASH_REMATCH[1]} seed ${BASH_REMATCH[3]} is scored already" >&2; exit 2; }
    u "$f" "$s"; sets+=("$s")
    [ "$(holds "$W/$s.db")" -gt 0 ] || { echo "$f holds no measurements of $dev" >&2; exit 2; }
    echo "scored: $f"; continue
  fi
  u "$f" add
  [ "$(holds "$W/add.db")" -gt 0 ] || { echo "$f holds no measurements of $dev: nothing to add to its table" >&2; exit 2; }
  [ "$(grid_rows "$W/add.db")" = 0 ] ||
    { echo "$f holds grid rows of $dev: add sets measured by tuner sweep --problems (no --search adaptive)" >&2; exit 2; }
  $T export --db "$W/add.db" --device "$dev" --out "$W/add.jsonl" > /dev/null
  $T import "$W/add.jsonl" --db "$W/alone.db" > /dev/null
  msg=$($T import "$W/add.jsonl" --db "$W/grid.db" --as-grid)
  echo "added: $f ($msg)"
done
line() {   # json label: targets.py's criteria, one aligned line
  $PY -c "import json, sys; sys.path.insert(0, 'benchmarks'); from targets import brief
print(brief(json.load(open(sys.argv[1])), sys.argv[2]))" "$@"
}
for s in "${sets[@]}"; do
  pids=(); for t in table alone grid; do $T evaluate --db "$W/$t.db" --device "$dev" --offgrid "$W/$s.db" --json > "$W/e-$s-$t.json" & pids+=($!); done
  rc=0; for p in "${pids[@]}"; do wait "$p" || rc=$?; done     # both finish before the trap removes $W
  [ $rc -eq 0 ] || { echo "scoring $s failed" >&2; exit $rc; }
  echo "$s:"; line "$W/e-$s-table.json" "table"; line "$W/e-$s-alone.json" "+ alone"; line "$W/e-$s-grid.json" "+ grid"
done
