"""GPU: the 2DGS variant against gsplat's own 2DGS CUDA kernel, on the same projected inputs.

Contract: mode "lpt" equals gsplat for every output (colours with the depth channel, alphas, normals,
distortion, median depth within 1e-6 relative, last_ids and median_ids equal; bitwise where the same math
compiles the same way, which we also check); chunked modes >= 76 dB on colours, alphas, normals and
distortion, with median depth and median_ids still exact (the re-walk); gradients equal gsplat's (its
backward op, fed our outputs); a call without last_ids and median_ids (inference: the persistent kernels' builds
that keep neither) renders the floats of one with them; `gsplat.rasterization_2dgs(..., backend="lpt")` end to
end, and a few steps of a 2DGS training loop give gsplat's losses.
"""

from __future__ import annotations

import math

import pytest
import torch

import gsplat_lpt  # noqa: F401  (installs the hook: backend="lpt")
from gsplat_lpt import LPTConfig, constants, frontend
from gsplat_lpt.hook import original
from gsplat_lpt.variants import surfel2d
from helpers import record_persistent_launches
from test_gpu_parity import CHUNKED_MODES, cameras, psnr, random_gaussians

pytestmark = pytest.mark.gpu

FLOAT_OUTPUTS = ("render_colors", "render_alphas", "render_normals", "render_distort", "render_median")
OUTPUT_NAMES = FLOAT_OUTPUTS + ("last_ids", "median_ids")


def project_2dgs(means, quats, scales, opacities, viewmats, Ks, width, height, tile_size=16, channels=4,
                 packed=False, seed=0):
    """gsplat's 2DGS projection and tiling: the arguments of rasterize_to_pixels_2dgs for one frame. Colours
    are random with the depth as last channel (rasterization_2dgs's "RGB+D"; channels=1 is "D")."""
    from gsplat.cuda._wrapper import fully_fused_projection_2dgs, isect_offset_encode, isect_tiles

    C, N = viewmats.shape[0], means.shape[0]
    tile_width, tile_height = math.ceil(width / tile_size), math.ceil(height / tile_size)
    g = torch.Generator(device="cpu").manual_seed(seed + 1)
    if packed:
        _, camera_ids, gaussian_ids, radii, means2d, depths, ray_transforms, normals = fully_fused_projection_2dgs(
            means, quats, scales, viewmats, Ks, width, height, packed=True)
        opacities_c = opacities[gaussian_ids]
        rows = (means2d.shape[0],)
        _, isect_ids, flatten_ids = isect_tiles(means2d, radii, depths, tile_size, tile_width, tile_height,
                                                packed=True, n_images=C, image_ids=camera_ids,
                                                gaussian_ids=gaussian_ids)
    else:
        radii, means2d, depths, ray_transforms, normals = fully_fused_projection_2dgs(
            means, quats, scales, viewmats, Ks, width, height, packed=False)
        opacities_c = opacities[None].expand(C, -1).contiguous()
        rows = (C, N)
        _, isect_ids, flatten_ids = isect_tiles(means2d, radii, depths, tile_size, tile_width, tile_height)
    isect_offsets = isect_offset_encode(isect_ids, C, tile_width, tile_height)
    colors = torch.rand(*rows, channels - 1, generator=g).cuda()
    colors = torch.cat([colors, depths[..., None]], -1).contiguous()
    return dict(means2d=means2d.contiguous(), ray_transforms=ray_transforms.contiguous(), colors=colors,
                opacities=opacities_c.contiguous(), normals=normals.contiguous(),
                densify=torch.zeros_like(means2d), image_width=width, image_height=height, tile_size=tile_size,
                isect_offsets=isect_offsets, flatten_ids=flatten_ids, packed=packed)


def gsplat_forward(frame, backgrounds=None, masks=None):
    """gsplat's 2DGS forward op: the five rendered outputs, last_ids and median_ids."""
    from gsplat.cuda._wrapper import _make_lazy_cuda_func

    outputs = _make_lazy_cuda_func("rasterize_to_pixels_2dgs_fwd")(
        frame["means2d"], frame["ray_transforms"], frame["colors"], frame["opacities"], frame["normals"], backgrounds,
        masks, frame["image_width"], frame["image_height"], frame["tile_size"], frame["isect_offsets"],
        frame["flatten_ids"])
    return dict(zip(OUTPUT_NAMES, outputs))


