"""The per-frame plan in PyTorch: tile workloads, predicted costs, the LPT order and the chunking policy of
Eq. (6), step for step as kernels/plan.cu computes them on the GPU.

This is the oracle the GPU plan is tested against, and the planner of the CPU tools (`gsplat-lpt analyze`).
The GPU sorts all items by cost bucket and only the leading items exactly; `plan_schedule` reproduces the
exact part (head count, head order, h, k, predicted costs) and gives the full exact order besides.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple

import torch
from torch import Tensor

from . import constants
from .config import LPTConfig


@dataclass(frozen=True)
class ChunkingChoice:
    """Result of the cost model for one frame."""

    chunked_tiles: int  # h: the h heaviest items are chunked
    chunk_count: int  # k: depth chunks per chunked item (1 when h == 0)
    predicted_cost: float  # T(h, k) of Eq. (6), Gaussian-equivalent work units
    predicted_cost_lpt: float  # T(0, .): LPT only
    wanted_chunk_units: int = 0  # h k the policy would choose with unlimited partial buffers


def tile_workloads(isect_offsets: Tensor, n_isects: int, masks: Optional[Tensor] = None) -> Tensor:
    """N_t for every (image, tile): the length of the tile's range in flatten_ids. [num_items] int32.

    Masked-out tiles do no blending work, so their workload is 0; so do invalid ranges (the GPU flags them)."""
    offsets = isect_offsets.reshape(-1).to(torch.int64)
    ends = torch.empty_like(offsets)
    ends[:-1] = offsets[1:]
    ends[-1:] = n_isects
    valid = (offsets >= 0) & (offsets <= ends) & (ends <= n_isects)
    workloads = torch.where(valid, ends - offsets, torch.zeros_like(offsets))
    if masks is not None:
        workloads = workloads * masks.reshape(-1).to(workloads.dtype)
    return workloads.to(torch.int32)


def same_item(before: Tensor, now: Tensor) -> Tensor:
    """kernels/plan.cu same_item: an item's list length within a quarter of its length in the frame before (the
    same view, moved a little), so that frame's stop depth describes it."""
    return 4 * (now.to(torch.int64) - before.to(torch.int64)).abs() <= now.to(torch.int64)


def predicted_costs(workloads: Tensor, previous_depth: Optional[Tensor] = None,
                    previous_lengths: Optional[Tensor] = None) -> Tensor:
    """An item's cost: its list length, or the depth at which the same item stopped last frame when that
    is smaller (at least 1 for a non-empty item) and the item's list length then (previous_lengths; not given:
    the same) was within a quarter of its length now."""
    if previous_depth is None:
        return workloads
    depth = previous_depth.reshape(-1)[: workloads.numel()].to(workloads.dtype)
    fed_back = workloads > 0
    if previous_lengths is not None:
        fed_back &= same_item(previous_lengths.reshape(-1)[: workloads.numel()], workloads)
    return torch.where(fed_back, torch.clamp_min(torch.minimum(workloads, depth), 1), workloads)


def cost_buckets(costs: Tensor) -> Tensor:
    """kernels/plan.cu cost_bucket: 0 for nothing to do, then 2^BUCKET_SUB_BITS buckets per octave."""
    bits = costs.to(torch.float32).view(torch.int32).to(torch.int64)
    buckets = 1 + ((bits - 0x3F800000) >> (23 - constants.BUCKET_SUB_BITS))
    return torch.where(costs > 0, buckets, torch.zeros_like(buckets))


def lpt_order(costs: Tensor) -> Tuple[Tensor, Tensor]:
    """Work items by cost descending, then item ascending (the GPU's exact order of the head).
    Returns (sorted costs, item ids as int64)."""
    return torch.sort(costs, descending=True, stable=True)


