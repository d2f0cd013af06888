"""GPU: our kernels against gsplat's own CUDA kernel, on the same projected inputs.

Contract: mode "lpt" equals gsplat (max abs diff <= 1e-6; we also check last_ids);
chunked modes >= 76 dB PSNR on every frame; gradients equal gsplat's.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import gsplat_lpt
from gsplat_lpt import LPTConfig, constants
from gsplat_lpt.hook import original

pytestmark = pytest.mark.gpu

CHUNKED_MODES = [
    LPTConfig(mode="chunk", chunk_count=2),
    LPTConfig(mode="chunk", chunk_count=16),
    LPTConfig(mode="chunk", chunk_count=16, pixels_per_thread=1),
    LPTConfig(mode="chunk", chunk_count=64, cull=False),
    LPTConfig(mode="fixed", heavy_ratio=0.05, chunk_count=4),
    LPTConfig(mode="fixed", heavy_ratio=0.5, chunk_count=32, co_execute=False),
    LPTConfig(mode="auto"),
    LPTConfig(mode="auto", overhead_lambda=0.0, imbalance_beta=1.0, min_gain=0.0, heavy_item_pace=1.0, chunked_cost_floor=0.0),  # eager
]


def psnr(a: torch.Tensor, b: torch.Tensor) -> float:
    mse = float(((a - b) ** 2).mean())
    return math.inf if mse == 0 else 10 * math.log10(1.0 / mse)


def random_gaussians(n, seed, device="cuda", cluster=0):
    """Gaussians in front of a camera looking down +z; `cluster` extra Gaussians stacked in depth on one
    spot make one tile hold most of the work."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    means = torch.randn(n, 3, generator=g) * torch.tensor([1.5, 1.0, 1.0]) + torch.tensor([0.0, 0.0, 4.0])
    scales = torch.rand(n, 3, generator=g) * 0.08 + 0.005
    opacities = torch.rand(n, generator=g) * 0.9 + 0.05
    opaque = cluster < 0
    cluster = abs(cluster)
    if cluster:
        spot = torch.tensor([0.3, -0.2, 0.0])
        depth = torch.linspace(3.0, 9.0, cluster)
        means = torch.cat([means, spot + torch.stack([torch.zeros(cluster), torch.zeros(cluster), depth], -1)
                           + torch.randn(cluster, 3, generator=g) * 0.003])
        # faint: tiny and semi-transparent; opaque: wide enough to cover whole tiles, so they saturate early
        scales = torch.cat([scales, torch.full((cluster, 3), 0.3 if opaque else 0.004)])
        # semi-transparent: long tails that never saturate; or opaque: saturates within a few hundred
        opacities = torch.cat([opacities, torch.full((cluster,), 0.9 if opaque else 0.08)])
    quats = torch.randn(means.shape[0], 4, generator=g)
    return [t.to(device) for t in (means, quats / quats.norm(dim=-1, keepdim=True), scales, opacities)]


def cameras(count, width, height, device="cuda"):
    viewmats = torch.eye(4).repeat(count, 1, 1)
    viewmats[:, 0, 3] = torch.linspace(-0.3, 0.3, count)
    focal = 0.9 * max(width, height)
    Ks = torch.tensor([[focal, 0, width / 2], [0, focal, height / 2], [0, 0, 1.0]]).repeat(count, 1, 1)
    return viewmats.to(device), Ks.to(device)


def project(means, quats, scales, opacities, viewmats, Ks, width, height, tile_size=16, channels=3, seed=0,
            grid_width=None):
    """gsplat's projection and tile intersection of one frame (a tile grid `grid_width` tiles wide where given:
    gsplat accepts any grid that covers the image)."""
    from gsplat.cuda._wrapper import fully_fused_projection, isect_offset_encode, isect_tiles

    C = viewmats.shape[0]
    radii, means2d, depths, conics, _ = fully_fused_projection(
        means, None, quats, scales, viewmats, Ks, width, height, packed=False, opacities=opacities)
    g = torch.Generator(device="cpu").manual_seed(seed + 1)
    colors = torch.rand(C, means.shape[0], channels, generator=g).cuda()
    tile_width, tile_height = grid_width or math.ceil(width / tile_size), math.ceil(height / tile_size)
    _, isect_ids, flatten_ids = isect_tiles(means2d, radii, depths, tile_size, tile_width, tile_height)
    isect_offsets = isect_offset_encode(isect_ids, C, tile_width, tile_height)
    opacities_c = opacities[None].expand(C, -1).contiguous()
    return dict(means2d=means2d, conics=conics, colors=colors, opacities=opacities_c, image_width=width,
                image_height=height, tile_size=tile_size, isect_offsets=isect_offsets, flatten_ids=flatten_ids)


