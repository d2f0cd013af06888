"""The plan: tile workloads, LPT order and the cost model of Eq. (6) on hand-made count vectors."""

from __future__ import annotations

import pytest
import torch

from gsplat_lpt.config import LPTConfig
from gsplat_lpt.plan import choose_chunking, estimated_cost, lpt_order, plan_frame, tile_workloads


def offsets_for(counts, image_shape):
    """isect_offsets (exclusive prefix sums) for given per-tile counts."""
    counts = torch.tensor(counts, dtype=torch.int32)
    offsets = torch.cumsum(counts, 0) - counts
    return offsets.to(torch.int32).reshape(image_shape), int(counts.sum())


def test_tile_workloads_are_range_lengths():
    offsets, n = offsets_for([3, 0, 7, 1, 0, 9], (2, 1, 3))
    assert tile_workloads(offsets, n).tolist() == [3, 0, 7, 1, 0, 9]


def test_tile_workloads_zero_for_masked_tiles():
    offsets, n = offsets_for([3, 0, 7, 1], (1, 2, 2))
    masks = torch.tensor([[[True, True], [False, True]]])
    assert tile_workloads(offsets, n, masks).tolist() == [3, 0, 0, 1]


def test_lpt_order_heaviest_first_over_all_images():
    offsets, n = offsets_for([5, 1, 0, 40, 2, 9], (2, 1, 3))
    sorted_workloads, order = lpt_order(tile_workloads(offsets, n))
    assert order.dtype == torch.int64
    assert sorted_workloads.tolist() == [40, 9, 5, 2, 1, 0]
    assert order.tolist() == [3, 5, 0, 4, 1, 2]


def test_estimated_cost_by_hand():
    # N = [100, 10, 10, 10], N_total = 130, K = 4, k = 4, lambda = 2, beta = 0.5
    costs = estimated_cost(torch.tensor([100, 10, 10, 10]), 130, 4, 4, 2.0, 0.5)
    # h = 0: l = 100 -> max(32.5, 100) + 50 = 150
    assert costs[0].item() == pytest.approx(150.0)
    # h = 1: l = max(25, 10) = 25; avg = (130 + 8) / 4 = 34.5 -> 34.5 + 12.5
    assert costs[1].item() == pytest.approx(47.0)
    # h = 4: l = max(25, 0) = 25; avg = (130 + 32) / 4 = 40.5 -> 40.5 + 12.5
    assert costs[4].item() == pytest.approx(53.0)


def test_flat_distribution_is_not_chunked():
    counts = torch.full((1000,), 50)
    choice = choose_chunking(counts, 50_000.0, 256, LPTConfig())
    assert choice.chunked_tiles == 0 and choice.chunk_count == 1
    assert choice.predicted_cost == choice.predicted_cost_lpt


def test_single_dominant_tile_is_chunked():
    counts = torch.cat([torch.tensor([20_000]), torch.full((999,), 50)])
    total = float(counts.sum())
    choice = choose_chunking(counts, total, 256, LPTConfig())
    assert choice.chunked_tiles >= 1
    assert choice.chunk_count == 16  # the deepest chunking shortens the critical path most
    assert choice.predicted_cost <= 0.9 * choice.predicted_cost_lpt


def test_min_gain_threshold_decides():
    # LPT-only: max(340.6, 400) + 0.25 * 400 = 500. Chunking the top tile (k = 2): l = max(200, 340) = 340,
    # cost = 340.6 + 85 = 425.6, a 14.9% gain: enough at eps = 10%, not at 20%.
    counts = torch.cat([torch.tensor([400]), torch.full((99,), 340)])
    total = float(counts.sum())  # 34060, K = 100 -> avg 340.6
    base = LPTConfig(chunk_counts=(2,), overhead_lambda=0.0, imbalance_beta=0.25, max_chunked_tiles=1)
    eager = choose_chunking(counts, total, 100, base.replace(min_gain=0.10))
    strict = choose_chunking(counts, total, 100, base.replace(min_gain=0.20))
    gain = 1 - eager.predicted_cost / eager.predicted_cost_lpt
    assert 0.10 <= gain < 0.20
    assert eager.chunked_tiles == 1 and eager.chunk_count == 2
    assert strict.chunked_tiles == 0