def ours_forward(frame, config, backgrounds=None, masks=None, with_last_ids=True):
    """Our kernels' outputs (same names and shapes) and the plan, through the low-level Frame2DGS. Without
    with_last_ids, as an inference call renders (the persistent kernels' builds that keep no ids), last_ids and
    median_ids are None."""
    ours = surfel2d.Frame2DGS(frame["means2d"], frame["ray_transforms"], frame["colors"], frame["opacities"],
                              frame["normals"], frame["densify"], backgrounds, masks, frame["image_width"],
                              frame["image_height"], frame["tile_size"], frame["isect_offsets"], frame["flatten_ids"],
                              frame["packed"])
    *outputs, plan = ours.render(config, with_last_ids=with_last_ids)
    return dict(zip(OUTPUT_NAMES, outputs)), plan


def assert_matches(ours, ref, where=None, exact_ids=True, label=""):
    for key in FLOAT_OUTPUTS:
        a, b = ours[key], ref[key]
        if where is not None:
            a, b = a[where], b[where]
        scale = max(1.0, float(b.abs().max())) if b.numel() else 1.0
        assert (a - b).abs().max().item() <= 1e-6 * scale, f"{label} {key}"
    if exact_ids:
        for key in ("last_ids", "median_ids"):
            a, b = ours[key], ref[key]
            if where is not None:
                a, b = a[where], b[where]
            assert torch.equal(a, b), f"{label} {key}"


CASES = [
    # name, n, cameras, width, height, tile_size, channels, cluster
    ("basic", 3000, 1, 160, 96, 16, 4, 0),
    ("odd-size", 2500, 2, 123, 77, 16, 4, 0),
    ("tile8", 2000, 1, 100, 60, 8, 4, 0),
    ("depth-only", 2000, 1, 96, 64, 16, 1, 0),
    ("channels-2", 2000, 1, 96, 64, 16, 2, 0),
    ("channels-32", 1500, 1, 96, 64, 16, 32, 0),
    ("heavy-tile", 3000, 1, 200, 120, 16, 4, 20000),
    ("heavy-multicam", 3000, 3, 200, 120, 16, 4, 8000),
    ("heavy-opaque", 3000, 1, 200, 120, 16, 4, -20000),  # negative cluster: opaque stack, saturates early
    ("channels-64", 1500, 1, 96, 64, 16, 64, 0),  # (kernels built for 512 resident threads above 32 channels)
    # feature maps blended constants.CHANNEL_SLICE channels at a time (the colours, then the last slice with depth)
    ("channels-128", 1000, 2, 96, 64, 16, 128, 0),
    ("channels-512", 600, 1, 64, 48, 16, 512, 0),
]


def case_frame(case, packed=False):
    name, n, C, W, H, tile_size, channels, cluster = case
    gaussians = random_gaussians(n, seed=len(name) + 7 * C, cluster=cluster)
    return project_2dgs(*gaussians, *cameras(C, W, H), W, H, tile_size, channels, packed=packed, seed=n)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("with_background", [False, True])
@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("pixels", [1, 2])
def test_lpt_matches_gsplat(case, with_background, packed, pixels):
    """Either persistent kernel (one pixel per thread, or two where the channels are few: the plan's choice
    forced here), gsplat's outputs."""
    C, channels = case[2], case[6]
    frame = case_frame(case, packed)
    backgrounds = torch.rand(C, channels, device="cuda") if with_background else None
    ref = gsplat_forward(frame, backgrounds)
    ours, plan = ours_forward(frame, LPTConfig(mode="lpt", pixels_per_thread=pixels), backgrounds)
    sliced = channels > constants.CHANNEL_SLICE  # (the report is the first slice's: a colour slice)
    report = plan.report()
    assert report["chunked_tiles"] == 0 and report["variant"] == ("2dgs_colors" if sliced else "2dgs")
    two_built = channels <= surfel2d.TWO_PIXEL_MAX_CHANNELS_2DGS and case[5] % 2 == 0
    assert report["pixels_per_thread"] == (pixels if two_built else 1)
    assert float(ref["render_alphas"].max()) > 0.5 and float(ref["render_distort"].abs().max()) > 0
    assert_matches(ours, ref, label=case[0])


