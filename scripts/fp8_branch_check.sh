#!/usr/bin/env bash
# One GPU call for a change to the FP8 GEMM's kernel: its A/B against other versions (scripts/fp8_swap_ab.sh:
# VARIANTS="name=path ...", e.g. main's kernel and host: `mkdir -p .before/main; for f in fp8_gemm.py
# fp8_gemm_kernel.py; do git show main:asyncpipe/kernels/$f > .before/main/$f; done`, carry .before), then
# scripts/gpu_check.sh's debug and sanitizer steps over the FP8 GEMM's GPU tests (DEBUG_TESTS; SANITIZER_TESTS, by
# default three configurations, one process each), with its summary table last.
#   run(command="COMMIT=<sha> VARIANTS=main=.before/main bash scripts/fp8_branch_check.sh", carry=[".whl", ".before"])
# Environment: fp8_swap_ab.sh's (SHAPES, FORMS, ROUNDS, LIMIT) and gpu_check.sh's (DEBUG_TESTS, SANITIZER_TESTS,
# SANITIZER_LIMIT, TEST_TIMEOUT, JOBS).
set -uo pipefail
cd "$(dirname "$0")/.."
T=tests/kernels/test_fp8_gemm.py
bash scripts/fp8_swap_ab.sh 2>&1 | grep -v "times\[form\]" | tail -60
STEPS="debug sanitizer" DEBUG_TESTS=${DEBUG_TESTS:-$T} SAN_SPLIT=test SAN_JOBS=${SAN_JOBS:-1} \
  SANITIZER_TESTS=${SANITIZER_TESTS:-"$T::test_fp8_gemm_configurations_gpu[128-6-c2x2] \
$T::test_fp8_gemm_configurations_gpu[192-2-c2x1] $T::test_fp8_gemm_split_k_stages_gpu[64-2-c1x1]"} \
  SANITIZER_LIMIT=${SANITIZER_LIMIT:-300} bash scripts/gpu_check.sh
