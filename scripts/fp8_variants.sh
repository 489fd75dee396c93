#!/usr/bin/env bash
# The FP8 GEMM's kernel and host of other commits, as folders for scripts/fp8_swap_ab.sh's VARIANTS (run here, before
# the GPU call; carry .before): for each NAME=REF, .before/NAME/ gets REF's asyncpipe/kernels/fp8_gemm.py and
# fp8_gemm_kernel.py. Prints the VARIANTS string to pass.
#   bash scripts/fp8_variants.sh main=main sbring=fp8-sbring   ->   main=.before/main sbring=.before/sbring
set -euo pipefail
cd "$(dirname "$0")/.."
out=()
for v in "$@"; do
  name=${v%%=*}; ref=${v#*=}
  rm -rf ".before/$name"; mkdir -p ".before/$name"
  for f in fp8_gemm.py fp8_gemm_kernel.py; do
    git show "$ref:asyncpipe/kernels/$f" > ".before/$name/$f"
  done
  out+=("$name=.before/$name")
done
echo "${out[*]}"
