"""The per-frame plan's GPU time on synthetic 1080p frames (16 x 16 tiles, 8,160 work items per image): one
and four images, balanced and imbalanced, with and without saturation feedback, in auto and lpt mode; the
one-launch cluster plan (plan_cluster) beside the two launches of many CTAs (plan_costs,
plan_order), both through `Rasterizer.plan` as a rasterize call runs it. Kernel time per plan from the torch
profiler (CUPTI); each plan checked against the PyTorch oracle (gsplat_lpt.plan: h, k, head count, predicted
cost, the exactly sorted head). About 20 s on an H200; the table comes last.

    python3 tests/device/bench_plan.py [--images 1 4 8] [--calls 30]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import gsplat_lpt  # noqa: E402
from gsplat_lpt import LPTConfig, constants, runtime  # noqa: E402
from gsplat_lpt.plan import no_gain_possible, plan_schedule  # noqa: E402
from gsplat_lpt.variants import VARIANTS  # noqa: E402
from bench_core import kernel_times_us  # noqa: E402  (the profiler's per-kernel times)

TILES_X, TILES_Y = 120, 68  # 1920 x 1080 at 16 x 16 pixels per tile
PLAN_KERNELS = ("plan_cluster", "plan_costs", "plan_order")


def synthetic_counts(images: int, imbalanced: bool, seed: int = 0) -> torch.Tensor:
    """Intersections per (image, tile): balanced, 100-250 everywhere; imbalanced, a background of 20-120 with
    three hot spots per image that peak at 30,000 (a few dozen tiles far above the mean work per CTA, so that
    the auto policy sorts the head and searches)."""
    g = torch.Generator().manual_seed(seed)
    shape = (images, TILES_Y, TILES_X)
    if not imbalanced:
        return (100 + torch.rand(shape, generator=g) * 150).to(torch.int32)
    counts = 20 + torch.rand(shape, generator=g) * 100
    y = torch.arange(TILES_Y, dtype=torch.float32)[:, None]
    x = torch.arange(TILES_X, dtype=torch.float32)[None, :]
    for image in range(images):
        for _ in range(3):
            cy, cx = float(torch.rand(1, generator=g)) * TILES_Y, float(torch.rand(1, generator=g)) * TILES_X
            sigma = 1.0 + float(torch.rand(1, generator=g))
            counts[image] += 30_000 * torch.exp(-((y - cy) ** 2 + (x - cx) ** 2) / (2 * sigma**2))
    return counts.to(torch.int32)


def saturation_depths(counts: torch.Tensor, seed: int = 1) -> torch.Tensor:
    """Where each item stopped in the frame before: heavy items (over 2,000) saturated at 20-60% of their list."""
    g = torch.Generator().manual_seed(seed)
    share = 0.2 + 0.4 * torch.rand(counts.shape, generator=g)
    return torch.where(counts > 2000, (counts * share).to(torch.int32), counts).reshape(-1)


def kernel_us(fn, calls: int) -> dict:
    """GPU time per call of each plan kernel (exact names), from the profiler's CUDA activity."""
    times = {}
    for key, us in kernel_times_us(fn, calls, warmup=3).items():
        name = key.split("(")[0].strip()
        if name in PLAN_KERNELS:
            times[name] = times.get(name, 0.0) + us
    return times


class Frame:
    def __init__(self, images: int, imbalanced: bool):
        self.name = f"{images} x 1080p {'imbalanced' if imbalanced else 'balanced'}"
        counts = synthetic_counts(images, imbalanced)
        flat = counts.reshape(-1)
        self.offsets = (torch.cumsum(flat, 0) - flat).to(torch.int32).reshape(counts.shape)
        self.n_isects = int(flat.sum())
        self.depths = saturation_depths(counts)
        n = flat.numel()
        ids = torch.zeros(self.n_isects, dtype=torch.int32, device="cuda")
        self.inter = runtime.Intersections(self.offsets.cuda(), ids, None, images, 1920, 1080, 16, TILES_X, TILES_Y,
                                           num_gaussians=1)
        assert self.inter.num_items == n


def prepare_feedback(rasterizer, frame: Frame, config: LPTConfig, feedback: bool) -> None:
    """Make the next plan of `frame` read (or not) the stop depths of a previous frame, as a rasterize call after
    a rendered frame of the same size does: the workspace's item_depth and the geometry it describes."""
    rasterizer.plan(frame.inter, config)  # sizes the workspace (which forgets its history when it grows)
    ws = rasterizer.workspace(runtime.current_stream_handle(rasterizer.device.index))
    if feedback:
        ws.item_depth[: frame.inter.num_items].copy_(frame.depths.cuda())
        ws.history = frame.inter.history_key()
    else:
        ws.history = None


