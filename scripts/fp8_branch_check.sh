#!/usr/bin/env bash
# One GPU call for a change to the FP8 GEMM's kernel: its A/B against other versions first (scripts/fp8_swap_ab.sh:
# VARIANTS="name=path ...", e.g. main's kernel and host: `mkdir -p .before/main; for f in fp8_gemm.py
# fp8_gemm_kernel.py; do git show main:asyncpipe/kernels/$f > .before/main/$f; done`, carry .before), then the FP8
# GPU tests in debug mode (bounded waits) beside compute-sanitizer's three tools on a few of them, with what time is
# left; a short table last.
#   run(command="COMMIT=<sha> VARIANTS=main=.before/main bash scripts/fp8_branch_check.sh", carry=[".whl", ".before"])
# Environment: SHAPES, FORMS, ROUNDS, LIMIT (seconds per variant; see fp8_swap_ab.sh), TESTS (default the FP8 GEMM's
# GPU tests), TESTS_K (a -k expression for them), SAN_K (the sanitized tests' -k; default three configurations), BUDGET
# (seconds for the whole call, default 560: the tests get what the A/B leaves).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_env.sh || exit 1
T0=$SECONDS
nvidia-smi -L
echo "#### A/B: the tree (${COMMIT:-unknown}) against ${VARIANTS:-nothing}"
bash scripts/fp8_swap_ab.sh 2>&1 | grep -v "times\[form\]" | tail -60
AB_S=$((SECONDS - T0))
TESTS=${TESTS:-tests/kernels/test_fp8_gemm.py}
SAN_K=${SAN_K:-"128-6-c2x2 or 192-2-c2x1 or 64-2-c1x1"}
LEFT=$(( ${BUDGET:-560} - (SECONDS - T0) ))
for tool in memcheck racecheck synccheck; do
  timeout $((LEFT - 10)) python3 scripts/run_isolated.py -j 1 --timeout 200 --log "$OUT/sanitizer_${tool}_failures.log" \
    --wrap "compute-sanitizer --tool $tool --error-exitcode 99 --print-limit 10" -m "gpu or hopper" -k "$SAN_K" \
    $TESTS > "$OUT/sanitizer_$tool.log" 2>&1 &
done
ASYNCPIPE_DEBUG=1 ASYNCPIPE_DEBUG_TIMEOUT=3 timeout $((LEFT - 10)) python3 scripts/run_isolated.py -j 12 --timeout 200 \
  --log "$OUT/gpu_failures.log" -m "gpu or hopper" ${TESTS_K:+-k "$TESTS_K"} $TESTS > "$OUT/gpu_tests.log" 2>&1
grep -E "FAIL|ERROR" "$OUT/gpu_tests.log" | head -20
wait
echo; echo "==== summary (${COMMIT:-unknown}) ===="
printf '%-24s %s\n' "A/B" "$AB_S s, \$OUT/ab_*.json"
printf '%-24s %s\n' "GPU tests, debug mode" "$(tail -1 "$OUT/gpu_tests.log")"
for tool in memcheck racecheck synccheck; do
  grep FAIL "$OUT/sanitizer_$tool.log" | head -5
  printf '%-24s %s\n' "sanitizer $tool" "$(tail -1 "$OUT/sanitizer_$tool.log")"
done
printf '%-24s %s\n' "total" "$((SECONDS - T0)) s"
