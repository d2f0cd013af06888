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
import warnings
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
    """`kernels/` in a source checkout, or `gsplat_lpt/kernels/` where a wheel installed them."""
    package = Path(__file__).resolve().parent
    for candidate in (package.parent / "kernels", package / "kernels"):
        if (candidate / "scheduling.cuh").is_file():
            return candidate
    raise RuntimeError(f"gsplat_lpt's CUDA sources (kernels/*.cu) are missing next to {package}")


def import_cupy():
    try:
        import cupy  # noqa: F401
        from cupy_backends.cuda.api import driver  # noqa: F401  (occupancy API: checked here, used later)
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


@functools.lru_cache(maxsize=None)
def plan_kernels(device_index: int) -> Dict[str, object]:
    """kernels/frame_plan.cu: tile workloads and the chunking policy, compiled once per device."""
    cupy = import_cupy()
    path = kernel_dir() / "frame_plan.cu"
    with _compile_lock, cupy.cuda.Device(device_index):
        try:
            module = cupy.RawModule(code=path.read_text(), options=("-std=c++17",))
            kernels = {name: module.get_function(name)
                       for name in ("tile_workloads", "choose_chunking", "plan_frame_fused")}
            kernels["plan_frame_fused"].max_dynamic_shared_size_bytes = FUSED_PLAN_MAX_ITEMS * 8
            for kernel in kernels.values():
                kernel.compile()
        except Exception as error:
            raise RuntimeError(f"CuPy failed to compile {path.name}: {error}") from error
    return kernels


# Work items the fused plan kernel sorts in shared memory (64-bit keys, 128 KiB): a 1080p frame has 8,160.
FUSED_PLAN_MAX_ITEMS = 16384


_chunk_count_tables: Dict[Tuple, Tensor] = {}


def _chunk_count_table(config, device: torch.device) -> Tensor:
    key = (config.chunk_counts, device.index)
    if key not in _chunk_count_tables:  # a device copy per candidate list, made once
        _chunk_count_tables[key] = torch.tensor(config.chunk_counts, dtype=torch.int32, device=device)
    return _chunk_count_tables[key]


def plan_frame_fused_on_device(isect_offsets: Tensor, n_isects: int, masks: Optional[Tensor], run_policy: bool,
                               concurrent_ctas: int, config, lpt_order: Tensor, sorted_workloads: Tensor,
                               schedule: Tensor, saturation_flags: Tensor, costs: Tensor) -> None:
    """Workloads, LPT order and policy of one frame in one launch (frames of <= FUSED_PLAN_MAX_ITEMS items)."""
    num_items = isect_offsets.numel()
    padded = max(64, 1 << max(0, (num_items - 1).bit_length()))  # as the kernel pads
    device = isect_offsets.device
    kernel = plan_kernels(device.index)["plan_frame_fused"]
    mask_bytes = None if masks is None else masks.reshape(-1).view(torch.uint8)
    _launch(kernel, torch.cuda.current_stream(device), 1, 1024, padded * 8,
            (_ptr(isect_offsets), np.int32(num_items), np.int32(n_isects), _ptr(mask_bytes), np.int32(run_policy),
             np.int32(concurrent_ctas), np.float64(config.overhead_lambda), np.float64(config.imbalance_beta),
             np.float64(config.min_gain), _ptr(_chunk_count_table(config, device)), np.int32(len(config.chunk_counts)),
             np.int32(config.max_chunked_tiles), np.int32(config.max_chunks), _ptr(lpt_order), _ptr(sorted_workloads),
             _ptr(schedule), _ptr(saturation_flags), _ptr(costs)))


def tile_workloads_on_device(isect_offsets: Tensor, n_isects: int, masks: Optional[Tensor]) -> Tensor:
    """N_t of every work item, one kernel (the sort key of the LPT order). [num_items] int32"""
    num_items = isect_offsets.numel()
    workloads = torch.empty(num_items, dtype=torch.int32, device=isect_offsets.device)
    kernel = plan_kernels(isect_offsets.device.index)["tile_workloads"]
    mask_bytes = None if masks is None else masks.reshape(-1).view(torch.uint8)
    _launch(kernel, torch.cuda.current_stream(isect_offsets.device), (num_items + 255) // 256, 256, 0,
            (_ptr(isect_offsets), np.int32(num_items), np.int32(n_isects), _ptr(mask_bytes), _ptr(workloads)))
    return workloads


