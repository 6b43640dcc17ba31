#!/usr/bin/env bash
# Run the representative GPU cases under compute-sanitizer: memcheck (out-of-bounds and
# misaligned accesses) and racecheck (shared-memory hazards). Needs a GPU and
# compute-sanitizer on PATH. Usage: bash tests/sanitize.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
status=0
for tool in memcheck racecheck; do
  echo "== compute-sanitizer --tool $tool"
  # API errors are not reported, memory and race errors are: where cuda.bindings is
  # installed the kernels launch through it, and its driver bindings' cuGetProcAddress_v2
  # calls return CUDA_ERROR_INVALID_VALUE, which memcheck counts as errors (see
  # bench/NOTES.md, "sanitizer and cuda.bindings").
  compute-sanitizer --tool "$tool" --report-api-errors no --error-exitcode 99 \
    --print-limit 20 \
    python3 tests/gpu_sanitize_cases.py || status=1
done
exit $status
