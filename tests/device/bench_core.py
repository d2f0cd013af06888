"""Core benchmark on a GPU: the whole `rasterize_to_pixels` call of gsplat's kernel and of our modes, per frame,
CUDA events, warm-up, median of >= 21 runs, modes interleaved in one process; plus what each frame's plan
costs on the GPU (kernel time from the profiler), the host time of a call while the GPU is busy, and the
share of Gaussian-warp pairs the cull bound drops.

Runs against whichever gsplat_lpt is first on sys.path (an older checkout too: features it lacks are skipped),
so that one device call can measure before and after side by side:

    python3 tests/device/bench_core.py --out DIR [--frames ladder bonsai garden] [--fixed-grid]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

import gsplat_lpt
from gsplat_lpt import LPTConfig

NEW_CORE = hasattr(gsplat_lpt, "rasterizer_for")
ROOT = Path(__file__).resolve().parents[2]


def data_dir() -> Path:
    for candidate in (os.environ.get("GSPLAT_LPT_DATA"), ROOT / ".data", ROOT.parent / "shared" / "data"):
        if candidate and (Path(candidate) / "bonsai-7k-mini.splat").is_file():
            return Path(candidate)
    raise SystemExit("bonsai-7k-mini.splat not found: set GSPLAT_LPT_DATA")


def project(means, quats, scales, opacities, colors, viewmats, Ks, width, height, tile_size=16):
    """gsplat's projection and tiling: the arguments of rasterize_to_pixels for one frame."""
    from gsplat.cuda._wrapper import fully_fused_projection, isect_offset_encode, isect_tiles

    C = viewmats.shape[0]
    radii, means2d, depths, conics, _ = fully_fused_projection(
        means, None, quats, scales, viewmats, Ks, width, height, packed=False, opacities=opacities)
    tile_width, tile_height = math.ceil(width / tile_size), math.ceil(height / tile_size)
    _, isect_ids, flatten_ids = isect_tiles(means2d, radii, depths, tile_size, tile_width, tile_height)
    offsets = isect_offset_encode(isect_ids, C, tile_width, tile_height)
    colors = colors[None].expand(C, *colors.shape).contiguous() if colors.dim() == 2 else colors
    return dict(means2d=means2d.contiguous(), conics=conics.contiguous(), colors=colors,
                opacities=opacities[None].expand(C, -1).contiguous(), image_width=width, image_height=height,
                tile_size=tile_size, isect_offsets=offsets, flatten_ids=flatten_ids)


def ladder_frames(names):
    """The first frame of each named ladder scene, or probe scene (gsplat_lpt.scenes.probes), projected."""
    try:
        from gsplat_lpt.scenes import make_scene
    except ImportError:
        from gsplat_lpt.scenes.builtin import make_scene
    try:
        from gsplat_lpt.scenes import make_probe_scene, probe_names
    except ImportError:  # (an earlier checkout)
        make_probe_scene, probe_names = None, lambda: []
    for name in names:
        probe = name in probe_names()
        scene = (make_probe_scene if probe else make_scene)(name, frames=1).to("cuda")
        viewmats, Ks = scene.frame_cameras(0)
        yield f"{'probe' if probe else 'ladder'}:{name}", project(scene.means, scene.quats, scene.scales, scene.opacities, scene.colors,
                                        viewmats, Ks, scene.width, scene.height)


def look_at(eye, target):
    eye, target = np.asarray(eye, np.float32), np.asarray(target, np.float32)
    forward = target - eye
    forward /= np.linalg.norm(forward)
    right = np.cross(forward, np.array([0, -1, 0], np.float32))
    right /= np.linalg.norm(right)
    down = np.cross(forward, right)
    c2w = np.eye(4, dtype=np.float32)
    c2w[:3, 0], c2w[:3, 1], c2w[:3, 2], c2w[:3, 3] = right, down, forward, eye
    return torch.from_numpy(np.linalg.inv(c2w))


def bonsai_frame(views=4, width=1920, height=1080):
    return "bonsai (4-view orbit)", project(*bonsai_gaussians(views, width, height))


# Real frames unlike the orbit the backend was tuned on: the trained bonsai from far away (the scene a small, dense
# patch of the image: few heavy tiles of opaque stacks that saturate early) and from close by (large Gaussians
# over every tile). name -> (views, width, height, orbit radius).
BONSAI_VIEWS = {
    "bonsai-far": (1, 1920, 1080, 8.0),
    "bonsai-far-4k": (1, 3840, 2160, 14.0),
    "bonsai-close": (4, 1920, 1080, 1.1),
}


