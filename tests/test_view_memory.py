"""ViewMemory: the pixels per thread finished frames asked for, kept per view (CPU)."""

from __future__ import annotations

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
