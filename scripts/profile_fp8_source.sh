#!/usr/bin/env bash
# Nsight Compute's per-instruction warp stall sampling of fp8_gemm (FP8_OPTIONS as in scripts/fp8_gemm_once.py) and,
# with TORCH=1 (default), of torch._scaled_mm's kernel, at SHAPE (default 4096^3), one launch each, clocks left alone.
# Writes $OUT/sass_fp8_<TAG>.csv and sass_scaled_mm.csv (ncu's source page) and prints each one's hottest
# instructions (scripts/ncu_stall_top.py). Run after scripts/gpu_env.sh's install.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_env.sh || exit 1
SHAPE=${SHAPE:-"4096 4096 4096"}; TAG=${TAG:-default}
NCU="ncu --clock-control none --section SourceCounters --section WarpStateStats --section SpeedOfLight --import-source no"
profile() {   # name kernel-regex who
  $NCU -k regex:"$2" --launch-count 1 -f -o "$OUT/rep_$1" python3 scripts/fp8_gemm_once.py "$3" $SHAPE > "$OUT/ncu_$1.log" 2>&1
  ncu -i "$OUT/rep_$1.ncu-rep" --page source --csv --print-source sass > "$OUT/sass_$1.csv" 2>> "$OUT/ncu_$1.log"
  echo "==== $1 $SHAPE ${4:-}"
  ncu -i "$OUT/rep_$1.ncu-rep" --page details --csv 2>/dev/null | grep -E '"(Duration|SM Frequency|Compute \(SM\) Throughput|Issue Slots Busy|Warp Cycles Per Issued Instruction)"' | awk -F'","' '{print $(NF-2), $NF}'
  python3 scripts/ncu_stall_top.py "$OUT/sass_$1.csv" "${TOP:-45}"
}
python3 scripts/fp8_gemm_once.py asyncpipe $SHAPE >/dev/null 2>&1      # compile outside the profiler
profile "fp8_$TAG" fp8_gemm asyncpipe "${FP8_OPTIONS:-}"
[ "${TORCH:-1}" = 1 ] && profile scaled_mm "gemm|sm90|cutlass|nvjet|Kernel" scaled_mm
