"""The plan in PyTorch (the oracle of kernels/plan.cu): workloads, costs, buckets, head, Eq. (6), policy."""

from __future__ import annotations

import math

import pytest
import torch

from gsplat_lpt import constants
from gsplat_lpt.config import LPTConfig
from gsplat_lpt.plan import (
    choose_chunking,
    cost_buckets,
    estimated_cost,
    head_count,
    lpt_order,
    no_gain_possible,
    pixels_wanted,
    plan_schedule,
    predicted_costs,
    same_item,
    tile_workloads,
)


def offsets_for(counts, image_shape):
    """isect_offsets (exclusive prefix sums) for given per-tile counts."""
    counts = torch.tensor(counts, dtype=torch.int32)
    offsets = torch.cumsum(counts, 0) - counts
    return offsets.to(torch.int32).reshape(image_shape), int(counts.sum())


def test_tile_workloads_are_range_lengths():
    offsets, n = offsets_for([3, 0, 7, 1, 0, 9], (2, 1, 3))
    assert tile_workloads(offsets, n).tolist() == [3, 0, 7, 1, 0, 9]


def test_tile_workloads_zero_for_masked_tiles_and_invalid_ranges():
    offsets, n = offsets_for([3, 0, 7, 1], (1, 2, 2))
    masks = torch.tensor([[[True, True], [False, True]]])
    assert tile_workloads(offsets, n, masks).tolist() == [3, 0, 0, 1]
    decreasing = torch.tensor([0, 5, 2, 8], dtype=torch.int32)
    assert tile_workloads(decreasing, 9).tolist() == [5, 0, 6, 1]
    past_end = torch.tensor([0, 5, 20], dtype=torch.int32)
    assert tile_workloads(past_end, 9).tolist() == [5, 0, 0]


def test_lpt_order_heaviest_first_over_all_images_ties_by_item():
    offsets, n = offsets_for([5, 1, 0, 40, 2, 9, 5], (1, 1, 7))
    sorted_workloads, order = lpt_order(tile_workloads(offsets, n))
    assert order.dtype == torch.int64
    assert sorted_workloads.tolist() == [40, 9, 5, 5, 2, 1, 0]
    assert order.tolist() == [3, 5, 0, 6, 4, 1, 2]


def test_cost_buckets_are_monotone_fine_and_bounded():
    costs = torch.tensor([0, 1, 2, 3, 15, 16, 17, 1000, 1040, 1100, 2**31 - 1], dtype=torch.int32)
    buckets = cost_buckets(costs)
    assert buckets[0] == 0 and torch.all(buckets[1:] >= 1)
    assert torch.all(buckets[1:] >= buckets[:-1])
    assert int(buckets.max()) < constants.BUCKET_COUNT
    assert buckets[1] != buckets[2] != buckets[3]  # small costs are exact
    wide = torch.arange(1, 200_000, 7, dtype=torch.int32)
    b = cost_buckets(wide)
    for bucket in b.unique()[::97]:  # items in one bucket differ by less than 2^(1/16)
        members = wide[b == bucket]
        assert float(members.max()) / float(members.min()) < 2 ** (1 / 16) + 1e-9


def test_predicted_costs_take_the_previous_stop_depth():
    workloads = torch.tensor([100, 100, 0, 5, 50], dtype=torch.int32)
    depth = torch.tensor([40, 300, 10, 0, 50], dtype=torch.int32)
    assert predicted_costs(workloads, depth).tolist() == [40, 100, 0, 1, 50]
    assert predicted_costs(workloads, None) is workloads


def test_a_stop_depth_describes_only_an_item_about_as_long_as_it_was():
    """Another camera's frame of the same size (cameras taken in turn on one stream): where an item's list is more
    than a quarter longer or shorter than in the frame the depth comes from, its cost is its list length."""
    workloads = torch.tensor([100, 100, 100, 100, 4000, 0], dtype=torch.int32)
    depth = torch.tensor([40, 40, 40, 40, 30, 10], dtype=torch.int32)
    before = torch.tensor([100, 75, 74, 125, 40, 0], dtype=torch.int32)
    assert predicted_costs(workloads, depth, before).tolist() == [40, 40, 100, 40, 4000, 0]
    assert predicted_costs(workloads, depth, workloads).tolist() == predicted_costs(workloads, depth).tolist()
    assert same_item(torch.tensor([75, 74, 0]), torch.tensor([100, 100, 0])).tolist() == [True, False, True]


