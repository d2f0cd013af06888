"""The 3DGUT per-warp cull bound (kernels/blend_3dgut.cu, pinhole cameras without distortion and a global shutter;
float32 twin gsplat_lpt.reference_3dgut.may_contribute_3dgut) is conservative: a (Gaussian, warp) pair it drops has
alpha < 1/255 at every pixel centre of the warp, with the pixel rays and gsplat's eval3d response computed in
float32 the way gsplat's kernel computes them. Fuzzed at the edges: the Gaussian's nearest ray at a whitened
distance within 1e-5 .. 1 relative of the threshold's, through pixels on and around the warp's border; needle-thin,
flat, huge and degenerate scales; Gaussians far away (|g| up to 1e5) and around the camera; opacities near 1/255
and near 1; warps off axis in wide cameras; the layouts' boxes (8 x 4 blocks, rows, a single row)."""

from __future__ import annotations

import math

import pytest
import torch

from gsplat_lpt.reference_3dgut import (ALPHA_THRESHOLD, cull_region_3dgut, eval3d_alphas, iscl_rot,
                                        may_contribute_3dgut)

f32 = torch.float32
# pixel-centre boxes of a warp: an 8 x 4 block, two rows of a 16-pixel tile, one row of a 32-pixel tile (a flat
# bundle), 8 x 8 (two-pixel blocks), a block in an image corner
BOXES = [(104.5, 111.5, 40.5, 43.5), (16.5, 31.5, 30.5, 31.5), (0.5, 31.5, 7.5, 7.5), (320.5, 327.5, 200.5, 207.5),
         (632.5, 639.5, 476.5, 479.5)]


