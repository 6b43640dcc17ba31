#!/bin/bash
export PYTHONPATH=$PWD
compute-sanitizer --tool memcheck --report-api-errors no --print-limit 20 python3 tests/gpu_sanitize_cases.py > /tmp/mc.txt 2>&1
grep -E "ERROR SUMMARY|done|Traceback|Error:" /tmp/mc.txt | tail -6
