"""3DGS: gsplat's `rasterize_to_pixels` (kernels/blend_3dgs.cu), with gsplat's signature plus `config=`.

Autograd: the forward saves exactly what gsplat's forward saves (the same render_alphas and last_ids),
so gsplat's own backward op computes the gradients; frames that need gradients are never chunked.
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


class Params3DGS(ctypes.Structure):
    """Gaussian3DGS::Params"""

    _fields_ = [("means2d", Pointer), ("conics", Pointer), ("opacities", Pointer), ("colors", Pointer),
                ("backgrounds", Pointer)]


class Params3DGSChannelSlice(ctypes.Structure):
    """Gaussian3DGSChannelSlice::Params: Params3DGS with the colour pointers at a slice's first channel, and the
    channels of the whole map."""

    _fields_ = Params3DGS._fields_ + [("channel_stride", ctypes.c_uint32)]


class Outputs3DGS(ctypes.Structure):
    """Gaussian3DGS::Outputs"""

    _fields_ = [("render_colors", Pointer), ("render_alphas", Pointer), ("last_ids", Pointer)]


def validate(means2d, conics, colors, opacities, backgrounds, masks, packed: bool) -> Tuple[int, int]:
    """gsplat's shapes and dtypes for the per-Gaussian arrays; returns (rows, channels)."""
    means2d = require_tensor("means2d", means2d, torch.float32)
    conics = require_tensor("conics", conics, torch.float32)
    colors = require_tensor("colors", colors, torch.float32)
    opacities = require_tensor("opacities", opacities, torch.float32)
    channels = colors.shape[-1] if colors.dim() > 0 else 0
    frontend.check_channels(channels)
    if packed:
        if means2d.dim() != 2:
            raise LPTInputError(f"packed means2d must be [nnz, 2], got {tuple(means2d.shape)}")
        nnz = means2d.shape[0]
        require_shape("means2d", means2d, (nnz, 2), "[nnz, 2]")
        require_shape("conics", conics, (nnz, 3), "[nnz, 3]")
        require_shape("colors", colors, (nnz, channels), "[nnz, channels]")
        require_shape("opacities", opacities, (nnz,), "[nnz]")
        return nnz, channels
    if means2d.dim() < 3:
        raise LPTInputError(f"means2d must be [..., C, N, 2] (unpacked), got {tuple(means2d.shape)}")
    image_dims = tuple(means2d.shape[:-2])
    n = means2d.shape[-2]
    require_shape("means2d", means2d, image_dims + (n, 2), "[..., N, 2]")
    require_shape("conics", conics, image_dims + (n, 3), "[..., N, 3] like means2d")
    require_shape("colors", colors, image_dims + (n, channels), "[..., N, channels] like means2d")
    require_shape("opacities", opacities, image_dims + (n,), "[..., N] like means2d")
    return means2d.numel() // 2, channels


_F32, _I32 = torch.float32, torch.int32
_DEFAULT_CONFIG = LPTConfig()


