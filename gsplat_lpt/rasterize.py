"""`rasterize_to_pixels` with gsplat 1.5.3's signature (plus `config=`), rendered by our kernels.

Validation at the boundary (one clear error naming the argument), gsplat's channel padding, then
plan (`plan.plan_frame`) and run (`runtime.run_plan`). Autograd: the forward saves exactly what
gsplat's forward saves (same render_alphas and last_ids), so gsplat's own backward op computes the
gradients; chunked tiles have no exact last_ids, so frames that need gradients are not chunked.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Optional, Tuple

import torch
from torch import Tensor

from . import hook
from .config import LPTConfig
from .plan import FramePlan, ScheduleReport, plan_frame

# Channel counts gsplat's CUDA kernels are instantiated for; others are zero-padded to the next power of two.
GSPLAT_CHANNELS = (1, 2, 3, 4, 5, 8, 9, 16, 17, 32, 33, 64, 65, 128, 129, 256, 257, 512, 513)
AUTOGRAD_NO_CHUNKING = "autograd: chunked tiles have no exact last_ids for gsplat's backward"


class LPTInputError(ValueError):
    """A rasterize argument that the LPT backend cannot render (named in the message)."""


def _require_tensor(name: str, value: Any, dtype: torch.dtype) -> Tensor:
    if not isinstance(value, Tensor):
        raise LPTInputError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if value.dtype != dtype:
        raise LPTInputError(f"{name} must have dtype {dtype}, got {value.dtype}")
    return value


def _require_shape(name: str, value: Tensor, expected: Tuple[int, ...], meaning: str) -> None:
    if tuple(value.shape) != tuple(expected):
        raise LPTInputError(f"{name} has shape {tuple(value.shape)}, expected {tuple(expected)} ({meaning})")


def validate_inputs(
    means2d, conics, colors, opacities, image_width, image_height, tile_size, isect_offsets, flatten_ids,
    backgrounds=None, masks=None, packed=False,
) -> None:
    """Types, dtypes and shapes as gsplat expects them, then the device. Raises LPTInputError/RuntimeError."""
    for name, value in (("image_width", image_width), ("image_height", image_height), ("tile_size", tile_size)):
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise LPTInputError(f"{name} must be a positive int, got {value!r}")
    if tile_size * tile_size > 1024:
        raise LPTInputError(f"tile_size={tile_size} needs {tile_size ** 2} threads per CTA; at most 32 is supported")
    means2d = _require_tensor("means2d", means2d, torch.float32)
    conics = _require_tensor("conics", conics, torch.float32)
    colors = _require_tensor("colors", colors, torch.float32)
    opacities = _require_tensor("opacities", opacities, torch.float32)
    isect_offsets = _require_tensor("isect_offsets", isect_offsets, torch.int32)
    flatten_ids = _require_tensor("flatten_ids", flatten_ids, torch.int32)
    if isect_offsets.dim() < 3:
        raise LPTInputError(f"isect_offsets must be [..., tile_height, tile_width] with image dims, got {tuple(isect_offsets.shape)}")
    if flatten_ids.dim() != 1:
        raise LPTInputError(f"flatten_ids must be 1-D [n_isects], got shape {tuple(flatten_ids.shape)}")
    channels = colors.shape[-1] if colors.dim() > 0 else 0
    if channels == 0 or channels > 513:
        raise LPTInputError(f"colors has {channels} channels; gsplat supports 1 to 513")
    if packed:
        if means2d.dim() != 2:
            raise LPTInputError(f"packed means2d must be [nnz, 2], got {tuple(means2d.shape)}")
        nnz = means2d.shape[0]
        _require_shape("means2d", means2d, (nnz, 2), "[nnz, 2]")
        _require_shape("conics", conics, (nnz, 3), "[nnz, 3]")
        _require_shape("colors", colors, (nnz, channels), "[nnz, channels]")
        _require_shape("opacities", opacities, (nnz,), "[nnz]")
        image_dims = tuple(isect_offsets.shape[:-2])
    else:
        if means2d.dim() < 3:
            raise LPTInputError(f"means2d must be [..., C, N, 2] (unpacked), got {tuple(means2d.shape)}")
        image_dims = tuple(means2d.shape[:-2])
        n = means2d.shape[-2]
        _require_shape("means2d", means2d, image_dims + (n, 2), "[..., N, 2]")
        _require_shape("conics", conics, image_dims + (n, 3), "[..., N, 3] like means2d")
        _require_shape("colors", colors, image_dims + (n, channels), "[..., N, channels] like means2d")
        _require_shape("opacities", opacities, image_dims + (n,), "[..., N] like means2d")
        if tuple(isect_offsets.shape[:-2]) != image_dims:
            raise LPTInputError(
                f"isect_offsets has image dims {tuple(isect_offsets.shape[:-2])}, means2d has {image_dims}"
            )
    tile_height, tile_width = isect_offsets.shape[-2:]
    if tile_height * tile_size < image_height or tile_width * tile_size < image_width:
        raise LPTInputError(
            f"isect_offsets covers {tile_height}x{tile_width} tiles of {tile_size} px, "
            f"smaller than the {image_height}x{image_width} image"
        )
    num_images = math.prod(isect_offsets.shape[:-2])
    if backgrounds is not None:
        backgrounds = _require_tensor("backgrounds", backgrounds, torch.float32)
        if backgrounds.shape[-1:] != (channels,) or backgrounds.numel() != num_images * channels:
            raise LPTInputError(
                f"backgrounds has shape {tuple(backgrounds.shape)}, expected {tuple(isect_offsets.shape[:-2]) + (channels,)}"
            )
    if masks is not None:
        masks = _require_tensor("masks", masks, torch.bool)
        _require_shape("masks", masks, tuple(isect_offsets.shape), "like isect_offsets")

    named = [("means2d", means2d), ("conics", conics), ("colors", colors), ("opacities", opacities),
             ("isect_offsets", isect_offsets), ("flatten_ids", flatten_ids), ("backgrounds", backgrounds),
             ("masks", masks)]
    for name, value in named:
        if value is not None and value.device.type != "cuda":
            available = "" if torch.cuda.is_available() else " (and no CUDA device is available on this machine)"
            raise LPTInputError(f"{name} is on {value.device}; the lpt backend renders CUDA tensors only{available}")
    devices = {value.device for _, value in named if value is not None}
    if len(devices) > 1:
        raise LPTInputError(f"all inputs must be on one CUDA device, got {sorted(map(str, devices))}")


def _pad_channels(colors: Tensor, backgrounds: Optional[Tensor]) -> Tuple[Tensor, Optional[Tensor], int]:
    """gsplat's padding of unsupported channel counts (so gsplat's backward op accepts our outputs)."""
    channels = colors.shape[-1]
    if channels in GSPLAT_CHANNELS:
        return colors, backgrounds, 0
    padding = (1 << (channels - 1).bit_length()) - channels
    colors = torch.cat([colors, colors.new_zeros(*colors.shape[:-1], padding)], dim=-1)
    if backgrounds is not None:
        backgrounds = torch.cat([backgrounds, backgrounds.new_zeros(*backgrounds.shape[:-1], padding)], dim=-1)
    return colors, backgrounds, padding


class _FrameJob:
    """Carries the config into the autograd Function and the plan back out of it."""

    def __init__(self, config: LPTConfig, chunking_allowed: bool):
        self.config = config
        self.chunking_allowed = chunking_allowed
        self.plan: Optional[FramePlan] = None

    def render(self, means2d, conics, colors, opacities, backgrounds, masks, width, height, tile_size,
               isect_offsets, flatten_ids) -> Tuple[Tensor, Tensor, Tensor]:
        from . import runtime

        device_index = means2d.device.index if means2d.device.index is not None else torch.cuda.current_device()
        channels = colors.shape[-1]
        block_size = tile_size * tile_size
        concurrent_ctas = runtime.concurrent_ctas("3dgs", channels, block_size, device_index)
        self.plan = plan_frame(
            isect_offsets, flatten_ids.numel(), concurrent_ctas, self.config, masks=masks,
            chunking_allowed=self.chunking_allowed,
            chunking_disabled_reason=None if self.chunking_allowed else AUTOGRAD_NO_CHUNKING,
        )
        tile_height, tile_width = isect_offsets.shape[-2:]
        arguments = runtime.BlendArguments(
            variant="3dgs",
            gaussian_arrays=(means2d, conics, opacities),
            colors=colors,
            backgrounds=backgrounds,
            masks=None if masks is None else masks.reshape(-1).view(torch.uint8),
            isect_offsets=isect_offsets.reshape(-1),
            flatten_ids=flatten_ids,
            num_images=math.prod(isect_offsets.shape[:-2]),
            image_width=width,
            image_height=height,
            tile_size=tile_size,
            tile_width=tile_width,
            tile_height=tile_height,
        )
        with runtime.on_device(device_index):
            colors_out, alphas, last_ids = runtime.run_plan(self.plan, arguments, co_execute=self.config.co_execute)
        image_dims = tuple(isect_offsets.shape[:-2])
        return (colors_out.reshape(image_dims + colors_out.shape[1:]), alphas.reshape(image_dims + alphas.shape[1:]),
                last_ids.reshape(image_dims + last_ids.shape[1:]))


def _gsplat_rasterize_function():
    from gsplat.cuda._wrapper import _RasterizeToPixels

    return _RasterizeToPixels


class _LPTRasterizeToPixels(torch.autograd.Function):
    """Forward: our kernels. Backward: gsplat's `_RasterizeToPixels.backward` (its CUDA backward op),
    fed the same saved tensors gsplat's forward would have saved."""

    @staticmethod
    def forward(ctx, means2d, conics, colors, opacities, backgrounds, masks, width, height, tile_size,
                isect_offsets, flatten_ids, absgrad, job: _FrameJob):
        render_colors, render_alphas, last_ids = job.render(
            means2d, conics, colors, opacities, backgrounds, masks, width, height, tile_size, isect_offsets,
            flatten_ids,
        )
        ctx.save_for_backward(means2d, conics, colors, opacities, backgrounds, masks, isect_offsets, flatten_ids,
                              render_alphas, last_ids)
        ctx.width, ctx.height, ctx.tile_size, ctx.absgrad = width, height, tile_size, absgrad
        return render_colors, render_alphas

    @staticmethod
    def backward(ctx, v_render_colors, v_render_alphas):
        gradients = _gsplat_rasterize_function().backward(ctx, v_render_colors, v_render_alphas)
        return (*gradients, None)


