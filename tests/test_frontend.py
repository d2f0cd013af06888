"""The front end on the CPU: every bad argument is named in the error, before any GPU work."""

from __future__ import annotations

import pytest
import torch

import gsplat_lpt
from gsplat_lpt import LPTConfig, frontend
from gsplat_lpt.errors import LPTInputError
from gsplat_lpt.frontend import pad_channels
from gsplat_lpt.variants.gaussian3d import Frame3DGS


def validate_inputs(means2d, conics, colors, opacities, image_width, image_height, tile_size, isect_offsets,
                    flatten_ids, backgrounds=None, masks=None, packed=False):
    """Everything the 3DGS front end checks before it needs a GPU (the device check comes last)."""
    Frame3DGS(means2d, conics, colors, opacities, backgrounds, masks, image_width, image_height, tile_size,
           isect_offsets, flatten_ids, packed)


def frame(C=1, N=5, D=3, tiles=(2, 3), width=40, height=30, tile_size=16):
    return dict(
        means2d=torch.zeros(C, N, 2), conics=torch.zeros(C, N, 3), colors=torch.zeros(C, N, D),
        opacities=torch.zeros(C, N), image_width=width, image_height=height, tile_size=tile_size,
        isect_offsets=torch.zeros(C, *tiles, dtype=torch.int32), flatten_ids=torch.zeros(0, dtype=torch.int32),
    )


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(conics=torch.zeros(1, 5, 2)), r"conics has shape \(1, 5, 2\), expected \(1, 5, 3\)"),
        (dict(opacities=torch.zeros(1, 4)), "opacities has shape"),
        (dict(colors=torch.zeros(1, 5, 3, dtype=torch.float64)), "colors must have dtype torch.float32"),
        (dict(colors=torch.zeros(1, 5, 0)), "0 channels"),
        (dict(colors=torch.zeros(1, 5, 600)), "600 channels"),
        (dict(isect_offsets=torch.zeros(1, 2, 3)), "isect_offsets must have dtype torch.int32"),
        (dict(isect_offsets=torch.zeros(2, 2, 3, dtype=torch.int32)), "isect_offsets has image dims"),
        (dict(flatten_ids=torch.zeros(2, 2, dtype=torch.int32)), "flatten_ids must be 1-D"),
        (dict(image_width=100), "smaller than the 30x100 image"),
        (dict(image_height=0), "image_height must be a positive integer"),
        (dict(image_width=True), "image_width must be a positive integer"),
        (dict(tile_size=64, isect_offsets=torch.zeros(1, 1, 1, dtype=torch.int32)), "at most 32"),
        (dict(means2d=[[0.0, 0.0]]), "means2d must be a torch.Tensor, got list"),
    ],
)
def test_bad_input_is_named(change, message):
    with pytest.raises(LPTInputError, match=message):
        validate_inputs(**{**frame(), **change})


def test_bad_backgrounds_and_masks():
    with pytest.raises(LPTInputError, match="backgrounds has shape"):
        validate_inputs(**frame(), backgrounds=torch.zeros(2, 3))
    with pytest.raises(LPTInputError, match="masks must have dtype torch.bool"):
        validate_inputs(**frame(), masks=torch.ones(1, 2, 3))
    with pytest.raises(LPTInputError, match="masks has shape"):
        validate_inputs(**frame(), masks=torch.ones(1, 3, 3, dtype=torch.bool))


def test_cpu_tensors_are_refused_with_the_reason():
    message = "means2d is on cpu; the lpt backend renders CUDA tensors only"
    if not torch.cuda.is_available():
        message += r" \(and no CUDA device is available on this machine\)"
    with pytest.raises(LPTInputError, match=message):
        gsplat_lpt.rasterize_to_pixels(**frame(), config=LPTConfig(mode="lpt"))


def test_valid_shapes_pass_until_the_device_check():
    with pytest.raises(LPTInputError, match="on cpu"):
        validate_inputs(**frame(C=2, tiles=(2, 3)), backgrounds=torch.zeros(2, 3),
                        masks=torch.ones(2, 2, 3, dtype=torch.bool))


