"""docs/guide/02_tma.md beyond its check(n) (which tests/guide/test_guide.py runs): the host function's bad-input
messages, the page's shape rules, and its kernel's SASS offline. The host tests need device arrays: they run in the
simulator run and on a GPU."""

from __future__ import annotations

import numpy as np
import pytest

from tests.guide.test_guide import GUIDE, load_page, mistake_is_caught

PAGE = GUIDE / "02_tma.md"


@pytest.fixture
def page(tmp_path):
    return load_page(PAGE, tmp_path)


@pytest.mark.gpu
@pytest.mark.simulator_too
@pytest.mark.parametrize("x, y, message", [
    ("host", (8, 4), "x must be a 2-D float32 device array (the kernel's boxes are float32), "
     "got a host array of float32 (4, 8)"),
    (np.float64, (8, 4), "x must be a 2-D float32 device array (the kernel's boxes are float32), "
     "got a device array of float64 (4, 8)"),
    (np.float32, (32,), "y must be a 2-D float32 device array (the kernel's boxes are float32), "
     "got a device array of float32 (32,)"),
    (np.float32, (4, 8), "y must have x's shape transposed, got x (4, 8), y (4, 8)"),
])
def test_scale_transpose_device_refuses_bad_input(page, x, y, message):
    from numba import cuda

    from asyncpipe.errors import AsyncpipeError

    x = np.zeros((4, 8), np.float32) if x == "host" else cuda.to_device(np.zeros((4, 8), x))
    y = cuda.to_device(np.zeros(y, np.float32))
    with pytest.raises(AsyncpipeError) as err:
        page.scale_transpose_device(x, y, 2.0, 1.0)
    assert str(err.value) == f"scale_transpose_device: {message}"


@pytest.mark.gpu
@pytest.mark.simulator_too
def test_fewer_rows_than_a_granule_are_refused(page):
    """y's map covers y's rows in whole 16-byte granules: x needs at least 4 rows (y 4 columns)."""
    from numba import cuda

    from asyncpipe.errors import AsyncpipeError

    padded, x = page.to_device_pitched(np.ones((3, 40), np.float32), 0.0)
    _, y = page.to_device_pitched(np.zeros((40, 3), np.float32), 0.0)
    with pytest.raises(AsyncpipeError) as err:
        page.scale_transpose_device(x, y, 2.0, 1.0)
    assert str(err.value) == ("scale_transpose_device: x must have at least 4 rows (y's map covers whole 16-byte "
                              "granules of y's rows), got x (3, 40)")


@pytest.mark.gpu
@pytest.mark.simulator_too
def test_rows_not_16_byte_pitched_are_refused_by_the_tensor_map(page):
    """The page's reason for to_device_pitched: 30 floats a row is 120 bytes."""
    from numba import cuda

    from asyncpipe.errors import AsyncpipeError

    x = cuda.to_device(np.zeros((33, 30), np.float32))
    with pytest.raises(AsyncpipeError, match=r"multiple of 16 bytes .*got strides\[0\] = 120 bytes"):
        page.scale_transpose_device(x, cuda.to_device(np.zeros((30, 33), np.float32)), 2.0, 1.0)


@pytest.mark.gpu
@pytest.mark.simulator_too
def test_to_device_pitched_pads_rows_to_16_bytes(page, rng):
    a = rng.standard_normal((5, 7)).astype(np.float32)
    padded, view = page.to_device_pitched(a, -1.0)
    host = padded.copy_to_host()
    assert host.shape == (5, 8) and np.all(host[:, 7] == -1.0)
    assert view.shape == (5, 7) and np.array_equal(view.copy_to_host(), a)


@pytest.mark.sass
def test_scale_transpose_sass(page):
    """Offline (no GPU): one TMA load and one store, the barrier's operations, the two acquire fences, no CALL,
    nothing spilled."""
    from numba.cuda import types

    from asyncpipe.codegen import compile_kernel
    from asyncpipe.ptx.tensor_map_type import tensormap

    cubin = compile_kernel(page.scale_transpose, (tensormap, tensormap, types.float32[:, :],
                                                  types.float32, types.float32))
    assert cubin.count("UTMALDG.2D") == 1 and cubin.count("UTMASTG.2D") == 1
    assert cubin.count("UTMACCTL.IV") == 2                       # fence.proxy.tensormap acquire, per map
    assert cubin.count("SYNCS.ARRIVE.TRANS64") == 1 and cubin.count("SYNCS.PHASECHK") >= 1
    assert cubin.count("FENCE.VIEW.ASYNC.S") == 1                # fence.proxy.async.shared::cta before the store
    assert cubin.count("CALL") == 0 and not cubin.spills


# ---- every "why" of the page, enforced: the kernel without it fails in the simulator, naming the rule -------------
MISTAKES = {
    "no fence.proxy.async before the store": ("    ptx.fence_proxy_async_shared_cta()\n", "", "ProxyFenceError"),
    "no wait_group.read before exit": ("ptx.cp_async_bulk_wait_group_read(0)", "pass", "UnwaitedAsyncReadError"),
    "no init fence": ("ptx.fence_mbarrier_init_release_cluster()", "pass", "MbarrierInitError"),
    "no block barrier after the init": ("    cuda.syncthreads()                                # ... and to the other threads\n",
                                        "", "MbarrierInitError"),
    "no acquire of x's map": ("ptx.fence_proxy_tensormap_generic_acquire_sys(ptx.addr(x_map, 0))", "pass",
                              "ProxyFenceError"),
    "no acquire of y's map": ("ptx.fence_proxy_tensormap_generic_acquire_sys(ptx.addr(y_map, 0))", "pass",
                              "ProxyFenceError"),
    "expect_tx with half the bytes": ("ptx.addr(bar, 0), BOX_BYTES)", "ptx.addr(bar, 0), BOX_BYTES // 2)", "TxCountError"),
    "x's tile not 128-byte aligned": ("float32, alignment=128)     # x's", "float32)     # x's", "SimUsageError"),
    "waiting on parity 1": ("ptx.mbarrier_wait_parity(ptx.addr(bar, 0), 0)", "ptx.mbarrier_wait_parity(ptx.addr(bar, 0), 1)",
                            "SharedMemoryRaceError"),
    "no block barrier before the store": ("    ptx.fence_proxy_async_shared_cta()\n    cuda.syncthreads()\n",
                                          "    ptx.fence_proxy_async_shared_cta()\n", "SharedMemoryRaceError"),
}
# Without the barrier, thread 0 may store before the others wrote: the simulator names the race when a write came
# first, and does not when every write came after the store's read (then the check's comparison fails).
ALSO_WRONG_DATA = {"no block barrier before the store"}


@pytest.mark.simulator_too
@pytest.mark.parametrize("mistake", MISTAKES)
def test_each_fence_barrier_and_wait_is_needed(mistake, tmp_path):
    mistake_is_caught(PAGE, tmp_path, *MISTAKES[mistake], also=(AssertionError,) if mistake in ALSO_WRONG_DATA else ())
