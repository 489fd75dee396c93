#!/usr/bin/env bash
# The one command for the GPU machine: installs the carried wheels, runs the GPU test suite,
# compute-sanitizer over it, and the benchmarks (with the chapter's nvcc programs as yardsticks), and prints a short
# table last. Run from the repository root, through the device tool:
#   run(command="COMMIT=<sha of this tree> bash scripts/gpu_check.sh", carry=[".whl", ".ref"])
# .whl holds numpy 2.4 (the image's numpy 2.5 breaks numba-cuda 0.30.4) and pytest; .ref is an
# ignored copy of ../shared/reference (the yardstick programs; never committed).
# Environment: STEPS (default "tests debug slow sanitizer bench"; "slow": the offline SASS tests CI leaves out (SLOW_JOBS);
# "debug": the GPU tests of the kernels with waits again under
# ASYNCPIPE_DEBUG=1 (DEBUG_TESTS, DEBUG_TIMEOUT); add "tune" for the tuner's tables (TUNE_KERNELS, TUNE_ARGS), "sweep" for
# scripts/sgemm_sweep.py, "profile" for scripts/profile_sgemm.sh over PROFILE (sweep names), "order" for
# scripts/stage_order.py (ORDER_ARGS)), PYTEST_ARGS, JOBS, SANITIZER_TOOLS, SANITIZER_TESTS,
# PYTEST_K (a -k expression), SAN_JOBS, SAN_SPLIT ("file": one sanitizer process per test file, the default; "test":
# one per test, for files whose kernels take long to compile), SANITIZER_LIMIT (seconds), TEST_TIMEOUT (seconds per
# test), BENCH_ARGS, COMMIT (the commit of the tree; the device's git copy is not asked).
set -uo pipefail
cd "$(dirname "$0")/.."
export STEPS=${STEPS:-"tests debug slow sanitizer bench"}
source scripts/gpu_env.sh || exit 1
SUMMARY=$OUT/summary.txt; : > "$SUMMARY"
row() { printf '%-28s %s\n' "$1" "$2" | tee -a "$SUMMARY"; }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import numpy, numba, numba.cuda as c; print('numpy', numpy.__version__, 'numba-cuda', c.__version__ if hasattr(c,'__version__') else '?')"
row "gpu" "$(head -1 "$OUT/gpu.txt")"
# COMMIT: the commit of the tree that runs, from the caller's checkout. The device's own git copy can lag
# behind the tree it was handed (it named an older commit twice), so it is never asked: without COMMIT
# the records say "unknown" rather than a wrong commit.
if [ -z "${COMMIT:-}" ]; then
  echo "warning: COMMIT is not set (COMMIT=\$(git rev-parse --short HEAD) bash scripts/gpu_check.sh, computed where the tree was committed); records will say 'unknown'"
fi
export COMMIT=${COMMIT:-unknown}
row "date / commit" "$(date -u +%F) $COMMIT"

# compute-sanitizer: each tool over every primitive's GPU tests and the chapter kernels at small
# sizes (one process per test file; the benchmarks' sizes are not sanitized). The three tools run in
# the background, beside the plain test run, to fit the GPU machine's time.
SANITIZER_DEFAULT="tests/ptx tests/kernels/test_tma_add_one.py tests/kernels/test_cluster_sum.py \
  tests/kernels/test_sgemm.py::test_sgemm_gpu[130-70-33-cp_async-3-8-8x8-plain] tests/kernels/test_sgemm.py::test_sgemm_gpu[256-256-256-cp_async-3-8-8x8-plain] \
  tests/kernels/test_sgemm.py::test_sgemm_gpu[256-256-256-v4-1-8-8x8-plain] tests/kernels/test_sgemm.py::test_sgemm_gpu[256-256-256-cp_async-4-16-8x8-plain] \
  tests/kernels/test_sgemm.py::test_sgemm_gpu[130-70-33-cp_async-3-8-8x16-plain] tests/kernels/test_sgemm.py::test_sgemm_gpu[256-256-256-cp_async-3-8-8x16-plain] \
  tests/kernels/test_sgemm.py::test_sgemm_gpu[130-70-33-cp_async-3-16-8x16-dbuf] tests/kernels/test_sgemm.py::test_sgemm_gpu[256-256-256-cp_async-3-16-8x16-dbuf] \
  tests/kernels/test_sgemm.py::test_sgemm_gpu[130-70-33-cp_async-3-16-8x16-kmajor] tests/kernels/test_sgemm.py::test_sgemm_gpu[256-256-256-cp_async-3-16-8x16-kmajor] \
  tests/kernels/test_transpose.py \
  tests/kernels/test_vector.py tests/pipeline \
  tests/kernels/test_wgmma_gemm.py::test_wgmma_gemm_gpu[default-1000x776x520-direct] \
  tests/kernels/test_wgmma_gemm.py::test_wgmma_gemm_gpu[default-1000x776x520-tma] \
  tests/kernels/test_wgmma_gemm.py::test_wgmma_gemm_gpu[bn256_c2_bt_s3-1000x776x520-tma]"
