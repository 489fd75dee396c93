"""Does the FP8 GEMM's speed depend on where its operands lie in memory? One process, one shape, the same codes
placed several ways: fresh allocations (numba's allocator, as fp8_sweep.py gets them) and views into one large
buffer at given byte offsets (A and B each); every placement timed ROUNDS times, round-robin (``timing.time_rounds``), torch._scaled_mm
tensorwise once beside them. One line per placement: A's and B's addresses modulo 2 MiB, TFLOPS (median of the
rounds' medians, and the rounds' spread), the ratio to the first placement and to torch, and whether D equals the
first placement's bit for bit.

    python3 scripts/fp8_placement_probe.py [--shape 8192x8192x8192] [--offsets 0,4096,65536,1048576]
        [--fresh 3] [--rounds 5] [--json out.json]

Written because the kernel's 8192^3 figure moved by up to 6 % from one process to the next on an H100 while
torch's, timed in the same processes, stayed within 0.5 % (bench/h200.md, twenty-eighth session).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TWO_MIB = 1 << 21


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--shape", default="8192x8192x8192")
    p.add_argument("--offsets", default="0,256,4096,65536,1048576,2097280")
    p.add_argument("--fresh", type=int, default=3)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--json")
    args = p.parse_args()

    import numpy as np
    from numba import cuda

    from asyncpipe.kernels import fp8_gemm as G
    from asyncpipe.timing import time_rounds, tflops

    m, n, k = (int(v) for v in args.shape.split("x"))
    a, sa, b, sb = G.random_operands(np.random.default_rng(0), m, n, k)
    dsa, dsb = G.to_device_scales(sa), cuda.to_device(sb)
    d = cuda.device_array((m, n), np.uint16)
    torch_tf = G._scaled_mm_tflops(a, b, 50).get("tensorwise")

    placements = []                                   # (name, A on the device, B on the device)
    for i in range(args.fresh):
        placements.append((f"fresh{i}", cuda.to_device(a), cuda.to_device(b)))
    offsets = [int(v) for v in args.offsets.split(",") if v]
    if offsets:
        # each view in a slot of its own (whole 2 MiB pages), so that no view's copy overwrites another's
        slot_a = -(-(a.size + max(offsets)) // TWO_MIB) * TWO_MIB
        slot_b = -(-(b.size + max(offsets)) // TWO_MIB) * TWO_MIB
        big_a = cuda.device_array(slot_a * len(offsets), np.uint8)
        big_b = cuda.device_array(slot_b * len(offsets), np.uint8)
        for i, off in enumerate(offsets):
            va = big_a[i * slot_a + off:i * slot_a + off + a.size].reshape(a.shape)
            vb = big_b[i * slot_b + off:i * slot_b + off + b.size].reshape(b.shape)
            va.copy_to_device(a)
            vb.copy_to_device(b)
            placements.append((f"off{off}", va, vb))

    def address(arr):
        return int(arr.__cuda_array_interface__["data"][0])

    runs, outs = {}, {}
    for name, da, db in placements:
        runs[name] = (lambda da=da, db=db: G.fp8_gemm(da, dsa, db, dsb, d))
        runs[name]()
        outs[name] = d.copy_to_host()
    times = time_rounds(runs, rounds=args.rounds, reps=args.reps)

    records, first = [], None
    for name, da, db in placements:
        ms = statistics.median(times[name])
        tf = tflops(2.0 * m * n * k, ms)
        first = first or tf
        spread = (max(times[name]) - min(times[name])) / ms
        same = bool(np.array_equal(outs[name], outs[placements[0][0]]))
        rec = dict(placement=name, a_mod_2mib=address(da) % TWO_MIB, b_mod_2mib=address(db) % TWO_MIB,
                   a_address=hex(address(da)), b_address=hex(address(db)), us=ms * 1e3, tflops=tf,
                   round_us=[t * 1e3 for t in times[name]], vs_first=tf / first,
                   scaled_mm_tensorwise_tflops=torch_tf, same_d=same)
        records.append(rec)
        print(f"{name:>12} A%2M {rec['a_mod_2mib']:>8} B%2M {rec['b_mod_2mib']:>8} {ms * 1e3:9.2f} us {tf:7.1f} TF "
              f"(rounds' spread {spread * 100:4.1f} %)  {tf / first:.3f}x first  "
              f"{tf / torch_tf if torch_tf else float('nan'):.3f}x torch  same D {same}", flush=True)
    if args.json:
        from ab_record import write

        write(args.json, shape=[m, n, k], records=records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