def test_head_holds_every_nonempty_item_when_it_fits():
    costs = torch.tensor([0, 5, 9, 0, 2], dtype=torch.int32)
    assert head_count(costs, 100) == (3, 3)


def test_head_is_whole_buckets_from_the_top_when_items_are_many():
    g = torch.Generator().manual_seed(1)
    costs = (torch.rand(20_000, generator=g) ** 6 * 50_000).to(torch.int32) + 1
    head, nonempty = head_count(costs, 100)
    assert nonempty == 20_000 and 101 <= head <= constants.HEAD_CAPACITY
    buckets = cost_buckets(torch.sort(costs, descending=True).values)
    assert buckets[head - 1] != buckets[head]  # the head ends at a bucket boundary


def test_head_of_a_flat_frame_can_be_empty():
    costs = torch.full((5000,), 100, dtype=torch.int32)  # one bucket larger than the head capacity
    assert head_count(costs, 100) == (0, 5000)
    choice = choose_chunking(torch.sort(costs, descending=True).values[:1], 5000 * 100.0, 256, LPTConfig(),
                             head=0, nonempty=5000)
    assert choice.chunked_tiles == 0


def test_estimated_cost_by_hand():
    # N = [100, 10, 10, 10], N_total = 130, K = 4, k = 4, lambda = 2, beta = 0.5
    costs = estimated_cost(torch.tensor([100, 10, 10, 10]), 130, 4, 4, 2.0, 0.5)
    assert costs[0].item() == pytest.approx(150.0)  # h = 0: l = 100 -> max(32.5, 100) + 50
    assert costs[1].item() == pytest.approx(47.0)  # h = 1: l = max(25, 10); avg = (130 + 8) / 4 = 34.5
    assert costs[4].item() == pytest.approx(53.0)  # h = 4: l = max(25, 0); avg = (130 + 32) / 4 = 40.5


def test_flat_distribution_is_not_chunked():
    counts = torch.full((1000,), 50)
    choice = choose_chunking(counts, 50_000.0, 256, LPTConfig())
    assert choice.chunked_tiles == 0 and choice.chunk_count == 1 and choice.wanted_chunk_units == 0
    assert choice.predicted_cost == choice.predicted_cost_lpt


def test_single_dominant_tile_is_chunked_deeply():
    counts = torch.cat([torch.tensor([20_000]), torch.full((999,), 50)])
    choice = choose_chunking(counts, float(counts.sum()), 256, LPTConfig())
    assert choice.chunked_tiles >= 1
    assert choice.chunk_count == 64  # the deepest chunking shortens the critical path most
    assert choice.predicted_cost <= 0.9 * choice.predicted_cost_lpt


def test_min_gain_threshold_decides():
    # LPT-only: max(340.6, 400) + 0.25 * 400 = 500. Chunking the top tile (k = 2): l = max(200, 340) = 340,
    # cost = 340.6 + 85 = 425.6, a 14.9% gain: enough at eps = 10%, not at 20%.
    counts = torch.cat([torch.tensor([400]), torch.full((99,), 340)])
    total = float(counts.sum())  # 34060, K = 100 -> avg 340.6
    # (Eq. (6) alone: 400 is not above 1 / sigma times the 339.6 per CTA that chunking it leaves to LPT)
    base = LPTConfig(chunk_counts=(2,), overhead_lambda=0.0, imbalance_beta=0.25, max_chunked_tiles=1,
                     chunked_cost_floor=0.0)
    default_floor = base.replace(chunked_cost_floor=LPTConfig().chunked_cost_floor)
    assert choose_chunking(counts, total, 100, default_floor).chunked_tiles == 0
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
    assert costly.chunked_tiles * costly.chunk_count < cheap.chunked_tiles * cheap.chunk_count