def head_count(costs: Tensor, max_chunked_tiles: int) -> Tuple[int, int]:
    """(items sorted exactly on the GPU, non-empty items): every non-empty item if they fit in
    HEAD_CAPACITY, else whole buckets from the top holding at least max_chunked_tiles + 1 items (fewer
    when one bucket is too large)."""
    buckets = cost_buckets(costs)
    nonempty = int((buckets > 0).sum())
    if nonempty <= constants.HEAD_CAPACITY:
        return nonempty, nonempty
    histogram = torch.bincount(buckets, minlength=constants.BUCKET_COUNT)
    above = torch.flip(torch.cumsum(torch.flip(histogram, [0]), 0), [0]) - histogram  # items in higher buckets
    need = min(max_chunked_tiles + 1, constants.HEAD_CAPACITY)
    bucket = constants.BUCKET_COUNT - 1
    while bucket > 1 and int(above[bucket] + histogram[bucket]) < need:
        bucket -= 1
    inclusive = int(above[bucket] + histogram[bucket])
    return (inclusive if inclusive <= constants.HEAD_CAPACITY else int(above[bucket])), nonempty


def modelled_cost(total: float, n1: float, next_cost: Tensor, h: Tensor, chunk_count: int, concurrent_ctas: int,
                  overhead_lambda: float, imbalance_beta: float) -> Tensor:
    """Eq. (6): T(h, k) = max((N_total + lambda h k) / K, l) + beta l,  l = max(N_1 / k, N_{h+1}); for
    h = 0 nothing is chunked and l = N_1. The mean work per CTA is computed as N_total / K + h (lambda k / K), so
    that the GPU's search needs no division per candidate. Float64, rounded as the GPU rounds it (no fused
    multiply-add)."""
    h = h.to(torch.float64)
    longest = torch.where(h == 0, torch.full_like(h, n1), torch.maximum(torch.full_like(h, n1 / chunk_count), next_cost))
    step = (overhead_lambda * chunk_count) / concurrent_ctas
    average = total / concurrent_ctas + step * h
    return torch.maximum(average, longest) + imbalance_beta * longest


def estimated_cost(sorted_costs: Tensor, total: float, concurrent_ctas: int, chunk_count: int, overhead_lambda: float,
                   imbalance_beta: float) -> Tensor:
    """Eq. (6) for every h in [0, len(sorted_costs)] at one k. [len + 1] float64."""
    counts = sorted_costs.to(torch.float64)
    n = counts.numel()
    next_cost = torch.cat([counts, counts.new_zeros(1)])  # N_{h+1}; zero once every item is chunked
    n1 = float(counts[0]) if n > 0 else 0.0
    return modelled_cost(total, n1, next_cost, torch.arange(n + 1), chunk_count, concurrent_ctas, overhead_lambda,
                         imbalance_beta)


def no_gain_possible(total: float, n1: float, concurrent_ctas: int, config: LPTConfig) -> bool:
    """kernels/plan.cu no_gain_possible, operation for operation: a balanced frame, whose heaviest item at its pace
    (sigma = config.heavy_item_pace: it ends alone on its SM) takes no longer than the mean work per CTA over
    1 - min_gain (sigma N_1 K (1 - min_gain) <= N_total). LPT alone ends within min_gain of the balance bound
    there, and the auto policy leaves it to LPT without sorting the head or searching."""
    return config.heavy_item_pace * n1 * concurrent_ctas * (1.0 - config.min_gain) <= total


