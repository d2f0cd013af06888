"""The per-warp cull bound (kernels/blend_3dgs.cu: the box around the mean outside which alpha < 1/255; twin
in gsplat_lpt.reference.may_contribute) is conservative: a Gaussian it drops has alpha < 1/255 at every pixel centre of the warp's box, evaluated
the way gsplat's kernel evaluates it. Fuzzed at the edges: Gaussians straddling the box, alpha just above
and below 1/255, degenerate and huge conics, opacity near 1."""

from __future__ import annotations

import math

import pytest
import torch

from gsplat_lpt.reference import (ALPHA_THRESHOLD, MAX_ALPHA, may_contribute, may_contribute_scaled,
                                  rectangle_points)

# the test on batches as staged, and on scaled ones (a / 2, c / 2: nearly every batch), its own floats
TESTS = pytest.mark.parametrize("test", [may_contribute, may_contribute_scaled], ids=["staged", "scaled"])

BOXES = [(0.5, 15.5, 0.5, 1.5), (16.5, 31.5, 30.5, 31.5), (100.5, 107.5, 40.5, 43.5), (0.5, 31.5, 7.5, 7.5)]


def gsplat_alpha(means2d, conics, opacities, px, py):
    """[M, P] alpha as gsplat's forward computes it in float32 (0 where it skips the Gaussian)."""
    dx = means2d[:, None, 0] - px[None]
    dy = means2d[:, None, 1] - py[None]
    a, b, c = (conics[:, None, i] for i in range(3))
    sigma = 0.5 * (a * dx * dx + c * dy * dy) + b * dx * dy
    alpha = torch.clamp_max(opacities[:, None] * torch.exp(-sigma), MAX_ALPHA)
    return torch.where((sigma < 0) | (alpha < ALPHA_THRESHOLD), torch.zeros_like(alpha), alpha)


def box_pixels(box):
    x0, x1, y0, y1 = box
    xs = torch.arange(x0, x1 + 0.25, 1.0)
    ys = torch.arange(y0, y1 + 0.25, 1.0)
    py, px = torch.meshgrid(ys, xs, indexing="ij")
    return px.reshape(-1).float(), py.reshape(-1).float()


def edge_gaussians(box, count, seed):
    """Means on and around the box's border, random conics from needle-thin to huge, opacities at the edges."""
    g = torch.Generator().manual_seed(seed)
    x0, x1, y0, y1 = box
    side = torch.randint(0, 4, (count,), generator=g)
    t = torch.rand(count, generator=g)
    offset = (torch.rand(count, generator=g) - 0.5) * torch.tensor([2.0, 10.0, 60.0])[torch.randint(0, 3, (count,), generator=g)]
    mx = torch.where(side < 2, x0 + t * (x1 - x0), torch.where(side == 2, x0 - 0.5 + offset, x1 + 0.5 + offset))
    my = torch.where(side >= 2, y0 + t * (y1 - y0), torch.where(side == 0, y0 - 0.5 + offset, y1 + 0.5 + offset))
    scale = 10 ** (torch.rand(count, generator=g) * 8 - 5)  # conic magnitudes 1e-5 .. 1e3
    a = scale * (torch.rand(count, generator=g) + 0.01)
    c = scale * (torch.rand(count, generator=g) + 0.01)
    rho = (torch.rand(count, generator=g) * 2 - 1) * torch.where(torch.rand(count, generator=g) < 0.2, 1.0, 0.9999)
    b = rho * torch.sqrt(a * c)  # |rho| close to 1: nearly degenerate
    opacity_kind = torch.randint(0, 4, (count,), generator=g)
    opacities = torch.where(opacity_kind == 0, ALPHA_THRESHOLD * (1 + (torch.rand(count, generator=g) - 0.5) * 1e-5),
                            torch.where(opacity_kind == 1, 1.0 - torch.rand(count, generator=g) * 1e-3,
                                        torch.rand(count, generator=g)))
    return torch.stack([mx, my], -1).float(), torch.stack([a, b, c], -1).float(), opacities.float()


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("box", BOXES)
@TESTS
def test_dropped_gaussians_never_reach_the_threshold(box, seed, test):
    means2d, conics, opacities = edge_gaussians(box, 4000, seed)
    kept = test(means2d, conics, opacities, box)
    px, py = box_pixels(box)
    reached = (gsplat_alpha(means2d, conics, opacities, px, py) > 0).any(dim=1)
    assert not bool((reached & ~kept).any()), "a dropped Gaussian reaches alpha >= 1/255 in the box"
    assert 0.05 < float((~kept).float().mean()) < 0.99  # the fuzz exercises both outcomes


