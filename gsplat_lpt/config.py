"""User-facing settings of the LPT backend: which schedule to run and the cost model's constants.

The backend (gsplat's own kernel, "cuda", or ours, "lpt") is chosen by `backend=` (gsplat_lpt.hook);
`LPTConfig.mode` says how our kernels schedule a frame.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal, Optional, Tuple

from .constants import HEAD_CAPACITY, MAX_CHUNK_COUNTS

Mode = Literal["lpt", "chunk", "fixed", "auto"]
MODES: Tuple[str, ...] = ("lpt", "chunk", "fixed", "auto")
WARP_SHAPES: Tuple[str, ...] = ("auto", "blocks", "rows")
# FrameArgs.warp_blocks of each warp shape: bit P - 1 set where the persistent kernel of P pixels per thread uses
# blocks, bit 2 where the chunk kernel does, bit 3 where the persistent kernel of a chunked frame does; bit 4 where
# the persistent kernel of an unchunked frame that lasts as long as its longest item (the plan's persistent_rows word,
# constants.ROWS_MIN_IMBALANCE) takes rows whatever bits 0-1 say. "auto": the variant's own bits where it declares
# them (Variant.auto_warp_blocks), else these (blocks but with two pixels, rows on latency-bound frames); "blocks"
# and "rows" are what they say in every kernel of every frame
WARP_BLOCK_BITS = {"auto": 0b11101, "blocks": 0b01111, "rows": 0b00000}


def warp_block_bits(warp_shape: str, tile_size: int, auto_bits: Optional[int] = None) -> int:
    """FrameArgs.warp_blocks of a warp shape at a tile size (blocks need tile sizes divisible by 8); auto_bits:
    what "auto" means for the variant (None: WARP_BLOCK_BITS["auto"])."""
    if tile_size % 8 != 0:
        return 0
    if warp_shape == "auto" and auto_bits is not None:
        return auto_bits
    return WARP_BLOCK_BITS[warp_shape]


# lambda, per-chunk overhead (partials written and composited) in Gaussian-equivalent work units; beta,
# penalty on the longest remaining work unit (Eq. 6), with N_total the predicted work (saturation feedback).
# Chosen on one NVIDIA H200 (132 SMs) by timing `auto` with a grid of (lambda, beta) against the best
# schedule of a fixed (rho, k) grid on every imbalanced ladder frame (tests/device/bench_core.py
# --fixed-grid --policy-grid; README, "Calibration"): a large beta makes the policy chunk every item whose
# cost still stands out against the mean work per CTA, which the measured times reward. beta = 3 served the
# kernels that read colours from global memory; with staged colours (faster blending, relatively dearer
# chunks) beta = 2 chunks fewer items: within 4% of the best fixed schedule on every imbalanced ladder frame
# on the GPU's time (mean 0.4% above it), against 6% (mean 2.4%) with beta = 3 in the same run.
# k the policy chooses among. Not 2: on a (rho, k) grid with k = 2 to 64 over seven imbalanced frames (five
# ladder frames, the trained bonsai from 8 units at 1080p and from 14 at 4K; one NVIDIA H200, GPU time,
# examples/results/bench_grid_k2_h200.json), the best schedule with k = 2 was never faster than the best with
# k = 4 (equal on the 4K view, 1.03-1.9x slower elsewhere), yet Eq. (6) chose k = 2 on both bonsai views; on the
# 1080p one auto then took 1.04x and 1.07x the best schedule's time in two runs, and (h, 4) was the best schedule.
DEFAULT_CHUNK_COUNTS = (4, 8, 16, 32, 64)
DEFAULT_OVERHEAD_LAMBDA = 2048.0
DEFAULT_IMBALANCE_BETA = 2.0
# sigma, how long the heaviest item takes per unit of predicted cost against the mean CTA's work: LPT starts it
# first and it ends alone on its SM, where the CTAs that shared the SM have left it the issue slots. Timelines
# of LPT alone on one NVIDIA H200 (tests/device/trace_units.py, tests/device/policy_inputs.py --mode lpt):
# the heaviest item of the "mild" ladder frame, 1.78 times the mean predicted cost per CTA (N_1 K / N_total),
# took 1.45 times the mean CTA's time (521 against 359 us); the heaviest of the garden's three cameras, 1.51
# times, took 1.09 times (205 against 189 us): sigma 0.81 and 0.72. So LPT alone ends at about
# max(N_total / K, sigma N_1), and a frame gains less than min_gain from any chunking where
# sigma N_1 (1 - min_gain) <= N_total / K: the policy leaves it to LPT. (On the garden every chunked schedule
# of a (rho, k) grid was 0-7% slower than LPT alone; the mild frame gained 28%.)
DEFAULT_HEAVY_ITEM_PACE = 0.7
# The lightest item "auto" may chunk, as a multiple of the mean work per CTA that the chunked items leave to the
# LPT queue, (N_total - N_1 - ... - N_h) / K; 0: Eq. (6) alone chooses h. LPT starts its heaviest item first, and at
# its pace sigma an item of up to 1 / sigma times that mean ends within the LPT queue's balance bound, so chunking it
# buys nothing and costs its chunks' overhead. Eq. (6) (beta = 2) goes on chunking such items while N_{h+1} falls:
# 50-67 tiles on the mild and mixed ladder frames, whose heaviest 6-16 chunked were the fastest schedules of a dense
# (h, k) grid (2-4% faster; examples/results/bench_core_dense_grid_h200.json). A floor against N_total / K, as this
# constant first was, left tiles unchunked on the frames whose heavy tiles take a large share of the work (street,
# severe, extreme, veil: 6-19% slower at 1.43): there the chunks take the SMs first and the LPT queue's items share
# what is left, which the mean of the work left to LPT measures and N_total / K does not. A candidate below the floor
# stays in the search where its longest unit left lets the LPT kernel run two pixels per thread (the 6-camera rig at
# (32, 32) took 11% less time than at the (12, 8) the floor alone allowed). One H200 (examples/results/JOURNAL.md, "The floor measured
# against the work left to LPT"): every imbalanced ladder frame within 1.5% of the best fixed schedule (mixed 1.011,
# mild 1.015, veil 1.013), where Eq. (6) alone had mixed at 1.041.
DEFAULT_CHUNKED_COST_FLOOR = 1.0 / DEFAULT_HEAVY_ITEM_PACE


@dataclass(frozen=True)
class LPTConfig:
    """How `backend="lpt"` schedules the alpha-blending stage of one frame.

    mode:
        ``lpt``      persistent kernel, tiles in longest-processing-time-first order (bitwise gsplat);
        ``chunk``    every non-empty tile cut into ``chunk_count`` depth chunks;
        ``fixed``    the heaviest ``heavy_ratio`` fraction of tiles cut into ``chunk_count`` chunks;
        ``auto``     the per-frame policy of Eq. (6) picks (h, k) (default).
    """

    mode: Mode = "auto"
    chunk_count: int = 8  # k for the "chunk" and "fixed" modes
    heavy_ratio: float = 0.01  # rho for the "fixed" mode: fraction of non-empty tiles chunked
    overhead_lambda: float = DEFAULT_OVERHEAD_LAMBDA  # lambda in Eq. (6), in 3DGS evaluations (the plan of a variant
    # whose evaluation takes longer divides it by Variant.evaluation_cost)
    imbalance_beta: float = DEFAULT_IMBALANCE_BETA  # beta in Eq. (6)
    min_gain: float = 0.10  # epsilon: chunk only if the model predicts at least this relative gain
    heavy_item_pace: float = DEFAULT_HEAVY_ITEM_PACE  # sigma: the heaviest item's time per unit of cost, against
    # the mean CTA's; frames with sigma N_1 (1 - min_gain) <= N_total / K are left to LPT alone
    chunked_cost_floor: float = DEFAULT_CHUNKED_COST_FLOOR  # "auto" chunks only items whose predicted cost is
    # above this multiple of the mean work per CTA they leave to LPT (1 / sigma by default; 0: every h up to
    # max_chunked_tiles, as Eq. (6) alone)
    chunk_counts: Tuple[int, ...] = DEFAULT_CHUNK_COUNTS  # candidate k for "auto"
    max_chunked_tiles: int = 255  # upper bound on h searched by "auto" (the plan sorts about that many items exactly)
    max_chunks: int = 4096  # upper bound on h * k: the partial buffers never hold more chunks
    co_execute: bool = True  # run the LPT kernel beside the chunk kernel (else after it)
    saturation_feedback: bool = True  # predict an item's cost from where it stopped in the frame before
    cull: bool = True  # drop, per warp, the Gaussians that cannot reach alpha >= 1/255 there (exact)
    pixels_per_thread: int = 0  # pixels per thread of the LPT kernel: 1, 2 (3DGS, 2DGS), 0 = as the plan of the
    # view's last finished frame asked
    warp_shape: str = "auto"  # pixels of a warp: "blocks" of 8 x 4 pixel groups (tile sizes divisible by 8), "rows"
    # of the tile, or "auto": what measured faster on an H200 for the variant (Variant.auto_warp_blocks): blocks
    # everywhere for 3DGS; for 2DGS and 3DGUT blocks but with two pixels per thread, and rows where nothing is
    # chunked and the heaviest item outlasts the rest (constants.ROWS_MIN_IMBALANCE)
    check_inputs: bool = False  # wait for the GPU after each call and raise on invalid offsets/ids at once
    gsplat_kernel_below: Optional[int] = None  # in the "lpt" and "auto" modes, frames of fewer intersections are
    # rendered by gsplat's own kernel, the same images: on them our plan's host time costs more than our kernels save.
    # None: each variant's count measured on an H200 (Variant.small_frame_intersections); 0: never

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"LPTConfig.mode must be one of {MODES}, got {self.mode!r}"
                             + (" (gsplat's own kernel is backend='cuda')" if self.mode == "vanilla" else ""))
        if self.chunk_count < 1 or self.chunk_count > 64:
            raise ValueError(f"LPTConfig.chunk_count must be in [1, 64], got {self.chunk_count}")
        if not (0.0 <= self.heavy_ratio <= 1.0):
            raise ValueError(f"LPTConfig.heavy_ratio must be in [0, 1], got {self.heavy_ratio}")
        if self.overhead_lambda < 0 or self.imbalance_beta < 0:
            raise ValueError("LPTConfig.overhead_lambda and imbalance_beta must be >= 0")
        if not (0.0 <= self.min_gain < 1.0):
            raise ValueError(f"LPTConfig.min_gain must be in [0, 1), got {self.min_gain}")
        if not (self.chunked_cost_floor >= 0.0):
            raise ValueError(f"LPTConfig.chunked_cost_floor must be >= 0, got {self.chunked_cost_floor}")
        if not (0.0 < self.heavy_item_pace <= 1.0):
            raise ValueError(f"LPTConfig.heavy_item_pace must be in (0, 1], got {self.heavy_item_pace}")
        if not self.chunk_counts or any(k < 2 or k > 64 for k in self.chunk_counts):
            raise ValueError(f"LPTConfig.chunk_counts must be values in [2, 64], got {self.chunk_counts}")
        if len(self.chunk_counts) > MAX_CHUNK_COUNTS:
            raise ValueError(f"LPTConfig.chunk_counts takes at most {MAX_CHUNK_COUNTS} values, got {len(self.chunk_counts)}")
        if not (0 <= self.max_chunked_tiles < HEAD_CAPACITY):
            raise ValueError(f"LPTConfig.max_chunked_tiles must be in [0, {HEAD_CAPACITY - 1}], got {self.max_chunked_tiles}")
        if self.pixels_per_thread not in (0, 1, 2):
            raise ValueError(f"LPTConfig.pixels_per_thread must be 0 (as the plan asks), 1 or 2, "
                             f"got {self.pixels_per_thread}")
        if self.warp_shape not in WARP_SHAPES:
            raise ValueError(f"LPTConfig.warp_shape must be one of {WARP_SHAPES}, got {self.warp_shape!r}")
        if self.gsplat_kernel_below is not None and (isinstance(self.gsplat_kernel_below, bool) or not isinstance(
                self.gsplat_kernel_below, int) or self.gsplat_kernel_below < 0):
            raise ValueError(f"LPTConfig.gsplat_kernel_below must be None (the measured default) or an int >= 0, "
                             f"got {self.gsplat_kernel_below!r}")
        if self.max_chunks < 0:
            raise ValueError(f"LPTConfig.max_chunks must be >= 0, got {self.max_chunks}")

    def replace(self, **changes) -> "LPTConfig":
        return dataclasses.replace(self, **changes)
