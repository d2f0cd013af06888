"""GPU: the core's contract beyond parity. The plan kernels against the PyTorch oracle; a plan that runs
twice; no allocation per frame; a frame captured in a CUDA graph; inputs that must never hang or kill the
CUDA context; another device than the current one; a smaller GPU's shared-memory limit."""

from __future__ import annotations

import math

import pytest
import torch

import gsplat_lpt
from gsplat_lpt import LPTConfig, LPTInputError, LPTRuntimeError, constants, runtime
from gsplat_lpt.plan import cost_buckets, no_gain_possible, pixels_wanted, plan_schedule
from gsplat_lpt.variants import VARIANTS
from gsplat_lpt.variants.gaussian3d import Frame3DGS
from test_gpu_parity import cameras, gsplat_forward, project, psnr, random_gaussians

pytestmark = pytest.mark.gpu

VARIANT_3DGS = VARIANTS["rasterize_to_pixels"]


def small_frame(seed=0, cameras_count=2, W=160, H=96, cluster=3000):
    return project(*random_gaussians(3000, seed=seed, cluster=cluster), *cameras(cameras_count, W, H), W, H)


def render(frame, config, **extra):
    ours = Frame3DGS(frame["means2d"], frame["conics"], frame["colors"], frame["opacities"], extra.get("backgrounds"),
                     extra.get("masks"), frame["image_width"], frame["image_height"], frame["tile_size"],
                     frame["isect_offsets"], frame["flatten_ids"], False)
    return ours, ours.render(config)


# --- the plan kernels against plan.plan_schedule ---------------------------------------------------------

def counts_offsets(counts):
    offsets = (torch.cumsum(counts, 0) - counts).to(torch.int32)
    return offsets, int(counts.sum())


def plan_rasterizer(path, monkeypatch):
    """The 3DGS rasterizer, its plan forced onto the two launches of many CTAs (path "grid") or left as it is
    ("cluster": one launch of one cluster where the GPU has clusters and the frame fits)."""
    rasterizer = gsplat_lpt.rasterizer_for(VARIANT_3DGS, 3, 16, torch.device("cuda"))
    if path == "grid":
        monkeypatch.setattr(rasterizer, "plan_cluster_builds", ())
    elif not rasterizer.plan_cluster_builds:
        pytest.skip("this GPU has no thread-block clusters")
    return rasterizer


def oracle_two_pixel_chunked_max(rasterizer):
    """What the plan kernels use as the two-pixel bound of a chunked frame: the rasterizer's, where it has a
    two-pixel kernel."""
    return rasterizer.two_pixel_chunked_max if rasterizer.two_pixels else 0.0


@pytest.fixture
def own_stream():
    """A stream of the test's own, hence a fresh workspace of the cached rasterizer: what earlier tests' frames left
    in a workspace (auto skips the chunk kernel while no recent frame chunked or wanted to) cannot change this test's
    plans, whatever ran before it (CUDA may give the stream a destroyed stream's handle: the workspace kept under
    that handle is dropped)."""
    stream = torch.cuda.Stream()
    runtime.forget_stream(stream)
    with torch.cuda.stream(stream):
        yield stream


@pytest.mark.parametrize("path", ["cluster", "grid"])
def test_plan_kernels_apply_the_chunked_cost_floor(path, monkeypatch, own_stream):
    """A mild frame (a few dozen items somewhat above the mean work per CTA): Eq. (6) alone (the floor at 0) chunks
    items at or below the mean work per CTA they leave to LPT, the floor at 1 does not; the GPU's choice is the
    oracle's with and without it, on both plan paths."""
    g = torch.Generator().manual_seed(5)
    counts = (250 * torch.exp(0.3 * torch.randn(8160, generator=g))).to(torch.int32)
    counts[:60] = (torch.linspace(5000, 1800, 60)).to(torch.int32)
    offsets, total = counts_offsets(counts)
    rasterizer = plan_rasterizer(path, monkeypatch)
    inter = runtime.Intersections(offsets.cuda(), torch.zeros(total, dtype=torch.int32, device="cuda"), None, 1,
                                  8160, 1, 1, 8160, 1, 1)
    K = rasterizer.concurrent_ctas
    choices = []
    # (h <= 50: deeper, the longest unit left would let the LPT kernel run two pixels, which the floor lets be)
    floored = LPTConfig(saturation_feedback=False, chunked_cost_floor=1.0, max_chunked_tiles=50)
    for config in (floored, floored.replace(chunked_cost_floor=0.0)):
        report = rasterizer.plan(inter, config).report()
        oracle = plan_schedule(offsets, total, K, config, capacity=rasterizer.workspace(
            runtime.current_stream_handle(torch.cuda.current_device())).chunk_units,
            two_pixel_chunked_max=oracle_two_pixel_chunked_max(rasterizer))
        assert (report["chunked_tiles"], report["chunk_count"]) == (oracle.choice.chunked_tiles,
                                                                    oracle.choice.chunk_count)
        assert report["predicted_cost"] == oracle.choice.predicted_cost
        choices.append(oracle.choice.chunked_tiles)
    floored, unfloored = choices
    ordered = counts.sort(descending=True).values
    left = (total - int(ordered[:floored].sum())) / K  # the work per CTA the chunked items leave to LPT
    assert 0 < floored < unfloored  # the floor took items off the search
    assert float(ordered[floored - 1]) > left
    assert float(ordered[unfloored - 1]) <= (total - int(ordered[:unfloored].sum())) / K