JOBS=${JOBS:-12}
SAN_JOBS=${SAN_JOBS:-4}
declare -A SAN_T0
if [[ $STEPS == *sanitizer* ]]; then
  for tool in ${SANITIZER_TOOLS:-memcheck racecheck synccheck}; do
    SAN_T0[$tool]=$(date +%s)
    timeout "${SANITIZER_LIMIT:-600}" python3 scripts/run_isolated.py -j "$SAN_JOBS" $( [ "${SAN_SPLIT:-file}" = file ] && echo --per-file ) --timeout 500 \
      --log "$OUT/sanitizer_${tool}_failures.log" \
      --wrap "compute-sanitizer --tool $tool --error-exitcode 99 --print-limit 10" \
      -m "gpu or hopper" ${SANITIZER_TESTS:-$SANITIZER_DEFAULT} > "$OUT/sanitizer_$tool.log" 2>&1 &
  done
fi

# the tests CI leaves out (-m slow): the offline SASS tests of the expanded SGEMM tiles (minutes of numba each), then
# the simulator cases of 8 s and more that others cover in CI, on the CPU cores beside the GPU tests
if [[ $STEPS == *slow* ]]; then
  SLOW_T0=$(date +%s)
  { python3 -m pytest -q -n "${SLOW_JOBS:-4}" -m slow tests > "$OUT/slow_sass.log" 2>&1
    NUMBA_ENABLE_CUDASIM=1 python3 -m pytest -q -n "${SLOW_JOBS:-4}" -m slow tests > "$OUT/slow_sim.log" 2>&1; } &
fi

export TUNE_KERNELS=${TUNE_KERNELS:-"sgemm row_sum"}   # which kernels the tune step tunes (see below)
# compile the SGEMM's kernels (the bench's configurations, and the tuner's candidates) in parallel processes while
# the tests run, into numba's disk cache (asyncpipe.jit_cache), which hands them to the tuner and the bench:
# asyncpipe.warm (python -m asyncpipe warm's pool; the longest compiles, the 8 x 16 tiles, first)
if [[ $STEPS == *tune* || $STEPS == *bench* ]]; then
  python3 - > "$OUT/warm.log" 2>&1 <<'PY' &
import os
from asyncpipe import warm
from asyncpipe.bench import sgemm_configs
configs = sgemm_configs() if "bench" in os.environ["STEPS"] else []                  # what the bench times
if "tune" in os.environ["STEPS"] and "sgemm" in os.environ["TUNE_KERNELS"]:           # the tuner's candidates
    configs += warm.tuner_sgemm_configs(os.environ.get("TUNE_ARGS", ""))             # as TUNE_ARGS narrows them
raise SystemExit(warm.warm(warm.sgemm_targets(list(dict.fromkeys(configs)), "gpu_check"), jobs=12))
PY
fi

# GPU tests: one process per test (a sticky CUDA error would otherwise fail every later test in
# the process and hide its cause), JOBS at a time.
if [[ $STEPS == *tests* ]]; then
  t0=$(date +%s)
  python3 scripts/run_isolated.py -j "$JOBS" --timeout "${TEST_TIMEOUT:-300}" --log "$OUT/gpu_failures.log" -m "gpu or hopper" ${PYTEST_K:+-k "$PYTEST_K"} ${PYTEST_ARGS:-tests} \
    > "$OUT/gpu_tests.log" 2>&1
  grep FAIL "$OUT/gpu_tests.log" | head -40
  row "gpu tests" "$(tail -1 "$OUT/gpu_tests.log") ($(( $(date +%s) - t0 )) s)"
fi
# debug mode (ASYNCPIPE_DEBUG=1: the bounded waits, asyncpipe/backend/hang.py) must change no answer: the GPU tests
# of every kernel with mbarrier waits, named or cluster barriers, run again in it (DEBUG_TESTS)
DEBUG_DEFAULT="tests/kernels/test_wgmma_gemm.py tests/kernels/test_tma_add_one.py tests/kernels/test_cluster_sum.py \
  tests/pipeline tests/ptx/test_mbarrier.py tests/ptx/test_barrier.py tests/ptx/test_cluster.py tests/ptx/test_bulk_tensor.py \
  tests/ptx/test_bulk.py tests/ptx/test_wgmma.py"
