#!/usr/bin/env bash
# Issue 20's kernels on the GPU machine, in one call. STEPS (default "tests bench codecs"):
#   tests      the GPU tests of the block-scaled FP8 GEMM and its quantizer, the MX/NVFP4 codecs, the packed and FP8
#              conversion primitives, in debug mode (a hang is a HangError in seconds); CASES (-k) narrows them.
#              The GEMM tests print the worst error / assumed bound ratio (-s): read the real margin off the log
#   sanitizer  compute-sanitizer memcheck, racecheck, synccheck over SAN_CASES, in the background
#   sweep      scripts/fp8_cluster_sweep.py: every (block_n, cluster) at issue 20's shapes, into $OUT/fp8_sweep.jsonl
#   bench      python -m asyncpipe bench --only fp8_gemm (issue 20's shapes beside torch._scaled_mm, same run) into
#              $OUT/h200_fp8_gemm.json
#   codecs     the codecs at 1 GiB against the device copy into $OUT/h200_codecs.jsonl
#   speed      scripts/fp8_speed_check.py: five shapes beside torch, against the committed ratios, into $OUT/fp8_speed.json
#   ab         scripts/fp8_ab.py --before $BEFORE --widths: this kernel against an earlier one (BEFORE: a copy of its
#              fp8_gemm_kernel.py) at the bench's shapes, every tile width, same run, into $OUT/fp8_ab.json
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_env.sh || exit 1
STEPS=${STEPS:-"tests bench codecs"}
nvidia-smi -L
TESTS="tests/kernels/test_fp8_gemm.py tests/kernels/test_mx_codec.py tests/ptx/test_convert.py tests/ptx/test_packed.py ${EXTRA_TESTS:-}"
if [[ $STEPS == *sanitizer* ]]; then
  for tool in memcheck racecheck synccheck; do
    timeout "${SAN_LIMIT:-400}" python3 scripts/run_isolated.py -j 2 --timeout 380 --log "$OUT/sanitizer_${tool}_failures.log" \
      --wrap "compute-sanitizer --tool $tool --error-exitcode 99 --print-limit 10" -m "gpu or hopper" \
      -k "${SAN_CASES:-200x640x384 or 9x272 or 513x1056 or 128-6-c2x2 or 64-8-c1x2 or 192-2-c2x1}" $TESTS > "$OUT/sanitizer_$tool.log" 2>&1 &
  done
fi
if [[ $STEPS == *ab* ]]; then
  timeout "${AB_LIMIT:-400}" python3 scripts/fp8_ab.py --before "$BEFORE" --widths --json "$OUT/fp8_ab.json" 2>&1 \
    | tee "$OUT/fp8_ab.log"
fi
if [[ $STEPS == *tests* ]]; then
  ASYNCPIPE_DEBUG=1 ASYNCPIPE_DEBUG_TIMEOUT=3 python3 scripts/run_isolated.py -j "${JOBS:-8}" --timeout 300 \
    --log "$OUT/fp8_failures.log" -m "gpu or hopper" ${CASES:+-k "$CASES"} $TESTS > "$OUT/fp8_tests.log" 2>&1
  python3 -m pytest -q -s -m gpu tests/kernels/test_fp8_gemm.py -k "random_codes or quantized" 2>&1 \
    | grep -i "bound\|ratio\|passed\|failed" > "$OUT/fp8_bound_ratios.log"
fi
if [[ $STEPS == *sweep* ]]; then
  timeout "${SWEEP_LIMIT:-500}" python3 scripts/fp8_cluster_sweep.py "$OUT/fp8_sweep.jsonl" 2>&1 | tee "$OUT/fp8_sweep.log"
fi
if [[ $STEPS == *bench* ]]; then
  timeout "${BENCH_LIMIT:-400}" python3 -m asyncpipe bench --only fp8_gemm --json "$OUT/h200_fp8_gemm.json" 2>&1 \
    | tail -30 | tee "$OUT/fp8_bench.log"
fi
if [[ $STEPS == *speed* ]]; then
  timeout "${SPEED_LIMIT:-300}" python3 scripts/fp8_speed_check.py --json "$OUT/fp8_speed.json" 2>&1 | tee "$OUT/fp8_speed.log"
fi
if [[ $STEPS == *codecs* ]]; then
  timeout "${CODEC_LIMIT:-200}" python3 -c "
import json
from asyncpipe.kernels import mx_codec as C
with open('$OUT/h200_codecs.jsonl', 'w') as f:
    for r in C.benchmark(1 << 30):
        f.write(json.dumps(r) + '\n'); print(r['kernel'], round(r.get('gbps', 0)), r.get('vs'), flush=True)
" 2>&1 | tee "$OUT/codec_bench.log"
fi
wait
echo "==== summary ===="
for f in fp8_tests sanitizer_memcheck sanitizer_racecheck sanitizer_synccheck; do
  [ -f "$OUT/$f.log" ] && echo "$f: $(tail -1 "$OUT/$f.log")"
done
[ -f "$OUT/fp8_bound_ratios.log" ] && tail -5 "$OUT/fp8_bound_ratios.log"
[ -f "$OUT/fp8_speed.log" ] && grep "torch" "$OUT/fp8_speed.log"
