"""2DGS: gsplat's `rasterize_to_pixels_2dgs` (kernels/blend_2dgs.cu), with gsplat's signature plus `config=`.

Every output gsplat returns: colours (whose last channel is read as depth, as gsplat's kernel does for
distortion and median depth), alphas, normals, distortion and median depth, plus the `last_ids` and
`median_ids` its backward needs. Depth chunks compose all of them: colours, alphas and normals by Eq. (5),
distortion by its own composition (kernels/blend_2dgs.cu), median depth and median_ids exactly by the core's
re-walk from chunk 0's transmittance.

Autograd: the forward saves exactly what gsplat's forward saves (the same render_colors, render_alphas,
last_ids and median_ids), so gsplat's own backward op computes the gradients (densify and absgrad
included); frames that need gradients are never chunked. Only that backward reads last_ids and median_ids (gsplat
returns neither; median depth is its own output), so a call that needs no gradients allocates neither and runs the
persistent kernel's build that keeps neither (Variant.no_last_ids_kernel).
"""

from __future__ import annotations

import ctypes
import dataclasses
from typing import Optional, Tuple

import torch
from torch import Tensor

from .. import constants, frontend
from ..config import LPTConfig
from ..errors import LPTInputError
from ..frontend import require_shape, require_tensor
from ..layouts import Pointer
from ..runtime import FramePlan
from . import OutputSpec, Variant, fast_math_options, register

# Channel counts gsplat's 2DGS wrapper renders without padding; the others are padded up to the next power
# of two with the padding inserted before the last (depth) channel (gsplat's `rasterize_to_pixels_2dgs`).
CHANNELS_2DGS = (1, 2, 3, 4, 8, 16, 32, 64, 128, 256, 512)
PARTIAL_EXTRA_FLOATS = 7  # normals[3], distortion, sum of vis * depth, median depth, median id


class Params2DGS(ctypes.Structure):
    """Surfel2DGS::Params"""

    _fields_ = [("means2d", Pointer), ("ray_transforms", Pointer), ("colors", Pointer), ("opacities", Pointer),
                ("normals", Pointer), ("backgrounds", Pointer)]


class Params2DGSChannelSlice(ctypes.Structure):
    """surfel2d::SliceParams: Params2DGS with the colour pointers at a slice's first channel, and the channels of
    the whole map."""

    _fields_ = Params2DGS._fields_ + [("channel_stride", ctypes.c_uint32)]


class Outputs2DGS(ctypes.Structure):
    """Surfel2DGS::Outputs"""

    _fields_ = [("render_colors", Pointer), ("render_alphas", Pointer), ("last_ids", Pointer),
                ("render_normals", Pointer), ("render_distort", Pointer), ("render_median", Pointer),
                ("median_ids", Pointer)]


def check_channels(channels: int) -> None:
    if channels == 0 or channels > CHANNELS_2DGS[-1]:
        raise LPTInputError(f"colors has {channels} channels; gsplat's 2DGS rasterizer supports 1 to "
                            f"{CHANNELS_2DGS[-1]}")


def pad_channels(colors: Tensor, backgrounds: Optional[Tensor]) -> Tuple[Tensor, Optional[Tensor], int]:
    """gsplat's 2DGS padding: zeros inserted before the last channel of colors (depth stays last, where the
    kernel reads it), and appended to backgrounds. Returns (colors, backgrounds, padding)."""
    channels = colors.shape[-1]
    if channels in CHANNELS_2DGS:
        return colors, backgrounds, 0
    padding = (1 << (channels - 1).bit_length()) - channels
    colors = torch.cat([colors[..., :-1], colors.new_zeros(*colors.shape[:-1], padding), colors[..., -1:]], dim=-1)
    if backgrounds is not None:
        backgrounds = torch.cat([backgrounds, backgrounds.new_zeros(*backgrounds.shape[:-1], padding)], dim=-1)
    return colors, backgrounds, padding


