"""ReportRing on the CPU: one buffer's views, the facts read back, rows taken in turn and handed over only once read
(page-locked memory, the asynchronous copy and CUDA events stood in for)."""

from __future__ import annotations

import ctypes

import torch

from gsplat_lpt import constants
from gsplat_lpt import report_ring
from gsplat_lpt.report_ring import KeptReport, ReportRing, facts, views


class FakeEvent:
    """A CUDA event on the CPU: records nothing; `done` says whether query() finds it finished."""

    def __init__(self):
        self.done, self.waited = True, 0

    def record(self, stream=None):
        pass

    def query(self):
        return self.done

    def synchronize(self):
        self.waited += 1


def words(schedule0, total, predicted):
    buffer = torch.zeros(report_ring.REPORT_BYTES, dtype=torch.uint8)
    schedule, totals, costs = views(buffer)
    schedule[0], totals[:2], costs[:] = schedule0, torch.tensor(total), torch.tensor(predicted, dtype=torch.float64)
    return buffer


def ring_on_the_cpu(device_words, monkeypatch):
    """A ReportRing over CPU words: the copy is a memmove at once, an event records nothing."""
    monkeypatch.setattr(report_ring, "new_event", lambda device: FakeEvent())
    monkeypatch.setattr(report_ring, "page_locked", lambda *shape: torch.empty(shape, dtype=torch.uint8))
    monkeypatch.setattr(report_ring, "copy_async", lambda dst, src, nbytes, stream: ctypes.memmove(dst, src, nbytes))
    monkeypatch.setattr(report_ring, "record_event", lambda event, stream: None)
    return ReportRing(device_words)


def test_the_three_arrays_are_views_of_one_buffer_at_their_alignment():
    buffer = torch.zeros(report_ring.REPORT_BYTES, dtype=torch.uint8)
    schedule, total, predicted = views(buffer)
    assert (schedule.numel(), total.numel(), predicted.numel()) == (constants.SCHEDULE_SIZE, 4, 2)
    assert (schedule.dtype, total.dtype, predicted.dtype) == (torch.int32, torch.int64, torch.float64)
    for part in (schedule, total, predicted):
        assert part.data_ptr() % part.element_size() == 0 and part.untyped_storage().data_ptr() == \
            buffer.untyped_storage().data_ptr()
    schedule[3], total[1], predicted[0] = 7, 1 << 40, 2.5
    assert facts(buffer) == ([0, 0, 0, 7] + [0] * (constants.SCHEDULE_SIZE - 4), [0, 1 << 40], [2.5, 0.0])


def test_rows_are_taken_in_turn_and_handed_over_only_once_read(monkeypatch):
    device_words = words(0, [0, 0], [0.0, 0.0])
    ring = ring_on_the_cpu(device_words, monkeypatch)
    kept = []
    for frame in range(ReportRing.SLOTS + 3):
        device_words.copy_(words(frame, [frame, 2 * frame], [frame / 2, 0.0]))  # what this frame's plan wrote
        kept.append(ring.keep(stream_handle=0))
    # the first three rows were taken over: their frames' words were read out first
    assert all(kept[i].words is not None for i in range(3)) and kept[3].words is None
    assert [facts(k.read())[0][0] for k in kept] == list(range(ReportRing.SLOTS + 3))
    assert facts(kept[5].read())[1:] == ([5, 10], [2.5, 0.0])


def test_a_row_whose_frame_has_not_finished_is_not_taken_over(monkeypatch):
    """With the GPU SLOTS kept frames behind, a report gets a copy of its own; the ring's row stays its frame's."""
    device_words = words(0, [0, 0], [0.0, 0.0])
    ring = ring_on_the_cpu(device_words, monkeypatch)
    kept = [ring.keep(stream_handle=0) for _ in range(ReportRing.SLOTS)]
    ring.events[0].done = False
    device_words.copy_(words(99, [1, 2], [3.0, 4.0]))
    late = ring.keep(stream_handle=0)
    assert isinstance(late, KeptReport) and late.event not in ring.events and ring.next_slot == 0
    assert kept[0].words is None and facts(late.read()) == (facts(device_words)[0], [1, 2], [3.0, 4.0])
    assert facts(kept[0].read())[0][0] == 0


def test_a_dropped_report_leaves_its_row_without_a_read(monkeypatch):
    ring = ring_on_the_cpu(words(1, [0, 0], [0.0, 0.0]), monkeypatch)
    for _ in range(ReportRing.SLOTS + 1):
        ring.keep(stream_handle=0)  # (nothing holds the reports)
    assert all(event.waited == 0 for event in ring.events)
