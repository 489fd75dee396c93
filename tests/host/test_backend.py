"""The backend door (asyncpipe.backend): one choice per process, two implementations of one interface,
the host API answered through it. The import orders are tested in tests/test_sim_import_order.py."""

import inspect

import pytest

from asyncpipe import backend, host
from asyncpipe.backend.gpu import GpuBackend
from asyncpipe.errors import UnsupportedDeviceError
from asyncpipe.sim.host import SimBackend
from tests.conftest import gpu_cc

METHODS = ("device_info", "prepare_launch", "launch", "tensor_map_words")


# ids: a test id "gpu" would make it a GPU test (conftest reads keywords)
@pytest.mark.parametrize("impl", [GpuBackend, SimBackend], ids=["GpuBackend", "SimBackend"])
def test_both_backends_implement_the_interface(impl):
    assert impl.name in ("gpu", "simulator") and isinstance(impl.caches_plans, bool)
    for name in METHODS:
        want = inspect.signature(getattr(backend.Backend, name))
        got = inspect.signature(getattr(impl, name))
        # every call the host API makes through the interface binds to the implementation
        args = [p.name for p in want.parameters.values() if p.default is p.empty and p.kind == p.POSITIONAL_OR_KEYWORD]
        kwargs = {p.name: p.default for p in want.parameters.values() if p.default is not p.empty}
        got.bind(*args, **kwargs)


def test_the_gpu_backend_is_chosen_once_without_the_switch():
    assert backend.simulating() is False
    chosen = backend.current()
    assert isinstance(chosen, GpuBackend) and backend.current() is chosen and chosen.caches_plans


def test_the_host_api_goes_through_the_backend_without_a_gpu(no_gpu):
    with pytest.raises(UnsupportedDeviceError) as via_host:
        host.device_info("my_api")
    with pytest.raises(UnsupportedDeviceError) as via_backend:
        backend.current().device_info("my_api")
    assert str(via_host.value) == str(via_backend.value)
    assert str(via_host.value).startswith("my_api: needs a CUDA GPU [numba.cuda.is_available()], got none (")


@pytest.mark.gpu
def test_the_host_api_goes_through_the_backend_gpu():
    info = host.device_info()
    assert info is backend.current().device_info("device_info")     # one cache, the GPU backend's
    assert info.compute_capability == tuple(gpu_cc())
