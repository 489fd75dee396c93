#!/usr/bin/env bash
# The FP8 GEMM kernel of this tree against other versions of it, in one call: the tree's own first, then each
# NAME=PATH of VARIANTS copied over it in turn (the tree's copies are put back at the end), each timed by
# scripts/fp8_sweep.py (FORMS at SHAPES, torch._scaled_mm tensorwise in the same process) into $OUT/ab_NAME.json.
# PATH is a kernel file (it replaces asyncpipe/kernels/fp8_gemm_kernel.py) or a folder whose files replace those
# of asyncpipe/kernels/ of the same names (a kernel with its host side, where the tree's host passes options that
# the other kernel does not know). Whole files, not options: kernels of other commits, e.g.
#   git show 15d03be:asyncpipe/kernels/fp8_gemm_kernel.py > .before/fk_old.py; VARIANTS="old=.before/fk_old.py"
#   mkdir -p .before/main && for f in fp8_gemm.py fp8_gemm_kernel.py; do git show main:asyncpipe/kernels/$f \
#     > .before/main/$f; done; VARIANTS="main=.before/main"
# (carry .before). REPEATS: see below.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_env.sh || exit 1
SHAPES=${SHAPES:-4096x4096x4096,8192x8192x8192,4096x7168x2048,128x7168x2048}
FORMS=${FORMS:-"plain:;c21:block_n=128,cluster=(2,1),epilogue='direct'"}
KERNELS=asyncpipe/kernels
TREE=$(mktemp -d)/tree_kernels                # not under $OUT: its files would crowd out the logs that come back
rm -rf "$TREE"; mkdir -p "$TREE"; cp "$KERNELS"/*.py "$TREE"/
trap 'cp "$TREE"/*.py "$KERNELS"/' EXIT
# REPEATS R > 1: the whole list R times over, interleaved (tree, variants, tree, variants, ...), into
# $OUT/ab_NAME_rI.json: a kernel's figure moves by a few % between processes (+-4 % at 8192^3 on an H100), so a
# 2-4 % difference needs several processes of each, taken in turn, not one after the other.
R=${REPEATS:-1}
for ((i = 1; i <= R; i++)); do
  for v in tree=$TREE ${VARIANTS:-}; do
    name=${v%%=*}; path=${v#*=}
    cp "$TREE"/*.py "$KERNELS"/                                  # the tree's, then this variant's over them
    if [ -d "$path" ]; then cp "$path"/*.py "$KERNELS"/; else cp "$path" "$KERNELS/fp8_gemm_kernel.py"; fi
    echo "#### $name ($path)$( ((R > 1)) && echo ", repeat $i of $R")"
    timeout "${LIMIT:-120}" python3 scripts/fp8_sweep.py --forms "$FORMS" --shapes "$SHAPES" --rounds "${ROUNDS:-3}" \
      --json "$OUT/ab_$name$( ((R > 1)) && echo "_r$i").json" 2>&1 | grep -v -i warn
  done
done
