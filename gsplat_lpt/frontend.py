"""The generic front end every variant goes through: validation at the boundary (one clear error naming
the argument), gsplat's channel padding, the device guard, then plan and run on the cached Rasterizer,
and the lazy schedule report. A variant module (gsplat_lpt/variants/) adds only what is its own.
"""

from __future__ import annotations

import ctypes
import math
import numbers
from collections.abc import Mapping
from typing import Any, Dict, Iterable, Optional, Sequence, Tuple

import torch
from torch import Tensor

from . import constants
from .config import LPTConfig
from .errors import LPTInputError
from .cuda_calls import current_device_index as _current_device
from .runtime import FramePlan, Intersections, rasterizer_for, tiles_of

# Channel counts gsplat's CUDA kernels are instantiated for; others are zero-padded to the next power of two.
GSPLAT_CHANNELS = (1, 2, 3, 4, 5, 8, 9, 16, 17, 32, 33, 64, 65, 128, 129, 256, 257, 512, 513)
AUTOGRAD_NO_CHUNKING = "autograd: chunked tiles have no exact last_ids for gsplat's backward"


def as_size(name: str, value: Any) -> int:
    """A positive integer as gsplat accepts it (Python or NumPy integers, not bools)."""
    if type(value) is int and value > 0:
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) <= 0:
        raise LPTInputError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def image_sizes(width: Any, height: Any, tile_size: Any, isect_offsets: Any) -> Tuple[int, int, int]:
    """The checks every variant starts with: positive integer sizes and int32 [..., tile_height, tile_width]
    offsets with image dims. Returns the sizes as ints."""
    width, height = as_size("image_width", width), as_size("image_height", height)
    tile_size = as_size("tile_size", tile_size)
    require_tensor("isect_offsets", isect_offsets, torch.int32)
    if isect_offsets.dim() < 3:
        raise LPTInputError(f"isect_offsets must be [..., tile_height, tile_width] with image dims, "
                            f"got {tuple(isect_offsets.shape)}")
    return width, height, tile_size


def require_tensor(name: str, value: Any, dtype: torch.dtype) -> Tensor:
    if not isinstance(value, Tensor):
        raise LPTInputError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if value.dtype != dtype:
        raise LPTInputError(f"{name} must have dtype {dtype}, got {value.dtype}")
    return value


def require_shape(name: str, value: Tensor, expected: Tuple[int, ...], meaning: str) -> None:
    if tuple(value.shape) != tuple(expected):
        raise LPTInputError(f"{name} has shape {tuple(value.shape)}, expected {tuple(expected)} ({meaning})")


def require_one_cuda_device(named: Iterable[Tuple[str, Optional[Tensor]]]) -> torch.device:
    """All tensors on one CUDA device; the error names the first that is not."""
    devices = []
    for name, value in named:
        if value is None:
            continue
        if value.device.type != "cuda":
            available = "" if torch.cuda.is_available() else " (and no CUDA device is available on this machine)"
            raise LPTInputError(f"{name} is on {value.device}; the lpt backend renders CUDA tensors only{available}")
        devices.append((name, value.device))
    distinct = {device for _, device in devices}
    if len(distinct) > 1:
        raise LPTInputError("all inputs must be on one CUDA device, got "
                            + ", ".join(f"{name} on {device}" for name, device in devices))
    return devices[0][1]


def check_image_dims(means2d: Tensor, isect_offsets: Tensor, backgrounds: Optional[Tensor], channels: int,
                     packed: bool, flat_backgrounds: bool) -> None:
    """means2d's image dims are isect_offsets' (unpacked), and backgrounds hold one colour per image: of shape
    [..., channels] like the image dims, or (flat_backgrounds: gsplat's 3DGS kernel reads them flat) any
    shape of that many values ending in channels."""
    image_dims = tuple(isect_offsets.shape[:-2])
    if not packed and tuple(means2d.shape[:-2]) != image_dims:
        raise LPTInputError(f"isect_offsets has image dims {image_dims}, means2d has {tuple(means2d.shape[:-2])}")
    if backgrounds is not None:
        backgrounds = require_tensor("backgrounds", backgrounds, torch.float32)
        if flat_backgrounds:
            fits = backgrounds.shape[-1:] == (channels,) and backgrounds.numel() == math.prod(image_dims) * channels
        else:
            fits = tuple(backgrounds.shape) == image_dims + (channels,)
        if not fits:
            raise LPTInputError(f"backgrounds has shape {tuple(backgrounds.shape)}, expected {image_dims + (channels,)}")