@pytest.mark.parametrize("case", [CASES[0], CASES[2], CASES[6], CASES[8], CASES[-2], CASES[-1]], ids=lambda c: c[0])
@pytest.mark.parametrize("pixels", [1, 2])
def test_lpt_is_bitwise_gsplat(case, pixels):
    """Same expressions, compiled with gsplat's flags (-use_fast_math): float outputs within 1e-6 of gsplat's,
    relative to the output's scale where it exceeds 1 (the contract; NVRTC and nvcc need not round a fast-math
    division alike, and a colour plus T times a background near 1 sums to about 2: a few ulps there exceed 1e-6),
    ids equal; with one pixel per thread or two. The backgrounds are seeded: the check does not depend on what
    earlier tests drew from the CUDA generator."""
    frame = case_frame(case)
    generator = torch.Generator(device="cuda").manual_seed(11 + pixels)
    backgrounds = torch.rand(case[2], case[6], device="cuda", generator=generator)
    ref = gsplat_forward(frame, backgrounds)
    ours, _ = ours_forward(frame, LPTConfig(mode="lpt", pixels_per_thread=pixels), backgrounds)
    for key in OUTPUT_NAMES:
        if ref[key].dtype.is_floating_point:
            scale = max(1.0, float(ref[key].abs().max())) if ref[key].numel() else 1.0
            assert (ours[key] - ref[key]).abs().max().item() <= 1e-6 * scale, key
        else:
            assert torch.equal(ours[key], ref[key]), key


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("config", CHUNKED_MODES, ids=lambda c: f"{c.mode}-k{c.chunk_count}-rho{c.heavy_ratio}")
def test_chunked_modes(seed, config):
    """Chunked: colours, alphas, normals and distortion >= 76 dB (depth and distortion, both in depth units,
    against the depth peak); median depth and median_ids exact (chunk 0 and the re-walk from its T)."""
    case = CASES[6 + seed]
    C, channels = case[2], case[6]
    frame = case_frame(case)
    backgrounds = torch.rand(C, channels, device="cuda")
    ref = gsplat_forward(frame, backgrounds)
    depth_peak = float(ref["render_colors"][..., -1].abs().max())
    for attempt in range(3):  # later frames: grown partial buffers, saturation feedback from the frame before
        ours, plan = ours_forward(frame, config, backgrounds)
        if config.mode in ("chunk", "fixed"):
            assert plan.report()["chunked_tiles"] > 0
        assert psnr(ours["render_colors"][..., :-1], ref["render_colors"][..., :-1]) >= 76.0, attempt
        assert psnr(ours["render_colors"][..., -1] / depth_peak, ref["render_colors"][..., -1] / depth_peak) >= 76.0
        assert psnr(ours["render_alphas"], ref["render_alphas"]) >= 76.0, attempt
        assert psnr(ours["render_normals"], ref["render_normals"]) >= 76.0, attempt
        assert psnr(ours["render_distort"] / depth_peak, ref["render_distort"] / depth_peak) >= 76.0, attempt
        assert torch.equal(ours["render_median"], ref["render_median"]), attempt
        assert torch.equal(ours["median_ids"], ref["median_ids"]), attempt


@pytest.mark.parametrize("channels", [32, 64, 128, 256])
def test_wide_channels_chunked(channels):
    """Feature maps in the chunk kernel (its registers bounded above 4 channels): a heavy tile chunked 8 ways,
    colours and alphas >= 76 dB, median depth and median_ids exact."""
    frame = case_frame(("heavy-wide", 3000, 1, 200, 120, 16, channels, 20000))
    ref = gsplat_forward(frame)
    for _ in range(2):  # the second frame with the first one's stop depths
        ours, plan = ours_forward(frame, LPTConfig(mode="fixed", heavy_ratio=0.05, chunk_count=8))
        assert plan.report()["chunked_tiles"] > 0
        assert psnr(ours["render_colors"][..., :-1], ref["render_colors"][..., :-1]) >= 76.0
        assert psnr(ours["render_alphas"], ref["render_alphas"]) >= 76.0
        assert torch.equal(ours["render_median"], ref["render_median"])
        assert torch.equal(ours["median_ids"], ref["median_ids"])


@pytest.mark.parametrize("case, pixels", [(CASES[6], 1), (CASES[6], 2), (CASES[-2], 1)],
                         ids=["heavy-tile-one-pixel", "heavy-tile-two-pixels", "channels-128-slices"])