def test_packed_shapes():
    packed = dict(frame(), means2d=torch.zeros(7, 2), conics=torch.zeros(7, 3), colors=torch.zeros(7, 3),
                  opacities=torch.zeros(7))
    with pytest.raises(LPTInputError, match="on cpu"):
        validate_inputs(**packed, packed=True)
    with pytest.raises(LPTInputError, match=r"opacities has shape \(6,\)"):
        validate_inputs(**{**packed, "opacities": torch.zeros(6)}, packed=True)


def test_config_type_is_checked():
    with pytest.raises(TypeError, match="LPTConfig"):
        gsplat_lpt.rasterize_to_pixels(**frame(), config="auto")


def test_channel_padding_like_gsplat():
    colors, backgrounds, padding = pad_channels(torch.ones(2, 5, 6), torch.ones(2, 6))
    assert padding == 2 and colors.shape == (2, 5, 8) and backgrounds.shape == (2, 8)
    assert torch.all(colors[..., 6:] == 0)
    colors, backgrounds, padding = pad_channels(torch.ones(2, 5, 3), None)
    assert padding == 0 and colors.shape == (2, 5, 3) and backgrounds is None


@pytest.mark.parametrize("bad", [dict(mode="fastest"), dict(mode="vanilla"), dict(chunk_count=0), dict(heavy_ratio=1.5),
                                 dict(chunk_counts=(1, 2)), dict(chunk_counts=(2, 4, 8, 16, 32, 64, 3, 5, 6)),
                                 dict(min_gain=1.0), dict(overhead_lambda=-1.0), dict(max_chunked_tiles=5000),
                                 dict(heavy_item_pace=0.0), dict(heavy_item_pace=1.5), dict(gsplat_kernel_below=-1),
                                 dict(gsplat_kernel_below=1.5), dict(gsplat_kernel_below=True)])
def test_config_validation(bad):
    with pytest.raises(ValueError, match="LPTConfig"):
        LPTConfig(**bad)


def test_numpy_integer_sizes_are_accepted_like_gsplat():
    import numpy as np

    with pytest.raises(LPTInputError, match="on cpu"):  # got past the size checks
        validate_inputs(**{**frame(), "image_width": np.int64(40), "image_height": np.int32(30),
                           "tile_size": np.int64(16)})


def test_tensors_on_two_devices_are_named():
    from gsplat_lpt.frontend import require_one_cuda_device

    with pytest.raises(LPTInputError, match="colors is on cpu"):
        require_one_cuda_device([("means2d", None), ("colors", torch.zeros(1))])


def test_vanilla_is_a_backend_not_a_mode():
    with pytest.raises(ValueError, match="backend='cuda'"):
        LPTConfig(mode="vanilla")


def test_warp_block_bits_per_kernel_role():
    """FrameArgs.warp_blocks: bit P - 1 the persistent kernel of P pixels per thread, bit 2 the chunk kernel,
    bit 3 the persistent kernel of a chunked frame, bit 4 rows on latency-bound unchunked frames. "auto" is the
    variant's own where it declares it (3DGS: blocks everywhere), else blocks but with two pixels per thread and
    rows on latency-bound frames (2DGS, 3DGUT); "blocks" and "rows" are the same for every variant, in every
    kernel of every frame; tile sizes not divisible by 8 always take rows."""
    from gsplat_lpt.config import warp_block_bits
    from gsplat_lpt.variants import VARIANTS

    assert warp_block_bits("auto", 16) == 0b11101
    assert warp_block_bits("auto", 16, auto_bits=0b1111) == 0b1111
    assert warp_block_bits("blocks", 16) == warp_block_bits("blocks", 16, auto_bits=0) == 0b1111
    assert warp_block_bits("rows", 16, auto_bits=0b1111) == 0
    assert warp_block_bits("auto", 12, auto_bits=0b1111) == warp_block_bits("blocks", 12) == 0
    assert VARIANTS["rasterize_to_pixels"].auto_warp_blocks == 0b1111
    for name in ("rasterize_to_pixels_2dgs", "rasterize_to_pixels_eval3d"):
        variant = VARIANTS[name]
        assert warp_block_bits("auto", 16, variant.auto_warp_blocks) == 0b11101