def check_channels(channels: int) -> None:
    if channels == 0 or channels > GSPLAT_CHANNELS[-1]:
        raise LPTInputError(f"colors has {channels} channels; gsplat supports 1 to {GSPLAT_CHANNELS[-1]}")


def pad_channels(colors: Tensor, backgrounds: Optional[Tensor]) -> Tuple[Tensor, Optional[Tensor], int]:
    """gsplat's padding of unsupported channel counts (so gsplat's backward op accepts our outputs)."""
    channels = colors.shape[-1]
    if channels in GSPLAT_CHANNELS:
        return colors, backgrounds, 0
    padding = (1 << (channels - 1).bit_length()) - channels
    colors = torch.cat([colors, colors.new_zeros(*colors.shape[:-1], padding)], dim=-1)
    if backgrounds is not None:
        backgrounds = torch.cat([backgrounds, backgrounds.new_zeros(*backgrounds.shape[:-1], padding)], dim=-1)
    return colors, backgrounds, padding


def aligned_rows(colors: Tensor, channels: int) -> Tensor:
    """colors (contiguous) where the kernels can read rows of a multiple of 4 floats in 16-byte loads
    (kernels/lpt_core.cuh, kAlignedColorRows): at a 16-byte aligned address. torch allocates on 512-byte
    boundaries; a view that starts elsewhere is copied."""
    if channels & 3 or not colors.data_ptr() & 15:
        return colors
    return colors.clone()


def intersections(isect_offsets: Any, flatten_ids: Any, masks: Any, image_width: int, image_height: int,
                  tile_size: int, num_gaussians: int, checked: bool = False,
                  offsets_shape: Optional[Sequence[int]] = None) -> Intersections:
    """The tile lists every variant shares, validated (unless `checked`: the caller's fast path already did):
    [..., tile_height, tile_width] offsets covering the image, 1-D flatten_ids, masks like the offsets.
    `offsets_shape`: isect_offsets.shape where the caller has it already."""
    if not checked:
        if tile_size > constants.MAX_TILE_SIZE:
            raise LPTInputError(f"tile_size={tile_size} needs {tile_size ** 2} threads per CTA; at most "
                                f"{constants.MAX_TILE_SIZE} is supported")
        isect_offsets = require_tensor("isect_offsets", isect_offsets, torch.int32)
        flatten_ids = require_tensor("flatten_ids", flatten_ids, torch.int32)
        if isect_offsets.dim() < 3:
            raise LPTInputError(f"isect_offsets must be [..., tile_height, tile_width] with image dims, "
                                f"got {tuple(isect_offsets.shape)}")
        if flatten_ids.dim() != 1:
            raise LPTInputError(f"flatten_ids must be 1-D [n_isects], got shape {tuple(flatten_ids.shape)}")
        tile_height, tile_width = isect_offsets.shape[-2:]
        needed_width, needed_height = tiles_of(image_width, image_height, tile_size)
        if tile_height < needed_height or tile_width < needed_width:
            raise LPTInputError(f"isect_offsets covers {tile_height}x{tile_width} tiles of {tile_size} px, "
                                f"smaller than the {image_height}x{image_width} image")
        if masks is not None:
            masks = require_tensor("masks", masks, torch.bool)
            require_shape("masks", masks, tuple(isect_offsets.shape), "like isect_offsets")
    shape = isect_offsets.shape if offsets_shape is None else offsets_shape
    if masks is not None:
        masks = masks.contiguous().view(torch.uint8)
    tile_height, tile_width = shape[-2], shape[-1]
    num_items = isect_offsets.numel()
    return Intersections(isect_offsets.contiguous(), flatten_ids.contiguous(), masks,
                         num_items // (tile_height * tile_width) if num_items else math.prod(shape[:-2]), image_width,
                         image_height, tile_size, tile_width, tile_height, num_gaussians, num_items)


# The usual call's few checks, shared by the variants' fast paths (the _usual_call of gaussian3d, surfel2d and
# gaussian3dgut): each returns False (or None) where the full validation must look, which then names what is wrong.

# The device index every tensor of a usual call has at least (CUDA: 0; the CPU tests of the fast paths lower it to -1,
# a CPU tensor's get_device()).
FIRST_DEVICE_INDEX = 0


def usual_sizes(width: Any, height: Any, tile_size: Any) -> bool:
    """Image and tile sizes that are plain positive ints, the tile within constants.MAX_TILE_SIZE."""
    return (type(width) is int and type(height) is int and type(tile_size) is int
            and width > 0 and height > 0 and 0 < tile_size <= constants.MAX_TILE_SIZE)


