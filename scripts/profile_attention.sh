#!/usr/bin/env bash
# Nsight Compute on the attention kernel (bf16, head dim 128, 4 x 4096 x 16 heads: the bench's 4k record), causal and
# not, beside torch's cuDNN SDPA kernel on the same tensors. One launch each, clocks left alone. Writes
# $OUT/ncu_attention.txt and prints the lines that say what limits each. Run after scripts/gpu_env.sh's install.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_env.sh || exit 1
LOG=$OUT/ncu_attention.txt; : > "$LOG"
NCU="ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
  --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy \
  --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
for causal in 0 1; do
  python3 scripts/attention_once.py asyncpipe $causal >/dev/null 2>&1   # compile outside the profiler
  echo "==== asyncpipe causal=$causal" >> "$LOG"
  $NCU -k regex:attention_kernel --launch-count 1 python3 scripts/attention_once.py asyncpipe $causal >> "$LOG" 2>&1
  echo "==== cudnn causal=$causal" >> "$LOG"
  $NCU -k regex:"sdpa|fmha|cudnn|flash|attn" --launch-count 1 python3 scripts/attention_once.py cudnn $causal >> "$LOG" 2>&1
done
grep -E "^====|Duration|Compute \(SM\) Throughput|Memory Throughput|Issue Slots Busy|No Eligible|Eligible Warps|Warp Cycles Per Issued|Registers Per|Grid Size|Block Size|hmma|pipe_xu|L2 Hit Rate|DRAM Throughput|stalled_(barrier|long_scoreboard|wait|math|mio|short|membar|sleeping|dispatch|not_selected|selected|no_instruction|lg_throttle|tex|branch|drain|imc|misc)_per" "$LOG" | head -${PROFILE_LINES:-200}
