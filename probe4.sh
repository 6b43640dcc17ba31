#!/usr/bin/env bash
set -uo pipefail
export PYTHONPATH="$PWD:$PWD/tools" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
V=rule,sddtma:2.1.1.4
for cfg in "8192 8192" "2048 8192" "8192 12288" "4096 12288"; do set -- $cfg
python3 tools/layout_ab.py --n $1 --ck $2 --b 64 --d 0.03,0.05,0.08 --layouts random,ba,ws --ops sdd --variants $V --reps 10 > $OUT/h100_sdd64_n$1_ck$2.txt 2>&1
echo "N=$1 CK=$2"; grep -v "^      " $OUT/h100_sdd64_n$1_ck$2.txt | grep " sdd "
done