def test_reported_warp_shape_follows_the_bits_and_the_plan():
    """meta["lpt"]["warp_shape"] (FramePlan.warp_shape) reads what the kernels read: the bit of the frame's
    persistent kernel, and the plan's persistent_rows word only where bit 4 asks for it (2DGS, 3DGUT under "auto"),
    never for 3DGS under "auto" nor under a forced shape."""
    from types import SimpleNamespace

    from gsplat_lpt import constants
    from gsplat_lpt.runtime import FramePlan
    from gsplat_lpt.variants import VARIANTS

    def shape(variant, warp_shape, chunked=0, pixels=1, latency_bound=0, tile_size=16):
        schedule = [0] * constants.SCHEDULE_SIZE
        word = constants.SCHEDULE
        schedule[word["chunked_tiles"]], schedule[word["pixels_per_thread"]] = chunked, pixels
        schedule[word["persistent_rows"]] = latency_bound
        plan = SimpleNamespace(config=LPTConfig(warp_shape=warp_shape),
                               intersections=SimpleNamespace(tile_size=tile_size),
                               rasterizer=SimpleNamespace(variant=VARIANTS[variant]))
        return FramePlan.warp_shape(plan, schedule)

    gs3d, gs2d, gut = "rasterize_to_pixels", "rasterize_to_pixels_2dgs", "rasterize_to_pixels_eval3d"
    assert shape(gs3d, "auto", latency_bound=1) == shape(gs3d, "auto") == "blocks"
    assert shape(gs3d, "auto", pixels=2, latency_bound=1) == shape(gs3d, "auto", chunked=5) == "blocks"
    for variant in (gs2d, gut):
        assert shape(variant, "auto") == "blocks" and shape(variant, "auto", latency_bound=1) == "rows"
        assert shape(variant, "auto", pixels=2) == "rows" and shape(variant, "auto", chunked=5) == "blocks"
        assert shape(variant, "blocks", latency_bound=1) == shape(variant, "blocks", pixels=2) == "blocks"
    for variant in (gs3d, gs2d, gut):
        assert shape(variant, "rows") == shape(variant, "rows", chunked=5) == "rows"
        assert shape(variant, "blocks", tile_size=12) == "rows"


def _bad_input_cases():
    """Every change of test_bad_input_is_named and a few the fast path's own checks must catch (a shape that
    differs only in its leading dims, backgrounds and masks of the wrong shape, a 0-d tensor)."""
    cases = [change for change, _ in test_bad_input_is_named.pytestmark[0].args[1]]
    cases += [dict(conics=torch.zeros(2, 5, 3)), dict(colors=torch.zeros(5, 1, 3)), dict(opacities=torch.zeros(1, 5, 1)),
              dict(means2d=torch.zeros(1, 5, 3)), dict(colors=torch.zeros(())),
              dict(backgrounds=torch.zeros(2, 3)), dict(backgrounds=torch.zeros(1, 4)),
              dict(masks=torch.ones(1, 3, 3, dtype=torch.bool)), dict(masks=torch.ones(1, 2, 3)),
              dict(packed=True), dict(tile_size=16.0)]
    return cases


def _packed(**change):
    """A packed call (gsplat.rasterization's default: rows [nnz, ...] of every image; two images here), changed."""
    return {"means2d": torch.zeros(7, 2), "conics": torch.zeros(7, 3), "colors": torch.zeros(7, 3),
            "opacities": torch.zeros(7), "isect_offsets": torch.zeros(2, 2, 3, dtype=torch.int32), "packed": True,
            **change}


