#!/usr/bin/env bash
# One device call: GPU test suite, compute-sanitizer, and optionally ncu source-level
# profiles of the fp16 kernels at N=C=K=4096, d=0.25. Logs land in $OUT (or ./gpu_out).
# Usage: bash tools/gpu_session.sh [tests] [sanitize] [ncu:B] [wgmma:B:DTYPE] [probe]
#        [sweep:NAME:SECONDS:ARGS] (ARGS: `python -m bench` options joined by "+") [multigpu]
#        [sdd-small-n]
# It first builds the compiled call path (tools/build_fastcall.sh: carry
# cubsparse/_cuda/_fastcall.c). `tests` spreads its xdist workers over every visible GPU;
# `multigpu` (two GPUs or more) runs the two-GPU tests, both data-parallel examples on two GPUs and the scaling benchmark.
# `sdd-small-n`: the small-N weight gradient's measurements (bench/NOTES.md 281-292): its
# grid test, the candidate short tiles, the TMA kernel at 64-128 rows for b = 128.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT="${OUT:-$PWD/gpu_out}"; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
bash tools/build_fastcall.sh  # (eager figures need the compiled call path)
summary=()
for step in "$@"; do
  case "$step" in
    tests)
      # (needs pytest-xdist; TESTS_K="" keeps the inductor test, which compiles for minutes)
      gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
      CUBSPARSE_TEST_DEVICES=$(seq -s, 0 $((gpus - 1))) CUBSPARSE_HYPOTHESIS_PROFILE=gpu \
        python3 -m pytest -q -p no:cacheprovider -n $((14 * gpus)) \
        -k "${TESTS_K-not inductor}" 2>&1 \
        | tee "$OUT/pytest.log" | tail -n 25
      summary+=("pytest: $(tail -n 1 "$OUT/pytest.log")") ;;
    sanitize)
      bash tests/sanitize.sh > "$OUT/sanitize.log" 2>&1
      rc=$?
      summary+=("sanitize rc=$rc $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize.log" \
        | tr '\n' ' ')") ;;
    ncu:*)
      b="${step#ncu:}"
      for k in dsd_tc sdd_tc; do
        ncu --set full -k "regex:$k" --launch-skip 1 --launch-count 1 -f -o "$OUT/${k}_b$b" \
          python3 tools/ncu_target.py "$b" > "$OUT/ncu_${k}_b$b.log" 2>&1
        ncu -i "$OUT/${k}_b$b.ncu-rep" --page source --csv --print-source sass \
          > "$OUT/${k}_b${b}_sass.csv" 2>&1
        ncu -i "$OUT/${k}_b$b.ncu-rep" --page details > "$OUT/${k}_b${b}_details.txt" 2>&1
      done
      summary+=("ncu b=$b done") ;;
    wgmma:*)  # the Hopper kernels: speed of light, memory, stall reasons, L2 fabric traffic
      IFS=: read -r _ b dt <<< "$step"
      tag="wgmma_b${b}_${dt}"  # one dsd and one sdd launch, the first (warm-up) pair skipped
      metrics=lts__t_sectors_srcunit_ltcfabric.sum,lts__t_sectors.sum
      metrics+=,lts__t_sector_hit_rate.pct,smsp__inst_executed.sum
      ncu --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
        --section SchedulerStats --section Occupancy --section LaunchStats \
        --metrics "$metrics" \
        -k "regex:(dsd|sdd)_wgmma" --launch-skip 2 --launch-count 2 -f -o "$OUT/$tag" \
        python3 tools/ncu_target.py "$b" "$dt" > "$OUT/ncu_$tag.log" 2>&1
      ncu -i "$OUT/$tag.ncu-rep" --page details > "$OUT/${tag}_details.txt" 2>&1
      summary+=("ncu wgmma b=$b $dt done") ;;
    sweep:*)  # sweep:NAME:SECONDS:ARGS, ARGS = `python -m bench` options joined by "+":
      # python -m bench --full --max-seconds SECONDS ARGS...; keeps $OUT/NAME.json and NAME.log
      IFS=: read -r _ name secs args <<< "$step"
      IFS=+ read -r -a extra <<< "$args"
      tmp="$(mktemp -d)"
      # No new case after SECONDS; a case still running 90 s later is cut short (its
      # results file holds every case finished before it).
      timeout $((secs + 90)) python3 -m bench --full --no-progress --no-plots \
        --max-seconds "$secs" --out "$tmp" "${extra[@]}" > "$OUT/$name.log" 2>&1
      rc=$?
      cp "$tmp"/results_*.json "$OUT/$name.json" 2>/dev/null
      summary+=("sweep $name rc=$rc $(grep -E '^status:' "$OUT/$name.log")") ;;
    multigpu)
      nvidia-smi topo -m
      timeout 400 python3 -m pytest -q -p no:cacheprovider -rs tests/test_devices.py \
        tests/test_distributed.py tests/test_ddp.py > "$OUT/pytest_2gpu.log" 2>&1
      summary+=("two-GPU tests: $(tail -n 1 "$OUT/pytest_2gpu.log")")
      run2="timeout 200 python3 -m torch.distributed.run --standalone --nproc-per-node=2"
      $run2 examples/ddp_train.py --device cuda \
        --steps 200 --per-gpu-batch 256 --width 1024 --blocksize 32 --dtype bfloat16 \
        > "$OUT/ddp_train.log" 2>&1
      summary+=("ddp_train rc=$? $(grep -E 'throughput|identical' "$OUT/ddp_train.log" | tr '\n' ' ')")
      $run2 examples/cupy_data_parallel.py \
        --backend cuda --steps 200 > "$OUT/cupy_dp.log" 2>&1
      summary+=("cupy_data_parallel rc=$? $(grep -E 'throughput|identical' "$OUT/cupy_dp.log" | tr '\n' ' ')")
      for rows in 32768 4096; do
        timeout 300 python3 -m bench.scaling --gpus 1,2 --per-gpu-batch $rows \
          --steps $((rows == 4096 ? 200 : 30)) --out "$OUT/scaling_$rows" \
          > "$OUT/scaling_$rows.log" 2>&1
        summary+=("scaling rows=$rows rc=$?" "$(tail -n 5 "$OUT/scaling_$rows.log")")
      done ;;
    sdd-small-n)
      CUBSPARSE_HYPOTHESIS_PROFILE=gpu timeout 200 python3 -m pytest -q -p no:cacheprovider \
        tests/test_cuda_tiles.py -k "short_sdd_grid" > "$OUT/pytest_sdd_grid.log" 2>&1
      summary+=("sdd grid test: $(tail -n 1 "$OUT/pytest_sdd_grid.log")")
      export PYTHONPATH="$PYTHONPATH:$PWD/tools"
      timeout 300 python3 tools/sdd_short_tiles.py --n 1,32 --ck 8192,12288 \
        --d 0.1,0.25,0.5 > "$OUT/sdd_short_tiles.txt" 2>&1
      summary+=("short tiles rc=$?")
      timeout 200 python3 tools/ab_decision.py --decision sdd_short --values true,false \
        --fixed sdd_tma=true,sdd_pair=false --ops sdd --n 64,96,128 --ck 8192,12288 \
        --b 128 --d 0.1,0.25,0.5 > "$OUT/sdd_tma_n64-128.txt" 2>&1
      summary+=("TMA sdd at 64-128 rows rc=$?") ;;
    probe)
      python3 tools/gpu_probe.py --speed 2>&1 | tee "$OUT/probe.log" | tail -n 30 ;;
  esac
done
printf '%s\n' "${summary[@]}"
