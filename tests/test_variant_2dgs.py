"""The 2DGS variant on the CPU: its record and host twins, validation at the boundary, gsplat's channel padding,
the torch reference of the per-pixel math against gsplat's own torch implementation (_torch_impl_2dgs), the
composition of distortion and median depth across depth chunks, the conservative cull bound, and the hook
routing rasterize_to_pixels_2dgs to the variant."""

from __future__ import annotations

import math
import re
import sys
import types
import warnings

import pytest
import torch

import gsplat_lpt
from gsplat_lpt import frontend, runtime
from gsplat_lpt.errors import LPTInputError
from gsplat_lpt.reference import ALPHA_THRESHOLD, chunk_bounds
from gsplat_lpt.reference_2dgs import (
    alphas_2dgs,
    blend_frame_2dgs,
    blend_list_2dgs,
    compose_chunks_2dgs,
    may_contribute_2dgs,
    rewalk_median_2dgs,
)
from gsplat_lpt.variants import VARIANTS
from gsplat_lpt.variants import surfel2d

FUNCTION = "rasterize_to_pixels_2dgs"


# ---------------------------------------------------------------------------------------------- frames
def surfel_frame(seed, n=250, width=64, height=48, cameras=1, tile_size=16, opacity=(0.1, 0.95), dtype=torch.float32):
    """Random surfels seen by pinhole cameras, projected and tiled by gsplat's own torch implementation;
    colours are RGB plus depth last (rasterization_2dgs's "RGB+D")."""
    from gsplat.cuda._torch_impl import _isect_offset_encode, _isect_tiles
    from gsplat.cuda._torch_impl_2dgs import _fully_fused_projection_2dgs

    g = torch.Generator().manual_seed(seed)
    means = torch.randn(n, 3, generator=g) * torch.tensor([1.2, 0.9, 0.6]) + torch.tensor([0.0, 0.0, 4.0])
    quats = torch.nn.functional.normalize(torch.randn(n, 4, generator=g), dim=-1)
    scales = torch.rand(n, 3, generator=g) * 0.35 + 0.05
    opacities = torch.rand(n, generator=g) * (opacity[1] - opacity[0]) + opacity[0]
    viewmats = torch.eye(4).repeat(cameras, 1, 1)
    viewmats[:, 0, 3] = torch.linspace(-0.3, 0.3, cameras)
    focal = 0.9 * width
    Ks = torch.tensor([[focal, 0.0, width / 2], [0.0, focal, height / 2], [0.0, 0.0, 1.0]]).repeat(cameras, 1, 1)
    radii, means2d, depths, ray_transforms, normals = _fully_fused_projection_2dgs(
        means, quats, scales, viewmats, Ks, width, height)
    tile_width, tile_height = math.ceil(width / tile_size), math.ceil(height / tile_size)
    _, isect_ids, flatten_ids = _isect_tiles(means2d, radii, depths, tile_size, tile_width, tile_height)
    isect_offsets = _isect_offset_encode(isect_ids, cameras, tile_width, tile_height)
    colors = torch.cat([torch.rand(cameras, n, 3, generator=g), depths[..., None]], -1)
    return dict(means2d=means2d.to(dtype), ray_transforms=ray_transforms.to(dtype), colors=colors.to(dtype),
                opacities=opacities[None].expand(cameras, n).contiguous().to(dtype), normals=normals.to(dtype),
                image_width=width, image_height=height, tile_size=tile_size,
                isect_offsets=isect_offsets.to(torch.int32), flatten_ids=flatten_ids.to(torch.int32))


def nerfacc_shim(seen: list) -> types.ModuleType:
    """The two nerfacc functions gsplat's accumulate_2dgs calls, in plain torch (samples sorted by ray, front
    to back); records the alphas gsplat computed."""
    module = types.ModuleType("nerfacc")

    def render_weight_from_alpha(alphas, packed_info=None, ray_indices=None, n_rays=None, prefix_trans=None):
        seen.append(alphas.detach().clone())
        log_keep = torch.log1p(-alphas.double())
        inclusive = torch.cumsum(log_keep, 0)
        first = torch.ones_like(ray_indices, dtype=torch.bool)
        first[1:] = ray_indices[1:] != ray_indices[:-1]
        start = torch.cummax(torch.where(first, torch.arange(len(alphas)), torch.zeros_like(ray_indices)), 0).values
        before = torch.where(start > 0, inclusive[(start - 1).clamp_min(0)], torch.zeros_like(inclusive))
        trans = torch.exp(inclusive - log_keep - before).to(alphas.dtype)
        return alphas * trans, trans

    def accumulate_along_rays(weights, values=None, ray_indices=None, n_rays=None):
        src = weights[:, None] if values is None else weights[:, None] * values
        return torch.zeros(n_rays, src.shape[-1], dtype=src.dtype).index_add_(0, ray_indices, src)

    module.render_weight_from_alpha = render_weight_from_alpha
    module.accumulate_along_rays = accumulate_along_rays
    return module