PACKED_CASES = [_packed(), _packed(backgrounds=torch.zeros(2, 3)), _packed(masks=torch.ones(2, 2, 3, dtype=torch.bool)),
                _packed(colors=torch.zeros(7, 16)), _packed(opacities=torch.zeros(6)), _packed(conics=torch.zeros(7, 2)),
                _packed(colors=torch.zeros(6, 3)), _packed(means2d=torch.zeros(1, 7, 2)),
                _packed(opacities=torch.zeros(7, 1)), _packed(backgrounds=torch.zeros(1, 3)),
                _packed(isect_offsets=torch.zeros(2, 3, dtype=torch.int32)), _packed(packed=1),
                _packed(masks=torch.ones(1, 2, 3, dtype=torch.bool)), _packed(colors=torch.zeros(7, 600)),
                _packed(flatten_ids=torch.zeros(2, 2, dtype=torch.int32)), _packed(image_width=100)]


@pytest.mark.parametrize("change", _bad_input_cases() + PACKED_CASES + [
    dict(), dict(backgrounds=torch.zeros(1, 3)), dict(masks=torch.ones(1, 2, 3, dtype=torch.bool)),
    dict(colors=torch.zeros(1, 5, 5))])
def test_fast_path_accepts_only_what_the_full_validation_accepts(change, monkeypatch):
    """The usual call's few checks (gaussian3d._usual_call) against the full validation, on CPU tensors (the
    fast path's device check lowered to take them): where the fast path accepts, the full validation passes
    up to its device check and finds the same rows and channels."""
    from gsplat_lpt.variants import gaussian3d

    monkeypatch.setattr(frontend, "FIRST_DEVICE_INDEX", -1)
    args = {**frame(), "backgrounds": None, "masks": None, "packed": False, **change}
    keys = ("means2d", "conics", "colors", "opacities", "backgrounds", "masks", "image_width", "image_height",
            "tile_size", "isect_offsets", "flatten_ids", "packed")
    from helpers import assert_fast_path_agrees

    usual = gaussian3d._usual_call(*[args[k] for k in keys])
    assert_fast_path_agrees(usual, gaussian3d.Frame3DGS.__new__(gaussian3d.Frame3DGS)._validate,
                            [args[k] for k in keys])
    if usual is not None:
        rows, channels, _, offsets_shape = usual
        assert rows == args["means2d"].numel() // 2 and channels == args["colors"].shape[-1]
        assert offsets_shape == args["isect_offsets"].shape


def test_channel_slices_cover_the_map_in_order():
    from gsplat_lpt.frontend import channel_slices

    assert channel_slices(64, 64) == ((0, 64),)
    assert channel_slices(128, 64) == ((0, 64), (64, 64))
    assert channel_slices(513, 64) == tuple((64 * i, 64) for i in range(8)) + ((512, 1),)
    assert channel_slices(3, 64) == ((0, 3),)
    with pytest.raises(ValueError, match="positive"):
        channel_slices(0, 64)