def _usual_call(means2d, conics, colors, opacities, backgrounds, masks, width, height, tile_size, isect_offsets,
                flatten_ids, packed):
    """The usual call (unpacked, or packed as `gsplat.rasterization` calls by default; one CUDA device, gsplat's
    dtypes and shapes) checked in a few operations: (rows, channels, device, isect_offsets.shape), or None to let
    the full validation say what is wrong. (Each `.shape` builds a torch.Size: every one is read once, as a tuple,
    whose slices and comparisons cost a third of a torch.Size's.)"""
    try:
        if not frontend.usual_sizes(width, height, tile_size):
            return None
        if not (means2d.dtype is _F32 and conics.dtype is _F32 and colors.dtype is _F32 and opacities.dtype is _F32
                and isect_offsets.dtype is _I32 and flatten_ids.dtype is _I32):
            return None
        index = means2d.get_device()  # (an int: cheaper than comparing torch.device objects)
        if not (index >= frontend.FIRST_DEVICE_INDEX and conics.get_device() == index and colors.get_device() == index
                and opacities.get_device() == index and isect_offsets.get_device() == index
                and flatten_ids.get_device() == index):
            return None
        shape, offsets_shape = tuple(means2d.shape), tuple(isect_offsets.shape)
        conics_shape, colors_shape = tuple(conics.shape), tuple(colors.shape)
        points, channels = shape[:-1], colors_shape[-1]  # points: [..., N], or [nnz] packed
        dims = frontend.usual_image_dims(shape, offsets_shape, packed, width, height, tile_size)
        if not (dims is not None and conics_shape[-1] == 3 and conics_shape[:-1] == points
                and colors_shape[:-1] == points and tuple(opacities.shape) == points and flatten_ids.dim() == 1
                and 0 < channels <= frontend.GSPLAT_CHANNELS[-1]
                and frontend.usual_extras(backgrounds, masks, index, dims, channels, offsets_shape)):
            return None
        return means2d.numel() // 2, channels, means2d.device, offsets_shape
    except (AttributeError, TypeError, IndexError):  # not tensors (or 0-d ones): the full validation names them
        return None