def rasterize_to_pixels(
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
    return_stats: bool = False,
):
    """gsplat's `rasterize_to_pixels`, scheduled by the LPT backend.

    Returns (render_colors [..., H, W, channels], render_alphas [..., H, W, 1]), plus the schedule
    report (the dict that `meta["lpt"]` holds) when `return_stats` is True.
    """
    config = config or LPTConfig()
    if not isinstance(config, LPTConfig):
        raise TypeError(f"config must be a gsplat_lpt.LPTConfig, got {type(config).__name__}")
    if config.mode == "vanilla":
        outputs = hook.original("rasterize_to_pixels")(
            means2d, conics, colors, opacities, image_width, image_height, tile_size, isect_offsets, flatten_ids,
            backgrounds=backgrounds, masks=masks, packed=packed, absgrad=absgrad,
        )
        report: Dict[str, Any] = {"mode": "vanilla"}
        hook.record_schedule(report)
        return (*outputs, report) if return_stats else outputs

    validate_inputs(means2d, conics, colors, opacities, image_width, image_height, tile_size, isect_offsets,
                    flatten_ids, backgrounds, masks, packed)
    if backgrounds is not None:
        backgrounds = backgrounds.contiguous()
    if masks is not None:
        masks = masks.contiguous()
    colors, backgrounds, padding = _pad_channels(colors, backgrounds)

    needs_grad = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (means2d, conics, colors, opacities, backgrounds)
    )
    job = _FrameJob(config, chunking_allowed=not needs_grad or config.allow_chunking_under_autograd)
    inputs = (means2d.contiguous(), conics.contiguous(), colors.contiguous(), opacities.contiguous(), backgrounds, masks,
              image_width, image_height, tile_size, isect_offsets.contiguous(), flatten_ids.contiguous())
    if needs_grad:
        render_colors, render_alphas = _LPTRasterizeToPixels.apply(*inputs, absgrad, job)
    else:  # inference: no autograd bookkeeping on the per-frame path
        render_colors, render_alphas, _ = job.render(*inputs)
    if padding > 0:
        render_colors = render_colors[..., :-padding]
    assert job.plan is not None
    if hook.wants_report():
        hook.record_schedule(ScheduleReport(job.plan))  # read back lazily, when meta["lpt"] is looked at
    if return_stats:
        return render_colors, render_alphas, job.plan.report()
    return render_colors, render_alphas


def rasterize_to_pixels_dispatch(*args, config: LPTConfig, **kwargs):
    """What the gsplat hook calls for the 3DGS variant."""
    return rasterize_to_pixels(*args, config=config, **kwargs)


# variant name -> implementation called by hook's dispatchers (2DGS and 3DGUT fall back to gsplat until added)
VARIANTS = {"3dgs": rasterize_to_pixels_dispatch}
