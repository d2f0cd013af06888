"""GPU: the 3DGUT per-warp cull (kernels/blend_3dgut.cu: pinhole cameras without distortion, global shutter) keeps
lpt mode equal to gsplat's eval3d kernel, and culling on or off renders the same floats, in both warp layouts.
The edge fuzz lists every Gaussian in every tile, placed by tests/test_cull_bound_3dgut.py's generator at the
threshold's whitened distance from rays on and around every warp border, so that the cull decides for all of them.
Cameras the bound does not cover (distortion, rolling shutter) keep no cull and are checked unchanged."""

from __future__ import annotations

import math

import pytest
import torch

from gsplat_lpt import LPTConfig

from test_cull_bound_3dgut import edge_gaussians, random_camera
from test_gpu_3dgut import CASE, case_frame, gsplat_forward, make_camera, ours_forward, project, random_gaussians

pytestmark = pytest.mark.gpu

CULLED_CASES = ["pinhole", "pinhole-odd-size-2cams", "pinhole-tile8", "pinhole-heavy-tile", "global-with-second-pose",
                "batch-dims"]
UNCULLED_CASES = ["pinhole-distorted", "rolling-top-to-bottom", "fisheye"]
WARP_SHAPES = ["blocks", "rows"]


def assert_equals_gsplat(ours, reference):
    colors, alphas, last_ids = ours[:3]
    ref_colors, ref_alphas, ref_last = reference
    assert colors.shape == ref_colors.shape
    assert (colors - ref_colors).abs().max().item() <= 1e-6
    assert (alphas - ref_alphas).abs().max().item() <= 1e-6
    assert torch.equal(last_ids, ref_last)


def assert_same_floats(a, b):
    for x, y in zip(a[:3], b[:3]):
        assert torch.equal(x, y)


def zero_coefficient_frame(seed=0):
    """gsplat's OpenCV pinhole model with every coefficient zero: the same rays as the perfect pinhole (culled)."""
    means, quats, scales, opacities = random_gaussians(2500, seed=seed)
    viewmats, Ks, camera = make_camera("pinhole", (), 2, 160, 96, seed=seed, distortion=True)
    for key in ("radial_coeffs", "tangential_coeffs", "thin_prism_coeffs"):
        camera[key] = torch.zeros_like(camera[key])
    return project((means, quats, scales, opacities), viewmats, Ks, camera, 160, 96)


@pytest.mark.parametrize("warp_shape", WARP_SHAPES)
@pytest.mark.parametrize("case", CULLED_CASES + ["opencv-zero-coefficients"] + UNCULLED_CASES)
def test_lpt_with_the_cull_equals_gsplat_and_the_unculled_floats(case, warp_shape):
    frame = zero_coefficient_frame() if case == "opencv-zero-coefficients" else case_frame(CASE[case], seed=3)
    reference = gsplat_forward(frame)
    culled = ours_forward(frame, LPTConfig(mode="lpt", cull=True, warp_shape=warp_shape))
    unculled = ours_forward(frame, LPTConfig(mode="lpt", cull=False, warp_shape=warp_shape))
    assert float(reference[1].mean()) > 0.05
    assert_equals_gsplat(culled, reference)
    assert_same_floats(culled, unculled)


@pytest.mark.parametrize("config", [LPTConfig(mode="chunk", chunk_count=4), LPTConfig(mode="auto")],
                         ids=["chunk4", "auto"])
def test_chunked_frames_render_the_same_floats_with_and_without_the_cull(config):
    frame = case_frame(CASE["pinhole-heavy-tile"], seed=1)
    on = ours_forward(frame, config.replace(cull=True))
    off = ours_forward(frame, config.replace(cull=False))
    assert_same_floats(on, off)


def edge_frame(seed, width=128, height=64, tile_size=16, count=3000, wide=False):
    """Edge Gaussians (test_cull_bound_3dgut.edge_gaussians) around the whole image, every one listed in every
    tile (sorted by depth), one pinhole camera with a global shutter: the arguments of rasterize_to_pixels_eval3d."""
    from gsplat.cuda._wrapper import UnscentedTransformParameters

    g = torch.Generator().manual_seed(seed)
    W, origin, K, R64, origin64 = random_camera(g, wide)
    K = K.clone()
    K[0, 2], K[1, 2] = width / 2 + 0.3, height / 2 - 0.2
    box = (0.5, width - 0.5, 0.5, height - 0.5)
    means, quats, scales, opacities = edge_gaussians(g, R64, origin64.float().double(), K, box, count)
    viewmat = torch.eye(4)
    viewmat[:3, :3] = W.T
    viewmat[:3, 3] = -(W.T @ origin)
    depth = (means - origin) @ W[:, 2]
    order = torch.argsort(depth).int()
    tile_width, tile_height = math.ceil(width / tile_size), math.ceil(height / tile_size)
    tiles = tile_width * tile_height
    flatten_ids = order.repeat(tiles)
    isect_offsets = (torch.arange(tiles, dtype=torch.int32) * count).reshape(1, tile_height, tile_width)
    colors = torch.rand(1, count, 3, generator=g)
    cuda = lambda t: t.contiguous().cuda()  # noqa: E731
    return dict(means=cuda(means), quats=cuda(quats), scales=cuda(scales), colors=cuda(colors),
                opacities=cuda(opacities[None]), viewmats=cuda(viewmat[None]), Ks=cuda(K[None]), image_width=width,
                image_height=height, tile_size=tile_size, isect_offsets=cuda(isect_offsets),
                flatten_ids=cuda(flatten_ids), camera_model="pinhole", ut_params=UnscentedTransformParameters())


@pytest.mark.parametrize("warp_shape", WARP_SHAPES)
@pytest.mark.parametrize("seed", range(4))
def test_edge_fuzz_lpt_with_the_cull_equals_gsplat(seed, warp_shape):
    """Opacity tiny and large, scales from needles to huge, Gaussians far away and around the camera, each at
    the threshold's distance (relative 1e-5 .. 1) from a ray through a point on or around a warp's border."""
    frame = edge_frame(seed, wide=seed % 2 == 1, tile_size=16 if seed < 2 else 8)
    reference = gsplat_forward(frame)
    culled = ours_forward(frame, LPTConfig(mode="lpt", cull=True, warp_shape=warp_shape))
    unculled = ours_forward(frame, LPTConfig(mode="lpt", cull=False, warp_shape=warp_shape))
    assert float(reference[1].mean()) > 0.01
    assert_equals_gsplat(culled, reference)
    assert_same_floats(culled, unculled)
