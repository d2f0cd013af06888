"""The composition algebra on the CPU: chunked blending with saturation signalling equals sequential
blending (the oracle that our chunk + reduction kernels implement), on gsplat's torch projection of
the real garden cameras and points."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from gsplat_lpt.reference import (TRANSMITTANCE_THRESHOLD, _alphas, blend_chunked_list, blend_list, blend_sequential,
                                  chunk_bounds, reduce_chunks, stop_positions)


def psnr(a, b):
    mse = float(((a - b) ** 2).mean())
    return math.inf if mse == 0 else 10 * math.log10(1 / mse)


def test_blend_list_equals_closed_form_without_saturation():
    g = torch.Generator().manual_seed(0)
    alphas = torch.rand(64, 40, generator=g, dtype=torch.float64) * 0.05 + 0.01  # never saturates
    colors = torch.rand(40, 3, generator=g, dtype=torch.float64)
    color, T, done, last = blend_list(alphas, colors)
    transmittance = torch.cumprod(torch.cat([torch.ones(64, 1, dtype=torch.float64), 1 - alphas[:, :-1]], 1), 1)
    assert torch.allclose(color, (alphas * transmittance) @ colors, atol=1e-12)
    assert torch.allclose(T, torch.prod(1 - alphas, 1), atol=1e-12)
    assert not done.any() and torch.all(last == 39)


def test_blend_list_stops_exclusively_at_saturation():
    alphas = torch.tensor([[0.999, 0.95, 0.5]], dtype=torch.float64)
    colors = torch.eye(3, dtype=torch.float64)
    color, T, done, last = blend_list(alphas, colors)
    # T: 1 -> 0.001; 0.001 * 0.05 = 5e-5 <= 1e-4 saturates before the 2nd Gaussian, which is not blended
    assert done.item() and last.item() == 0
    assert torch.allclose(color, torch.tensor([[0.999, 0.0, 0.0]], dtype=torch.float64))
    assert T.item() == pytest.approx(0.001)


@pytest.mark.parametrize("batch", [1, 7, 4096])
def test_stop_positions_are_where_the_sequential_walk_stops(batch):
    """Pixels on the left of a strip of Gaussians saturate at various depths, those on the right never."""
    g = torch.Generator().manual_seed(batch)
    count = 400
    means2d = torch.stack([torch.rand(count, generator=g) * 6, torch.rand(count, generator=g) * 16], dim=-1)
    conics = torch.tensor([0.08, 0.01, 0.08]).repeat(count, 1) * (0.5 + torch.rand(count, 1, generator=g))
    opacities = 0.05 + 0.4 * torch.rand(count, generator=g)
    local = torch.arange(256)
    px, py = (local % 16).float() + 0.5, (local // 16).float() + 0.5
    ids = torch.randperm(count, generator=g)
    alphas = _alphas(means2d, conics, opacities, ids, px, py)
    expected = torch.full((256,), count)
    for pixel in range(256):
        T = 1.0
        for position in range(count):
            alpha = float(alphas[pixel, position])
            if alpha > 0 and T * (1.0 - alpha) <= TRANSMITTANCE_THRESHOLD:
                expected[pixel] = position
                break
            T *= 1.0 - alpha
    stops = stop_positions(means2d, conics, opacities, ids, px, py, batch=batch)
    assert (expected < count).sum() > 50 and (expected == count).sum() > 50  # both kinds of pixel occur
    assert torch.equal(stops, expected)


@pytest.mark.parametrize("chunk_count", [2, 3, 8])
def test_reduction_of_chunks_is_sequential_blending(chunk_count):
    """Eq. (5) without saturation: sum_p C_p prod_{q<p} T_q equals one pass over the whole list."""
    g = torch.Generator().manual_seed(chunk_count)
    alphas = torch.rand(32, 50, generator=g, dtype=torch.float64) * 0.08
    colors = torch.rand(50, 4, generator=g, dtype=torch.float64)
    whole_color, whole_T, _, _ = blend_list(alphas, colors)
    parts = [blend_list(alphas[:, a:b], colors[a:b]) for a, b in chunk_bounds(0, 50, chunk_count)]
    color, T = reduce_chunks(torch.stack([p[0] for p in parts]), torch.stack([p[1] for p in parts]),
                             torch.stack([p[2] for p in parts]))
    assert torch.allclose(color, whole_color, atol=1e-12)
    assert torch.allclose(T, whole_T, atol=1e-12)


def test_chunk_bounds_are_contiguous_and_cover():
    for start, end, k in [(0, 10, 3), (5, 6, 4), (7, 7, 2), (100, 1000, 16)]:
        bounds = list(chunk_bounds(start, end, k))
        assert len(bounds) == k and bounds[0][0] == start and bounds[-1][1] == end
        assert all(b[1] == n[0] for b, n in zip(bounds, bounds[1:]))


def test_chunk_bounds_cover_only_the_predicted_depth():
    """With a prediction, the chunks end at `covered` (the composite walks the rest, where needed)."""
    for start, end, k, covered in [(0, 100, 4, 30), (10, 1000, 16, 400), (0, 50, 8, 3), (5, 40, 4, 100)]:
        bounds = list(chunk_bounds(start, end, k, covered))
        assert len(bounds) == k and bounds[0][0] == start and bounds[-1][1] == start + min(covered, end - start)
        assert all(b[1] == n[0] and b[0] <= b[1] for b, n in zip(bounds, bounds[1:]))


@pytest.mark.parametrize("chunk_count,covered", [(4, 12), (8, 1), (3, 49), (16, 200)])
def test_a_prediction_that_falls_short_is_walked_on_from_the_composed_transmittance(chunk_count, covered):
    """Without saturation, chunks over the first `covered` entries and the walk beyond them from the composed T
    are one pass over the whole list (Eq. 5 and the continued walk, float64)."""
    g = torch.Generator().manual_seed(chunk_count + covered)
    alphas = torch.rand(32, 50, generator=g, dtype=torch.float64) * 0.08
    colors = torch.rand(50, 4, generator=g, dtype=torch.float64)
    whole_color, whole_T, _, _ = blend_list(alphas, colors)
    color, T = blend_chunked_list(alphas, colors, chunk_count, covered)
    assert torch.allclose(color, whole_color, atol=1e-12)
    assert torch.allclose(T, whole_T, atol=1e-12)


def test_the_walk_beyond_the_prediction_stops_where_the_sequential_walk_stops():
    """Opaque enough that every pixel saturates beyond the covered range, but no chunk does on its own: the
    walk beyond goes on from the composed T, so each pixel stops at the Gaussian where the sequential walk
    stops (the chunks' own walks from T = 1 would have gone on long after it)."""
    g = torch.Generator().manual_seed(3)
    alphas = 0.05 + torch.rand(16, 400, generator=g, dtype=torch.float64) * 0.03
    colors = torch.rand(400, 3, generator=g, dtype=torch.float64)
    whole_color, whole_T, whole_done, _ = blend_list(alphas, colors)
    assert bool(whole_done.all())
    _, _, chunk_done, _ = blend_list(alphas[:, :10], colors[:10])
    assert not bool(chunk_done.any())  # chunks of 10 entries saturate nowhere on their own
    color, T = blend_chunked_list(alphas, colors, 4, covered=40)
    assert torch.allclose(color, whole_color, atol=1e-12)
    assert torch.allclose(T, whole_T, atol=1e-12)


def garden_frame(data_dir, count=1500, width=96, height=64, seed=0):
    """gsplat's own pure-torch projection and tiling of real garden points seen by a real camera."""
    from gsplat.cuda._torch_impl import (
        _fully_fused_projection,
        _isect_offset_encode,
        _isect_tiles,
        _quat_scale_to_covar_preci,
    )

    data = np.load(data_dir / "test_garden.npz")
    viewmats = torch.from_numpy(data["viewmats"][:1]).float()
    Ks = torch.from_numpy(data["Ks"][:1]).float()
    scale = width / float(data["width"])
    Ks[:, :2] *= scale
    means = torch.from_numpy(data["means3d"]).float()
    # keep points the camera sees, so the small frame is full of work
    cam = (viewmats[0, :3, :3] @ means.T + viewmats[0, :3, 3:]).T
    uv = (Ks[0] @ cam.T).T
    uv = uv[:, :2] / uv[:, 2:3]
    visible = (cam[:, 2] > 0.1) & (uv[:, 0] > 0) & (uv[:, 0] < width) & (uv[:, 1] > 0) & (uv[:, 1] < height)
    g = torch.Generator().manual_seed(seed)
    chosen = torch.nonzero(visible).squeeze(1)
    chosen = chosen[torch.randperm(chosen.numel(), generator=g)[:count]]
    means = means[chosen]
    n = means.shape[0]
    quats = torch.nn.functional.normalize(torch.randn(n, 4, generator=g), dim=-1)
    scales = torch.rand(n, 3, generator=g) * 0.05 + 0.01
    opacities = torch.rand(n, generator=g) * 0.8 + 0.2
    colors = torch.from_numpy(data["colors"][chosen.numpy()]).float()[None] / 255.0
    covars, _ = _quat_scale_to_covar_preci(quats, scales, compute_preci=False, triu=False)
    radii, means2d, depths, conics, _ = _fully_fused_projection(means, covars, viewmats, Ks, width, height)
    tile_size = 16
    tile_width, tile_height = math.ceil(width / tile_size), math.ceil(height / tile_size)
    _, isect_ids, flatten_ids = _isect_tiles(means2d, radii, depths, tile_size, tile_width, tile_height)
    isect_offsets = _isect_offset_encode(isect_ids, 1, tile_width, tile_height)
    return dict(means2d=means2d, conics=conics, colors=colors, opacities=opacities[None],
                image_width=width, image_height=height, tile_size=tile_size,
                isect_offsets=isect_offsets, flatten_ids=flatten_ids)


@pytest.fixture(scope="module")
def garden():
    from conftest import data_dir

    return garden_frame(data_dir())


def test_garden_frame_is_heavy_enough(garden):
    workloads = torch.diff(garden["isect_offsets"].reshape(-1),
                           append=torch.tensor([garden["flatten_ids"].numel()], dtype=torch.int32))
    assert workloads.max() > 200 and (workloads > 0).all()


@pytest.mark.parametrize("chunk_count", [2, 4, 16])
def test_chunked_blending_with_saturation_matches_sequential(garden, chunk_count):
    background = torch.tensor([[0.2, 0.5, 0.9]])
    colors, alphas, last_ids = blend_sequential(**garden, backgrounds=background)
    items = garden["isect_offsets"].numel()
    chunked = {item: chunk_count for item in range(items)}  # chunk every tile, as mode "chunk"
    c_colors, c_alphas, c_last = blend_sequential(**garden, backgrounds=background, chunked=chunked)
    assert psnr(c_colors, colors) >= 76.0
    assert psnr(c_alphas, alphas) >= 76.0
    # Differences come only from pixels whose transmittance crosses 1e-4 inside a later chunk: the
    # sequential renderer stops before the crossing Gaussian, a chunk starting at T = 1 cannot know. The
    # crossing happens at T <= 1e-4 / (1 - 0.999) = 0.1, which bounds the per-pixel difference.
    assert (c_colors - colors).abs().max() <= 0.1
    assert torch.all(c_last == -1)
