"""2DGS benchmark on a GPU: the whole `rasterize_to_pixels_2dgs` call of gsplat's kernel and of our modes, per
frame, on the built-in ladder scenes (balanced to strongly imbalanced) and the real bonsai scene, projected with
gsplat's 2DGS projection (colours RGB plus depth, as rasterization_2dgs's "RGB+D" renders them).

Projection and timing are the library's, as `gsplat-lpt bench --variant 2dgs` runs them
(`gsplat_lpt.tools.frame.project_frame_2dgs`, `gsplat_lpt.tools.bench.measure_blend`: CUDA events, warm-up,
median of >= 21 runs, modes interleaved in one process); this script adds the real bonsai scene, the
unculled lpt mode, whether median depth stayed exact, and the share of Gaussian-warp pairs the 2DGS cull
bound drops, besides the speedups and the PSNR (RGB) of each mode against gsplat.

    python3 tests/device/bench_2dgs.py --out DIR [--ladder balanced extreme ...] [--real bonsai]
        [--fixed RHO,K ...] [--lambdas LAMBDA ...]   (to calibrate 2DGS's Variant.evaluation_cost)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_core  # noqa: E402  (the bonsai scene, shared with the 3DGS benchmark)
from gsplat_lpt import LPTConfig  # noqa: E402
from gsplat_lpt.tools.bench import measure_blend  # noqa: E402  (the timing `gsplat-lpt bench --variant 2dgs` runs)
from gsplat_lpt.tools.frame import VARIANT_SPECS, project_frame_2dgs  # noqa: E402


def ladder_frames(names):
    from gsplat_lpt.scenes import make_scene

    for name in names:
        scene = make_scene(name, frames=1).to("cuda")
        viewmats, Ks = scene.frame_cameras(0)
        yield f"ladder:{name}", project_frame_2dgs(scene.means, scene.quats, scene.scales, scene.opacities,
                                                   scene.colors, viewmats, Ks, scene.width, scene.height,
                                                   sh_degree=scene.sh_degree)


def bonsai_frame(views=4, width=1920, height=1080):
    return "bonsai (4-view orbit)", project_frame_2dgs(*bench_core.bonsai_gaussians(views, width, height))


def bonsai_view_frame(spec: str):
    """The bonsai seen by VIEWS cameras of WIDTHxHEIGHT orbiting it at RADIUS (`spec` "VIEWS,WIDTH,HEIGHT,RADIUS", as
    bench_shapes.py --bonsai-views): imbalances between the orbit's and the chunked frames'."""
    views, width, height, radius = spec.split(",")
    return (f"bonsai {views}x{width}x{height} r{radius}",
            project_frame_2dgs(*bench_core.bonsai_gaussians(int(views), int(width), int(height), float(radius))))


def culled_share(frame) -> float:
    """Share of (Gaussian, warp) pairs the 2DGS cull bound drops (16 x 16 tiles, 8 warps of 2 rows)."""
    from gsplat_lpt.reference_2dgs import may_contribute_2dgs

    offsets = frame.isect_offsets.reshape(-1).long()
    ids = frame.flatten_ids.long()
    n = ids.numel()
    if n == 0:
        return 0.0
    tiles_x = frame.isect_offsets.shape[-1]
    tiles = tiles_x * frame.isect_offsets.shape[-2]
    tile_of = torch.repeat_interleave(torch.arange(offsets.numel(), device="cuda"),
                                      torch.diff(torch.cat([offsets, torch.tensor([n], device="cuda")])))
    tile = tile_of % tiles
    tx, ty = (tile % tiles_x).float() * 16, (tile // tiles_x).float() * 16
    means2d = frame.means2d.reshape(-1, 2)[ids]
    M = frame.ray_transforms.reshape(-1, 3, 3)[ids]
    opacities = frame.opacities.reshape(-1)[ids]
    dropped = 0
    for warp in range(8):  # each pair's own warp box, in image coordinates as the kernel sees it
        box = (tx + 0.5, tx + 15.5, ty + 2 * warp + 0.5, ty + 2 * warp + 1.5)
        dropped += int((~may_contribute_2dgs(means2d, M, opacities, box)).sum())
    return dropped / (8 * n)


def with_channels(frame, channels: int, seed: int = 0):
    """The frame with `channels` colour channels per Gaussian: random features, then the frame's depth channel
    (same geometry and lists): feature maps rendered with the depth, as RGB+D renders colours."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    features = torch.rand(*frame.colors.shape[:-1], channels - 1, generator=g, device="cuda")
    return dataclasses.replace(frame, colors=torch.cat([features, frame.colors[..., -1:]], -1).contiguous())


