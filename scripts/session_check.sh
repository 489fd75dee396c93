#!/usr/bin/env bash
# One GPU call for a change to the FP8 GEMM and the codecs: the same-run A/B of the GEMM against an earlier kernel
# file (BEFORE) at the bench's shapes, the GPU tests of the GEMM, codecs and their primitives (one process each,
# debug mode), the codecs at 1 GiB beside the copy. Each part has its own time limit; a short summary last.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_env.sh || exit 1
nvidia-smi -L
if [ -n "${BEFORE:-}" ]; then
  timeout "${AB_LIMIT:-150}" python3 scripts/fp8_ab.py --before "$BEFORE" --slices --rounds "${ROUNDS:-3}" --json "$OUT/fp8_ab.json" \
    > "$OUT/fp8_ab.log" 2>&1
fi
ASYNCPIPE_DEBUG=1 ASYNCPIPE_DEBUG_TIMEOUT=3 timeout "${TEST_LIMIT:-250}" python3 scripts/run_isolated.py -j "${JOBS:-12}" \
  --timeout 200 --log "$OUT/gpu_failures.log" -m "gpu or hopper" ${CASES:+-k "$CASES"} tests/kernels/test_fp8_gemm.py \
  tests/kernels/test_mx_codec.py tests/ptx/test_packed.py tests/ptx/test_convert.py > "$OUT/gpu_tests.log" 2>&1
timeout "${CODEC_LIMIT:-120}" python3 -c "
import json
from asyncpipe.kernels import mx_codec as C
with open('$OUT/h200_codecs.jsonl', 'w') as f:
    for r in C.benchmark(1 << 30):
        f.write(json.dumps(r) + '\n'); print(r['kernel'], round(r.get('gbps', 0)), r.get('vs'), flush=True)
" > "$OUT/codec_bench.log" 2>&1
echo "==== A/B ===="; cat "$OUT/fp8_ab.log" 2>/dev/null | tail -16
echo "==== tests ===="; grep -E "FAIL" "$OUT/gpu_tests.log" | head -20; tail -1 "$OUT/gpu_tests.log"
echo "==== codecs ===="; cat "$OUT/codec_bench.log"
