"""Where kernels are compiled and launched: the `Rasterizer` (plan and run, as FlashInfer splits them).

One `Rasterizer` per (device, variant, channel count, tile size) owns the compiled kernels, K, the side
stream and a `Workspace` per CUDA stream, reused across frames:

    plan = rasterizer.plan(intersections, config)     # one or two small kernels; nothing waits for the GPU
    rasterizer.run(plan, params, outputs)             # chunk kernel, and the LPT kernel beside it

Kernels are CuPy RawModules over kernels/*.cu (gsplat_lpt.compiler), compiled once per (source, channel
count, CTA size, device) and launched through the CUDA driver (gsplat_lpt.cuda_calls) with their arguments packed as
structs (gsplat_lpt.layouts), on torch's current stream. After the first frames of a given size nothing is allocated per frame but the
outputs; a plan can run twice with equal results, and a frame can be captured in a CUDA graph.
"""

from __future__ import annotations

import ctypes
import math
import threading
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import torch
from torch import Tensor

from . import constants, layouts
from .compiler import (ENV_SHARED_MEMORY_LIMIT, blend_shared_bytes, compile_kernels, import_cupy,  # noqa: F401
                       kernel_dir, kernel_source, plan_kernels, shared_memory_limit)
from .cuda_calls import (STATUS_FRAME_INDEX as _STATUS_FRAME_INDEX, STATUS_WORDS as _STATUS_WORDS, MappedStatus,
                         cluster_width as _cluster_width, cuda_runtime, current_device_index, current_stream_handle,
                         launch as _launch, raw_event as _raw_event, ring_answers as _ring_answers)
from .dependent_launch import DependentLaunch, dependent_launch_available
from .errors import LPTInputError, LPTRuntimeError
from .config import LPTConfig, warp_block_bits
from .report_ring import ReportRing, ReportWords, facts
from .view_memory import ViewMemory

# Partial buffers "auto" starts with (4096 chunks of 256 RGB pixels); later frames grow them to what the
# policy asked for, up to LPTConfig.max_chunks.
INITIAL_PARTIAL_BYTES = 16 << 20


def _pointers(*structs: ctypes.Structure) -> ctypes.Array:
    """kernelParams of a launch: the address of each struct argument."""
    return (ctypes.c_void_p * len(structs))(*[ctypes.addressof(s) for s in structs])


def _address(tensor: Optional[Tensor]) -> int:
    return 0 if tensor is None else tensor.data_ptr()


@dataclass(slots=True)
class Intersections:
    """What every variant shares: one frame's tile lists and image geometry (contiguous; the kernels read
    the offsets as one flat array of num_items)."""

    isect_offsets: Tensor  # [..., tile_height, tile_width] int32
    flatten_ids: Tensor  # [n_isects] int32
    masks: Optional[Tensor]  # [..., tile_height, tile_width] uint8, or None
    num_images: int
    image_width: int
    image_height: int
    tile_size: int
    tile_width: int
    tile_height: int
    num_gaussians: int  # rows of the per-Gaussian arrays (I * N unpacked, nnz packed)
    num_items: int = -1  # (image, tile) work items; -1: counted from the offsets

    def __post_init__(self):
        if self.num_items < 0:
            self.num_items = self.isect_offsets.numel()

    @property
    def n_isects(self) -> int:
        return self.flatten_ids.numel()

    def history_key(self) -> Tuple[int, ...]:
        """The frame's geometry: items, image and tile grid (what the saturation feedback and the kernels'
        frame arguments depend on)."""
        return (self.num_items, self.image_width, self.image_height, self.tile_size, self.tile_width, self.tile_height)


