#!/usr/bin/env bash
# Nsight Compute on fp8_gemm and torch._scaled_mm (tensorwise) at SHAPE (default 4096 4096 4096), one launch each,
# clocks left alone. Writes $OUT/ncu_fp8_gemm.txt and prints what limits each. Run after scripts/gpu_env.sh's install.
# FP8_OPTIONS: fp8_gemm's options as JSON (scripts/fp8_gemm_once.py); TORCH=0 leaves torch out; TAG names the log.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_env.sh || exit 1
SHAPE=${SHAPE:-"4096 4096 4096"}
LOG=$OUT/ncu_fp8_gemm${TAG:+_$TAG}.txt; : > "$LOG"
NCU="ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
  --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy \
  --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg.per_second,lts__t_bytes.sum.per_second,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
python3 scripts/fp8_gemm_once.py asyncpipe $SHAPE >/dev/null 2>&1      # compile outside the profiler
echo "==== asyncpipe $SHAPE ${FP8_OPTIONS:-}" >> "$LOG"
$NCU -k regex:fp8_gemm --launch-count 1 python3 scripts/fp8_gemm_once.py asyncpipe $SHAPE >> "$LOG" 2>&1
[ "${TORCH:-1}" = 1 ] && echo "==== scaled_mm $SHAPE" >> "$LOG" &&
$NCU -k regex:"gemm|sm90|cutlass|Kernel" --launch-count 1 python3 scripts/fp8_gemm_once.py scaled_mm $SHAPE >> "$LOG" 2>&1
grep -E "^====|Duration|Compute \(SM\) Throughput|Memory Throughput|Issue Slots Busy|No Eligible|Registers Per|Grid Size|Block Size|gmma|per_second|L2 Hit Rate|DRAM Throughput|stalled_(barrier|long_scoreboard|wait|math|mio|short|membar|sleeping|dispatch|not_selected|selected|no_instruction|lg_throttle|branch|drain|misc|gmma)_per" "$LOG" | head -${PROFILE_LINES:-120}
