"""CPU analysis: exact tile counts (difference array vs brute force vs gsplat), schedules, statistics."""

import math

import pytest
import torch

from gsplat_lpt.tools.analyze import (
    H200_CONCURRENT_CTAS,
    analyze_scene,
    brute_force_tile_counts,
    chunked_makespan,
    count_tile_intersections,
    frame_stats,
    imbalance_of,
    list_schedule_makespan,
    lpt_makespan,
    offsets_from_counts,
    project_gaussians,
    tile_grid,
    vanilla_makespan,
    write_stats,
)
from gsplat_lpt.config import LPTConfig
from gsplat_lpt.plan import choose_chunking, lpt_order, tile_workloads
from gsplat_lpt.scenes import make_scene


def random_screen(images: int, n: int, width: int, height: int, seed: int = 0):
    """Centres inside and well outside the image, radii from 0 (culled) to a few tiles, some one-axis zero."""
    gen = torch.Generator().manual_seed(seed)
    means2d = torch.rand(images, n, 2, generator=gen) * torch.tensor([width * 1.6, height * 1.6]) - torch.tensor(
        [width * 0.3, height * 0.3])
    means2d[:, :5] = torch.tensor([16.0, 32.0])  # exactly on tile corners: floor/ceil edge cases
    radii = torch.randint(-3, 45, (images, n, 2), generator=gen).int()
    radii[:, 5:10, 0] = 0  # one axis culled -> the whole Gaussian is skipped by isect_tiles
    depths = torch.rand(images, n, generator=gen) + 0.5
    return means2d, radii, depths


@pytest.mark.parametrize("tile_size,width,height", [(16, 100, 70), (8, 45, 33), (16, 256, 128)])
def test_difference_array_equals_brute_force(tile_size, width, height):
    means2d, radii, _ = random_screen(3, 400, width, height, seed=tile_size + width)
    tile_width, tile_height = tile_grid(width, height, tile_size)
    fast = count_tile_intersections(means2d, radii, tile_size, tile_width, tile_height)
    slow = brute_force_tile_counts(means2d, radii, tile_size, tile_width, tile_height)
    assert fast.shape == (3, tile_height, tile_width)
    assert torch.equal(fast, slow)
    assert fast.sum() > 0


def test_difference_array_equals_gsplat_torch_isect_tiles():
    """gsplat's own (slow, Python-loop) isect_tiles + isect_offset_encode give the same tile ranges."""
    from gsplat.cuda._torch_impl import _isect_offset_encode, _isect_tiles

    width, height, tile_size = 90, 60, 16
    means2d, radii, depths = random_screen(2, 120, width, height, seed=7)
    tile_width, tile_height = tile_grid(width, height, tile_size)
    _, isect_ids, _ = _isect_tiles(means2d, radii, depths, tile_size, tile_width, tile_height)
    offsets = _isect_offset_encode(isect_ids, 2, tile_width, tile_height)
    gsplat_workloads = tile_workloads(offsets, isect_ids.numel())
    counts = count_tile_intersections(means2d, radii, tile_size, tile_width, tile_height)
    assert torch.equal(counts.reshape(-1), gsplat_workloads.long())
    ours_offsets, n_isects = offsets_from_counts(counts)
    assert n_isects == isect_ids.numel() and torch.equal(ours_offsets, offsets)


def test_projection_matches_gsplat_torch_projection_without_opacities():
    """With opacities=None our radii are gsplat's torch `_fully_fused_projection` radii (3.33 sigma)."""
    from gsplat.cuda._torch_impl import _fully_fused_projection, _quat_scale_to_covar_preci

    scene = make_scene("moderate", width=320, height=180, scale=0.01, frames=1)
    viewmats, Ks = scene.frame_cameras(0)
    ours = project_gaussians(scene.means, scene.quats, scene.scales, None, viewmats, Ks, scene.width, scene.height,
                             with_conics=True)
    covars, _ = _quat_scale_to_covar_preci(scene.quats, scene.scales, compute_preci=False)
    radii, means2d, depths, conics, _ = _fully_fused_projection(scene.means, covars, viewmats, Ks, scene.width,
                                                                scene.height)
    visible = (radii > 0).all(-1)
    assert visible.sum() > 100
    assert torch.equal(ours.radii[visible], radii[visible])
    assert torch.allclose(ours.means2d[visible], means2d[visible])
    assert torch.allclose(ours.conics[visible], conics[visible], rtol=1e-5, atol=1e-7)
    assert ((ours.radii > 0).all(-1) == visible).float().mean() > 0.999


