"""Host code asks asyncpipe.host.device_info for the GPU; under the simulator it is the simulated one."""

import pytest

from asyncpipe.host import device_info, require_cc
from asyncpipe.sim.device import NAME

pytestmark = pytest.mark.sim


def test_device_info_is_the_simulated_hopper():
    info = device_info()
    assert info.name == NAME and tuple(info.compute_capability) == (9, 0) and info.cluster_launch
    assert require_cc("test") is info or require_cc("test") == info
