#!/usr/bin/env bash
# The attention kernel's first look on the GPU machine, in one call: its GPU tests in debug mode (a hang is a
# HangError in seconds, not a timeout in minutes), the FP8 wgmma / conversion / debug primitives' GPU tests beside
# them, then a few timed records beside torch's SDPA. CASES (a -k expression) narrows the attention tests.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_env.sh || exit 1
nvidia-smi -L
ASYNCPIPE_DEBUG=1 ASYNCPIPE_DEBUG_TIMEOUT=3 python3 scripts/run_isolated.py -j "${ATT_JOBS:-10}" --timeout 200 \
  --log "$OUT/attention_failures.log" -m "gpu or hopper" ${CASES:+-k "$CASES"} tests/kernels/test_attention.py \
  > "$OUT/attention_tests.log" 2>&1 &
python3 scripts/run_isolated.py -j 5 --timeout 200 --log "$OUT/primitive_failures.log" -m "gpu or hopper" \
  ${PRIMITIVE_TESTS:-tests/ptx/test_convert.py tests/ptx/test_wgmma.py tests/ptx/test_debug.py} > "$OUT/primitive_tests.log" 2>&1
wait
grep FAIL "$OUT/attention_tests.log" "$OUT/primitive_tests.log" | head -30
head -c 5000 "$OUT/attention_failures.log" 2>/dev/null
if [ -n "${BENCH:-1}" ]; then
  timeout "${BENCH_LIMIT:-150}" python3 - <<'PY' 2>&1 | tee "$OUT/attention_bench.log"
import json, os
from asyncpipe.kernels.attention_bench import benchmark
for n, hd, causal, kw in eval(os.environ.get("RECORDS", "[(4096, 128, False, {}), (4096, 128, True, {})]")):
    try:
        r = benchmark(n, hd, causal=causal, ablations=not causal and n == 4096, **kw)
        r["options"] = kw
        print(json.dumps(r))
    except Exception as e:
        print("bench failed", n, hd, causal, kw, type(e).__name__, e)
PY
fi
echo "==== summary ===="
tail -1 "$OUT/attention_tests.log"; tail -1 "$OUT/primitive_tests.log"