def bonsai_view_frame(name):
    views, width, height, radius = BONSAI_VIEWS[name]
    return (f"{name} ({views} view{'s' if views > 1 else ''} {width}x{height}, r {radius:g})",
            project(*bonsai_gaussians(views, width, height, radius)))


def bonsai_gaussians(views=4, width=1920, height=1080, radius=2.2):
    """The trained bonsai scene (CUDA) seen by `views` cameras orbiting it at `radius`: (means, quats, scales,
    opacities, colors, viewmats, Ks, width, height), the arguments of every variant's projection."""
    raw = np.fromfile(data_dir() / "bonsai-7k-mini.splat", dtype=np.uint8).reshape(-1, 32)
    floats = raw[:, :24].copy().view(np.float32).reshape(-1, 6)
    rgba = raw[:, 24:28].astype(np.float32) / 255.0
    quats = (raw[:, 28:32].astype(np.float32) - 128.0) / 128.0
    quats /= np.linalg.norm(quats, axis=1, keepdims=True)
    to = lambda a: torch.from_numpy(np.ascontiguousarray(a)).cuda()  # noqa: E731
    means, scales, opacities, colors = to(floats[:, :3]), to(floats[:, 3:6]), to(rgba[:, 3]), to(rgba[:, :3])
    centre = means.median(dim=0).values.cpu().numpy()
    angles = np.linspace(0, 2 * np.pi, views, endpoint=False)
    lift = -0.8 * radius / 2.2
    viewmats = torch.stack([look_at(centre + np.array([radius * math.cos(a), lift, radius * math.sin(a)]), centre)
                            for a in angles]).cuda()
    focal = 0.9 * width
    Ks = torch.tensor([[focal, 0, width / 2], [0, focal, height / 2], [0, 0, 1.0]]).repeat(views, 1, 1).cuda()
    return means, to(quats), scales, opacities, colors, viewmats, Ks, width, height


def garden_frame():
    data = np.load(data_dir() / "test_garden.npz")
    means = torch.from_numpy(data["means3d"]).float().cuda()
    n = means.shape[0]
    g = torch.Generator(device="cpu").manual_seed(42)
    quats = torch.nn.functional.normalize(torch.randn(n, 4, generator=g), dim=-1).cuda()
    scales = (torch.rand(n, 3, generator=g) * 0.02).cuda()
    opacities = torch.rand(n, generator=g).cuda()
    colors = torch.from_numpy(data["colors"]).float().cuda() / 255.0
    viewmats = torch.from_numpy(data["viewmats"]).float().cuda()
    Ks = torch.from_numpy(data["Ks"]).float().cuda()
    return "garden (3 real cameras)", project(means, quats, scales, opacities, colors, viewmats, Ks,
                                              int(data["width"]), int(data["height"]))


def psnr(a, b) -> float:
    mse = float(((a - b) ** 2).mean())
    return math.inf if mse == 0 else 10 * math.log10(1.0 / mse)


def on_stream(stream, fn):
    """fn called with `stream` current: each of our modes keeps its own stream, hence its own workspace (the
    saturation feedback, partial buffers and pixels per thread that earlier frames of the same mode left),
    as when a user renders with that mode alone. The timing enters the stream outside the timed region."""
    def call():
        with torch.cuda.stream(stream):
            return fn()
    call.stream, call.inner = stream, fn
    return call


def time_interleaved(variants, repeats, warmup=3, busy=False, samples=None, seed=0):
    """Median ms per call of each variant, interleaved call by call. busy: the GPU is kept busy (a sleep
    kernel) while the call is enqueued, so that the time is the GPU's alone, without the host time the
    GPU would otherwise wait through. samples: a dict that receives every call's time.
    Each repeat calls the variants in a new random order (seeded): on the H200's host the CPU time of a call
    grows with how long the thread waited for the GPU just before it (about 150 us after a 0.5 ms frame,
    400 us after a 26 ms one; tests/device/whole_call_check.py), and an idle GPU waits for that host time.
    With a fixed cyclic order, even rotated, every variant had the same predecessor in most repeats: auto
    behind gsplat's 26 ms call took 0.80 ms per whole call on extreme against 0.62-0.65 ms for identical
    configurations elsewhere in the order, with the same GPU time."""
    for _ in range(warmup):
        for fn in variants.values():
            fn()
    torch.cuda.synchronize()
    times = {name: [] for name in variants}
    order = list(variants.items())
    shuffle = random.Random(seed).shuffle
    for repeat in range(repeats):
        shuffle(order)
        for name, fn in order:
            stream = getattr(fn, "stream", None) or torch.cuda.current_stream()
            inner = getattr(fn, "inner", fn)
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            with torch.cuda.stream(stream):
                if busy:
                    torch.cuda._sleep(2_000_000)  # ~1 ms: longer than any call's host time
                start.record(stream)
                inner()
                stop.record(stream)
            stop.synchronize()
            times[name].append(start.elapsed_time(stop))
    if samples is not None:
        samples.update(times)
    return {name: statistics.median(t) for name, t in times.items()}