@pytest.mark.parametrize("mode", ["lpt", "fixed"])
def test_kernels_without_ids_render_the_same_floats(case, pixels, mode, monkeypatch):
    """A call that needs neither last_ids nor median_ids runs the persistent kernels' builds that keep neither (kept
    on this GPU: as many CTAs resident), unchunked and beside the chunk kernel, whose composite leaves both null
    pointers alone, with one pixel per thread or two, and slice by slice for a wide map: every float output (median
    depth included) is the one the builds with the ids render, which in mode "lpt" is gsplat's. The public function
    without gradients (inference) runs those builds too."""
    from gsplat_lpt.runtime import rasterizer_for

    C, channels, tile_size = case[2], case[6], case[5]
    frame = case_frame(case)
    generator = torch.Generator(device="cuda").manual_seed(7)
    backgrounds = torch.rand(C, channels, device="cuda", generator=generator)
    config = LPTConfig(mode=mode, pixels_per_thread=pixels, heavy_ratio=0.05, chunk_count=8,
                       saturation_feedback=False)
    if channels > constants.CHANNEL_SLICE:  # the colour slices, then the last one (depth): a Rasterizer each
        widths = [width for _, width in frontend.channel_slices(channels, constants.CHANNEL_SLICE)]
        builds = [(surfel2d.COLOR_SLICE_VARIANT, w) for w in widths[:-1]] + [(surfel2d.LAST_SLICE_VARIANT, widths[-1])]
    else:
        builds = [(surfel2d.VARIANT, channels)]
    rasterizers = {(v.name, w): rasterizer_for(v, w, tile_size, frame["means2d"].device) for v, w in builds}
    launched = record_persistent_launches(rasterizers.values(), monkeypatch)  # (one frame run per slice)
    with_ids, plan = ours_forward(frame, config, backgrounds)
    plan.snapshot()  # (its report, read after later frames)
    two = plan.report()["pixels_per_thread"] == 2  # (forced where built: channels <= 8)
    assert two == (pixels == 2 and channels <= surfel2d.TWO_PIXEL_MAX_CHANNELS_2DGS)
    assert launched == [(two, True, "last_ids")] * len(builds)
    without, lean_plan = ours_forward(frame, config, backgrounds, with_last_ids=False)
    lean_plan.snapshot()
    assert without["last_ids"] is None and without["median_ids"] is None
    assert launched[len(builds):] == [(two, False, "no last_ids")] * len(builds)
    for key in FLOAT_OUTPUTS:
        assert torch.equal(without[key], with_ids[key]), key
    for report in (plan.report(), lean_plan.report()):
        assert (report["chunked_tiles"] > 0) == (mode == "fixed")
    public = surfel2d.rasterize_to_pixels_2dgs(**_public_args(frame), backgrounds=backgrounds, config=config)
    assert launched[2 * len(builds):] == [(two, False, "no last_ids")] * len(builds)
    for key, output in zip(FLOAT_OUTPUTS, public):
        assert torch.equal(output, with_ids[key]), key
    if mode == "lpt":
        ref = gsplat_forward(frame, backgrounds)
        assert_matches(with_ids, ref, label="with ids")
        assert_matches(without, ref, exact_ids=False, label="without ids")


def test_rewalk_finds_medians_past_chunk_zero():
    """Many short chunks over a faint stack (2000 Gaussians of opacity 0.08 on one spot: around it T crosses 0.5
    after tens to hundreds of them, past chunk 0 of 64): medians past chunk 0 are still gsplat's."""
    frame = project_2dgs(*random_gaussians(3000, seed=3, cluster=2000), *cameras(1, 200, 120), 200, 120)
    ref = gsplat_forward(frame)
    config = LPTConfig(mode="fixed", heavy_ratio=0.5, chunk_count=64)
    ours, plan = ours_forward(frame, config)
    report = plan.report()
    assert report["chunked_tiles"] > 0 and report["chunk_count"] == 64
    assert torch.equal(ours["render_median"], ref["render_median"])
    assert torch.equal(ours["median_ids"], ref["median_ids"])
    # the heaviest tile's list is long: a median id far past its start means the crossing was past chunk 0
    offsets = frame["isect_offsets"].reshape(-1)
    lengths = torch.diff(offsets, append=torch.tensor([frame["flatten_ids"].numel()], device="cuda"))
    heaviest = int(torch.argmax(lengths))
    start, length = int(offsets[heaviest]), int(lengths[heaviest])
    tile_width = frame["isect_offsets"].shape[-1]
    ty, tx = divmod(heaviest, tile_width)
    ids = ref["median_ids"][0, ty * 16:(ty + 1) * 16, tx * 16:(tx + 1) * 16]
    assert int((ids - start).max()) > length / 64


