#!/usr/bin/env bash
# Fit a device call's carry (the tracked files in the tree, untracked ones git does not ignore, and .gpu) under
# the device tool's 64 MiB, and put everything back after the call:
#   bash benchmarks/carry.sh slim [--vllm]   # before the call: set aside what a sweep does not read
#   bash benchmarks/carry.sh slim [--vllm] --sets A.jsonl...   # also every results file but these problem sets,
#                                            # so that .gpu/aot.txz (5.5 MB, h200_run.sh SAVE_AOT=1) fits too
#   bash benchmarks/carry.sh back            # after it: restore exactly what slim set aside
#   bash benchmarks/carry.sh size            # the carry's size now
# slim sets aside heuristics.db (h200_sets.sh restores it on the device from .gpu/heuristics.db.xz when that is
# carried), .gpu/heuristics.db.xz, .gpu/vllm.txz (kept with --vllm: the vLLM forward GPU tests read it and
# heuristics.db.xz) and the Optuna RDB wheels (alembic, sqlalchemy, mako: no sweep or GPU test imports them).
set -euo pipefail
CALLER=$PWD
cd "$(dirname "$0")/.."
# the device tool refused carries this script counts at 63.4-63.5 MiB and took one at 62.7 (2026-12-07): it counts
# a little more than these files, so keep 2 MiB spare
LIMIT=$((62 * 1024 * 1024))
AWAY=${CARRY_AWAY:-/tmp/switchyard-carry-away}

size() {   # bytes of the files a call carries: present tracked files, untracked unignored ones, and .gpu
  python3 - <<'PY'
import os, subprocess
names = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], capture_output=True,
                       check=True).stdout.decode().split("\0")
total = sum(os.path.getsize(n) for n in set(names) if n and os.path.isfile(n))
total += sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(".gpu") for f in fs)
print(total)
PY
}

report() {
  local n; n=$(size)
  echo "carry: $((n / 1024 / 1024)) MiB, at most 62 fit ($n bytes$([ "$n" -gt $LIMIT ] && echo ": OVER, set more aside"))"
}

slim() {
  local keep_vllm="" aside_results="" f rel
  local -A keep=()
  while [ $# -gt 0 ]; do
    case $1 in
      --vllm) keep_vllm=--vllm; shift ;;
      --sets) aside_results=1; shift
              while [ $# -gt 0 ] && [[ $1 != --* ]]; do     # each set as git names it, from the caller's folder
                rel=$(realpath -m --relative-to=. -- "$([[ $1 = /* ]] && echo "$1" || echo "$CALLER/$1")")
                git ls-files --error-unmatch -- "$rel" > /dev/null 2>&1 ||
                  { echo "slim --sets: '$1' is not a tracked file of this checkout"; exit 2; }
                keep[$rel]=1; shift
              done ;;
      *) echo "slim: unknown option '$1' (expected --vllm or --sets A.jsonl...)"; exit 2 ;;
    esac
  done
  [ -n "$aside_results" ] && [ ${#keep[@]} -eq 0 ] && { echo "slim --sets: name the problem sets the call measures"; exit 2; }
  [ -e "$AWAY" ] && { echo "$AWAY exists: run 'bash benchmarks/carry.sh back' first"; exit 1; }
  mkdir -p "$AWAY/.gpu/wheels"
  [ -f heuristics.db ] && mv heuristics.db "$AWAY/" && rm -f heuristics.db-shm heuristics.db-wal
  if [ "$keep_vllm" != "--vllm" ]; then
    for f in .gpu/vllm.txz .gpu/heuristics.db.xz; do [ -f "$f" ] && mv "$f" "$AWAY/.gpu/"; done
  fi
  for f in .gpu/wheels/alembic-* .gpu/wheels/sqlalchemy-* .gpu/wheels/mako-*; do [ -f "$f" ] && mv "$f" "$AWAY/.gpu/wheels/"; done
  if [ -n "$aside_results" ]; then      # the results' records (30 MB of databases and logs) are read by no device step
    while IFS= read -r -d '' f; do
      if [ -f "$f" ] && [ -z "${keep[$f]:-}" ]; then mkdir -p "$AWAY/$(dirname "$f")" && mv "$f" "$AWAY/$f"; fi
    done < <(git -c core.quotePath=false ls-files -z benchmarks/results)
  fi
  echo "set aside under $AWAY: $(cd "$AWAY" && find . -type f -not -path './benchmarks/*' | sed 's|^\./||' | tr '\n' ' ')"
  [ -n "$aside_results" ] && echo "  and $(find "$AWAY/benchmarks" -type f | wc -l) files of benchmarks/results (kept: ${!keep[*]})"
  report
}

back() {
  [ -d "$AWAY" ] || { echo "nothing set aside ($AWAY does not exist)"; exit 0; }
  (cd "$AWAY" && find . -type f) | while read -r f; do mkdir -p "$(dirname "$f")"; mv "$AWAY/$f" "$f"; done
  rm -rf "$AWAY"
  git diff --quiet -- heuristics.db || { echo "heuristics.db differs from the tracked file after restoring"; exit 1; }
  echo "restored"; report
}

case "${1:-}" in
  slim) shift; slim "$@" ;;
  back) back ;;
  size) report ;;
  *) echo "usage: bash benchmarks/carry.sh slim [--vllm] [--sets A.jsonl...] | back | size"; exit 2 ;;
esac