def gsplat_forward(frame, **extra):
    """gsplat's forward kernel outputs including last_ids (through its C++ op)."""
    from gsplat.cuda._wrapper import _make_lazy_cuda_func

    return _make_lazy_cuda_func("rasterize_to_pixels_3dgs_fwd")(
        frame["means2d"].contiguous(), frame["conics"].contiguous(), frame["colors"].contiguous(),
        frame["opacities"].contiguous(), extra.get("backgrounds"), extra.get("masks"), frame["image_width"],
        frame["image_height"], frame["tile_size"], frame["isect_offsets"], frame["flatten_ids"])


def ours_forward(frame, config, with_last_ids=True, **extra):
    """Our kernels' outputs including last_ids and the plan (the low-level entry of the 3DGS front end). Without
    with_last_ids, as an inference call renders (no last_ids: the persistent kernels that keep none), last_ids is
    None."""
    from gsplat_lpt.variants.gaussian3d import Frame3DGS

    ours = Frame3DGS(frame["means2d"], frame["conics"], frame["colors"], frame["opacities"], extra.get("backgrounds"),
                     extra.get("masks"), frame["image_width"], frame["image_height"], frame["tile_size"],
                     frame["isect_offsets"], frame["flatten_ids"], False)
    colors, alphas, last_ids, plan = ours.render(config, with_last_ids=with_last_ids)
    return colors, alphas, None if last_ids is None else last_ids.reshape(alphas.shape[:-1]), plan