def unpad_colors(render_colors: Tensor, padding: int) -> Tensor:
    """gsplat's inverse of the padding: the first channels and the last (depth) one."""
    if padding == 0:
        return render_colors
    return torch.cat([render_colors[..., : -padding - 1], render_colors[..., -1:]], dim=-1)


def validate(means2d, ray_transforms, colors, opacities, normals, densify, packed: bool) -> Tuple[int, int]:
    """gsplat's shapes and dtypes for the per-Gaussian arrays; returns (rows, channels)."""
    means2d = require_tensor("means2d", means2d, torch.float32)
    ray_transforms = require_tensor("ray_transforms", ray_transforms, torch.float32)
    colors = require_tensor("colors", colors, torch.float32)
    opacities = require_tensor("opacities", opacities, torch.float32)
    normals = require_tensor("normals", normals, torch.float32)
    if not isinstance(densify, Tensor):
        raise LPTInputError(f"densify must be a torch.Tensor, got {type(densify).__name__}")
    channels = colors.shape[-1] if colors.dim() > 0 else 0
    check_channels(channels)
    if packed:
        if means2d.dim() != 2:
            raise LPTInputError(f"packed means2d must be [nnz, 2], got {tuple(means2d.shape)}")
        nnz = means2d.shape[0]
        require_shape("means2d", means2d, (nnz, 2), "[nnz, 2]")
        require_shape("ray_transforms", ray_transforms, (nnz, 3, 3), "[nnz, 3, 3]")
        require_shape("colors", colors, (nnz, channels), "[nnz, channels]")
        require_shape("opacities", opacities, (nnz,), "[nnz]")
        require_shape("normals", normals, (nnz, 3), "[nnz, 3]")
        require_shape("densify", densify, (nnz, 2), "[nnz, 2] like means2d")
        return nnz, channels
    if means2d.dim() < 3:
        raise LPTInputError(f"means2d must be [..., C, N, 2] (unpacked), got {tuple(means2d.shape)}")
    image_dims = tuple(means2d.shape[:-2])
    n = means2d.shape[-2]
    require_shape("means2d", means2d, image_dims + (n, 2), "[..., N, 2]")
    require_shape("ray_transforms", ray_transforms, image_dims + (n, 3, 3), "[..., N, 3, 3] like means2d")
    require_shape("colors", colors, image_dims + (n, channels), "[..., N, channels] like means2d")
    require_shape("opacities", opacities, image_dims + (n,), "[..., N] like means2d")
    require_shape("normals", normals, image_dims + (n, 3), "[..., N, 3] like means2d")
    require_shape("densify", densify, image_dims + (n, 2), "[..., N, 2] like means2d")
    return means2d.numel() // 2, channels


_F32, _I32 = torch.float32, torch.int32
_DEFAULT_CONFIG = LPTConfig()  # (frozen: one instance for every call that gives none; a new one would also make the
# runtime set the plan's policy constants again)

