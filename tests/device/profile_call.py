"""Where the time of one rasterize call goes: host microseconds per step (calls enqueued back to back,
no sync in between) and GPU time of the blending kernels alone (a fixed plan, run_plan in a loop).

    python3 tests/device/profile_call.py
"""
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import ladder_frame  # noqa: E402

from gsplat_lpt import LPTConfig, runtime  # noqa: E402
from gsplat_lpt.plan import plan_frame  # noqa: E402
from gsplat_lpt.rasterize import _FrameJob  # noqa: E402


def host_and_gpu_us(fn, repeats=100):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    t0 = time.perf_counter()
    for _ in range(repeats):
        fn()
    host = (time.perf_counter() - t0) * 1e6 / repeats
    stop.record()
    stop.synchronize()
    return host, start.elapsed_time(stop) * 1e3 / repeats


for heavy in (0, 150_000):
    frame = ladder_frame(heavy)
    n = frame.flatten_ids.numel()
    K = runtime.concurrent_ctas("3dgs", 3, 256, 0)
    rows = {}
    workloads = runtime.tile_workloads_on_device(frame.isect_offsets, n, None)
    rows["tile_workloads kernel"] = host_and_gpu_us(lambda: runtime.tile_workloads_on_device(frame.isect_offsets, n, None))
    rows["torch.sort"] = host_and_gpu_us(lambda: torch.sort(workloads, descending=True))
    for mode in ("lpt", "auto"):
        config = LPTConfig(mode=mode)
        rows[f"plan_frame {mode}"] = host_and_gpu_us(lambda: plan_frame(frame.isect_offsets, n, K, config))
        job = _FrameJob(config, True)
        job.render(frame.means2d, frame.conics, frame.colors, frame.opacities, frame.backgrounds, None,
                   frame.width, frame.height, 16, frame.isect_offsets, frame.flatten_ids)
        plan = job.plan
        args = runtime.BlendArguments("3dgs", (frame.means2d, frame.conics, frame.opacities), frame.colors,
                                      frame.backgrounds, None, frame.isect_offsets.reshape(-1), frame.flatten_ids, 1,
                                      frame.width, frame.height, 16, frame.isect_offsets.shape[-1],
                                      frame.isect_offsets.shape[-2])

        def blend_kernels_only(plan=plan, args=args):
            plan.schedule[0].zero_()  # the LPT kernel counts its queue up; start it again (a memset)
            return runtime.run_plan(plan, args)

        if mode == "lpt":
            rows["run_plan lpt (kernels)"] = host_and_gpu_us(blend_kernels_only)
        rows[f"rasterize_to_pixels {mode}"] = host_and_gpu_us(lambda: frame.blend(mode, config))
    rows["gsplat vanilla"] = host_and_gpu_us(lambda: frame.blend("vanilla"))
    print(f"\nheavy={heavy} n_isects={n}")
    for name, (host, gpu) in rows.items():
        print(f"  {name:<28} host {host:8.1f} us   wall/GPU {gpu:8.1f} us")
