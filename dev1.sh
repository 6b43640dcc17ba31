#!/bin/bash
export PYTHONPATH=$PWD:$PWD/tools CUBSPARSE_HYPOTHESIS_PROFILE=gpu
mkdir -p $OUT
timeout 200 python -m pytest -q -n 14 tests/test_cuda_tiles.py tests/test_cuda_rules.py tests/test_cuda_plans.py -k "tail or tma_sdd or paired_tma or two_parts or cluster or split" 2>&1 | tail -2
compute-sanitizer --tool racecheck --report-api-errors no --print-limit 20 python3 tools/racecheck_new.py 2>&1 | grep -E "SUMMARY|mismatch|last round" | tail -5
compute-sanitizer --tool memcheck --report-api-errors no --print-limit 20 python3 tools/racecheck_new.py 2>&1 | grep -E "ERROR SUMMARY|mismatches" | tail -2
compute-sanitizer --tool memcheck --report-api-errors no --print-limit 20 python3 tests/gpu_sanitize_cases.py 2>&1 | grep -E "ERROR SUMMARY|mismatch" | tail -3
timeout 100 python tools/layout_ab.py --ops sdd --b 128,64 --layouts ws,banded --d 0.1,0.25 --variants sdd_tail_splits=1,rule --reps 10 > $OUT/batch4_ab.txt 2>&1
grep -v "^      " $OUT/batch4_ab.txt | tail -12