@pytest.mark.parametrize("channels, background", [(64, True), (128, False), (129, False), (513, True)])
def test_wide_feature_maps_are_blended_in_channel_slices(channels, background, monkeypatch):
    """Above constants.CHANNEL_SLICE channels, Frame3DGS.render hands the slice kernels one (width, params,
    outputs) per slice: colour, background and output pointers at the slice's first channel (4 bytes a channel),
    the whole map's channel count as the row stride, the alphas and last_ids of the whole frame; 64 channels
    and fewer take the unsliced kernels. (CPU tensors, the GPU launch replaced by a recorder.)"""
    from gsplat_lpt import constants, frontend
    from gsplat_lpt.variants import gaussian3d

    monkeypatch.setattr(frontend, "FIRST_DEVICE_INDEX", -1)
    calls = []
    monkeypatch.setattr(frontend, "render_slices", lambda inter, slices, *rest: calls.append(
        ("slices", slices)) or "plan")
    monkeypatch.setattr(frontend, "render", lambda variant, inter, params, outputs, C, *rest: calls.append(
        ("whole", variant, C)) or "plan")
    args = {**frame(D=channels), "backgrounds": torch.zeros(1, channels) if background else None, "masks": None,
            "packed": False}
    keys = ("means2d", "conics", "colors", "opacities", "backgrounds", "masks", "image_width", "image_height",
            "tile_size", "isect_offsets", "flatten_ids", "packed")
    ours = gaussian3d.Frame3DGS(*[args[k] for k in keys])
    colors, alphas, last_ids, plan = ours.render(LPTConfig(mode="lpt"))
    assert plan == "plan" and colors.shape[-1] == channels and len(calls) == 1
    if channels <= constants.CHANNEL_SLICE:
        assert calls[0] == ("whole", gaussian3d.VARIANT, channels)
        return
    kind, slices = calls[0]
    # rows of a multiple of 4 floats are read in 16-byte loads (a kernel build of their own)
    expected = gaussian3d.CHANNEL_SLICE_VARIANT if channels % 4 else gaussian3d.CHANNEL_SLICE_ROW16_VARIANT
    assert kind == "slices" and all(variant is expected for variant, *_ in slices)
    assert [width for _, width, _, _ in slices] == [w for _, w in frontend.channel_slices(channels, 64)]
    for (first, _), (_, _, params, outputs) in zip(frontend.channel_slices(channels, 64), slices):
        assert isinstance(params, gaussian3d.Params3DGSChannelSlice) and params.channel_stride == channels
        assert params.colors == ours.colors.data_ptr() + 4 * first
        assert params.backgrounds == (ours.backgrounds.data_ptr() + 4 * first if background else 0)
        assert params.means2d == ours.means2d.data_ptr() and params.opacities == ours.opacities.data_ptr()
        assert outputs.render_colors == colors.data_ptr() + 4 * first
        assert outputs.render_alphas == alphas.data_ptr() and outputs.last_ids == last_ids.data_ptr()


def test_channel_slice_params_extend_the_3dgs_params():
    import ctypes

    from gsplat_lpt.variants.gaussian3d import Params3DGS, Params3DGSChannelSlice

    assert Params3DGSChannelSlice._fields_[:-1] == Params3DGS._fields_
    assert Params3DGSChannelSlice.channel_stride.offset == ctypes.sizeof(Params3DGS)


def test_colour_rows_of_a_multiple_of_4_floats_start_16_byte_aligned():
    """The kernels read colour rows of a multiple of 4 floats in 16-byte loads: a contiguous view that starts
    off a 16-byte boundary is copied (same values); aligned arrays and other channel counts are passed as they
    are, without a copy."""
    from gsplat_lpt.frontend import aligned_rows

    storage = torch.arange(4 * 100 + 1, dtype=torch.float32)
    aligned = storage[:400].view(50, 8)
    assert aligned.data_ptr() % 16 == 0 and aligned_rows(aligned, 8) is aligned
    shifted = storage[1:401].view(50, 8)  # 4 bytes past the boundary, contiguous
    fixed = aligned_rows(shifted, 8)
    assert fixed.data_ptr() % 16 == 0 and fixed.is_contiguous() and torch.equal(fixed, shifted)
    odd = storage[1:401].view(80, 5)
    assert aligned_rows(odd, 5) is odd


@pytest.mark.parametrize("channels", [8, 32])
def test_frame_hands_the_kernels_aligned_colour_rows(channels, monkeypatch):
    """Frame3DGS: a colour view 4 bytes off a 16-byte boundary reaches the kernels as an aligned copy."""
    from gsplat_lpt.variants import gaussian3d

    monkeypatch.setattr(frontend, "FIRST_DEVICE_INDEX", -1)
    args = frame(D=channels)
    colors = args["colors"]
    storage = torch.zeros(colors.numel() + 1)
    shifted = storage[1:].view(colors.shape)
    shifted.copy_(colors)
    assert shifted.data_ptr() % 16 == 4
    keys = ("means2d", "conics", "colors", "opacities", "backgrounds", "masks", "image_width", "image_height",
            "tile_size", "isect_offsets", "flatten_ids", "packed")
    args = {**args, "colors": shifted, "backgrounds": None, "masks": None, "packed": False}
    ours = gaussian3d.Frame3DGS(*[args[k] for k in keys])
    assert ours.colors.data_ptr() % 16 == 0 and torch.equal(ours.colors, colors)