@TESTS
def test_alpha_just_above_and_below_the_threshold(test):
    """A Gaussian whose best pixel has sigma = ln(255 o) +- delta: kept when it can reach 1/255."""
    box = (0.5, 15.5, 0.5, 1.5)
    opacity = torch.tensor(0.6)
    limit = math.log(255 * 0.6)
    rows = []
    for delta in (-1e-3, -1e-5, 0.0, 1e-5, 1e-3, 1e-2, 0.1, 0.5):
        d = math.sqrt(2 * (limit + delta))  # conic a = 1: sigma = d^2 / 2 at the nearest pixel centre
        rows.append((15.5 + d, 1.0))
    means2d = torch.tensor(rows, dtype=torch.float32)
    conics = torch.tensor([[1.0, 0.0, 1.0]] * len(rows))
    opacities = opacity.repeat(len(rows))
    kept = test(means2d, conics, opacities, box)
    px, py = box_pixels(box)
    reached = (gsplat_alpha(means2d, conics, opacities, px, py) > 0).any(dim=1)
    assert torch.all(kept[reached])
    assert not bool(kept[-1]) and not bool(kept[-2])  # clearly out of reach: dropped


@TESTS
def test_not_positive_definite_or_not_finite_is_kept(test):
    box = (0.5, 15.5, 0.5, 1.5)
    means2d = torch.tensor([[500.0, 500.0]] * 5)
    conics = torch.tensor([[1.0, 2.0, 1.0], [-1.0, 0.0, 1.0], [0.0, 0.0, 0.0], [float("nan"), 0, 1], [1.0, 0.0, 1.0]])
    opacities = torch.tensor([0.5, 0.5, 0.5, 0.5, float("nan")])
    assert torch.all(test(means2d, conics, opacities, box))


@TESTS
def test_faint_gaussians_are_dropped_even_on_top_of_the_box(test):
    box = (0.5, 15.5, 0.5, 1.5)
    means2d = torch.tensor([[8.0, 1.0], [8.0, 1.0]])
    conics = torch.tensor([[0.1, 0.0, 0.1]] * 2)
    opacities = torch.tensor([ALPHA_THRESHOLD * 0.99, 0.0])
    assert not torch.any(test(means2d, conics, opacities, box))


@TESTS
def test_tilted_needle_beside_the_box_is_dropped(test):
    """A thin Gaussian tilted at 45 degrees, its long axis passing beside the box's corner: its bounding box
    covers the corner, the ellipse does not; the row test drops it (a box test would keep it)."""
    box = (0.5, 15.5, 0.5, 1.5)
    # long axis along x = y through (20, 0): along it sigma is small, across it large
    a = c = 1.0
    b = -0.998  # q = (a dx^2 + c dy^2) / 2 + b dx dy: small along dx = dy
    means2d = torch.tensor([[15.5 + 6.0, 1.5 - 6.0 + 4.0]])  # the diagonal through it misses (15.5, 1.5) by ~2.8 px
    conics = torch.tensor([[a, b, c]])
    opacities = torch.tensor([0.9])
    px, py = box_pixels(box)
    assert not bool((gsplat_alpha(means2d, conics, opacities, px, py) > 0).any())
    assert not bool(test(means2d, conics, opacities, box)[0])


@pytest.mark.parametrize("box", BOXES)
@TESTS
def test_the_test_is_tight_for_well_conditioned_conics(box, test):
    """Among Gaussians with |rho| < 0.99, opacity well above 1/255 and no axis much below a pixel (a, c <= 2),
    almost all that the test keeps do reach alpha >= 1/255 somewhere in the box (the margins cost under 0.5% of
    the kept ones). (The scaled test bounds q over the rectangle the box's centres span, not at the centres
    themselves: it also keeps sharper Gaussians whose reach lies between two rows or columns of centres, see
    test_sharp_gaussians_between_pixel_centres.)"""
    means2d, conics, opacities = edge_gaussians(box, 4000, 7)
    a, b, c = conics.unbind(-1)
    usable = (b.abs() < 0.99 * torch.sqrt(a * c)) & (opacities > 0.01) & (a <= 2.0) & (c <= 2.0)
    kept = test(means2d, conics, opacities, box) & usable
    px, py = box_pixels(box)
    reached = (gsplat_alpha(means2d, conics, opacities, px, py) > 0).any(dim=1)
    assert int(kept.sum()) > 200
    assert float((kept & ~reached).sum()) <= 0.005 * float(kept.sum())


