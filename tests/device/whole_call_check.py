"""Whole calls (GPU idle when each starts) of identical auto configurations, each on its own stream: does one of
them pay more than the others? (bench_core's `auto` measured 20-30% above the identical `auto-nofloor`.)
Also the CPU time of each call on an idle GPU against how long the thread had just waited for the GPU: on the
H200's host a call after a long wait takes longer, whichever backend it is, which is what that was.

    python3 tests/device/whole_call_check.py [--frames extreme fog] [--repeats 21]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import ladder_frames, on_stream, time_interleaved  # noqa: E402

import gsplat_lpt  # noqa: E402
from gsplat_lpt import LPTConfig  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", nargs="*", default=["extreme", "fog"])
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args()
    from gsplat_lpt.hook import original

    gsplat_blend = original("rasterize_to_pixels")
    for name, frame in ladder_frames(args.frames):
        calls = {"gsplat": lambda f=frame: gsplat_blend(**f)}
        for label in ("auto-a", "auto-b", "auto-c", "lpt"):
            config = LPTConfig(mode="lpt" if label == "lpt" else "auto")
            calls[label] = on_stream(torch.cuda.Stream(), lambda f=frame, c=config: gsplat_lpt.rasterize_to_pixels(**f, config=c))
        torch.cuda.synchronize()
        for _ in range(3):  # as bench_core warms its auto
            calls["auto-a"]()
        samples = {}
        time_interleaved(calls, args.repeats, samples=samples)
        busy = time_interleaved(calls, args.repeats, busy=True)
        host = host_per_call(calls, args.repeats)
        for label, times in samples.items():
            q = statistics.quantiles(times, n=10)
            print(f"{name:<16} {label:<8} whole median {statistics.median(times):.3f} ms (p10 {q[0]:.3f}, p90 {q[-1]:.3f})"
                  f"  GPU-only {busy[label]:.3f} ms  host per call (GPU idle) {host[label][0]:.1f} us"
                  f" after waiting {host[label][1]:.2f} ms", flush=True)
        pairs = [pair for label in calls for pair in host[label][2]]
        for low, high in ((0, 1), (1, 10), (10, 1e9)):
            hosts = [h for w, h in pairs if low <= w < high]
            if hosts:
                print(f"{name:<16} calls after a wait of {low}-{high if high < 1e9 else 'more'} ms: {len(hosts)}, "
                      f"median host time {statistics.median(hosts):.1f} us", flush=True)


def host_per_call(calls, repeats):
    """Per configuration: the median CPU time (us) of one call, the GPU idle when it starts (as in the whole
    calls above), the median wait (ms) for the GPU just before it, and every (wait, time) pair; the same seeded
    random order per repeat as time_interleaved."""
    times = {label: [] for label in calls}
    waits = {label: [] for label in calls}
    order = list(calls.items())
    shuffle = random.Random(0).shuffle
    for repeat in range(repeats):
        shuffle(order)
        for label, fn in order:
            stream = getattr(fn, "stream", None) or torch.cuda.current_stream()
            inner = getattr(fn, "inner", fn)
            with torch.cuda.stream(stream):
                waited = time.perf_counter()
                torch.cuda.synchronize()
                start = time.perf_counter()
                inner()
                times[label].append((time.perf_counter() - start) * 1e6)
                waits[label].append((start - waited) * 1e3)
    torch.cuda.synchronize()
    return {label: (statistics.median(times[label]), statistics.median(waits[label]),
                    list(zip(waits[label], times[label]))) for label in calls}


if __name__ == "__main__":
    main()