class Workspace:
    """Device buffers of one Rasterizer on one stream, grown on demand and reused by every frame. The
    argument structs of the plan and blending kernels live here too, with the workspace's own pointers
    filled in whenever a buffer changes, so that a call only writes its inputs."""

    def __init__(self, device: torch.device, slot_floats: int, pixels: int):
        self.device = device
        self.slot_floats = slot_floats  # floats a chunk leaves per pixel (partial accumulator + T)
        self.pixels = pixels  # pixels per CTA: a chunk's partials hold slot_floats per pixel
        int32 = dict(dtype=torch.int32, device=device)
        self.report = ReportWords(device)  # schedule, total and predicted: views of one buffer (report_ring)
        self.schedule, self.total, self.predicted = self.report.schedule, self.report.total, self.report.predicted
        self.kept_reports: Optional[ReportRing] = None  # FramePlan.snapshot's copies (built on first use)
        self.histogram = torch.zeros(constants.BUCKET_COUNT, **int32)
        self.cursors = torch.zeros(constants.BUCKET_COUNT, **int32)
        self.items = 0
        self.costs = self.lpt_order = self.sorted_costs = self.item_depth = self.item_length = torch.empty(0, **int32)
        self.chunk_tiles = 0
        self.saturation_flags = self.chunk_arrivals = self.chunk_depth = torch.empty(0, **int32)
        self.chunk_units = 0
        self.partials = self.chunk_transmittance = torch.empty(0, dtype=torch.float32, device=device)
        self.status = MappedStatus(device.index)
        self.seen_frame = -1
        self.auto_frame_finished = False  # a frame planned in auto finished (its status was read)
        self.last_chunking_frame = 0  # the last auto frame that chunked or wanted to, as the status says (0: none)
        self.views = ViewMemory()  # pixels per thread the finished frames' plans asked for, per view
        self.history: Optional[Tuple[int, ...]] = None  # geometry of the frame item_depth describes
        self.planned_frame = -1
        self.frame_args = layouts.FrameArgs()
        self.plan_args = layouts.PlanArgs()
        self.plan_arguments = _pointers(self.plan_args)
        # kernelParams of the blending kernels: (frame_args, params, outputs), the last two set per call
        self.frame_arguments = (ctypes.c_void_p * 3)(ctypes.addressof(self.frame_args), None, None)
        self.plan_config: Optional[LPTConfig] = None  # the config whose constants plan_args holds
        self.frame_config: Optional[LPTConfig] = None  # ... whose switches frame_args holds
        self.frame_geometry: Optional[Tuple[int, ...]] = None  # the frame size frame_args holds (history_key)
        self.ensure_chunk_tiles(constants.HEAD_CAPACITY)  # (the policy chunks at most that many items; points)

    def _point(self) -> None:
        p, f = self.plan_args, self.frame_args
        p.costs, p.histogram, p.cursors = self.costs.data_ptr(), self.histogram.data_ptr(), self.cursors.data_ptr()
        p.schedule, p.total, p.predicted = self.schedule.data_ptr(), self.total.data_ptr(), self.predicted.data_ptr()
        p.lpt_order, p.sorted_costs = self.lpt_order.data_ptr(), self.sorted_costs.data_ptr()
        p.saturation_flags, p.chunk_depth = self.saturation_flags.data_ptr(), self.chunk_depth.data_ptr()
        p.previous_length = self.item_length.data_ptr()
        f.schedule = p.schedule
        f.lpt_order, f.sorted_costs = p.lpt_order, p.sorted_costs
        f.saturation_flags, f.chunk_arrivals = p.saturation_flags, self.chunk_arrivals.data_ptr()
        f.partials, f.item_depth = self.partials.data_ptr(), self.item_depth.data_ptr()
        f.status, f.chunk_depth = self.status.device_address, p.chunk_depth
        f.chunk_transmittance = self.chunk_transmittance.data_ptr()

    def ensure_items(self, count: int) -> None:
        if count > self.items:
            size = max(count, 2 * self.items)
            int32 = dict(dtype=torch.int32, device=self.device)
            self.costs = torch.empty(size, **int32)
            self.lpt_order = torch.empty(size, **int32)
            self.sorted_costs = torch.empty(size, **int32)
            self.item_depth = torch.zeros(size, **int32)
            self.item_length = torch.zeros(size, **int32)  # (what the plan compares the next frame's lists with)
            self.items = size
            self.history = None
            self._point()

    def ensure_chunk_tiles(self, count: int) -> None:
        if count > self.chunk_tiles:
            int32 = dict(dtype=torch.int32, device=self.device)
            self.saturation_flags = torch.empty(count, **int32)
            self.chunk_arrivals = torch.zeros(count, **int32)  # the composite keeps them at zero between frames
            self.chunk_depth = torch.empty(count, **int32)
            self.chunk_tiles = count
            self._point()

    def ensure_chunk_units(self, units: int) -> None:
        if units > self.chunk_units:
            self.partials = torch.empty(units * self.slot_floats * self.pixels, dtype=torch.float32, device=self.device)
            # (-1: not finished; the composite of each item restores that for the next frame)
            self.chunk_transmittance = torch.full((units,), -1.0, dtype=torch.float32, device=self.device)
            self.chunk_units = units
            self._point()


