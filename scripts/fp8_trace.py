"""Where a 192-wide FP8 GEMM's k-blocks spend their cycles, from the SM's own clock: a diagnostic build of the
kernel (``fp8_gemm_kernel``'s TRACE, off in every shipped kernel) in which thread 0 of each consumer warpgroup
reads ``ptx.clock64`` when it wants a k-block's data, when it issues the k-block's mmas (the data there) and when
their wait ends, for the first BLOCKS k-blocks of its walk, into the ``counters`` array (which only K slices use
otherwise).

    python3 scripts/fp8_trace.py [--shape 8192x8192x8192] [--blocks 1024] [--json out.json]

Per CTA, then the median over CTAs, in SM cycles:
  mma      a k-block's issue to the end of its wait (the group's run, and its wait behind the other warpgroup's)
  gap      the end of a k-block's wait to the next k-block's issue: promote + data
  promote  the end of a k-block's wait until the next k-block's data is wanted (the promotion and the loop)
  data     the next k-block's data wanted until it is there (the full barrier's wait: the loads behind)
  period   issue to issue
  idle     the share of the traced window in which neither warpgroup has a group in flight: the tensor core has
           nothing of this CTA's then (a lower bound on its idle time)
  phase    warpgroup 2's wait end less warpgroup 1's, as a share of the period (0: in step; 0.5: half a turn apart)
  ideal    the cycles the CTA's traced k-blocks take at the tensor core's peak (128 x BN x 128 MACs at 4096 MACs a
           cycle: 768 at 192 wide), as a share of the traced window
It also times the traced kernel against the shipped one (their ratio says how much the readings disturb).
Needs a GPU; the host's own plan is used, with ``_jit`` and ``slice_workspace`` swapped for the run.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MACS_PER_CYCLE = 4096        # an SM's dense FP8 wgmma rate (1,979 TFLOPS over 132 SMs at 1.83 GHz)


def analyse(events, block_n):
    """``events``: (warpgroups 2, k-blocks, 3) int64 cycles of one CTA (data wanted, issue, wait end), -1 where
    unwritten."""
    import numpy as np

    n = int(min((events[w, :, 2] >= 0).sum() for w in range(2)))
    if n < 4:
        return None
    ev = events[:, :n, :].astype(np.int64)
    base = ev[0, 0, 0]
    ev = (ev - base) % (1 << 32)                      # 32-bit readings, relative to the first
    wanted, issue, done = ev[:, :, 0], ev[:, :, 1], ev[:, :, 2]
    mma = np.median(done - issue)
    gap = np.median(issue[:, 1:] - done[:, :-1])
    promote = np.median(wanted[:, 1:] - done[:, :-1])
    data = np.median(issue[:, 1:] - wanted[:, 1:])
    period = np.median(issue[:, 1:] - issue[:, :-1])
    start, end = issue[:, 1:].min(), done[:, 1:].max()   # the first k-block (the walk's start) left out
    covered, reach = 0, start                        # the union of both warpgroups' [issue, wait end]
    for lo, hi in sorted((int(issue[w, j]), int(done[w, j])) for w in range(2) for j in range(1, n)):
        covered += max(0, hi - max(lo, reach))
        reach = max(reach, hi)
    idle = 1.0 - covered / (end - start)
    phase = np.median(((done[1, 1:] - done[0, 1:]) / period + 0.5) % 1.0 - 0.5)
    ideal = (n - 1) * 128 * block_n * 128 / MACS_PER_CYCLE / (end - start)   # both warpgroups' k-blocks
    return dict(k_blocks=n, mma=float(mma), gap=float(gap), promote=float(promote), data=float(data),
                period=float(period), idle=float(idle),
                phase=float(phase), ideal=float(ideal))


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--shape", default="8192x8192x8192")
    p.add_argument("--blocks", type=int, default=1024)
    p.add_argument("--block-n", type=int, help="the tile's width (default: the shape's); one block sum at any")
    p.add_argument("--json")
    args = p.parse_args()

    import numpy as np
    from numba import cuda

    from asyncpipe.host import device_info
    from asyncpipe.kernels import fp8_gemm as G
    from asyncpipe.kernels import fp8_gemm_kernel as FK
    from asyncpipe.timing import time_ms

    m, n, k = (int(v) for v in args.shape.split("x"))
    sms = device_info(G.API).sm_count
    block_n = args.block_n or G.choose_block_n(m, n, sms)
    a, sa, b, sb = G.random_operands(np.random.default_rng(0), m, n, k)
    dev = G.to_device_operands(a, sa, b, sb)
    d_plain, d_traced = cuda.device_array((m, n), np.uint16), cuda.device_array((m, n), np.uint16)
    opts = dict(block_n=block_n, cluster=(1, 1), k_slices=1, tail_slices=1, dacc=False)   # TRACE: one block sum

    plain = (lambda: G.fp8_gemm(*dev, d_plain, **opts))
    plain()                                          # the shipped kernel's plan, built before the swap

    made = []                                        # the trace arrays handed out as ``counters``
    words = sms * FK.CONSUMERS * args.blocks * FK.TRACE_WORDS
    shipped_workspace = G.slice_workspace

    def traced_workspace(cta_tiles, block_n, k_slices, split_k):
        ws, _ = shipped_workspace(cta_tiles, block_n, k_slices, split_k)
        made.append(cuda.to_device(np.full(words, -1, np.int32)))   # -1: not written
        return ws, made[-1]

    # for the traced plan only (a D of its own)
    G._jit, G.slice_workspace = functools.partial(G._jit, trace=args.blocks), traced_workspace
    traced = (lambda: G.fp8_gemm(*dev, d_traced, **opts))
    traced()
    same = bool(np.array_equal(d_traced.copy_to_host(), d_plain.copy_to_host()))
    t_plain = statistics.median(time_ms(plain, reps=10) for _ in range(3))
    t_traced = statistics.median(time_ms(traced, reps=10) for _ in range(3))
    got = made[-1].copy_to_host()                    # the last launch's readings (every launch writes them all)
    events = np.where(got == -1, -1, got.view(np.uint32).astype(np.int64)).reshape(sms, FK.CONSUMERS,
                                                                                   args.blocks, FK.TRACE_WORDS)
    per_cta = [r for r in (analyse(events[c], block_n) for c in range(sms)) if r]
    if not per_cta:
        print("no CTA walked 4 k-blocks or more: nothing to analyse")
        return 1
    keys = ("mma", "gap", "promote", "data", "period", "idle", "phase", "ideal")
    summary = {key: statistics.median(r[key] for r in per_cta) for key in keys}
    spread = {key: np.percentile([r[key] for r in per_cta], [10, 90]).tolist() for key in keys}
    print(f"{m}x{n}x{k}, {block_n} wide: {len(per_cta)} CTAs traced, {per_cta[0]['k_blocks']} k-blocks a warpgroup "
          f"(CTA 0); traced kernel {t_traced * 1e3:.1f} us, shipped {t_plain * 1e3:.1f} us "
          f"({t_plain / t_traced:.3f}x), same D {same}")
    print("medians over CTAs: " + ", ".join(f"{key} {summary[key]:.3f}" if key in ("idle", "phase", "ideal")
                                            else f"{key} {summary[key]:.0f} cycles" for key in keys))
    print("10th / 90th percentiles over CTAs: " + ", ".join(f"{key} {lo:.3g} / {hi:.3g}"
                                                            for key, (lo, hi) in spread.items()))
    if args.json:
        from ab_record import write

        write(args.json, shape=[m, n, k], block_n=block_n, us_traced=t_traced * 1e3, us_plain=t_plain * 1e3,
              same_d=same, summary=summary, percentiles=spread, per_cta=per_cta, cta0_events=events[0].tolist())
    return 0


if __name__ == "__main__":
    sys.exit(main())
