"""Device places, as in Fluid: ``CPUPlace()``, ``CUDAPlace(0)``, ``CUDAPinnedPlace()``.

A place picks the array module kernels run with: numpy for CPU, cupy for CUDA.
"""
from __future__ import annotations

import numpy as np


class CPUPlace:
    device = "cpu"
    device_id = 0

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and other.device_id == self.device_id

    def __hash__(self) -> int:
        return hash((self.device, self.device_id))

    def __repr__(self) -> str:
        return "CPUPlace()"

    def array_module(self):
        return np


class CUDAPlace(CPUPlace):
    device = "gpu"

    def __init__(self, device_id: int = 0) -> None:
        self.device_id = int(device_id)

    def __repr__(self) -> str:
        return f"CUDAPlace({self.device_id})"

    def array_module(self):
        """cupy, with this place's device made current.

        Raises:
            RuntimeError: when cupy or a CUDA device is missing, saying how to get them.
        """
        try:
            import cupy
        except ImportError as e:
            raise RuntimeError(f"{self!r} needs cupy: pip install 'placegroup[gpu]'") from e
        if cupy.cuda.runtime.getDeviceCount() <= self.device_id:
            raise RuntimeError(f"{self!r}: only {cupy.cuda.runtime.getDeviceCount()} CUDA devices")
        cupy.cuda.Device(self.device_id).use()
        return cupy


class CUDAPinnedPlace(CPUPlace):
    """Host memory pinned for fast copies; kernels run with numpy."""

    def __repr__(self) -> str:
        return "CUDAPinnedPlace()"


def is_compiled_with_cuda() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - any cupy/driver failure means "no CUDA here"
        return False
