"""Whole `gsplat.rasterization` calls of one small frame (random Gaussians, one camera), the three ways the device
tools compare them: backend "cuda", "lpt", and "lpt" with every frame handed to gsplat's own blend (the hook alone:
our wrapper, dispatcher and report, none of our front end or kernels), which splits a whole call's difference into
the hook's share and the blend's. Used by host_pieces.py, whole_call_cprofile.py and whole_call_timeline.py."""

from __future__ import annotations

from typing import Callable, Dict

import torch

from test_gpu_parity import cameras, random_gaussians

HOOK_ALONE = "hook alone"


def whole_calls(width: int = 640, height: int = 480, gaussians: int = 20_000) -> Dict[str, Callable[[], object]]:
    """{"cuda" | "lpt" | HOOK_ALONE: a call of gsplat.rasterization on the same frame}"""
    import gsplat

    from gsplat_lpt import LPTConfig  # (importing gsplat_lpt hooks gsplat)

    means, quats, scales, opacities = random_gaussians(gaussians, seed=1)
    colors = torch.rand(means.shape[0], 3, device="cuda")
    viewmats, Ks = cameras(1, width, height)
    options = {"cuda": dict(backend="cuda"), "lpt": dict(backend="lpt"),
               HOOK_ALONE: dict(backend="lpt", lpt_config=LPTConfig(gsplat_kernel_below=1 << 40))}
    return {name: lambda o=o: gsplat.rasterization(means, quats, scales, opacities, colors, viewmats, Ks, width,
                                                   height, **o)
            for name, o in options.items()}