def choose_chunking_on_device(sorted_workloads: Tensor, total: float, concurrent_ctas: int, config,
                              forced: Optional[Tuple[int, int]], schedule: Tensor, costs: Tensor,
                              saturation_flags: Tensor) -> None:
    """The policy kernel: one CTA writes h, k, N_1 and the predicted costs into `schedule` / `costs`."""
    device = sorted_workloads.device
    forced_h, forced_k = forced if forced is not None else (-1, 0)
    kernel = plan_kernels(device.index)["choose_chunking"]
    _launch(kernel, torch.cuda.current_stream(device), 1, 1024, 0,
            (_ptr(sorted_workloads), np.int32(sorted_workloads.numel()), np.float64(total), np.int32(concurrent_ctas),
             np.float64(config.overhead_lambda), np.float64(config.imbalance_beta), np.float64(config.min_gain),
             _ptr(_chunk_count_table(config, device)), np.int32(len(config.chunk_counts)), np.int32(config.max_chunked_tiles),
             np.int32(config.max_chunks), np.int32(forced_h), np.int32(forced_k), _ptr(schedule),
             _ptr(saturation_flags), _ptr(costs)))


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
    """CuPy's view of a torch stream (cached: made once per stream)."""
    cupy = import_cupy()
    handle = stream.cuda_stream
    if handle not in _external_streams:
        with warnings.catch_warnings():  # CuPy 14 prefers Stream.from_external; ExternalStream works on 12-14
            warnings.simplefilter("ignore", DeprecationWarning)
            _external_streams[handle] = cupy.cuda.ExternalStream(handle, stream.device.index)
    return _external_streams[handle]


@contextlib.contextmanager
def on_device(device_index: int):
    """CuPy and torch both pointed at the tensors' GPU for the launches of one frame."""
    cupy = import_cupy()
    if device_index == torch.cuda.current_device() and device_index == cupy.cuda.runtime.getDevice():
        yield  # the usual case: nothing to switch
        return
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
    """Launch the kernels of one frame: the chunk kernel (side stream) beside the LPT persistent kernel
    (torch's current stream), then the reduction. Both read h and k from `plan.schedule` on the device,
    so nothing waits for the host. Returns colors, alphas and last_ids."""
    device = args.colors.device
    device_index = device.index if device.index is not None else torch.cuda.current_device()
    kernels = variant_kernels(args.variant, args.channels, device_index)
    I, H, W, C = args.num_images, args.image_height, args.image_width, args.channels
    render_colors = torch.empty((I, H, W, C), dtype=torch.float32, device=device)
    render_alphas = torch.empty((I, H, W, 1), dtype=torch.float32, device=device)
    last_ids = torch.empty((I, H, W), dtype=torch.int32, device=device)
    block = args.block_size
    shared = shared_bytes(args.variant, block)
    common = (_ptr(args.isect_offsets), _ptr(args.flatten_ids), np.int32(args.flatten_ids.numel()),
              np.int32(plan.num_items), *args.geometry())
    main = torch.cuda.current_stream(device)
    workers = plan.concurrent_ctas

    chunking = plan.chunk_capacity > 0
    if chunking:
        partial_colors = torch.empty((plan.chunk_capacity * block * C,), dtype=torch.float32, device=device)
        partial_transmittance = torch.empty((plan.chunk_capacity * block,), dtype=torch.float32, device=device)
        chunk_stream = side_stream(device_index) if co_execute else main
        if chunk_stream is not main:
            chunk_stream.wait_stream(main)  # the plan (sort, policy) and the inputs are ready
            used_on_side = (partial_colors, partial_transmittance, plan.lpt_order, plan.schedule, plan.saturation_flags,
                            args.colors, args.isect_offsets, args.flatten_ids,
                            *[a for a in args.gaussian_arrays if a is not None])
            for tensor in used_on_side:
                tensor.record_stream(chunk_stream)
        # launched first, so its CTAs (the heaviest tiles' chunks) are resident before the LPT kernel's
        _launch(kernels.chunk, chunk_stream, min(workers, plan.chunk_capacity), block, shared,
                (_ptr(plan.lpt_order), _ptr(plan.schedule), _ptr(plan.saturation_flags), *common,
                 *args.gaussian_pointers(), _ptr(args.colors), _ptr(partial_colors), _ptr(partial_transmittance)))

    _launch(kernels.persistent, main, min(workers, plan.num_items), block, shared,
            (_ptr(plan.lpt_order), _ptr(plan.schedule), *common, *args.gaussian_pointers(), _ptr(args.colors),
             _ptr(args.backgrounds), _ptr(args.masks), _ptr(render_colors), _ptr(render_alphas), _ptr(last_ids)))

    if chunking:
        if chunk_stream is not main:
            main.wait_stream(chunk_stream)
        _launch(kernels.reduce, main, min(workers, plan.saturation_flags.numel()), block, 0,
                (_ptr(plan.lpt_order), _ptr(plan.schedule), *args.geometry(), _ptr(partial_colors),
                 _ptr(partial_transmittance), _ptr(args.backgrounds), _ptr(render_colors), _ptr(render_alphas),
                 _ptr(last_ids)))
    return render_colors, render_alphas, last_ids