class Frame3DGS:
    """One call's validated, contiguous, padded tensors; `render` plans and runs them (the low-level entry
    that tests and tools use to get last_ids and the plan too)."""

    def __init__(self, means2d, conics, colors, opacities, backgrounds, masks, width, height, tile_size,
                 isect_offsets, flatten_ids, packed):
        usual = _usual_call(means2d, conics, colors, opacities, backgrounds, masks, width, height, tile_size,
                            isect_offsets, flatten_ids, packed)
        if usual is not None:
            rows, channels, self.device, offsets_shape = usual
            self.inter = frontend.intersections(isect_offsets, flatten_ids, masks, width, height, tile_size, rows,
                                                checked=True, offsets_shape=offsets_shape)
        else:
            self._validate(means2d, conics, colors, opacities, backgrounds, masks, width, height, tile_size,
                           isect_offsets, flatten_ids, packed)
            offsets_shape, channels = isect_offsets.shape, colors.shape[-1]
        self.image_dims = tuple(offsets_shape[:-2])
        if channels not in frontend.GSPLAT_CHANNELS:
            colors, backgrounds, self.padding = frontend.pad_channels(colors, backgrounds)
            channels = colors.shape[-1]
        else:
            self.padding = 0
        self.means2d, self.conics = means2d.contiguous(), conics.contiguous()
        self.colors, self.opacities = colors.contiguous(), opacities.contiguous()
        self.backgrounds = None if backgrounds is None else backgrounds.contiguous()
        self.masks = masks
        self.channels = channels
        self.variant, self.kernel_colors = VARIANT, self.colors  # what the kernels read
        if channels > 4:  # (up to 4 channels the kernels stage the rows in shared memory)
            self._rows_in_16_byte_loads()

    def _rows_in_16_byte_loads(self):
        """Feature maps: the kernels read colour rows in 16-byte loads (kernels/lpt_core.cuh, kAlignedColorRows).
        Rows of a multiple of 4 floats: the colours, at a 16-byte aligned address. Maps of 5, 9, 17 and 33
        channels: a copy with rows padded to a multiple of 4 floats (PADDED_ROWS_VARIANT). Wider maps of other
        counts are blended in slices that read one float at a time."""
        C = self.channels
        if not C & 3:
            self.colors = self.kernel_colors = frontend.aligned_rows(self.colors, C)
        elif C <= constants.CHANNEL_SLICE:
            self.variant = PADDED_ROWS_VARIANT
            self.kernel_colors = torch.nn.functional.pad(self.colors.detach(), (0, 4 - (C & 3)))

    def _validate(self, means2d, conics, colors, opacities, backgrounds, masks, width, height, tile_size,
                  isect_offsets, flatten_ids, packed):
        """Every check, each error naming its argument (the device check last)."""
        width, height, tile_size = frontend.image_sizes(width, height, tile_size, isect_offsets)
        rows, channels = validate(means2d, conics, colors, opacities, backgrounds, masks, packed)
        frontend.check_image_dims(means2d, isect_offsets, backgrounds, channels, packed, flat_backgrounds=True)
        self.inter = frontend.intersections(isect_offsets, flatten_ids, masks, width, height, tile_size, rows)
        self.device = frontend.require_one_cuda_device(
            [("means2d", means2d), ("conics", conics), ("colors", colors), ("opacities", opacities),
             ("isect_offsets", isect_offsets), ("flatten_ids", flatten_ids), ("backgrounds", backgrounds),
             ("masks", masks)])

    def render(self, config: LPTConfig, chunking_allowed: bool = True, reason: Optional[str] = None,
               with_last_ids: bool = True):
        """(render_colors, render_alphas, last_ids, plan) with gsplat's shapes (padded channels); last_ids is
        None without with_last_ids (inference: nothing needs them)."""
        inter, dims = self.inter, self.image_dims
        H, W, C = inter.image_height, inter.image_width, self.channels
        render_colors = self.means2d.new_empty(dims + (H, W, C))  # (float32 on the frame's device)
        render_alphas = self.means2d.new_empty(dims + (H, W, 1))
        last_ids = self.means2d.new_empty(dims + (H, W), dtype=_I32) if with_last_ids else None
        if inter.num_images == 0:  # nothing to launch
            return render_colors, render_alphas, last_ids, None
        colors_at = self.kernel_colors.data_ptr()
        backgrounds_at = 0 if self.backgrounds is None else self.backgrounds.data_ptr()
        alphas_at, last_ids_at = render_alphas.data_ptr(), 0 if last_ids is None else last_ids.data_ptr()
        if C > constants.CHANNEL_SLICE:
            return render_colors, render_alphas, last_ids, self._render_slices(
                config, chunking_allowed, reason, colors_at, backgrounds_at, render_colors.data_ptr(), alphas_at,
                last_ids_at)
        params = Params3DGS(self.means2d.data_ptr(), self.conics.data_ptr(), self.opacities.data_ptr(), colors_at,
                            backgrounds_at)
        outputs = Outputs3DGS(render_colors.data_ptr(), alphas_at, last_ids_at)
        plan = frontend.render(self.variant, inter, params, outputs, C, self.device, config, chunking_allowed, reason)
        return render_colors, render_alphas, last_ids, plan

    def _render_slices(self, config, chunking_allowed, reason, colors_at, backgrounds_at, render_colors_at, alphas_at,
                       last_ids_at) -> FramePlan:
        """A wide feature map, constants.CHANNEL_SLICE channels at a time (kernels/blend_3dgs.cu,
        Gaussian3DGSChannelSlice, or Gaussian3DGSChannelSliceRow16 where the rows are a multiple of 4 floats):
        each slice's pointers moved to its first channel (4 bytes a channel)."""
        C, slices = self.channels, []
        variant = CHANNEL_SLICE_VARIANT if C & 3 else CHANNEL_SLICE_ROW16_VARIANT
        for first, width in frontend.channel_slices(C, constants.CHANNEL_SLICE):
            params = Params3DGSChannelSlice(self.means2d.data_ptr(), self.conics.data_ptr(), self.opacities.data_ptr(),
                                            colors_at + 4 * first, backgrounds_at + 4 * first if backgrounds_at else 0, C)
            slices.append((variant, width, params,
                           Outputs3DGS(render_colors_at + 4 * first, alphas_at, last_ids_at)))
        return frontend.render_slices(self.inter, slices, self.device, config, chunking_allowed, reason)


