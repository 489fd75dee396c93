#!/usr/bin/env bash
# The attention kernel on the GPU machine, in one call. STEPS (default "tests bench"):
#   tests      its GPU tests in debug mode (a hang is a HangError in seconds, not a timeout in minutes), and the
#              primitives' GPU tests of PRIMITIVE_TESTS beside them; CASES (a -k expression) narrows the attention tests
#   sanitizer  compute-sanitizer memcheck, racecheck, synccheck over SAN_CASES (small problems), in the background
#   precompile every kernel the bench times, in parallel processes, into the disk cache
#   bench      the sweep of attention_bench (every dtype, head dim, causal, seqlen beside torch's SDPA backends),
#              one JSON line per record in $OUT/attention_bench.jsonl as it goes; RECORDS: extra records first
#              (a list of (seqlen, head_dim, causal, options)); SWEEP=0: only those
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_env.sh || exit 1
STEPS=${STEPS:-"tests bench"}
nvidia-smi -L
if [[ $STEPS == *sanitizer* ]]; then
  for tool in memcheck racecheck synccheck; do
    timeout "${SAN_LIMIT:-400}" python3 scripts/run_isolated.py -j 2 --timeout 380 --log "$OUT/sanitizer_${tool}_failures.log" \
      --wrap "compute-sanitizer --tool $tool --error-exitcode 99 --print-limit 10" -m "gpu or hopper" \
      -k "${SAN_CASES:-2x17x17x3x3-64-True-bfloat16 or 1x128x128x2x1-128-False-float16 or 2x17x1000x4x2-256-True-bfloat16}" \
      tests/kernels/test_attention.py > "$OUT/sanitizer_$tool.log" 2>&1 &
  done
fi
if [[ $STEPS == *tests* ]]; then
  ASYNCPIPE_DEBUG=1 ASYNCPIPE_DEBUG_TIMEOUT=3 python3 scripts/run_isolated.py -j "${ATT_JOBS:-10}" --timeout 200 \
    --log "$OUT/attention_failures.log" -m "gpu or hopper" ${CASES:+-k "$CASES"} tests/kernels/test_attention.py \
    > "$OUT/attention_tests.log" 2>&1 &
  python3 scripts/run_isolated.py -j 5 --timeout 200 --log "$OUT/primitive_failures.log" -m "gpu or hopper" \
    ${PRIMITIVE_TESTS:-tests/ptx/test_convert.py tests/ptx/test_wgmma.py tests/ptx/test_debug.py} > "$OUT/primitive_tests.log" 2>&1
fi
if [[ $STEPS == *precompile* ]]; then
  for cfg in "128,0,'bf16',3,1,1" "128,1,'bf16',3,1,1" "128,0,'bf16',3,0,1" "128,0,'bf16',3,1,0" "128,0,'bf16',3,0,0" \
             "128,0,'bf16',2,1,1" "64,0,'bf16',4,1,1" "64,1,'bf16',4,1,1" "256,0,'bf16',2,1,1" "256,1,'bf16',2,1,1" \
             "128,0,'f16',3,1,1" "128,1,'f16',3,1,1" "64,0,'f16',4,1,1" "64,1,'f16',4,1,1" "256,0,'f16',2,1,1" "256,1,'f16',2,1,1"; do
    python3 -c "
from asyncpipe.kernels import attention as A, attention_kernel as AK
h, c, ab, st, pp, ov = ($cfg)
A._jit(h, bool(c), ab, st, bool(pp), bool(ov)).compile(AK.kernel_argtypes())" > /dev/null 2>&1 &
  done
  wait
  echo "precompiled"
fi
if [[ $STEPS == *bench* ]]; then
  timeout "${BENCH_LIMIT:-400}" python3 - <<'PY' 2>&1 | tee "$OUT/attention_bench.log"
import json, os
from asyncpipe.kernels.attention_bench import benchmark, sweep
out = open(os.path.join(os.environ["OUT"], "attention_bench.jsonl"), "w")
class Records(list):
    def append(self, r):
        super().append(r)
        out.write(json.dumps(r) + "\n"); out.flush()
        print(r["kernel"], r.get("seqlen"), r.get("stages"), round(r.get("tflops", 0)), {k: round(v, 3) for k, v in r["vs"].items()},
              r.get("ablation_tflops", ""), r.get("error", ""), flush=True)
records = Records()
for n, hd, causal, kw in eval(os.environ.get("RECORDS", "[]")):
    records.append(dict(benchmark(n, hd, causal=causal, **kw), options=kw))
if os.environ.get("SWEEP", "1") != "0":
    sweep(records, log=lambda s: None, head_dims=(128, 64, 256))
PY
fi
wait
echo "==== summary ===="
for f in attention_tests primitive_tests sanitizer_memcheck sanitizer_racecheck sanitizer_synccheck; do
  [ -f "$OUT/$f.log" ] && echo "$f: $(tail -1 "$OUT/$f.log")"
done
