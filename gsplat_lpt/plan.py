"""The per-frame plan: tile workloads, LPT order and the chunking policy of Eq. (6).

`plan_frame` looks at one frame's tile lists once and returns a small immutable `FramePlan`;
`runtime.run_plan` launches the kernels that follow it. Everything here is tensor code: the sort
runs on the tensors' device (the GPU in production), the policy on a short host-side prefix of the
sorted workloads, so the whole module is testable on the CPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

import torch
from torch import Tensor

from .config import LPTConfig


@dataclass(frozen=True)
class ChunkingChoice:
    """Result of the cost model for one frame."""

    chunked_tiles: int  # h: the h heaviest tiles are chunked
    chunk_count: int  # k: depth chunks per chunked tile (1 when h == 0)
    predicted_cost: float  # T(h, k) of Eq. (6), Gaussian-equivalent work units
    predicted_cost_lpt: float  # T(0, .): LPT only


@dataclass(frozen=True)
class FramePlan:
    """What the kernels need for one frame, and the facts `meta["lpt"]` reports."""

    mode: str
    lpt_order: Tensor  # [num_items] int32 work items (image * tiles_per_image + tile), heaviest first
    num_items: int  # I * tile_height * tile_width
    total_workload: int  # N_total = sum of tile workloads (n_isects, minus masked tiles)
    max_workload: int  # N_1
    concurrent_ctas: int  # K
    chunked_tiles: int  # h
    chunk_count: int  # k
    predicted_cost: float
    predicted_cost_lpt: float
    chunking_disabled_reason: Optional[str] = None

    @property
    def imbalance(self) -> float:
        """Heaviest tile over the per-CTA share N_total / K (the paper's 'max tile / per-CTA share')."""
        if self.total_workload == 0:
            return 0.0
        return self.max_workload / (self.total_workload / self.concurrent_ctas)

    def report(self) -> Dict[str, Any]:
        return {
            "mode": self.mode,
            "concurrent_ctas": self.concurrent_ctas,
            "imbalance": self.imbalance,
            "num_items": self.num_items,
            "total_workload": self.total_workload,
            "max_workload": self.max_workload,
            "chunked_tiles": self.chunked_tiles,
            "chunk_count": self.chunk_count,
            "predicted_cost": self.predicted_cost,
            "predicted_cost_lpt": self.predicted_cost_lpt,
            "chunking_disabled_reason": self.chunking_disabled_reason,
        }


def tile_workloads(isect_offsets: Tensor, n_isects: int, masks: Optional[Tensor] = None) -> Tensor:
    """N_t for every (image, tile): the length of the tile's range in flatten_ids. [num_items] int32.

    Masked-out tiles do no blending work, so their workload is 0.
    """
    offsets = isect_offsets.reshape(-1)
    ends = torch.empty_like(offsets)
    ends[:-1] = offsets[1:]
    ends[-1:] = n_isects
    workloads = ends - offsets
    if masks is not None:
        workloads = workloads * masks.reshape(-1).to(workloads.dtype)
    return workloads


def lpt_order(workloads: Tensor) -> Tuple[Tensor, Tensor]:
    """Work items sorted by workload, heaviest first (radix sort of the keys on the GPU).

    Returns (sorted workloads, item ids as int32)."""
    sorted_workloads, order = torch.sort(workloads, descending=True)
    return sorted_workloads, order.to(torch.int32)


def estimated_cost(
    sorted_workloads: Tensor, total: float, concurrent_ctas: int, chunk_count: int, overhead_lambda: float, imbalance_beta: float
) -> Tensor:
    """Eq. (6) for every h in [0, len(sorted_workloads)] at one k. [len + 1] float64.

    T(h, k) = max((N_total + lambda h k) / K, l) + beta l,   l(h, k) = max(N_1 / k, N_{h+1}).
    For h = 0 nothing is chunked, so l = N_1 whatever k is.
    """
    counts = sorted_workloads.to(torch.float64)
    n = counts.numel()
    h = torch.arange(n + 1, dtype=torch.float64)
    next_unchunked = torch.cat([counts, counts.new_zeros(1)])  # N_{h+1}; zero once every tile is chunked
    first = counts[0] if n > 0 else counts.new_zeros(())
    longest = torch.maximum(first / chunk_count, next_unchunked)
    longest[0] = first
    average = (total + overhead_lambda * h * chunk_count) / concurrent_ctas
    return torch.maximum(average, longest) + imbalance_beta * longest


def choose_chunking(sorted_head: Tensor, total: float, concurrent_ctas: int, config: LPTConfig) -> ChunkingChoice:
    """The policy of Sec. 4.4: search k in config.chunk_counts and h from 0 up; chunk only if the best
    cost is at least `min_gain` below LPT-only (`sorted_head`: the heaviest workloads, descending)."""
    head = sorted_head[sorted_head > 0][: config.max_chunked_tiles]
    if head.numel() == 0:
        return ChunkingChoice(0, 1, 0.0, 0.0)
    best: Optional[ChunkingChoice] = None
    lpt_cost = None
    for k in config.chunk_counts:
        costs = estimated_cost(head, total, concurrent_ctas, k, config.overhead_lambda, config.imbalance_beta)
        if lpt_cost is None:
            lpt_cost = float(costs[0])
        h = int(torch.argmin(costs))  # first minimum: the fewest chunked tiles among equal costs
        if best is None or float(costs[h]) < best.predicted_cost:
            best = ChunkingChoice(h, k, float(costs[h]), lpt_cost)
    assert best is not None and lpt_cost is not None
    if best.chunked_tiles == 0 or best.predicted_cost > (1.0 - config.min_gain) * lpt_cost:
        return ChunkingChoice(0, 1, lpt_cost, lpt_cost)
    return best


def plan_frame(
    isect_offsets: Tensor,  # [..., tile_height, tile_width] int32
    n_isects: int,
    concurrent_ctas: int,
    config: LPTConfig,
    masks: Optional[Tensor] = None,  # [..., tile_height, tile_width] bool
    chunking_allowed: bool = True,
    chunking_disabled_reason: Optional[str] = None,
) -> FramePlan:
    """Look at the frame once: workloads, LPT order, and (h, k) for the configured mode.

    One device-to-host copy per frame: the heaviest workloads (what the policy reads)."""
    workloads = tile_workloads(isect_offsets, n_isects, masks)
    num_items = workloads.numel()
    sorted_workloads, order = lpt_order(workloads)
    total = n_isects if masks is None else int(workloads.sum())  # masked frames: one extra reduction

    mode = config.mode
    head_length = 1
    if chunking_allowed and mode == "auto":
        head_length = min(num_items, config.max_chunked_tiles + 1)
    elif chunking_allowed and mode in ("chunk", "fixed"):
        head_length = num_items
    head = sorted_workloads[:head_length].to("cpu")  # the frame's one synchronisation
    max_workload = int(head[0]) if num_items > 0 else 0
    nonempty = int((head > 0).sum())  # exact for chunk/fixed (whole list copied)

    h, k = 0, 1
    lpt_cost = max(total / concurrent_ctas, max_workload) + config.imbalance_beta * max_workload
    cost = lpt_cost
    reason = chunking_disabled_reason if not chunking_allowed else None
    if chunking_allowed and max_workload > 0:
        if mode == "auto":
            choice = choose_chunking(head, total, concurrent_ctas, config)
            h, k, cost, lpt_cost = choice.chunked_tiles, choice.chunk_count, choice.predicted_cost, choice.predicted_cost_lpt
        elif mode == "chunk":
            h, k = nonempty, config.chunk_count
        elif mode == "fixed":
            h, k = min(nonempty, math.ceil(config.heavy_ratio * nonempty)), config.chunk_count
        if mode in ("chunk", "fixed") and h > 0:
            cost = float(
                estimated_cost(head, total, concurrent_ctas, k, config.overhead_lambda, config.imbalance_beta)[h]
            )
    if k <= 1:
        h, k = 0, 1
    return FramePlan(
        mode=mode,
        lpt_order=order,
        num_items=num_items,
        total_workload=int(total),
        max_workload=max_workload,
        concurrent_ctas=concurrent_ctas,
        chunked_tiles=h,
        chunk_count=k,
        predicted_cost=float(cost),
        predicted_cost_lpt=float(lpt_cost),
        chunking_disabled_reason=reason,
    )