def confirm_best(variants, busy, repeats, top=3):
    """auto against the `top` fastest fixed schedules of the grid, timed again in fresh calls (GPU time, another
    random order). The grid's minimum over 20 schedules is picked on the same noisy samples it reports, so it
    is biased low by about the spread between identical configurations (0.7-0.8% per call's median on the
    H200); timed anew, the best of a few is not. Returns each one's new median and auto / the best of them."""
    fixed = sorted((label for label in busy if label.startswith("fixed")), key=lambda label: busy[label])[:top]
    policies = ["auto"] + (["auto-nofloor"] if "auto-nofloor" in variants else [])  # (Eq. (6) alone, timed too)
    again = time_interleaved({label: variants[label] for label in [*policies, *fixed]}, max(repeats, 21), busy=True,
                             seed=1)
    best = min(fixed, key=lambda label: again[label])
    return {"ms": again, "best": best, "auto_over_best": again["auto"] / again[best],
            **({"nofloor_over_best": again["auto-nofloor"] / again[best]} if len(policies) > 1 else {})}


def auto_trace(call, calls=30):
    """(h, k, ms) of consecutive auto calls of one frame on its stream: whether the policy's pick, fed back
    the saturation depths of the call before, settles or oscillates."""
    trace = []
    with torch.cuda.stream(call.stream):
        for _ in range(calls):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            _, _, stats = call.inner(return_stats=True)
            stop.record()
            stop.synchronize()
            trace.append((stats["chunked_tiles"], stats["chunk_count"], round(start.elapsed_time(stop), 4)))
    return trace


def host_us(fn, calls=50, rounds=5) -> float:
    """CPU time of one call while the GPU is busy with earlier work (the call never waits for it): the median
    over `rounds` of the mean over `calls` calls. A mode's call (on_stream) is timed inside its stream, entered
    once outside the timed loop: entering a stream context costs the host about 20 us on the H200's host, more
    than the call's own work it would hide."""
    stream, inner = getattr(fn, "stream", None), getattr(fn, "inner", fn)
    with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
        inner()
        times = []
        for _ in range(rounds):
            torch.cuda.synchronize()
            torch.cuda._sleep(int(2e8))  # ~0.1 s of GPU time ahead of the calls
            start = time.perf_counter()
            for _ in range(calls):
                inner()
            times.append((time.perf_counter() - start) * 1e6 / calls)
        torch.cuda.synchronize()
    return statistics.median(times)


def kernel_times_us(fn, calls, warmup=1):
    """GPU time per call of every kernel `fn` launches, by the profiler's kernel key (CUPTI), over `calls` calls
    after `warmup` untimed ones. (Here rather than in gsplat_lpt, so that the baseline stage can time a checkout
    from before it.)"""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    times = {}
    for event in prof.key_averages():
        total = event.device_time_total if hasattr(event, "device_time_total") else event.cuda_time_total
        times[event.key] = times.get(event.key, 0.0) + total / calls
    return times


def kernel_us(fn, names, calls=20):
    """GPU time per call of the kernels whose name contains one of `names` (profiler, CUPTI)."""
    return sum(us for key, us in kernel_times_us(fn, calls).items() if any(name in key for name in names))


def register_warp_shapes(bits_by_name) -> None:
    """Warp shapes of the benchmarks' own for this process: LPTConfig(warp_shape=name) then runs with those
    FrameArgs.warp_blocks bits (config.WARP_BLOCK_BITS)."""
    from gsplat_lpt import config as config_module

    config_module.WARP_BLOCK_BITS.update(bits_by_name)
    config_module.WARP_SHAPES = tuple(config_module.WARP_BLOCK_BITS)


