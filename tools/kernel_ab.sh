#!/usr/bin/env bash
# Same-GPU A/B of kernel sources, each form in its own process, in turn: each round runs
# COMMAND once with the files saved under ab_old/ (mirroring their paths) in place and once
# with the working tree's own, the order alternating by round; output in
# $OUT/ab_{old,new}_R.txt, and the old-over-new table of their timed cases
# (tools/ab_summary.py) in $OUT/ab_summary.txt. Kernels compile from the files at run
# time, so each process runs the form it found. The working tree's files come back at the
# end, or on any exit.
#   here:   for f in FILES; do mkdir -p ab_old/$(dirname $f); git show REF:$f > ab_old/$f; done
#   device: bash tools/kernel_ab.sh ROUNDS "COMMAND" FILES...
# (ab_old/ is untracked and not ignored, so it travels with the tree; carry
# cubsparse/_cuda/_fastcall.c too, which tools/build_fastcall.sh builds first, or the eager
# figures of short kernels are the Python path's host time.) e.g.
#   bash tools/kernel_ab.sh 2 "python3 tools/sdd_short_tiles.py --b 128,64 --only 0 --eager \
#     --n 1,32,128 --ck 12288 --d 0.25,0.5" cubsparse/kernels/sm90.cuh \
#     cubsparse/kernels/sdd_wgmma.cuh
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD:$PWD/tools${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT="${OUT:-$PWD/gpu_out}"; mkdir -p "$OUT"
rounds=$1 cmd=$2; shift 2
bash tools/build_fastcall.sh  # (eager figures need the compiled call path)
files=("$@")
if [ -e ab_new ]; then echo "ab_new/ exists: a run was cut short; restore from it first" >&2; exit 1; fi
for f in "${files[@]}"; do
  [ -f "ab_old/$f" ] || { echo "no ab_old/$f: save the old form first" >&2; exit 1; }
done
use() {  # use FORM: put FORM's files in place
  local f
  for f in "${files[@]}"; do cp "ab_$1/$f" "$f"; done
}
for f in "${files[@]}"; do mkdir -p "ab_new/$(dirname "$f")"; cp "$f" "ab_new/$f"; done
trap 'use new && rm -rf ab_new' EXIT
for r in $(seq 1 "$rounds"); do
  order="old new"; [ $((r % 2)) -eq 0 ] && order="new old"
  for form in $order; do
    use "$form"
    timeout 240 bash -c "$cmd" > "$OUT/ab_${form}_$r.txt" 2>&1
    echo "$form round $r rc=$?"
  done
done
python3 tools/ab_summary.py "$OUT" | tee "$OUT/ab_summary.txt"
