"""Whether a frame's kernels co-execute inside a CUDA graph as they do in eager calls (diagnosis, not part of the
suite).

Nsight Compute ran our chunk kernel and LPT kernel one after the other even over ranges of graph replays
(tests/device/sm_activity.py --graphs --calls N). This tells the profiler's serialisation from the graph's: per
frame and mode, the GPU time of a call made eagerly with the host hidden (a sleep kernel ahead of each call, as
bench_core.py times it) and of one replay of the call captured in a CUDA graph (`replays` replays enqueued back to
back between two events, their mean), for `auto` as it runs and with `co_execute=False` (the LPT kernel after the
chunk kernel): where `auto`'s replay takes as long as the serial arrangement's, the graph lost the co-execution.

    python3 tests/device/graph_replay.py [--frames mild moderate street extreme fog balanced] [--replays 40] [--repeats 15]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))


def graph_ms(call, replays: int) -> float:
    """Mean GPU ms of one replay of `call` captured in a CUDA graph, `replays` replays back to back."""
    from sm_activity import captured

    replay = captured(call)
    for _ in range(3):
        replay()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        replay()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / replays


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", nargs="*", default=["mild", "moderate", "street", "extreme", "fog", "balanced"])
    parser.add_argument("--replays", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=15, help="eager calls per mode (median)")
    args = parser.parse_args()

    import gsplat_lpt
    from bench_core import ladder_frames, on_stream, time_interleaved
    from gsplat_lpt import LPTConfig
    from gsplat_lpt.hook import original

    gsplat_blend = original("rasterize_to_pixels")
    configs = {"lpt": LPTConfig(mode="lpt"), "auto": LPTConfig(mode="auto"),
               "auto serial": LPTConfig(mode="auto", co_execute=False)}
    print(f"{'frame':<18} {'mode':<12} {'eager ms':>9} {'graph ms':>9} {'graph / eager':>13}", flush=True)
    for name, frame in ladder_frames(args.frames):
        calls = {"gsplat": lambda: gsplat_blend(**frame)}
        for mode, config in configs.items():
            calls[mode] = lambda c=config: gsplat_lpt.rasterize_to_pixels(**frame, config=c)
        eager = time_interleaved({mode: on_stream(torch.cuda.Stream(), call) for mode, call in calls.items()},
                                 args.repeats, busy=True)
        for mode, call in calls.items():
            graph = graph_ms(call, args.replays)
            print(f"{name:<18} {mode:<12} {eager[mode]:>9.3f} {graph:>9.3f} {graph / eager[mode]:>13.2f}", flush=True)
        del frame, calls
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
