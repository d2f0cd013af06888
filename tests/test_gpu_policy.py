"""What the auto policy is told beside the frame's lists (GPU): which earlier frames chunked (cameras taken in turn on
one stream), where items stopped (only where an item is the same one), a variant's cost per Gaussian."""

from __future__ import annotations

import pytest
import torch

import gsplat_lpt
from gsplat_lpt import LPTConfig, constants
from test_gpu_core import VARIANT_3DGS, counts_offsets, own_stream, render  # noqa: F401  (own_stream: a fixture)

pytestmark = pytest.mark.gpu


def listed_frame(lengths, W=640, H=480, seed=0, opaque=False):
    """A frame whose tile t lists lengths[t] Gaussians, drawn at random (the balance of the work is set by hand);
    faint small Gaussians (no tile saturates), or opaque wide ones (every tile saturates within a few)."""
    g = torch.Generator().manual_seed(seed)
    n = 4000
    conic, opacity = (1e-5, 0.9) if opaque else (0.05, 0.1)
    frame = {"means2d": (torch.rand(1, n, 2, generator=g) * torch.tensor([W, H])).cuda(),
             "conics": torch.tensor([conic, 0.0, conic]).repeat(1, n, 1).cuda(),
             "colors": torch.rand(1, n, 3, generator=g).cuda(),
             "opacities": (opacity * (0.5 + 0.5 * torch.rand(1, n, generator=g))).cuda(),
             "image_width": W, "image_height": H, "tile_size": 16}
    lengths = torch.as_tensor(lengths, dtype=torch.int64)
    offsets, total = counts_offsets(lengths)
    frame["isect_offsets"] = offsets.reshape(1, H // 16, W // 16).cuda()
    frame["flatten_ids"] = torch.randint(0, n, (total,), generator=g, dtype=torch.int32).cuda()
    return frame


def test_cameras_in_turn_keep_the_chunk_kernel_while_one_needs_it(own_stream):
    """Cameras taken in turn on one stream, one heavy (auto chunks it) and one even (LPT alone), frames of the same
    size: every heavy frame after the first is chunked, also where the even one finished last (and left its stop
    depths); a stream of even frames alone leaves the chunk kernel out, and once CHUNKING_MEMORY_FRAMES frames pass
    without one that wants chunking, it is left out again."""
    tiles = (640 // 16) * (480 // 16)
    even = listed_frame(torch.full((tiles,), 40), seed=1)
    heavy_lengths = torch.full((tiles,), 40)
    heavy_lengths[tiles // 2] = 40 * tiles // 4  # a quarter of the frame's work in one tile
    heavy = listed_frame(heavy_lengths, seed=2)
    auto = LPTConfig(mode="auto")

    def call(frame):
        _, (*_, plan) = render(frame, auto)
        report = plan.report()
        torch.cuda.synchronize()  # (the next call reads this frame's status)
        return plan.chunk_kernel, report["chunked_tiles"]

    evens = [call(even) for _ in range(3)]
    assert all(h == 0 for _, h in evens)
    assert evens[0][0] and not evens[-1][0]  # no frame of the stream wanted chunking: the kernel is left out
    first_heavy = call(heavy)
    assert first_heavy == (False, 0)  # planned after even frames: rendered unchunked, but it asked for chunks
    for _ in range(4):
        launched, h = call(heavy)
        assert launched and h > 0
        launched, h = call(even)  # the even camera finishes last: the next heavy frame still chunks
        assert launched and h == 0
    for _ in range(constants.CHUNKING_MEMORY_FRAMES + 1):
        launched, h = call(even)
    assert not launched and h == 0


def test_the_plan_prices_chunks_in_3dgut_evaluations():
    """Eq. (6)'s lambda is a chunk's overhead in 3DGS evaluations; the 3DGUT plan divides it by the variant's
    evaluation_cost (a 3DGUT evaluation takes longer, a chunk's partials do not). On a frame whose choice depends on
    it, the GPU's (h, k) is the oracle's with lambda / evaluation_cost, not with lambda."""
    from gsplat_lpt import runtime
    from gsplat_lpt.plan import plan_schedule
    from gsplat_lpt.variants import VARIANTS

    variant = VARIANTS["rasterize_to_pixels_eval3d"]
    assert variant.evaluation_cost > 1
    rasterizer = gsplat_lpt.rasterizer_for(variant, 3, 16, torch.device("cuda"))
    K = rasterizer.concurrent_ctas
    config = LPTConfig(saturation_feedback=False)
    scaled = config.replace(overhead_lambda=config.overhead_lambda / variant.evaluation_cost)
    g = torch.Generator().manual_seed(0)
    differing = 0
    with torch.cuda.stream(torch.cuda.Stream()):
        for top, heavy in ((30000, 21), (15000, 40), (60000, 21), (30000, 40)):
            counts = (300 + torch.randint(0, 60, (8160,), generator=g)).to(torch.int32)
            counts[:heavy] = torch.linspace(top, top / 3, heavy).to(torch.int32)
            offsets, total = counts_offsets(counts)
            inter = runtime.Intersections(offsets.cuda(), torch.zeros(total, dtype=torch.int32, device="cuda"), None,
                                          1, 8160, 1, 1, 8160, 1, 1)
            report = rasterizer.plan(inter, config).report()
            capacity = rasterizer.workspace(runtime.current_stream_handle(torch.cuda.current_device())).chunk_units
            oracle, unscaled = (plan_schedule(offsets, total, K, c, capacity=capacity).choice for c in (scaled, config))
            assert (report["chunked_tiles"], report["chunk_count"]) == (oracle.chunked_tiles, oracle.chunk_count)
            differing += (oracle.chunked_tiles, oracle.chunk_count) != (unscaled.chunked_tiles, unscaled.chunk_count)
    assert differing > 0  # (at least one frame where the scaling decides)


def test_stop_depths_feed_back_only_to_items_about_as_long_as_they_were(own_stream):
    """A frame of the same size after another (opaque Gaussians: every tile stops within a few): the plan prices an
    item by the stop depth of the frame before only where its list is within a quarter of its length then, as the
    oracle does (plan.predicted_costs with the previous lengths)."""
    from gsplat_lpt.plan import predicted_costs, same_item

    tiles = (640 // 16) * (480 // 16)
    g = torch.Generator().manual_seed(3)
    before = (600 + torch.randint(0, 1000, (tiles,), generator=g)).to(torch.int32)  # (over a batch of 256)
    now = before.clone()
    now[0::3] = before[0::3] * 3  # another view's tiles
    now[1::3] = before[1::3] + before[1::3] // 10  # the same view, moved a little
    rasterizer = gsplat_lpt.rasterizer_for(VARIANT_3DGS, 3, 16, torch.device("cuda"))
    ws = rasterizer.workspace(own_stream)
    config = LPTConfig(mode="lpt")
    render(listed_frame(before, seed=4, opaque=True), config)
    torch.cuda.synchronize()
    depth = ws.item_depth[:tiles].clone()
    assert bool((depth.cpu() < before).all())  # (every tile stopped early)
    _, (*_, plan) = render(listed_frame(now, seed=5, opaque=True), config)
    assert plan.report()["saturation_feedback"]
    torch.cuda.synchronize()
    expected = predicted_costs(now, depth.cpu(), before)
    order, priced = ws.lpt_order[:tiles].cpu().long(), ws.sorted_costs[:tiles].cpu()
    assert torch.equal(priced, expected[order])  # (the cost each item was sorted by)
    same = same_item(before, now)
    assert bool(same[1::3].all()) and not bool(same[0::3].any())
    assert bool((expected[0::3] == now[0::3]).all()) and bool((expected[1::3] < now[1::3]).all())


def _two_views_taken_in_turn():
    """A balanced view (its plan asks for two pixels per thread) and one with half its work in one tile (one pixel),
    of the same size, and a call that renders one in lpt mode on the current stream."""
    tiles = (640 // 16) * (480 // 16)
    side = listed_frame(torch.full((tiles,), 40), seed=1)
    front_lengths = torch.full((tiles,), 40)
    front_lengths[tiles // 2] = 40 * tiles
    front = listed_frame(front_lengths, seed=2)
    lpt = LPTConfig(mode="lpt")

    def call(frame, wait=True):
        _, (*_, plan) = render(frame, lpt)
        plan.snapshot()  # (its report still describes it after the next call plans)
        if wait:
            torch.cuda.synchronize()  # (the next call reads this frame's status)
        return plan

    return side, front, call


def _pixels(plan):
    report = plan.report()
    return report["pixels_per_thread"], report["pixels_wanted"]


def test_cameras_in_turn_keep_their_own_pixels_per_thread(own_stream):
    """lpt, two views of the same size taken in turn on one stream: each frame runs with what its own view's last
    finished frame asked for, not with what the other view, finished last, asked for."""
    side, front, call = _two_views_taken_in_turn()
    for _ in range(2):  # each view's answer read back once
        call(side)
        call(front)
    for _ in range(3):
        assert _pixels(call(side)) == (2, 2)
        assert _pixels(call(front)) == (1, 1)


def test_a_view_that_never_finishes_last_keeps_its_own_pixels_per_thread(own_stream):
    """The same two views read back a cycle at a time (the host waits after each round, as a loop that saves a
    rig's images does), the GPU busy while a cycle is enqueued (as it is with frames heavier than these): when a call
    reads the status, the front view's frame has always finished last. Only the status ring (every finished frame's
    answer, not the last one's) gives the side view its own; from one word it would take the front view's one pixel."""
    side, front, call = _two_views_taken_in_turn()
    for cycle in range(4):
        torch.cuda._sleep(20_000_000)  # (about 10 ms: neither frame of the cycle finishes before the front view's call)
        side_plan, front_plan = call(side, wait=False), call(front, wait=False)
        torch.cuda.synchronize()
        if cycle > 0:  # (the first cycle has no finished frame to go by)
            assert _pixels(side_plan) == (2, 2) and _pixels(front_plan) == (1, 1)


def test_kept_reports_describe_their_own_frames_past_the_ring(own_stream):
    """More kept reports than a ReportRing has rows, every one read at the end: each still says what its own frame
    did (fixed schedules of different k, frame after frame on one stream, the GPU kept busy so that the host runs
    ahead of it), as the report read at once does."""
    from gsplat_lpt.report_ring import ReportRing

    tiles = (640 // 16) * (480 // 16)
    lengths = torch.full((tiles,), 40)
    lengths[tiles // 3] = 40 * tiles
    frame = listed_frame(lengths, seed=3)
    counts = [2, 4, 8, 16, 32, 64]
    expected = [counts[i % len(counts)] for i in range(ReportRing.SLOTS + 5)]
    kept = []
    for i, k in enumerate(expected):
        _, (*_, plan) = render(frame, LPTConfig(mode="fixed", heavy_ratio=0.01, chunk_count=k))
        kept.append(plan.snapshot())
        if i == 3:
            torch.cuda._sleep(int(2e8))  # the host runs ahead of the GPU by the rest of the frames
    ring = kept[0].workspace.kept_reports
    # the last frame found its row still held by an unfinished frame SLOTS kept frames back: a copy of its own
    assert kept[-1]._kept.event not in ring.events
    assert [plan.report()["chunk_count"] for plan in kept] == expected
    assert all(plan.report()["chunked_tiles"] > 0 for plan in kept)
