"""Programmatic dependent launch (compute capability 9.0 and later) through the CUDA driver's cuLaunchKernelEx.

The LPT kernel is launched on the same stream as the chunk kernel, with programmatic stream serialization:
the driver starts it once every CTA of the chunk kernel has executed `griddepcontrol.launch_dependents`
(the chunk kernel's first instruction) or exited, that is once every chunk CTA is resident. The heaviest
items' chunks are thus on the SMs before the LPT kernel's CTAs take the rest, whether the host runs ahead of
the GPU or not, and no event joins a side stream. Each LPT CTA executes `griddepcontrol.wait` before it exits,
so that the LPT kernel completes after the chunk kernel and later work on the stream sees both.
"""

from __future__ import annotations

import ctypes
import os
from .errors import LPTRuntimeError

PROGRAMMATIC_STREAM_SERIALIZATION = 6  # CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
# Set to 1: Rasterizers created afterwards launch the two kernels as before compute capability 9.0 (the chunk
# kernel on a side stream, joined with events), e.g. to test that arrangement on a newer GPU.
ENV_NO_DEPENDENT_LAUNCH = "GSPLAT_LPT_NO_DEPENDENT_LAUNCH"


def dependent_launch_available(capability_major: int) -> bool:
    """Whether the runtime launches the LPT kernel behind the chunk kernel (compute capability 9.0+, unless
    GSPLAT_LPT_NO_DEPENDENT_LAUNCH=1)."""
    return capability_major >= 9 and os.environ.get(ENV_NO_DEPENDENT_LAUNCH, "0") != "1"


class LaunchAttribute(ctypes.Structure):
    """CUlaunchAttribute: an id, padding to 8 bytes, a 64-byte value union (here its first int)."""
    _fields_ = [("id", ctypes.c_uint), ("pad", ctypes.c_char * 4), ("value", ctypes.c_int),
                ("value_rest", ctypes.c_char * 60)]


class LaunchConfig(ctypes.Structure):
    """CUlaunchConfig (cuda.h, CUDA 12 and later)."""
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(LaunchAttribute)), ("numAttrs", ctypes.c_uint)]


_launch_kernel_ex = None


def _driver_entry():
    global _launch_kernel_ex
    if _launch_kernel_ex is None:
        try:
            library = ctypes.CDLL("libcuda.so.1")
            entry = library.cuLaunchKernelEx
        except (OSError, AttributeError) as error:
            raise LPTRuntimeError(f"the CUDA driver has no cuLaunchKernelEx: {error}") from error
        entry.argtypes = [ctypes.POINTER(LaunchConfig), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        entry.restype = ctypes.c_int
        _launch_kernel_ex = entry
    return _launch_kernel_ex


class DependentLaunch:
    """One reusable launch configuration of a kernel that may start while the kernel before it on its stream
    still runs (as soon as that kernel's CTAs all trigger)."""

    def __init__(self, function: int, block: int, shared: int):
        self.function = function
        self.attribute = LaunchAttribute(id=PROGRAMMATIC_STREAM_SERIALIZATION, value=1)
        self.config = LaunchConfig(gridDimY=1, gridDimZ=1, blockDimX=block, blockDimY=1, blockDimZ=1,
                                   sharedMemBytes=shared, attrs=ctypes.pointer(self.attribute), numAttrs=1)
        self._config_ref = ctypes.byref(self.config)  # (built once: the config is reused, only grid and stream change)
        self._entry = _driver_entry()

    def __call__(self, grid: int, stream: int, arguments: ctypes.Array) -> None:
        config = self.config
        config.gridDimX = grid
        config.hStream = stream
        result = self._entry(self._config_ref, self.function, ctypes.addressof(arguments), None)
        if result != 0:
            raise LPTRuntimeError(f"cuLaunchKernelEx of the LPT kernel failed with CUDA driver error {result}")