@pytest.mark.parametrize("channels", [5, 9, 16, 17, 33])
def test_odd_channel_counts_reach_the_kernels_in_padded_rows(channels, monkeypatch):
    """Maps of 5, 9, 17 and 33 channels (gsplat's own counts) reach the kernels as a copy whose rows are padded
    with zeros to a multiple of 4 floats (16-byte loads); the frame keeps the caller's colours (autograd saves
    them for gsplat's backward) and the output keeps their width. Other counts are read as they are."""
    from gsplat_lpt.variants import gaussian3d

    monkeypatch.setattr(frontend, "FIRST_DEVICE_INDEX", -1)
    args = {**frame(D=channels), "backgrounds": None, "masks": None, "packed": False}
    keys = ("means2d", "conics", "colors", "opacities", "backgrounds", "masks", "image_width", "image_height",
            "tile_size", "isect_offsets", "flatten_ids", "packed")
    ours = gaussian3d.Frame3DGS(*[args[k] for k in keys])
    assert ours.colors is args["colors"] and ours.channels == channels
    if channels % 4 == 0:
        assert ours.variant is gaussian3d.VARIANT and ours.kernel_colors is ours.colors
        return
    width = (channels + 3) // 4 * 4
    assert ours.variant is gaussian3d.PADDED_ROWS_VARIANT
    assert ours.kernel_colors.shape == (*args["colors"].shape[:-1], width) and ours.kernel_colors.is_contiguous()
    assert torch.equal(ours.kernel_colors[..., :channels], args["colors"])
    assert not ours.kernel_colors[..., channels:].any() and ours.kernel_colors.data_ptr() % 16 == 0


@pytest.mark.parametrize("mode, below, default, isects, handed_off", [
    ("lpt", 10, 0, 9, True), ("lpt", 10, 0, 10, False), ("auto", None, 10, 9, True), ("auto", None, 10, 10, False),
    ("auto", 0, 10, 0, False), ("chunk", 10, 0, 9, False), ("fixed", None, 10, 0, False)])
def test_small_frames_go_to_gsplats_own_kernel(mode, below, default, isects, handed_off, monkeypatch):
    """In the lpt and auto modes a call whose flatten_ids is a CUDA tensor of fewer intersections than
    LPTConfig.gsplat_kernel_below (None: the variant's Variant.small_frame_intersections, here `default`) is gsplat's
    own rasterize_to_pixels call with the caller's arguments, before any check of ours, and its report says so;
    larger frames and the chunk and fixed modes are ours. (CPU tensors; both kernels replaced by recorders.)"""
    import dataclasses

    from helpers import flatten_ids_said_on_cuda

    from gsplat_lpt import frontend
    from gsplat_lpt.variants import gaussian3d

    monkeypatch.setattr(frontend, "FIRST_DEVICE_INDEX", -1)
    monkeypatch.setattr(frontend, "HAND_OFF_SMALL_FRAMES", True)
    monkeypatch.setattr(gaussian3d, "VARIANT", dataclasses.replace(gaussian3d.VARIANT, small_frame_intersections=default))
    calls = []
    monkeypatch.setattr(frontend, "gsplat_kernel", lambda variant: lambda *args: calls.append(
        (variant.gsplat_function, args)) or ("c", "a"))
    monkeypatch.setattr(frontend, "render", lambda *args: calls.append("ours") or "plan")
    args = {**frame(), "flatten_ids": flatten_ids_said_on_cuda(isects), "backgrounds": torch.zeros(1, 3),
            "masks": None, "packed": False}
    keys = ("means2d", "conics", "colors", "opacities", "image_width", "image_height", "tile_size", "isect_offsets",
            "flatten_ids", "backgrounds", "masks", "packed")
    config = LPTConfig(mode=mode, gsplat_kernel_below=below)
    colors, alphas, plan = gaussian3d.rasterize_with_plan(*[args[k] for k in keys], True, config=config)
    if not handed_off:
        assert calls == ["ours"] and plan == "plan"
        return
    (name, passed), = calls
    assert name == "rasterize_to_pixels" and (colors, alphas) == ("c", "a")
    assert all(a is b for a, b in zip(passed, [args[k] for k in keys] + [True])) and len(passed) == len(keys) + 1
    report = plan.snapshot().report()
    assert report["fallback"].startswith(f"gsplat kernel (a frame of {isects} intersections, below 10)")
    assert (report["mode"], report["variant"], report["chunked_tiles"], report["total_workload"]) == (
        mode, "3dgs", 0, isects)