def _usual_call(means2d, ray_transforms, colors, opacities, normals, densify, backgrounds, masks, width, height,
                tile_size, isect_offsets, flatten_ids, packed):
    """The usual call (unpacked or packed, one CUDA device, gsplat's dtypes and shapes) checked in a few operations,
    as gaussian3d's is: (rows, channels, device, isect_offsets.shape), or None to let the full validation say what
    is wrong. (With it, outputs from new_empty and one default config, a call's host time on an H200's host went
    from 132 to 101 us; gsplat's own call took 77 us there: tests/device/host_pieces.py.)"""
    try:
        if not frontend.usual_sizes(width, height, tile_size):
            return None
        if not (means2d.dtype is _F32 and ray_transforms.dtype is _F32 and colors.dtype is _F32
                and opacities.dtype is _F32 and normals.dtype is _F32 and isect_offsets.dtype is _I32
                and flatten_ids.dtype is _I32 and isinstance(densify, Tensor)):
            return None
        index = means2d.get_device()
        if not (index >= frontend.FIRST_DEVICE_INDEX and ray_transforms.get_device() == index
                and colors.get_device() == index and opacities.get_device() == index
                and normals.get_device() == index and densify.get_device() == index
                and isect_offsets.get_device() == index and flatten_ids.get_device() == index):
            return None
        shape, offsets_shape, colors_shape = tuple(means2d.shape), tuple(isect_offsets.shape), tuple(colors.shape)
        points, channels = shape[:-1], colors_shape[-1]  # points: [..., N], or [nnz] packed
        dims = frontend.usual_image_dims(shape, offsets_shape, packed, width, height, tile_size)
        if not (dims is not None and tuple(ray_transforms.shape) == points + (3, 3)
                and colors_shape[:-1] == points and tuple(opacities.shape) == points
                and tuple(normals.shape) == points + (3,) and tuple(densify.shape) == points + (2,)
                and flatten_ids.dim() == 1 and 0 < channels <= CHANNELS_2DGS[-1]
                and frontend.usual_extras(backgrounds, masks, index, dims, channels, offsets_shape)):
            return None
        return means2d.numel() // 2, channels, means2d.device, offsets_shape
    except (AttributeError, TypeError, IndexError):  # not tensors (or 0-d ones): the full validation names them
        return None


