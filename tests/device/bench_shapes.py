"""Frames unlike the ladder's, timed against gsplat's blend in one process: other channel counts (depth, RGB+depth,
feature maps of 8-64 channels), many small images in one batch, and one low-resolution image. For each: the
GPU time of gsplat's `rasterize_to_pixels`, of `lpt` and of `auto` (the host hidden behind a sleep kernel), the
whole call, and whether `lpt` is bit for bit gsplat's.

    python3 tests/device/bench_shapes.py [--repeats 11] [--out DIR] [--tile-sizes 8 32] [--balanced-scales 0.25 3]
        [--small-sizes 128x128 640x480] [--bonsai-views 1,1920,1080,3.0 4,960,540,2.2] [--unlike-only]

`--bonsai-views VIEWS,WIDTH,HEIGHT,RADIUS`: the bonsai seen by that many cameras orbiting it at that radius (the
orbit of the other frames is 4,1920,1080,2.2): fewer views, a lower resolution or a camera further away make the
heaviest tile heavier against the mean work per CTA, so these span the imbalances between the balanced orbit (0.13)
and the chunked frames, where the persistent kernel's pixels per thread are decided (`lpt-1px`, `lpt-2px`).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import bonsai_gaussians, ladder_frames, on_stream, project, time_interleaved  # noqa: E402

import gsplat_lpt  # noqa: E402
from gsplat_lpt import LPTConfig  # noqa: E402


def with_channels(frame, channels: int, seed: int = 0):
    """The frame with `channels` random colour channels per Gaussian (same geometry and lists)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    colors = torch.rand(*frame["colors"].shape[:-1], channels, generator=g, device="cuda")
    return {**frame, "colors": colors}


def unlike_frames(tile_sizes=(), balanced_scales=(), small_sizes=(), bonsai_views=(), views_channels=(3,),
                  views_tile_sizes=(16,)):
    """Frames unlike the ladder's in other ways: gsplat's tiling at other tile sizes (the bonsai orbit, the balanced
    room, the street), the balanced room with more or fewer Gaussians (`scale` x 648,000), and small images of the
    bonsai (`WIDTHxHEIGHT`: one view; the whole call is then mostly the host's)."""
    from gsplat_lpt.scenes import make_scene

    scenes = {name: make_scene(name, frames=1).to("cuda") for name in ("balanced", "street")} if tile_sizes else {}
    bonsai = bonsai_gaussians(4, 1920, 1080) if tile_sizes else None
    for tile_size in tile_sizes:
        yield f"bonsai 4x1080p, tile {tile_size}", project(*bonsai, tile_size=tile_size)
        for name, scene in scenes.items():
            viewmats, Ks = scene.frame_cameras(0)
            yield f"{name} 1080p, tile {tile_size}", project(scene.means, scene.quats, scene.scales, scene.opacities,
                                                             scene.colors, viewmats, Ks, scene.width, scene.height,
                                                             tile_size=tile_size)
    for size in small_sizes:
        width, height = (int(v) for v in size.split("x"))
        yield f"bonsai 1x{size}", project(*bonsai_gaussians(1, width, height))
    for spec, tile_size in itertools.product(bonsai_views, views_tile_sizes):
        views, width, height, radius = spec.split(",")
        frame = project(*bonsai_gaussians(int(views), int(width), int(height), float(radius)), tile_size=tile_size)
        for channels in views_channels:
            name = f"bonsai {views}x{width}x{height} r{radius}" + (f", tile {tile_size}" if tile_size != 16 else "")
            yield (name + (f", {channels} ch" if channels != 3 else ""),
                   frame if channels == 3 else with_channels(frame, channels))
    for scale in balanced_scales:
        scene = make_scene("balanced", frames=1, scale=scale).to("cuda")
        viewmats, Ks = scene.frame_cameras(0)
        yield (f"balanced x{scale:g} ({scene.num_gaussians // 1000}k)",
               project(scene.means, scene.quats, scene.scales, scene.opacities, scene.colors, viewmats, Ks, scene.width,
                       scene.height))