# ---------------------------------------------------------------------------------------------- record
def test_record_is_registered_and_complete():
    variant = VARIANTS[FUNCTION]
    assert variant is surfel2d.VARIANT
    assert variant.name == "2dgs" and variant.kernel_source == "blend_2dgs.cu" and variant.traits == "Surfel2DGS"
    assert variant.staged_bytes == 64 and variant.staged_bytes % 16 == 0
    assert variant.partial_floats(3) == 10 and variant.partial_floats(4) == 11
    names = {o.name for o in variant.outputs}
    assert names == {"render_colors", "render_alphas", "render_normals", "render_distort", "render_median",
                     "last_ids", "median_ids"}
    assert variant.chunks_compose  # median and distortion compose exactly: 2DGS inference frames may chunk
    assert {o.name for o in variant.outputs if o.backward_only} == {"last_ids", "median_ids"}
    # inference calls (neither index) run the persistent kernels' builds that keep none, the channel slices' too
    assert variant.no_last_ids_kernel
    assert surfel2d.COLOR_SLICE_VARIANT.no_last_ids_kernel and surfel2d.LAST_SLICE_VARIANT.no_last_ids_kernel
    assert (runtime.kernel_dir() / variant.kernel_source).is_file()


def _cpp_fields(struct: str):
    source = (runtime.kernel_dir() / "blend_2dgs.cu").read_text()
    body = re.search(r"struct " + struct + r" \{(.*?)\};", source, re.S).group(1)
    return re.findall(r"^\s*(?:const\s+)?[\w:]+\s*\*?\s*(\w+);", body, re.M)


@pytest.mark.parametrize("struct, twin", [("Params", surfel2d.Params2DGS), ("Outputs", surfel2d.Outputs2DGS)])
def test_host_twins_list_the_kernel_fields_in_order(struct, twin):
    assert _cpp_fields(struct) == [name for name, _ in twin._fields_]


@pytest.mark.parametrize("name", ["rasterize_to_pixels", "rasterize_to_pixels_2dgs"])
def test_compiled_like_gsplat(monkeypatch, name):
    from gsplat_lpt.variants import VARIANTS

    monkeypatch.delenv("NO_FAST_MATH", raising=False)
    assert VARIANTS[name].compile_options() == ("--use_fast_math",)
    monkeypatch.setenv("NO_FAST_MATH", "1")
    assert VARIANTS[name].compile_options() == ()


# ---------------------------------------------------------------------------------------------- padding
def test_padding_keeps_depth_last_as_gsplat_does():
    colors = torch.arange(2 * 5, dtype=torch.float32).reshape(2, 5)
    backgrounds = torch.tensor([[1.0, 2.0, 3.0, 4.0, 5.0]])
    padded, bg, padding = surfel2d.pad_channels(colors, backgrounds)
    assert padding == 3 and padded.shape == (2, 8) and bg.shape == (1, 8)
    assert torch.equal(padded[:, :4], colors[:, :4]) and torch.equal(padded[:, -1], colors[:, -1])
    assert torch.equal(bg[0, :5], backgrounds[0]) and not bg[0, 5:].any()  # gsplat appends to backgrounds
    assert torch.equal(surfel2d.unpad_colors(padded, padding), colors)
    for channels in surfel2d.CHANNELS_2DGS:
        assert surfel2d.pad_channels(torch.zeros(1, channels), None)[2] == 0
    # gsplat pads 5, 9, 17 too (its 2DGS wrapper lists only powers of two)
    assert surfel2d.pad_channels(torch.zeros(1, 9), None)[2] == 7