def test_overhead_lambda_limits_chunked_tiles():
    counts = torch.cat([torch.full((10,), 5_000), torch.full((990,), 20)])
    total = float(counts.sum())
    cheap = choose_chunking(counts, total, 200, LPTConfig(overhead_lambda=0.0))
    costly = choose_chunking(counts, total, 200, LPTConfig(overhead_lambda=5_000.0))
    assert cheap.chunked_tiles >= 10
    # a high per-chunk overhead buys fewer chunks in all
    assert costly.chunked_tiles * costly.chunk_count < cheap.chunked_tiles * cheap.chunk_count


def test_plan_modes():
    counts = [0] * 50 + [1000] + [10] * 49
    offsets, n = offsets_for(counts, (1, 10, 10))
    lpt_plan = plan_frame(offsets, n, 16, LPTConfig(mode="lpt"))
    lpt = lpt_plan.report()
    assert lpt["chunked_tiles"] == 0 and lpt["max_workload"] == 1000 and lpt["total_workload"] == n
    assert lpt["imbalance"] == pytest.approx(1000 / (n / 16))
    assert int(lpt_plan.lpt_order[0]) == 50 and lpt_plan.chunk_capacity == 0
    chunk_plan = plan_frame(offsets, n, 16, LPTConfig(mode="chunk", chunk_count=4))
    chunk = chunk_plan.report()
    assert (chunk["chunked_tiles"], chunk["chunk_count"]) == (50, 4)  # every non-empty tile
    assert chunk_plan.chunk_capacity == 200 and chunk_plan.saturation_flags[:50].tolist() == [4] * 50
    fixed = plan_frame(offsets, n, 16, LPTConfig(mode="fixed", heavy_ratio=0.1, chunk_count=8)).report()
    assert (fixed["chunked_tiles"], fixed["chunk_count"]) == (5, 8)
    auto = plan_frame(offsets, n, 16, LPTConfig(mode="auto")).report()
    assert auto["chunked_tiles"] >= 1 and auto["predicted_cost"] <= 0.9 * auto["predicted_cost_lpt"]
    blocked = plan_frame(offsets, n, 16, LPTConfig(mode="auto"), chunking_allowed=False,
                         chunking_disabled_reason="why").report()
    assert blocked["chunked_tiles"] == 0 and blocked["chunking_disabled_reason"] == "why"


def test_plan_report_keys():
    offsets, n = offsets_for([4, 4, 4, 4], (1, 2, 2))
    report = plan_frame(offsets, n, 8, LPTConfig()).report()
    assert set(report) >= {"mode", "concurrent_ctas", "imbalance", "chunked_tiles", "chunk_count",
                           "predicted_cost", "predicted_cost_lpt", "total_workload", "max_workload"}
    assert report["imbalance"] == pytest.approx(4 / (16 / 8))


def test_plan_with_no_intersections():
    offsets = torch.zeros((2, 3, 3), dtype=torch.int32)
    for mode in ("lpt", "auto", "chunk"):
        plan = plan_frame(offsets, 0, 8, LPTConfig(mode=mode))
        report = plan.report()
        assert report["chunked_tiles"] == 0 and report["imbalance"] == 0.0 and plan.num_items == 18


def test_max_chunks_bounds_h_times_k():
    counts = torch.cat([torch.full((10,), 10_000), torch.full((990,), 10)])
    unbounded = choose_chunking(counts, float(counts.sum()), 1000, LPTConfig(overhead_lambda=0.0))
    bounded = choose_chunking(counts, float(counts.sum()), 1000, LPTConfig(overhead_lambda=0.0, max_chunks=64))
    assert unbounded.chunked_tiles * unbounded.chunk_count > 64
    assert (bounded.chunked_tiles, bounded.chunk_count) == (10, 4)  # the deepest k that still fits


def test_masked_total_excludes_masked_tiles():
    offsets, n = offsets_for([10, 20, 30, 40], (1, 2, 2))
    masks = torch.tensor([[[True, False], [True, True]]])
    report = plan_frame(offsets, n, 4, LPTConfig(mode="lpt"), masks=masks).report()
    assert report["total_workload"] == 80 and report["max_workload"] == 40