def test_capacity_bounds_h_times_k_and_reports_what_was_wanted():
    counts = torch.cat([torch.full((10,), 10_000), torch.full((990,), 10)])
    config = LPTConfig(overhead_lambda=0.0)
    unbounded = choose_chunking(counts, float(counts.sum()), 1000, config)
    bounded = choose_chunking(counts, float(counts.sum()), 1000, config, capacity=64)
    assert unbounded.chunked_tiles * unbounded.chunk_count > 64
    assert (bounded.chunked_tiles, bounded.chunk_count) == (10, 4)  # the deepest k that still fits
    assert bounded.wanted_chunk_units == unbounded.chunked_tiles * unbounded.chunk_count
    nothing = choose_chunking(counts, float(counts.sum()), 1000, config, capacity=0)
    assert nothing.chunked_tiles == 0 and nothing.wanted_chunk_units > 0


def test_plan_schedule_modes():
    counts = [0] * 50 + [1000] + [10] * 49
    offsets, n = offsets_for(counts, (1, 10, 10))
    config = LPTConfig()
    lpt = plan_schedule(offsets, n, 16, config, mode="lpt")
    assert lpt.choice.chunked_tiles == 0 and lpt.max_cost == 1000 and lpt.total_workload == n
    assert int(lpt.lpt_order[0]) == 50 and lpt.nonempty == 50 and lpt.head == 50
    chunk = plan_schedule(offsets, n, 16, config.replace(mode="chunk", chunk_count=4))
    assert (chunk.choice.chunked_tiles, chunk.choice.chunk_count) == (50, 4)  # every non-empty tile
    limited = plan_schedule(offsets, n, 16, config.replace(mode="chunk", chunk_count=4), capacity=40)
    assert (limited.choice.chunked_tiles, limited.choice.wanted_chunk_units) == (10, 200)
    fixed = plan_schedule(offsets, n, 16, config.replace(mode="fixed", heavy_ratio=0.1, chunk_count=8))
    assert (fixed.choice.chunked_tiles, fixed.choice.chunk_count) == (5, 8)
    auto = plan_schedule(offsets, n, 16, config)
    assert auto.choice.chunked_tiles >= 1 and auto.choice.predicted_cost <= 0.9 * auto.choice.predicted_cost_lpt


def test_plan_schedule_with_saturation_feedback_orders_by_predicted_cost():
    offsets, n = offsets_for([1000, 600, 10, 10], (1, 2, 2))
    depth = torch.tensor([50, 600, 10, 10], dtype=torch.int32)  # the first tile saturated early last frame
    plan = plan_schedule(offsets, n, 4, LPTConfig(mode="lpt"), previous_depth=depth)
    assert plan.lpt_order.tolist()[:2] == [1, 0] and plan.total_cost == 670 and plan.total_workload == n
    # Eq. (6)'s N_total is the predicted work too: on one CTA, T(0) = max(670 / 1, 600) + beta 600
    config = LPTConfig(mode="lpt", imbalance_beta=0.5)
    one_cta = plan_schedule(offsets, n, 1, config, previous_depth=depth)
    assert one_cta.choice.predicted_cost_lpt == 670 + 0.5 * 600


def test_invalid_offsets_are_flagged_and_never_chunked():
    offsets = torch.tensor([0, 500, 100, 600], dtype=torch.int32).reshape(1, 2, 2)
    plan = plan_schedule(offsets, 700, 4, LPTConfig(mode="chunk", chunk_count=4))
    assert plan.error and plan.choice.chunked_tiles == 0


def test_plan_with_no_intersections():
    offsets = torch.zeros((2, 3, 3), dtype=torch.int32)
    for mode in ("lpt", "auto", "chunk"):
        plan = plan_schedule(offsets, 0, 8, LPTConfig(mode=mode))
        assert plan.choice.chunked_tiles == 0 and plan.nonempty == 0 and plan.max_cost == 0