class Frame2DGS:
    """One call's validated, contiguous, padded tensors; `render` plans and runs them (the low-level entry
    that tests and tools use to get last_ids, median_ids and the plan too)."""

    def __init__(self, means2d, ray_transforms, colors, opacities, normals, densify, backgrounds, masks, width,
                 height, tile_size, isect_offsets, flatten_ids, packed):
        usual = _usual_call(means2d, ray_transforms, colors, opacities, normals, densify, backgrounds, masks, width,
                            height, tile_size, isect_offsets, flatten_ids, packed)
        if usual is not None:
            rows, channels, self.device, offsets_shape = usual
            self.inter = frontend.intersections(isect_offsets, flatten_ids, masks, width, height, tile_size, rows,
                                                checked=True, offsets_shape=offsets_shape)
        else:
            self._validate(means2d, ray_transforms, colors, opacities, normals, densify, backgrounds, masks, width,
                           height, tile_size, isect_offsets, flatten_ids, packed)
            offsets_shape = isect_offsets.shape
        self.image_dims = tuple(offsets_shape[:-2])
        colors, backgrounds, self.padding = pad_channels(colors, backgrounds)
        self.means2d, self.ray_transforms = means2d.contiguous(), ray_transforms.contiguous()
        self.colors, self.opacities = frontend.aligned_rows(colors.contiguous(), colors.shape[-1]), opacities.contiguous()
        self.normals, self.densify = normals.contiguous(), densify.contiguous()
        self.backgrounds = None if backgrounds is None else backgrounds.contiguous()
        self.masks = masks
        self.channels = self.colors.shape[-1]

    def _validate(self, means2d, ray_transforms, colors, opacities, normals, densify, backgrounds, masks, width,
                  height, tile_size, isect_offsets, flatten_ids, packed):
        """Every check, each error naming its argument (the device check last)."""
        width, height, tile_size = frontend.image_sizes(width, height, tile_size, isect_offsets)
        rows, channels = validate(means2d, ray_transforms, colors, opacities, normals, densify, packed)
        frontend.check_image_dims(means2d, isect_offsets, backgrounds, channels, packed, flat_backgrounds=False)
        self.inter = frontend.intersections(isect_offsets, flatten_ids, masks, width, height, tile_size, rows)
        self.device = frontend.require_one_cuda_device(
            [("means2d", means2d), ("ray_transforms", ray_transforms), ("colors", colors), ("opacities", opacities),
             ("normals", normals), ("densify", densify), ("isect_offsets", isect_offsets),
             ("flatten_ids", flatten_ids), ("backgrounds", backgrounds), ("masks", masks)])

    def render(self, config: LPTConfig, chunking_allowed: bool = True, reason: Optional[str] = None,
               with_last_ids: bool = True):
        """(render_colors, render_alphas, render_normals, render_distort, render_median, last_ids, median_ids,
        plan) with gsplat's shapes (padded channels); last_ids and median_ids are None without with_last_ids
        (inference: nothing needs them; the kernels get null pointers for both)."""
        inter, dims = self.inter, self.image_dims
        H, W = inter.image_height, inter.image_width
        empty = self.means2d.new_empty  # (float32 on the frame's device; cheaper than torch.empty with keywords)
        render_colors = empty(dims + (H, W, self.channels))
        render_alphas = empty(dims + (H, W, 1))
        render_normals = empty(dims + (H, W, 3))
        render_distort = empty(dims + (H, W, 1))
        render_median = empty(dims + (H, W, 1))
        last_ids = empty(dims + (H, W), dtype=_I32) if with_last_ids else None
        median_ids = empty(dims + (H, W), dtype=_I32) if with_last_ids else None
        outputs_ = (render_colors, render_alphas, render_normals, render_distort, render_median, last_ids, median_ids)
        if inter.num_images == 0:  # nothing to launch
            return (*outputs_, None)
        pointers = (self.means2d.data_ptr(), self.ray_transforms.data_ptr(), self.colors.data_ptr(),
                    self.opacities.data_ptr(), self.normals.data_ptr(),
                    0 if self.backgrounds is None else self.backgrounds.data_ptr())
        address = lambda t: 0 if t is None else t.data_ptr()  # noqa: E731
        outputs = Outputs2DGS(render_colors.data_ptr(), render_alphas.data_ptr(), address(last_ids),
                              render_normals.data_ptr(), render_distort.data_ptr(), render_median.data_ptr(),
                              address(median_ids))
        if self.channels > constants.CHANNEL_SLICE:
            return (*outputs_, self._render_slices(config, chunking_allowed, reason, pointers, outputs))
        plan = frontend.render(VARIANT, inter, Params2DGS(*pointers), outputs, self.channels, self.device, config,
                               chunking_allowed, reason)
        return (*outputs_, plan)

    def _render_slices(self, config, chunking_allowed, reason, pointers, outputs) -> FramePlan:
        """A wide feature map, constants.CHANNEL_SLICE channels at a time (kernels/blend_2dgs.cu): the colours of
        each slice but the last, then the last (the depth channel) with every other output; each slice's
        colour, background and output pointers moved to its first channel (4 bytes a channel)."""
        C, slices = self.channels, []
        means2d, ray_transforms, colors, opacities, normals, backgrounds = pointers
        parts = frontend.channel_slices(C, constants.CHANNEL_SLICE)
        for index, (first, width) in enumerate(parts):
            params = Params2DGSChannelSlice(means2d, ray_transforms, colors + 4 * first, opacities, normals,
                                            backgrounds + 4 * first if backgrounds else 0, C)
            sliced = Outputs2DGS(*(getattr(outputs, name) for name, _ in Outputs2DGS._fields_))
            sliced.render_colors += 4 * first
            variant = LAST_SLICE_VARIANT if index == len(parts) - 1 else COLOR_SLICE_VARIANT
            slices.append((variant, width, params, sliced))
        return frontend.render_slices(self.inter, slices, self.device, config, chunking_allowed, reason)


class _LPTRasterizeToPixels2DGS(torch.autograd.Function):
    """Forward: our kernels. Backward: gsplat's `_RasterizeToPixels2DGS.backward` (its CUDA backward op), fed
    the tensors gsplat's forward would have saved, in its order."""

    @staticmethod
    def forward(ctx, means2d, ray_transforms, colors, opacities, normals, densify, backgrounds, masks, width, height,
                tile_size, isect_offsets, flatten_ids, absgrad, distloss, frame: Frame2DGS, config: LPTConfig,
                holder: list):
        (render_colors, render_alphas, render_normals, render_distort, render_median, last_ids, median_ids,
         plan) = frame.render(config, False, frontend.AUTOGRAD_NO_CHUNKING)
        holder.append(plan)
        ctx.save_for_backward(means2d, ray_transforms, colors, opacities, normals, densify, backgrounds, masks,
                              isect_offsets, flatten_ids, render_colors, render_alphas, last_ids, median_ids)
        ctx.width, ctx.height, ctx.tile_size = width, height, tile_size
        ctx.absgrad, ctx.distloss = absgrad, distloss
        return render_colors, render_alphas, render_normals, render_distort, render_median

    @staticmethod
    def backward(ctx, v_render_colors, v_render_alphas, v_render_normals, v_render_distort, v_render_median):
        from gsplat.cuda._wrapper import _RasterizeToPixels2DGS

        gradients = _RasterizeToPixels2DGS.backward(ctx, v_render_colors, v_render_alphas, v_render_normals,
                                                    v_render_distort, v_render_median)
        return (*gradients, None, None, None)