def choose_chunking(sorted_head: Tensor, total: float, concurrent_ctas: int, config: LPTConfig,
                    head: Optional[int] = None, nonempty: Optional[int] = None,
                    capacity: Optional[int] = None, two_pixel_chunked_max: float = 0.0) -> ChunkingChoice:
    """The policy of Sec. 4.4: search k in config.chunk_counts and h from 1 up; chunk only if the best
    cost is at least `min_gain` below LPT-only. `sorted_head`: the heaviest costs, descending, exact for
    the first `head` (default: all the positive ones, taken to be every non-empty item). h is searched up to
    max_chunked_tiles, and up to head - 1 unless the head holds every non-empty item (then N_{h+1} = 0
    past it); h k never exceeds `capacity` (the partial buffers). A candidate whose lightest chunked item is
    below the floor stays in the search where its longest unit left is at most two_pixel_chunked_max x N_total / K
    (the variant's bound for two pixels per thread in a chunked frame; 0: no two-pixel kernel): chunking that deep
    lets the LPT kernel run two pixels per thread, a gain Eq. (6) does not price."""
    costs = sorted_head.to(torch.float64)
    positive = int((costs > 0).sum())
    head = positive if head is None else head
    nonempty = positive if nonempty is None else nonempty
    n1 = float(costs[0]) if costs.numel() and nonempty else 0.0
    lpt_cost = float(modelled_cost(total, n1, torch.zeros(1, dtype=torch.float64), torch.zeros(1), 1,
                                   concurrent_ctas, config.overhead_lambda, config.imbalance_beta)[0])
    last_h = min(config.max_chunked_tiles, head if head == nonempty else head - 1)
    if last_h < 1:
        return ChunkingChoice(0, 1, lpt_cost, lpt_cost, 0)
    h = torch.arange(1, last_h + 1)
    padded = torch.cat([costs, costs.new_zeros(last_h + 1)])
    next_cost = padded[h]  # N_{h+1}: zero past the non-empty items
    # the lightest chunked item, N_h, is above config.chunked_cost_floor times the mean work per CTA that the h
    # heaviest items leave to the LPT queue, (N_total - N_1 - ... - N_h) / K (the GPU's prefix sum is exact)
    chunked = torch.cumsum(padded[:last_h], 0)
    above_floor = (padded[h - 1] > config.chunked_cost_floor * ((total - chunked) / concurrent_ctas)
                   if config.chunked_cost_floor > 0 else torch.ones(last_h, dtype=torch.bool))
    limit = math.inf if capacity is None else capacity
    best: Optional[Tuple[float, int, int]] = None  # (cost, k index, h): lexicographic, as the GPU breaks ties
    unbounded: Optional[Tuple[float, int, int]] = None
    for ki, k in enumerate(config.chunk_counts):
        values = modelled_cost(total, n1, next_cost, h, k, concurrent_ctas, config.overhead_lambda, config.imbalance_beta)
        longest = torch.maximum(torch.full_like(next_cost, n1 / k), next_cost)
        two_pixels = (longest * concurrent_ctas <= two_pixel_chunked_max * total) if two_pixel_chunked_max > 0 else False
        values = torch.where(above_floor | two_pixels, values, torch.full_like(values, math.inf))
        i = int(torch.argmin(values))
        if unbounded is None or float(values[i]) < unbounded[0]:
            unbounded = (float(values[i]), ki, i + 1)
        fits = (h * k) <= limit
        if bool(fits.any()):
            masked = torch.where(fits, values, torch.full_like(values, math.inf))
            i = int(torch.argmin(masked))
            if best is None or float(masked[i]) < best[0]:
                best = (float(masked[i]), ki, i + 1)
    bar = (1.0 - config.min_gain) * lpt_cost
    wanted = 0
    if unbounded is not None and unbounded[0] <= bar:
        wanted = unbounded[2] * config.chunk_counts[unbounded[1]]
    if best is None or best[0] > bar:
        return ChunkingChoice(0, 1, lpt_cost, lpt_cost, wanted)
    return ChunkingChoice(best[2], config.chunk_counts[best[1]], best[0], lpt_cost, wanted)


@dataclass
class HostPlan:
    """What kernels/plan.cu leaves in the workspace for one frame, computed in PyTorch."""

    costs: Tensor  # [num_items] predicted cost per item
    sorted_costs: Tensor  # exact order (the GPU: exact for the first `head`, by bucket after)
    lpt_order: Tensor  # [num_items] int64
    head: int
    nonempty: int
    total_workload: int  # sum of list lengths
    total_cost: int  # N_total of Eq. (6): sum of predicted costs (= total_workload without saturation feedback)
    choice: ChunkingChoice
    error: bool  # invalid offsets: the GPU renders NaN and chunks nothing

    @property
    def max_cost(self) -> int:
        return int(self.sorted_costs[0]) if self.sorted_costs.numel() else 0


