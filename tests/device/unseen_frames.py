"""Frames built unlike the driving ladder, timed against gsplat's blend in one process: does `backend="lpt"` stay
at least as fast as gsplat where nothing was tuned for it, and does `auto` stay near the best fixed schedule?

The ladder's heavy tiles are stacks of tiny Gaussians at the road's vanishing point. These frames put the load
elsewhere and make it saturate at other depths:

- `trained-like`: Gaussians spread through a view frustum with the statistics of a trained scene (log-normal
  screen sizes over two decades, opacities piled near 0 and near 1, anisotropic), 1080p, and the same at 4K;
- `floaters`: the same with a few hundred large, faint Gaussians just in front of the camera, over many tiles
  each (the per-warp cull can drop none of them);
- `closeup`: few, large, mostly opaque Gaussians: long lists on every tile, saturated after a few layers;
- `cluster-o<OPACITY>`: a dense cluster of small Gaussians off the image centre, stacked in depth in front of the
  scene, at one opacity per frame: 0.004 never saturates, 0.01-0.03 saturate late in the list, 0.1-0.6 early (list
  length overstates the tile's cost);
- `band`: a horizontal band of semi-transparent Gaussians over many tiles (hundreds of heavy tiles, mild
  imbalance: the policy's h is large or zero);
- `dense-o<OPACITY>`: three times the Gaussians of a cluster on a smaller patch (a heavier tail);
- `two-clusters`: one early- and one late-saturating cluster in the same frame;
- `rig-720p`: six 720p cameras round one trained-like scene with a cluster seen by one of them.

For each frame: GPU time (the host hidden behind a sleep kernel) and whole-call time of gsplat's
`rasterize_to_pixels`, `lpt`, `auto` and a fixed grid (rho x k, k up to 64), medians of interleaved calls, each
mode on its own stream; whether `lpt` is bit for bit gsplat's; `auto`'s PSNR against gsplat.

    python3 tests/device/unseen_frames.py [--out DIR] [--repeats 15] [--frames NAME ...] [--no-grid]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import on_stream, project, psnr, time_interleaved  # noqa: E402

import gsplat_lpt  # noqa: E402
from gsplat_lpt import LPTConfig  # noqa: E402

FOCAL_PER_WIDTH = 0.75  # focal length / image width: a 67-degree horizontal field of view
BEHIND = (12.0, 80.0)  # depths of the scene behind the clusters and bands (which lie at 3-10)
DEVICE = "cuda"


class Gaussians:
    """World-space Gaussians for a camera at the origin looking down +z (OpenCV axes), placed by where they land on
    the image: pixel centre (x, y), depth z, screen standard deviation sigma_px, anisotropy, opacity."""

    def __init__(self, width: int, height: int, seed: int):
        self.width, self.height = width, height
        self.focal = FOCAL_PER_WIDTH * width
        self.gen = torch.Generator(device=DEVICE).manual_seed(seed)
        self.parts = []

    def rand(self, *shape):
        return torch.rand(*shape, generator=self.gen, device=DEVICE)

    def randn(self, *shape):
        return torch.randn(*shape, generator=self.gen, device=DEVICE)

    def add(self, x, y, z, sigma_px, opacity, anisotropy=None, color=None):
        n = x.numel()
        means = torch.stack([(x - self.width / 2) * z / self.focal, (y - self.height / 2) * z / self.focal, z], -1)
        anisotropy = torch.ones(n, device=DEVICE) if anisotropy is None else anisotropy
        base = (sigma_px * z / self.focal)[:, None]
        scales = base * torch.stack([anisotropy.sqrt(), 1 / anisotropy.sqrt(), 0.5 + self.rand(n)], -1)
        quats = torch.nn.functional.normalize(self.randn(n, 4), dim=-1)
        color = self.rand(n, 3) if color is None else color
        self.parts.append((means, quats, scales, opacity.clamp(0.0, 0.999), color))

    def trained_like(self, n, depth=(1.5, 60.0), log_sigma=(0.6, 1.1)):
        """Screen positions uniform (a margin beyond the frame), depths log-uniform, screen sigma log-normal
        (median e^0.6 ~ 1.8 px, two decades wide), opacity sigmoid of a wide normal (most near 0 or 1)."""
        x = self.rand(n) * self.width * 1.2 - 0.1 * self.width
        y = self.rand(n) * self.height * 1.2 - 0.1 * self.height
        z = torch.exp(math.log(depth[0]) + self.rand(n) * math.log(depth[1] / depth[0]))
        sigma = torch.exp(log_sigma[0] + log_sigma[1] * self.randn(n)).clamp(0.3, 200.0)
        opacity = torch.sigmoid(2.5 * self.randn(n) - 0.5)
        self.add(x, y, z, sigma, opacity, anisotropy=torch.exp(1.2 * self.randn(n)).clamp(0.05, 20.0))

    def cluster(self, n, centre, radius_px, opacity, sigma_px=(1.0, 4.0), depth=(3.0, 10.0)):
        """n small Gaussians within `radius_px` of `centre` (normal spread), stacked in depth."""
        x = centre[0] + radius_px * self.randn(n) * 0.5
        y = centre[1] + radius_px * self.randn(n) * 0.5
        z = depth[0] + self.rand(n) * (depth[1] - depth[0])
        sigma = sigma_px[0] + self.rand(n) * (sigma_px[1] - sigma_px[0])
        self.add(x, y, z, sigma, torch.full((n,), opacity, device=DEVICE) * (0.8 + 0.4 * self.rand(n)))

    def tensors(self):
        means, quats, scales, opacities, colors = (torch.cat(p).contiguous() for p in zip(*self.parts))
        return means, quats, scales, opacities, colors


def camera(width, height, yaw=0.0):
    focal = FOCAL_PER_WIDTH * width
    c, s = math.cos(yaw), math.sin(yaw)
    viewmat = torch.tensor([[c, 0, -s, 0], [0, 1, 0, 0], [s, 0, c, 0], [0, 0, 0, 1.0]], device=DEVICE)
    K = torch.tensor([[focal, 0, width / 2], [0, focal, height / 2], [0, 0, 1.0]], device=DEVICE)
    return viewmat, K


def frame_of(g: Gaussians, yaws=(0.0,)):
    cams = [camera(g.width, g.height, yaw) for yaw in yaws]
    viewmats, Ks = torch.stack([c[0] for c in cams]), torch.stack([c[1] for c in cams])
    return project(*g.tensors(), viewmats, Ks, g.width, g.height)


def build(name: str):
    """The frame called `name` (see the module docstring), from a seed of its own."""
    seed = sum(map(ord, name))
    if name in ("trained-like", "trained-like-4k"):
        width, height = (3840, 2160) if name.endswith("4k") else (1920, 1080)
        g = Gaussians(width, height, seed)
        g.trained_like(600_000)
        return frame_of(g)
    if name == "floaters":
        g = Gaussians(1920, 1080, seed)
        g.trained_like(500_000)
        n = 300
        g.add(g.rand(n) * 1920, g.rand(n) * 1080, 0.5 + g.rand(n), 30 + 150 * g.rand(n), 0.02 + 0.2 * g.rand(n),
              anisotropy=torch.exp(g.randn(n)).clamp(0.2, 5.0))
        return frame_of(g)
    if name == "closeup":
        g = Gaussians(1920, 1080, seed)
        g.trained_like(60_000, depth=(0.5, 3.0), log_sigma=(3.0, 0.7))
        return frame_of(g)
    if name.startswith(("cluster-o", "dense-o")):  # dense: more Gaussians on fewer tiles (a heavier tail)
        g = Gaussians(1920, 1080, seed)
        g.trained_like(300_000, depth=BEHIND)
        count, radius = (300_000, 60.0) if name.startswith("cluster") else (900_000, 36.0)
        g.cluster(count, (1350.0, 380.0), radius, float(name.split("-o")[1]))
        return frame_of(g)
    if name == "band":
        g = Gaussians(1920, 1080, seed)
        g.trained_like(300_000, depth=BEHIND)
        n = 1_200_000
        g.add(g.rand(n) * 1920, 600 + 16 * g.randn(n), 3.0 + 7.0 * g.rand(n), 1.0 + 3.0 * g.rand(n),
              0.01 + 0.03 * g.rand(n))
        return frame_of(g)
    if name == "two-clusters":
        g = Gaussians(1920, 1080, seed)
        g.trained_like(300_000, depth=BEHIND)
        g.cluster(150_000, (500.0, 450.0), 50.0, 0.4)  # early: opaque stacks
        g.cluster(150_000, (1400.0, 520.0), 50.0, 0.015)  # late: a faint veil
        return frame_of(g)
    if name == "rig-720p":
        g = Gaussians(1280, 720, seed)
        g.trained_like(250_000, depth=BEHIND)
        g.cluster(200_000, (900.0, 300.0), 40.0, 0.02)  # seen by the first camera only
        # a copy of the scene's Gaussians behind and beside the first camera, for the others to see
        means, quats, scales, opacities, colors = g.tensors()
        parts = [(means, quats, scales, opacities, colors)]
        for yaw in [math.pi / 3 * i for i in range(1, 6)]:
            c, s = math.cos(yaw), math.sin(yaw)
            rot = torch.tensor([[c, 0, s], [0, 1, 0], [-s, 0, c]], device=DEVICE)
            keep = torch.arange(250_000, device=DEVICE)  # the trained-like part only
            parts.append((means[keep] @ rot.T, quats[keep], scales[keep], opacities[keep], colors[keep]))
        g.parts = parts
        return frame_of(g, yaws=[math.pi / 3 * i for i in range(6)])
    raise SystemExit(f"unknown frame {name!r}")


FRAMES = ["trained-like", "trained-like-4k", "floaters", "closeup", "cluster-o0.004", "cluster-o0.01", "cluster-o0.03",
          "cluster-o0.1", "cluster-o0.6", "dense-o0.005", "dense-o0.02", "dense-o0.1", "band", "two-clusters", "rig-720p"]
GRID = [(rho, k) for rho in (0.002, 0.01, 0.03) for k in (8, 16, 32, 64)]


def measure(name, frame, repeats, grid):
    from gsplat_lpt.hook import original

    gsplat_blend = original("rasterize_to_pixels")
    configs = {"lpt": LPTConfig(mode="lpt"), "auto": LPTConfig(mode="auto"),
               "lpt-nocull": LPTConfig(mode="lpt", cull=False),
               "lpt-1px": LPTConfig(mode="lpt", pixels_per_thread=1), "lpt-2px": LPTConfig(mode="lpt", pixels_per_thread=2)}
    if grid:
        configs.update({f"fixed({rho},{k})": LPTConfig(mode="fixed", heavy_ratio=rho, chunk_count=k)
                        for rho, k in GRID})
    variants = {"vanilla": lambda: gsplat_blend(**frame)}
    streams = {label: torch.cuda.Stream() for label in configs}
    torch.cuda.synchronize()
    for label, config in configs.items():
        variants[label] = on_stream(streams[label], lambda c=config: gsplat_lpt.rasterize_to_pixels(**frame, config=c))
    for _ in range(3):  # auto's first frames learn the stop depths and size the partial buffers
        variants["auto"]()
    gpu = time_interleaved(variants, repeats, busy=True)
    whole = time_interleaved({k: variants[k] for k in ("vanilla", "lpt", "auto")}, repeats, seed=2)
    ref_colors, ref_alphas = gsplat_blend(**frame)
    row = {"frame": name, "n_isects": frame["flatten_ids"].numel(), "gpu_ms": gpu, "whole_ms": whole}
    for label in ("lpt", "auto"):
        with torch.cuda.stream(streams[label]):
            colors, alphas, stats = gsplat_lpt.rasterize_to_pixels(**frame, config=configs[label], return_stats=True)
            stats = dict(stats)
        torch.cuda.synchronize()
        row[label] = {"bitwise": bool(torch.equal(colors, ref_colors) and torch.equal(alphas, ref_alphas)),
                      "max_abs": float((colors - ref_colors).abs().max()), "psnr": psnr(colors, ref_colors),
                      "h": stats["chunked_tiles"], "k": stats["chunk_count"],
                      "pixels_per_thread": stats.get("pixels_per_thread")}
        if label == "lpt":
            row["imbalance"], row["K"] = stats["imbalance"], stats["concurrent_ctas"]
    fixed = [label for label in gpu if label.startswith("fixed")]
    if fixed:
        best = min(fixed, key=lambda label: gpu[label])
        row["best_fixed_gpu"] = {"name": best, "ms": gpu[best]}
    return row


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--frames", nargs="+", default=FRAMES)
    parser.add_argument("--no-grid", action="store_true", help="skip the fixed grid (no policy grading)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.frames:
        frame = build(name)
        rows.append(measure(name, frame, args.repeats, not args.no_grid))
        print(json.dumps(rows[-1]), flush=True)
        del frame
        torch.cuda.empty_cache()
    (args.out / "unseen_frames.json").write_text(json.dumps(rows, indent=1))
    print(f"\n{'frame':<16} {'isects':>9} {'imbal':>6} {'gsplat ms':>9} {'lpt x':>6} {'auto x':>6} {'(h,k)':>9} "
          f"{'auto/best':>9} {'best fixed':>16} {'whole lpt/auto x':>16} {'nocull x':>8} {'lpt bit':>7} {'auto dB':>7}")
    for r in rows:
        g, w = r["gpu_ms"], r["whole_ms"]
        best = r.get("best_fixed_gpu")
        ratio = g["auto"] / min(g["lpt"], best["ms"]) if best else float("nan")
        print(f"{r['frame']:<16} {r['n_isects']:>9} {r['imbalance']:>6.2f} {g['vanilla']:>9.3f} "
              f"{g['vanilla'] / g['lpt']:>6.2f} {g['vanilla'] / g['auto']:>6.2f} "
              f"{str((r['auto']['h'], r['auto']['k'])):>9} {ratio:>9.3f} "
              f"{(best['name'][5:] + ' ' + format(best['ms'], '.3f')) if best else '-':>16} "
              f"{w['vanilla'] / w['lpt']:>7.2f}/{w['vanilla'] / w['auto']:<8.2f} {g['vanilla'] / g['lpt-nocull']:>8.2f} "
              f"{str(r['lpt']['bitwise']):>7} {r['auto']['psnr']:>7.1f}")
    print("\nGPU ms: lpt (its own choice of pixels per thread) / one pixel / two pixels per thread")
    for r in rows:
        g = r["gpu_ms"]
        print(f"{r['frame']:<16} {g['lpt']:.3f} ({r['lpt']['pixels_per_thread']}) / {g['lpt-1px']:.3f} / {g['lpt-2px']:.3f}")
    slower = [r["frame"] for r in rows if min(r["gpu_ms"]["vanilla"] / r["gpu_ms"][m] for m in ("lpt", "auto")) < 1.0]
    print(f"frames where lpt or auto is slower than gsplat (GPU time): {slower or 'none'}")
    print(f"lpt not bit for bit: {[r['frame'] for r in rows if not r['lpt']['bitwise']] or 'none'}; "
          f"auto min PSNR {min(r['auto']['psnr'] for r in rows):.1f} dB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