def usual_image_dims(shape: Tuple[int, ...], offsets_shape: Tuple[int, ...], packed: Any, width: int, height: int,
                     tile_size: int) -> Optional[Tuple[int, ...]]:
    """The image dims of a call whose means2d has `shape` ([..., N, 2], or [nnz, 2] packed: rows of any image) and
    whose offsets cover the image: the offsets' leading dims, or None."""
    if packed:
        if len(shape) != 2 or len(offsets_shape) < 3:
            return None
    elif len(shape) < 3 or len(offsets_shape) != len(shape) or offsets_shape[:-2] != shape[:-2]:
        return None
    if shape[-1] != 2 or offsets_shape[-2] * tile_size < height or offsets_shape[-1] * tile_size < width:
        return None
    return offsets_shape[:-2]


def usual_extras(backgrounds: Optional[Tensor], masks: Optional[Tensor], index: int, dims: Tuple[int, ...],
                 channels: int, offsets_shape: Tuple[int, ...]) -> bool:
    """Backgrounds [..., channels] and masks like the offsets, on device `index`, where given."""
    if backgrounds is not None and not (backgrounds.dtype is torch.float32 and backgrounds.get_device() == index
                                        and tuple(backgrounds.shape) == dims + (channels,)):
        return False
    return masks is None or (masks.dtype is torch.bool and masks.get_device() == index
                             and tuple(masks.shape) == offsets_shape)


def needs_grad(*tensors: Optional[Tensor]) -> bool:
    if not torch.is_grad_enabled():
        return False
    for t in tensors:  # (a loop: a generator costs a few us on every call)
        if t is not None and t.requires_grad:
            return True
    return False


def chunking_rule(variant, config: LPTConfig, grad: bool) -> Tuple[bool, Optional[str]]:
    """Whether this call may chunk, and why not: gradients need gsplat's exact last_ids, and some outputs
    do not compose across depth chunks."""
    if grad:
        return False, AUTOGRAD_NO_CHUNKING
    if not variant.chunks_compose:
        names = ", ".join(o.name for o in variant.outputs if not o.composes and not o.backward_only)
        return False, f"{variant.name}: {names} do not compose across depth chunks"
    return True, None


# Whether a call below its variant's Variant.small_frame_intersections goes to gsplat's own function where
# LPTConfig.gsplat_kernel_below is None (the tests, which check our kernels on small frames, turn it off).
HAND_OFF_SMALL_FRAMES = True
HANDED_OFF_MODES = ("lpt", "auto")  # the modes that render; "chunk" and "fixed" are schedules asked for by name


def gsplat_takes(variant, config: LPTConfig, flatten_ids: Any) -> bool:
    """Whether gsplat's own function renders a call whose flatten_ids is `flatten_ids`, as it was made and before
    any check of ours (gsplat's checks and errors are then the call's): a CUDA tensor of fewer (tile, Gaussian)
    pairs than LPTConfig.gsplat_kernel_below, or the variant's Variant.small_frame_intersections where that is None,
    in a mode of HANDED_OFF_MODES."""
    below = config.gsplat_kernel_below
    if below is None:
        below = variant.small_frame_intersections if HAND_OFF_SMALL_FRAMES else 0
    return (below > 0 and isinstance(flatten_ids, Tensor) and flatten_ids.is_cuda and flatten_ids.numel() < below
            and config.mode in HANDED_OFF_MODES)


_gsplat_functions: Dict[str, Any] = {}


def gsplat_kernel(variant):
    """gsplat's own function that a variant replaces (gsplat.cuda._wrapper's: the hook replaces only gsplat.rendering's
    globals)."""
    function = _gsplat_functions.get(variant.gsplat_function)
    if function is None:
        from gsplat.cuda import _wrapper

        function = _gsplat_functions[variant.gsplat_function] = getattr(_wrapper, variant.gsplat_function)
    return function


class GsplatKernelFrame:
    """The plan a variant's rasterize returns for a frame gsplat's own kernel rendered (gsplat_takes): its
    report says so, as the hook's report of a variant without kernels of ours does."""

    __slots__ = ("variant", "config", "intersections")

    def __init__(self, variant, config: LPTConfig, intersections: int):
        self.variant, self.config, self.intersections = variant, config, intersections

    def snapshot(self) -> "GsplatKernelFrame":
        return self

    def report(self) -> Dict[str, Any]:
        below = self.config.gsplat_kernel_below
        below = self.variant.small_frame_intersections if below is None else below
        return {"mode": self.config.mode, "variant": self.variant.name, "chunked_tiles": 0, "chunk_count": 1,
                "total_workload": self.intersections,
                "fallback": f"gsplat kernel (a frame of {self.intersections} intersections, below {below})"}