def frames(channel_counts=(1, 4, 8, 16, 32, 64)):
    bonsai = project(*bonsai_gaussians(4, 1920, 1080))
    for channels in channel_counts:
        yield f"bonsai 4x1080p, {channels} ch", with_channels(bonsai, channels)
    _, balanced = next(ladder_frames(["balanced"]))
    for channels in (1, 16):
        yield f"balanced 1080p, {channels} ch", with_channels(balanced, channels)
    _, street = next(ladder_frames(["street"]))
    yield "street 1080p, 16 ch", with_channels(street, 16)
    means, quats, scales, opacities, colors, *_ = bonsai_gaussians(1, 1920, 1080)
    _, _, _, _, _, viewmats, Ks, width, height = bonsai_gaussians(16, 480, 270)
    yield "bonsai 16x480x270", project(means, quats, scales, opacities, colors, viewmats, Ks, width, height)
    _, _, _, _, _, viewmats, Ks, width, height = bonsai_gaussians(1, 320, 240)
    yield "bonsai 1x320x240", project(means, quats, scales, opacities, colors, viewmats, Ks, width, height)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    parser.add_argument("--only", default="", help="only the frames whose name contains this")
    parser.add_argument("--tag", default="", help="suffix of the result file")
    parser.add_argument("--channels", nargs="+", type=int, default=[1, 4, 8, 16, 32, 64],
                        help="colour channels of the bonsai orbit frames")
    parser.add_argument("--tile-sizes", nargs="*", type=int, default=[],
                        help="also the bonsai orbit, the balanced room and the street tiled at these sizes")
    parser.add_argument("--balanced-scales", nargs="*", type=float, default=[],
                        help="also the balanced room with this many times its 648,000 Gaussians")
    parser.add_argument("--small-sizes", nargs="*", default=[], help="also the bonsai in one small image, WIDTHxHEIGHT")
    parser.add_argument("--bonsai-views", nargs="*", default=[], metavar="VIEWS,WIDTH,HEIGHT,RADIUS",
                        help="also the bonsai seen by VIEWS cameras of WIDTHxHEIGHT orbiting it at RADIUS")
    parser.add_argument("--views-channels", nargs="+", type=int, default=[3],
                        help="colour channels of the --bonsai-views frames (3: the bonsai's own colours)")
    parser.add_argument("--views-tile-sizes", nargs="+", type=int, default=[16],
                        help="tile sizes of the --bonsai-views frames")
    parser.add_argument("--unlike-only", action="store_true",
                        help="only the frames of --tile-sizes, --balanced-scales, --small-sizes and --bonsai-views")
    args = parser.parse_args()
    from gsplat_lpt.hook import original

    gsplat_blend = original("rasterize_to_pixels")
    rows = []
    work = [] if args.unlike_only else frames(args.channels)
    for name, frame in itertools.chain(work, unlike_frames(args.tile_sizes, args.balanced_scales, args.small_sizes,
                                                                 args.bonsai_views, args.views_channels,
                                                                 args.views_tile_sizes)):
        if args.only not in name:
            continue
        calls = {"gsplat": lambda f=frame: gsplat_blend(**f)}
        configs = {"lpt": LPTConfig(mode="lpt"), "auto": LPTConfig(mode="auto"),
                   "lpt-1px": LPTConfig(mode="lpt", pixels_per_thread=1), "lpt-2px": LPTConfig(mode="lpt", pixels_per_thread=2),
                   "lpt-nocull": LPTConfig(mode="lpt", cull=False)}
        for label, config in configs.items():  # each on its own stream, hence its own workspace (as in bench_core)
            calls[label] = on_stream(torch.cuda.Stream(), lambda f=frame, c=config, **kw:
                                     gsplat_lpt.rasterize_to_pixels(**f, config=c, **kw))
        torch.cuda.synchronize()  # the frame's tensors are ready for every stream
        for fn in calls.values():  # (auto: the first calls size its buffers and learn the stop depths)
            fn()
        gpu = time_interleaved(calls, args.repeats, busy=True)
        whole = time_interleaved(calls, args.repeats)
        reference, reference_alphas = gsplat_blend(**frame)
        with torch.cuda.stream(calls["lpt"].stream):
            ours, ours_alphas, stats = calls["lpt"].inner(return_stats=True)
            pixels, imbalance = stats["pixels_per_thread"], stats["imbalance"]
        auto_colors, _ = calls["auto"]()
        torch.cuda.synchronize()
        exact = torch.equal(reference, ours) and torch.equal(reference_alphas, ours_alphas)
        auto_error = float((auto_colors - reference).abs().max())
        row = {"frame": name, "n_isects": frame["flatten_ids"].numel(), "gpu_ms": gpu, "whole_ms": whole,
               "lpt_bitwise": exact, "auto_max_abs_error": auto_error,
               "lpt_pixels_per_thread": pixels, "imbalance": imbalance}
        rows.append(row)
        print(json.dumps(row), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"bench_shapes{args.tag}.json").write_text(json.dumps(rows, indent=1))
    print(f"\n{'frame':<26} {'imbalance':>9} {'gsplat ms':>9} {'lpt x':>6} {'(px)':>4} {'auto x':>6} {'1px x':>6} {'2px x':>6} "
          f"{'nocull x':>8} {'whole: lpt x':>12} {'auto x':>6} {'lpt exact':>9} {'auto err':>9}")
    for r in rows:
        g, w = r["gpu_ms"], r["whole_ms"]
        print(f"{r['frame']:<26} {r['imbalance']:>9.2f} {g['gsplat']:>9.3f} {g['gsplat'] / g['lpt']:>6.2f} {r['lpt_pixels_per_thread']:>4} "
              f"{g['gsplat'] / g['auto']:>6.2f} {g['gsplat'] / g['lpt-1px']:>6.2f} {g['gsplat'] / g['lpt-2px']:>6.2f} "
              f"{g['gsplat'] / g['lpt-nocull']:>8.2f} "
              f"{w['gsplat'] / w['lpt']:>12.2f} {w['gsplat'] / w['auto']:>6.2f} {str(r['lpt_bitwise']):>9} "
              f"{r['auto_max_abs_error']:>9.1e}")


if __name__ == "__main__":
    main()
