"""Whole calls (GPU idle when each starts) of identical auto configurations, each on its own stream: does one of
them pay more than the others? (bench_core's `auto` measured 20-30% above the identical `auto-nofloor`.)

    python3 tests/device/whole_call_check.py [--frames extreme fog] [--repeats 21]
"""

from __future__ import annotations

import argparse
import statistics
import sys
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
        for label, times in samples.items():
            q = statistics.quantiles(times, n=10)
            print(f"{name:<16} {label:<8} whole median {statistics.median(times):.3f} ms (p10 {q[0]:.3f}, p90 {q[-1]:.3f})"
                  f"  GPU-only {busy[label]:.3f} ms", flush=True)


if __name__ == "__main__":
    main()
