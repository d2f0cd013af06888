"""Where kernels are compiled and launched: CuPy RawModules over `kernels/*.cu`, cached per
(variant, channel count, device), and `run_plan`, which launches the kernels a `FramePlan` asks for.

Nothing is compiled on the per-frame path after the first frame of a given channel count: modules,
occupancy and the side stream are cached. Tensors stay torch tensors; kernels get raw pointers and
run on torch's current stream (the chunk kernel on a side stream, ordered with CUDA events).
"""

from __future__ import annotations

import contextlib
import functools
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional, Tuple

import numpy as np
import torch
from torch import Tensor

from .plan import FramePlan

# Source file of each variant's Evaluator, and the shared-memory bytes its Staged struct takes per
# Gaussian (sizeof(Evaluator::Staged) in the .cu file) on top of one int id.
VARIANT_SOURCES = {"3dgs": "blend_3dgs.cu"}
VARIANT_STAGED_BYTES = {"3dgs": 24}


def kernel_dir() -> Path:
    """`kernels/` in a source checkout, or the `gsplat_lpt.kernels` package data in a wheel."""
    source_tree = Path(__file__).resolve().parent.parent / "kernels"
    if (source_tree / "scheduling.cuh").is_file():
        return source_tree
    import importlib.resources

    return Path(str(importlib.resources.files("gsplat_lpt.kernels")))


def import_cupy():
    try:
        import cupy  # noqa: F401
        from cupy_backends.cuda.api import driver  # noqa: F401
    except ImportError as error:
        raise RuntimeError(
            "gsplat_lpt needs CuPy to compile and launch its CUDA kernels, and it is not installed: "
            "pip install 'gsplat-lpt[cuda12]' (cupy-cuda12x) or 'gsplat-lpt[cuda13]' (cupy-cuda13x), "
            "matching your CUDA driver"
        ) from error
    return cupy


@dataclass(frozen=True)
class VariantKernels:
    persistent: object  # cupy.RawKernel: lpt_persistent_blend_<variant><CDIM>
    chunk: object  # depth_chunk_blend_<variant><CDIM>
    reduce: object  # reduce_depth_chunks_<variant><CDIM>


_compile_lock = threading.Lock()


@functools.lru_cache(maxsize=None)
def variant_kernels(variant: str, channels: int, device_index: int) -> VariantKernels:
    cupy = import_cupy()
    if variant not in VARIANT_SOURCES:
        raise ValueError(f"no kernels for variant {variant!r}; known: {sorted(VARIANT_SOURCES)}")
    directory = kernel_dir()
    path = directory / VARIANT_SOURCES[variant]
    names = {
        "persistent": f"lpt_persistent_blend_{variant}<{channels}>",
        "chunk": f"depth_chunk_blend_{variant}<{channels}>",
        "reduce": f"reduce_depth_chunks_{variant}<{channels}>",
    }
    with _compile_lock, cupy.cuda.Device(device_index):
        try:
            module = cupy.RawModule(
                code=path.read_text(),
                options=("-std=c++17", f"-I{directory}"),
                name_expressions=tuple(names.values()),
            )
            kernels = {role: module.get_function(name) for role, name in names.items()}
            for kernel in kernels.values():
                kernel.compile()  # compile now, not inside the first timed launch
        except Exception as error:  # CuPy raises CompileException and driver errors
            raise RuntimeError(f"CuPy failed to compile {path.name} for {channels} channels: {error}") from error
    return VariantKernels(**kernels)


def shared_bytes(variant: str, block_size: int) -> int:
    return block_size * (4 + VARIANT_STAGED_BYTES[variant])


@functools.lru_cache(maxsize=None)
def concurrent_ctas(variant: str, channels: int, block_size: int, device_index: int) -> int:
    """K: SMs x resident CTAs per SM of the persistent kernel, from the occupancy API with its real
    register and shared-memory use."""
    import_cupy()
    from cupy_backends.cuda.api import driver

    kernel = variant_kernels(variant, channels, device_index).persistent
    per_sm = driver.occupancyMaxActiveBlocksPerMultiprocessor(
        kernel.kernel.ptr, block_size, shared_bytes(variant, block_size)
    )
    if per_sm < 1:
        raise RuntimeError(f"the {variant} persistent kernel cannot run {block_size} threads per CTA on this GPU")
    sm_count = torch.cuda.get_device_properties(device_index).multi_processor_count
    return int(sm_count * per_sm)


_side_streams: Dict[int, torch.cuda.Stream] = {}
_external_streams: Dict[int, object] = {}


def side_stream(device_index: int) -> torch.cuda.Stream:
    if device_index not in _side_streams:
        _side_streams[device_index] = torch.cuda.Stream(device=device_index)
    return _side_streams[device_index]


def _cupy_stream(stream: torch.cuda.Stream):
    cupy = import_cupy()
    handle = stream.cuda_stream
    if handle not in _external_streams:
        _external_streams[handle] = cupy.cuda.ExternalStream(handle)
    return _external_streams[handle]


@contextlib.contextmanager
def on_device(device_index: int):
    """CuPy and torch both pointed at the tensors' GPU for the launches of one frame."""
    cupy = import_cupy()
    with torch.cuda.device(device_index), cupy.cuda.Device(device_index):
        yield


