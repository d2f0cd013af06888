"""GPU: small frames rendered by gsplat's own kernel (LPTConfig.gsplat_kernel_below), through gsplat.rasterization."""

from __future__ import annotations

import pytest
import torch

from gsplat_lpt import LPTConfig
from test_gpu_parity import cameras, random_gaussians

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("variant", ["3dgs", "2dgs", "3dgut"])
def test_small_frames_are_gsplats_own_kernel_through_rasterization(variant, monkeypatch):
    """By default (LPTConfig.gsplat_kernel_below None) a frame below Variant.small_frame_intersections goes to
    gsplat's own kernel: the images of backend="cuda" bit for bit, its gradients (up to the order of gsplat's atomic
    sums), and meta["lpt"] says so; with
    gsplat_kernel_below=0 the same frame is ours."""
    import gsplat

    from gsplat_lpt import frontend

    monkeypatch.setattr(frontend, "HAND_OFF_SMALL_FRAMES", True)  # (as outside the tests)
    means, quats, scales, opacities = random_gaussians(2000, seed=31)
    # (gsplat 1.5.3's rasterization_2dgs takes colours per camera)
    colors = torch.rand(*(2,) * (variant == "2dgs"), means.shape[0], 3, device="cuda", requires_grad=True)
    viewmats, Ks = cameras(2, 160, 96)
    render = {"3dgs": gsplat.rasterization, "2dgs": gsplat.rasterization_2dgs,
              "3dgut": lambda *a, **k: gsplat.rasterization(*a, with_ut=True, with_eval3d=True, packed=False, **k)
              }[variant]
    call = lambda backend, **extra: render(means, quats, scales, opacities, colors, viewmats, Ks, 160, 96,  # noqa: E731
                                           backend=backend, **extra)
    reference, handed_off, ours = call("cuda"), call("lpt"), call("lpt", lpt_config=LPTConfig(gsplat_kernel_below=0))
    meta = handed_off[-1]["lpt"]
    assert meta["fallback"].startswith("gsplat kernel (a frame of") and meta["variant"] == variant
    assert "fallback" not in ours[-1]["lpt"]
    for a, b in zip(reference[:2], handed_off[:2]):
        assert torch.equal(a, b)
    grads = []
    for outputs in (reference, handed_off):
        colors.grad = None
        outputs[0].sum().backward()
        grads.append(colors.grad.clone())
    assert torch.allclose(*grads, rtol=1e-5, atol=1e-6)  # (gsplat's backward adds up gradients in atomics)
