#!/bin/bash
export PYTHONPATH=$PWD:$PWD/tools CUBSPARSE_HYPOTHESIS_PROFILE=gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p $OUT
for dt in float16 bfloat16; do
timeout 200 python tools/layout_ab.py --ops sdd --b 128,64 --layouts random,ba,ws,banded --d 0.05,0.1,0.25,0.5 \
  --dtype $dt --variants sdd_tail_splits=1,rule --reps 10 > $OUT/tail_rule_ab_$dt.txt 2>&1
grep -v "^      " $OUT/tail_rule_ab_$dt.txt | tail -10
done
timeout 280 python -m bench --full --n 8192 --ck 8192 --ops sdd --blocksizes 64,128 --densities 0.05,0.1,0.25,0.5 \
  --layouts random,ba,ws,banded --dtypes fp16,bf16 --sparse-only --contenders cubsparse,dense_cupy,stk --no-plots \
  --out $OUT/sweep_sdd_b64-128.json > $OUT/sweep.log 2>&1; tail -5 $OUT/sweep.log; ls $OUT
