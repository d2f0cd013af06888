"""Calibrating lambda and beta of the cost model (Eq. 6) on your GPU.

The paper leaves lambda (per-chunk overhead) and beta (penalty on the longest work unit) open. This
procedure measures, on a set of frames, the blend time of LPT-only and of a grid of forced (h, k)
schedules, then picks the (lambda, beta) whose policy, choosing among exactly those measured
schedules, loses least against the fastest measured schedule of each frame (geometric mean of
chosen time / best time). It is re-runnable on any GPU: `gsplat-lpt calibrate` (see README).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import torch

from ..config import LPTConfig
from ..plan import estimated_cost

CHUNK_COUNTS = LPTConfig().chunk_counts
LAMBDA_GRID = (0.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0)
BETA_GRID = (0.0, 0.05, 0.1, 0.25, 0.5, 1.0)


@dataclass
class FrameMeasurements:
    """One frame: its sorted tile workloads (head), K, N_total, and measured ms per schedule."""

    name: str
    sorted_head: List[int]  # heaviest workloads, descending
    total: int
    concurrent_ctas: int
    lpt_ms: float
    schedule_ms: Dict[Tuple[int, int], float] = field(default_factory=dict)  # (h, k) -> ms
    # what "auto" with the constants of the run chose at run time (its own plan, after the same warm-up
    # frames), and its time among the schedules: where it differs from policy_choice on sorted_head, the
    # run-time plan saw other costs than this snapshot
    auto_choice: Optional[Tuple[int, int]] = None
    auto_ms: Optional[float] = None

    def best_ms(self) -> float:
        return min([self.lpt_ms, *self.schedule_ms.values()])


def candidate_heights(nonempty: int, limit: int = 512) -> List[int]:
    """h = 1, 2, 4, ... up to min(limit, non-empty tiles): a geometric grid of chunked-tile counts."""
    heights, h = [], 1
    while h <= min(limit, nonempty):
        heights.append(h)
        h *= 2
    return heights


def policy_choice(frame: FrameMeasurements, overhead_lambda: float, imbalance_beta: float,
                  min_gain: float = 0.10) -> Optional[Tuple[int, int]]:
    """The schedule Eq. (6) picks among the measured ones (None = LPT only)."""
    head = torch.tensor(frame.sorted_head, dtype=torch.float64)
    lpt_cost = None
    best: Optional[Tuple[float, Tuple[int, int]]] = None
    for k in sorted({k for _, k in frame.schedule_ms}):
        costs = estimated_cost(head, frame.total, frame.concurrent_ctas, k, overhead_lambda, imbalance_beta)
        lpt_cost = float(costs[0])
        for (h, kk) in frame.schedule_ms:
            if kk == k and h < costs.numel():
                cost = float(costs[h])
                if best is None or cost < best[0]:
                    best = (cost, (h, k))
    if best is None or lpt_cost is None or best[0] > (1.0 - min_gain) * lpt_cost:
        return None
    return best[1]


def regret(frames: Sequence[FrameMeasurements], overhead_lambda: float, imbalance_beta: float) -> float:
    """Geometric mean over frames of (time of the policy's choice) / (fastest measured time)."""
    logs = []
    for frame in frames:
        choice = policy_choice(frame, overhead_lambda, imbalance_beta)
        chosen_ms = frame.lpt_ms if choice is None else frame.schedule_ms[choice]
        logs.append(math.log(chosen_ms / frame.best_ms()))
    return math.exp(sum(logs) / len(logs))


def fit(frames: Sequence[FrameMeasurements], lambdas=LAMBDA_GRID, betas=BETA_GRID) -> Dict:
    """Grid search of (lambda, beta); ties go to the smaller lambda, then the smaller beta."""
    table = {(lam, beta): regret(frames, lam, beta) for lam, beta in itertools.product(lambdas, betas)}
    (lam, beta), score = min(table.items(), key=lambda item: (round(item[1], 6), item[0]))
    return {"overhead_lambda": lam, "imbalance_beta": beta, "mean_slowdown_vs_best": score,
            "grid": [{"overhead_lambda": l, "imbalance_beta": b, "mean_slowdown_vs_best": s}
                     for (l, b), s in sorted(table.items())]}


def measure_frame(name: str, frame, repeats: int = 11, max_height: int = 512) -> FrameMeasurements:
    """Times LPT-only and every forced (h, k) of the grid on one frame (`frame`: frame.BlendInputs), after a
    few frames that let the saturation feedback learn each item's stop depth, as "auto" would see them."""
    from ..plan import lpt_order, predicted_costs, tile_workloads
    from ..runtime import rasterizer_for
    from ..variants import VARIANTS
    from .timing import median_ms, time_interleaved

    channels = frame.colors.shape[-1]
    rasterizer = rasterizer_for(VARIANTS["rasterize_to_pixels"], channels, frame.tile_size, frame.colors.device)
    K = rasterizer.concurrent_ctas
    for _ in range(3):
        frame.blend("auto", LPTConfig(mode="auto"))
    workspace = rasterizer.workspace(torch.cuda.current_stream(frame.colors.device))
    workloads = tile_workloads(frame.isect_offsets, frame.flatten_ids.numel())
    costs, _ = lpt_order(predicted_costs(workloads, workspace.item_depth[: workloads.numel()]))
    nonempty = int((costs > 0).sum())
    heights = candidate_heights(nonempty, max_height)
    head = costs[: (heights[-1] if heights else 0) + 1].tolist()
    variants = {"lpt": lambda: frame.blend("lpt", LPTConfig(mode="lpt")),
                "auto": lambda: frame.blend("auto", LPTConfig(mode="auto"))}
    for h, k in itertools.product(heights, CHUNK_COUNTS):
        # "fixed" takes ceil(rho * non-empty tiles): this rho gives exactly h
        config = LPTConfig(mode="fixed", heavy_ratio=(h - 0.5) / nonempty, chunk_count=k)
        variants[f"{h},{k}"] = (lambda c=config: frame.blend("fixed", c))
    times = time_interleaved(variants, repeats=repeats)
    report = frame.blend_with_stats("auto", LPTConfig(mode="auto"))[-1]
    return FrameMeasurements(
        name=name, sorted_head=head, total=int(costs.to(torch.int64).sum()), concurrent_ctas=K,
        lpt_ms=median_ms(times["lpt"]),
        schedule_ms={(h, k): median_ms(times[f"{h},{k}"]) for h, k in itertools.product(heights, CHUNK_COUNTS)},
        auto_choice=(int(report["chunked_tiles"]), int(report["chunk_count"])), auto_ms=median_ms(times["auto"]),
    )


def save(frames: Sequence[FrameMeasurements], result: Dict, path: Path, tile_size: int = 16) -> None:
    """calibration.json: the tile size measured at, every frame's measurements and the fit."""
    payload = {"tile_size": tile_size,
               "frames": [{**asdict(f), "schedule_ms": {f"{h},{k}": ms for (h, k), ms in f.schedule_ms.items()}}
                          for f in frames], "fit": result}
    from .output import write_json

    write_json(path, payload)