class FramePlan:
    """One frame's plan: (h, k) and the LPT order live in the workspace on the device; `report()` reads
    the facts back (one copy). Valid until the rasterizer plans the next frame on the same stream."""

    __slots__ = ("rasterizer", "workspace", "frame_index", "config", "plan_mode", "intersections", "chunk_kernel",
                 "chunking_disabled_reason", "stream_handle", "uses_feedback", "geometry", "_kept")

    def __init__(self, rasterizer: "Rasterizer", workspace: Workspace, frame_index: int, config: LPTConfig,
                 plan_mode: str, intersections: Intersections, chunk_kernel: bool,
                 chunking_disabled_reason: Optional[str], stream_handle: int = 0, uses_feedback: bool = False,
                 geometry: Optional[Tuple[int, ...]] = None):
        self.rasterizer = rasterizer
        self.workspace = workspace
        self.frame_index = frame_index
        self.config = config
        self.plan_mode = plan_mode  # what the kernels were told ("lpt" when chunking is not allowed)
        self.intersections = intersections
        self.chunk_kernel = chunk_kernel
        self.chunking_disabled_reason = chunking_disabled_reason
        self.stream_handle = stream_handle  # the cudaStream_t it was planned on
        self.uses_feedback = uses_feedback  # costs from where the items stopped in the frame before
        self.geometry = intersections.history_key() if geometry is None else geometry
        self._kept = None

    @property
    def concurrent_ctas(self) -> int:
        return self.rasterizer.concurrent_ctas

    def snapshot(self) -> "FramePlan":
        """Copies this frame's schedule words to page-locked host memory without waiting (one copy into the
        workspace's ReportRing, on the frame's stream and device), so that `report()` still describes this frame
        after later frames reuse the workspace. (A hooked call returns with the caller's device current.)"""
        if current_device_index() != self.rasterizer.device_index:
            with torch.cuda.device(self.rasterizer.device_index):
                return self.snapshot()
        ws = self.workspace
        if ws.kept_reports is None:
            ws.kept_reports = ReportRing(ws.report.words)
        self._kept = ws.kept_reports.keep(self.stream_handle)
        return self

    def report(self) -> Dict:
        """The schedule facts of `meta["lpt"]`: from the snapshot if one was taken, else from the workspace
        (which describes this frame until the next plan on the same stream)."""
        ws = self.workspace
        if self._kept is not None:
            schedule, totals, predicted = facts(self._kept.read())
        else:
            if self.frame_index != ws.planned_frame:
                raise RuntimeError("this FramePlan's report was not kept (FramePlan.snapshot) and the rasterizer has "
                                   "planned another frame since")
            schedule, totals, predicted = facts(ws.report.words.cpu())
        total_length, total_cost = totals
        word = constants.SCHEDULE
        max_cost = schedule[word["max_cost"]]
        K = self.concurrent_ctas
        return {
            "mode": self.config.mode,
            "variant": self.rasterizer.variant.name,
            "concurrent_ctas": K,
            "num_items": self.intersections.num_items,
            "total_workload": total_length,
            "predicted_total_cost": total_cost,
            "max_workload": max_cost,
            "imbalance": 0.0 if total_length == 0 else max_cost / (total_length / K),
            "nonempty_items": schedule[word["nonempty_items"]],
            "chunked_tiles": schedule[word["chunked_tiles"]],
            "chunk_count": schedule[word["chunk_count"]],
            "pixels_per_thread": schedule[word["pixels_per_thread"]],
            "pixels_wanted": schedule[word["pixels_wanted"]],
            "warp_shape": self.warp_shape(schedule),
            "predicted_cost": predicted[0] if self.plan_mode != "lpt" else None,
            "predicted_cost_lpt": predicted[1],
            "saturation_feedback": self.uses_feedback,
            "chunking_disabled_reason": self.chunking_disabled_reason,
        }

    def warp_shape(self, schedule) -> str:
        """"blocks" or "rows": the pixels each warp of the frame's persistent kernel blended."""
        bits, word = warp_block_bits(self.config.warp_shape, self.intersections.tile_size,
                                     self.rasterizer.variant.auto_warp_blocks), constants.SCHEDULE
        bit = 3 if schedule[word["chunked_tiles"]] > 0 else schedule[word["pixels_per_thread"]] - 1
        rows = bit < 3 and (bits >> 4) & 1 and schedule[word["persistent_rows"]]  # (the plan's word, unchunked frames)
        return "blocks" if (bits >> bit) & 1 and not rows else "rows"


