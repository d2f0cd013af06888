"""Where the host time of a whole `gsplat.rasterization` call goes in Python, backend "cuda" against "lpt" and against
"lpt" with every frame handed to gsplat's own blend (the hook alone): cProfile over calls back to back, each
function's own time and call count per whole call, and the functions whose own time differs most from "cuda"'s.

    python3 tests/device/whole_call_cprofile.py [--size 640x480] [--gaussians 20000] [--calls 300]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from whole_calls import whole_calls  # noqa: E402


def per_call(profiler: cProfile.Profile, calls: int):
    """{(file:line(function)): (own us per call, calls per call)}"""
    stats = pstats.Stats(profiler).stats
    return {f"{Path(f).name}:{line}({name})": (tt * 1e6 / calls, nc / calls)
            for (f, line, name), (cc, nc, tt, ct, callers) in stats.items()}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="640x480")
    parser.add_argument("--gaussians", type=int, default=20_000)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    kinds = whole_calls(width, height, args.gaussians)
    profiles, walls = {}, {}
    for name, call in kinds.items():
        for _ in range(20):
            call()
        torch.cuda.synchronize()
        start = time.perf_counter_ns()
        for _ in range(args.calls):
            call()
        torch.cuda.synchronize()
        walls[name] = (time.perf_counter_ns() - start) / 1e3 / args.calls
        profiler = cProfile.Profile()
        torch.cuda.synchronize()
        profiler.enable()
        for _ in range(args.calls):
            call()
        torch.cuda.synchronize()
        profiler.disable()
        profiles[name] = per_call(profiler, args.calls)
    print(f"== {width}x{height}, {args.gaussians} Gaussians, {args.calls} whole calls back to back")
    for name in kinds:
        rows = profiles[name]
        total = sum(us for us, _ in rows.values())
        n = sum(c for _, c in rows.values())
        print(f"{name:<11} {walls[name]:8.1f} us per call unprofiled; profiled own time {total:8.1f} us in "
              f"{n:7.1f} function calls per call")
    for name in ("hook alone", "lpt"):
        print(f"\n== {name} against cuda: own us per call (calls per call), largest differences first")
        base, rows = profiles["cuda"], profiles[name]
        keys = sorted(set(base) | set(rows), key=lambda k: -abs(rows.get(k, (0, 0))[0] - base.get(k, (0, 0))[0]))
        for key in keys[:args.top]:
            a, b = base.get(key, (0.0, 0.0)), rows.get(key, (0.0, 0.0))
            print(f"{b[0] - a[0]:+8.2f}  {a[0]:7.2f} ({a[1]:5.1f}) -> {b[0]:7.2f} ({b[1]:5.1f})  {key}")
    print(f"\n== cuda: the {args.top} largest own times per call")
    for key, (us, n) in sorted(profiles["cuda"].items(), key=lambda kv: -kv[1][0])[:args.top]:
        print(f"{us:8.2f} ({n:5.1f})  {key}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
