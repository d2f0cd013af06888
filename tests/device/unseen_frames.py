"""Frames built unlike the driving ladder (the probe scenes, `gsplat_lpt.scenes.probes`), timed against gsplat's
blend in one process: does `backend="lpt"` stay at least as fast as gsplat where nothing was tuned for it, and does
`auto` stay near the best fixed schedule? The probes put the load elsewhere than the ladder's vanishing point and
make it saturate at other depths (trained-scene statistics, floaters, close-ups, clusters at one opacity each, a
band, two clusters, a 6-camera rig: the module's docstring lists them).

For each frame (each probe's first frame): GPU time (the host hidden behind a sleep kernel) and whole-call time of
gsplat's `rasterize_to_pixels`, `lpt`, `auto`, `lpt` at one and at two pixels per thread, `lpt` without the cull, and a
fixed grid (rho x k, k up to 64), medians of interleaved calls, each mode on its own stream; whether `lpt` is bit for
bit gsplat's; `auto`'s PSNR against gsplat.

    python3 tests/device/unseen_frames.py [--out DIR] [--repeats 15] [--frames NAME ...] [--no-grid]
        [--grid-rho RHO ...] [--grid-k K ...]

(The results in examples/results/unseen_frames_*_h200.* were measured with this script's own generator of the same
recipes on the GPU's random numbers, before the recipes moved into gsplat_lpt.scenes.probes.)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import on_stream, project, psnr, time_interleaved  # noqa: E402

import gsplat_lpt  # noqa: E402
from gsplat_lpt import LPTConfig  # noqa: E402
from gsplat_lpt.scenes import make_probe_scene, probe_names  # noqa: E402


def build(name: str):
    """The first frame of probe `name`: the arguments of rasterize_to_pixels (gsplat's projection and tiling)."""
    scene = make_probe_scene(name, frames=1).to("cuda")
    viewmats, Ks = scene.frame_cameras(0)
    return project(scene.means, scene.quats, scene.scales, scene.opacities, scene.colors, viewmats, Ks, scene.width,
                   scene.height)


FRAMES = probe_names()
GRID = [(rho, k) for rho in (0.002, 0.01, 0.03) for k in (8, 16, 32, 64)]


def measure(name, frame, repeats, grid):
    """One frame's row; `grid`: the fixed (rho, k) schedules timed beside the modes (empty: none)."""
    from gsplat_lpt.hook import original

    gsplat_blend = original("rasterize_to_pixels")
    configs = {"lpt": LPTConfig(mode="lpt"), "auto": LPTConfig(mode="auto"),
               "lpt-nocull": LPTConfig(mode="lpt", cull=False),
               "lpt-1px": LPTConfig(mode="lpt", pixels_per_thread=1), "lpt-2px": LPTConfig(mode="lpt", pixels_per_thread=2)}
    configs.update({f"fixed({rho},{k})": LPTConfig(mode="fixed", heavy_ratio=rho, chunk_count=k)
                    for rho, k in grid})
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
    parser.add_argument("--grid-rho", type=float, nargs="+", default=sorted({rho for rho, _ in GRID}))
    parser.add_argument("--grid-k", type=int, nargs="+", default=sorted({k for _, k in GRID}))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.frames:
        frame = build(name)
        grid = [] if args.no_grid else [(rho, k) for rho in args.grid_rho for k in args.grid_k]
        rows.append(measure(name, frame, args.repeats, grid))
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