class _LPTRasterizeToPixels(torch.autograd.Function):
    """Forward: our kernels. Backward: gsplat's `_RasterizeToPixels.backward` (its CUDA backward op), fed the
    tensors gsplat's forward would have saved."""

    @staticmethod
    def forward(ctx, means2d, conics, colors, opacities, backgrounds, masks, width, height, tile_size,
                isect_offsets, flatten_ids, absgrad, frame: Frame3DGS, config: LPTConfig, holder: list):
        render_colors, render_alphas, last_ids, plan = frame.render(config, False, frontend.AUTOGRAD_NO_CHUNKING)
        holder.append(plan)
        ctx.save_for_backward(means2d, conics, colors, opacities, backgrounds, masks, isect_offsets, flatten_ids,
                              render_alphas, last_ids)
        ctx.width, ctx.height, ctx.tile_size, ctx.absgrad = width, height, tile_size, absgrad
        return render_colors, render_alphas

    @staticmethod
    def backward(ctx, v_render_colors, v_render_alphas):
        from gsplat.cuda._wrapper import _RasterizeToPixels

        gradients = _RasterizeToPixels.backward(ctx, v_render_colors, v_render_alphas)
        return (*gradients, None, None, None)


def rasterize_with_plan(
    means2d: Tensor,  # [..., N, 2] or [nnz, 2]
    conics: Tensor,  # [..., N, 3] or [nnz, 3]
    colors: Tensor,  # [..., N, channels] or [nnz, channels]
    opacities: Tensor,  # [..., N] or [nnz]
    image_width: int,
    image_height: int,
    tile_size: int,
    isect_offsets: Tensor,  # [..., tile_height, tile_width]
    flatten_ids: Tensor,  # [n_isects]
    backgrounds: Optional[Tensor] = None,  # [..., channels]
    masks: Optional[Tensor] = None,  # [..., tile_height, tile_width]
    packed: bool = False,
    absgrad: bool = False,
    config: Optional[LPTConfig] = None,
) -> Tuple[Tensor, Tensor, Optional[FramePlan]]:
    """gsplat's rasterize_to_pixels on our kernels: (render_colors, render_alphas, plan)."""
    config = config or _DEFAULT_CONFIG
    if not isinstance(config, LPTConfig):
        raise TypeError(f"config must be a gsplat_lpt.LPTConfig, got {type(config).__name__}")
    if frontend.gsplat_takes(VARIANT, config, flatten_ids):  # a small frame: gsplat's own call
        render_colors, render_alphas = frontend.gsplat_kernel(VARIANT)(
            means2d, conics, colors, opacities, image_width, image_height, tile_size, isect_offsets, flatten_ids,
            backgrounds, masks, packed, absgrad)
        return render_colors, render_alphas, frontend.GsplatKernelFrame(VARIANT, config, flatten_ids.numel())
    frame = Frame3DGS(means2d, conics, colors, opacities, backgrounds, masks, image_width, image_height, tile_size,
                      isect_offsets, flatten_ids, packed)
    grad = frontend.needs_grad(frame.means2d, frame.conics, frame.colors, frame.opacities, frame.backgrounds)
    if grad:
        holder: list = []
        render_colors, render_alphas = _LPTRasterizeToPixels.apply(
            frame.means2d, frame.conics, frame.colors, frame.opacities, frame.backgrounds, masks,
            frame.inter.image_width, frame.inter.image_height, frame.inter.tile_size, isect_offsets.contiguous(),
            frame.inter.flatten_ids, absgrad, frame, config, holder)
        plan = holder[0]
    else:  # inference: no autograd bookkeeping on the per-frame path
        allowed, reason = frontend.chunking_rule(VARIANT, config, False)
        render_colors, render_alphas, _, plan = frame.render(config, allowed, reason, with_last_ids=False)
    if frame.padding > 0:
        render_colors = render_colors[..., : -frame.padding]
    return render_colors, render_alphas, plan