def random_camera(g: torch.Generator, wide: bool):
    """W [3, 3] (camera axes in world, a float32 rotation), origin [3], K [3, 3] of a 640 x 480 pinhole."""
    q = torch.randn(4, generator=g, dtype=torch.float64)
    w, x, y, z = (q / q.norm()).tolist()
    R = torch.tensor([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                      [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                      [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]], dtype=torch.float64)
    origin = torch.randn(3, generator=g, dtype=torch.float64) * (1000.0 if torch.rand(1, generator=g) < 0.2 else 3.0)
    focal = (120.0 if wide else 400.0 + 4000.0 * float(torch.rand(1, generator=g)))
    K = torch.tensor([[focal, 0.0, 320.0 + 7.3], [0.0, focal * 1.03, 240.0 - 3.1], [0.0, 0.0, 1.0]])
    return R.to(f32), origin.to(f32), K.to(f32), R, origin


def pixel_rays(W: torch.Tensor, origin: torch.Tensor, K: torch.Tensor, box):
    """gsplat's float32 rays through the box's pixel centres (perfect pinhole, global shutter): [P, 3] each."""
    x0, x1, y0, y1 = box
    ys, xs = torch.meshgrid(torch.arange(y0, y1 + 0.25, 1.0), torch.arange(x0, x1 + 0.25, 1.0), indexing="ij")
    u = (xs.reshape(-1).to(f32) - K[0, 2]) / K[0, 0]
    v = (ys.reshape(-1).to(f32) - K[1, 2]) / K[1, 1]
    camera = torch.stack([u, v, torch.ones_like(u)], -1)
    camera = camera / torch.linalg.vector_norm(camera, dim=-1, keepdim=True)
    directions = camera @ W.T
    return origin.expand_as(directions), directions


def edge_gaussians(g: torch.Generator, R64, origin64, K, box, count):
    """Means, quats, scales, opacities [count, ...] placed so that their nearest pixel ray (through a point on or
    around the box, not only its centres) passes at a whitened distance near the threshold's sqrt(2 ln(255 o))."""
    rand = lambda *shape: torch.rand(*shape, generator=g, dtype=torch.float64)  # noqa: E731
    x0, x1, y0, y1 = box
    px = x0 - 3 + rand(count) * (x1 - x0 + 6)
    py = y0 - 3 + rand(count) * (y1 - y0 + 6)
    fx, fy, cx, cy = (float(K[0, 0]), float(K[1, 1]), float(K[0, 2]), float(K[1, 2]))
    cam = torch.stack([(px - cx) / fx, (py - cy) / fy, torch.ones(count, dtype=torch.float64)], -1)
    d = cam / cam.norm(dim=-1, keepdim=True) @ R64.T
    kind = torch.randint(0, 5, (count,), generator=g)
    depth = torch.where(kind == 3, 10 ** (rand(count) * 2 + 1), torch.where(kind == 4, 10 ** (rand(count) * 2 - 3),
                                                                              10 ** (rand(count) * 2 - 0.5)))
    # scales: footprints of 0.01 .. 100 pixels, anisotropy up to 1e6 (beyond the bound's 1e5: never culled),
    # far Gaussians small (|g| 1e3 .. 1e5), Gaussians around the camera large
    footprint = depth / fx * 10 ** (rand(count) * 4 - 2)
    footprint = torch.where(kind == 3, depth * 10 ** (rand(count) * 2 - 5), footprint)
    footprint = torch.where(kind == 4, 10 ** (rand(count) * 2 - 1), footprint)
    anisotropy = 10 ** (rand(count, 3) * torch.where(kind == 2, 6.0, 1.0)[:, None])
    scales = footprint[:, None] / anisotropy
    quats = torch.randn(count, 4, generator=g, dtype=torch.float64)
    quats = quats / quats.norm(dim=-1, keepdim=True)
    opacity_kind = torch.randint(0, 4, (count,), generator=g)
    opacities = torch.where(opacity_kind == 0, (1 + (rand(count) - 0.5) * 2e-5) / 255,
                            torch.where(opacity_kind == 1, 1 - rand(count) * 1e-3, 0.005 + rand(count) * 0.995))
    M = iscl_rot(quats, scales)  # float64
    Md = torch.einsum("mij,mj->mi", M, d)
    perp = torch.randn(count, 3, generator=g, dtype=torch.float64)
    perp = perp - (perp * Md).sum(-1, keepdim=True) * Md / (Md * Md).sum(-1, keepdim=True)
    perp = perp / perp.norm(dim=-1, keepdim=True)
    limit = torch.sqrt(2 * torch.clamp_min(torch.log(255 * opacities), 0))
    delta = torch.tensor([-1e-2, -1e-4, -1e-5, 0.0, 1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1.0, 3.0],
                         dtype=torch.float64)[torch.randint(0, 11, (count,), generator=g)]
    distance = limit * (1 + delta) + torch.where(limit == 0, rand(count) * 0.1, torch.zeros_like(limit))
    # mean = o + t d - M^-1 (distance perp): then M (o - mean) = -t M d + distance perp
    offset = torch.linalg.solve(M, (distance[:, None] * perp)[..., None])[..., 0]
    means = origin64 + depth[:, None] * d - offset
    return means.to(f32), quats.to(f32), scales.to(f32), opacities.to(f32)


def check_box(seed, box, wide, count=3000):
    g = torch.Generator().manual_seed(seed)
    W, origin, K, R64, origin64 = random_camera(g, wide)
    means, quats, scales, opacities = edge_gaussians(g, R64, origin64.to(f32).double(), K, box, count)
    whiten = iscl_rot(quats, scales)  # float32, as staged
    region = cull_region_3dgut(W, origin, K, box)
    kept = may_contribute_3dgut(means, whiten, opacities, region)
    ray_o, ray_d = pixel_rays(W, origin, K, box)
    alphas = eval3d_alphas(means, whiten, opacities, ray_o, ray_d)  # [P, M], 0 where gsplat skips
    reached = (alphas >= ALPHA_THRESHOLD).any(0)
    return region, kept, reached


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("box", BOXES)
def test_dropped_pairs_never_reach_the_threshold(box, seed):
    wide = seed % 2 == 1
    region, kept, reached = check_box(seed, box, wide)
    assert region is not None
    assert not bool((reached & ~kept).any()), "a dropped Gaussian reaches alpha >= 1/255 at a pixel of the warp"
    never = ~reached
    assert 0.2 < float((~kept).sum()) / float(never.sum()) <= 1.0  # the bound drops a good share of what it may
    assert float(reached.float().mean()) > 0.05  # and the fuzz puts Gaussians on both sides of the threshold


def test_exactly_at_the_threshold_and_just_beside_it():
    """The nearest ray (through the box's first pixel centre, the Gaussian to its left) at distance
    sqrt(2 ln(255 o)) (1 + delta): kept up to delta = 0 and a little beyond, dropped a few percent beyond it (the
    margins are small against the threshold here)."""
    box = BOXES[0]
    g = torch.Generator().manual_seed(7)
    W, origin, K, R64, origin64 = random_camera(g, False)
    # one Gaussian per delta, its nearest ray through the box's first pixel centre
    x0, _, y0, _ = box
    cam = torch.tensor([(x0 - float(K[0, 2])) / float(K[0, 0]), (y0 - float(K[1, 2])) / float(K[1, 1]), 1.0],
                       dtype=torch.float64)
    d = cam / cam.norm() @ R64.T
    deltas = [-1e-3, -1e-5, 0.0, 1e-5, 0.02, 0.05]
    means = []
    for delta in deltas:
        # an isotropic Gaussian of scale 0.01 at depth 2, opacity 0.6: whitened distance = world distance / 0.01
        side = -R64[:, 0] - (-R64[:, 0] @ d) * d  # to the left of the box, square to the ray
        side = side / side.norm()
        distance = math.sqrt(2 * math.log(255 * 0.6)) * (1 + delta) * 0.01
        means.append(origin64.to(f32).double() + 2 * d + distance * side)
    means = torch.stack(means).to(f32)
    n = len(deltas)
    quats = torch.tensor([[1.0, 0.0, 0.0, 0.0]] * n)
    scales = torch.full((n, 3), 0.01)
    opacities = torch.full((n,), 0.6)
    kept = may_contribute_3dgut(means, iscl_rot(quats, scales), opacities, cull_region_3dgut(W, origin, K, box))
    assert kept.tolist() == [True, True, True, True, False, False]


def test_no_region_where_the_box_is_far_off_axis_or_the_camera_is_not_finite():
    g = torch.Generator().manual_seed(3)
    W, origin, K, _, _ = random_camera(g, False)
    assert cull_region_3dgut(W, origin, K, (1e6 + 0.5, 1e6 + 7.5, 0.5, 3.5)) is None  # A + B > 100
    assert cull_region_3dgut(W, torch.tensor([math.nan, 0.0, 0.0]), K, BOXES[0]) is None
    bad = K.clone()
    bad[0, 0] = 0.0
    assert cull_region_3dgut(W, origin, bad, BOXES[0]) is None
    assert cull_region_3dgut(W * 1.01, origin, K, BOXES[0]) is None  # not orthonormal


def test_degenerate_gaussians_and_opacities_are_never_culled_unless_never_blended():
    g = torch.Generator().manual_seed(5)
    W, origin, K, _, _ = random_camera(g, False)
    region = cull_region_3dgut(W, origin, K, BOXES[0])
    far = origin + 1000 * W[:, 0]  # far off the warp's rays
    means = far.expand(6, 3).clone()
    quats = torch.tensor([[1.0, 0.0, 0.0, 0.0]] * 6)
    scales = torch.tensor([[0.0, 1.0, 1.0], [1e-20, 1.0, 1.0], [1.0, 1.0, 1e7], [0.01] * 3, [0.01] * 3, [0.01] * 3])
    opacities = torch.tensor([0.5, 0.5, 0.5, math.nan, math.inf, 0.0])
    kept = may_contribute_3dgut(means, iscl_rot(quats, scales), opacities, region)
    # zero scale (M not finite), row norms beyond 1e15, kappa beyond 1e5, NaN and infinite opacities: kept;
    # opacity 0 (alpha 0 wherever gsplat's arithmetic is finite): dropped
    assert kept.tolist() == [True, True, True, True, True, False]