def test_a_prediction_that_falls_short_keeps_medians_exact():
    """Every item predicted one Gaussian deep (planted as the previous frame's depth): the chunks cover almost
    nothing and the compositing CTA walks the rest from the composed T, then re-walks for the medians. Colours,
    alphas, normals and distortion stay within the chunked floors, medians and median_ids exact."""
    frame = project_2dgs(*random_gaussians(3000, seed=3, cluster=2000), *cameras(1, 200, 120), 200, 120)
    ref = gsplat_forward(frame)
    depth_peak = float(ref["render_colors"][..., -1].abs().max())
    config = LPTConfig(mode="fixed", heavy_ratio=0.2, chunk_count=8)
    _, plan = ours_forward(frame, config)  # the frame's history: the next call reads the planted depths
    items = frame["isect_offsets"].numel()
    plan.workspace.item_depth[:items] = 1
    ours, plan = ours_forward(frame, config)
    report = plan.report()
    assert report["saturation_feedback"] and report["chunked_tiles"] > 0
    assert psnr(ours["render_colors"][..., :-1], ref["render_colors"][..., :-1]) >= 76.0
    assert psnr(ours["render_colors"][..., -1] / depth_peak, ref["render_colors"][..., -1] / depth_peak) >= 76.0
    assert psnr(ours["render_alphas"], ref["render_alphas"]) >= 76.0
    assert psnr(ours["render_normals"], ref["render_normals"]) >= 76.0
    assert psnr(ours["render_distort"] / depth_peak, ref["render_distort"] / depth_peak) >= 76.0
    assert torch.equal(ours["render_median"], ref["render_median"])
    assert torch.equal(ours["median_ids"], ref["median_ids"])
    # the walk beyond fed back real depths: no chunked item is predicted one Gaussian deep any more
    chunked = plan.workspace.lpt_order[: report["chunked_tiles"]]
    assert int(plan.workspace.item_depth[chunked].min()) > 2


def test_culling_is_exact():
    """Per-warp culling changes no bit of any output (real geometry, tile sizes 8 and 16); both stay within
    the lpt contract's 1e-6 of gsplat's kernel."""
    for tile_size in (8, 16):
        frame = project_2dgs(*random_gaussians(6000, seed=tile_size, cluster=2000), *cameras(2, 150, 100), 150, 100,
                             tile_size=tile_size)
        ref = gsplat_forward(frame)
        culled, _ = ours_forward(frame, LPTConfig(mode="lpt", cull=True))
        unculled, _ = ours_forward(frame, LPTConfig(mode="lpt", cull=False))
        for key in OUTPUT_NAMES:
            assert torch.equal(culled[key], unculled[key]), (tile_size, key)
            if culled[key].dtype.is_floating_point:
                scale = max(1.0, float(ref[key].abs().max()))
                assert float((culled[key] - ref[key]).abs().max()) <= 1e-6 * scale, (tile_size, key)
            else:
                assert torch.equal(culled[key], ref[key]), (tile_size, key)


def test_masks_render_background_on_masked_tiles():
    C, W, H = 2, 150, 90
    frame = project_2dgs(*random_gaussians(3000, seed=11), *cameras(C, W, H), W, H)
    masks = torch.rand(frame["isect_offsets"].shape, device="cuda") > 0.3
    backgrounds = torch.rand(C, 4, device="cuda")
    ref = gsplat_forward(frame, backgrounds, masks)
    pixel_mask = masks.repeat_interleave(16, -2).repeat_interleave(16, -1)[:, :H, :W]
    for config in (LPTConfig(mode="lpt"), LPTConfig(mode="chunk", chunk_count=4)):
        ours, _ = ours_forward(frame, config, backgrounds, masks)
        # gsplat writes only the colours (the background) on masked tiles and leaves the rest unset
        assert psnr(ours["render_colors"][..., :3], ref["render_colors"][..., :3]) >= 76.0
        assert torch.equal(ours["render_colors"][~pixel_mask], ref["render_colors"][~pixel_mask])
        if config.mode == "lpt":
            assert_matches(ours, ref, where=pixel_mask, label="masked")


def test_zero_intersections():
    means, quats, scales, opacities = random_gaussians(500, seed=5)
    means[:, 2] = -5.0  # everything behind the camera
    frame = project_2dgs(means, quats, scales, opacities, *cameras(2, 64, 48), 64, 48)
    assert frame["flatten_ids"].numel() == 0
    backgrounds = torch.rand(2, 4, device="cuda")
    args = {k: v for k, v in frame.items() if k != "packed"}
    for mode in ("lpt", "auto", "chunk"):
        colors, alphas, normals, distort, median = surfel2d.rasterize_to_pixels_2dgs(
            **args, backgrounds=backgrounds, config=LPTConfig(mode=mode))
        assert torch.allclose(colors, backgrounds[:, None, None, :].expand_as(colors))
        for t in (alphas, normals, distort, median):
            assert torch.all(t == 0)


