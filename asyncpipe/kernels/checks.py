"""Input checks shared by the kernels' host functions (each failure names the rule and the value)."""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..errors import AsyncpipeError, check


# torch dtypes the CUDA array interface has no type string for, and the integers of their width that view them
TORCH_BIT_VIEWS = {"bfloat16": "int16", "float8_e4m3fn": "uint8", "float8_e5m2": "uint8"}


def is_torch(x) -> bool:
    """True for a PyTorch tensor (checked without importing torch)."""
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr")


def torch_bits(t):
    """``t`` viewed as integers of its element width when the CUDA array interface cannot describe its dtype
    (bfloat16 as int16, float8 as uint8: the same memory); other tensors as they are."""
    import torch

    bits = TORCH_BIT_VIEWS.get(str(t.dtype).removeprefix("torch."))
    return t.view(getattr(torch, bits)) if bits else t


def as_device_array(api: str, name: str, x):
    """A numba device array viewing ``x`` (anything with ``__cuda_array_interface__``)."""
    if cuda.is_cuda_array(x):
        return cuda.as_cuda_array(x)
    if isinstance(x, np.ndarray):
        raise AsyncpipeError(api, f"{name} must be a CUDA device array (numba, CuPy, PyTorch), not host memory",
                             f"numpy.ndarray of shape {x.shape}", "__cuda_array_interface__")
    raise AsyncpipeError(api, f"{name} must expose __cuda_array_interface__", type(x).__name__)


def as_matrix(api: str, name: str, x, dtype=np.float32):
    a = as_device_array(api, name, x)
    check(a.ndim == 2, api, f"{name} must be 2-D", f"{a.ndim}-D of shape {a.shape}")
    check(a.dtype == dtype, api, f"{name} must be {np.dtype(dtype).name}", a.dtype)
    check(a.is_c_contiguous(), api, f"{name} must be C-contiguous (row-major, unit stride)",
          f"strides {a.strides} for shape {a.shape}")
    return a


def check_gemm(api, a, b, c, beta, stages, variant, beta_without_c, min_stages=2, max_stages=8, stage_bytes=None):
    M, K = a.shape
    check(b.shape[0] == K, api, "A.shape[1] must equal B.shape[0]", f"A {a.shape}, B {b.shape}")
    check(c.shape == (M, b.shape[1]), api, "C must be A.shape[0] x B.shape[1]", f"C {c.shape} for A {a.shape}, B {b.shape}")
    check(not beta_without_c, api, "beta != 0 needs an input C", f"beta={beta}")
    check(variant in ("cp_async", "v4"), api, "variant is 'cp_async' or 'v4'", repr(variant))
    check(variant == "v4" or isinstance(stages, (int, np.integer)) and min_stages <= stages <= max_stages, api,
          f"stages must be an integer in {min_stages}..{max_stages}", repr(stages))