# ---------------------------------------------------------------------------------------------- validation
def _args(n=4, images=(1,), channels=3, packed=False):
    if packed:
        rows = (n,)
    else:
        rows = tuple(images) + (n,)
    return dict(means2d=torch.zeros(rows + (2,)), ray_transforms=torch.zeros(rows + (3, 3)),
                colors=torch.zeros(rows + (channels,)), opacities=torch.zeros(rows), normals=torch.zeros(rows + (3,)),
                densify=torch.zeros(rows + (2,)), image_width=16, image_height=16, tile_size=16,
                isect_offsets=torch.zeros(tuple(images) + (1, 1), dtype=torch.int32),
                flatten_ids=torch.zeros(0, dtype=torch.int32))


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("name, bad, message", [
    ("ray_transforms", lambda r: torch.zeros(r + (9,)), r"ray_transforms has shape .*3, 3"),
    ("normals", lambda r: torch.zeros(r + (2,)), r"normals has shape"),
    ("densify", lambda r: torch.zeros(r + (3,)), r"densify has shape"),
    ("opacities", lambda r: torch.zeros(r + (1,)), r"opacities has shape"),
    ("colors", lambda r: torch.zeros(r + (3,), dtype=torch.float64), r"colors must have dtype torch.float32"),
    ("normals", lambda r: "normals", r"normals must be a torch.Tensor"),
    ("colors", lambda r: torch.zeros(r + (513,)), r"colors has 513 channels; gsplat's 2DGS rasterizer supports 1 to 512"),
])
def test_validation_names_the_argument(name, bad, message, packed):
    args = _args(packed=packed)
    rows = tuple(args["opacities"].shape)
    args[name] = bad(rows)
    with pytest.raises(LPTInputError, match=message):
        surfel2d.rasterize_to_pixels_2dgs(**args, packed=packed)


def _fast_path_cases():
    """Good calls and changes the usual call's few checks (surfel2d._usual_call) must refuse: every change of
    test_validation_names_the_argument, packed or not, and shapes, image dims, backgrounds and masks."""
    cases = []
    for packed in (False, True):
        base = _args(packed=packed, images=(2,))
        rows = tuple(base["opacities"].shape)
        marks = test_validation_names_the_argument.pytestmark
        for name, bad, _ in next(mark.args[1] for mark in marks if mark.args[0] == "name, bad, message"):
            cases.append(dict(base, **{name: bad(rows)}, packed=packed))
        cases += [dict(base, packed=packed), dict(base, packed=packed, backgrounds=torch.zeros(2, 3)),
                  dict(base, packed=packed, masks=torch.ones(2, 1, 1, dtype=torch.bool)),
                  dict(base, packed=packed, colors=torch.zeros(rows + (5,))),
                  dict(base, packed=packed, backgrounds=torch.zeros(1, 3)),
                  dict(base, packed=packed, backgrounds=torch.zeros(2, 4)),
                  dict(base, packed=packed, masks=torch.ones(1, 1, 1, dtype=torch.bool)),
                  dict(base, packed=packed, masks=torch.ones(2, 1, 1)),
                  dict(base, packed=packed, densify="densify"),
                  dict(base, packed=packed, isect_offsets=torch.zeros(3, 1, 1, dtype=torch.int32)),
                  dict(base, packed=packed, isect_offsets=torch.zeros(1, 1, dtype=torch.int32)),
                  dict(base, packed=packed, flatten_ids=torch.zeros(1, 1, dtype=torch.int32)),
                  dict(base, packed=packed, image_width=17), dict(base, packed=packed, tile_size=16.0),
                  dict(base, packed=not packed), dict(base, packed=packed, ray_transforms=torch.zeros(rows + (3, 3))[:1])]
    return cases


@pytest.mark.parametrize("case", _fast_path_cases())
def test_fast_path_accepts_only_what_the_full_validation_accepts(case, monkeypatch):
    """Where the usual call's checks accept (CPU tensors, their device check lowered to take them), the full
    validation passes up to its device check and finds the same rows and channels; where it refuses, the full
    validation refuses too or only the device check stops it (a call the fast path leaves to it)."""
    monkeypatch.setattr(frontend, "FIRST_DEVICE_INDEX", -1)
    args = {"backgrounds": None, "masks": None, **case}
    keys = ("means2d", "ray_transforms", "colors", "opacities", "normals", "densify", "backgrounds", "masks",
            "image_width", "image_height", "tile_size", "isect_offsets", "flatten_ids", "packed")
    from helpers import assert_fast_path_agrees

    usual = surfel2d._usual_call(*[args[k] for k in keys])
    assert_fast_path_agrees(usual, surfel2d.Frame2DGS.__new__(surfel2d.Frame2DGS)._validate, [args[k] for k in keys])
    if usual is not None:
        rows, channels, _, offsets_shape = usual
        assert rows == args["means2d"].numel() // 2 and channels == args["colors"].shape[-1]
        assert offsets_shape == tuple(args["isect_offsets"].shape)