def test_fixed_mode_takes_ceil_of_rho():
    offsets, n = offsets_for([5] * 33 + [0] * 7, (1, 5, 8))
    plan = plan_schedule(offsets, n, 8, LPTConfig(mode="fixed", heavy_ratio=0.1, chunk_count=2))
    assert plan.choice.chunked_tiles == math.ceil(0.1 * 33)


def test_no_gain_possible_is_the_balanced_frame_rule():
    """The GPU skips the head sort and the search exactly where sigma N_1 K (1 - min_gain) <= N_total."""
    config, K, total = LPTConfig(), 792, 1_000_000.0
    edge = total / (config.heavy_item_pace * K * (1.0 - config.min_gain))  # N_1 at the rule's edge
    assert no_gain_possible(total, math.floor(edge), K, config)
    assert not no_gain_possible(total, math.ceil(edge) + 1, K, config)
    assert not no_gain_possible(total, math.floor(edge), K, config.replace(heavy_item_pace=1.0))


def test_eq6_mean_work_per_cta_is_total_over_k_plus_h_steps_of_lambda_k_over_k():
    """The mean work per CTA of Eq. (6), (N_total + lambda h k) / K, computed as N_total / K + h (lambda k / K)
    (no division per candidate on the GPU): equal up to rounding."""
    h = torch.arange(0, 256)
    for k, lam in ((4, 2048.0), (64, 333.3), (8, 0.0)):
        cost = estimated_cost(torch.full((255,), 10.0, dtype=torch.float64), 2.5e6, 792, k, lam, 0.0)
        exact = torch.maximum((2.5e6 + lam * h.double() * k) / 792, torch.where(h == 0, 10.0, 10.0 / k).double())
        assert torch.allclose(cost, exact, rtol=1e-15, atol=0)


def test_frames_whose_heaviest_item_ends_near_the_mean_are_left_to_lpt():
    """sigma N_1 K (1 - min_gain) <= N_total (sigma = heavy_item_pace): the heaviest item, at the pace it runs
    alone in the tail, ends within min_gain of the mean work per CTA, and auto leaves the frame to LPT although
    Eq. (6) would chunk it (N_1 is 1.5 times the mean work per CTA here); with sigma = 1 it is chunked."""
    K = 792
    counts = [900 + (37 * i) % 200 for i in range(8159)]  # (spread over several cost buckets)
    counts.append(int(1.5 * sum(counts) / (K - 1.5)))
    offsets, total = offsets_for(counts, (1, 8160))
    assert 1.4 < max(counts) * K / total < 1.6
    paced = plan_schedule(offsets, total, K, LPTConfig())
    assert (paced.choice.chunked_tiles, paced.choice.chunk_count, paced.choice.wanted_chunk_units) == (0, 1, 0)
    unpaced = plan_schedule(offsets, total, K, LPTConfig(heavy_item_pace=1.0))
    assert unpaced.choice.chunked_tiles >= 1 and unpaced.choice.chunk_count >= 2
    assert unpaced.choice.predicted_cost <= 0.9 * unpaced.choice.predicted_cost_lpt


def test_balanced_frames_are_not_chunked():
    """N_1 K <= N_total: the heaviest item is no heavier than the mean work per CTA, and auto does not chunk,
    even where Eq. (6) with a large beta would (it prices the last item's tail at beta N_1)."""
    g = torch.Generator().manual_seed(3)
    counts = (1000 * torch.exp(0.25 * torch.randn(8160, generator=g))).to(torch.int32)
    offsets, total = offsets_for(counts.tolist(), (1, 8160))
    K = 792
    assert int(counts.max()) * K <= total
    config = LPTConfig(overhead_lambda=1.0, imbalance_beta=20.0)
    searched = choose_chunking(lpt_order(counts)[0], float(total), K, config.replace(chunked_cost_floor=0.0))
    assert searched.chunked_tiles > 0  # the model alone would chunk this frame
    # (with the floor at 1 the search itself chunks nothing: no item is above the mean work per CTA left to LPT)
    floored = config.replace(chunked_cost_floor=1.0)
    assert choose_chunking(lpt_order(counts)[0], float(total), K, floored).chunked_tiles == 0
    plan = plan_schedule(offsets, total, K, config)
    assert (plan.choice.chunked_tiles, plan.choice.chunk_count, plan.choice.wanted_chunk_units) == (0, 1, 0)