def rasterize_to_pixels(
    means2d: Tensor,
    conics: Tensor,
    colors: Tensor,
    opacities: Tensor,
    image_width: int,
    image_height: int,
    tile_size: int,
    isect_offsets: Tensor,
    flatten_ids: Tensor,
    backgrounds: Optional[Tensor] = None,
    masks: Optional[Tensor] = None,
    packed: bool = False,
    absgrad: bool = False,
    config: Optional[LPTConfig] = None,
    return_stats: bool = False,
):
    """gsplat's `rasterize_to_pixels`, scheduled by the LPT backend (same signature, plus `config`).

    Returns (render_colors [..., H, W, channels], render_alphas [..., H, W, 1]), plus the schedule report
    (the mapping `meta["lpt"]` holds) when `return_stats` is True. (The arguments are passed on by position:
    re-packing keywords costs about a microsecond of every call.)"""
    render_colors, render_alphas, plan = rasterize_with_plan(
        means2d, conics, colors, opacities, image_width, image_height, tile_size, isect_offsets, flatten_ids,
        backgrounds, masks, packed, absgrad, config)
    if not return_stats:
        return render_colors, render_alphas
    return frontend.with_report(VARIANT, (render_colors, render_alphas), plan, config, return_stats)


VARIANT = register(Variant(
    name="3dgs",
    gsplat_function="rasterize_to_pixels",
    kernel_source="blend_3dgs.cu",
    traits="Gaussian3DGS",
    staged_bytes=32,
    params_struct=Params3DGS,
    outputs_struct=Outputs3DGS,
    partial_floats=lambda channels: channels,
    outputs=(OutputSpec("render_colors", True), OutputSpec("render_alphas", True),
             OutputSpec("last_ids", False, backward_only=True)),
    rasterize=rasterize_with_plan,
    compile_options=fast_math_options,
    pixels_per_thread=2,
    # blocks of 8 x 8 pixels in every kernel since the cull test on scaled batches bounds q over the warp's
    # rectangle rather than row by row (its cost no longer grows with the rows): H200, GPU time x gsplat's blend,
    # blocks / rows in every kernel, every output the same: bonsai orbit 2.55x / 2.48x, garden 2.52x / 2.25x,
    # balanced room 2.08x / 1.96x, auto on mild 3.70x / 3.47x, moderate 4.91x / 4.61x, street 16.07x / 15.20x,
    # fog 62.86x / 60.75x, foliage 5.56x / 5.24x; only the 6-camera rig took longer, 9.72x / 9.98x. Latency-bound
    # frames too (bit 4 clear: no rows there, config.WARP_BLOCK_BITS), lpt blocks / rows: fog 3.70x / 3.03x, veil
    # 3.80x / 3.44x, foliage 3.92x / 3.45x, the dense probes 3.43x / 2.77x and 3.47x / 2.69x, a cluster 3.48x / 3.09x;
    # slower on extreme 3.47x / 4.01x, severe 4.03x / 4.29x, the rig 3.95x / 4.14x, street 4.23x / 4.26x
    auto_warp_blocks=0b1111,
    no_last_ids_kernel=True,
))

# The 3DGS kernels for a slice of a feature map of more than constants.CHANNEL_SLICE channels (Frame3DGS.render
# picks them; not a gsplat function of its own).
CHANNEL_SLICE_VARIANT = dataclasses.replace(VARIANT, name="3dgs_slice", gsplat_function="",
                                            traits="Gaussian3DGSChannelSlice", params_struct=Params3DGSChannelSlice)
# The 3DGS kernels of a map of 5, 9, 17 or 33 channels, whose colour rows the front end pads to a multiple of 4 floats
# (kernels/blend_3dgs.cu, Gaussian3DGSPaddedRows): read in 16-byte loads. H200, bonsai orbit, GPU time x gsplat's
# blend, rows read one float at a time -> padded: 9 channels 1.25x -> 1.32x, 17: 0.98x -> 1.01x, 33: 0.96x -> 1.01x
# (5: 1.35x either way); the same floats. The copy costs one pass over the colours per call.
PADDED_ROWS_VARIANT = dataclasses.replace(VARIANT, name="3dgs_padded_rows", gsplat_function="",
                                          traits="Gaussian3DGSPaddedRows")
# ... of a map whose channel count is a multiple of 4: colour rows read in 16-byte loads.
CHANNEL_SLICE_ROW16_VARIANT = dataclasses.replace(CHANNEL_SLICE_VARIANT, name="3dgs_slice_row16",
                                                  traits="Gaussian3DGSChannelSliceRow16")