def test_validation_of_image_dims_backgrounds_and_device():
    args = _args(images=(2, 3))
    args["isect_offsets"] = torch.zeros(2, 1, 1, dtype=torch.int32)
    with pytest.raises(LPTInputError, match="isect_offsets has image dims"):
        surfel2d.rasterize_to_pixels_2dgs(**args)
    args = _args(images=(2,))
    args["isect_offsets"] = torch.zeros(2, 1, 1, dtype=torch.int32)
    with pytest.raises(LPTInputError, match="backgrounds has shape"):
        surfel2d.rasterize_to_pixels_2dgs(**args, backgrounds=torch.zeros(2, 4))
    with pytest.raises(LPTInputError, match="means2d is on cpu; the lpt backend renders CUDA tensors only"):
        surfel2d.rasterize_to_pixels_2dgs(**args, backgrounds=torch.zeros(2, 3))
    with pytest.raises(LPTInputError, match="packed means2d must be"):
        surfel2d.rasterize_to_pixels_2dgs(**_args(images=(2,)), packed=True)


def test_hook_routes_rasterize_to_pixels_2dgs_to_the_variant():
    import gsplat.rendering as rendering

    gsplat_lpt.install()
    args = _args()
    with gsplat_lpt.use_backend("lpt"), warnings.catch_warnings():
        warnings.simplefilter("error")  # the fallback's warning would fail here
        with pytest.raises(LPTInputError, match="CUDA tensors only"):
            rendering.rasterize_to_pixels_2dgs(*args.values())


@pytest.mark.parametrize("below, isects, handed_off", [(10, 9, True), (10, 10, False)])
def test_small_frames_go_to_gsplats_own_kernel(below, isects, handed_off, monkeypatch):
    """A 2DGS frame below LPTConfig.gsplat_kernel_below is gsplat's own rasterize_to_pixels_2dgs call with the
    caller's arguments. (CPU tensors, the device check and both kernels replaced.)"""
    from helpers import flatten_ids_said_on_cuda

    from gsplat_lpt import frontend

    monkeypatch.setattr(frontend, "require_one_cuda_device", lambda named: torch.device("cpu"))
    calls = []
    monkeypatch.setattr(frontend, "gsplat_kernel", lambda variant: lambda *args: calls.append(
        (variant.gsplat_function, args)) or tuple("cands"))
    monkeypatch.setattr(frontend, "render", lambda *args: calls.append("ours") or "plan")
    args = {**_args(), "flatten_ids": flatten_ids_said_on_cuda(isects), "backgrounds": None, "masks": None,
            "packed": False, "absgrad": False, "distloss": True}
    *outputs, plan = surfel2d.rasterize_with_plan(**args, config=gsplat_lpt.LPTConfig(mode="auto",
                                                                                     gsplat_kernel_below=below))
    if not handed_off:
        assert calls == ["ours"] and plan == "plan"
        return
    (name, passed), = calls
    assert name == "rasterize_to_pixels_2dgs" and outputs == list("cands")
    assert len(passed) == len(args) and all(a is b for a, b in zip(passed, args.values()))
    assert plan.report()["variant"] == "2dgs" and "gsplat kernel" in plan.report()["fallback"]