def _public_args(frame):
    return {k: v for k, v in frame.items() if k != "packed"} | {"packed": frame["packed"]}


@pytest.mark.parametrize("packed", [False, True])
def test_public_function_matches_gsplats(packed):
    """gsplat's rasterize_to_pixels_2dgs signature (keywords as rasterization_2dgs passes them): equal outputs."""
    W, H, C = 96, 64, 2
    frame = project_2dgs(*random_gaussians(2000, seed=9), *cameras(C, W, H), W, H, packed=packed)
    kwargs = _public_args(frame)
    if not packed:
        kwargs["backgrounds"] = torch.rand(C, 4, device="cuda")
    ref = original("rasterize_to_pixels_2dgs")(**kwargs, distloss=True)
    ours = surfel2d.rasterize_to_pixels_2dgs(**kwargs, distloss=True, config=LPTConfig(mode="lpt"))
    assert len(ours) == len(ref) == 5
    for a, b in zip(ours, ref):
        assert a.shape == b.shape
        assert (a - b).abs().max().item() <= 1e-6 * max(1.0, float(b.abs().max()))


def test_batch_dims_through_public_function():
    """[B, C, N] inputs: batch dims flow through like gsplat's."""
    W, H = 96, 64
    frame = project_2dgs(*random_gaussians(2000, seed=9), *cameras(4, W, H), W, H)
    batched = {k: (v.reshape(2, 2, *v.shape[1:]) if k in ("means2d", "ray_transforms", "colors", "opacities", "normals",
                                                          "densify", "isect_offsets") else v)
               for k, v in _public_args(frame).items()}
    backgrounds = torch.rand(2, 2, 4, device="cuda")
    ref = original("rasterize_to_pixels_2dgs")(**batched, backgrounds=backgrounds)
    *ours, stats = surfel2d.rasterize_to_pixels_2dgs(**batched, backgrounds=backgrounds, config=LPTConfig(mode="lpt"),
                                                     return_stats=True)
    assert ours[0].shape == ref[0].shape == (2, 2, H, W, 4)
    for a, b in zip(ours, ref):
        assert (a - b).abs().max().item() <= 1e-6 * max(1.0, float(b.abs().max()))
    assert stats["mode"] == "lpt" and stats["variant"] == "2dgs" and stats["concurrent_ctas"] > 0


@pytest.mark.parametrize("channels", [5, 6, 9])
def test_padded_channel_counts(channels):
    """gsplat pads 2DGS colours to a power of two with the depth channel kept last (backgrounds padded at the
    end): same outputs, same shapes."""
    W, H = 80, 48
    frame = project_2dgs(*random_gaussians(1500, seed=13), *cameras(1, W, H), W, H, channels=channels)
    kwargs = _public_args(frame)
    backgrounds = torch.rand(1, channels, device="cuda")
    ref = original("rasterize_to_pixels_2dgs")(**kwargs, backgrounds=backgrounds)
    ours = surfel2d.rasterize_to_pixels_2dgs(**kwargs, backgrounds=backgrounds, config=LPTConfig(mode="lpt"))
    assert ours[0].shape[-1] == channels
    for a, b in zip(ours, ref):
        assert (a - b).abs().max().item() <= 1e-6 * max(1.0, float(b.abs().max()))