def check(rasterizer, frame: Frame, config: LPTConfig, feedback: bool) -> str:
    """The GPU plan against gsplat_lpt.plan.plan_schedule: '' if equal, else what differs."""
    prepare_feedback(rasterizer, frame, config, feedback)
    plan = rasterizer.plan(frame.inter, config)
    assert plan.uses_feedback == feedback
    torch.cuda.synchronize()
    ws = plan.workspace
    capacity = ws.chunk_units if config.mode != "lpt" else 0
    oracle = plan_schedule(frame.offsets, frame.n_isects, rasterizer.concurrent_ctas, config,
                           previous_depth=frame.depths if feedback else None, capacity=capacity,
                           two_pixel_chunked_max=rasterizer.two_pixel_chunked_max if rasterizer.two_pixels else 0.0)
    report = plan.report()
    schedule = ws.schedule.tolist()
    problems = []
    if (report["chunked_tiles"], report["chunk_count"]) != (oracle.choice.chunked_tiles, oracle.choice.chunk_count):
        problems.append(f"(h, k) {report['chunked_tiles'], report['chunk_count']} != "
                        f"{oracle.choice.chunked_tiles, oracle.choice.chunk_count}")
    if schedule[constants.SCHEDULE["head_count"]] != oracle.head:
        problems.append(f"head {schedule[constants.SCHEDULE['head_count']]} != {oracle.head}")
    if report["predicted_total_cost"] != oracle.total_cost or report["max_workload"] != oracle.max_cost:
        problems.append("N_total or N_1")
    if config.mode == "auto":
        if report["predicted_cost"] != oracle.choice.predicted_cost:
            problems.append(f"T(h, k) {report['predicted_cost']} != {oracle.choice.predicted_cost}")
        K = rasterizer.concurrent_ctas
        hopeless = no_gain_possible(float(oracle.total_cost), float(oracle.max_cost), K, config)  # (no head sort)
        if not hopeless and not torch.equal(ws.lpt_order[: oracle.head].cpu().long(), oracle.lpt_order[: oracle.head]):
            problems.append("head order")
    n = frame.inter.num_items
    if not torch.equal(torch.sort(ws.lpt_order[:n].cpu().long()).values, torch.arange(n)):
        problems.append("order is no permutation")
    return "; ".join(problems)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--modes", nargs="+", default=["auto", "lpt"], choices=["auto", "lpt", "fixed"],
                        help="plan modes (fixed: the heaviest 0.5%% of the items in 8 chunks each)")
    args = parser.parse_args()
    rasterizer = gsplat_lpt.rasterizer_for(VARIANTS["rasterize_to_pixels"], 3, 16, torch.device("cuda"))
    cluster_builds = rasterizer.plan_cluster_builds
    device = torch.cuda.get_device_name()
    print(f"{device}: K = {rasterizer.concurrent_ctas}, one-launch builds (largest frame, items): "
          f"{[largest for largest, _ in cluster_builds] or 'none (no thread-block clusters)'}")
    rows, failures = [], 0
    for images in args.images:
        for imbalanced in (False, True):
            frame = Frame(images, imbalanced)
            for feedback in (False, True):
                for mode in args.modes:
                    config = LPTConfig(mode=mode, heavy_ratio=0.005, chunk_count=8)
                    row = {"frame": frame.name, "feedback": feedback, "mode": mode}
                    for path, builds in (("cluster", cluster_builds), ("grid", ())):
                        if path == "cluster" and not cluster_builds:
                            continue
                        rasterizer.plan_cluster_builds = builds
                        try:
                            problem = check(rasterizer, frame, config, feedback)
                            prepare_feedback(rasterizer, frame, config, feedback)
                            times = kernel_us(lambda: rasterizer.plan(frame.inter, config), args.calls)
                        finally:
                            rasterizer.plan_cluster_builds = cluster_builds
                        stream = runtime.current_stream_handle(rasterizer.device.index)
                        report = rasterizer.workspace(stream).schedule.tolist()
                        row[path] = (times, problem)
                        word = constants.SCHEDULE
                        row["hk"] = (report[word["chunked_tiles"]], report[word["chunk_count"]])
                        row["head"] = report[constants.SCHEDULE["head_count"]]
                        failures += bool(problem)
                        if problem:
                            print(f"MISMATCH {frame.name} feedback={feedback} {mode} {path}: {problem}")
                    rows.append(row)

    def cell(row, path):
        if path not in row:
            return f"{'-':>22}"
        times, problem = row[path]
        parts = "+".join(f"{us:.1f}" for name, us in sorted(times.items(), key=lambda kv: PLAN_KERNELS.index(kv[0])))
        total = sum(times.values())
        return f"{total:>7.1f} ({parts})"[:22].rjust(22) + ("" if not problem else " !")

    print()
    print(f"plan GPU time per frame, us (per kernel in brackets; '!': differs from the oracle), {args.calls} calls")
    print(f"{'frame':<24} {'feedback':>8} {'mode':>5} {'items':>6} {'head':>5} {'h, k':>9} "
          f"{'one cluster':>22} {'two launches':>22}  oracle")
    for row in rows:
        items = int(row["frame"].split(" x ")[0]) * TILES_X * TILES_Y
        hk = f"{row['hk'][0]}, {row['hk'][1]}"
        ok = "ok" if all(not row[p][1] for p in ("cluster", "grid") if p in row) else "MISMATCH"
        feedback = "yes" if row["feedback"] else "no"
        print(f"{row['frame']:<24} {feedback:>8} {row['mode']:>5} {items:>6} {row['head']:>5} {hk:>9} "
              f"{cell(row, 'cluster')} {cell(row, 'grid')}  {ok}")
    if failures:
        raise SystemExit(f"{failures} plans differ from the oracle")


if __name__ == "__main__":
    main()