def render(variant, inter: Intersections, params: ctypes.Structure, outputs: ctypes.Structure, channels: int,
           device: torch.device, config: LPTConfig, chunking_allowed: bool, reason: Optional[str]) -> FramePlan:
    """Plan and run one frame on the cached Rasterizer of (device, variant, channels, tile size), with
    the tensors' device current (also when another device is)."""
    if device.index == _current_device():
        return _plan_and_run(variant, inter, params, outputs, channels, device, config, chunking_allowed, reason)
    with torch.cuda.device(device):
        return _plan_and_run(variant, inter, params, outputs, channels, device, config, chunking_allowed, reason)


def _plan_and_run(variant, inter, params, outputs, channels, device, config, chunking_allowed, reason) -> FramePlan:
    rasterizer = rasterizer_for(variant, channels, inter.tile_size, device)
    plan = rasterizer.plan(inter, config, chunking_allowed, reason)
    rasterizer.run(plan, params, outputs)
    return plan


def render_slices(inter: Intersections, slices: Sequence[Tuple[Any, int, ctypes.Structure, ctypes.Structure]],
                  device: torch.device, config: LPTConfig, chunking_allowed: bool, reason: Optional[str]) -> FramePlan:
    """Plan and run one frame whose channels are blended a slice at a time: `slices` are (variant, channels,
    params, outputs) in channel order. One plan per (variant, slice width), on the cached Rasterizer of that
    pair, runs every slice of the pair (a plan runs as often as asked, the same schedule each time). Returns the
    first slice's plan."""
    if device.index == _current_device():
        return _plan_and_run_slices(inter, slices, device, config, chunking_allowed, reason)
    with torch.cuda.device(device):
        return _plan_and_run_slices(inter, slices, device, config, chunking_allowed, reason)


def _plan_and_run_slices(inter, slices, device, config, chunking_allowed, reason) -> FramePlan:
    plans: Dict[Tuple[str, int], FramePlan] = {}
    first = None
    for variant, channels, params, outputs in slices:
        plan = plans.get((variant.name, channels))
        if plan is None:
            rasterizer = rasterizer_for(variant, channels, inter.tile_size, device)
            plan = plans[variant.name, channels] = rasterizer.plan(inter, config, chunking_allowed, reason)
        plan.rasterizer.run(plan, params, outputs)
        if first is None:
            first = plan
    return first


def channel_slices(channels: int, width: int) -> Tuple[Tuple[int, int], ...]:
    """(first channel, channels) of each slice of `width` channels covering `channels`; the last one holds what is
    left (e.g. 513 channels in slices of 64: eight of 64, then one of 1)."""
    if channels <= 0 or width <= 0:
        raise ValueError(f"channel_slices needs positive channels and width, got {channels} and {width}")
    return tuple((first, min(width, channels - first)) for first in range(0, channels, width))


class ScheduleReport(Mapping):
    """`meta["lpt"]`: a frame's schedule facts, read back from the device only when first looked at, so
    that a hooked `rasterization` call never waits for the GPU on its own."""

    def __init__(self, plan: Optional[FramePlan], extra: Optional[Dict[str, Any]] = None):
        self._plan = plan
        self._extra = dict(extra or {})
        self._facts: Optional[Dict[str, Any]] = None

    def _load(self) -> Dict[str, Any]:
        if self._facts is None:
            self._facts = {**(self._plan.report() if self._plan is not None else {}), **self._extra}
        return self._facts

    def with_extra(self, **extra: Any) -> "ScheduleReport":
        return ScheduleReport(self._plan, {**self._extra, **extra})

    def __getitem__(self, key: str) -> Any:
        return self._load()[key]

    def __iter__(self):
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())

    def __repr__(self) -> str:
        return f"ScheduleReport({self._load()!r})"


def empty_report(variant, config: LPTConfig, reason: str) -> ScheduleReport:
    return ScheduleReport(None, {"mode": config.mode, "variant": variant.name, "chunked_tiles": 0, "chunk_count": 1,
                                 "chunking_disabled_reason": reason})


def with_report(variant, outputs: Tuple, plan: Optional[FramePlan], config: Optional[LPTConfig],
                return_stats: bool) -> Tuple:
    """A variant's public return: gsplat's outputs, plus the schedule report when `return_stats` is True."""
    if not return_stats:
        return tuple(outputs)
    report = plan.report() if plan is not None else dict(empty_report(variant, config or LPTConfig(), "no images"))
    return (*outputs, report)


def image_dims_of(isect_offsets: Tensor) -> Sequence[int]:
    return tuple(isect_offsets.shape[:-2])
