"""Test tiers: offline SASS (no GPU), GPU (skipped with a reason when there is none)."""

import functools
import os

import numpy as np
import pytest


@functools.cache
def gpu_cc():
    """The current GPU's compute capability, or None with no usable GPU (or under the simulator)."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        return None
    from numba import cuda

    try:
        if not cuda.is_available():
            return None
        return cuda.get_current_device().compute_capability
    except Exception:  # no driver at all
        return None


def pytest_collection_modifyitems(config, items):
    cc = gpu_cc()
    no_gpu = pytest.mark.skip(reason="needs a CUDA GPU: none is visible here (run scripts/gpu_check.sh on one)")
    old_gpu = pytest.mark.skip(reason=f"needs compute capability 9.0 (Hopper); this GPU is {cc}")
    for item in items:
        if "gpu" in item.keywords and cc is None:
            item.add_marker(no_gpu)
        elif "hopper" in item.keywords and (cc is None or cc < (9, 0)):
            item.add_marker(no_gpu if cc is None else old_gpu)


@pytest.fixture
def rng(request):
    """Fresh random data every run; the seed is printed so that a failure can be replayed."""
    seed = int.from_bytes(os.urandom(4), "little")
    print(f"rng seed {seed} for {request.node.nodeid}")
    return np.random.default_rng(seed)