def rasterize_with_plan(
    means2d: Tensor,  # [..., N, 2] or [nnz, 2]
    ray_transforms: Tensor,  # [..., N, 3, 3] or [nnz, 3, 3]
    colors: Tensor,  # [..., N, channels] or [nnz, channels]
    opacities: Tensor,  # [..., N] or [nnz]
    normals: Tensor,  # [..., N, 3] or [nnz, 3]
    densify: Tensor,  # [..., N, 2] or [nnz, 2]
    image_width: int,
    image_height: int,
    tile_size: int,
    isect_offsets: Tensor,  # [..., tile_height, tile_width]
    flatten_ids: Tensor,  # [n_isects]
    backgrounds: Optional[Tensor] = None,  # [..., channels]
    masks: Optional[Tensor] = None,  # [..., tile_height, tile_width]
    packed: bool = False,
    absgrad: bool = False,
    distloss: bool = False,
    config: Optional[LPTConfig] = None,
) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Optional[FramePlan]]:
    """gsplat's rasterize_to_pixels_2dgs on our kernels: (render_colors, render_alphas, render_normals,
    render_distort, render_median, plan)."""
    config = config or _DEFAULT_CONFIG
    if not isinstance(config, LPTConfig):
        raise TypeError(f"config must be a gsplat_lpt.LPTConfig, got {type(config).__name__}")
    if frontend.gsplat_takes(VARIANT, config, flatten_ids):  # a small frame: gsplat's own call
        return (*frontend.gsplat_kernel(VARIANT)(
            means2d, ray_transforms, colors, opacities, normals, densify, image_width, image_height, tile_size,
            isect_offsets, flatten_ids, backgrounds, masks, packed, absgrad, distloss),
            frontend.GsplatKernelFrame(VARIANT, config, flatten_ids.numel()))
    frame = Frame2DGS(means2d, ray_transforms, colors, opacities, normals, densify, backgrounds, masks, image_width,
                      image_height, tile_size, isect_offsets, flatten_ids, packed)
    grad = frontend.needs_grad(frame.means2d, frame.ray_transforms, frame.colors, frame.opacities, frame.normals,
                               frame.densify, frame.backgrounds)
    if grad:
        holder: list = []
        render_colors, render_alphas, render_normals, render_distort, render_median = \
            _LPTRasterizeToPixels2DGS.apply(
                frame.means2d, frame.ray_transforms, frame.colors, frame.opacities, frame.normals, frame.densify,
                frame.backgrounds, masks, frame.inter.image_width, frame.inter.image_height, frame.inter.tile_size,
                isect_offsets.contiguous(), frame.inter.flatten_ids, absgrad, distloss, frame, config, holder)
        plan = holder[0]
    else:  # inference: no autograd bookkeeping on the per-frame path
        allowed, reason = frontend.chunking_rule(VARIANT, config, False)
        render_colors, render_alphas, render_normals, render_distort, render_median, _, _, plan = \
            frame.render(config, allowed, reason, with_last_ids=False)
    render_colors = unpad_colors(render_colors, frame.padding)
    return render_colors, render_alphas, render_normals, render_distort, render_median, plan


