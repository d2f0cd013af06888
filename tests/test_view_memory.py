"""ViewMemory: the pixels per thread finished frames asked for, kept per view (CPU)."""

from __future__ import annotations

from gsplat_lpt import constants
from gsplat_lpt.cuda_calls import ring_answers
from gsplat_lpt.view_memory import ViewMemory, same_view

SIZE = (8160, 1920, 1080, 16, 120, 68)  # a frame's geometry (Intersections.history_key)


def test_views_taken_in_turn_keep_their_own_answer():
    memory = ViewMemory()
    assert memory.pixels(SIZE, 1_000_000) == 1  # nothing finished yet
    memory.planned(1, SIZE, 1_000_000)  # a balanced side view
    memory.planned(2, SIZE, 3_000_000)  # a heavy front view
    memory.planned(3, SIZE, 1_010_000)
    memory.finished(1, 2)
    memory.finished(2, 1)  # the heavy view finished last
    assert memory.pixels(SIZE, 1_020_000) == 2  # the side view keeps its own answer
    assert memory.pixels(SIZE, 2_900_000) == 1
    assert memory.pixels(SIZE, 1_800_000) == 1  # no view within a quarter: the last finished frame's
    assert memory.pixels((60, 160, 96, 16, 10, 6), 1_000_000) == 1  # another frame size is another view
    memory.finished(3, 1)  # the side view now asks for one
    assert memory.pixels(SIZE, 1_000_000) == 1
    assert len(memory.views) == 2 and not memory.in_flight


def test_frames_finished_unseen_are_dropped_and_views_are_bounded():
    memory = ViewMemory(views=2)
    counts = {frame: 1_000_000 * 3 ** frame for frame in range(1, 7)}  # six views, none within a quarter of another
    for frame in range(1, 6):
        memory.planned(frame, SIZE, counts[frame])
    memory.finished(4, 2)  # frames 1-3 finished without their status being read
    assert [f for f, *_ in memory.in_flight] == [5]
    assert memory.pixels(SIZE, counts[4]) == 2 and memory.pixels(SIZE, counts[2]) == 2  # (the last answer)
    memory.finished(5, 1)
    memory.planned(6, SIZE, counts[6])
    memory.finished(6, 2)
    assert [view[1] for view in memory.views] == [counts[5], counts[6]]  # frame 4's view, least recent, forgotten
    assert memory.pixels(SIZE, counts[5]) == 1 and memory.pixels(SIZE, counts[6]) == 2
    memory.finished(7, 1)  # a status of a frame it never saw planned: only the last answer changes
    assert memory.pixels(SIZE, counts[4]) == 1 and memory.pixels(SIZE, counts[6]) == 2


def test_same_view_is_within_a_quarter():
    assert same_view(750, 1000) and same_view(1250, 1000) and not same_view(749, 1000) and not same_view(1251, 1000)


def _ring(answers):
    """Mapped status words whose ring holds `answers` {frame: pixels}, as the kernels write them."""
    words = [0] * constants.STATUS_SIZE
    for frame, pixels in answers.items():
        slot = len(constants.STATUS_WORDS) + frame % constants.STATUS_RING
        words[slot] = (frame & constants.STATUS_RING_FRAME_MASK) << 2 | pixels
    return words


def test_the_status_ring_gives_every_frame_finished_since_the_last_read():
    words = _ring({5: 2, 6: 1, 7: 2})
    assert ring_answers(words, 4, 7) == [(5, 2), (6, 1), (7, 2)]
    assert ring_answers(words, 5, 7) == [(6, 1), (7, 2)]  # (frame 5 was read before)
    assert ring_answers(words, 7, 7) == []
    ring = constants.STATUS_RING
    words = _ring({frame: 1 + frame % 2 for frame in range(1, 2 * ring + 4)})  # frames the ring no longer holds
    latest = 2 * ring + 3
    assert ring_answers(words, 0, latest) == [(f, 1 + f % 2) for f in range(latest - ring + 1, latest + 1)]
    words = _ring({9: 2})
    words[len(constants.STATUS_WORDS) + (9 + ring) % ring] = ((9 + ring) << 2) | 1  # overwritten by a later frame
    assert ring_answers(words, 8, 9) == []
    assert ring_answers(_ring({}), -1, 3) == []  # (slots never written: frame 0 matches no frame from 1 on)
    big = constants.STATUS_RING_FRAME_MASK + 7  # frame indices past the mask compare in its bits
    assert ring_answers(_ring({big: 2}), big - 1, big) == [(big, 2)]


def test_the_status_ring_reads_one_new_frame_as_it_reads_several():
    words = _ring({11: 2, 12: 1})
    assert ring_answers(words, 11, 12) == [(12, 1)] == ring_answers(words, 10, 12)[1:]
    assert ring_answers(words, 12, 13) == []  # (frame 13's slot holds nothing of it)
    words[len(constants.STATUS_WORDS) + 12 % constants.STATUS_RING] = (12 << 2) | 3  # no answer a kernel writes
    assert ring_answers(words, 11, 12) == [] == ring_answers(words, 10, 12)[1:]
