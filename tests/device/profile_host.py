"""Where the host time of one rasterize call goes: cProfile over many calls enqueued while the GPU is busy
with earlier work (so no call waits for it), for the lpt and auto modes.

    python3 tests/device/profile_host.py
"""

from __future__ import annotations

import cProfile
import io
import pstats
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gsplat_lpt  # noqa: E402
from gsplat_lpt import LPTConfig  # noqa: E402
from gsplat_lpt.hook import original  # noqa: E402
from test_gpu_parity import cameras, project, random_gaussians  # noqa: E402


def segments(frame, config, calls=100) -> None:
    """Host time of each step of one inference call (3DGS), timed around the calls the public function makes
    (validation, outputs, plan, run), while the GPU is busy with earlier work."""
    from gsplat_lpt.runtime import rasterizer_for
    from gsplat_lpt.variants.gaussian3d import VARIANT, Frame3DGS, Outputs3DGS, Params3DGS

    keys = ("means2d", "conics", "colors", "opacities", "backgrounds", "masks", "image_width", "image_height",
            "tile_size", "isect_offsets", "flatten_ids")
    args = [frame.get(k) for k in keys] + [False]
    steps = {"validate": 0, "outputs+structs": 0, "rasterizer_for": 0, "plan": 0, "run": 0}
    for warm in (True, False):
        torch.cuda.synchronize()
        torch.cuda._sleep(int(2e9))
        clock = time.perf_counter_ns
        for _ in range(10 if warm else calls):
            t0 = clock()
            f = Frame3DGS(*args)
            t1 = clock()
            inter, dims = f.inter, f.image_dims
            H, W, C = inter.image_height, inter.image_width, f.channels
            colors = torch.empty(dims + (H, W, C), dtype=torch.float32, device=f.device)
            alphas = torch.empty(dims + (H, W, 1), dtype=torch.float32, device=f.device)
            params = Params3DGS(f.means2d.data_ptr(), f.conics.data_ptr(), f.opacities.data_ptr(),
                                f.colors.data_ptr(), 0)
            outputs = Outputs3DGS(colors.data_ptr(), alphas.data_ptr(), 0)
            t2 = clock()
            r = rasterizer_for(VARIANT, C, inter.tile_size, f.device)
            t3 = clock()
            plan = r.plan(inter, config, True, None)
            t4 = clock()
            r.run(plan, params, outputs)
            t5 = clock()
            if not warm:
                for name, dt in zip(steps, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)):
                    steps[name] += dt
        torch.cuda.synchronize()
    print(f"   steps ({config.mode}, us per call): "
          + ", ".join(f"{name} {ns / 1e3 / calls:.1f}" for name, ns in steps.items())
          + f"; total {sum(steps.values()) / 1e3 / calls:.1f}")


def main() -> None:
    frame = project(*random_gaussians(20000, seed=1), *cameras(1, 640, 480), 640, 480)
    calls = 40  # few enough that the launch queue never fills (a full queue blocks the host: auto enqueues 8 commands a call)
    lpt, auto = LPTConfig(mode="lpt"), LPTConfig(mode="auto")  # (built once, as a script or the hook does)
    for label, fn in (("gsplat", lambda: original("rasterize_to_pixels")(**frame)),
                      ("lpt", lambda: gsplat_lpt.rasterize_to_pixels(**frame, config=lpt)),
                      ("auto", lambda: gsplat_lpt.rasterize_to_pixels(**frame, config=auto))):
        for _ in range(10):
            fn()
        rounds = []
        for _ in range(9):  # the median of 9 rounds: the host's own noise is a few us
            torch.cuda.synchronize()
            torch.cuda._sleep(int(2e8))  # keeps the GPU busy: the calls below never wait for it
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            rounds.append((time.perf_counter() - start) * 1e6 / calls)
        per_call = statistics.median(rounds)
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
    for cluster in (0, 4000):  # a balanced frame, and one whose heaviest tile auto chunks
        frame = project(*random_gaussians(20000, seed=1, cluster=cluster), *cameras(1, 640, 480), 640, 480)
        print(f"== steps, frame with cluster={cluster}")
        for mode in ("lpt", "auto"):
            segments(frame, LPTConfig(mode=mode))


if __name__ == "__main__":
    main()
