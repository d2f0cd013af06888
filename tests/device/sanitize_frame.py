"""Renders one small frame in every mode, for compute-sanitizer (memcheck, racecheck) on the GPU.

    compute-sanitizer --tool memcheck python3 tests/device/sanitize_frame.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import gsplat_lpt  # noqa: E402
from gsplat_lpt import LPTConfig  # noqa: E402
from test_gpu_parity import cameras, project, random_gaussians  # noqa: E402


def main() -> None:
    W, H, C = 100, 70, 2
    frame = project(*random_gaussians(1500, seed=1, cluster=3000), *cameras(C, W, H), W, H)
    backgrounds = torch.rand(C, 3, device="cuda")
    masks = torch.rand(frame["isect_offsets"].shape, device="cuda") > 0.2
    # (gsplat_kernel_below=0: a frame this small would otherwise go to gsplat's own kernel)
    configs = [LPTConfig(mode="lpt", gsplat_kernel_below=0), LPTConfig(mode="chunk", chunk_count=4),
               LPTConfig(mode="fixed", heavy_ratio=0.2, chunk_count=16),
               LPTConfig(mode="auto", overhead_lambda=0.0, min_gain=0.0, gsplat_kernel_below=0)]
    for config in configs:
        for extra in ({}, {"backgrounds": backgrounds}, {"backgrounds": backgrounds, "masks": masks}):
            colors, alphas, stats = gsplat_lpt.rasterize_to_pixels(**frame, **extra, config=config, return_stats=True)
            torch.cuda.synchronize()
            print(config.mode, sorted(extra), "h =", stats["chunked_tiles"], "k =", stats["chunk_count"],
                  "mean colour", float(colors.mean()))


if __name__ == "__main__":
    main()
