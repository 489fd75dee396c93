"""The current GPU's limits and the compute-capability gate, as the host API asks for them.

``device_info()`` is answered by the backend chosen in ``asyncpipe.backend``: on the GPU it reads the
current device through numba (whose ``Device`` reads ``cuDeviceGetAttribute`` from cuda.bindings and
checks every result) and caches the answer per device; in the simulator it is the simulated sm_90.
``require_cc(api, (9, 0))`` raises ``UnsupportedDeviceError`` unless the GPU is new enough; with no
GPU at all both raise that error too, saying there is none. ``DeviceInfo`` and ``check_cc``, the
pure halves, live in ``asyncpipe.spec.device``.
"""

from __future__ import annotations

from ..backend import current
from ..constants import SM_HOPPER
from ..spec.device import DeviceInfo, check_cc


def device_info(api: str = "device_info") -> DeviceInfo:
    """The current GPU's ``DeviceInfo``, read from the driver on first use and cached per device.
    Raises ``UnsupportedDeviceError`` (naming ``api``) when there is no usable GPU. Under asyncpipe's
    simulator it is the simulated sm_90 device."""
    return current().device_info(api)


def require_cc(api: str, minimum: tuple[int, int] = SM_HOPPER, rule: str | None = None,
               source: str = "CUDA programming guide, compute capabilities") -> DeviceInfo:
    """Return the current GPU's ``DeviceInfo`` if its compute capability is at least ``minimum``;
    otherwise raise ``UnsupportedDeviceError`` naming ``api``, the rule and this GPU's capability
    (with no GPU at all, saying that there is none)."""
    info = device_info(api)
    check_cc(info, api, minimum, rule, source)
    return info


__all__ = ["DeviceInfo", "check_cc", "device_info", "require_cc"]