if [[ $STEPS == *debug* ]]; then
  t0=$(date +%s)
  ASYNCPIPE_DEBUG=1 ASYNCPIPE_DEBUG_TIMEOUT=${DEBUG_TIMEOUT:-5} python3 scripts/run_isolated.py -j "$JOBS" \
    --timeout "${TEST_TIMEOUT:-300}" --log "$OUT/debug_failures.log" -m "gpu or hopper" ${DEBUG_TESTS:-$DEBUG_DEFAULT} \
    > "$OUT/debug_tests.log" 2>&1
  grep FAIL "$OUT/debug_tests.log" | head -40
  row "gpu tests, ASYNCPIPE_DEBUG=1" "$(tail -1 "$OUT/debug_tests.log") ($(( $(date +%s) - t0 )) s)"
fi
wait
if [[ $STEPS == *slow* ]]; then
  grep -E "FAILED|ERROR" "$OUT/slow_sass.log" | head -20
  row "slow SASS tests" "$(tail -1 "$OUT/slow_sass.log") ($(( $(date +%s) - SLOW_T0 )) s)"
  grep -E "FAILED|ERROR" "$OUT/slow_sim.log" | head -20
  row "slow simulator tests" "$(tail -1 "$OUT/slow_sim.log")"
fi
if [[ $STEPS == *sanitizer* ]]; then
  for tool in ${SANITIZER_TOOLS:-memcheck racecheck synccheck}; do
    grep FAIL "$OUT/sanitizer_$tool.log" | head -20
    row "sanitizer $tool" "$(tail -1 "$OUT/sanitizer_$tool.log") ($(( $(date +%s) - ${SAN_T0[$tool]} )) s)"
  done
fi

# the tuner on the SGEMM at 4096^3: every stage count of every (tile, bk) timed (the pruned ones too,
# to check the model's pruning; TUNE_ARGS narrows it, e.g. "--tile 8x8 --bk 8"); its table is
# bench/tune_h200.json once committed
# TUNE_KERNELS (default "sgemm row_sum") picks which; row_sum is examples/rowsum_tune.py, a kernel that is not in
# the project, tuned end to end through the CLI (its table is bench/tune_h200_row_sum.json once committed)
if [[ $STEPS == *tune* && $TUNE_KERNELS == *sgemm* ]]; then
  python3 -m asyncpipe tune sgemm --m 4096 --n 4096 --k 4096 ${TUNE_ARGS:-} \
    --measure-pruned --rounds 5 --json "$OUT/tune_h200.json" 2>&1 | tail -75
  row "tune" "$OUT/tune_h200.json"
fi
if [[ $STEPS == *tune* && $TUNE_KERNELS == *row_sum* ]]; then
  python3 -m asyncpipe tune examples/rowsum_tune.py:row_sum --problem rows=8192,cols=8192 \
    --measure-pruned --rounds 5 --json "$OUT/tune_h200_row_sum.json" 2>&1 | tail -40
  row "tune row_sum" "$OUT/tune_h200_row_sum.json"
fi

if [[ $STEPS == *sweep* ]]; then
  python3 scripts/sgemm_sweep.py ${SWEEP_ARGS:-} 2>&1 | tee "$OUT/sweep.log" | grep -v "^{"
  row "sweep" "$(tail -1 "$OUT/sweep.log" | cut -c1-400)"
fi
if [[ $STEPS == *order* ]]; then
  python3 scripts/stage_order.py --json "$OUT/stage_order.json" ${ORDER_ARGS:-} 2>&1 | tail -40 | tee "$OUT/stage_order.log"
  row "stage order" "$OUT/stage_order.json"
fi
if [[ $STEPS == *profile* ]]; then
  bash scripts/profile_sgemm.sh ${PROFILE:-s3 v4 8x16_s3}
  row "profile" "$OUT/ncu_sgemm.txt"
fi

if [[ $STEPS == *bench* ]] && python3 -c "import asyncpipe.bench" 2>/dev/null; then
  python3 -m asyncpipe bench --json "$OUT/bench.json" $( [ -d .ref ] && echo --reference .ref ) ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log"
  row "bench" "$OUT/bench.json"
fi

echo; echo "==== summary ===="; cat "$SUMMARY"
