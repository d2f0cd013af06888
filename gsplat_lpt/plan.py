"""The per-frame plan: tile workloads, LPT order and the chunking policy of Eq. (6).

`plan_frame` looks at one frame's tile lists once and returns a small immutable `FramePlan`;
`runtime.run_plan` launches the kernels that follow it. On the GPU the plan never waits for the host:
the workloads, torch's radix sort and the policy (kernels/frame_plan.cu) run on the device and leave
(h, k) in a small `schedule` tensor that the blending kernels read. The same policy is written here
in PyTorch (`choose_chunking`): it plans CPU tensors, and it is the oracle the GPU policy is tested
against.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
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


# Words of the schedule tensor (kernels/frame_plan.cu writes them on the GPU).
LPT_COUNTER, CHUNKED_TILES, CHUNK_COUNT, CHUNK_COUNTER, MAX_WORKLOAD, NONEMPTY_TILES = range(6)
SCHEDULE_WORDS = 6


@dataclass(frozen=True)
class FramePlan:
    """What the kernels need for one frame, and the facts `meta["lpt"]` reports.

    (h, k) live in `schedule` on the tensors' device; `report()` reads them back (one copy, after the
    kernels are queued). Chunk unit c of the chunk kernel is depth chunk c % k of item lpt_order[c // k].
    """

    mode: str
    lpt_order: Tensor  # [num_items] int64 work items (image * tiles_per_image + tile), heaviest first
    sorted_workloads: Tensor  # [num_items] int32, the workloads in lpt_order
    schedule: Tensor  # [SCHEDULE_WORDS] int32: queue counters, h, k, N_1, non-empty tiles
    predicted_costs: Tensor  # [2] float64: T(h, k) and T(0, .) of Eq. (6)
    saturation_flags: Tensor  # [>= h] int32, set to k by the plan
    num_items: int
    n_isects: int
    concurrent_ctas: int  # K
    chunk_capacity: int  # chunk units the partial buffers must hold (h k <= chunk_capacity)
    masked: bool = False
    chunking_disabled_reason: Optional[str] = None

    def report(self) -> Dict[str, Any]:
        """The schedule facts for `meta["lpt"]` (copies a few words to the host)."""
        schedule = self.schedule.tolist()
        costs = self.predicted_costs.tolist()
        total = int(self.sorted_workloads.sum()) if self.masked else self.n_isects
        max_workload = int(self.sorted_workloads[0]) if self.num_items else 0
        return {
            "mode": self.mode,
            "concurrent_ctas": self.concurrent_ctas,
            "imbalance": 0.0 if total == 0 else max_workload / (total / self.concurrent_ctas),
            "num_items": self.num_items,
            "total_workload": total,
            "max_workload": max_workload,
            "chunked_tiles": schedule[CHUNKED_TILES],
            "chunk_count": schedule[CHUNK_COUNT],
            "predicted_cost": costs[0] if self.mode != "lpt" else None,
            "predicted_cost_lpt": costs[1] if self.mode != "lpt" else None,
            "chunking_disabled_reason": self.chunking_disabled_reason,
        }


class ScheduleReport(Mapping):
    """`meta["lpt"]`: the frame's schedule facts, read back from the device only when first looked at,
    so that a hooked `rasterization` call never waits for the GPU on its own."""

    def __init__(self, plan: "FramePlan", extra: Optional[Dict[str, Any]] = None):
        self._plan = plan
        self._extra = dict(extra or {})
        self._facts: Optional[Dict[str, Any]] = None

    def _load(self) -> Dict[str, Any]:
        if self._facts is None:
            self._facts = {**self._plan.report(), **self._extra}
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
    """Work items sorted by workload, heaviest first: torch's radix sort of the keys on the GPU, the
    Gaussian lists themselves are not moved. Returns (sorted workloads, item ids as int64)."""
    return torch.sort(workloads, descending=True)


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
        costs = costs[: min(last_h, config.max_chunks // k) + 1]  # h k <= max_chunks: the partial buffers
        if lpt_cost is None:
            lpt_cost = float(costs[0])
        h = int(torch.argmin(costs))  # first minimum: the fewest chunked tiles among equal costs
        if best is None or float(costs[h]) < best.predicted_cost:
            best = ChunkingChoice(h, k, float(costs[h]), lpt_cost)
    assert best is not None and lpt_cost is not None
    if best.chunked_tiles == 0 or best.predicted_cost > (1.0 - config.min_gain) * lpt_cost:
        return ChunkingChoice(0, 1, lpt_cost, lpt_cost)
    return best


def _forced_chunking(sorted_workloads: Tensor, config: LPTConfig) -> Tuple[int, int]:
    """(h, k) of the comparison modes: "chunk" cuts every non-empty tile, "fixed" the heaviest rho of them.
    Needs the count of non-empty tiles on the host: these modes synchronise once."""
    nonempty = int((sorted_workloads > 0).sum())
    h = nonempty if config.mode == "chunk" else min(nonempty, math.ceil(config.heavy_ratio * nonempty))
    return (h, config.chunk_count) if h > 0 and config.chunk_count > 1 else (0, 1)


def _plan_on_host(sorted_workloads: Tensor, total: float, concurrent_ctas: int, config: LPTConfig,
                  forced: Optional[Tuple[int, int]], schedule: Tensor, costs: Tensor, flags: Tensor) -> None:
    """The policy in PyTorch, filling the same schedule words as the GPU kernel."""
    n1 = int(sorted_workloads[0]) if sorted_workloads.numel() else 0
    lpt_cost = max(total / concurrent_ctas, n1) + config.imbalance_beta * n1
    if forced is None:
        head = sorted_workloads[: config.max_chunked_tiles + 1]
        choice = choose_chunking(head, total, concurrent_ctas, config)
        h, k, cost = choice.chunked_tiles, choice.chunk_count, choice.predicted_cost
    else:
        h, k = forced
        cost = float(estimated_cost(sorted_workloads, total, concurrent_ctas, k, config.overhead_lambda,
                                    config.imbalance_beta)[h]) if h else lpt_cost
    schedule[CHUNKED_TILES], schedule[CHUNK_COUNT] = h, k
    schedule[MAX_WORKLOAD] = n1
    schedule[NONEMPTY_TILES] = int((sorted_workloads[: config.max_chunked_tiles + 1] > 0).sum())
    costs[0], costs[1] = (cost if h else lpt_cost), lpt_cost
    flags[:h] = k


_lpt_only_schedules: Dict[torch.device, Tensor] = {}


def _lpt_only_schedule(device: torch.device) -> Tensor:
    """Schedule words of a frame with nothing chunked (h = 0, k = 1), kept once per device."""
    if device not in _lpt_only_schedules:
        words = torch.zeros(SCHEDULE_WORDS, dtype=torch.int32)
        words[CHUNK_COUNT] = 1
        _lpt_only_schedules[device] = words.to(device)
    return _lpt_only_schedules[device]


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

    Modes "lpt" and "auto" never wait for the GPU; "chunk" and "fixed" copy one count to the host."""
    device = isect_offsets.device
    on_gpu = device.type == "cuda"
    num_items = isect_offsets.numel()
    policy = chunking_allowed and config.mode in ("auto", "chunk", "fixed") and num_items > 0
    if policy and config.mode == "auto":
        capacity = config.max_chunks
        max_tiles = min(config.max_chunked_tiles, config.max_chunks // min(config.chunk_counts))
    else:
        capacity, max_tiles = 0, 0
    flags = torch.empty(max(max_tiles, 1), dtype=torch.int32, device=device)

    if on_gpu and (config.mode == "auto" or not policy):  # "chunk"/"fixed" count tiles on the host below
        from . import runtime

        if num_items <= runtime.FUSED_PLAN_MAX_ITEMS:
            # the usual frame: one launch plans it all, the host waits for nothing
            order = torch.empty(num_items, dtype=torch.int64, device=device)
            sorted_workloads = torch.empty(num_items, dtype=torch.int32, device=device)
            schedule = torch.empty(SCHEDULE_WORDS, dtype=torch.int32, device=device)
            costs = torch.empty(2, dtype=torch.float64, device=device)
            runtime.plan_frame_fused_on_device(isect_offsets, n_isects, masks, policy, concurrent_ctas, config, order,
                                               sorted_workloads, schedule, flags, costs)
            return FramePlan(config.mode, order, sorted_workloads, schedule, costs, flags, num_items, n_isects,
                             concurrent_ctas, capacity, masks is not None,
                             None if chunking_allowed else chunking_disabled_reason)

    if on_gpu:
        from . import runtime

        workloads = runtime.tile_workloads_on_device(isect_offsets, n_isects, masks)
    else:
        workloads = tile_workloads(isect_offsets, n_isects, masks)
    sorted_workloads, order = lpt_order(workloads)

    forced = _forced_chunking(sorted_workloads, config) if policy and config.mode != "auto" else None
    if forced is not None:
        capacity = forced[0] * forced[1]
        flags = torch.empty(max(forced[0], 1), dtype=torch.int32, device=device)
    schedule = _lpt_only_schedule(device).clone()  # a device-side copy: no host round trip
    costs = torch.zeros(2, dtype=torch.float64, device=device)
    # N_total is n_isects unless tiles are masked out (then one reduction read back: masked frames sync)
    total = float(n_isects) if masks is None else float(workloads.sum())
    if policy and on_gpu:
        from . import runtime

        runtime.choose_chunking_on_device(sorted_workloads, total, concurrent_ctas, config, forced, schedule, costs,
                                          flags)
    elif policy:
        _plan_on_host(sorted_workloads, total, concurrent_ctas, config, forced, schedule, costs, flags)
    return FramePlan(
        mode=config.mode,
        lpt_order=order,
        sorted_workloads=sorted_workloads,
        schedule=schedule,
        predicted_costs=costs,
        saturation_flags=flags,
        num_items=num_items,
        n_isects=n_isects,
        concurrent_ctas=concurrent_ctas,
        chunk_capacity=capacity,
        masked=masks is not None,
        chunking_disabled_reason=None if chunking_allowed else chunking_disabled_reason,
    )
