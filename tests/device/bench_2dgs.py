"""2DGS benchmark on a GPU: the whole `rasterize_to_pixels_2dgs` call of gsplat's kernel and of our modes, per
frame, on the built-in ladder scenes (balanced to strongly imbalanced) and the real bonsai scene, projected with
gsplat's 2DGS projection (colours RGB plus depth, as rasterization_2dgs's "RGB+D" renders them). Same timing
as bench_core.py (CUDA events, warm-up, median of >= 21 runs, modes interleaved in one process); besides the
speedups it prints the auto mode's PSNR against gsplat, whether median depth stayed exact, and the share of
Gaussian-warp pairs the 2DGS cull bound drops.

    python3 tests/device/bench_2dgs.py --out DIR [--ladder balanced extreme ...] [--real bonsai]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_core  # noqa: E402  (frame sources and timing, shared with the 3DGS benchmark)
from gsplat_lpt import LPTConfig  # noqa: E402
from gsplat_lpt.variants import surfel2d  # noqa: E402


def project_2dgs(means, quats, scales, opacities, colors, viewmats, Ks, width, height, tile_size=16):
    """gsplat's 2DGS projection and tiling: the arguments of rasterize_to_pixels_2dgs for one frame."""
    from gsplat.cuda._wrapper import fully_fused_projection_2dgs, isect_offset_encode, isect_tiles

    C = viewmats.shape[0]
    radii, means2d, depths, ray_transforms, normals = fully_fused_projection_2dgs(
        means, quats, scales, viewmats, Ks, width, height, packed=False)
    tile_width, tile_height = math.ceil(width / tile_size), math.ceil(height / tile_size)
    _, isect_ids, flatten_ids = isect_tiles(means2d, radii, depths, tile_size, tile_width, tile_height)
    offsets = isect_offset_encode(isect_ids, C, tile_width, tile_height)
    colors = colors[None].expand(C, *colors.shape) if colors.dim() == 2 else colors
    colors = torch.cat([colors, depths[..., None]], -1).contiguous()
    return dict(means2d=means2d.contiguous(), ray_transforms=ray_transforms.contiguous(), colors=colors,
                opacities=opacities[None].expand(C, -1).contiguous(), normals=normals.contiguous(),
                densify=torch.zeros_like(means2d), image_width=width, image_height=height, tile_size=tile_size,
                isect_offsets=offsets, flatten_ids=flatten_ids)


def ladder_frames(names):
    from gsplat_lpt.scenes.builtin import make_scene

    for name in names:
        scene = make_scene(name, frames=1).to("cuda")
        if scene.sh_degree is not None:
            continue  # the ladder scenes are RGB
        viewmats, Ks = scene.frame_cameras(0)
        yield f"ladder:{name}", project_2dgs(scene.means, scene.quats, scene.scales, scene.opacities, scene.colors,
                                             viewmats, Ks, scene.width, scene.height)


def bonsai_frame(views=4, width=1920, height=1080):
    raw = np.fromfile(bench_core.data_dir() / "bonsai-7k-mini.splat", dtype=np.uint8).reshape(-1, 32)
    floats = raw[:, :24].copy().view(np.float32).reshape(-1, 6)
    rgba = raw[:, 24:28].astype(np.float32) / 255.0
    quats = (raw[:, 28:32].astype(np.float32) - 128.0) / 128.0
    quats /= np.linalg.norm(quats, axis=1, keepdims=True)
    to = lambda a: torch.from_numpy(np.ascontiguousarray(a)).cuda()  # noqa: E731
    means, scales, opacities, colors = to(floats[:, :3]), to(floats[:, 3:6]), to(rgba[:, 3]), to(rgba[:, :3])
    centre = means.median(dim=0).values.cpu().numpy()
    angles = np.linspace(0, 2 * np.pi, views, endpoint=False)
    viewmats = torch.stack([bench_core.look_at(centre + np.array([2.2 * math.cos(a), -0.8, 2.2 * math.sin(a)]),
                                               centre) for a in angles]).cuda()
    focal = 0.9 * width
    Ks = torch.tensor([[focal, 0, width / 2], [0, focal, height / 2], [0, 0, 1.0]]).repeat(views, 1, 1).cuda()
    return "bonsai (4-view orbit)", project_2dgs(means, to(quats), scales, opacities, colors, viewmats, Ks, width,
                                                 height)


