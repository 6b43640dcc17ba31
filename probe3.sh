#!/usr/bin/env bash
set -uo pipefail
export PYTHONPATH="$PWD:$PWD/tools" PYTHONUNBUFFERED=1
V=rule,sddtma:2.1.1.4,sddtma:2.1.1.3,sddtma:4.1.2.4,sddtma:4.1.1.4
for cfg in "8192 8192" "2048 8192" "8192 12288" "4096 12288"; do set -- $cfg
python3 tools/layout_ab.py --n $1 --ck $2 --b 64 --d 0.03,0.05,0.08 --layouts random,ba,ws --ops sdd --variants $V --reps 10 > $OUT/sdd64_n$1_ck$2.txt 2>&1
echo "N=$1 CK=$2"; grep -v "^      " $OUT/sdd64_n$1_ck$2.txt | grep " sdd "
done
python3 tools/layout_ab.py --n 8192 --ck 8192 --b 64 --d 0.05 --layouts random --ops sdd --variants rule,sddtma:2.1.1.4 --dtype bfloat16 --reps 10 2>&1 | grep " sdd "