SIDE_STREAM_PRIORITY = -1  # torch's high priority (lower is higher)


class Rasterizer:
    """Compiled kernels, K, the side stream and per-stream workspaces of one (device, variant, channels,
    tile size). Get one with `rasterizer_for`."""

    def __init__(self, variant: "variants.Variant", channels: int, tile_size: int, device_index: int):
        self.variant = variant
        self.channels = channels
        self.tile_size = tile_size
        self.pixels = tile_size * tile_size  # pixels per CTA
        self.block = self.pixels  # threads per CTA with one pixel per thread
        self.device, self.device_index = torch.device("cuda", device_index), device_index
        self.max_threads = 1 << max(5, (self.block - 1).bit_length())
        # two pixels per thread where the variant has them, the tile's rows pair up and the channels are few: a second
        # persistent kernel of half the threads, launched where the plan of the last finished frame of the view asked for it
        self.two_pixels = two_pixels_possible(variant, tile_size, channels)
        self.two_pixel_max_imbalance = variant.two_pixel_max_imbalance(channels)  # the plan's rule for asking
        self.two_pixel_chunked_max = variant.two_pixel_chunked_max(channels)  # ... and in a chunked frame
        self.two_pixel_many_items_max = variant.two_pixel_many_items_max(channels)  # ... in one of many items per CTA
        names = variant.kernel_names(channels, self.max_threads)
        exports = variant.export_line(channels, self.max_threads)
        if self.two_pixels:
            names += variant.kernel_names(channels, self.max_threads // 2, 2)[:1]
            exports += variant.export_line(channels, self.max_threads // 2, 2)
        if variant.no_last_ids_kernel:  # the persistent kernels' builds that keep no last_ids
            names += (variant.no_last_ids_kernel_name(channels, self.max_threads),)
            if self.two_pixels:
                names += (variant.no_last_ids_kernel_name(channels, self.max_threads // 2, 2),)
        latency_builds = variant.latency_bound_build and variant.no_last_ids_kernel
        if latency_builds:
            names += variant.latency_bound_kernel_names(channels, self.max_threads)
        kernels = list(compile_kernels(variant.kernel_source, names, variant.kernel_structs(),
                                       variant.extra_checks() + exports, device_index, variant.compile_backend,
                                       variant.compile_options()))
        self.persistent, self.chunk = kernels.pop(0), kernels.pop(0)
        self.persistent_two = kernels.pop(0) if self.two_pixels else None
        self.persistent_no_last_ids = kernels.pop(0) if variant.no_last_ids_kernel else None
        self.persistent_two_no_last_ids = kernels.pop(0) if variant.no_last_ids_kernel and self.two_pixels else None
        self.latency_bound = (kernels.pop(0), kernels.pop(0)) if latency_builds else ()  # (with last_ids, without)
        self.plan_costs, self.plan_order, cluster = plan_kernels(device_index)
        self._plan_costs, self._plan_order = self.plan_costs.kernel.ptr, self.plan_order.kernel.ptr
        # the one-launch plan: (largest frame in items, kernel); none without clusters (or should the build not
        # carry its cluster size: then every frame takes the two launches)
        items = constants.PLAN_CLUSTER * constants.PLAN_THREADS * constants.PLAN_CLUSTER_ITEMS
        builds = ((items, cluster),)
        self.plan_cluster_builds = tuple((largest, kernel.kernel.ptr) for largest, kernel in builds
                                         if kernel is not None and _cluster_width(kernel) == constants.PLAN_CLUSTER)
        self.shared_bytes = blend_shared_bytes(variant.staged_bytes, self.max_threads)
        limit = shared_memory_limit(device_index)
        if self.shared_bytes > limit:
            raise LPTRuntimeError(
                f"the {variant.name} kernels need {self.shared_bytes} bytes of shared memory per CTA at tile size "
                f"{tile_size}; this GPU allows {limit}: use a smaller tile_size")
        if self.shared_bytes > 48 * 1024:
            for kernel in (self.persistent, self.chunk, self.persistent_two, self.persistent_no_last_ids,
                           self.persistent_two_no_last_ids, *self.latency_bound):
                if kernel is not None:
                    kernel.max_dynamic_shared_size_bytes = self.shared_bytes
        self.concurrent_ctas = self._concurrent_ctas(self.persistent, self.block)
        self._persistent, self._chunk = self.persistent.kernel.ptr, self.chunk.kernel.ptr
        if self.two_pixels:  # K of the two-pixel kernel (its CTAs have half the threads)
            self.concurrent_ctas_two = self._concurrent_ctas(self.persistent_two, self.block // 2)
            self._persistent_two = self.persistent_two.kernel.ptr
            # kept where it holds more tiles at once than the one-pixel kernel (on an H200, at every channel
            # count it is built for; with equal counts it was the slower one at 32 channels, 0.88x against 1.02x)
            self.two_pixels = self.concurrent_ctas_two > self.concurrent_ctas
        # compute capability 9.0+: the LPT kernel behind the chunk kernel on one stream, started once every chunk
        # CTA is resident (gsplat_lpt.dependent_launch); elsewhere it runs beside it on the side stream
        self.lpt_behind_chunks = None
        if dependent_launch_available(torch.cuda.get_device_capability(device_index)[0]):
            self.lpt_behind_chunks = {1: DependentLaunch(self._persistent, self.block, self.shared_bytes)}
            if self.two_pixels:
                self.lpt_behind_chunks[2] = DependentLaunch(self._persistent_two, self.block // 2, self.shared_bytes)
        # The persistent kernel of a frame, by (two pixels per thread, the outputs take last_ids): (kernel, grid bound K,
        # threads per CTA, its dependent launch behind the chunk kernel or None). A call whose outputs hold no last_ids
        # pointer runs the build that keeps none, where it holds as many CTAs on the GPU.
        self._persistent_launches = {}
        for two in (False, True):
            if two and not self.two_pixels:
                continue
            kernel, ctas, block = ((self._persistent_two, self.concurrent_ctas_two, self.block // 2) if two
                                   else (self._persistent, self.concurrent_ctas, self.block))
            behind = self.lpt_behind_chunks and self.lpt_behind_chunks[2 if two else 1]
            self._persistent_launches[two, True] = self._persistent_launches[two, False] = (kernel, ctas, block, behind)
            lean = self.persistent_two_no_last_ids if two else self.persistent_no_last_ids
            if lean is not None and self._concurrent_ctas(lean, block) == ctas:
                lean_behind = behind and DependentLaunch(lean.kernel.ptr, block, self.shared_bytes)
                self._persistent_launches[two, False] = (lean.kernel.ptr, ctas, block, lean_behind)
        # an unchunked frame of one pixel per thread: the build for latency-bound frames launched first, by whether the
        # call keeps last_ids (each build returns at once on the other kind of frame; kernels/lpt_core.cuh), where
        # both hold as many CTAs on the GPU as the usual build
        self._latency_bound_launches = {}
        if self.latency_bound and all(self._concurrent_ctas(k, self.block) == self.concurrent_ctas
                                      for k in self.latency_bound):
            self._latency_bound_launches = {True: self.latency_bound[0].kernel.ptr,
                                            False: self.latency_bound[1].kernel.ptr}
        self.slot_floats = variant.partial_floats(channels) + 1
        # (before compute capability 9.0) the chunk kernel's stream, at a higher priority: where both kernels'
        # CTAs wait for SM room, the scheduler prefers the chunks' (it does not order the launches themselves)
        self.side_stream = torch.cuda.Stream(device=self.device, priority=SIDE_STREAM_PRIORITY)
        self._side = self.side_stream.cuda_stream
        # reused events, as raw handles (a torch Event's record and wait cost several us of Python each):
        # the chunk kernel waits for the plan (fork), and the current stream for the chunk kernel (join)
        self._fork, self._join = _raw_event(device_index), _raw_event(device_index)
        self._cuda_runtime = cuda_runtime()
        self._workspaces: Dict[int, Workspace] = {}
        self.frame_counter = 0

    def _concurrent_ctas(self, kernel, block: int) -> int:
        """K: SMs x resident CTAs per SM of a persistent kernel (occupancy API, its real registers and
        shared memory)."""
        from cupy_backends.cuda.api import driver

        per_sm = driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.kernel.ptr, block, self.shared_bytes)
        if per_sm < 1:
            raise LPTRuntimeError(f"the {self.variant.name} kernel cannot run {block} threads per CTA on this GPU")
        return int(torch.cuda.get_device_properties(self.device.index).multi_processor_count * per_sm)

    def workspace(self, stream) -> Workspace:
        """The workspace of a stream (a torch Stream or its cudaStream_t handle)."""
        key = stream if isinstance(stream, int) else stream.cuda_stream
        if key not in self._workspaces:
            self._workspaces[key] = Workspace(self.device, self.slot_floats, self.pixels)
        return self._workspaces[key]

    def reserve(self, chunk_units: int, stream: Optional[torch.cuda.Stream] = None) -> None:
        """Size the partial buffers for `chunk_units` depth chunks now (otherwise "auto" grows them from
        what earlier frames asked for, and renders the first frames of a scene with fewer chunks)."""
        ws = self.workspace(stream or torch.cuda.current_stream(self.device))
        ws.ensure_chunk_units(chunk_units)

    def _absorb_status(self, ws: Workspace, config: LPTConfig) -> Optional[str]:
        """What finished frames left in mapped memory: capacity to grow, or an input error to raise."""
        if ws.status.view[_STATUS_FRAME_INDEX] <= ws.seen_frame:
            return None
        words = ws.status.view[:_STATUS_WORDS]  # (one copy of the status words, not of the ring; no dict per frame)
        frame_index, word = words[_STATUS_FRAME_INDEX], constants.STATUS
        for finished, pixels in _ring_answers(ws.status.view, ws.seen_frame, frame_index) if self.two_pixels else ():
            ws.views.finished(finished, pixels)  # (every frame finished since the last read, each its own view's)
        ws.seen_frame = frame_index
        if words[word["plan_mode"]] == constants.PLAN_MODES["auto"]:  # (other modes say nothing of what auto wants)
            ws.auto_frame_finished = True
        ws.last_chunking_frame = words[word["last_chunking_frame"]]
        wanted = min(words[word["wanted_chunk_units"]], config.max_chunks)
        if wanted > ws.chunk_units:
            ws.ensure_chunk_units(min(config.max_chunks, 1 << (wanted - 1).bit_length()))
        error = words[word["error"]]
        return describe_errors(error, f"frame {frame_index} (an earlier call)") if error else None

    def plan(self, intersections: Intersections, config: LPTConfig, chunking_allowed: bool = True,
             chunking_disabled_reason: Optional[str] = None) -> FramePlan:
        """Costs, LPT order and (h, k) of one frame, on the GPU, without waiting for it."""
        handle = current_stream_handle(self.device_index)
        ws = self._workspaces.get(handle) or self.workspace(handle)
        error = self._absorb_status(ws, config)
        if error is not None:
            raise LPTInputError(error)
        plan_mode = config.mode if chunking_allowed else "lpt"
        num_items = intersections.num_items
        if num_items > ws.items:
            ws.ensure_items(num_items)
        if plan_mode in ("chunk", "fixed"):  # comparison modes: room for every item they may chunk
            tiles = num_items if plan_mode == "chunk" else min(num_items, math.ceil(config.heavy_ratio * num_items))
            ws.ensure_chunk_tiles(tiles)
            ws.ensure_chunk_units(tiles * config.chunk_count)
        elif plan_mode == "auto" and ws.chunk_units == 0:  # a first allocation of at most INITIAL_PARTIAL_BYTES
            ws.ensure_chunk_units(min(config.max_chunks, INITIAL_PARTIAL_BYTES // (4 * self.slot_floats * self.pixels)))
        capacity = 0 if plan_mode == "lpt" else ws.chunk_units
        if plan_mode == "auto" and ws.auto_frame_finished and (
                ws.last_chunking_frame == 0
                or ws.seen_frame - ws.last_chunking_frame >= constants.CHUNKING_MEMORY_FRAMES):
            # No finished frame of this stream chunked or wanted to, or none of the last CHUNKING_MEMORY_FRAMES
            # finished ones (counted from the last finished frame, not from this one: the host may be many frames
            # ahead of the GPU): skip the chunk kernel and its stream fork and join (the plan still says what it
            # would want; a later call reads it back).
            capacity = 0
        geometry = intersections.history_key()
        feedback = config.saturation_feedback and ws.history == geometry

        p = ws.plan_args
        p.tile_offsets = _address(intersections.isect_offsets)
        p.masks = _address(intersections.masks)
        p.previous_depth = ws.frame_args.item_depth if feedback else 0
        p.num_items, p.n_isects = num_items, intersections.n_isects
        p.mode = constants.PLAN_MODES[plan_mode]
        p.chunk_unit_capacity = capacity
        if ws.plan_config is not config:  # the policy's constants, set when the config object changes
            ws.plan_config = config
            p.overhead_lambda = config.overhead_lambda / self.variant.evaluation_cost
            p.imbalance_beta = config.imbalance_beta
            p.min_gain, p.heavy_ratio = config.min_gain, config.heavy_ratio
            p.heavy_item_pace, p.chunked_cost_floor = config.heavy_item_pace, config.chunked_cost_floor
            p.forced_chunk_count = config.chunk_count
            p.max_chunked_tiles = config.max_chunked_tiles
            p.concurrent_ctas, p.two_pixel_max_imbalance = self.concurrent_ctas, self.two_pixel_max_imbalance
            p.two_pixel_chunked_max = self.two_pixel_chunked_max
            p.two_pixel_many_items_max = self.two_pixel_many_items_max
            p.two_pixel_many_items = constants.TWO_PIXEL_MANY_ITEMS_PER_CTA
            p.num_chunk_counts = len(config.chunk_counts)
            for i, k in enumerate(config.chunk_counts):
                p.chunk_counts[i] = k
        # pixels per thread: as asked, else what the plan of the last finished frame of this view wanted (of the
        # last finished frame where no view matches; one at first)
        self.frame_counter += 1
        if self.two_pixels:
            p.two_pixels = config.pixels_per_thread or ws.views.pixels(geometry, intersections.n_isects)
            ws.views.planned(self.frame_counter, geometry, intersections.n_isects)
        else:
            p.two_pixels = 0
        p.frame_index = self.frame_counter
        stream = handle
        for largest, kernel in self.plan_cluster_builds:
            if num_items <= largest:  # one launch: a grid of one cluster
                _launch(kernel, constants.PLAN_CLUSTER, constants.PLAN_THREADS, 0, stream, ws.plan_arguments)
                break
        else:
            grid = (num_items + constants.PLAN_THREADS - 1) // constants.PLAN_THREADS
            _launch(self._plan_costs, grid, constants.PLAN_THREADS, 0, stream, ws.plan_arguments)
            _launch(self._plan_order, grid, constants.PLAN_THREADS, 0, stream, ws.plan_arguments)
        ws.planned_frame = self.frame_counter
        return FramePlan(self, ws, self.frame_counter, config, plan_mode, intersections, capacity > 0,
                         chunking_disabled_reason, handle, feedback, geometry)

    def run(self, plan: FramePlan, params: ctypes.Structure, outputs: ctypes.Structure) -> None:
        """Launch the frame's blending kernels: the chunk kernel, then the persistent LPT kernel beside it
        (started once every chunk CTA is resident; before compute capability 9.0 the chunk kernel runs on the
        side stream, ordered with events); both read h and k on the device. A plan can run more than once
        (the kernels leave the workspace as the plan left it)."""
        ws = plan.workspace
        if plan.frame_index != ws.planned_frame:
            raise RuntimeError("this FramePlan is stale: the rasterizer has planned another frame since")
        inter = plan.intersections
        main = plan.stream_handle
        f = ws.frame_args
        f.tile_offsets, f.flatten_ids = _address(inter.isect_offsets), _address(inter.flatten_ids)
        f.masks = _address(inter.masks)
        f.n_isects, f.num_gaussians = inter.n_isects, inter.num_gaussians
        f.frame_index = plan.frame_index
        f.chunk_unit_capacity = ws.chunk_units if plan.chunk_kernel else 0
        f.finishing_kernels = 2 if plan.chunk_kernel else 1
        if ws.frame_geometry != plan.geometry:  # (most frames keep the size of the one before)
            ws.frame_geometry = plan.geometry
            f.num_items, f.image_width, f.image_height = inter.num_items, inter.image_width, inter.image_height
            f.tile_size, f.tile_width, f.tile_height = inter.tile_size, inter.tile_width, inter.tile_height
        if ws.frame_config is not plan.config:  # the config's switches, set when the config object changes
            ws.frame_config = plan.config
            f.cull = plan.config.cull
            f.warp_blocks = warp_block_bits(plan.config.warp_shape, self.tile_size, self.variant.auto_warp_blocks)
        arguments = ws.frame_arguments
        arguments[1], arguments[2] = ctypes.addressof(params), ctypes.addressof(outputs)

        two, keeps_last_ids = ws.plan_args.two_pixels == 2, bool(getattr(outputs, "last_ids", 1))
        persistent, ctas, block, behind = self._persistent_launches[two, keeps_last_ids]
        latency_bound = None if plan.chunk_kernel or two else self._latency_bound_launches.get(keeps_last_ids)
        f.latency_companion = latency_bound is not None
        if latency_bound is not None:
            _launch(latency_bound, min(ctas, inter.num_items), block, self.shared_bytes, main, arguments)
        if plan.chunk_kernel and plan.config.co_execute and behind is not None:
            # one stream: the chunk kernel, then the LPT kernel, allowed to start as soon as every chunk CTA is
            # resident (each LPT CTA waits for the chunk kernel before it exits)
            _launch(self._chunk, min(self.concurrent_ctas, ws.chunk_units), self.block, self.shared_bytes, main,
                    arguments)
            behind(min(ctas, inter.num_items), main, arguments)
            self._finish(plan)
            return
        if plan.chunk_kernel:
            # The side stream joins back into the current stream below, before anything else runs there,
            # so tensors allocated on the current stream need no record_stream.
            side = self._side if plan.config.co_execute else main
            if side != main:
                self._cuda_runtime.eventRecord(self._fork, main)  # the plan and the inputs are ready
                self._cuda_runtime.streamWaitEvent(side, self._fork, 0)
            grid = min(self.concurrent_ctas, ws.chunk_units)
            # launched first: its CTAs (the heaviest items' chunks) are resident before the LPT kernel's
            _launch(self._chunk, grid, self.block, self.shared_bytes, side, arguments)
        _launch(persistent, min(ctas, inter.num_items), block, self.shared_bytes, main, arguments)
        if plan.chunk_kernel and side != main:
            self._cuda_runtime.eventRecord(self._join, side)
            self._cuda_runtime.streamWaitEvent(main, self._join, 0)
        self._finish(plan)

    def _finish(self, plan: FramePlan) -> None:
        """After the launches: the frame's geometry for the next plan's feedback, and the input check."""
        ws = plan.workspace
        ws.history = plan.geometry
        if plan.config.check_inputs:
            self._cuda_runtime.streamSynchronize(plan.stream_handle)  # (the frame's stream)
            ws.seen_frame = max(ws.seen_frame, plan.frame_index)  # reported here, not again by the next call
            error = describe_errors(int(ws.schedule[constants.SCHEDULE["error"]]), "this call")
            if error is not None:
                raise LPTInputError(error)


def describe_errors(bits: int, where: str) -> Optional[str]:
    if not bits:
        return None
    reasons = "; ".join(message for bit, message in constants.ERROR_MESSAGES.items() if bits & bit)
    return f"invalid rasterize input in {where}: {reasons}"


_rasterizers: Dict[Tuple, Rasterizer] = {}
_rasterizers_lock = threading.Lock()


def reset_rasterizers() -> None:
    """Forget every cached Rasterizer (their workspaces are freed once no plan refers to them)."""
    with _rasterizers_lock:
        _rasterizers.clear()


def forget_stream(stream) -> None:
    """Drop every cached Rasterizer's workspace of a stream (a torch Stream or its handle): what earlier frames left
    there (stop depths, status, buffers). CUDA hands a destroyed stream's handle to a new stream, which would
    otherwise inherit it."""
    key = stream if isinstance(stream, int) else stream.cuda_stream
    for rasterizer in list(_rasterizers.values()):
        rasterizer._workspaces.pop(key, None)


def two_pixels_possible(variant: "variants.Variant", tile_size: int, channels: int = 3) -> bool:
    """Whether a Rasterizer of this variant, tile size and (padded) channel count builds the two-pixel kernel."""
    return variant.pixels_per_thread == 2 and tile_size % 2 == 0 and channels <= variant.two_pixel_max_channels


def rasterizer_for(variant: "variants.Variant", channels: int, tile_size: int, device: torch.device) -> Rasterizer:
    """The cached Rasterizer of (device, variant, channels, tile size); compiled on first use."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    key = (index, variant.name, channels, tile_size)
    rasterizer = _rasterizers.get(key)
    if rasterizer is None:
        with _rasterizers_lock:
            rasterizer = _rasterizers.get(key)
            if rasterizer is None:
                rasterizer = Rasterizer(variant, channels, tile_size, index)
                _rasterizers[key] = rasterizer
    return rasterizer


def tiles_of(width: int, height: int, tile_size: int) -> Tuple[int, int]:
    return math.ceil(width / tile_size), math.ceil(height / tile_size)
