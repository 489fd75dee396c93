#!/usr/bin/env bash
# Nsight Compute on the SGEMMs at 4096^3: the chapter's nvcc 3-stage build (from .ref, when present)
# beside asyncpipe's configurations (scripts/sgemm_sweep.py names). One launch each, clocks left alone.
# Writes $OUT/ncu_sgemm.txt. Usage (after gpu_check.sh's install step): bash scripts/profile_sgemm.sh s3 v4 8x16_s3 cublas
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/asyncpipe-out}; mkdir -p "$OUT"
LOG=$OUT/ncu_sgemm.txt; : > "$LOG"
SECTIONS="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section InstructionStats \
  --section LaunchStats --section Occupancy --section SourceCounters ${EXTRA_SECTIONS:-}"
NCU="ncu --clock-control none $SECTIONS --metrics sm__cycles_elapsed.avg.per_second,smsp__inst_executed.sum,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
if [ -d .ref ] && command -v nvcc >/dev/null; then
  nvcc -O3 -std=c++17 -arch=sm_90 -DSTAGES_N=3 .ref/gemm_cp_async_bench.cu -o /tmp/nvcc_s3 -lcuda 2>&1 | tail -3
  echo "==== nvcc cp.async 3 stages" >> "$LOG"
  $NCU -k regex:sgemm --launch-skip 1 --launch-count 1 /tmp/nvcc_s3 4096 >> "$LOG" 2>&1
fi
for name in "$@"; do
  if [ "$name" = cublas ]; then                # cuBLAS through torch: its kernel's launch, registers and stalls
    echo "==== cublas" >> "$LOG"
    $NCU -k regex:gemm --launch-count 1 python3 scripts/sgemm_sweep.py --once cublas >> "$LOG" 2>&1
    continue
  fi
  python3 scripts/sgemm_sweep.py --once "$name" --n 256 >/dev/null 2>&1   # compile outside the profiler
  echo "==== asyncpipe $name" >> "$LOG"
  $NCU -k regex:sgemm --launch-count 1 python3 scripts/sgemm_sweep.py --once "$name" >> "$LOG" 2>&1
done
grep -E "^====|Duration|SM Frequency|Compute \(SM\) Throughput|Issue Slots Busy|No Eligible|Eligible Warps|Warp Cycles Per Issued|Registers Per|Achieved Occupancy|Block Size|Grid Size|Shared Memory Config|L2 Hit Rate|L1/TEX Hit|DRAM Throughput|Mem Busy|Max Bandwidth|stalled|Stall|\([0-9]+, [0-9]+, [0-9]+\)x" "$LOG" | head -${PROFILE_LINES:-160}
