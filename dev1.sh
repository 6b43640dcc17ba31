#!/bin/bash
export PYTHONPATH=$PWD:$PWD/tools CUBSPARSE_HYPOTHESIS_PROFILE=gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p $OUT
timeout 200 python -m pytest -q -x -n 8 tests/test_cuda_tiles.py -k "tail_pieces or tma_sdd or paired_tma or two_parts" 2>&1 | tail -2
timeout 330 python tools/layout_ab.py --ops sdd --b 128,64 --layouts random,ba,ws,banded --d 0.05,0.1,0.25,0.5 \
  --variants sdd_tail_splits=1,sdd_tail_splits=2,sdd_tail_splits=4,sdd_tail_splits=8,rule --reps 10 > $OUT/tail_ab_fp16.txt 2>&1
grep -v "^      " $OUT/tail_ab_fp16.txt | tail -45