@pytest.mark.parametrize("seed", range(24))
def test_auto_chunks_only_items_above_the_floor(seed):
    """The lightest chunked item (N_h) is above chunked_cost_floor x the mean work per CTA left to LPT,
    (N_total - N_1 - ... - N_h) / K; with the floor at 0 the search is Eq. (6) over every h (brute force here), and
    a floor only ever removes candidates: the choice is the best candidate of Eq. (6) among those whose N_h is
    above it."""
    g = torch.Generator().manual_seed(seed)
    n = int(torch.randint(200, 3000, (1,), generator=g))
    counts = (300 * torch.exp([0.5, 1.0, 2.0][seed % 3] * torch.randn(n, generator=g))).to(torch.int32) + 1
    counts[: int(torch.randint(1, 30, (1,), generator=g))] *= int(torch.randint(3, 40, (1,), generator=g))
    sorted_costs, _ = lpt_order(counts)
    total, K = float(counts.sum()), [64, 132, 792][seed % 3]
    floor = [0.0, 0.5, 1.0, 2.0][seed % 4]
    config = LPTConfig(chunked_cost_floor=floor, overhead_lambda=float(torch.rand(1, generator=g)) * 4000,
                       min_gain=0.0, max_chunked_tiles=255)
    choice = choose_chunking(sorted_costs, total, K, config)
    costs = sorted_costs.to(torch.float64)

    def left_per_cta(h):  # the mean work per CTA that the h heaviest items leave to LPT
        return (total - sum(int(c) for c in sorted_costs[:h])) / K

    candidates = []  # (cost, k index, h) of every candidate the floor allows
    for ki, k in enumerate(config.chunk_counts):
        for h in range(1, min(255, n) + 1):
            if not float(costs[h - 1]) > floor * left_per_cta(h):
                continue
            l = max(float(costs[0]) / k, float(costs[h]) if h < n else 0.0)
            average = (total + config.overhead_lambda * h * k) / K
            candidates.append((max(average, l) + config.imbalance_beta * l, ki, h))
    if choice.chunked_tiles:
        assert float(costs[choice.chunked_tiles - 1]) > floor * left_per_cta(choice.chunked_tiles)
        best = min(candidates)
        assert choice.predicted_cost == pytest.approx(best[0], rel=1e-12)
        assert (choice.chunked_tiles, choice.chunk_count) == (best[2], config.chunk_counts[best[1]])
    else:
        assert not candidates or min(candidates)[0] > choice.predicted_cost_lpt * (1 - config.min_gain)
    if floor > 0:  # a floor only removes candidates: the choice costs at least the unfloored one's
        unfloored = choose_chunking(sorted_costs, total, K, config.replace(chunked_cost_floor=0.0))
        assert choice.predicted_cost >= unfloored.predicted_cost


def test_pixels_wanted_compares_the_longest_unit_left_with_the_mean_work_per_cta():
    """Two pixels per thread where the longest unit is at most the bound x N_total / K: the heaviest item where
    nothing is chunked, max(N_1 / k, N_{h+1}) where auto chunks; the forced modes keep one pixel when chunked."""
    counts = [40000] * 4 + [3000] * 10 + [100] * 4000
    offsets, n = offsets_for(counts, (1, 4014, 1))
    K, total = 100, float(n)  # N_total / K = 5900
    lpt = plan_schedule(offsets, n, K, LPTConfig(mode="lpt"))
    assert pixels_wanted(lpt, "lpt", K, 6.77, 0.0) == 1 and pixels_wanted(lpt, "lpt", K, 6.78, 0.0) == 2  # 40000 / 5900
    for k, longest in ((16, 3000.0), (8, 5000.0)):  # N_{h+1} = 3000 after the 4 heaviest; N_1 / k = 2500 or 5000
        fixed = plan_schedule(offsets, n, K, LPTConfig(mode="fixed", heavy_ratio=0.0009, chunk_count=k))
        assert (fixed.choice.chunked_tiles, fixed.choice.chunk_count) == (4, k)
        ratio = longest * K / total
        assert pixels_wanted(fixed, "auto", K, 100.0, ratio * 1.001) == 2
        assert pixels_wanted(fixed, "auto", K, 100.0, ratio * 0.999) == 1
        assert pixels_wanted(fixed, "fixed", K, 100.0, 100.0) == 1  # (a forced mode)