@pytest.mark.parametrize("mode", ["lpt", "auto", "chunk"])
@pytest.mark.parametrize("absgrad", [False, True])
@pytest.mark.parametrize("packed", [False, True])
def test_gradients_equal_gsplat(mode, absgrad, packed):
    W, H, C = 120, 80, 2
    base = project_2dgs(*random_gaussians(2500, seed=17, cluster=3000), *cameras(C, W, H), W, H, packed=packed)
    # the ids gsplat's backward walks by are the contract's: equal to gsplat's on this frame
    ref, (ours, _) = gsplat_forward(base), ours_forward(base, LPTConfig(mode="lpt"))
    assert_matches(ours, ref, label="gradient frame")
    grads = []
    names = ("means2d", "ray_transforms", "colors", "opacities", "normals", "densify")
    for backend in ("cuda", "lpt", "cuda"):  # gsplat twice: its backward sums with atomics (run-to-run noise)
        leaves = {k: base[k].detach().clone().requires_grad_(True) for k in names}
        frame = {**_public_args(base), **leaves}
        extra = {}
        if not packed:
            extra["backgrounds"] = torch.full((C, 4), 0.25, device="cuda", requires_grad=True)
        if backend == "cuda":
            outputs = original("rasterize_to_pixels_2dgs")(**frame, **extra, absgrad=absgrad, distloss=True)
        else:
            *outputs, stats = surfel2d.rasterize_to_pixels_2dgs(**frame, **extra, absgrad=absgrad, distloss=True,
                                                                config=LPTConfig(mode=mode), return_stats=True)
            assert stats["chunked_tiles"] == 0
            if mode != "lpt":
                assert "autograd" in stats["chunking_disabled_reason"]
        colors, alphas, normals, distort, median = outputs
        weights = torch.linspace(0.1, 1.0, colors.numel(), device="cuda").reshape(colors.shape)
        # smooth in every output: |normals| would turn a 1e-9 rounding difference of a near-zero normal into a
        # gradient of the other sign
        normal_weights = torch.linspace(-1.0, 1.0, normals.numel(), device="cuda").reshape(normals.shape)
        loss = (colors * weights).sum() + (alphas ** 2).sum() + (normals * normal_weights).sum() \
            + 0.1 * distort.sum() + 0.01 * median.sum()
        loss.backward()
        grads.append({**{k: v.grad for k, v in leaves.items()},
                      **({"backgrounds": extra["backgrounds"].grad} if extra else {}),
                      **({"absgrad": leaves["means2d"].absgrad} if absgrad else {})})
    for key in grads[0]:
        if grads[0][key] is None and grads[1][key] is None:
            continue
        if key == "densify":
            # gsplat's backward stores v_densify = v_ray_transforms[2 or 5] * depth as read while other threads
            # still atomically add to v_ray_transforms (RasterizeToPixels2DGSBwd.cu): a race in gsplat itself,
            # whose outcome changes with the scheduling of the launch, so there is no value to match bit for bit.
            # Ours goes through the same op (its inputs, ray_transforms' gradients included, are checked here).
            assert grads[1][key].shape == grads[0][key].shape and torch.isfinite(grads[1][key]).all()
            continue

        def error(a, b):  # largest difference relative to the gradient's scale
            return float((a - b).abs().max()) / max(float(grads[0][key].abs().max()), 1e-30)

        # the forward is within 1e-6 of gsplat's, not bitwise, and gsplat's backward accumulates with atomics:
        # ours may differ from gsplat's by float rounding, or by as much as gsplat differs from itself
        ours, own = error(grads[0][key], grads[1][key]), error(grads[0][key], grads[2][key])
        assert ours <= max(1e-5, 2 * own), (key, ours, own)
    assert float(grads[1]["densify"].abs().sum()) > 0  # densify's gradient (gsplat's densification signal) flows


def test_rasterization_2dgs_end_to_end():
    """gsplat.rasterization_2dgs(..., backend="lpt"): every returned tensor equals backend="cuda"; under no_grad the
    auto policy may chunk (2DGS outputs compose), with median depth still exact. (gsplat 1.5.3's rasterization_2dgs
    does not index per-Gaussian colours by gaussian_ids with packed=True, so packed frames are tested through
    rasterize_to_pixels_2dgs above.)"""
    import gsplat

    W, H, C = 160, 120, 2
    means, quats, scales, opacities = random_gaussians(4000, seed=23, cluster=6000)
    # gsplat 1.5.3's rasterization_2dgs appends depths per camera: RGB+ED needs colours per camera [C, N, 3]
    colors = torch.rand(C, means.shape[0], 3, device="cuda")
    viewmats, Ks = cameras(C, W, H)
    kwargs = dict(render_mode="RGB+ED", distloss=True, depth_mode="median", backgrounds=torch.rand(C, 3, device="cuda"))
    ref = gsplat.rasterization_2dgs(means, quats, scales, opacities, colors, viewmats, Ks, W, H, backend="cuda",
                                    **kwargs)
    ours = gsplat.rasterization_2dgs(means, quats, scales, opacities, colors, viewmats, Ks, W, H, backend="lpt",
                                     lpt_config=LPTConfig(mode="lpt"), **kwargs)
    meta = ours[-1]
    assert meta["lpt"]["mode"] == "lpt" and meta["lpt"]["variant"] == "2dgs" and "fallback" not in meta["lpt"]
    for a, b in zip(ours[:-1], ref[:-1]):  # colours (ED), alphas, normals, normals from depth, distortion, median
        assert (a - b).abs().max().item() <= 1e-5 * max(1.0, float(b.abs().max()))  # ED divides by alpha
    with torch.no_grad():
        eager = LPTConfig(mode="auto", overhead_lambda=0.0, imbalance_beta=1.0, min_gain=0.0,
                          heavy_item_pace=1.0, chunked_cost_floor=0.0)
        for _ in range(3):
            chunked = gsplat.rasterization_2dgs(means, quats, scales, opacities, colors, viewmats, Ks, W, H,
                                                backend="lpt", lpt_config=eager, **kwargs)
    assert chunked[-1]["lpt"]["chunking_disabled_reason"] is None
    assert chunked[-1]["lpt"]["chunked_tiles"] > 0
    assert psnr(chunked[0][..., :3], ref[0][..., :3]) >= 76.0
    assert torch.equal(chunked[5], ref[5])  # median depth