def rasterize_to_pixels_2dgs(*args, config: Optional[LPTConfig] = None, return_stats: bool = False, **kwargs):
    """gsplat's `rasterize_to_pixels_2dgs`, scheduled by the LPT backend (same signature, plus `config`).

    Returns (render_colors, render_alphas, render_normals, render_distort, render_median), plus the schedule
    report (the mapping `meta["lpt"]` holds) when `return_stats` is True."""
    *outputs, plan = rasterize_with_plan(*args, config=config, **kwargs)
    return frontend.with_report(VARIANT, outputs, plan, config, return_stats)


# Two pixels per thread (lpt_core.cuh), 2DGS's own bound for the plan's rule (Variant.two_pixel_max_imbalance). One
# NVIDIA H200, whole calls x gsplat's 2DGS blend, two pixels / one: balanced room (imbalance 0.07) 6.83x / 4.65x, mild
# 0.11 6.32x / 4.39x, moderate 0.23 5.11x / 4.35x, but street 0.72 2.03x / 3.19x and severe 1.59 1.41x / 2.52x; the
# bonsai from 1-4 cameras 0.18 2.02x / 1.91x, 0.34 1.84x / 1.73x, 0.39 1.80x / 1.81x, 0.48 1.62x / 1.68x, 0.51 1.59x /
# 1.88x (the crossing near 0.4; 0.25 keeps a margin); the bonsai orbit with 8 channels 1.80x / 1.69x, with 16 1.50x /
# 1.60x (the balanced room with 16: 6.90x / 4.83x).
TWO_PIXEL_MAX_IMBALANCE_2DGS = 0.25
TWO_PIXEL_MAX_CHANNELS_2DGS = 8


def two_pixel_max_imbalance(channels: int) -> float:
    return TWO_PIXEL_MAX_IMBALANCE_2DGS


def no_two_pixels_in_chunked_frames(channels: int) -> float:
    return 0.0  # (not measured for 2DGS: its chunked frames keep one pixel per thread)


VARIANT = register(Variant(
    name="2dgs",
    gsplat_function="rasterize_to_pixels_2dgs",
    kernel_source="blend_2dgs.cu",
    traits="Surfel2DGS",
    staged_bytes=64,
    params_struct=Params2DGS,
    outputs_struct=Outputs2DGS,
    partial_floats=lambda channels: channels + PARTIAL_EXTRA_FLOATS,
    outputs=(OutputSpec("render_colors", True), OutputSpec("render_alphas", True), OutputSpec("render_normals", True),
             OutputSpec("render_distort", True), OutputSpec("render_median", True),
             OutputSpec("last_ids", False, backward_only=True), OutputSpec("median_ids", True, backward_only=True)),
    rasterize=rasterize_with_plan,
    compile_options=fast_math_options,  # the ray-splat division is then gsplat's approximate one
    pixels_per_thread=2,
    two_pixel_max_channels=TWO_PIXEL_MAX_CHANNELS_2DGS,
    two_pixel_max_imbalance=two_pixel_max_imbalance,
    two_pixel_many_items_max=two_pixel_max_imbalance,  # (the same bound: 2DGS was not measured by items per CTA)
    two_pixel_chunked_max=no_two_pixels_in_chunked_frames,
    no_last_ids_kernel=True,  # (keeping neither last_ids nor median_ids)
))

# The 2DGS kernels for the slices of a feature map of more than constants.CHANNEL_SLICE channels (Frame2DGS.render
# picks them; not gsplat functions of their own): the colours of a slice, and the last slice with every output.
COLOR_SLICE_VARIANT = dataclasses.replace(VARIANT, name="2dgs_colors", gsplat_function="",
                                          traits="Surfel2DGSColorSlice", params_struct=Params2DGSChannelSlice,
                                          partial_floats=lambda channels: channels)
LAST_SLICE_VARIANT = dataclasses.replace(VARIANT, name="2dgs_slice", gsplat_function="", traits="Surfel2DGSSlice",
                                         params_struct=Params2DGSChannelSlice)