def culled_share(frame, warp_shape="rows") -> float:
    """Share of (Gaussian, warp) pairs of the frame that the cull bound drops (16 x 16 tiles, two pixels per
    thread: 4 warps of 4 rows, or of 8 x 8 pixels with warp_shape "blocks"), by the test the kernels take on scaled
    batches (reference.may_contribute_scaled; the row test for Gaussians that cannot be scaled)."""
    from gsplat_lpt.reference import may_contribute_scaled as may_contribute

    offsets = frame["isect_offsets"].reshape(-1).long()
    ids = frame["flatten_ids"].long()
    n = ids.numel()
    if n == 0:
        return 0.0
    tile_of = torch.repeat_interleave(torch.arange(offsets.numel(), device="cuda"),
                                      torch.diff(torch.cat([offsets, torch.tensor([n], device="cuda")])))
    tiles = frame["isect_offsets"].shape[-1] * frame["isect_offsets"].shape[-2]
    tile = tile_of % tiles
    tx, ty = (tile % frame["isect_offsets"].shape[-1]).float() * 16, (tile // frame["isect_offsets"].shape[-1]).float() * 16
    means2d = frame["means2d"].reshape(-1, 2)[ids]
    conics = frame["conics"].reshape(-1, 3)[ids]
    opacities = frame["opacities"].reshape(-1)[ids]
    dropped = 0
    for warp in range(4):
        # the bound per pair, with its box shifted: means relative to the tile origin
        local = means2d - torch.stack([tx, ty], -1)
        if warp_shape == "blocks":
            x0, y0 = 8 * (warp % 2), 8 * (warp // 2)
            box = (x0 + 0.5, x0 + 7.5, y0 + 0.5, y0 + 7.5)
        else:
            box = (0.5, 15.5, 4 * warp + 0.5, 4 * warp + 3.5)
        dropped += int((~may_contribute(local, conics, opacities, box)).sum())
    return dropped / (4 * n)


def measure(name, frame, repeats, fixed_grid, policy=None, policy_grid=(), rhos=(0.001, 0.005, 0.02, 0.05),
            grid_k=None, grid_two_pixels=False):
    from gsplat_lpt.hook import original

    gsplat_blend = original("rasterize_to_pixels")
    auto = LPTConfig(mode="auto", **(policy or {}))
    configs = {"lpt": LPTConfig(mode="lpt"), "auto": auto}
    if policy:  # auto with the calibrated constants, and with the defaults
        configs["auto-default"] = LPTConfig(mode="auto")
    if NEW_CORE:
        configs["lpt-nocull"] = LPTConfig(mode="lpt", cull=False)
        if "pixels_per_thread" in LPTConfig.__dataclass_fields__:
            configs["lpt-1px"] = LPTConfig(mode="lpt", pixels_per_thread=1)
            configs["lpt-2px"] = LPTConfig(mode="lpt", pixels_per_thread=2)
            configs["auto-2px"] = auto.replace(pixels_per_thread=2)
        configs["auto-nofeedback"] = auto.replace(saturation_feedback=False)
        # the frame-level culling gain on auto's own schedule (the balance bound's factor: auto-nocull against
        # gsplat's time x gsplat's SM activity measures the balance alone)
        configs["auto-nocull"] = auto.replace(cull=False)
        if "chunked_cost_floor" in LPTConfig.__dataclass_fields__:  # Eq. (6) alone choosing h (the floor at 0)
            configs["auto-nofloor"] = auto.replace(chunked_cost_floor=0.0)
        if "warp_shape" in LPTConfig.__dataclass_fields__:
            configs["lpt-rows"] = LPTConfig(mode="lpt", warp_shape="rows")
            configs["lpt-blocks"] = LPTConfig(mode="lpt", warp_shape="blocks")
            configs["auto-rows"] = auto.replace(warp_shape="rows")
            if os.environ.get("BENCH_WARP_ROLES"):  # in a chunked frame, one kernel's warps back to blocks
                # (bit 2: the chunk kernel, bit 3: the LPT kernel)
                register_warp_shapes({"chunk-blocks": 0b0101, "chunked-lpt-blocks": 0b1001})
                configs["auto-chunkblocks"] = auto.replace(warp_shape="chunk-blocks")
                configs["auto-lptblocks"] = auto.replace(warp_shape="chunked-lpt-blocks")
    grid_k = grid_k or ((4, 8, 16, 32, 64) if NEW_CORE else (4, 8, 16))
    if fixed_grid and not name.startswith(("ladder:balanced", "bonsai (")):  # (balanced: auto never chunks)
        for rho in rhos:
            for k in grid_k:
                configs[f"fixed({rho},{k})"] = LPTConfig(mode="fixed", heavy_ratio=rho, chunk_count=k)
                if grid_two_pixels:  # the same schedule, the persistent kernel at two pixels per thread
                    configs[f"fixed2px({rho},{k})"] = configs[f"fixed({rho},{k})"].replace(pixels_per_thread=2)
    for lam, beta, *floor in policy_grid:  # auto with other constants of Eq. (6): the policy's sensitivity to them
        label = f"auto(l={lam:g},b={beta:g}" + (f",f={floor[0]:g})" if floor else ")")
        configs[label] = auto.replace(overhead_lambda=lam, imbalance_beta=beta,
                                      **({"chunked_cost_floor": floor[0]} if floor else {}))
    variants = {"vanilla": lambda: gsplat_blend(**frame)}
    streams = {label: torch.cuda.Stream() for label in configs}
    torch.cuda.synchronize()  # the frame's tensors are ready for every stream
    for label, config in configs.items():
        variants[label] = on_stream(streams[label], lambda c=config: gsplat_lpt.rasterize_to_pixels(**frame, config=c))
    if NEW_CORE:  # the first auto frames size the partial buffers and learn the stop depths
        for _ in range(3):
            variants["auto"]()
        # the fixed schedule of auto's own (h, k): what the policy's search costs beyond the schedule it picks
        with torch.cuda.stream(streams["auto"]):
            _, _, stats = gsplat_lpt.rasterize_to_pixels(**frame, config=auto, return_stats=True)
        h, k, nonempty = stats["chunked_tiles"], stats["chunk_count"], stats["nonempty_items"]
        if h > 0:
            label = "auto-hk-fixed"
            configs[label] = LPTConfig(mode="fixed", heavy_ratio=(h - 0.5) / nonempty, chunk_count=k)
            streams[label] = torch.cuda.Stream()
            variants[label] = on_stream(streams[label],
                                        lambda c=configs[label]: gsplat_lpt.rasterize_to_pixels(**frame, config=c))
    samples = {}
    ms = time_interleaved(variants, repeats, samples=samples)
    reference, _ = gsplat_blend(**frame)
    row = {"frame": name, "n_isects": frame["flatten_ids"].numel(), "vanilla_ms": ms["vanilla"], "modes": {}}
    for label, config in configs.items():
        with torch.cuda.stream(streams[label]):  # the mode's own workspace, as timed
            colors, _, stats = gsplat_lpt.rasterize_to_pixels(**frame, config=config, return_stats=True)
            stats = dict(stats)
        torch.cuda.synchronize()
        row["modes"][label] = {"ms": ms[label], "psnr": psnr(colors, reference), "h": stats["chunked_tiles"],
                               "k": stats["chunk_count"]}
        if label == "lpt":
            row["imbalance"] = stats["imbalance"]
            row["K"] = stats["concurrent_ctas"]
    if any(label.startswith("fixed") for label in configs):
        best = min((label for label in configs if label.startswith("fixed")), key=lambda label: ms[label])
        row["best_fixed"] = {"name": best, "ms": ms[best]}
    row["samples_ms"] = {label: [round(t, 4) for t in samples[label]] for label in ("vanilla", "lpt", "auto")}
    if "best_fixed" in row:
        row["samples_ms"]["best_fixed"] = [round(t, 4) for t in samples[row["best_fixed"]["name"]]]
    # the same calls with the host time hidden behind earlier GPU work: every mode, so that the policy is also
    # graded on the GPU's time alone (whole calls carry the host's noise)
    busy = time_interleaved(variants, repeats, busy=True)
    row["gpu_ms"] = busy
    if "best_fixed" in row:
        best = min((label for label in configs if label.startswith("fixed")), key=lambda label: busy[label])
        row["best_fixed_gpu"] = {"name": best, "ms": busy[best]}
        row["confirmed_gpu"] = confirm_best(variants, busy, repeats)
    row["auto_trace"] = auto_trace(on_stream(streams["auto"], lambda **kw: gsplat_lpt.rasterize_to_pixels(
        **frame, config=auto, **kw)))
    row["host_us"] = {"vanilla": host_us(variants["vanilla"]), "lpt": host_us(variants["lpt"]),
                      "auto": host_us(variants["auto"])}
    plan_kernels = ("plan_cluster", "plan_costs", "plan_order") if NEW_CORE else ("plan_frame_fused", "tile_workloads",
                                                                  "choose_chunking", "radixSort", "RadixSort")
    row["plan_gpu_us"] = kernel_us(variants["auto"], plan_kernels)
    if NEW_CORE:
        row["plan_gpu_us_by_kernel"] = {name: kernel_us(variants["auto"], (name,)) for name in plan_kernels}
        row["plan_gpu_us_lpt"] = kernel_us(variants["lpt"], plan_kernels)
        if os.environ.get("BENCH_PLAN_HEAD"):  # the plan's cost against the policy's search range (h <= 255)
            small = auto.replace(max_chunked_tiles=255)
            call = lambda: gsplat_lpt.rasterize_to_pixels(**frame, config=small)  # noqa: E731
            row["plan_gpu_us_h255"] = {name: kernel_us(call, (name,)) for name in plan_kernels}
            colors, _, stats = gsplat_lpt.rasterize_to_pixels(**frame, config=small, return_stats=True)
            row["h255"] = {"h": stats["chunked_tiles"], "k": stats["chunk_count"]}
    row["blend_gpu_us"] = {"vanilla": kernel_us(variants["vanilla"], ("rasterize_to_pixels",)),
                           "lpt": kernel_us(variants["lpt"], ("lpt_persistent_blend",))}
    if NEW_CORE:
        row["culled_share"] = culled_share(frame)
        row["culled_share_blocks"] = culled_share(frame, "blocks")
    return row


def plot(rows, path: Path, before=None) -> None:
    """Speedup over gsplat's blend against imbalance (log-log), our modes now and, given, before."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    series = [("auto", rows, "auto", "o", "C0"), ("lpt", rows, "lpt", "s", "C1")]
    if before:
        series.append(("auto, before", before, "auto", "x", "C7"))
    for label, data, mode, marker, color in series:
        xs = [max(r["imbalance"], 0.05) for r in data]
        ys = [r["vanilla_ms"] / r["modes"][mode]["ms"] for r in data]
        ax.scatter(xs, ys, label=label, marker=marker, color=color)
    for r in rows:
        ax.annotate(r["frame"].replace("ladder:", "").split(" (")[0], (max(r["imbalance"], 0.05),
                    r["vanilla_ms"] / r["modes"]["auto"]["ms"]), fontsize=7, xytext=(4, 3), textcoords="offset points")
    ax.axhline(1.0, color="k", lw=0.8, ls="--")
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    ax.xaxis.set_major_formatter(plain)
    ax.yaxis.set_major_formatter(plain)
    ax.set_xlabel("imbalance = heaviest tile / (N_total / K)")
    ax.set_ylabel("speedup over gsplat's blend")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=130)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    parser.add_argument("--tag", default="new" if NEW_CORE else "baseline")
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--ladder", nargs="*", default=["balanced", "mild", "moderate", "street", "severe", "extreme",
                                                         "rig", "foliage", "mixed", "veil", "fog"])
    parser.add_argument("--real", nargs="*", default=["bonsai", "garden"],
                        choices=["bonsai", "garden", *BONSAI_VIEWS], help="real frames (bonsai-*: other views)")
    parser.add_argument("--fixed-grid", action="store_true")
    parser.add_argument("--rhos", nargs="+", type=float, default=[0.001, 0.005, 0.02, 0.05],
                        help="heavy ratios of the fixed grid")
    parser.add_argument("--grid-two-pixels", action="store_true",
                        help="the fixed grid also with the persistent kernel at two pixels per thread")
    parser.add_argument("--ks", nargs="+", type=int, default=None, help="chunk counts of the fixed grid")
    parser.add_argument("--policy-grid", nargs="*", default=[], metavar="LAMBDA:BETA[:FLOOR]",
                        help="also time auto with these (overhead_lambda, imbalance_beta[, chunked_cost_floor])")
    parser.add_argument("--calibration", type=Path, help="calibration.json of `gsplat-lpt calibrate`: auto uses its fit")
    parser.add_argument("--plot", nargs="+", type=Path, metavar=("JSON", "BEFORE_JSON"),
                        help="only draw speedup_vs_imbalance.png from a result file (and an earlier one) into --out")
    args = parser.parse_args()
    if args.plot:
        rows = json.loads(args.plot[0].read_text())
        before = json.loads(args.plot[1].read_text()) if len(args.plot) > 1 else None
        args.out.mkdir(parents=True, exist_ok=True)
        plot(rows, args.out / "speedup_vs_imbalance.png", before)
        return
    policy = None
    if args.calibration is not None and args.calibration.is_file():
        fit = json.loads(args.calibration.read_text())["fit"]
        policy = {"overhead_lambda": fit["overhead_lambda"], "imbalance_beta": fit["imbalance_beta"]}
        print(f"auto uses the calibrated lambda = {policy['overhead_lambda']}, beta = {policy['imbalance_beta']}")
    args.out.mkdir(parents=True, exist_ok=True)
    frames = list(ladder_frames(args.ladder))
    frames += [{"bonsai": bonsai_frame, "garden": garden_frame}[name]() if name in ("bonsai", "garden")
               else bonsai_view_frame(name) for name in args.real]
    rows = []
    for name, frame in frames:
        grid = [tuple(float(x) for x in pair.split(":")) for pair in args.policy_grid]
        row = measure(name, frame, args.repeats, args.fixed_grid, policy, grid, args.rhos, args.ks,
                      args.grid_two_pixels)
        rows.append(row)
        print(json.dumps(row), flush=True)
    (args.out / f"bench_{args.tag}.json").write_text(json.dumps(rows, indent=1))
    print(f"\n[{args.tag}] {'frame':<24} {'imbal':>6} {'vanilla':>8} {'lpt':>7} {'auto':>7} {'(h,k)':>9} {'best fixed':>18} "
          f"{'lpt x':>6} {'auto x':>6} {'psnr':>6} {'plan us':>8} {'host us v/l/a':>16} {'cull':>5}")
    for r in rows:
        v, modes = r["vanilla_ms"], r["modes"]
        bf = r.get("best_fixed")
        bf_text = f"{bf['name']} {bf['ms']:.3f}" if bf else "-"
        host = "/".join(f"{r['host_us'][m]:.0f}" for m in ("vanilla", "lpt", "auto"))
        print(f"[{args.tag}] {r['frame']:<24} {r['imbalance']:>6.2f} {v:>8.3f} {modes['lpt']['ms']:>7.3f} "
              f"{modes['auto']['ms']:>7.3f} {str((modes['auto']['h'], modes['auto']['k'])):>9} {bf_text:>18} "
              f"{v / modes['lpt']['ms']:>6.2f} {v / modes['auto']['ms']:>6.2f} {modes['auto']['psnr']:>6.1f} "
              f"{r['plan_gpu_us']:>8.1f} {host:>16} {r.get('culled_share', float('nan')):>5.2f}")
    print(f"\n[{args.tag}] speedup (psnr) of every mode; kernel us vanilla/lpt; culled share rows/blocks")
    for r in rows:
        v = r["vanilla_ms"]
        modes = " ".join(f"{label}={v / m['ms']:.2f}({m['psnr']:.0f})" for label, m in r["modes"].items()
                         if not label.startswith(("fixed", "auto(")))
        kernel = r["blend_gpu_us"]
        split = "/".join(f"{us:.1f}" for us in r.get("plan_gpu_us_by_kernel", {}).values())
        print(f"[{args.tag}] {r['frame'][:18]:<18} {modes} k={kernel['vanilla']:.0f}/{kernel['lpt']:.0f} "
              f"cull={r.get('culled_share', float('nan')):.2f}/{r.get('culled_share_blocks', float('nan')):.2f} "
              f"plan auto {split} lpt {r.get('plan_gpu_us_lpt', float('nan')):.1f}")


    print(f"\n[{args.tag}] GPU-only ms (host hidden) vanilla/lpt/auto, x; call spread p10-p90 ms lpt | auto; auto picks")
    for r in rows:
        g = r["gpu_ms"]
        spread = " | ".join(f"{statistics.quantiles(r['samples_ms'][m], n=10)[0]:.3f}-"
                            f"{statistics.quantiles(r['samples_ms'][m], n=10)[-1]:.3f}" for m in ("lpt", "auto"))
        picks = sorted({(h, k) for h, k, _ in r["auto_trace"]})
        print(f"[{args.tag}] {r['frame'][:18]:<18} {g['vanilla']:.3f}/{g['lpt']:.3f}/{g['auto']:.3f} "
              f"{g['vanilla'] / g['lpt']:.2f}x/{g['vanilla'] / g['auto']:.2f}x  {spread}  {picks[:6]}")

    same = [r for r in rows if "auto-hk-fixed" in r["gpu_ms"]]
    if same:  # the policy's own cost: auto against the fixed mode of the (h, k) auto picked
        print(f"\n[{args.tag}] GPU-only: auto / the fixed schedule of auto's (h, k)")
        print(f"[{args.tag}] " + " ".join(f"{r['frame'].replace('ladder:', '')[:8]}="
                                          f"{r['gpu_ms']['auto'] / r['gpu_ms']['auto-hk-fixed']:.3f}" for r in same))

    if any("best_fixed" in r for r in rows):  # each policy against the best fixed schedule of every such frame
        graded = [r for r in rows if "best_fixed" in r]
        print(f"\n[{args.tag}] auto / best fixed (ms ratio) per frame; worst and mean last")
        labels = ["auto"] + [label for label in rows[0]["modes"] if label.startswith(("auto(", "auto-nofloor"))]
        for label in labels:
            ratios = [r["modes"][label]["ms"] / r["best_fixed"]["ms"] for r in graded]
            picks = " ".join(f"{r['frame'].replace('ladder:', '')[:8]}={q:.2f}({r['modes'][label]['h']},{r['modes'][label]['k']})"
                             for r, q in zip(graded, ratios))
            print(f"[{args.tag}] {label:<22} {picks} worst={max(ratios):.3f} mean={statistics.mean(ratios):.3f}")
        if all("best_fixed_gpu" in r for r in graded):
            print(f"\n[{args.tag}] GPU-only: auto / best fixed (ms ratio, host hidden) per frame; worst and mean last")
            for label in labels:
                ratios = [r["gpu_ms"][label] / r["best_fixed_gpu"]["ms"] for r in graded]
                picks = " ".join(f"{r['frame'].replace('ladder:', '')[:8]}={q:.2f}/{r['best_fixed_gpu']['name'][5:]}"
                                 for r, q in zip(graded, ratios))
                print(f"[{args.tag}] {label:<22} {picks} worst={max(ratios):.3f} mean={statistics.mean(ratios):.3f}")

        confirmed = [r for r in graded if "confirmed_gpu" in r]
        if confirmed:
            print(f"\n[{args.tag}] GPU-only, timed again: auto / the best of the grid's 3 fastest fixed schedules")
            ratios = [r["confirmed_gpu"]["auto_over_best"] for r in confirmed]
            picks = " ".join(f"{r['frame'].replace('ladder:', '')[:8]}={q:.3f}/{r['confirmed_gpu']['best'][5:]}"
                             for r, q in zip(confirmed, ratios))
            print(f"[{args.tag}] auto                   {picks} worst={max(ratios):.3f} mean={statistics.mean(ratios):.3f}")
            if all("nofloor_over_best" in r["confirmed_gpu"] for r in confirmed):
                ratios = [r["confirmed_gpu"]["nofloor_over_best"] for r in confirmed]
                picks = " ".join(f"{r['frame'].replace('ladder:', '')[:8]}={q:.3f}" for r, q in zip(confirmed, ratios))
                print(f"[{args.tag}] auto-nofloor           {picks} worst={max(ratios):.3f} "
                      f"mean={statistics.mean(ratios):.3f}")

    # every frame (balanced and real ones too): each auto against the best of lpt and the fixed grid, GPU time
    labels = ["auto"] + [label for label in rows[0]["modes"] if label.startswith(("auto(", "auto-nofloor"))]
    print(f"\n[{args.tag}] GPU-only: auto / min(lpt, best fixed) per frame, every frame; worst and mean last")
    for label in labels:
        ratios = [r["gpu_ms"][label] / min(r["gpu_ms"]["lpt"], r.get("best_fixed_gpu", {}).get("ms", math.inf))
                  for r in rows]
        picks = " ".join(f"{r['frame'].replace('ladder:', '')[:8]}={q:.2f}" for r, q in zip(rows, ratios))
        print(f"[{args.tag}] {label:<22} {picks} worst={max(ratios):.3f} mean={statistics.mean(ratios):.3f}")


if __name__ == "__main__":
    sys.exit(main())