# ---------------------------------------------------------------------------------------------- reference vs gsplat
@pytest.mark.parametrize("seed", range(3))
def test_reference_matches_gsplat_torch_implementation(seed, monkeypatch):
    """Our per-pixel alpha equals gsplat's `accumulate_2dgs` alpha on every (pixel, Gaussian) pair of the tile
    lists (skipped pairs are below 1/255 there), and blending the pairs we keep with gsplat's accumulate_2dgs
    gives our colours, alphas and normals."""
    from gsplat.cuda._torch_impl_2dgs import accumulate_2dgs

    seen: list = []
    monkeypatch.setitem(sys.modules, "nerfacc", nerfacc_shim(seen))
    frame = surfel_frame(seed, dtype=torch.float64)  # float64: both sides round alike to far below 1e-9
    n = frame["means2d"].shape[-2]
    W, H, tile_size = frame["image_width"], frame["image_height"], frame["tile_size"]
    ours = blend_frame_2dgs(**frame)
    assert len(ours["pairs"]) > 2000

    # every pair of the tile lists: gsplat's alpha vs ours
    offsets = frame["isect_offsets"].reshape(-1).tolist() + [frame["flatten_ids"].numel()]
    tile_width = frame["isect_offsets"].shape[-1]
    pair_g, pair_p, ours_alpha = [], [], []
    for tile in range(len(offsets) - 1):
        ids = frame["flatten_ids"][offsets[tile]:offsets[tile + 1]].long()
        if ids.numel() == 0:
            continue
        ty, tx = divmod(tile, tile_width)
        local = torch.arange(tile_size * tile_size)
        rows, cols = ty * tile_size + local // tile_size, tx * tile_size + local % tile_size
        inside = (rows < H) & (cols < W)
        rows, cols = rows[inside], cols[inside]
        alpha = alphas_2dgs(frame["means2d"].reshape(-1, 2), frame["ray_transforms"].reshape(-1, 3, 3),
                            frame["opacities"].reshape(-1), ids, cols.double() + 0.5, rows.double() + 0.5)
        pair_g.append(ids.repeat(rows.numel()))
        pair_p.append((rows * W + cols).repeat_interleave(ids.numel()))
        ours_alpha.append(alpha.reshape(-1))
    gaussian_ids, pixel_ids, ours_alpha = torch.cat(pair_g), torch.cat(pair_p), torch.cat(ours_alpha)
    order = torch.argsort(pixel_ids, stable=True)
    gaussian_ids, pixel_ids, ours_alpha = gaussian_ids[order], pixel_ids[order], ours_alpha[order]
    accumulate_2dgs(frame["means2d"], frame["ray_transforms"], frame["opacities"], frame["colors"], frame["normals"],
                    gaussian_ids, pixel_ids, torch.zeros_like(pixel_ids), W, H)
    theirs = seen[-1]
    kept = ours_alpha > 0
    assert kept.any() and (~kept).any()
    assert torch.allclose(ours_alpha[kept], theirs[kept], rtol=1e-9, atol=0)
    skipped = theirs[~kept]
    assert bool(((skipped < ALPHA_THRESHOLD) | torch.isnan(skipped)).all())

    # blending what we blend, gsplat's way
    pairs = torch.tensor(ours["pairs"])
    image_ids, pixel_ids, rows = pairs[:, 0], pairs[:, 1], pairs[:, 2]
    colors, alphas, normals = accumulate_2dgs(frame["means2d"], frame["ray_transforms"], frame["opacities"],
                                              frame["colors"], frame["normals"], rows % n, pixel_ids, image_ids, W, H)
    assert torch.allclose(ours["render_colors"], colors, rtol=1e-9, atol=1e-9)
    assert torch.allclose(ours["render_alphas"], alphas, rtol=1e-9, atol=1e-9)
    assert torch.allclose(ours["render_normals"], normals, rtol=1e-9, atol=1e-9)


def test_reference_outputs_follow_gsplat_kernel_definitions():
    """Hand-checked list: distortion is 2 sum_i vis_i (d_i A_i - D_i) (nerfacc's loss), the median is the depth
    of the last Gaussian blended while T > 0.5, last and median ids are list positions."""
    alphas = torch.tensor([[0.3, 0.0, 0.4, 0.5, 0.2]], dtype=torch.float64)
    depths = torch.tensor([1.0, 9.0, 2.0, 3.0, 5.0], dtype=torch.float64)
    colors = torch.stack([depths * 0.5, depths], -1)
    out = blend_list_2dgs(alphas, colors, torch.zeros(5, 3, dtype=torch.float64), torch.arange(10, 15))
    T, A, D, distort = 1.0, 0.0, 0.0, 0.0
    median, median_id = 0.0, 0
    for m, alpha in enumerate(alphas[0].tolist()):
        if alpha == 0:
            continue
        vis = alpha * T
        distort += 2 * vis * (depths[m].item() * A - D)
        if T > 0.5:
            median, median_id = depths[m].item(), 10 + m
        A += vis
        D += vis * depths[m].item()
        T *= 1 - alpha
    assert out["distort"].item() == pytest.approx(distort, rel=1e-12)
    assert out["median"].item() == median == 2.0 and out["median_id"].item() == median_id == 12
    assert out["last_id"].item() == 14 and out["T"].item() == pytest.approx(T)


