"""What a Gaussian variant is, in one record per variant; the generic front end, the runtime and the gsplat
hook read these records and nothing else about a variant.

A variant is one evaluator file in kernels/ (its traits struct for the shared scheduling core) plus one
module here holding its `Variant` record: the host twins of its kernel structs, its validation and
argument packing, its autograd Function, and the outputs it produces with whether they compose across
depth chunks. `VARIANTS` maps gsplat's rasterize function names to the records.
"""

from __future__ import annotations

import ctypes
import functools
import os
from dataclasses import dataclass
from typing import Callable, Dict, Optional, Tuple, Type

from .. import constants, layouts


@dataclass(frozen=True)
class OutputSpec:
    name: str
    composes: bool  # exact (up to rounding) when a pixel's list is cut into depth chunks and composited
    backward_only: bool = False  # saved for gsplat's backward (frames that need gradients are never chunked)


@dataclass(frozen=True)
class Variant:
    name: str  # kernel suffix: lpt_persistent_blend_<name>, depth_chunk_blend_<name>
    gsplat_function: str  # the gsplat.rendering global this variant replaces
    kernel_source: str  # the evaluator file in kernels/
    traits: str  # its C++ traits struct
    staged_bytes: int  # sizeof(traits::Staged), checked at compile time
    params_struct: Type[ctypes.Structure]  # host twin of traits::Params
    outputs_struct: Type[ctypes.Structure]  # host twin of traits::Outputs
    partial_floats: Callable[[int], int]  # floats a depth chunk leaves per pixel besides T, per channel count
    outputs: Tuple[OutputSpec, ...]
    rasterize: Callable  # gsplat's signature plus `config=`; returns gsplat's outputs and the FramePlan
    compile_backend: str = "nvrtc"  # or "nvcc" (CuPy runs the CUDA compiler: full C++ headers)
    compile_options: Callable[[], Tuple[str, ...]] = tuple  # extra compiler options (include folders, ...)
    pixels_per_thread: int = 1  # 2: it also has a persistent kernel of two vertically adjacent pixels per thread
    # ... built up to this many channels, and asked for by the plan where nothing is chunked and the heaviest item is
    # at most two_pixel_max_imbalance(channels) x N_total / K
    two_pixel_max_channels: int = constants.TWO_PIXEL_MAX_CHANNELS
    two_pixel_max_imbalance: Callable[[int], float] = constants.two_pixel_max_imbalance
    # ... or this where the frame has at least constants.TWO_PIXEL_MANY_ITEMS_PER_CTA non-empty items per CTA
    two_pixel_many_items_max: Callable[[int], float] = constants.two_pixel_many_items_max
    # ... and in a chunked frame where the longest unit left, max(N_1 / k, N_{h+1}), is at most this x N_total / K
    two_pixel_chunked_max: Callable[[int], float] = constants.two_pixel_chunked_max
    # what warp_shape "auto" means for it: FrameArgs.warp_blocks (config.warp_block_bits), None for
    # config.WARP_BLOCK_BITS["auto"] (blocks in chunked frames too: 2DGS, whose cull drops 98% of the pairs, took 1.6x
    # as long there with rows on the H200)
    auto_warp_blocks: Optional[int] = None
    # a second build of each persistent kernel that keeps no last_ids, launched where the call's Outputs struct holds
    # no last_ids pointer (a call nothing will take gsplat's backward of); the variant's write() must leave last_ids,
    # and any other index only that backward reads (2DGS's median_ids, null with it), alone where their pointers are
    # null, and in that build (write<false>) writes none of them
    no_last_ids_kernel: bool = False
    # (with no_last_ids_kernel; the kernel traits declare kLatencyBoundBuild) builds of the one-pixel persistent kernel
    # for latency-bound frames, with and without last_ids, launched beside the usual build of every unchunked frame
    latency_bound_build: bool = False
    # the time of one Gaussian's evaluation at a pixel against 3DGS's: Eq. (6)'s lambda (LPTConfig.overhead_lambda,
    # a chunk's overhead in 3DGS evaluations) is divided by it, as a chunk's partials cost the same time whatever
    # the variant evaluates (README, "Calibration"; 3DGUT 2; 2DGS keeps 1: on its chunked frames lambda / 1, / 2 and / 4
    # chose the same schedules)
    evaluation_cost: float = 1.0
    # calls of fewer intersections go to gsplat's own function (LPTConfig.gsplat_kernel_below, None). One NVIDIA H200,
    # random Gaussians from 160 x 120 to 1280 x 720 and the trained bonsai, calls enqueued back to back, two runs on
    # hosts whose Python ran at different speeds (tests/device/small_frames.py; examples/results/JOURNAL.md, "Small frames to gsplat's own
    # kernel"): with our kernels 3DGS took longer per call than with gsplat's on every frame up to 55,238
    # intersections in both runs (1.09-1.75x: our host time above gsplat's GPU time, which our kernels shortened by
    # at most 17%) and on the one of 73,107 on the slower host (1.34x, 1.51x; 0.84x, 0.94x on the other), less on
    # every frame from 89,279 (0.11-0.76x); 2DGS likewise up to 58,334 (1.12-2.18x), at 72,726 on the slower host only
    # (1.06x, 1.11x; 0.70x, 0.72x), and less from 171,470 (0.46-0.91x). Handed off, those frames took 1.00-1.31x
    # gsplat's time per call (our front end's few checks and the noise of such short calls).
    small_frame_intersections: int = 80_000

    @functools.cached_property  # (read on every call)
    def chunks_compose(self) -> bool:
        """Whether every output the caller sees composes across depth chunks (else the front end never
        chunks the variant's frames)."""
        return all(output.composes for output in self.outputs if not output.backward_only)

    def kernel_structs(self) -> Tuple[Tuple[str, type], ...]:
        """The structs its kernels take, with their host twins (layout-checked when compiled)."""
        return (("lpt::FrameArgs", layouts.FrameArgs), (f"{self.traits}::Params", self.params_struct),
                (f"{self.traits}::Outputs", self.outputs_struct))

    def kernel_names(self, channels: int, max_threads: int, pixels: int = 1) -> Tuple[str, str]:
        """The extern "C" names of its persistent and chunk kernels for one channel count, CTA size and
        number of pixels per thread."""
        return (f"lpt_persistent_blend_{self.name}_{channels}_{max_threads}_{pixels}",
                f"depth_chunk_blend_{self.name}_{channels}_{max_threads}_{pixels}")

    def no_last_ids_kernel_name(self, channels: int, max_threads: int, pixels: int = 1) -> str:
        """The extern "C" name of its persistent kernel that keeps no last_ids (where no_last_ids_kernel)."""
        return f"lpt_persistent_blend_no_last_ids_{self.name}_{channels}_{max_threads}_{pixels}"

    def latency_bound_kernel_names(self, channels: int, max_threads: int) -> Tuple[str, str]:
        """The extern "C" names of its builds for latency-bound frames (with last_ids, without; where
        latency_bound_build)."""
        return (f"lpt_persistent_blend_latency_{self.name}_{channels}_{max_threads}_1",
                f"lpt_persistent_blend_latency_no_last_ids_{self.name}_{channels}_{max_threads}_1")

    def export_line(self, channels: int, max_threads: int, pixels: int = 1) -> str:
        """The lines appended to its source that instantiate those kernels (kernels/lpt_core.cuh), with the
        persistent kernel that keeps no last_ids, and with one pixel per thread the builds for latency-bound frames,
        where the variant has them."""
        args = f"{self.name}, {self.traits}, {channels}, {max_threads}, {pixels}"
        line = f"LPT_EXPORT_KERNELS({args})\n"
        if self.no_last_ids_kernel:
            line += f"LPT_EXPORT_NO_LAST_IDS_KERNEL({args})\n"
        if self.latency_bound_build and pixels == 1:
            line += f"LPT_EXPORT_LATENCY_BOUND_KERNELS({self.name}, {self.traits}, {channels}, {max_threads})\n"
        return line

    def extra_checks(self) -> str:
        return (f'static_assert(sizeof({self.traits}::Staged) == {self.staged_bytes}, '
                f'"{self.traits}::Staged: size differs from the Variant record (gsplat_lpt)");\n')


def fast_math_options() -> Tuple[str, ...]:
    """gsplat compiles its kernels with -use_fast_math unless NO_FAST_MATH=1 (gsplat.cuda._backend): __expf and
    every float operation then flush denormals to zero, and divisions and square roots are approximate. A
    variant compiled the same way computes the same floats as gsplat's kernel, and the shorter exp2 sequence
    (no denormal range fix-up) is cheaper in the per-pixel loop."""
    return () if os.getenv("NO_FAST_MATH", "0") == "1" else ("--use_fast_math",)


VARIANTS: Dict[str, Variant] = {}  # gsplat function name -> record


def register(variant: Variant) -> Variant:
    if variant.small_frame_intersections < 0:
        raise ValueError(f"Variant {variant.name}: small_frame_intersections must be >= 0")
    if not variant.evaluation_cost > 0:
        raise ValueError(f"Variant {variant.name}: evaluation_cost must be > 0, got {variant.evaluation_cost}")
    VARIANTS[variant.gsplat_function] = variant
    return variant


from . import gaussian3d  # noqa: E402,F401  (registers 3DGS)
from . import gaussian3dgut  # noqa: E402,F401  (registers 3DGUT)
from . import surfel2d  # noqa: E402,F401  (registers 2DGS)
