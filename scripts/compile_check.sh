#!/usr/bin/env bash
# Issue 17's checks on the GPU machine, in one call per STEPS set:
#   tests      the SGEMM's GPU tests (every configuration in LLVM loops), the first-call and warm tests, and GPU tests
#              of the kernels whose compile numba_liveness / numba_lowering changed (TESTS adds more), one process each
#   sanitizer  compute-sanitizer memcheck over SAN_TESTS (the LLVM-loop forms of kernels newly switched), beside
#   ab         scripts/llvm_ab.py: every bench SGEMM and three edge kernels, LLVM loops against expanded, same run
#   attention_ab  scripts/attention_llvm_ab.py: the attention kernels, LLVM loops against expanded, same run
#   bench      python -m asyncpipe bench --only ${BENCH_ONLY:-sgemm,first_call} into $OUT/bench.json
# Run: run(command="COMMIT=<sha> STEPS='tests sanitizer' bash scripts/compile_check.sh", carry=[".whl", ".ref"])
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_env.sh || exit 1
set -f                       # no globbing from here: test ids hold [brackets]
STEPS=${STEPS:-"tests sanitizer"}
export COMMIT=${COMMIT:-unknown}
nvidia-smi -L
TESTS_DEFAULT="tests/kernels/test_sgemm.py tests/test_first_call.py tests/test_warm.py tests/kernels/test_tma_add_one.py \
  tests/kernels/test_cluster_sum.py tests/kernels/test_transpose.py"
SAN_DEFAULT="tests/kernels/test_sgemm.py::test_sgemm_gpu[130-70-33-cp_async-3-16-8x16-dbuf] \
  tests/kernels/test_sgemm.py::test_sgemm_gpu[256-256-256-v4-1-8-8x8-plain] \
  tests/kernels/test_sgemm.py::test_sgemm_gpu[130-70-33-v4-1-8-8x8-plain] \
  tests/kernels/test_sgemm.py::test_sgemm_gpu[130-70-33-cp_async-3-8-8x8-plain] \
  tests/kernels/test_sgemm.py::test_sgemm_gpu[256-256-256-cp_async-4-16-8x8-plain] \
  tests/kernels/test_sgemm.py::test_sgemm_gpu[130-70-33-cp_async-3-8-8x16-plain] \
  tests/kernels/test_mx_codec.py::test_codec_bit_exact_gpu[513x1056-e4m3] \
  tests/kernels/test_mx_codec.py::test_codec_bit_exact_gpu[513x1056-mxfp4] \
  tests/kernels/test_mx_codec.py::test_codec_bit_exact_gpu[513x1056-nvfp4] \
  tests/kernels/test_mx_codec.py::test_codec_bit_exact_gpu[1x32-nvfp4]"
if [[ $STEPS == *sanitizer* ]]; then
  timeout "${SAN_LIMIT:-500}" python3 scripts/run_isolated.py -j 3 --timeout 400 --log "$OUT/sanitizer_memcheck_failures.log" \
    --wrap "compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 10" -m "gpu or hopper" \
    ${SAN_TESTS:-$SAN_DEFAULT} > "$OUT/sanitizer_memcheck.log" 2>&1 &
fi
if [[ $STEPS == *background_tests* ]]; then     # beside the A/B's compiles (their timings come after)
  timeout "${TEST_LIMIT:-540}" python3 scripts/run_isolated.py -j 4 --timeout 400 --log "$OUT/gpu_failures.log" \
    -m "gpu or hopper" ${TESTS_ONLY:-$TESTS_DEFAULT} > "$OUT/gpu_tests.log" 2>&1 &
elif [[ $STEPS == *tests* ]]; then
  timeout "${TEST_LIMIT:-540}" python3 scripts/run_isolated.py -j "${JOBS:-12}" --timeout 300 --log "$OUT/gpu_failures.log" \
    -m "gpu or hopper" ${PYTEST_K:+-k "$PYTEST_K"} ${TESTS_ONLY:-$TESTS_DEFAULT ${TESTS:-}} > "$OUT/gpu_tests.log" 2>&1
  echo "tests: $(tail -1 "$OUT/gpu_tests.log")"
fi
if [[ $STEPS == *" ab"* || $STEPS == "ab"* ]]; then
  timeout "${AB_LIMIT:-420}" python3 scripts/llvm_ab.py --jobs "${AB_JOBS:-15}" ${AB_ARGS:-} --json "$OUT/llvm_ab.json" 2>&1 | tee "$OUT/llvm_ab.log"
fi
if [[ $STEPS == *attention_ab* ]]; then
  timeout "${ATT_LIMIT:-240}" python3 scripts/attention_llvm_ab.py --json "$OUT/attention_llvm_ab.json" 2>&1 \
    | tee "$OUT/attention_llvm_ab.log"
fi
if [[ $STEPS == *bench* ]]; then
  timeout "${BENCH_LIMIT:-300}" python3 -m asyncpipe bench --only "${BENCH_ONLY:-sgemm,first_call}" --json "$OUT/bench.json" \
    $( [ -d .ref ] && echo --reference .ref ) \
    2>&1 | tail -60 | tee "$OUT/bench.log"
fi
wait
echo "==== summary ===="
for f in gpu_tests sanitizer_memcheck; do
  [ -f "$OUT/$f.log" ] && echo "$f: $(tail -1 "$OUT/$f.log")"
done
[ -f "$OUT/llvm_ab.log" ] && grep "ratio\|cuBLAS\|compiled\|Error\|error" "$OUT/llvm_ab.log" | tail -25
[ -f "$OUT/attention_llvm_ab.log" ] && grep "ratio\|compiled\|Error\|error" "$OUT/attention_llvm_ab.log" | tail -10
exit 0