# ---------------------------------------------------------------------------------------------- chunk composition
@pytest.mark.parametrize("chunk_count", [2, 3, 8])
def test_distortion_composes_across_chunks(chunk_count):
    """P^2 distort' + 2 P ((1 - P) D' - D0 (1 - T')) summed over chunks is the sequential distortion (float64).
    Exact to rounding where no pixel saturates. With saturation, a chunk blended from T = 1 stops only once its
    own T reaches 1e-4, so it may blend past the sequential stop (the approximation every chunked output
    shares): the Gaussian the sequential loop excludes (T before it <= 1e-4 / (1 - alpha) <= 2.5e-4 at alpha
    <= 0.6) and what follows (below 1e-4): at most 3.5e-4 of weight, times the values' magnitude (colours and
    depths below 10, distortion terms below 20 per unit weight)."""
    g = torch.Generator().manual_seed(chunk_count)
    for scale, tolerance in ((0.08, 1e-10), (0.6, 3.5e-4)):
        alphas = torch.rand(64, 60, generator=g, dtype=torch.float64) * scale
        alphas[alphas < 1 / 255] = 0
        colors = torch.rand(60, 4, generator=g, dtype=torch.float64) * 10
        normals = torch.randn(60, 3, generator=g, dtype=torch.float64)
        positions = torch.arange(60)
        whole = blend_list_2dgs(alphas, colors, normals, positions)
        parts = [blend_list_2dgs(alphas[:, a:b], colors[a:b], normals[a:b], positions[a:b])
                 for a, b in chunk_bounds(0, 60, chunk_count)]
        acc = compose_chunks_2dgs(parts)
        for key, magnitude in (("color", 10), ("normal", 3), ("distort", 20), ("depth_sum", 10), ("T", 1)):
            assert torch.allclose(acc[key], whole[key], rtol=1e-10, atol=tolerance * magnitude), key
        if scale > 0.5:
            assert whole["done"].any()  # saturation exercised


@pytest.mark.parametrize("chunk_count", [2, 4, 8, 16])
def test_median_by_rewalk_is_bitwise_sequential(chunk_count):
    """float32: chunk 0's median is the sequential one; the re-walk from chunk 0's T finds the rest bit for bit,
    also when the crossing of T = 0.5 lies several chunks deep."""
    g = torch.Generator().manual_seed(100 + chunk_count)
    alphas = torch.rand(256, 120, generator=g) * 0.02
    alphas[alphas < 1 / 255] = 0
    alphas[:64] *= 40  # some pixels saturate early
    alphas = alphas.clamp_max(0.999)
    colors = torch.rand(120, 3, generator=g) * 20
    normals = torch.randn(120, 3, generator=g)
    positions = torch.arange(1000, 1120)
    whole = blend_list_2dgs(alphas, colors, normals, positions)
    bounds = list(chunk_bounds(0, 120, chunk_count))
    parts = [blend_list_2dgs(alphas[:, a:b], colors[a:b], normals[a:b], positions[a:b]) for a, b in bounds]
    acc = compose_chunks_2dgs(parts)
    walk = ~parts[0]["done"]
    start = bounds[1][0]
    median, median_id = rewalk_median_2dgs(alphas[:, start:], colors[start:], positions[start:], parts[0]["T"], walk,
                                           acc["median"], acc["median_id"])
    assert torch.equal(median, whole["median"]) and torch.equal(median_id, whole["median_id"])
    assert bool((whole["median_id"] >= 1000 + start).any())  # some medians lie past chunk 0
    deep = whole["median_id"] >= 1000 + bounds[min(2, chunk_count - 1)][0]
    if chunk_count >= 8:
        assert bool(deep.any())  # ... and past chunk 1


@pytest.mark.parametrize("chunk_count", [2, 4, 16])
def test_chunked_frame_equals_sequential_frame(chunk_count):
    """A whole frame with every tile chunked (saturation signalling, composite, re-walk) against the sequential
    frame: float64 colours, alphas, normals and distortion to rounding, median and median_ids exactly."""
    frame = surfel_frame(7, n=300, opacity=(0.05, 0.5), dtype=torch.float64)
    background = torch.tensor([[0.2, 0.5, 0.9, 0.0]], dtype=torch.float64)
    sequential = blend_frame_2dgs(**frame, backgrounds=background)
    items = frame["isect_offsets"].numel()
    chunked = blend_frame_2dgs(**frame, backgrounds=background, chunked={i: chunk_count for i in range(items)})
    for key in ("render_colors", "render_alphas", "render_normals", "render_distort"):
        assert torch.allclose(chunked[key], sequential[key], rtol=1e-9, atol=1e-9), key
    assert torch.equal(chunked["render_median"], sequential["render_median"])
    assert torch.equal(chunked["median_ids"], sequential["median_ids"])
    assert bool((chunked["last_ids"] == -1).all())
    assert float(sequential["render_distort"].abs().max()) > 1e-3  # distortion is exercised


