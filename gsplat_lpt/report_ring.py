"""A frame's schedule facts kept for later (`FramePlan.snapshot`), in one asynchronous copy and no allocation.

The plan writes a frame's schedule words, totals and predicted costs into one device buffer of a workspace
(`ReportWords`). A hooked `gsplat.rasterization` call keeps them for `meta["lpt"]`, which may be read after later
frames have reused the workspace. Three `.to("cpu", non_blocking=True)` copies did that, each allocating page-locked
memory: 46 us of host time per call on an H200's host (tests/device/host_pieces.py), more than our whole blend call
adds to gsplat's. A `ReportRing` copies the words into one of SLOTS rows of page-locked memory allocated once; a
row is taken over only after the report it held was read into ordinary memory. The copy and the event behind it are
enqueued on the frame's raw stream handle through the CUDA runtime (torch's `copy_` into a row and `Event.record`
on a Stream object cost about 12 us of a call; the events stay torch's, for query and synchronize).
"""

from __future__ import annotations

import weakref
from typing import List, Optional, Tuple

import torch
from torch import Tensor

from . import constants

SCHEDULE_BYTES = 4 * constants.SCHEDULE_SIZE  # int32 schedule words
TOTAL_AT, TOTAL_COUNT = SCHEDULE_BYTES, 4  # int64: total list length, total predicted cost, two words of scratch
PREDICTED_AT, PREDICTED_COUNT = TOTAL_AT + 8 * TOTAL_COUNT, 2  # float64: predicted frame cost (auto, lpt)
REPORT_BYTES = PREDICTED_AT + 8 * PREDICTED_COUNT


class ReportWords:
    """One device buffer holding a workspace's schedule (int32), total (int64) and predicted (float64) arrays as
    views, so that one copy takes all three."""

    def __init__(self, device: torch.device):
        self.words = torch.zeros(REPORT_BYTES, dtype=torch.uint8, device=device)
        self.schedule, self.total, self.predicted = views(self.words)


def views(words: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    """(schedule, total, predicted) of a report buffer, on the device or a host copy."""
    return (words[:SCHEDULE_BYTES].view(torch.int32), words[TOTAL_AT:PREDICTED_AT].view(torch.int64),
            words[PREDICTED_AT:REPORT_BYTES].view(torch.float64))


def facts(words: Tensor) -> Tuple[List[int], List[int], List[float]]:
    """The schedule words, the two totals and the two predicted costs of a report buffer on the host."""
    schedule, total, predicted = views(words)
    return schedule.tolist(), total[:2].tolist(), predicted.tolist()


_MEMCPY_DEVICE_TO_HOST = 2  # cudaMemcpyDeviceToHost
_runtime = None  # CuPy's CUDA runtime module, looked up once (an import on every call cost about 2 us)


def _cuda_runtime():
    global _runtime
    if _runtime is None:
        from .cuda_calls import cuda_runtime

        _runtime = cuda_runtime()
    return _runtime


def copy_async(destination: int, source: int, nbytes: int, stream_handle: int) -> None:
    """cudaMemcpyAsync device -> page-locked host on a raw stream handle."""
    (_runtime or _cuda_runtime()).memcpyAsync(destination, source, nbytes, _MEMCPY_DEVICE_TO_HOST, stream_handle)


def record_event(event: torch.cuda.Event, stream_handle: int) -> None:
    """cudaEventRecord of a torch event (one of new_event's) on a raw stream handle."""
    (_runtime or _cuda_runtime()).eventRecord(event.cuda_event, stream_handle)


def new_event(device: torch.device) -> torch.cuda.Event:
    """A torch event that exists on `device` (torch creates one at its first record), for record_event."""
    event = torch.cuda.Event()
    event.record(torch.cuda.current_stream(device))
    return event


def page_locked(*shape: int) -> Tensor:
    return torch.empty(shape, dtype=torch.uint8, pin_memory=True)


class ReportRing:
    """SLOTS rows of page-locked memory, each the copy of one frame's report words, taken in turn."""

    SLOTS = 16

    def __init__(self, words: Tensor):
        self.words = words  # the workspace's device buffer (ReportWords.words)
        self.nbytes = words.numel()
        self.host = page_locked(self.SLOTS, self.nbytes)
        self.events = [new_event(words.device) for _ in range(self.SLOTS)]
        self.owners: List[Optional[weakref.ref]] = [None] * self.SLOTS  # the KeptReport in each row
        self.next_slot = 0

    def keep(self, stream_handle: int) -> "KeptReport":
        """Copies the words as the frame leaves them (after its kernels), without waiting, on `stream_handle` (the
        frame's cudaStream_t, the current stream)."""
        slot = self.next_slot
        owner = self.owners[slot]
        earlier = owner() if owner is not None else None
        if earlier is not None and earlier.words is None:
            if not self.events[slot].query():  # the GPU is SLOTS kept frames behind the host: a copy of its own
                host, event = page_locked(1, self.nbytes), new_event(self.words.device)
                copy_async(host.data_ptr(), self.words.data_ptr(), self.nbytes, stream_handle)
                record_event(event, stream_handle)
                return KeptReport(host, 0, event)
            earlier.read()  # (its copy has finished: moved out of the row it leaves)
        self.next_slot = (slot + 1) % self.SLOTS
        copy_async(self.host.data_ptr() + slot * self.nbytes, self.words.data_ptr(), self.nbytes, stream_handle)
        record_event(self.events[slot], stream_handle)
        kept = KeptReport(self.host, slot, self.events[slot])
        self.owners[slot] = weakref.ref(kept)
        return kept


class KeptReport:
    """One frame's copy in page-locked memory (row `slot` of `rows`, a ReportRing's), read into ordinary memory on
    first use."""

    __slots__ = ("rows", "slot", "event", "words", "__weakref__")

    def __init__(self, rows: Tensor, slot: int, event: torch.cuda.Event):
        self.rows, self.slot, self.event, self.words = rows, slot, event, None

    def read(self) -> Tensor:
        if self.words is None:
            self.event.synchronize()
            self.words = self.rows[self.slot].clone()
            self.rows = self.event = None  # (the row is free for a later frame)
        return self.words