def test_opacity_aware_radii_are_tighter_and_cull_faint_gaussians():
    scene = make_scene("street", width=320, height=180, scale=0.01, frames=1)
    viewmats, Ks = scene.frame_cameras(0)
    loose = project_gaussians(scene.means, scene.quats, scene.scales, None, viewmats, Ks, 320, 180)
    opacities = scene.opacities.clone()
    opacities[:50] = 0.5 / 255  # below gsplat's alpha threshold: culled by the projection
    tight = project_gaussians(scene.means, scene.quats, scene.scales, opacities, viewmats, Ks, 320, 180)
    assert (tight.radii <= loose.radii).all()
    assert (tight.radii[:, :50] == 0).all()
    assert (tight.radii < loose.radii).any()


def test_list_scheduling_known_values():
    assert list_schedule_makespan([], 4) == 0.0
    assert list_schedule_makespan([5, 1, 1], 8) == 5.0
    # Classic LPT example on two machines: greedy in this order gives 7 (optimum 6).
    assert list_schedule_makespan([3, 3, 2, 2, 2], 2) == 7.0
    # Tile order with the heavy item last: it starts at 2 on the first free worker.
    assert list_schedule_makespan([1, 1, 1, 1, 6], 2) == 8.0
    assert list_schedule_makespan([6, 1, 1, 1, 1], 2) == 6.0


def test_lpt_is_never_worse_than_tile_order_and_chunking_cuts_the_tail():
    gen = torch.Generator().manual_seed(1)
    workloads = torch.randint(0, 400, (3000,), generator=gen)
    workloads[2900] = 60_000  # one heavy tile late in tile order
    K = 64
    vanilla = vanilla_makespan(workloads, K)
    lpt = lpt_makespan(workloads, K)
    assert lpt <= vanilla
    assert lpt >= 60_000  # no schedule can beat the heaviest whole tile
    chunked = chunked_makespan(workloads, K, chunked_tiles=1, chunk_count=16, overhead_lambda=256.0)
    assert chunked < 0.5 * lpt
    # Lower bound: the average work per CTA.
    assert chunked >= float(workloads.sum()) / K


def test_frame_stats_values_and_policy_reuse():
    counts = torch.zeros(2, 4, 8, dtype=torch.int64)
    counts[0, 1, 2] = 5000
    counts[1] += 10
    counts[0, 3, 7] = 1
    K = 16
    config = LPTConfig()
    stats = frame_stats(counts, concurrent_ctas=K, config=config)
    total = int(counts.sum())
    assert stats.images == 2 and stats.num_tiles == 64 and stats.total_workload == total
    assert stats.max_workload == 5000 and stats.nonempty_tiles == 34  # 5000, 32 x 10 and 1
    assert math.isclose(stats.imbalance, 5000 * K / total)
    # The lightest non-empty tile (1 Gaussian) says nothing; these do: peak over mean, tail over middle.
    assert stats.mean_nonempty_workload == pytest.approx(total / 34)
    assert stats.max_over_mean == pytest.approx(5000 * 34 / total)
    assert stats.p99_over_median == pytest.approx((10 + 0.67 * 4990) / 10)  # p99 interpolates 10 .. 5000
    sorted_workloads, _ = lpt_order(counts.reshape(-1))
    choice = choose_chunking(sorted_workloads, float(total), K, config)
    assert (stats.chunked_tiles, stats.chunk_count) == (choice.chunked_tiles, choice.chunk_count)
    assert stats.chunked_tiles >= 1 and stats.makespan_chunked < stats.makespan_lpt <= stats.makespan_vanilla
    assert sum(stats.histogram_counts) == stats.nonempty_tiles
    assert imbalance_of(counts.reshape(-1), K) == stats.imbalance