def measure(name, frame, repeats, pixels=(), fixed=(), lambdas=()):
    configs = {"lpt": ("lpt", LPTConfig(mode="lpt")), "lpt-nocull": ("lpt", LPTConfig(mode="lpt", cull=False)),
               "auto": ("auto", LPTConfig(mode="auto")),
               **{f"lpt-{p}px": ("lpt", LPTConfig(mode="lpt", pixels_per_thread=p)) for p in pixels},
               **{f"fixed({rho},{k})": ("fixed", LPTConfig(mode="fixed", heavy_ratio=rho, chunk_count=k))
                  for rho, k in fixed},
               **{f"auto-lambda{lam:g}": ("auto", LPTConfig(mode="auto", overhead_lambda=lam)) for lam in lambdas}}
    measured = measure_blend(frame, configs, repeats=repeats, image=VARIANT_SPECS["2dgs"].image,
                             compare=lambda outputs, reference: {"median_exact": bool(torch.equal(outputs[4],
                                                                                                  reference[4]))})
    row = {"frame": name, "n_isects": frame.flatten_ids.numel(), "vanilla_ms": measured.blend_ms["vanilla"],
           "modes": {}}
    for label in configs:
        report = measured.reports[label]
        row["modes"][label] = {"ms": measured.blend_ms[label], "psnr": measured.psnr_db[label],
                               "median_exact": measured.extras[label]["median_exact"],
                               "h": report["chunked_tiles"], "k": report["chunk_count"]}
    row["imbalance"] = measured.reports["lpt"]["imbalance"]
    row["K"] = measured.reports["lpt"]["concurrent_ctas"]
    row["culled_share"] = culled_share(frame)
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--ladder", nargs="*", default=["balanced", "moderate", "severe", "extreme"])
    parser.add_argument("--real", nargs="*", default=["bonsai"])
    parser.add_argument("--bonsai-views", nargs="*", default=[], metavar="VIEWS,WIDTH,HEIGHT,RADIUS",
                        help="also the bonsai seen by VIEWS cameras of WIDTHxHEIGHT orbiting it at RADIUS")
    parser.add_argument("--channels", nargs="*", type=int, default=[],
                        help="instead, each frame with this many channels: random features, then the depth")
    parser.add_argument("--tag", default="", help="suffix of the result file")
    parser.add_argument("--pixels", nargs="*", type=int, default=[],
                        help="also lpt with this many pixels per thread forced (lpt-1px, lpt-2px)")
    parser.add_argument("--fixed", nargs="*", default=[], metavar="RHO,K",
                        help="also mode fixed with these (heavy_ratio, chunk_count), e.g. 0.005,32")
    parser.add_argument("--lambdas", nargs="*", type=float, default=[],
                        help="also auto with these overhead_lambda values (Eq. 6's per-chunk overhead, in 3DGS "
                             "evaluations: the plan divides them by the variant's evaluation_cost)")
    args = parser.parse_args()
    fixed = [(float(rho), int(k)) for rho, k in (item.split(",") for item in args.fixed)]
    args.out.mkdir(parents=True, exist_ok=True)
    frames = list(ladder_frames(args.ladder)) + [bonsai_frame() for name in args.real if name == "bonsai"]
    frames += [bonsai_view_frame(spec) for spec in args.bonsai_views]
    if args.channels:
        frames = [(f"{name}, {channels} ch", with_channels(frame, channels))
                  for name, frame in frames for channels in args.channels]
    rows = []
    for name, frame in frames:
        row = measure(name, frame, args.repeats, args.pixels, fixed, args.lambdas)
        rows.append(row)
        print(json.dumps(row), flush=True)
    (args.out / f"bench_2dgs{args.tag}.json").write_text(json.dumps(rows, indent=1))
    print(f"\n[2dgs] {'frame':<24} {'imbal':>6} {'vanilla':>8} {'lpt':>7} {'nocull':>7} {'auto':>7} {'(h,k)':>9} "
          f"{'lpt x':>6} {'auto x':>6} {'psnr':>6} {'median':>7} {'cull':>5}")
    for r in rows:
        v, modes = r["vanilla_ms"], r["modes"]
        auto = modes["auto"]
        print(f"[2dgs] {r['frame']:<24} {r['imbalance']:>6.2f} {v:>8.3f} {modes['lpt']['ms']:>7.3f} "
              f"{modes['lpt-nocull']['ms']:>7.3f} {auto['ms']:>7.3f} {str((auto['h'], auto['k'])):>9} "
              f"{v / modes['lpt']['ms']:>6.2f} {v / auto['ms']:>6.2f} {auto['psnr']:>6.1f} "
              f"{'exact' if auto['median_exact'] else 'DIFFER':>7} {r['culled_share']:>5.2f}"
              + "".join(f"  {p}px {v / modes[f'lpt-{p}px']['ms']:.2f}x ({'exact' if modes[f'lpt-{p}px']['median_exact'] else 'DIFFER'})"
                        for p in args.pixels)
              + "".join(f"  {label} {v / mode['ms']:.2f}x {(mode['h'], mode['k'])}" for label, mode in modes.items()
                        if label.startswith(("fixed(", "auto-lambda"))))


if __name__ == "__main__":
    sys.exit(main())
