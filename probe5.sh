#!/usr/bin/env bash
set -uo pipefail
export PYTHONPATH="$PWD" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
git log --oneline -1 2>/dev/null | head -1
timeout 540 python3 -m bench --full --n 8192 --ck 8192 --ops xw,dywt,sdd --blocksizes 64,128 --densities 0.05,0.1,0.25,0.5 --layouts random,ba,ws,banded --dtypes fp16,bf16 --sparse-only --contenders cubsparse,dense_cupy --no-plots --no-progress --out $OUT/x --max-seconds 420 > $OUT/sweep.log 2>&1
echo rc=$?
cp $OUT/x/results_*.json $OUT/sweep.json && gzip -9 $OUT/sweep.json && rm -rf $OUT/x
grep -E "^status" $OUT/sweep.log
python3 -m bench.report --milestones $OUT/sweep.json.gz
