"""The CUDA calls of the runtime, each as cheap as Python allows (a call's host time is mostly these): kernel
launches through the driver with struct arguments, torch's current stream as a raw handle, raw events, and the
page-locked status words the kernels write for the host.
"""

from __future__ import annotations

import ctypes
from typing import List, Sequence, Tuple

import torch

from . import constants
from .compiler import import_cupy

_driver = None


def launch(function: int, grid: int, block: int, shared: int, stream: int, arguments: ctypes.Array) -> None:
    """cuLaunchKernel of a compiled function (its pointer) with struct arguments (kernelParams)."""
    global _driver
    if _driver is None:
        from cupy_backends.cuda.api import driver as _driver_module

        _driver = _driver_module
    _driver.launchKernel(function, grid, 1, 1, block, 1, 1, shared, stream, ctypes.addressof(arguments), 0)


_raw_current_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


# the current CUDA device's index without torch.cuda.current_device()'s lazy-init check (for callers that hold CUDA
# tensors or plans: CUDA is initialised)
current_device_index = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device


def current_stream_handle(device_index: int) -> int:
    """The cudaStream_t of torch's current stream on a device, without building a torch Stream object."""
    if _raw_current_stream is not None:
        return int(_raw_current_stream(device_index))
    return torch.cuda.current_stream(device_index).cuda_stream


def cuda_runtime():
    """CuPy's CUDA runtime module (event record and wait on raw handles)."""
    return import_cupy().cuda.runtime


def raw_event(device_index: int) -> int:
    """A cudaEvent_t without timing (cheapest to record and wait on), kept for the process's life."""
    cupy = import_cupy()
    with cupy.cuda.Device(device_index):
        return int(cupy.cuda.runtime.eventCreateWithFlags(cupy.cuda.runtime.eventDisableTiming))


_REQUIRED_CLUSTER_WIDTH = 11  # CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH


def cluster_width(kernel) -> int:
    """The CTAs per cluster a compiled kernel was built for (its __cluster_dims__; 0 without)."""
    from cupy_backends.cuda.api import driver

    return int(driver.funcGetAttribute(_REQUIRED_CLUSTER_WIDTH, kernel.kernel.ptr))


STATUS_FRAME_INDEX = constants.STATUS["frame_index"]
STATUS_WORDS = len(constants.STATUS_WORDS)  # (the ring follows them)


_RING, _RING_MASK, _RING_BASE = constants.STATUS_RING, constants.STATUS_RING_FRAME_MASK, STATUS_WORDS


def ring_answers(words: Sequence[int], seen: int, latest: int) -> List[Tuple[int, int]]:
    """(frame index, pixels per thread wanted) of the finished frames seen + 1 .. latest, oldest first, from the
    mapped status words (`constants.STATUS_RING`; read after `latest`, which the kernels write last). Frames older
    than the ring holds are left out, and so is a slot that a later frame overwrites meanwhile (frames of one stream
    finish in order, and the slot's own frame index tells)."""
    if latest == seen + 1:  # (the common case: one frame finished since the last read)
        word = words[_RING_BASE + (latest & (_RING - 1))]
        return [(latest, word & 3)] if word >> 2 == latest & _RING_MASK and 0 < word & 3 < 3 else []
    first = max(seen + 1, latest - _RING + 1, 1)
    answers = []
    for frame in range(first, latest + 1):
        word = words[_RING_BASE + (frame & (_RING - 1))]
        if word >> 2 == frame & _RING_MASK and 0 < word & 3 < 3:
            answers.append((frame, word & 3))
    return answers


class MappedStatus:
    """A few int32 words of page-locked host memory that kernels write through its device address
    (the frame's status, read by the host without waiting for the GPU)."""

    def __init__(self, device_index: int):
        cupy = import_cupy()
        self.words = constants.STATUS_SIZE
        flags = 1 | 2  # cudaHostAllocPortable | cudaHostAllocMapped
        with cupy.cuda.Device(device_index):
            self._host = cupy.cuda.runtime.hostAlloc(4 * self.words, flags)
            # with unified addressing (every 64-bit CUDA platform) this is the host address itself
            self.device_address = int(cupy.cuda.runtime.pointerGetAttributes(self._host).devicePointer)
        self.view = (ctypes.c_int32 * self.words).from_address(self._host)
        ctypes.memset(self._host, 0, 4 * self.words)
        self.view[STATUS_FRAME_INDEX] = -1  # (no frame finished yet; the runtime reads this word first)

    def __del__(self):
        try:
            import cupy

            cupy.cuda.runtime.freeHost(self._host)
        except Exception:
            pass
