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
    concurrent_ctas: int  # K
    chunked_tiles: int  # h: the first h items of lpt_order are chunked
    chunk_count: int  # k
    predicted_cost: Optional[float]  # T(h, k) of Eq. (6); None when no policy ran (mode "lpt")
    predicted_cost_lpt: Optional[float]
    workload_summary: Tensor  # [2] int64 on the host: (N_1, N_total); may still be in flight, see `ready`
    ready: Optional[Any] = None  # CUDA event after which `workload_summary` is valid (no stall in "lpt")
    chunking_disabled_reason: Optional[str] = None

    def _summary(self) -> Tuple[int, int]:
        if self.ready is not None:
            self.ready.synchronize()
        return int(self.workload_summary[0]), int(self.workload_summary[1])

    @property
    def max_workload(self) -> int:
        """N_1, the heaviest tile's Gaussian count."""
        return self._summary()[0]

    @property
    def total_workload(self) -> int:
        """N_total (masked-out tiles excluded)."""
        return self._summary()[1]

    @property
    def imbalance(self) -> float:
        """Heaviest tile over the per-CTA share N_total / K (the paper's 'max tile / per-CTA share')."""
        max_workload, total = self._summary()
        return 0.0 if total == 0 else max_workload / (total / self.concurrent_ctas)

    def report(self) -> Dict[str, Any]:
        """The schedule facts for `meta["lpt"]` (reads the host copy: call after the kernels are queued)."""
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
    cost is at least `min_gain` below LPT-only.

    `sorted_head`: the heaviest workloads, descending: at least max_chunked_tiles + 1 of them, or all."""
    # N_{h+1} must stay known for every candidate h: search h <= max_chunked_tiles, and beyond the copied
    # head only if the head holds every non-empty tile (then N_{h+1} = 0 past its end).
    head = sorted_head[sorted_head > 0]
    if head.numel() == 0:
        return ChunkingChoice(0, 1, 0.0, 0.0)
    last_h = min(config.max_chunked_tiles, head.numel())
    best: Optional[ChunkingChoice] = None
    lpt_cost = None
    for k in config.chunk_counts:
        costs = estimated_cost(head, total, concurrent_ctas, k, config.overhead_lambda, config.imbalance_beta)
        costs = costs[: last_h + 1]
        if lpt_cost is None:
            lpt_cost = float(costs[0])
        h = int(torch.argmin(costs))  # first minimum: the fewest chunked tiles among equal costs
        if best is None or float(costs[h]) < best.predicted_cost:
            best = ChunkingChoice(h, k, float(costs[h]), lpt_cost)
    assert best is not None and lpt_cost is not None
    if best.chunked_tiles == 0 or best.predicted_cost > (1.0 - config.min_gain) * lpt_cost:
        return ChunkingChoice(0, 1, lpt_cost, lpt_cost)
    return best


def _to_host_async(values: Tensor) -> Tuple[Tensor, Optional[Any]]:
    """Start a device-to-host copy without waiting for it (pinned memory + event)."""
    if not values.is_cuda:
        return values.to(torch.int64).clone(), None
    host = torch.empty(values.shape, dtype=torch.int64, pin_memory=True)
    host.copy_(values.to(torch.int64), non_blocking=True)
    event = torch.cuda.Event()
    event.record()
    return host, event


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

    Mode "lpt" never waits for the GPU; the chunking modes copy the heaviest workloads to the host
    once (what the policy reads): the frame's one synchronisation."""
    workloads = tile_workloads(isect_offsets, n_isects, masks)
    num_items = workloads.numel()
    sorted_workloads, order = lpt_order(workloads)
    mode = config.mode
    plans_chunks = chunking_allowed and mode in ("auto", "chunk", "fixed") and num_items > 0
    reason = None if chunking_allowed else chunking_disabled_reason

    if not plans_chunks:
        total = workloads.sum().reshape(1) if masks is not None else workloads.new_full((1,), n_isects)
        summary, ready = _to_host_async(torch.cat([sorted_workloads[:1], total]) if num_items else total.repeat(2) * 0)
        return FramePlan(mode, order, num_items, concurrent_ctas, 0, 1, None, None, summary, ready, reason)

    head_length = min(num_items, config.max_chunked_tiles + 1) if mode == "auto" else num_items
    head = sorted_workloads[:head_length].to("cpu")  # the frame's one synchronisation
    total = n_isects if masks is None else int(workloads.sum())
    max_workload = int(head[0])
    nonempty = int((head > 0).sum())  # exact for chunk/fixed (whole list copied)
    summary = torch.tensor([max_workload, total], dtype=torch.int64)

    lpt_cost = max(total / concurrent_ctas, max_workload) + config.imbalance_beta * max_workload
    h, k, cost = 0, 1, lpt_cost
    if max_workload > 0:
        if mode == "auto":
            choice = choose_chunking(head, total, concurrent_ctas, config)
            h, k, cost, lpt_cost = choice.chunked_tiles, choice.chunk_count, choice.predicted_cost, choice.predicted_cost_lpt
        else:
            k = config.chunk_count
            h = nonempty if mode == "chunk" else min(nonempty, math.ceil(config.heavy_ratio * nonempty))
            if k > 1 and h > 0:
                cost = float(estimated_cost(head, total, concurrent_ctas, k, config.overhead_lambda, config.imbalance_beta)[h])
    if k <= 1 or h == 0:
        h, k = 0, 1
    return FramePlan(mode, order, num_items, concurrent_ctas, h, k, float(cost), float(lpt_cost), summary, None, reason)