# ---------------------------------------------------------------------------------------------- cull bound
BOXES = [(0.5, 15.5, 0.5, 1.5), (16.5, 31.5, 30.5, 31.5), (100.5, 107.5, 40.5, 43.5), (0.5, 31.5, 7.5, 7.5)]


def box_pixels(box, dtype=torch.float32):
    x0, x1, y0, y1 = box
    ys, xs = torch.meshgrid(torch.arange(y0, y1 + 0.25, 1.0), torch.arange(x0, x1 + 0.25, 1.0), indexing="ij")
    return xs.reshape(-1).to(dtype), ys.reshape(-1).to(dtype)


def random_surfels(box, count, seed):
    """Surfels placed around the box: random orientations (grazing ones included), sizes from a fraction of a
    pixel to far larger than the box, depths from the near plane on, opacities near 1/255 and near 1, and a
    share of arbitrary (not projective) ray transforms."""
    g = torch.Generator().manual_seed(seed)
    x0, x1, y0, y1 = box
    focal, cx, cy = 60.0, 64.0, 48.0
    K = torch.tensor([[focal, 0.0, cx], [0.0, focal, cy], [0.0, 0.0, 1.0]])
    target_x = x0 + (torch.rand(count, generator=g) * 1.6 - 0.3) * (x1 - x0 + 20) - 10
    target_y = y0 + (torch.rand(count, generator=g) * 1.6 - 0.3) * (y1 - y0 + 20) - 10
    depth = 10 ** (torch.rand(count, generator=g) * 2.5 - 1.5)
    centre = torch.stack([(target_x - cx) / focal * depth, (target_y - cy) / focal * depth, depth], -1)
    axes = torch.linalg.qr(torch.randn(count, 3, 3, generator=g)).Q
    grazing = torch.rand(count, generator=g) < 0.25
    view = torch.nn.functional.normalize(centre, dim=-1)
    normal = axes[:, :, 2]
    flattened = torch.nn.functional.normalize(normal - (normal * view).sum(-1, keepdim=True) * view * 0.9999, dim=-1)
    normal = torch.where(grazing[:, None], flattened, normal)
    t_u = torch.nn.functional.normalize(torch.linalg.cross(normal, torch.randn(count, 3, generator=g)), dim=-1)
    t_v = torch.linalg.cross(normal, t_u)
    size = 10 ** (torch.rand(count, 2, generator=g) * 3 - 2.5) * depth[:, None]
    T_cl = torch.stack([t_u * size[:, :1], t_v * size[:, 1:], centre], -1)  # columns: scaled axes, centre
    ray_transforms = torch.einsum("ij,njk->nki", K, T_cl)  # rows u_M, v_M, w_M as gsplat's projection gives
    arbitrary = torch.rand(count, generator=g) < 0.15
    ray_transforms = torch.where(arbitrary[:, None, None], torch.randn(count, 3, 3, generator=g) * 50, ray_transforms)
    means2d = torch.stack([target_x, target_y], -1)
    kind = torch.randint(0, 3, (count,), generator=g)
    opacities = torch.where(kind == 0, ALPHA_THRESHOLD * (1 + (torch.rand(count, generator=g) - 0.5) * 1e-4),
                            torch.where(kind == 1, 1 - torch.rand(count, generator=g) * 1e-3,
                                        torch.rand(count, generator=g)))
    return means2d.float(), ray_transforms.float(), opacities.float()


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("box", BOXES)
def test_cull_bound_drops_only_gaussians_that_never_reach_the_threshold(box, seed):
    means2d, ray_transforms, opacities = random_surfels(box, 3000, seed)
    kept = may_contribute_2dgs(means2d, ray_transforms, opacities, box)
    ids = torch.arange(means2d.shape[0])
    for dtype in (torch.float32, torch.float64):
        px, py = box_pixels(box, dtype)
        alpha = alphas_2dgs(means2d.to(dtype), ray_transforms.to(dtype), opacities.to(dtype), ids, px, py)
        reached = (alpha > 0).any(dim=0)
        assert not bool((reached & ~kept).any()), f"a dropped Gaussian reaches alpha >= 1/255 ({dtype})"
    assert 0.1 < float((~kept).float().mean()) < 0.95  # the fuzz exercises both outcomes
    # the bound is useful: among Gaussians that reach no pixel, most are dropped
    assert float((~kept).float().sum()) > 0.5 * float((~reached).float().sum())


