"""cp_async_ring: a kernel written with it (or with its verbs) compiles to the SASS of the hand-written
chapter loop (offline, sm_90a), and computes the row-sum on the GPU (the simulator's run of the same
kernels is tests/sim/test_cp_async_ring.py)."""

import re

import numpy as np
import pytest

from tests.pipeline.cp_async_ring_kernels import ARGS, STYLES, check_rowsum, make_rowsum, run_rowsum
from tests.sass import assert_sass

SASS_STAGES = (2, 4)
SM90_RESERVED_SMEM = 1024     # cuobjdump counts the shared memory the system reserves per CTA on sm_90


def _depbar_counts(cubin) -> list[int]:
    """The N of every ``DEPBAR.LE SB0, N`` (cp.async.wait_group N) in the SASS, in order."""
    return [int(m.group(1), 0) for i in cubin.instructions if i.opcode == "DEPBAR.LE"
            and (m := re.search(r"SB0\s*,\s*(0x[0-9a-f]+|\d+)", i.operands))]


@pytest.mark.sass
@pytest.mark.parametrize("stages", SASS_STAGES)
def test_ring_compiles_to_the_hand_written_loop(stages):
    cubins = {style: assert_sass(make_rowsum(stages, style), ARGS,
                                 has=("LDGSTS.E.BYPASS.128", "LDGDEPBAR", "DEPBAR.LE", "BAR.SYNC"))
              for style in STYLES}
    hand = cubins["hand"]
    print(hand.resources, len(hand.opcodes), "instructions")
    for style in ("ring", "verbs"):
        got = cubins[style]
        assert got.opcodes == hand.opcodes, f"{style}: the instruction stream differs from the hand-written loop"
        assert got.resources.registers == hand.resources.registers, (style, got.resources, hand.resources)
        assert got.resources.shared == hand.resources.shared
    # the S slots of 8 rows x 256 floats, and the 1 KiB that sm_90 reserves in every CTA's shared memory
    assert hand.resources.shared == stages * 8 * 256 * 4 + SM90_RESERVED_SMEM
    # the main loop waits with N = S-2 (the immediate folded), the epilogue has no wait of its own
    assert _depbar_counts(hand) == [stages - 2], hand.sass
    # one commit per prologue tile (unrolled) and one in the loop
    assert hand.count("LDGDEPBAR") == stages, hand.sass
    assert hand.count("BAR.SYNC") == 1


@pytest.mark.gpu
@pytest.mark.parametrize("style", ("ring", "verbs"))
@pytest.mark.parametrize("stages", range(2, 7))
def test_ring_rowsum_gpu(style, stages, rng):
    from numba import cuda

    kernel = cuda.jit(make_rowsum(stages, style))
    for tiles in (1, stages, stages + 3):                    # fewer, as many as and more tiles than stages
        rows = int(rng.integers(1, 60)) * 8 + int(rng.integers(1, 8))          # a partial last CTA
        cols = (tiles - 1) * 256 + 4 * int(rng.integers(1, 64))                 # a partial last tile
        x = rng.standard_normal((rows, cols)).astype(np.float32)
        check_rowsum(run_rowsum(kernel, x), x)