def test_training_steps_give_gsplats_losses():
    """A few Adam steps of a 2DGS fit (gsplat's losses: L1, its distortion loss, the normal consistency of
    gsplat's 2DGS trainer) from the same start: every loss equals backend="cuda", and so do the parameters. gsplat's
    backward sums with float atomics (its last bits vary from run to run, with either backend), and Adam turns a
    gradient near zero into a step of lr whatever its size, so a rare coordinate may differ by a few lr."""
    import gsplat

    W, H, C = 96, 64, 2
    viewmats, Ks = cameras(C, W, H)
    g = torch.Generator(device="cpu").manual_seed(5)
    target = torch.rand(C, H, W, 3, generator=g).cuda()
    start = random_gaussians(1500, seed=31, cluster=1000)
    start.append(torch.rand(start[0].shape[0], 3, generator=g).cuda())
    histories, finals = [], []
    for backend in ("cuda", "lpt"):
        params = [torch.nn.Parameter(t.clone()) for t in start]  # means, quats, scales, opacities, colors
        optimizer = torch.optim.Adam(params, lr=1e-3)
        losses = []
        for step in range(5):
            means, quats, scales, opacities, colors = params
            colors = colors[None].expand(C, -1, -1)  # RGB+ED: colours per camera (see the end-to-end test)
            render, alphas, normals, normals_from_depth, distort, median, meta = gsplat.rasterization_2dgs(
                means, quats, scales, torch.sigmoid(opacities), colors, viewmats, Ks, W, H, render_mode="RGB+ED",
                distloss=True, backend=backend)
            loss = (render[..., :3] - target).abs().mean() + 0.01 * distort.mean()
            loss = loss + 0.05 * (1 - (normals * normals_from_depth).sum(-1)).mean()
            optimizer.zero_grad()
            loss.backward()
            assert meta["gradient_2dgs"].grad is not None
            optimizer.step()
            losses.append(float(loss))
        histories.append(losses)
        finals.append([p.detach() for p in params])
    assert histories[0] == pytest.approx(histories[1], rel=1e-4)
    for a, b in zip(*finals):
        close = torch.isclose(a, b, rtol=1e-4, atol=1e-6)
        assert float(close.float().mean()) >= 0.999
        assert float((a - b).abs().max()) <= 1e-2  # 5 steps of lr 1e-3, each at most 2 lr apart


def test_reference_matches_gsplat_kernel_on_gpu():
    """Closes the oracle loop: our torch reference (gsplat_lpt.reference_2dgs) against gsplat's CUDA kernel, so
    the CPU tests against the reference test the same semantics."""
    from gsplat_lpt.reference_2dgs import blend_frame_2dgs

    W, H = 64, 48
    frame = project_2dgs(*random_gaussians(800, seed=21, cluster=500), *cameras(1, W, H), W, H)
    backgrounds = torch.rand(1, 4, device="cuda")
    ref = gsplat_forward(frame, backgrounds)
    args = {k: frame[k] for k in ("means2d", "ray_transforms", "colors", "opacities", "normals", "image_width",
                                  "image_height", "tile_size", "isect_offsets", "flatten_ids")}
    ours = blend_frame_2dgs(**args, backgrounds=backgrounds)
    same = ours["median_ids"] == ref["median_ids"]
    assert float(same.float().mean()) > 0.999  # ids differ only where an alpha sits on 1/255 to rounding
    for key in ("render_colors", "render_alphas", "render_normals", "render_distort"):
        scale = max(1.0, float(ref[key].abs().max()))
        assert (ours[key] - ref[key]).abs().max().item() <= 1e-4 * scale, key
    assert torch.equal(ours["render_median"][same], ref["render_median"][same])