def test_cull_bound_keeps_what_it_cannot_bound():
    box = (0.5, 15.5, 0.5, 1.5)
    M = torch.eye(3)[None].repeat(5, 1, 1)
    M[0, 0, 2] = M[0, 1, 2] = 500.0  # s = (px - 500, py - 500): both weights far above 2 L', dropped
    M[2, 0, 0] = math.nan  # not finite: kept
    M[3] = 0.0  # cross_z = 0 everywhere: gsplat skips it, the bound cannot tell and keeps it
    means2d = torch.tensor([[500.0, 500.0], [500.0, 500.0], [500.0, 500.0], [8.0, 1.0], [500.0, 500.0]])
    opacities = torch.tensor([0.9, 0.9, 0.9, 0.9, 1e-3])  # the last one is below 1/255: always dropped
    kept = may_contribute_2dgs(means2d, M, opacities, box)
    # identity (row 1): s = (px, py) is small near the box's corner, so the ray-splat weight reaches it
    assert kept.tolist() == [False, True, True, True, False]


@pytest.mark.parametrize("channels, background, with_last_ids", [(128, True, True), (512, False, True),
                                                                  (128, False, False)])
def test_wide_feature_maps_are_blended_in_channel_slices(channels, background, with_last_ids, monkeypatch):
    """Above constants.CHANNEL_SLICE channels, Frame2DGS.render hands the slice kernels the colours of every slice
    but the last, then the last slice (the depth channel) with every output: colour, background and render_colors
    pointers at the slice's first channel (4 bytes a channel), the whole map's channel count as the row stride,
    every other output pointer the whole frame's; without with_last_ids (inference) no last_ids or median_ids, null
    pointers for both. (CPU tensors, the GPU launch replaced by a recorder.)"""
    from gsplat_lpt import constants, frontend

    calls = []
    monkeypatch.setattr(frontend, "render_slices", lambda inter, slices, *rest: calls.append(slices) or "plan")
    frame = surfel2d.Frame2DGS.__new__(surfel2d.Frame2DGS)  # (what __init__ leaves, without its device check)
    frame.inter = runtime.Intersections(torch.zeros(1, 2, 3, dtype=torch.int32), torch.zeros(0, dtype=torch.int32),
                                        None, 1, 40, 30, 16, 3, 2, 5)
    frame.image_dims, frame.device, frame.channels, frame.padding = (1,), torch.device("cpu"), channels, 0
    frame.means2d, frame.ray_transforms = torch.zeros(1, 5, 2), torch.zeros(1, 5, 3, 3)
    frame.colors, frame.opacities, frame.normals = torch.zeros(1, 5, channels), torch.zeros(1, 5), torch.zeros(1, 5, 3)
    frame.densify, frame.masks = torch.zeros(1, 5, 2), None
    frame.backgrounds = torch.zeros(1, channels) if background else None
    *outputs, plan = frame.render(gsplat_lpt.LPTConfig(mode="lpt"), with_last_ids=with_last_ids)
    assert plan == "plan" and len(calls) == 1
    assert (outputs[-2] is None and outputs[-1] is None) != with_last_ids
    parts = frontend.channel_slices(channels, constants.CHANNEL_SLICE)
    slices = calls[0]
    assert [variant for variant, *_ in slices] == \
        [surfel2d.COLOR_SLICE_VARIANT] * (len(parts) - 1) + [surfel2d.LAST_SLICE_VARIANT]
    names = [name for name, _ in surfel2d.Outputs2DGS._fields_]
    whole = dict(zip(("render_colors", "render_alphas", "render_normals", "render_distort", "render_median",
                      "last_ids", "median_ids"), (0 if t is None else t.data_ptr() for t in outputs)))
    for (first, width), (_, channels_of_slice, params, sliced) in zip(parts, slices):
        assert channels_of_slice == width and params.channel_stride == channels
        assert params.colors == frame.colors.data_ptr() + 4 * first
        assert params.backgrounds == (frame.backgrounds.data_ptr() + 4 * first if background else 0)
        assert params.normals == frame.normals.data_ptr() and params.ray_transforms == frame.ray_transforms.data_ptr()
        for name in names:
            assert getattr(sliced, name) == whole[name] + (4 * first if name == "render_colors" else 0), name