def test_pixels_wanted_takes_the_many_items_bound_from_that_many_nonempty_items_per_cta():
    """Where nothing is chunked, the bound on the heaviest item is two_pixel_many_items_max once the frame has at
    least many_items_per_cta non-empty items per CTA (empty items do not count), else two_pixel_max_imbalance."""
    counts = [9000] + [1000] * 1999 + [0] * 500  # N_total = 2,008,000; 2000 non-empty items
    offsets, n = offsets_for(counts, (1, 2500, 1))
    K = 100  # N_total / K = 20080: N_1 is 0.448 of it
    lpt = plan_schedule(offsets, n, K, LPTConfig(mode="lpt"))
    assert lpt.nonempty == 2000
    assert pixels_wanted(lpt, "lpt", K, 0.4, 0.0, 0.5, many_items_per_cta=20) == 2  # 2000 >= 20 K
    assert pixels_wanted(lpt, "lpt", K, 0.4, 0.0, 0.5, many_items_per_cta=21) == 1  # (2500 items, 2000 non-empty)
    assert pixels_wanted(lpt, "lpt", K, 0.5, 0.0, 0.4, many_items_per_cta=21) == 2
    assert pixels_wanted(lpt, "lpt", K, 0.5, 0.0, 0.4, many_items_per_cta=20) == 1
    assert pixels_wanted(lpt, "lpt", K, 0.4, 0.0) == 1  # (no many-items bound: the one bound)
    # a chunked frame keeps its own bound whatever the items per CTA
    fixed = plan_schedule(offsets, n, K, LPTConfig(mode="fixed", heavy_ratio=0.0005, chunk_count=8))
    assert fixed.choice.chunked_tiles == 1
    assert pixels_wanted(fixed, "auto", K, 100.0, 0.01, 100.0, many_items_per_cta=1) == 1


def test_the_floor_lets_candidates_deep_enough_for_two_pixels_be():
    """Below the floor, a candidate stays where its longest unit left, max(N_1 / k, N_{h+1}), is at most the two-pixel
    bound x N_total / K: such a schedule lets the LPT kernel run two pixels per thread. Here 60 heavy items, 1800-5000,
    over 8,100 light ones: the floor stops the search at the 19 heaviest without a two-pixel kernel; with one, the
    search reaches the depth where the unit left is short enough, as Eq. (6) alone chooses."""
    g = torch.Generator().manual_seed(5)
    counts = (250 * torch.exp(0.3 * torch.randn(8160, generator=g))).to(torch.int32)
    counts[:60] = torch.linspace(5000, 1800, 60).to(torch.int32)
    offsets, total = offsets_for(counts.tolist(), (1, 8160))
    K, bound = 792, 0.28
    config = LPTConfig(saturation_feedback=False)
    ordered = counts.sort(descending=True).values.double()
    one_pixel = plan_schedule(offsets, total, K, config, capacity=4096).choice
    two_pixels = plan_schedule(offsets, total, K, config, capacity=4096, two_pixel_chunked_max=bound).choice
    alone = plan_schedule(offsets, total, K, config.replace(chunked_cost_floor=0.0), capacity=4096).choice
    h, k = one_pixel.chunked_tiles, one_pixel.chunk_count
    assert 0 < h < 60 and float(ordered[h - 1]) > config.chunked_cost_floor * (total - float(ordered[:h].sum())) / K
    h, k = two_pixels.chunked_tiles, two_pixels.chunk_count
    assert float(ordered[h - 1]) <= config.chunked_cost_floor * (total - float(ordered[:h].sum())) / K  # below it
    assert max(float(ordered[0]) / k, float(ordered[h])) * K <= bound * total
    assert (h, k) == (alone.chunked_tiles, alone.chunk_count)