def culled_share(frame) -> float:
    """Share of (Gaussian, warp) pairs the 2DGS cull bound drops (16 x 16 tiles, 8 warps of 2 rows)."""
    from gsplat_lpt.reference_2dgs import may_contribute_2dgs

    offsets = frame["isect_offsets"].reshape(-1).long()
    ids = frame["flatten_ids"].long()
    n = ids.numel()
    if n == 0:
        return 0.0
    tiles_x = frame["isect_offsets"].shape[-1]
    tiles = tiles_x * frame["isect_offsets"].shape[-2]
    tile_of = torch.repeat_interleave(torch.arange(offsets.numel(), device="cuda"),
                                      torch.diff(torch.cat([offsets, torch.tensor([n], device="cuda")])))
    tile = tile_of % tiles
    tx, ty = (tile % tiles_x).float() * 16, (tile // tiles_x).float() * 16
    means2d = frame["means2d"].reshape(-1, 2)[ids]
    M = frame["ray_transforms"].reshape(-1, 3, 3)[ids]
    opacities = frame["opacities"].reshape(-1)[ids]
    dropped = 0
    for warp in range(8):  # each pair's own warp box, in image coordinates as the kernel sees it
        box = (tx + 0.5, tx + 15.5, ty + 2 * warp + 0.5, ty + 2 * warp + 1.5)
        dropped += int((~may_contribute_2dgs(means2d, M, opacities, box)).sum())
    return dropped / (8 * n)


def rgb_psnr(a, b) -> float:
    mse = float(((a[..., :-1] - b[..., :-1]) ** 2).mean())
    return math.inf if mse == 0 else 10 * math.log10(1.0 / mse)


def measure(name, frame, repeats):
    from gsplat_lpt.hook import original

    gsplat_blend = original("rasterize_to_pixels_2dgs")
    configs = {"lpt": LPTConfig(mode="lpt"), "lpt-nocull": LPTConfig(mode="lpt", cull=False),
               "auto": LPTConfig(mode="auto")}
    variants = {"vanilla": lambda: gsplat_blend(**frame)}
    for label, config in configs.items():
        variants[label] = (lambda c=config: surfel2d.rasterize_to_pixels_2dgs(**frame, config=c))
    for _ in range(3):  # the first auto frames size the partial buffers and learn the stop depths
        variants["auto"]()
    ms = bench_core.time_interleaved(variants, repeats)
    reference = gsplat_blend(**frame)
    row = {"frame": name, "n_isects": frame["flatten_ids"].numel(), "vanilla_ms": ms["vanilla"], "modes": {}}
    for label, config in configs.items():
        *outputs, stats = surfel2d.rasterize_to_pixels_2dgs(**frame, config=config, return_stats=True)
        row["modes"][label] = {"ms": ms[label], "psnr": rgb_psnr(outputs[0], reference[0]),
                               "median_exact": bool(torch.equal(outputs[4], reference[4])),
                               "h": stats["chunked_tiles"], "k": stats["chunk_count"]}
        if label == "lpt":
            row["imbalance"] = stats["imbalance"]
            row["K"] = stats["concurrent_ctas"]
    row["culled_share"] = culled_share(frame)
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--ladder", nargs="*", default=["balanced", "moderate", "severe", "extreme"])
    parser.add_argument("--real", nargs="*", default=["bonsai"])
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    frames = list(ladder_frames(args.ladder)) + [bonsai_frame() for name in args.real if name == "bonsai"]
    rows = []
    for name, frame in frames:
        row = measure(name, frame, args.repeats)
        rows.append(row)
        print(json.dumps(row), flush=True)
    (args.out / "bench_2dgs.json").write_text(json.dumps(rows, indent=1))
    print(f"\n[2dgs] {'frame':<24} {'imbal':>6} {'vanilla':>8} {'lpt':>7} {'nocull':>7} {'auto':>7} {'(h,k)':>9} "
          f"{'lpt x':>6} {'auto x':>6} {'psnr':>6} {'median':>7} {'cull':>5}")
    for r in rows:
        v, modes = r["vanilla_ms"], r["modes"]
        auto = modes["auto"]
        print(f"[2dgs] {r['frame']:<24} {r['imbalance']:>6.2f} {v:>8.3f} {modes['lpt']['ms']:>7.3f} "
              f"{modes['lpt-nocull']['ms']:>7.3f} {auto['ms']:>7.3f} {str((auto['h'], auto['k'])):>9} "
              f"{v / modes['lpt']['ms']:>6.2f} {v / auto['ms']:>6.2f} {auto['psnr']:>6.1f} "
              f"{'exact' if auto['median_exact'] else 'DIFFER':>7} {r['culled_share']:>5.2f}")


if __name__ == "__main__":
    sys.exit(main())
