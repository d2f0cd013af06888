"""CUDA-event timing: warm-up, then all variants interleaved (so drift hits them alike), median of many runs."""

from __future__ import annotations

import contextlib
import random
import statistics
from typing import Callable, Dict, List, Mapping, Optional

import torch


def time_interleaved(
    variants: Mapping[str, Callable[[], object]], repeats: int = 21, warmup: int = 3,
    streams: Optional[Mapping[str, torch.cuda.Stream]] = None, seed: int = 0,
) -> Dict[str, List[float]]:
    """Milliseconds of each call, variants interleaved (each round in a new order, seeded) so drift hits all of them
    alike; a variant named in `streams` is called (and timed) with that stream current."""
    if not torch.cuda.is_available():
        raise RuntimeError("timing needs a CUDA device")
    streams = streams or {}

    def on_its_stream(name):
        return torch.cuda.stream(streams[name]) if name in streams else contextlib.nullcontext()

    for _ in range(warmup):
        for name, fn in variants.items():
            with on_its_stream(name):
                fn()
    torch.cuda.synchronize()
    times: Dict[str, List[float]] = {name: [] for name in variants}
    order = list(variants.items())
    shuffle = random.Random(seed).shuffle
    for _ in range(repeats):
        # a new order each round: a call's time includes the host's work on it, which grows after a long wait for
        # the GPU (a sync behind a long call); in a fixed order one variant would always follow the same one
        shuffle(order)
        for name, fn in order:
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            with on_its_stream(name):
                start.record()
                fn()
                stop.record()
            stop.synchronize()
            times[name].append(start.elapsed_time(stop))
    return times


def median_ms(samples: List[float]) -> float:
    return float(statistics.median(samples))
