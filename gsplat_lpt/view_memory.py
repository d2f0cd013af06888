"""What finished frames asked of later frames of the same view, kept per view on one stream.

The plan of each frame says on the GPU how many pixels per thread later frames like it should take (the
persistent kernel of one or two pixels: the host picks the kernel before the plan runs, and reads the answer
back later, without waiting). Cameras taken in turn on one stream (a rig's views, a training run's random
cameras) render frames of the same size whose answers differ: a balanced side view asks for two pixels, a heavy
front view for one. Read from whichever frame finished last, each view would run with another's choice.
`ViewMemory` keeps the answer per view, a view told apart by the frame's geometry and its number of intersections
(known on the host when the frame is planned): within a quarter of a remembered view's count, a frame is taken to
be that view (a moving camera's count drifts by a few percent per frame); otherwise it takes the last finished
frame's answer. The runtime hands it the answer of every frame finished since its last read (a ring of recent
frames' answers in the mapped status, `constants.STATUS_RING`), so a view whose frames never finish last is still
seen.
"""

from __future__ import annotations

from collections import deque
from typing import Deque, Hashable, List, Optional, Tuple

VIEWS = 8  # views remembered per stream (the least recently finished one is forgotten first)
IN_FLIGHT = 1024  # planned frames remembered until their status is read


def same_view(remembered: int, n_isects: int) -> bool:
    """An intersection count within a quarter of a remembered view's."""
    return 4 * abs(n_isects - remembered) <= n_isects


class ViewMemory:
    def __init__(self, views: int = VIEWS):
        self.capacity = views
        self.views: List[Tuple[Hashable, int, int]] = []  # (geometry, n_isects, pixels), least recent first
        # (frame index, geometry, n_isects) of the frames planned and not seen finished (bounded: a frame whose
        # status is never read, as with check_inputs, is forgotten in time)
        self.in_flight: Deque[Tuple[int, Hashable, int]] = deque(maxlen=IN_FLIGHT)
        self.last = 1  # the last finished frame's answer

    def planned(self, frame_index: int, geometry: Hashable, n_isects: int) -> None:
        """A frame was planned (frame indices increase)."""
        self.in_flight.append((frame_index, geometry, n_isects))

    def finished(self, frame_index: int, pixels: int) -> None:
        """The status of a finished frame: the pixels per thread its plan asks of later frames of its view."""
        self.last = pixels
        flight = self.in_flight
        while flight and flight[0][0] < frame_index:  # (frames before it finished unseen)
            flight.popleft()
        if not flight or flight[0][0] != frame_index:
            return
        _, geometry, n_isects = flight.popleft()
        index = self._find(geometry, n_isects)
        if index is not None:
            del self.views[index]
        elif len(self.views) >= self.capacity:
            del self.views[0]
        self.views.append((geometry, n_isects, pixels))

    def pixels(self, geometry: Hashable, n_isects: int) -> int:
        """The answer for a frame about to be planned: its view's, else the last finished frame's."""
        index = self._find(geometry, n_isects)
        return self.last if index is None else self.views[index][2]

    def _find(self, geometry: Hashable, n_isects: int) -> Optional[int]:
        best, best_gap = None, None
        for index, (view_geometry, count, _) in enumerate(self.views):
            if view_geometry == geometry and same_view(count, n_isects):
                gap = abs(n_isects - count)
                if best_gap is None or gap < best_gap:
                    best, best_gap = index, gap
        return best