@pytest.mark.parametrize("path", ["cluster", "grid"])
@pytest.mark.parametrize("floor, wanted_h", [(0.0, 2046), (0.5, 1800), (0.6, 1582)])
def test_plan_kernels_apply_the_floor_past_one_pass_of_the_cta(floor, wanted_h, path, monkeypatch, own_stream):
    """The floor's prefix sum of the head's costs over more than one pass of the plan's CTA (h up to 2047, 1024
    threads): Eq. (6) (lambda 0) prefers every deeper h here, so the deepest h the floor allows decides, past the
    first 1024; the GPU's choice, within the partial buffers and unbounded (wanted h k), is the oracle's. (The plan
    is told the rasterizer has no two-pixel kernel, as for feature maps: with one, every candidate deeper than about
    1,100 items would be short enough for two pixels and stay in the search whatever the floor.)"""
    counts = torch.full((8160,), 1000, dtype=torch.int32)
    counts[0] = 100_000
    counts[1:2101] = torch.linspace(19000, 2000, 2100).to(torch.int32)
    offsets, total = counts_offsets(counts)
    rasterizer = plan_rasterizer(path, monkeypatch)
    if rasterizer.concurrent_ctas != 792:
        pytest.skip("the frame is shaped for K = 792 (an H200)")
    monkeypatch.setattr(rasterizer, "two_pixels", False)  # (this test only plans)
    inter = runtime.Intersections(offsets.cuda(), torch.zeros(total, dtype=torch.int32, device="cuda"), None, 1,
                                  8160, 1, 1, 8160, 1, 1)
    config = LPTConfig(overhead_lambda=0.0, imbalance_beta=1.0, min_gain=0.0, heavy_item_pace=1.0,
                       chunked_cost_floor=floor, max_chunked_tiles=2047, saturation_feedback=False, chunk_counts=(64,))
    report = rasterizer.plan(inter, config).report()
    oracle = plan_schedule(offsets, total, 792, config, capacity=rasterizer.workspace(
        runtime.current_stream_handle(torch.cuda.current_device())).chunk_units,
        two_pixel_chunked_max=oracle_two_pixel_chunked_max(rasterizer))
    assert oracle.choice.wanted_chunk_units == wanted_h * 64 and oracle.head == 2047
    schedule = rasterizer.workspace(runtime.current_stream_handle(torch.cuda.current_device())).schedule.tolist()
    assert schedule[constants.SCHEDULE["wanted_chunk_units"]] == oracle.choice.wanted_chunk_units
    assert (report["chunked_tiles"], report["chunk_count"]) == (oracle.choice.chunked_tiles, oracle.choice.chunk_count)
    assert report["predicted_cost"] == oracle.choice.predicted_cost