def test_only_cuda_flatten_ids_are_handed_off():
    """A CPU call, however small, stays ours: our checks name what is wrong (here that it is not on a GPU)."""
    from gsplat_lpt import frontend
    from gsplat_lpt.variants import VARIANTS

    config = LPTConfig(mode="lpt", gsplat_kernel_below=100)
    assert not frontend.gsplat_takes(VARIANTS["rasterize_to_pixels"], config, torch.zeros(3, dtype=torch.int32))
    assert not frontend.gsplat_takes(VARIANTS["rasterize_to_pixels"], config, [0, 0, 0])
    with pytest.raises(LPTInputError, match="CUDA tensors only"):
        gsplat_lpt.rasterize_to_pixels(**frame(), config=config)


def test_the_gsplat_kernel_of_each_variant_is_gsplats_own_function_with_the_hook_installed():
    import gsplat.cuda._wrapper as wrapper
    import gsplat.rendering as rendering

    from gsplat_lpt import frontend
    from gsplat_lpt.variants import VARIANTS

    gsplat_lpt.install()
    for name, variant in VARIANTS.items():
        assert frontend.gsplat_kernel(variant) is getattr(wrapper, name)
        assert getattr(rendering, name).__gsplat_lpt_dispatcher__ == name  # (what the hook put there instead)


def test_each_variant_hands_off_below_its_own_count(monkeypatch):
    """With gsplat_kernel_below None, each variant's Variant.small_frame_intersections (3DGUT's measured higher);
    a count given in LPTConfig holds for every variant; the tests' switch turns the default off."""
    from helpers import flatten_ids_said_on_cuda

    from gsplat_lpt import frontend
    from gsplat_lpt.variants import VARIANTS

    monkeypatch.setattr(frontend, "HAND_OFF_SMALL_FRAMES", True)
    default, given = LPTConfig(mode="auto"), LPTConfig(mode="lpt", gsplat_kernel_below=100)
    for variant in VARIANTS.values():
        below = variant.small_frame_intersections
        assert frontend.gsplat_takes(variant, default, flatten_ids_said_on_cuda(below - 1))
        assert not frontend.gsplat_takes(variant, default, flatten_ids_said_on_cuda(below))
        assert frontend.gsplat_takes(variant, given, flatten_ids_said_on_cuda(99))
        assert not frontend.gsplat_takes(variant, given, flatten_ids_said_on_cuda(100))
    assert VARIANTS["rasterize_to_pixels_eval3d"].small_frame_intersections > VARIANTS[
        "rasterize_to_pixels"].small_frame_intersections
    monkeypatch.setattr(frontend, "HAND_OFF_SMALL_FRAMES", False)
    assert not frontend.gsplat_takes(VARIANTS["rasterize_to_pixels"], default, flatten_ids_said_on_cuda(1))
