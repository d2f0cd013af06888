"""Core benchmark on a GPU: alpha-blending time of every mode on a ladder of synthetic frames whose
imbalance (max tile / (N_total / K)) spans balanced to severe. Timed like `gsplat-lpt bench`: the whole
rasterize_to_pixels call, CUDA events, warm-up, median of >= 20 runs, modes interleaved.

    python3 tests/device/bench_core.py --out DIR
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch

from gsplat_lpt import LPTConfig
from gsplat_lpt.tools.frame import BlendInputs
from gsplat_lpt.tools.timing import median_ms, time_interleaved


def ladder_frame(heavy: int, seed: int = 0, width: int = 1920, height: int = 1080, background: int = 400_000) -> BlendInputs:
    """A 1080p frame: `background` Gaussians spread over the image (balanced work) plus `heavy` small,
    semi-transparent Gaussians far away in a few tiles (the long tail near a vanishing point)."""
    from gsplat.cuda._wrapper import fully_fused_projection, isect_offset_encode, isect_tiles

    g = torch.Generator(device="cpu").manual_seed(seed)
    focal = 1100.0
    depth = torch.rand(background, generator=g) * 30 + 5
    u = torch.rand(background, generator=g) * width
    v = torch.rand(background, generator=g) * height
    means = torch.stack([(u - width / 2) * depth / focal, (v - height / 2) * depth / focal, depth], -1)
    scales = (torch.rand(background, 3, generator=g) * 0.02 + 0.005) * depth[:, None] / 10
    opacities = torch.rand(background, generator=g) * 0.5 + 0.1
    if heavy:
        # a 3 x 2 tile patch around one point: tiny, low-opacity Gaussians stacked in depth
        centre_u, centre_v = width * 0.55, height * 0.45
        hu = centre_u + (torch.rand(heavy, generator=g) - 0.5) * 40
        hv = centre_v + (torch.rand(heavy, generator=g) - 0.5) * 24
        hd = torch.rand(heavy, generator=g) * 60 + 40
        heavy_means = torch.stack([(hu - width / 2) * hd / focal, (hv - height / 2) * hd / focal, hd], -1)
        means = torch.cat([means, heavy_means])
        scales = torch.cat([scales, torch.full((heavy, 3), 0.01) * hd[:, None] / 40])
        opacities = torch.cat([opacities, torch.rand(heavy, generator=g) * 0.04 + 0.01])
    n = means.shape[0]
    quats = torch.nn.functional.normalize(torch.randn(n, 4, generator=g), dim=-1)
    colors = torch.rand(1, n, 3, generator=g)
    means, quats, scales, opacities, colors = (t.cuda() for t in (means, quats, scales, opacities, colors))
    viewmats = torch.eye(4, device="cuda")[None]
    Ks = torch.tensor([[focal, 0, width / 2], [0, focal, height / 2], [0, 0, 1]], device="cuda")[None]
    radii, means2d, depths, conics, _ = fully_fused_projection(
        means, None, quats, scales, viewmats, Ks, width, height, packed=False, opacities=opacities)
    tile_size = 16
    tile_width, tile_height = math.ceil(width / tile_size), math.ceil(height / tile_size)
    _, isect_ids, flatten_ids = isect_tiles(means2d, radii, depths, tile_size, tile_width, tile_height)
    offsets = isect_offset_encode(isect_ids, 1, tile_width, tile_height)
    return BlendInputs(means2d, conics, colors, opacities[None].contiguous(), width, height, tile_size, offsets,
                       flatten_ids, torch.zeros(1, 3, device="cuda"))


def psnr(a, b) -> float:
    mse = float(((a - b) ** 2).mean())
    return math.inf if mse == 0 else 10 * math.log10(1.0 / mse)


FIXED_GRID = [(rho, k) for rho in (0.0005, 0.002, 0.01, 0.05) for k in (2, 4, 8, 16)]


def measure(frame: BlendInputs, repeats: int, fixed_grid: bool) -> dict:
    configs = {"lpt": LPTConfig(mode="lpt"), "chunk": LPTConfig(mode="chunk", chunk_count=8), "auto": LPTConfig()}
    if fixed_grid:
        for rho, k in FIXED_GRID:
            configs[f"fixed({rho},{k})"] = LPTConfig(mode="fixed", heavy_ratio=rho, chunk_count=k)
    variants = {"vanilla": lambda: frame.blend("vanilla")}
    for name, config in configs.items():
        variants[name] = (lambda c=config: frame.blend(c.mode, c))
    times = time_interleaved(variants, repeats=repeats, warmup=3)
    # back-to-back calls without a sync in between: what a render loop whose CPU runs ahead sees
    pipelined = {}
    for name in ("vanilla", "lpt", "auto"):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        host_start = time.perf_counter()
        for _ in range(repeats):
            variants[name]()
        host_ms = (time.perf_counter() - host_start) * 1000 / repeats
        stop.record()
        stop.synchronize()
        pipelined[name] = start.elapsed_time(stop) / repeats
        pipelined[name + "_host"] = host_ms
    reference, _ = frame.blend("vanilla")
    row = {"n_isects": frame.flatten_ids.numel()}
    for name, config in configs.items():
        colors, _, stats = frame.blend_with_stats(config.mode, config)
        row[name] = {"ms": median_ms(times[name]), "psnr": psnr(colors, reference), "h": stats["chunked_tiles"],
                     "k": stats["chunk_count"]}
        row["imbalance"] = stats["imbalance"]
        row["K"] = stats["concurrent_ctas"]
    row["vanilla"] = {"ms": median_ms(times["vanilla"])}
    row["pipelined_ms"] = pipelined
    # what the plan (sort + policy, one sync) costs alone
    from gsplat_lpt.plan import plan_frame

    plan_times = time_interleaved({"plan": lambda: plan_frame(frame.isect_offsets, frame.flatten_ids.numel(),
                                                              row["K"], LPTConfig())}, repeats=repeats)
    row["plan_ms"] = median_ms(plan_times["plan"])
    if fixed_grid:
        best = min((n for n in configs if n.startswith("fixed")), key=lambda n: row[n]["ms"])
        row["best_fixed"] = {"name": best, **row[best]}
    return row


def pipelined_text(row: dict) -> str:
    return "/".join(f"{row['pipelined_ms'][mode]:.3f}" for mode in ("vanilla", "lpt", "auto"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path("out"))
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--heavy", type=int, nargs="*", default=[0, 20_000, 60_000, 150_000, 400_000, 1_000_000])
    parser.add_argument("--fixed-grid", action="store_true")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for heavy in args.heavy:
        frame = ladder_frame(heavy)
        row = measure(frame, args.repeats, args.fixed_grid)
        row["heavy"] = heavy
        rows.append(row)
        print(json.dumps(row), flush=True)
    (args.out / "bench_core.json").write_text(json.dumps(rows, indent=1))
    print(f"\n{'heavy':>8} {'imbal':>6} {'K':>5} {'vanilla':>8} {'lpt':>7} {'chunk8':>7} {'auto':>7} {'(h,k)':>9} "
          f"{'best fixed':>22} {'lpt x':>6} {'auto x':>6} {'psnr':>6} {'plan':>6} {'pipelined v/l/a':>20}")
    for r in rows:
        v = r["vanilla"]["ms"]
        bf = r.get("best_fixed")
        bf_text = f"{bf['name']} {bf['ms']:.3f}" if bf else "-"
        print(f"{r['heavy']:>8} {r['imbalance']:>6.2f} {r['K']:>5} {v:>8.3f} {r['lpt']['ms']:>7.3f} {r['chunk']['ms']:>7.3f} "
              f"{r['auto']['ms']:>7.3f} {str((r['auto']['h'], r['auto']['k'])):>9} {bf_text:>22} "
              f"{v / r['lpt']['ms']:>6.2f} {v / r['auto']['ms']:>6.2f} {min(r['auto']['psnr'], r['chunk']['psnr']):>6.1f} "
              f"{r['plan_ms']:>6.3f} {pipelined_text(r):>20}")


if __name__ == "__main__":
    main()
