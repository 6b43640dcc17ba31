#!/usr/bin/env bash
# Same-GPU A/B of kernel sources, each form in its own process, in turn: for each round the
# files saved under ab_old/ replace their paths and COMMAND runs (output $OUT/ab_old_R.txt),
# then the working tree's own files come back and COMMAND runs again ($OUT/ab_new_R.txt).
# Kernels compile from the files at run time, so each process runs the form it found.
#   here:   mkdir -p ab_old && for f in FILES; do git show REF:$f > ab_old/$(basename $f); done
#   device: bash tools/kernel_ab.sh ROUNDS "COMMAND" FILES...
# e.g. bash tools/kernel_ab.sh 2 "python3 tools/sdd_short_tiles.py --b 128,64 --only 0 \
#        --eager --n 1,32,128 --ck 12288 --d 0.25,0.5" cubsparse/kernels/sm90.cuh \
#        cubsparse/kernels/sdd_wgmma.cuh
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD:$PWD/tools${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT="${OUT:-$PWD/gpu_out}"; mkdir -p "$OUT" ab_new
rounds=$1 cmd=$2; shift 2
for f in "$@"; do cp "$f" "ab_new/$(basename "$f")"; done
use() { for f in "$@"; do cp "ab_$form/$(basename "$f")" "$f"; done; }
for r in $(seq 1 "$rounds"); do
  for form in old new; do
    use "$@"
    timeout 240 bash -c "$cmd" > "$OUT/ab_${form}_$r.txt" 2>&1
    echo "$form round $r rc=$?"
  done
done
form=new; use "$@"
