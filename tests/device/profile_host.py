"""Where the host time of one rasterize call goes: cProfile over many calls enqueued while the GPU is busy
with earlier work (so no call waits for it), for the lpt and auto modes.

    python3 tests/device/profile_host.py
"""

from __future__ import annotations

import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gsplat_lpt  # noqa: E402
from gsplat_lpt import LPTConfig  # noqa: E402
from gsplat_lpt.hook import original  # noqa: E402
from test_gpu_parity import cameras, project, random_gaussians  # noqa: E402


def main() -> None:
    frame = project(*random_gaussians(20000, seed=1), *cameras(1, 640, 480), 640, 480)
    calls = 40  # few enough that the launch queue never fills (a full queue blocks the host: auto enqueues 8 commands a call)
    for label, fn in (("gsplat", lambda: original("rasterize_to_pixels")(**frame)),
                      ("lpt", lambda: gsplat_lpt.rasterize_to_pixels(**frame, config=LPTConfig(mode="lpt"))),
                      ("auto", lambda: gsplat_lpt.rasterize_to_pixels(**frame, config=LPTConfig(mode="auto")))):
        for _ in range(10):
            fn()
        torch.cuda.synchronize()
        torch.cuda._sleep(int(3e9))  # keeps the GPU busy: the calls below never wait for it
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        per_call = (time.perf_counter() - start) * 1e6 / calls
        torch.cuda.synchronize()
        torch.cuda._sleep(int(3e9))
        calls_made = calls
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(calls):
            fn()
        profiler.disable()
        torch.cuda.synchronize()
        stats = pstats.Stats(profiler, stream=io.StringIO())
        print(f"== {label}: {per_call:.1f} us per call (host, GPU busy)")
        print(f"   {'own us':>7} {'cum us':>7} per call (profiled), function")
        rows = sorted(stats.stats.items(), key=lambda item: -item[1][3])[:28]  # by cumulative time
        for (path, line, name), (_, calls, own, cumulative, _) in rows:
            where = f"{Path(path).name}:{line}({name})" if line else name
            print(f"   {own * 1e6 / calls_made:>7.2f} {cumulative * 1e6 / calls_made:>7.2f} {where[:90]}")


if __name__ == "__main__":
    main()