def pixels_wanted(plan: HostPlan, mode: str, concurrent_ctas: int, two_pixel_max_imbalance: float,
                  two_pixel_chunked_max: float, two_pixel_many_items_max: Optional[float] = None,
                  many_items_per_cta: int = constants.TWO_PIXEL_MANY_ITEMS_PER_CTA) -> int:
    """kernels/plan.cu finish_schedule's rule for the pixels per thread of the next frames: two where the longest
    unit is at most the variant's bound x N_total / K: the heaviest item where nothing is chunked (bound
    two_pixel_max_imbalance, or two_pixel_many_items_max where the frame has at least many_items_per_cta non-empty
    items per CTA; None: the same bound), max(N_1 / k, N_{h+1}) where auto chunks (two_pixel_chunked_max); the
    forced modes keep one pixel in a chunked frame."""
    h, k = plan.choice.chunked_tiles, plan.choice.chunk_count
    n1 = float(plan.max_cost)
    if h == 0:
        many_items = two_pixel_many_items_max is not None and plan.nonempty >= many_items_per_cta * concurrent_ctas
        longest, bound = n1, (two_pixel_many_items_max if many_items else two_pixel_max_imbalance)
    else:
        next_cost = float(plan.sorted_costs[h]) if h < plan.nonempty else 0.0
        longest, bound = max(n1 / k, next_cost), (two_pixel_chunked_max if mode == "auto" else 0.0)
    return 2 if longest * concurrent_ctas <= bound * float(plan.total_cost) else 1


def plan_schedule(isect_offsets: Tensor, n_isects: int, concurrent_ctas: int, config: LPTConfig,
                  masks: Optional[Tensor] = None, previous_depth: Optional[Tensor] = None,
                  capacity: Optional[int] = None, mode: Optional[str] = None,
                  two_pixel_chunked_max: float = 0.0, previous_lengths: Optional[Tensor] = None) -> HostPlan:
    """The whole plan of one frame as the GPU computes it (mode: config.mode unless given; two_pixel_chunked_max:
    the rasterizer's bound where it has a two-pixel kernel, else 0, as in choose_chunking; previous_lengths: the
    list lengths of the frame previous_depth comes from, where they differ from this frame's)."""
    mode = mode or config.mode
    offsets = isect_offsets.reshape(-1)
    workloads = tile_workloads(offsets, n_isects, masks)
    ends = torch.cat([offsets[1:].to(torch.int64), torch.tensor([n_isects])])
    error = bool(((offsets < 0) | (offsets.to(torch.int64) > ends) | (ends > n_isects)).any())
    costs = predicted_costs(workloads, previous_depth, previous_lengths)
    sorted_costs, order = lpt_order(costs)
    head, nonempty = head_count(costs, config.max_chunked_tiles)
    total_cost = int(costs.to(torch.int64).sum())
    total_workload = int(workloads.to(torch.int64).sum())
    K = concurrent_ctas
    n1 = float(sorted_costs[0]) if sorted_costs.numel() else 0.0
    # Eq. (6)'s N_total is the sum of predicted costs (list lengths, lowered by saturation feedback)
    lpt_cost = float(modelled_cost(float(total_cost), n1, torch.zeros(1, dtype=torch.float64), torch.zeros(1), 1, K,
                                   config.overhead_lambda, config.imbalance_beta)[0])
    if error or mode == "lpt":
        choice = ChunkingChoice(0, 1, lpt_cost, lpt_cost, 0)
    elif mode == "auto":
        if no_gain_possible(float(total_cost), n1, K, config):  # (the GPU skips the head sort and the search)
            choice = ChunkingChoice(0, 1, lpt_cost, lpt_cost, 0)
        else:
            choice = choose_chunking(sorted_costs[: head + 1], float(total_cost), K, config, head=head,
                                     nonempty=nonempty, capacity=capacity, two_pixel_chunked_max=two_pixel_chunked_max)
    else:  # "chunk" / "fixed": h and k given
        h = nonempty if mode == "chunk" else min(nonempty, math.ceil(config.heavy_ratio * nonempty))
        k = config.chunk_count
        if h <= 0 or k < 2:
            h, k = 0, 1
        wanted = h * k
        if capacity is not None and h * k > capacity:
            h = capacity // k
        if h == 0:
            k = 1
        next_cost = torch.tensor([float(sorted_costs[h]) if h < nonempty else 0.0], dtype=torch.float64)
        cost = float(modelled_cost(float(total_cost), n1, next_cost, torch.tensor([h]), k, K,
                                   config.overhead_lambda, config.imbalance_beta)[0]) if h else lpt_cost
        choice = ChunkingChoice(h, k, cost, lpt_cost, wanted)
    return HostPlan(costs, sorted_costs, order, head, nonempty, total_workload, total_cost, choice, error)