@pytest.mark.parametrize("path", ["cluster", "grid"])
def test_plan_kernels_raise_the_two_pixel_bound_with_many_items_per_cta(path, monkeypatch, own_stream):
    """lpt, 3DGS colours: a frame whose heaviest item is 1.5 times the mean work per CTA (between the two bounds, 1.4
    and 1.6) asks for two pixels per thread where it has at least constants.TWO_PIXEL_MANY_ITEMS_PER_CTA non-empty
    items per CTA, and for one where it has fewer; the oracle agrees, on both plan paths."""
    rasterizer = plan_rasterizer(path, monkeypatch)
    if not rasterizer.two_pixels:
        pytest.skip("no two-pixel kernel on this GPU")
    K, many = rasterizer.concurrent_ctas, constants.TWO_PIXEL_MANY_ITEMS_PER_CTA
    assert rasterizer.two_pixel_max_imbalance < 1.5 < rasterizer.two_pixel_many_items_max
    config = LPTConfig(mode="lpt", saturation_feedback=False)
    for per_cta, wanted in ((many + 5, 2), (many - 8, 1)):
        items = per_cta * K
        counts = torch.full((items,), 100, dtype=torch.int32)
        counts[items // 2] = int(150 * (items - 1) / (K - 1.5))  # N_1 K / N_total = 1.5 (rounded down)
        offsets, total = counts_offsets(counts)
        inter = runtime.Intersections(offsets.cuda(), torch.zeros(total, dtype=torch.int32, device="cuda"), None, 1,
                                      items, 1, 1, items, 1, 1)
        report = rasterizer.plan(inter, config).report()
        assert 1.45 < report["imbalance"] <= 1.5 and report["nonempty_items"] == items
        assert report["pixels_wanted"] == wanted, per_cta
        oracle = plan_schedule(offsets, total, K, config)
        assert pixels_wanted(oracle, "lpt", K, rasterizer.two_pixel_max_imbalance, rasterizer.two_pixel_chunked_max,
                             rasterizer.two_pixel_many_items_max) == wanted


@pytest.mark.parametrize("path", ["cluster", "grid"])
@pytest.mark.parametrize("seed", range(14))
def test_plan_kernels_match_the_torch_oracle(seed, path, monkeypatch, own_stream):
    g = torch.Generator().manual_seed(seed)
    n = [60, 900, 8160, 32640, 20_000, 40_000, 70_000][seed % 7]  # over 32,768: two launches
    counts = (torch.rand(n, generator=g) ** (3 + seed) * 200_000).to(torch.int32)
    counts[torch.rand(n, generator=g) < 0.2] = 0
    offsets, total = counts_offsets(counts)
    masks = (torch.rand(n, generator=g) > 0.1) if seed % 3 == 0 else None
    config = LPTConfig(overhead_lambda=float(torch.rand(1, generator=g)) * 600,
                       imbalance_beta=float(torch.rand(1, generator=g)), max_chunked_tiles=[1023, 100, 7][seed % 3],
                       saturation_feedback=False, heavy_item_pace=float(0.2 + 0.8 * torch.rand(1, generator=g)),
                       chunked_cost_floor=[0.0, 1.0, float(2 * torch.rand(1, generator=g))][seed % 3])
    rasterizer = plan_rasterizer(path, monkeypatch)
    inter = runtime.Intersections(offsets.cuda(), torch.zeros(total, dtype=torch.int32, device="cuda"),
                                  None if masks is None else masks.cuda().view(torch.uint8), 1, n, 1, 1, n, 1, 1)
    for mode_config in (config, config.replace(mode="chunk", chunk_count=4),
                        config.replace(mode="fixed", heavy_ratio=0.03, chunk_count=16),
                        config.replace(mode="lpt")):
        plan = rasterizer.plan(inter, mode_config)
        ws = plan.workspace
        capacity = ws.chunk_units if plan.chunk_kernel else 0  # (what the plan was given)
        oracle = plan_schedule(offsets, total, rasterizer.concurrent_ctas, mode_config, masks=masks, capacity=capacity,
                               two_pixel_chunked_max=oracle_two_pixel_chunked_max(rasterizer))
        report = plan.report()
        assert (report["chunked_tiles"], report["chunk_count"]) == (oracle.choice.chunked_tiles,
                                                                    oracle.choice.chunk_count), mode_config.mode
        schedule = ws.schedule.tolist()
        assert schedule[constants.SCHEDULE["nonempty_items"]] == oracle.nonempty
        assert report["max_workload"] == oracle.max_cost and report["total_workload"] == oracle.total_workload
        if mode_config.mode == "auto":
            assert schedule[constants.SCHEDULE["head_count"]] == oracle.head
            assert schedule[constants.SCHEDULE["wanted_chunk_units"]] == oracle.choice.wanted_chunk_units
            assert report["predicted_cost"] == oracle.choice.predicted_cost  # same float64 operations
            K = rasterizer.concurrent_ctas
            hopeless = no_gain_possible(float(oracle.total_cost), float(oracle.max_cost), K, mode_config)
            if not hopeless:  # the policy searched: the head is sorted exactly
                head = oracle.head
                assert torch.equal(ws.lpt_order[:head].cpu().long(), oracle.lpt_order[:head])
        assert report["predicted_cost_lpt"] == pytest.approx(oracle.choice.predicted_cost_lpt, rel=1e-12)
        # what the next frames run with: two pixels per thread where the longest unit is light
        assert report["pixels_wanted"] == pixels_wanted(oracle, mode_config.mode, rasterizer.concurrent_ctas,
                                                        rasterizer.two_pixel_max_imbalance,
                                                        rasterizer.two_pixel_chunked_max,
                                                        rasterizer.two_pixel_many_items_max), mode_config.mode
        # warps of rows in the persistent kernel where nothing is chunked and the longest item decides the frame
        latency_bound = report["chunked_tiles"] == 0 and (oracle.max_cost * rasterizer.concurrent_ctas
                                                          > constants.ROWS_MIN_IMBALANCE * oracle.total_cost)
        assert schedule[constants.SCHEDULE["persistent_rows"]] == int(latency_bound)
        # these frames' tiles of one pixel take rows whatever the warp shape (how the bits and the plan's word
        # decide elsewhere: test_frontend.test_reported_warp_shape_follows_the_bits_and_the_plan)
        assert inter.tile_size % 8 != 0 and report["warp_shape"] == "rows"
        # every item exactly once; costs in bucket order (exact within the head)
        order = ws.lpt_order[:n].cpu().long()
        assert torch.equal(torch.sort(order).values, torch.arange(n))
        sorted_costs = ws.sorted_costs[:n].cpu()
        expected_costs = counts if masks is None else counts * masks
        assert torch.equal(sorted_costs, expected_costs[order].to(torch.int32))
        buckets = cost_buckets(sorted_costs)
        assert torch.all(buckets[:-1] >= buckets[1:])
        # the plan leaves its scratch as it found it (it can run again; a graph can replay it)
        for word in ("plan_arrivals", "plan_error", "max_cost_scratch"):
            assert schedule[constants.SCHEDULE[word]] == 0, word
        assert ws.total[2:].tolist() == [0, 0] and int(ws.histogram.abs().sum()) == 0


@pytest.mark.parametrize("n, kernels", [(8160, ["plan_cluster"]), (32_768, ["plan_cluster"]),
                                        (40_000, ["plan_costs", "plan_order"])])
def test_the_plan_is_one_cluster_launch_where_the_gpu_has_clusters(n, kernels):
    from torch.profiler import ProfilerActivity, profile

    rasterizer = gsplat_lpt.rasterizer_for(VARIANT_3DGS, 3, 16, torch.device("cuda"))
    if torch.cuda.get_device_capability()[0] < 9:
        assert rasterizer.plan_cluster_builds == ()
        kernels = ["plan_costs", "plan_order"]
    else:  # every build carries its cluster size
        assert [largest for largest, _ in rasterizer.plan_cluster_builds] == [32_768]
    counts = torch.arange(n, dtype=torch.int32) % 97
    offsets, total = counts_offsets(counts)
    inter = runtime.Intersections(offsets.cuda(), torch.zeros(total, dtype=torch.int32, device="cuda"), None, 1, n, 1,
                                  1, n, 1, 1)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        rasterizer.plan(inter, LPTConfig())
        torch.cuda.synchronize()
    names = sorted(e.key.split("(")[0] for e in prof.key_averages() if e.key.startswith("plan_"))
    assert names == kernels


def test_saturation_feedback_orders_by_the_previous_stop_depth():
    """An opaque heavy tile stops early: the next frame's plan predicts its real cost."""
    frame = project(*random_gaussians(3000, seed=4, cluster=-20000), *cameras(1, 208, 120), 208, 120)
    config = LPTConfig(mode="auto")
    _, (_, _, _, first) = render(frame, config)
    first = first.report()  # before the next frame reuses the workspace
    _, (colors, _, _, second) = render(frame, config)
    second = second.report()
    assert not first["saturation_feedback"] and second["saturation_feedback"]
    assert second["predicted_total_cost"] < first["predicted_total_cost"]
    ref_colors, _, _ = gsplat_forward(frame)
    assert psnr(colors, ref_colors) >= 76.0


def faint_stack_and_its_stop_depths():
    """A frame with wide Gaussians of opacity 0.05 stacked on one spot (T falls to 1e-4 only after many of
    them), the 3DGS rasterizer, the exact stop depth of every item (lpt mode, on a stream of its own; a GPU
    tensor) and the list lengths (CPU)."""
    means, quats, scales, opacities = random_gaussians(3000, seed=5, cluster=-4000)
    opacities[-4000:] = 0.05
    frame = project(means, quats, scales, opacities, *cameras(1, 208, 120), 208, 120)
    rasterizer = gsplat_lpt.rasterizer_for(VARIANT_3DGS, 3, 16, torch.device("cuda"))
    exact_stream = torch.cuda.Stream()
    with torch.cuda.stream(exact_stream):
        render(frame, LPTConfig(mode="lpt"))
    torch.cuda.synchronize()
    exact = rasterizer.workspace(exact_stream).item_depth[: frame["isect_offsets"].numel()].clone()
    offsets = frame["isect_offsets"].reshape(-1).cpu()
    lengths = torch.diff(torch.cat([offsets, torch.tensor([frame["flatten_ids"].numel()], dtype=torch.int32)]))
    return frame, rasterizer, exact, lengths


def test_chunked_items_feed_back_a_tight_bound_on_their_stop_depth():
    """A chunked item tells the next frame's plan where the sequential walk stops, up to one chunk: frame after
    frame, also when its chunks are too short to saturate on their own (wide Gaussians of opacity 0.05 stacked
    on one spot: T falls to 1e-4 only across chunks). Checked against the exact stop depth of the lpt mode."""
    frame, rasterizer, exact, lengths = faint_stack_and_its_stop_depths()
    exact = exact.cpu()
    offsets = frame["isect_offsets"].reshape(-1)
    chunked_stream = torch.cuda.Stream()
    config = LPTConfig(mode="fixed", heavy_ratio=0.05, chunk_count=16)
    checked = 0
    for _ in range(6):
        with torch.cuda.stream(chunked_stream):
            _, (colors, *_, plan) = render(frame, config)
            report = plan.report()
        torch.cuda.synchronize()
        ws = rasterizer.workspace(chunked_stream)
        h, k = report["chunked_tiles"], report["chunk_count"]
        assert h > 0 and k == 16
        depth = ws.item_depth[: offsets.numel()].cpu()
        for item in ws.lpt_order[:h].tolist():
            length, stop = int(lengths[item]), int(exact[item])
            # the exact depth is where a whole batch of the walk found every pixel done (up to one batch late)
            assert stop - 256 <= depth[item] <= stop + math.ceil(length / k), (item, length, stop, int(depth[item]))
            checked += stop < length // 4  # the case that matters: saturating long before the end of the list
    assert checked >= 2
    ref_colors, _, _ = gsplat_forward(frame)
    assert psnr(colors, ref_colors) >= 76.0


def test_a_prediction_that_falls_short_is_walked_on_from_the_composed_transmittance():
    """Where the predicted depth falls short of this frame's (a quarter of the exact stop depth is planted as
    the previous frame's), the chunks cover the prediction and the compositing CTA walks on from each open
    pixel's composed T: the image is gsplat's, and the depth fed back is where the walk really stopped (one
    batch of the lpt mode's), not the end of the list or a chunk that blended on from T = 1."""
    frame, rasterizer, exact, lengths = faint_stack_and_its_stop_depths()
    items = frame["isect_offsets"].numel()
    chunked_stream = torch.cuda.Stream()
    config = LPTConfig(mode="fixed", heavy_ratio=0.2, chunk_count=8)
    with torch.cuda.stream(chunked_stream):
        render(frame, config)  # the frame's history: the next call uses the planted depths
        ws = rasterizer.workspace(chunked_stream)
        ws.item_depth[:items] = torch.clamp(exact // 8, min=1)
        _, (colors, alphas, _, plan) = render(frame, config)
        report = plan.report()
    torch.cuda.synchronize()
    assert report["saturation_feedback"] and report["chunked_tiles"] > 0
    depth, exact = ws.item_depth[:items].cpu(), exact.cpu()
    checked = 0
    for item in ws.lpt_order[: report["chunked_tiles"]].tolist():
        length, stop = int(lengths[item]), int(exact[item])
        if math.ceil(max(1, stop // 8) * constants.DEPTH_MARGIN) < stop - 256:  # the walk went beyond the chunks
            assert stop - 256 <= depth[item] <= stop + 256, (item, length, stop, int(depth[item]))
            checked += stop + 256 < length  # (where it stopped before the end of the list)
    assert checked >= 2
    ref_colors, ref_alphas, _ = gsplat_forward(frame)
    assert psnr(colors, ref_colors) >= 76.0
    assert psnr(alphas, ref_alphas) >= 76.0


def test_meta_describes_its_own_frame_after_later_frames():
    """meta["lpt"] is read lazily: it keeps its frame's facts even when read after the next frame."""
    import gsplat

    means, quats, scales, opacities = random_gaussians(2000, seed=14, cluster=4000)
    colors = torch.rand(means.shape[0], 3, device="cuda")
    viewmats, Ks = cameras(1, 176, 112)
    metas = [gsplat.rasterization(means, quats, scales, opacities, colors, viewmats, Ks, 176, 112, backend="lpt",
                                  lpt_config=LPTConfig(mode=mode))[2] for mode in ("chunk", "lpt")]
    assert metas[0]["lpt"]["mode"] == "chunk" and metas[0]["lpt"]["chunked_tiles"] > 0
    assert metas[1]["lpt"]["chunked_tiles"] == 0


# --- plan and run ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("config", [LPTConfig(mode="lpt"), LPTConfig(mode="chunk", chunk_count=8),
                                    LPTConfig(mode="auto", overhead_lambda=0.0, min_gain=0.0, heavy_item_pace=1.0, chunked_cost_floor=0.0)],
                         ids=lambda c: c.mode)
def test_a_plan_runs_twice_with_equal_output(config):
    frame = small_frame(seed=1)
    ours, (colors, alphas, last_ids, plan) = render(frame, config)
    rasterizer = plan.rasterizer
    again = [torch.empty_like(t) for t in (colors, alphas, last_ids)]
    outputs = VARIANT_3DGS.outputs_struct(*(t.data_ptr() for t in again))
    params = VARIANT_3DGS.params_struct(ours.means2d.data_ptr(), ours.conics.data_ptr(), ours.opacities.data_ptr(),
                                        ours.colors.data_ptr(), 0)
    rasterizer.run(plan, params, outputs)
    for first, second in zip((colors, alphas, last_ids), again):
        assert torch.equal(first, second)


@pytest.mark.parametrize("config", [LPTConfig(mode="chunk", chunk_count=8, saturation_feedback=False),
                                    LPTConfig(mode="fixed", heavy_ratio=0.2, chunk_count=16, saturation_feedback=False),
                                    LPTConfig(mode="fixed", heavy_ratio=0.2, chunk_count=4, saturation_feedback=False,
                                              pixels_per_thread=2)],
                         ids=["chunk", "fixed", "fixed-2px"])
@pytest.mark.parametrize("launch", ["dependent", "side-stream"])
def test_work_after_a_chunked_call_sees_its_whole_image(config, launch, monkeypatch):
    """Calls enqueued while the GPU is still busy (the host ahead of it, as in a render loop): the next op on
    the stream (a copy) reads the finished image, the chunk kernel's composites included. Both launch
    arrangements: the dependent launch (compute capability 9.0+) and the side stream joined with events (what
    older GPUs take; forced here with GSPLAT_LPT_NO_DEPENDENT_LAUNCH=1)."""
    if launch == "side-stream":
        monkeypatch.setenv("GSPLAT_LPT_NO_DEPENDENT_LAUNCH", "1")
    elif torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("the dependent launch needs compute capability 9.0")
    runtime.reset_rasterizers()
    try:
        frame = small_frame(seed=3, cluster=20000)
        reference = gsplat_forward(frame)
        _, (expected, expected_alphas, _, first) = render(frame, config)
        assert (first.rasterizer.lpt_behind_chunks is None) == (launch == "side-stream")
        assert psnr(expected, reference[0]) > 76
        torch.cuda.synchronize()
        for _ in range(4):
            torch.cuda._sleep(2_000_000)
            _, (colors, alphas, _, plan) = render(frame, config)
            copies = colors.clone(), alphas.clone()
            torch.cuda.synchronize()
            assert plan.report()["chunked_tiles"] > 0
            assert torch.equal(copies[0], expected) and torch.equal(copies[1], expected_alphas)
    finally:
        monkeypatch.undo()
        runtime.reset_rasterizers()


def test_a_stale_plan_is_refused():
    frame = small_frame(seed=2)
    ours, (*_, plan) = render(frame, LPTConfig(mode="lpt"))
    render(frame, LPTConfig(mode="lpt"))  # plans the next frame on the same workspace
    with pytest.raises(RuntimeError, match="stale"):
        plan.rasterizer.run(plan, VARIANT_3DGS.params_struct(), VARIANT_3DGS.outputs_struct())


@pytest.mark.parametrize("mode", ["lpt", "auto"])
def test_no_allocation_per_frame_after_warm_up(mode):
    """Only the outputs (colours and alphas) come from the caching allocator per frame; no new device memory
    at all."""
    frame = small_frame(seed=3, W=320, H=192)
    config = LPTConfig(mode=mode)
    for _ in range(3):
        gsplat_lpt.rasterize_to_pixels(**frame, config=config)
    torch.cuda.synchronize()
    before = torch.cuda.memory_stats()
    frames = 5
    for _ in range(frames):
        gsplat_lpt.rasterize_to_pixels(**frame, config=config)
    torch.cuda.synchronize()
    after = torch.cuda.memory_stats()
    assert after["segment.all.allocated"] == before["segment.all.allocated"]  # no cudaMalloc
    assert after["allocation.all.allocated"] - before["allocation.all.allocated"] == 2 * frames  # colours, alphas


@pytest.mark.parametrize("config", [LPTConfig(mode="lpt"), LPTConfig(mode="auto", saturation_feedback=False),
                                    LPTConfig(mode="chunk", chunk_count=4)], ids=lambda c: c.mode)
def test_a_frame_captured_in_a_cuda_graph_replays_equal(config):
    frame = small_frame(seed=5)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):  # warm-up on the capture stream: its workspace exists before the capture
            eager = gsplat_lpt.rasterize_to_pixels(**frame, config=config)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        captured = gsplat_lpt.rasterize_to_pixels(**frame, config=config)
    for _ in range(3):
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(captured[0], eager[0]) and torch.equal(captured[1], eager[1])


# --- inputs that must never hang or kill the context ------------------------------------------------------

def still_alive():
    """A correct frame after a bad one: the CUDA context survived."""
    frame = small_frame(seed=7)
    ref_colors, _, _ = gsplat_forward(frame)
    colors, _ = gsplat_lpt.rasterize_to_pixels(**frame, config=LPTConfig(mode="lpt"))
    torch.cuda.synchronize()
    assert (colors - ref_colors).abs().max().item() <= 1e-6


def corrupted(kind):
    frame = small_frame(seed=6)
    offsets = frame["isect_offsets"].clone().reshape(-1)
    n = frame["flatten_ids"].numel()
    if kind == "decreasing":
        offsets[len(offsets) // 2] = offsets[len(offsets) // 2 + 5] + 7
    elif kind == "past-the-end":
        offsets[-3] = n + 1000
    elif kind == "negative":
        offsets[4] = -5
    frame["isect_offsets"] = offsets.reshape(frame["isect_offsets"].shape)
    if kind == "flatten-ids":
        ids = frame["flatten_ids"].clone()
        ids[n // 3] = frame["means2d"].shape[0] * frame["means2d"].shape[1] + 12
        ids[n // 2] = -1
        frame["flatten_ids"] = ids
    return frame


@pytest.mark.parametrize("kind", ["decreasing", "past-the-end", "negative", "flatten-ids"])
def test_invalid_intersections_raise_and_the_context_survives(kind):
    frame = corrupted(kind)
    match = "flatten_ids holds an index" if kind == "flatten-ids" else "isect_offsets must be non-decreasing"
    with pytest.raises(LPTInputError, match=match):  # checked at once
        gsplat_lpt.rasterize_to_pixels(**frame, config=LPTConfig(mode="auto", check_inputs=True))
    still_alive()
    colors, _ = gsplat_lpt.rasterize_to_pixels(**frame, config=LPTConfig(mode="lpt"))  # not checked: returns
    torch.cuda.synchronize()
    if kind != "flatten-ids":
        assert torch.isnan(colors).all()  # never a silently wrong image
    with pytest.raises(LPTInputError, match="an earlier call"):  # ... and the next call says why
        gsplat_lpt.rasterize_to_pixels(**small_frame(seed=8), config=LPTConfig(mode="lpt"))
    still_alive()


def test_zero_images_return_what_gsplat_returns():
    frame = small_frame(seed=9, cameras_count=1)
    empty = {k: (v[:0] if isinstance(v, torch.Tensor) and k != "flatten_ids" else v) for k, v in frame.items()}
    empty["flatten_ids"] = frame["flatten_ids"][:0]
    colors, alphas = gsplat_lpt.rasterize_to_pixels(**empty, config=LPTConfig())
    assert colors.shape == (0, frame["image_height"], frame["image_width"], 3) and alphas.shape[0] == 0
    still_alive()


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
@pytest.mark.parametrize("mode", ["lpt", "auto", "chunk"])
def test_tensors_on_another_device_than_the_current_one(mode):
    frame = small_frame(seed=10)
    frame = {k: (v.to("cuda:1") if isinstance(v, torch.Tensor) else v) for k, v in frame.items()}
    torch.cuda.set_device(0)
    with torch.cuda.device(1):
        ref_colors, ref_alphas, _ = gsplat_forward(frame)
    colors, alphas = gsplat_lpt.rasterize_to_pixels(**frame, config=LPTConfig(mode=mode))
    assert colors.device == torch.device("cuda:1") and torch.cuda.current_device() == 0
    torch.cuda.synchronize(1)
    assert psnr(colors, ref_colors) >= 76.0
    if mode == "lpt":
        assert torch.equal(colors, ref_colors) and torch.equal(alphas, ref_alphas)


def test_a_smaller_gpu_shared_memory_limit(monkeypatch):
    """With 99 KiB per CTA (RTX 30/40, L4, L40S, A10) every tile size still fits; below what a kernel
    needs the error says which tile size to give up."""
    frame = small_frame(seed=11)
    monkeypatch.setenv(runtime.ENV_SHARED_MEMORY_LIMIT, str(99 * 1024))
    runtime.reset_rasterizers()
    for tile_size in (8, 16, 32):
        f = project(*random_gaussians(2000, seed=tile_size), *cameras(1, 96, 64), 96, 64, tile_size=tile_size)
        ref_colors, _, _ = gsplat_forward(f)
        colors, _ = gsplat_lpt.rasterize_to_pixels(**f, config=LPTConfig(mode="auto"))
        assert psnr(colors, ref_colors) >= 76.0
    monkeypatch.setenv(runtime.ENV_SHARED_MEMORY_LIMIT, str(4 * 1024))
    runtime.reset_rasterizers()
    with pytest.raises(LPTRuntimeError, match="smaller tile_size"):
        gsplat_lpt.rasterize_to_pixels(**frame, config=LPTConfig(mode="lpt"))
    monkeypatch.delenv(runtime.ENV_SHARED_MEMORY_LIMIT)
    runtime.reset_rasterizers()
    still_alive()


@pytest.mark.parametrize("variant_name", ["rasterize_to_pixels", "rasterize_to_pixels_2dgs"])
def test_small_tiles_keep_as_many_ctas_as_their_registers_allow(variant_name):
    """Tiles of 8 x 8 pixels: the kernels reserve shared memory for one batch of 64 staged Gaussians, not
    MAX_BATCH, so that shared memory does not hold K below what the kernel's registers allow (on an H200 it held
    the 3DGS kernel to 15 CTAs per SM)."""
    from cupy_backends.cuda.api import driver

    variant = VARIANTS[variant_name]
    rasterizer = runtime.rasterizer_for(variant, 4 if variant.name == "2dgs" else 3, 8, torch.device("cuda"))
    assert rasterizer.shared_bytes == runtime.blend_shared_bytes(variant.staged_bytes, 64)
    for kernel in (rasterizer.persistent, rasterizer.chunk):
        def per_sm(shared):
            return driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.kernel.ptr, rasterizer.block, shared)

        if per_sm(0) * (rasterizer.shared_bytes + 1024) <= torch.cuda.get_device_properties(0).shared_memory_per_multiprocessor:
            assert per_sm(rasterizer.shared_bytes) == per_sm(0)
    frame = project(*random_gaussians(2000, seed=8), *cameras(1, 96, 64), 96, 64, tile_size=8)
    if variant.name == "3dgs":  # the smaller batch blends gsplat's image, bit for bit
        reference, _, _ = gsplat_forward(frame)
        colors, _ = gsplat_lpt.rasterize_to_pixels(**frame, config=LPTConfig(mode="lpt"))
        assert torch.equal(colors, reference)


def test_large_channel_counts_index_with_64_bits():
    """colors + g * CDIM in 64 bits: the same Gaussians at rows beyond 2^31 / 64 render as at low rows.
    (gsplat 1.5.3's own kernel indexes in 32 bits there, so it cannot be the reference.)"""
    if torch.cuda.get_device_properties(0).total_memory < 40 * 2**30:
        pytest.skip("needs 40 GB of GPU memory")
    W, H, channels = 64, 48, 64
    frame = project(*random_gaussians(200, seed=12), *cameras(1, W, H), W, H, channels=channels)
    low = gsplat_lpt.rasterize_to_pixels(**frame, config=LPTConfig(mode="chunk", chunk_count=4))
    pad = math.ceil(2**31 / channels) + 1000  # rows whose colour offset g * 64 exceeds 2^31
    high = dict(frame)
    for key in ("means2d", "conics", "colors", "opacities"):
        filler = torch.zeros((1, pad) + frame[key].shape[2:], device="cuda")
        high[key] = torch.cat([filler, frame[key]], 1)
    high["flatten_ids"] = frame["flatten_ids"] + pad
    out = gsplat_lpt.rasterize_to_pixels(**high, config=LPTConfig(mode="chunk", chunk_count=4))
    assert torch.equal(out[0], low[0]) and torch.equal(out[1], low[1])
    del high, out
    torch.cuda.empty_cache()