def _ptr(tensor: Optional[Tensor], offset_elements: int = 0) -> np.uint64:
    if tensor is None:
        return np.uint64(0)
    return np.uint64(tensor.data_ptr() + offset_elements * tensor.element_size())


def _launch(kernel, stream: torch.cuda.Stream, grid: int, block: int, shared: int, args: Tuple) -> None:
    with _cupy_stream(stream):
        kernel((grid,), (block,), args, shared_mem=shared)


@dataclass
class BlendArguments:
    """Flattened, contiguous, padded inputs of one rasterize call (what every kernel reads)."""

    variant: str
    gaussian_arrays: Tuple[Optional[Tensor], ...]  # a0..a3 of the Evaluator, e.g. (means2d, conics, opacities)
    colors: Tensor  # [I*N or nnz, CDIM]
    backgrounds: Optional[Tensor]  # [I, CDIM]
    masks: Optional[Tensor]  # [I * tile_height * tile_width] uint8
    isect_offsets: Tensor  # [I * tile_height * tile_width] int32
    flatten_ids: Tensor  # [n_isects] int32
    num_images: int
    image_width: int
    image_height: int
    tile_size: int
    tile_width: int
    tile_height: int

    @property
    def channels(self) -> int:
        return self.colors.shape[-1]

    @property
    def block_size(self) -> int:
        return self.tile_size * self.tile_size

    def geometry(self) -> Tuple:
        return (np.uint32(self.image_width), np.uint32(self.image_height), np.uint32(self.tile_size),
                np.uint32(self.tile_width), np.uint32(self.tile_height))

    def gaussian_pointers(self) -> Tuple:
        arrays = tuple(self.gaussian_arrays) + (None,) * (4 - len(self.gaussian_arrays))
        return tuple(_ptr(a) for a in arrays)


def run_plan(plan: FramePlan, args: BlendArguments, co_execute: bool = True) -> Tuple[Tensor, Tensor, Tensor]:
    """Launch the kernels of one frame: chunk kernel (side stream) beside the LPT persistent kernel
    (torch's current stream), then the reduction. Returns colors, alphas and last_ids."""
    device = args.colors.device
    device_index = device.index if device.index is not None else torch.cuda.current_device()
    kernels = variant_kernels(args.variant, args.channels, device_index)
    I, H, W, C = args.num_images, args.image_height, args.image_width, args.channels
    render_colors = torch.empty((I, H, W, C), dtype=torch.float32, device=device)
    render_alphas = torch.empty((I, H, W, 1), dtype=torch.float32, device=device)
    last_ids = torch.empty((I, H, W), dtype=torch.int32, device=device)
    n_isects = args.flatten_ids.numel()
    block = args.block_size
    shared = shared_bytes(args.variant, block)
    common = (_ptr(args.isect_offsets), _ptr(args.flatten_ids), np.int32(n_isects), np.int32(plan.num_items),
              *args.geometry())
    main = torch.cuda.current_stream(device)
    h, k = plan.chunked_tiles, plan.chunk_count

    if h > 0:
        saturation_flags = torch.full((h,), k, dtype=torch.int32, device=device)
        partial_colors = torch.empty((h * k * block * C,), dtype=torch.float32, device=device)
        partial_transmittance = torch.empty((h * k * block,), dtype=torch.float32, device=device)
        chunk_stream = side_stream(device_index) if co_execute else main
        if chunk_stream is not main:
            chunk_stream.wait_stream(main)  # the plan (sort) and inputs are ready
            used_on_side = (saturation_flags, partial_colors, partial_transmittance, plan.lpt_order, args.colors,
                            args.isect_offsets, args.flatten_ids, *[a for a in args.gaussian_arrays if a is not None])
            for tensor in used_on_side:
                tensor.record_stream(chunk_stream)
        _launch(kernels.chunk, chunk_stream, h * k, block, shared,
                (_ptr(plan.lpt_order), np.int32(k), _ptr(saturation_flags), *common, *args.gaussian_pointers(),
                 _ptr(args.colors), _ptr(partial_colors), _ptr(partial_transmittance)))

    queue_counter = torch.zeros((1,), dtype=torch.int32, device=device)
    queue_length = plan.num_items - h
    if queue_length > 0:
        grid = min(plan.concurrent_ctas, queue_length)
        _launch(kernels.persistent, main, grid, block, shared,
                (_ptr(plan.lpt_order, h), np.int32(queue_length), _ptr(queue_counter), *common,
                 *args.gaussian_pointers(), _ptr(args.colors), _ptr(args.backgrounds), _ptr(args.masks),
                 _ptr(render_colors), _ptr(render_alphas), _ptr(last_ids)))

    if h > 0:
        if chunk_stream is not main:
            main.wait_stream(chunk_stream)
        _launch(kernels.reduce, main, h, block, 0,
                (_ptr(plan.lpt_order), np.int32(k), *args.geometry(), _ptr(partial_colors),
                 _ptr(partial_transmittance), _ptr(args.backgrounds), _ptr(render_colors), _ptr(render_alphas),
                 _ptr(last_ids)))
    return render_colors, render_alphas, last_ids
