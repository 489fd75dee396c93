#!/usr/bin/env bash
# The FP8 GEMM kernel of this tree against other versions of asyncpipe/kernels/fp8_gemm_kernel.py, in one call: the
# tree's own first, then each NAME=FILE of VARIANTS copied over it in turn (the tree's copy is put back at the end),
# each timed by scripts/fp8_sweep.py (FORMS at SHAPES, torch._scaled_mm tensorwise in the same process) into
# $OUT/ab_NAME.json. Whole files, not options: kernels of other commits, e.g. `git show 15d03be:asyncpipe/kernels/
# fp8_gemm_kernel.py > .before/fk_old.py` and VARIANTS="old=.before/fk_old.py" (carry .before).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_env.sh || exit 1
SHAPES=${SHAPES:-4096x4096x4096,8192x8192x8192,4096x7168x2048,128x7168x2048}
FORMS=${FORMS:-"plain:;c21:block_n=128,cluster=(2,1),epilogue='direct'"}
KERNEL=asyncpipe/kernels/fp8_gemm_kernel.py
cp "$KERNEL" "$OUT/fp8_gemm_kernel.tree.py"
trap 'cp "$OUT/fp8_gemm_kernel.tree.py" "$KERNEL"' EXIT
for v in tree=$OUT/fp8_gemm_kernel.tree.py ${VARIANTS:-}; do
  name=${v%%=*}; file=${v#*=}
  cp "$file" "$KERNEL"
  echo "#### $name ($file)"
  timeout "${LIMIT:-120}" python3 scripts/fp8_sweep.py --forms "$FORMS" --shapes "$SHAPES" --rounds "${ROUNDS:-3}" \
    --json "$OUT/ab_$name.json" 2>&1 | grep -v -i warn
done
