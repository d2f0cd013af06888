"""CUDA-event timing: warm-up, then all variants interleaved (so drift hits them alike), median of many runs."""

from __future__ import annotations

import statistics
from typing import Callable, Dict, List, Mapping

import torch


def time_interleaved(
    variants: Mapping[str, Callable[[], object]], repeats: int = 21, warmup: int = 3
) -> Dict[str, List[float]]:
    """Milliseconds of each call, variants interleaved round-robin so drift hits all of them alike."""
    if not torch.cuda.is_available():
        raise RuntimeError("timing needs a CUDA device")
    for _ in range(warmup):
        for fn in variants.values():
            fn()
    torch.cuda.synchronize()
    times: Dict[str, List[float]] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, fn in variants.items():
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            times[name].append(start.elapsed_time(stop))
    return times


def median_ms(samples: List[float]) -> float:
    return float(statistics.median(samples))