def test_empty_frame():
    stats = frame_stats(torch.zeros(1, 3, 3, dtype=torch.int64), concurrent_ctas=8)
    assert stats.total_workload == 0 and stats.imbalance == 0.0 and stats.chunked_tiles == 0
    assert stats.histogram_counts == []


def test_analyze_scene_and_outputs(tmp_path):
    scene = make_scene("rig", width=320, height=180, scale=0.02, frames=1)
    stats, counts = analyze_scene(scene, concurrent_ctas=H200_CONCURRENT_CTAS, keep_counts=True)
    assert len(stats) == 1 and stats[0].images == 6
    assert counts[0].shape == (6, 12, 20) and int(counts[0].sum()) == stats[0].total_workload
    paths = write_stats(stats, tmp_path, meta={"scene": "rig", "note": "test"})
    header = open(paths["csv"]).readline().strip().split(",")
    assert header[:3] == ["scene", "frame", "images"] and "imbalance" in header and "max_min_ratio" not in header
    assert open(paths["csv"]).readlines()[1].startswith("rig,0,6,")
    import json

    data = json.load(open(paths["json"]))
    assert data["meta"]["scene"] == "rig" and data["frames"][0]["images"] == 6 and data["frames"][0]["scene"] == "rig"
    with pytest.raises(ValueError, match="concurrent_ctas"):
        analyze_scene(scene, concurrent_ctas=0)


@pytest.mark.gpu
def test_difference_array_equals_gsplat_cuda_isect_tiles():
    """On a GPU: gsplat's CUDA isect_tiles + isect_offset_encode on the same means2d/radii."""
    from gsplat.cuda._wrapper import isect_offset_encode, isect_tiles

    for tile_size, width, height in [(16, 1920, 1080), (16, 333, 201), (8, 200, 120)]:
        means2d, radii, depths = random_screen(3, 20_000, width, height, seed=tile_size)
        tile_width, tile_height = tile_grid(width, height, tile_size)
        _, isect_ids, _ = isect_tiles(means2d.cuda(), radii.cuda(), depths.cuda(), tile_size, tile_width, tile_height)
        offsets = isect_offset_encode(isect_ids, 3, tile_width, tile_height)
        cuda_workloads = tile_workloads(offsets, isect_ids.numel()).cpu().long()
        counts = count_tile_intersections(means2d, radii, tile_size, tile_width, tile_height)
        assert torch.equal(counts.reshape(-1), cuda_workloads)


@pytest.mark.gpu
def test_cpu_projection_counts_close_to_gsplat_cuda_on_a_scene():
    """End to end on a built-in scene: CPU projection + counts vs gsplat's CUDA projection + isect_tiles.
    Float differences between CPU and GPU may move a rare radius by one pixel, so allow a tiny mismatch."""
    from gsplat.cuda._wrapper import fully_fused_projection, isect_offset_encode, isect_tiles

    scene = make_scene("street", width=960, height=540, scale=0.2, frames=1)
    viewmats, Ks = scene.frame_cameras(0)
    radii, means2d, depths, _, _ = fully_fused_projection(
        scene.means.cuda(), None, scene.quats.cuda(), scene.scales.cuda(), viewmats.cuda(), Ks.cuda(), 960, 540,
        packed=False, opacities=scene.opacities.cuda())
    tile_width, tile_height = tile_grid(960, 540)
    _, isect_ids, _ = isect_tiles(means2d, radii, depths, 16, tile_width, tile_height)
    offsets = isect_offset_encode(isect_ids, 1, tile_width, tile_height)
    cuda_workloads = tile_workloads(offsets, isect_ids.numel()).cpu().long()
    # Same screen-space inputs: exact.
    exact = count_tile_intersections(means2d.cpu(), radii.cpu(), 16, tile_width, tile_height)
    assert torch.equal(exact.reshape(-1), cuda_workloads)
    # CPU projection: within 0.1% of the intersections.
    screen = project_gaussians(scene.means, scene.quats, scene.scales, scene.opacities, viewmats, Ks, 960, 540)
    cpu = count_tile_intersections(screen.means2d, screen.radii, 16, tile_width, tile_height).reshape(-1)
    assert (cpu - cuda_workloads).abs().sum() <= 1e-3 * cuda_workloads.sum()
