#!/usr/bin/env bash
set -uo pipefail
export PYTHONPATH="$PWD:$PWD/tools" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
python3 tools/layout_ab.py --b 64 --d 0.05,0.1,0.25,0.5 --layouts random,ba,ws --ops sdd --variants rule,sddtma:4.1.2.4,sddtma:4.1.2.5,sddtma:2.1.1.4 --reps 10 > $OUT/sdd64.txt 2>&1
python3 tools/layout_ab.py --b 128 --d 0.05,0.1 --layouts random,ba --ops sdd --variants rule,sdd_tail_splits=2,sdd_tail_splits=3 --reps 10 > $OUT/sdd128.txt 2>&1
grep -v "^      " $OUT/sdd64.txt | tail -40
grep -A3 "summary" $OUT/sdd128.txt; grep -v "^      " $OUT/sdd128.txt | head -12