@pytest.mark.parametrize("seed", range(4))
@TESTS
def test_sharp_gaussians_between_pixel_centres(seed, test):
    """Small, sharp Gaussians with means on, near, and halfway between pixel centres, in and around a box, with
    opacities near the threshold: where a row's parabola has its vertex between two centres, the test must
    look at the right centre."""
    g = torch.Generator().manual_seed(seed)
    box = (0.5, 15.5, 0.5, 1.5)
    count = 20000
    base = torch.randint(-3, 19, (count, 2), generator=g).float()
    frac = torch.tensor([0.0, 0.5, 1.0])[torch.randint(0, 3, (count, 2), generator=g)]
    jitter = (torch.rand(count, 2, generator=g) - 0.5) * torch.tensor([0.0, 1e-6, 1e-3, 0.1])[
        torch.randint(0, 4, (count, 1), generator=g)]
    means2d = base + frac + jitter
    scale = 10 ** (torch.rand(count, generator=g) * 3)  # conics 1 .. 1000: sub-pixel to ~1 px
    a = scale * (torch.rand(count, generator=g) + 0.05)
    c = scale * (torch.rand(count, generator=g) + 0.05)
    b = (torch.rand(count, generator=g) * 2 - 1) * 0.99 * torch.sqrt(a * c)
    opacities = torch.rand(count, generator=g) * 0.999 + 1e-3
    conics = torch.stack([a, b, c], -1)
    kept = test(means2d, conics, opacities, box)
    px, py = box_pixels(box)
    reached = (gsplat_alpha(means2d, conics, opacities, px, py) > 0).any(dim=1)
    assert not bool((reached & ~kept).any()), "a dropped Gaussian reaches alpha >= 1/255 in the box"
    assert int(reached.sum()) > 1000 and int((~kept).sum()) > 1000


@pytest.mark.parametrize("seed", range(3))
def test_two_points_hold_the_least_q_over_the_rectangle(seed):
    """The scaled test's geometry (kernels/blend_3dgs.cu may_contribute_scaled; its twin's rectangle_points), in
    float64: the least q over a rectangle of offsets is q at one of its two points (the vertex on the line dy = ey, or on dx = ex, clamped),
    checked against q on a dense grid of the rectangle and its border, for conics from needles to discs and
    rectangles around, beside and over the origin."""
    g = torch.Generator().manual_seed(seed)
    count = 3000
    a = 10 ** (torch.rand(count, generator=g, dtype=torch.float64) * 4 - 2)
    c = 10 ** (torch.rand(count, generator=g, dtype=torch.float64) * 4 - 2)
    b = (torch.rand(count, generator=g, dtype=torch.float64) * 2 - 1) * 0.999 * torch.sqrt(a * c)
    lo = (torch.rand(count, 2, generator=g, dtype=torch.float64) - 0.5) * 40
    hi = lo + torch.rand(count, 2, generator=g, dtype=torch.float64) * 20
    (dx_lo, dy_lo), (dx_hi, dy_hi) = lo.unbind(-1), hi.unbind(-1)

    def q(dx, dy):
        return 0.5 * a[:, None] * dx * dx + b[:, None] * dx * dy + 0.5 * c[:, None] * dy * dy

    (dx, ey), (ex, dy) = rectangle_points(dx_lo, dx_hi, dy_lo, dy_hi, b / a, b / c)
    two_points = torch.minimum(q(dx[:, None], ey[:, None]), q(ex[:, None], dy[:, None]))[:, 0]
    t = torch.linspace(0.0, 1.0, 161, dtype=torch.float64)
    gx = dx_lo[:, None] + (dx_hi - dx_lo)[:, None] * t  # [M, 161]
    gy = dy_lo[:, None] + (dy_hi - dy_lo)[:, None] * t
    grid = torch.stack([q(gx, gy[:, j:j + 1].expand_as(gx)).min(dim=1).values for j in range(t.numel())]).min(0).values
    scale = q(torch.maximum(dx_lo.abs(), dx_hi.abs())[:, None], torch.maximum(dy_lo.abs(), dy_hi.abs())[:, None])[:, 0]
    assert bool((two_points <= grid + 1e-12 * (1 + scale)).all()), "a point of the rectangle has q below both points"
    origin_inside = (dx_lo <= 0) & (dx_hi >= 0) & (dy_lo <= 0) & (dy_hi >= 0)
    assert bool((two_points[origin_inside] == 0).all()) and 0 < int(origin_inside.sum()) < count