CASES = [
    # name, n, cameras, width, height, tile_size, channels, cluster
    ("basic", 3000, 1, 160, 96, 16, 3, 0),
    ("odd-size", 2500, 2, 123, 77, 16, 3, 0),
    ("tile8", 2000, 1, 100, 60, 8, 3, 0),
    ("tile32", 2000, 1, 130, 70, 32, 3, 0),
    ("one-channel", 2000, 1, 96, 64, 16, 1, 0),
    ("channels-32", 1500, 1, 96, 64, 16, 32, 0),
    ("channels-9", 1500, 2, 96, 64, 16, 9, 0),  # 9, 17, 33: colour rows padded to a multiple of 4 floats
    ("channels-17", 1500, 1, 96, 64, 16, 17, 0),
    ("heavy-channels-33", 3000, 1, 200, 120, 16, 33, 20000),
    ("heavy-tile", 3000, 1, 200, 120, 16, 3, 20000),
    ("heavy-multicam", 3000, 3, 200, 120, 16, 4, 8000),
    ("heavy-opaque", 3000, 1, 200, 120, 16, 3, -20000),  # negative cluster: opaque stack, saturates early
    ("channels-64", 1500, 1, 96, 64, 16, 64, 0),
    ("heavy-channels-32", 3000, 1, 200, 120, 16, 32, 20000),  # (two pixels per thread at 32 channels)
    # feature maps blended constants.CHANNEL_SLICE channels at a time: slices of 64 and a last one of 1
    ("channels-65", 1000, 1, 96, 64, 16, 65, 0),
    ("channels-128", 1000, 2, 96, 64, 16, 128, 0),
    ("heavy-channels-129", 2000, 1, 160, 96, 16, 129, 20000),
    ("channels-513", 600, 1, 64, 48, 16, 513, 0),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("with_background", [False, True])
@pytest.mark.parametrize("pixels_per_thread", [0, 1, 2], ids=["default-pixels", "one-pixel", "two-pixel"])
@pytest.mark.parametrize("with_last_ids", [True, False], ids=["last-ids", "no-last-ids"])
def test_lpt_matches_gsplat_exactly(case, with_background, pixels_per_thread, with_last_ids):
    """Colours, alphas and last_ids bit for bit gsplat's; without last_ids (an inference call: the persistent
    kernels that keep none) the same colours and alphas."""
    name, n, C, W, H, tile_size, channels, cluster = case
    gaussians = random_gaussians(n, seed=len(name) + 7 * C, cluster=cluster)
    frame = project(*gaussians, *cameras(C, W, H), W, H, tile_size, channels, seed=n)
    extra = {"backgrounds": torch.rand(C, channels, device="cuda")} if with_background else {}
    ref_colors, ref_alphas, ref_last = gsplat_forward(frame, **extra)
    colors, alphas, last_ids, plan = ours_forward(frame, LPTConfig(mode="lpt", pixels_per_thread=pixels_per_thread),
                                                  with_last_ids, **extra)
    report = plan.report()
    assert report["chunked_tiles"] == 0
    if channels > constants.CHANNEL_SLICE:
        expected = "3dgs_slice" if channels % 4 else "3dgs_slice_row16"
    else:
        expected = "3dgs_padded_rows" if channels % 4 and channels > 4 else "3dgs"
    assert report["variant"] == expected
    assert torch.equal(colors, ref_colors) and torch.equal(alphas, ref_alphas)
    if with_last_ids:
        assert torch.equal(last_ids, ref_last)
    else:
        assert last_ids is None


@pytest.mark.parametrize("pixels_per_thread", [1, 2])
@pytest.mark.parametrize("mode", ["lpt", "fixed"])
def test_kernels_without_last_ids_render_the_same_floats(pixels_per_thread, mode):
    """A call that needs no last_ids runs the persistent kernels' builds that keep none (kept on this GPU: as many
    CTAs resident), unchunked and beside the chunk kernel; every colour and alpha is the one the kernels with
    last_ids render, which in mode "lpt" is gsplat's."""
    from gsplat_lpt.runtime import rasterizer_for
    from gsplat_lpt.variants import VARIANTS

    frame = project(*random_gaussians(4000, seed=17, cluster=20000), *cameras(2, 256, 160), 256, 160, 16, 3, seed=2)
    config = LPTConfig(mode=mode, pixels_per_thread=pixels_per_thread, heavy_ratio=0.01, chunk_count=8,
                       saturation_feedback=False)
    with_ids = ours_forward(frame, config, True)
    without = ours_forward(frame, config, False)
    assert without[2] is None
    assert torch.equal(with_ids[0], without[0]) and torch.equal(with_ids[1], without[1])
    report = without[3].report()
    assert report["pixels_per_thread"] == pixels_per_thread
    assert (report["chunked_tiles"] > 0) == (mode == "fixed")
    rasterizer = rasterizer_for(VARIANTS["rasterize_to_pixels"], 3, 16, frame["means2d"].device)
    two = pixels_per_thread == 2
    assert rasterizer._persistent_launches[two, False][0] != rasterizer._persistent_launches[two, True][0]
    if mode == "lpt":
        ref_colors, ref_alphas, _ = gsplat_forward(frame)
        assert torch.equal(without[0], ref_colors) and torch.equal(without[1], ref_alphas)


@pytest.mark.parametrize("pixels_per_thread", [1, 2])
@pytest.mark.parametrize("channels", [3, 8])
def test_batches_staged_scaled_and_as_they_are_are_gsplat_bit_for_bit(pixels_per_thread, channels):
    """3DGS walks a batch with the conic's diagonal halved (Gaussian3DGS::evaluate_scaled; in every kernel) where
    every Gaussian of it allows that exactly, and any other batch unscaled again, as staged. Conics with
    an entry outside [2^-70, 2^70] (a huge Gaussian over many tiles, a point) scattered through the lists put both
    kinds of batches in one frame; either way every pixel, alpha and last_id is gsplat's."""
    gaussians = random_gaussians(6000, seed=21, cluster=4000)
    frame = project(*gaussians, *cameras(2, 320, 192), 320, 192, 16, channels, seed=5)
    conics = frame["conics"].clone()
    g = torch.Generator().manual_seed(4)
    chosen = torch.randperm(conics.shape[1], generator=g)[:60]
    conics[:, chosen[:30], 0] = 2.0 ** -75  # wide along x: reaches every pixel of its tiles
    conics[:, chosen[30:], 2] = 2.0 ** 72
    frame["conics"] = conics
    ref_colors, ref_alphas, ref_last = gsplat_forward(frame)
    config = LPTConfig(mode="lpt", pixels_per_thread=pixels_per_thread)
    colors, alphas, last_ids, _ = ours_forward(frame, config)
    assert torch.equal(colors, ref_colors) and torch.equal(alphas, ref_alphas)
    assert torch.equal(last_ids, ref_last)
    # the wide Gaussians show: the frame differs from one without them
    plain = project(*gaussians, *cameras(2, 320, 192), 320, 192, 16, channels, seed=5)
    assert not torch.equal(gsplat_forward(plain)[0], ref_colors)


@pytest.mark.parametrize("channels", [8, 17, 32, 64, 128])
@pytest.mark.parametrize("mode", ["lpt", "chunk"])
def test_colour_rows_off_a_16_byte_boundary(channels, mode):
    """Colour rows of a multiple of 4 floats are read in 16-byte loads: a colour view that starts 4 bytes past a
    16-byte boundary (contiguous, as a slice of a flat buffer is) gives gsplat's image bit for bit, unchunked and
    chunked, as the aligned array does."""
    frame = project(*random_gaussians(2000, seed=channels, cluster=6000), *cameras(1, 160, 96), 160, 96,
                    channels=channels, seed=3)
    colors = frame["colors"]
    storage = torch.empty(colors.numel() + 1, device="cuda")
    shifted = storage[1:].view(colors.shape)
    shifted.copy_(colors)
    assert shifted.data_ptr() % 16 == 4 and shifted.is_contiguous()
    ref_colors, ref_alphas, _ = gsplat_forward(frame)
    config = LPTConfig(mode=mode, chunk_count=4)
    aligned_out, shifted_out = (ours_forward({**frame, "colors": given}, config) for given in (colors, shifted))
    assert torch.equal(shifted_out[0], aligned_out[0]) and torch.equal(shifted_out[1], aligned_out[1])
    out_colors, out_alphas, _, plan = shifted_out
    if mode == "lpt":
        assert torch.equal(out_colors, ref_colors) and torch.equal(out_alphas, ref_alphas)
    else:  # chunked: gsplat's image up to the rounding of Eq. (5) (test_chunked_modes_match_gsplat's bound)
        assert plan.report()["chunked_tiles"] > 0
        assert psnr(out_colors, ref_colors) >= 76.0 and psnr(out_alphas, ref_alphas) >= 76.0


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("config", CHUNKED_MODES, ids=lambda c: f"{c.mode}-k{c.chunk_count}-rho{c.heavy_ratio}")
def test_chunked_modes_psnr(case, config):
    name, n, C, W, H, tile_size, channels, cluster = case
    gaussians = random_gaussians(n, seed=len(name) + 7 * C, cluster=cluster)
    frame = project(*gaussians, *cameras(C, W, H), W, H, tile_size, channels, seed=n)
    backgrounds = torch.rand(C, channels, device="cuda")
    ref_colors, ref_alphas, _ = gsplat_forward(frame, backgrounds=backgrounds)
    for attempt in range(3):  # later frames: grown partial buffers, saturation feedback from the frame before
        colors, alphas, _, plan = ours_forward(frame, config, backgrounds=backgrounds)
        if config.mode in ("chunk", "fixed"):
            assert plan.report()["chunked_tiles"] > 0
        assert psnr(colors, ref_colors) >= 76.0, attempt
        assert psnr(alphas, ref_alphas) >= 76.0, attempt
        assert (colors - ref_colors).abs().max().item() <= 0.1  # see tests/test_reference.py for the bound


def test_eager_auto_policy_chunks_the_heavy_tile():
    gaussians = random_gaussians(3000, seed=3, cluster=20000)
    frame = project(*gaussians, *cameras(1, 200, 120), 200, 120)
    _, _, _, plan = ours_forward(frame, CHUNKED_MODES[-1])
    report = plan.report()
    assert report["chunked_tiles"] >= 1 and report["chunk_count"] >= 2


@pytest.mark.parametrize("cull", [True, False])
@pytest.mark.parametrize("pixels_per_thread", [1, 2])
@pytest.mark.parametrize("warp_shape", ["auto", "blocks", "rows"])
def test_culling_is_exact(cull, pixels_per_thread, warp_shape):
    """Per-warp culling changes no bit of colours, alphas or last_ids (real geometry, many tile sizes, one or
    two pixels per thread; warps of 8 x 4 pixel groups, or rows: 2 or 4 rows at tile size 16), in lpt mode,
    in the chunk kernel, and in a frame of both."""
    for tile_size in (8, 12, 16, 24, 32):
        frame = project(*random_gaussians(6000, seed=tile_size, cluster=2000), *cameras(2, 150, 100), 150, 100,
                        tile_size=tile_size)
        ref = gsplat_forward(frame)
        config = LPTConfig(mode="lpt", cull=cull, pixels_per_thread=pixels_per_thread, warp_shape=warp_shape)
        ours = ours_forward(frame, config)
        for a, b in zip(ref, ours[:3]):
            assert torch.equal(a, b), tile_size
        chunked = ours_forward(frame, config.replace(mode="chunk", chunk_count=3))
        assert chunked[3].report()["chunked_tiles"] > 0
        assert psnr(chunked[0], ref[0]) >= 76.0, tile_size
        unculled = ours_forward(frame, config.replace(mode="chunk", chunk_count=3, cull=not cull))
        assert torch.equal(chunked[0], unculled[0]) and torch.equal(chunked[1], unculled[1]), tile_size
        # a frame of both kernels: the persistent kernel's warps as the warp shape gives them in a chunked frame
        mixed = config.replace(mode="fixed", heavy_ratio=0.3, chunk_count=3)
        both = ours_forward(frame, mixed)
        assert 0 < both[3].report()["chunked_tiles"] < both[3].report()["nonempty_items"]
        assert psnr(both[0], ref[0]) >= 76.0, tile_size
        both_unculled = ours_forward(frame, mixed.replace(cull=not cull))
        assert torch.equal(both[0], both_unculled[0]) and torch.equal(both[1], both_unculled[1]), tile_size


def test_masks_render_background_on_masked_tiles():
    C, W, H = 2, 150, 90
    frame = project(*random_gaussians(3000, seed=11), *cameras(C, W, H), W, H)
    masks = torch.rand(frame["isect_offsets"].shape, device="cuda") > 0.3
    backgrounds = torch.rand(C, 3, device="cuda")
    ref_colors, ref_alphas, ref_last = gsplat_forward(frame, backgrounds=backgrounds, masks=masks)
    for config in (LPTConfig(mode="lpt"), LPTConfig(mode="chunk", chunk_count=4)):
        colors, alphas, last_ids, _ = ours_forward(frame, config, backgrounds=backgrounds, masks=masks)
        assert psnr(colors, ref_colors) >= 76.0
        pixel_mask = masks.repeat_interleave(16, -2).repeat_interleave(16, -1)[:, :H, :W]
        if config.mode == "lpt":
            assert (colors - ref_colors).abs().max().item() <= 1e-6
            assert (alphas - ref_alphas)[pixel_mask].abs().max().item() <= 1e-6  # gsplat leaves masked alphas unset
            assert torch.equal(last_ids[pixel_mask], ref_last[pixel_mask])


def test_zero_intersections():
    means, quats, scales, opacities = random_gaussians(500, seed=5)
    means[:, 2] = -5.0  # everything behind the camera
    frame = project(means, quats, scales, opacities, *cameras(2, 64, 48), 64, 48)
    assert frame["flatten_ids"].numel() == 0
    backgrounds = torch.rand(2, 3, device="cuda")
    for mode in ("lpt", "auto", "chunk"):
        colors, alphas = gsplat_lpt.rasterize_to_pixels(**frame, backgrounds=backgrounds, config=LPTConfig(mode=mode))
        assert torch.allclose(colors, backgrounds[:, None, None, :].expand_as(colors))
        assert torch.all(alphas == 0)


def test_batch_dims_through_public_function():
    """[B, C, N] inputs: batch dims flow through like gsplat's."""
    W, H = 96, 64
    frame = project(*random_gaussians(2000, seed=9), *cameras(4, W, H), W, H)
    batched = {k: (v.reshape(2, 2, *v.shape[1:]) if k in ("means2d", "conics", "colors", "opacities", "isect_offsets") else v)
               for k, v in frame.items()}
    ref_colors, ref_alphas = original("rasterize_to_pixels")(**batched)
    colors, alphas, stats = gsplat_lpt.rasterize_to_pixels(**batched, config=LPTConfig(mode="lpt"), return_stats=True)
    assert colors.shape == ref_colors.shape == (2, 2, H, W, 3)
    assert (colors - ref_colors).abs().max().item() <= 1e-6
    assert (alphas - ref_alphas).abs().max().item() <= 1e-6
    assert stats["mode"] == "lpt" and stats["concurrent_ctas"] > 0 and stats["imbalance"] > 0


def test_frames_of_other_sizes_and_configs_in_turn_on_one_stream():
    """The kernels' frame arguments keep a frame's size and a config's switches from the call before where they
    are the same (gsplat_lpt.runtime.Rasterizer.run): frames of other sizes (among them two with as many items,
    image sizes and tiles but another tile grid) and other configs, in turn on one stream, each stay exact."""
    W, H = 160, 96
    gaussians = random_gaussians(3000, seed=21)
    two_images = project(*gaussians, *cameras(2, W, H), W, H)
    wide_grid = project(*gaussians, *cameras(1, W, H), W, H, grid_width=20)  # one image, as many items
    small = project(*random_gaussians(1500, seed=22), *cameras(1, 96, 64), 96, 64)
    assert wide_grid["isect_offsets"].numel() == two_images["isect_offsets"].numel()
    exact, culled_off = LPTConfig(mode="lpt"), LPTConfig(mode="lpt", cull=False, warp_shape="rows")
    stream = torch.cuda.Stream()  # (a workspace of its own)
    with torch.cuda.stream(stream):
        for frame, config in [(two_images, exact), (wide_grid, exact), (small, culled_off), (two_images, culled_off),
                              (wide_grid, LPTConfig(mode="auto")), (two_images, exact), (wide_grid, culled_off),
                              (small, exact)]:
            ref_colors, ref_alphas = original("rasterize_to_pixels")(**frame)
            colors, alphas = gsplat_lpt.rasterize_to_pixels(**frame, config=config)
            if config.mode == "lpt":
                assert torch.equal(colors, ref_colors) and torch.equal(alphas, ref_alphas), (frame["means2d"].shape, config)
            else:
                assert psnr(colors, ref_colors) >= 76 and psnr(alphas, ref_alphas) >= 76


def test_padded_channel_count():
    W, H = 80, 48
    frame = project(*random_gaussians(1500, seed=13), *cameras(1, W, H), W, H, channels=6)
    ref_colors, ref_alphas = original("rasterize_to_pixels")(**frame)
    colors, alphas = gsplat_lpt.rasterize_to_pixels(**frame, config=LPTConfig(mode="lpt"))
    assert colors.shape[-1] == 6
    assert (colors - ref_colors).abs().max().item() <= 1e-6


@pytest.mark.parametrize("mode", ["lpt", "auto", "chunk"])
@pytest.mark.parametrize("absgrad", [False, True])
@pytest.mark.parametrize("channels", [3, 129])  # (129: blended in channel slices)
def test_gradients_equal_gsplat(mode, absgrad, channels):
    W, H, C = 120, 80, 2
    base = project(*random_gaussians(2500, seed=17, cluster=3000), *cameras(C, W, H), W, H, channels=channels)
    grads = []
    for backend in ("cuda", "lpt"):
        leaves = {k: base[k].detach().clone().requires_grad_(True) for k in ("means2d", "conics", "colors", "opacities")}
        backgrounds = torch.full((C, channels), 0.25, device="cuda", requires_grad=True)
        frame = {**base, **leaves}
        if backend == "cuda":
            colors, alphas = original("rasterize_to_pixels")(**frame, backgrounds=backgrounds, absgrad=absgrad)
        else:
            colors, alphas, stats = gsplat_lpt.rasterize_to_pixels(
                **frame, backgrounds=backgrounds, absgrad=absgrad, config=LPTConfig(mode=mode), return_stats=True)
            assert stats["chunked_tiles"] == 0
            if mode != "lpt":
                assert "autograd" in stats["chunking_disabled_reason"]
        weights = torch.linspace(0.1, 1.0, colors.numel(), device="cuda").reshape(colors.shape)
        ((colors * weights).sum() + (alphas ** 2).sum()).backward()
        grads.append({**{k: v.grad for k, v in leaves.items()}, "backgrounds": backgrounds.grad,
                      **({"absgrad": leaves["means2d"].absgrad} if absgrad else {})})
    for key in grads[0]:
        if grads[0][key] is None and grads[1][key] is None:
            continue
        # gsplat's backward adds each Gaussian's gradient up with atomics, in an order that changes from run to
        # run: at 129 channels its own two runs differed by up to 1.2e-7 of the gradient's largest value (the
        # conics', on an H200), too much for atol 1e-7; our forward hands it bit-for-bit gsplat's saved tensors
        atol = 1e-7 if channels == 3 else 1e-6 * float(grads[0][key].abs().max())
        assert torch.allclose(grads[0][key], grads[1][key], rtol=1e-5, atol=atol), key


def load_splat(path):
    raw = np.fromfile(path, dtype=np.uint8).reshape(-1, 32)
    floats = raw[:, :24].copy().view(np.float32).reshape(-1, 6)
    rgba = raw[:, 24:28].astype(np.float32) / 255.0
    quats = (raw[:, 28:32].astype(np.float32) - 128.0) / 128.0
    quats /= np.linalg.norm(quats, axis=1, keepdims=True)
    to = lambda a: torch.from_numpy(np.ascontiguousarray(a)).cuda()
    return to(floats[:, :3]), to(quats), to(floats[:, 3:6]), to(rgba[:, 3]), to(rgba[:, :3])


def look_at(eye, target):
    eye, target = np.asarray(eye, np.float32), np.asarray(target, np.float32)
    forward = target - eye
    forward /= np.linalg.norm(forward)
    right = np.cross(forward, np.array([0, -1, 0], np.float32))
    right /= np.linalg.norm(right)
    down = np.cross(forward, right)
    c2w = np.eye(4, dtype=np.float32)
    c2w[:3, 0], c2w[:3, 1], c2w[:3, 2], c2w[:3, 3] = right, down, forward, eye
    return torch.from_numpy(np.linalg.inv(c2w))


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("channel_chunk", [32, 128])
def test_feature_maps_through_rasterization(packed, channel_chunk):
    """A 128-channel feature map end to end through gsplat.rasterization: the same image as backend="cuda", bit
    for bit, packed or not. gsplat's channel_chunk (32 by default) splits it into calls of that many channels;
    with 128 the backend gets the whole map and blends it in channel slices."""
    import gsplat

    means, quats, scales, opacities = random_gaussians(3000, seed=21)
    features = torch.rand(means.shape[0], 128, device="cuda")
    viewmats, Ks = cameras(2, 160, 96)
    outputs = [gsplat.rasterization(means, quats, scales, opacities, features, viewmats, Ks, 160, 96, packed=packed,
                                    channel_chunk=channel_chunk, backend=backend, lpt_config=LPTConfig(mode="lpt"))
               for backend in ("cuda", "lpt")]
    (ref_colors, ref_alphas, _), (colors, alphas, meta) = outputs
    assert meta["lpt"]["variant"] == ("3dgs_slice_row16" if channel_chunk == 128 else "3dgs")
    assert float(ref_alphas.mean()) > 0.05
    assert torch.equal(colors, ref_colors) and torch.equal(alphas, ref_alphas)


@pytest.mark.parametrize("channels", [64, 128])
def test_whole_feature_maps_by_default_in_inference(channels):
    """With channel_chunk left at gsplat's default, backend="lpt" gets a 64- or 128-channel map in one call where
    nothing needs gradients (gsplat_lpt.hook.whole_map_chunk), and in gsplat's calls of 32 channels where
    something does: the same image as backend="cuda" either way, bit for bit."""
    import gsplat

    means, quats, scales, opacities = random_gaussians(3000, seed=22)
    features = torch.rand(means.shape[0], channels, device="cuda")
    viewmats, Ks = cameras(2, 160, 96)
    render = lambda backend: gsplat.rasterization(means, quats, scales, opacities, features, viewmats, Ks, 160, 96,
                                                  backend=backend, lpt_config=LPTConfig(mode="lpt"))  # noqa: E731
    with torch.no_grad():
        (ref_colors, ref_alphas, _), (colors, alphas, meta) = render("cuda"), render("lpt")
    assert "channel_chunks" not in meta["lpt"]  # one call
    assert meta["lpt"]["variant"] == ("3dgs" if channels == 64 else "3dgs_slice_row16")
    assert torch.equal(colors, ref_colors) and torch.equal(alphas, ref_alphas)
    features.requires_grad_(True)
    colors, alphas, meta = render("lpt")
    assert len(meta["lpt"]["channel_chunks"]) == channels // 32  # gsplat's chunks, for gsplat's backward
    assert torch.equal(colors, ref_colors) and torch.equal(alphas, ref_alphas)
    colors.sum().backward()
    assert features.grad is not None and torch.isfinite(features.grad).all()


@pytest.mark.parametrize("packed", [False, True])
def test_real_trained_bonsai_through_rasterization(packed):
    """The real trained scene, end to end through gsplat.rasterization(..., backend=...)."""
    from conftest import data_dir

    import gsplat

    means, quats, scales, opacities, colors = load_splat(data_dir() / "bonsai-7k-mini.splat")
    centre = means.median(dim=0).values.cpu().numpy()
    viewmats = torch.stack([look_at(centre + np.array([3.0 * math.cos(a), -1.0, 3.0 * math.sin(a)]), centre)
                            for a in (0.3, 2.0)]).cuda()
    W, H = 320, 240
    Ks = torch.tensor([[300.0, 0, W / 2], [0, 300.0, H / 2], [0, 0, 1]]).repeat(2, 1, 1).cuda()
    kwargs = dict(packed=packed, render_mode="RGB+ED")
    if not packed:  # gsplat 1.5.3 itself rejects backgrounds with packed=True (its shape assert)
        kwargs["backgrounds"] = torch.rand(2, 3, device="cuda")
    ref_colors, ref_alphas, _ = gsplat.rasterization(means, quats, scales, opacities, colors, viewmats, Ks, W, H,
                                                     backend="cuda", **kwargs)
    assert float(ref_alphas.mean()) > 0.2  # the camera sees the scene
    colors_lpt, alphas_lpt, meta = gsplat.rasterization(means, quats, scales, opacities, colors, viewmats, Ks, W, H,
                                                        backend="lpt", lpt_config=LPTConfig(mode="lpt"), **kwargs)
    assert meta["lpt"]["mode"] == "lpt"
    assert (colors_lpt - ref_colors).abs().max().item() <= 1e-5  # ED divides by alpha: 1e-6 before that
    assert (alphas_lpt - ref_alphas).abs().max().item() <= 1e-6
    colors_auto, _, meta = gsplat.rasterization(means, quats, scales, opacities, colors, viewmats, Ks, W, H,
                                                backend="lpt", **kwargs)
    assert psnr(colors_auto[..., :3], ref_colors[..., :3]) >= 76.0


def test_garden_real_cameras_and_points():
    from conftest import data_dir

    data = np.load(data_dir() / "test_garden.npz")
    means = torch.from_numpy(data["means3d"]).float().cuda()
    n = means.shape[0]
    g = torch.Generator(device="cpu").manual_seed(42)
    quats = torch.nn.functional.normalize(torch.randn(n, 4, generator=g), dim=-1).cuda()
    scales = (torch.rand(n, 3, generator=g) * 0.02).cuda()
    opacities = torch.rand(n, generator=g).cuda()
    viewmats = torch.from_numpy(data["viewmats"]).float().cuda()
    Ks = torch.from_numpy(data["Ks"]).float().cuda()
    W, H = int(data["width"]), int(data["height"])
    frame = project(means, quats, scales, opacities, viewmats, Ks, W, H)
    frame["colors"] = (torch.from_numpy(data["colors"]).float().cuda() / 255.0)[None].expand(viewmats.shape[0], -1, -1).contiguous()
    ref_colors, ref_alphas, ref_last = gsplat_forward(frame)
    colors, alphas, last_ids, _ = ours_forward(frame, LPTConfig(mode="lpt"))
    assert (colors - ref_colors).abs().max().item() <= 1e-6
    assert torch.equal(last_ids, ref_last)
    for config in (LPTConfig(mode="auto"), LPTConfig(mode="chunk", chunk_count=8)):
        colors_c, alphas_c, _, _ = ours_forward(frame, config)
        assert psnr(colors_c, ref_colors) >= 76.0


def test_reference_matches_gsplat_kernel_on_gpu():
    """Closes the oracle loop: our torch reference equals gsplat's CUDA kernel (so CPU tests against the
    reference test the same semantics)."""
    from gsplat_lpt.reference import blend_sequential

    W, H = 64, 48
    frame = project(*random_gaussians(800, seed=21, cluster=500), *cameras(1, W, H), W, H)
    ref_colors, ref_alphas, ref_last = gsplat_forward(frame)
    colors, alphas, last_ids = blend_sequential(frame["means2d"], frame["conics"], frame["colors"], frame["opacities"],
                                                W, H, 16, frame["isect_offsets"], frame["flatten_ids"])
    assert (colors - ref_colors).abs().max().item() < 1e-4
    assert (alphas - ref_alphas).abs().max().item() < 1e-4
    assert (last_ids == ref_last).float().mean().item() > 0.99  # exp vs __expf may flip a threshold rarely


def test_bad_inputs_on_gpu_raise_clear_errors():
    W, H = 64, 48
    frame = project(*random_gaussians(300, seed=1), *cameras(1, W, H), W, H)
    with pytest.raises(ValueError, match="conics"):
        gsplat_lpt.rasterize_to_pixels(**{**frame, "conics": frame["conics"][..., :2]})
    with pytest.raises(ValueError, match="opacities.*float32"):
        gsplat_lpt.rasterize_to_pixels(**{**frame, "opacities": frame["opacities"].double()})
    with pytest.raises(ValueError, match="colors is on cpu"):
        gsplat_lpt.rasterize_to_pixels(**{**frame, "colors": frame["colors"].cpu()})




@pytest.mark.parametrize("channels", [3, 16])
@pytest.mark.parametrize("mode", ["lpt", "auto"])
def test_pixels_per_thread_follow_the_plan(mode, channels):
    """With pixels_per_thread=0 a frame runs with the pixels per thread that the last finished frame's plan
    asked for: two where nothing is chunked and the heaviest item is at most two_pixel_max_imbalance(channels)
    of N_total / K, or where auto chunks and max(N_1 / k, N_{h+1}) is at most two_pixel_chunked_max(channels) of
    it, else one. Either way the pixels are gsplat's. A wide balanced frame asks for two, a frame with one hot
    tile for one."""
    from gsplat_lpt.variants import VARIANTS

    variant = VARIANTS["rasterize_to_pixels"]

    wide = project(*random_gaussians(150000, seed=5), *cameras(1, 1920, 1080), 1920, 1080, channels=channels)
    hot = project(*random_gaussians(3000, seed=3, cluster=20000), *cameras(1, 200, 120), 200, 120, channels=channels)
    wanted = []
    for frame in (wide, hot, wide):
        ref_colors, ref_alphas, ref_last = gsplat_forward(frame)
        for call in range(2):
            colors, alphas, last_ids, plan = ours_forward(frame, LPTConfig(mode=mode))
            report = plan.report()  # waits for this frame: the next call reads what it asked for
            h, k = report["chunked_tiles"], report["chunk_count"]
            if h == 0:  # (a higher bound in a frame of many non-empty items per CTA)
                many = report["nonempty_items"] >= constants.TWO_PIXEL_MANY_ITEMS_PER_CTA * report["concurrent_ctas"]
                bound = (variant.two_pixel_many_items_max if many else variant.two_pixel_max_imbalance)(channels)
                longest = report["max_workload"]
            else:  # N_{h+1}: the plan's sorted costs (exact in the head, where auto's h lies)
                next_cost = int(plan.workspace.sorted_costs[h]) if h < report["nonempty_items"] else 0
                longest = max(report["max_workload"] / k, next_cost)
                bound = variant.two_pixel_chunked_max(channels) if mode == "auto" else 0.0
            light = longest * report["concurrent_ctas"] <= bound * report["predicted_total_cost"]
            assert report["pixels_wanted"] == (2 if light else 1)
            if call == 1:  # follows what the frame before (the same frame) asked for
                assert report["pixels_per_thread"] == report["pixels_wanted"]
            if mode == "lpt":
                assert torch.equal(colors, ref_colors) and torch.equal(alphas, ref_alphas)
                assert torch.equal(last_ids, ref_last)
            else:
                assert psnr(colors, ref_colors) >= 76.0
        wanted.append(report["pixels_wanted"])
    assert wanted == [2, 1, 2]
