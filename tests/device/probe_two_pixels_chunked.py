"""One or two pixels per thread in the LPT kernel: `auto` as it runs (the pixels per thread its plan asks for)
against `auto` with `pixels_per_thread=1` and `=2` (and, with --lpt, `lpt` with one and two), on batches of several
images of the built-in ladder scenes (B consecutive frames of a scene along its path, or the 6-camera rig) and on
real frames, each timed interleaved with gsplat's blend (GPU time, host hidden). Per frame it prints what the plan
saw: the heaviest item against the mean work per CTA, N_1 / (N_total / K); the longest unit left after chunking,
l = max(N_1 / k, N_{h+1}), against the same; and the non-empty items per CTA.

    python3 tests/device/probe_two_pixels_chunked.py [--frames mild:1 mild:4 rig:1 bonsai@1,960,540,3 ...] [--lpt]
        [--repeats 15] [--out DIR]
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

from bench_core import (BONSAI_VIEWS, bonsai_gaussians, garden_frame, on_stream, project, psnr,  # noqa: E402
                        time_interleaved)

from gsplat_lpt import LPTConfig  # noqa: E402
from gsplat_lpt.hook import original  # noqa: E402
from gsplat_lpt.scenes import make_scene  # noqa: E402
from gsplat_lpt.variants.gaussian3d import rasterize_with_plan  # noqa: E402

DEFAULT_FRAMES = ["mild:1", "moderate:1", "street:1", "severe:1", "extreme:1", "foliage:1", "mixed:1", "veil:1",
                  "fog:1", "moderate:2", "street:2", "street:4", "foliage:3", "extreme:3", "veil:3", "fog:2", "rig:1",
                  "rig:2"]


def batch_frame(name: str, batch: int):
    """B consecutive frames of a ladder scene as one batch of images (the rig: B frames of its 6 cameras); the real
    frames: bonsai:B (a B-view orbit at 1080p), bonsai-far / bonsai-far-4k / bonsai-close (their views), garden."""
    if name == "garden":
        return garden_frame()[1]
    if name == "bonsai":
        return project(*bonsai_gaussians(batch))
    if name.startswith("bonsai@"):  # bonsai@VIEWS,WIDTH,HEIGHT,RADIUS
        views, width, height, radius = name[len("bonsai@"):].split(",")
        return project(*bonsai_gaussians(int(views), int(width), int(height), float(radius)))
    if name in BONSAI_VIEWS:
        views, width, height, radius = BONSAI_VIEWS[name]
        return project(*bonsai_gaussians(views, width, height, radius))
    scene = make_scene(name, frames=batch).to("cuda")
    cameras = [scene.frame_cameras(i) for i in range(batch)]
    viewmats = torch.cat([v for v, _ in cameras])
    Ks = torch.cat([k for _, k in cameras])
    return project(scene.means, scene.quats, scene.scales, scene.opacities, scene.colors, viewmats, Ks,
                   scene.width, scene.height)


def plan_facts(frame, config):
    """(h, k, l / (N_total / K), pixels wanted, non-empty items per CTA, N_1 / (N_total / K)) of auto's plan on
    this frame after its feedback settled."""
    for _ in range(4):
        rasterize_with_plan(**frame, config=config)
        torch.cuda.synchronize()
    _, _, plan = rasterize_with_plan(**frame, config=config)
    torch.cuda.synchronize()
    report = plan.report()
    h, k = report["chunked_tiles"], report["chunk_count"]
    costs = plan.workspace.sorted_costs[: h + 1].tolist()
    n1 = costs[0] if costs else 0
    longest = max(n1 / k, costs[h] if h < len(costs) else 0) if h else n1
    mean = report["predicted_total_cost"] / report["concurrent_ctas"]
    per_cta = report["nonempty_items"] / report["concurrent_ctas"]
    return (h, k, longest / mean if mean else math.inf, report["pixels_wanted"], per_cta,
            n1 / mean if mean else math.inf)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", nargs="*", default=DEFAULT_FRAMES,
                        help="SCENE:IMAGES (rig: frames of 6 cameras); real: bonsai:VIEWS (the 1080p orbit), "
                        "bonsai@VIEWS,WIDTH,HEIGHT,RADIUS:1, bonsai-far:1, bonsai-far-4k:1, bonsai-close:1, garden:1")
    parser.add_argument("--lpt", action="store_true", help="also lpt with one and with two pixels per thread")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    args = parser.parse_args()
    rows = []
    for spec in args.frames:
        name, batch = spec.rsplit(":", 1)
        frame = batch_frame(name, int(batch))
        h, k, ratio, wanted, per_cta, imbalance = plan_facts(frame, LPTConfig(mode="auto"))
        configs = {"auto": LPTConfig(mode="auto"), "auto-1px": LPTConfig(mode="auto", pixels_per_thread=1),
                   "auto-2px": LPTConfig(mode="auto", pixels_per_thread=2)}
        if args.lpt:
            configs.update({"lpt-1px": LPTConfig(mode="lpt", pixels_per_thread=1),
                            "lpt-2px": LPTConfig(mode="lpt", pixels_per_thread=2)})
        calls = {"gsplat": lambda: original("rasterize_to_pixels")(**frame)}
        for label, config in configs.items():
            calls[label] = on_stream(torch.cuda.Stream(), lambda c=config: rasterize_with_plan(**frame, config=c)[:2])
        for fn in calls.values():  # warm: kernels, buffers, feedback, the plan's pixels per thread
            for _ in range(3):
                fn()
        torch.cuda.synchronize()
        outputs = {label: fn() for label, fn in calls.items()}
        torch.cuda.synchronize()
        gpu = time_interleaved(calls, args.repeats, busy=True)
        row = {"frame": spec, "images": int(frame["isect_offsets"].shape[0]), "items": frame["isect_offsets"].numel(),
               "h": h, "k": k, "imbalance": imbalance, "longest_over_mean": ratio, "pixels_wanted": wanted,
               "items_per_cta": per_cta, "gpu_ms": gpu,
               "psnr": {label: psnr(outputs[label][0], outputs["gsplat"][0]) for label in configs}}
        rows.append(row)
        print(json.dumps(row), flush=True)
        del frame, calls, outputs
        torch.cuda.empty_cache()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "probe_two_pixels_chunked.json").write_text(json.dumps(rows, indent=1))
    lpt = args.lpt
    print(f"\n{'frame':<22} {'images':>6} {'items':>7} {'N_1 K / N':>9} {'(h, k)':>9} {'l / mean':>8} {'items/K':>7} "
          f"{'pixels':>6} {'gsplat ms':>9} "
          f"{'auto x':>7} {'auto-1px x':>10} {'auto-2px x':>10} {'2px / 1px':>9} {'auto / 1px':>10}"
          + (f" {'lpt-1px x':>9} {'lpt-2px x':>9} {'lpt 2/1':>7}" if lpt else ""))
    for r in rows:
        g = r["gpu_ms"]
        print(f"{r['frame']:<22} {r['images']:>6} {r['items']:>7} {r['imbalance']:>9.2f} "
              f"{'(%d, %d)' % (r['h'], r['k']):>9} {r['longest_over_mean']:>8.2f} {r['items_per_cta']:>7.1f} "
              f"{r['pixels_wanted']:>6} {g['gsplat']:>9.3f} {g['gsplat'] / g['auto']:>7.2f} "
              f"{g['gsplat'] / g['auto-1px']:>10.2f} {g['gsplat'] / g['auto-2px']:>10.2f} "
              f"{g['auto-2px'] / g['auto-1px']:>9.3f} {g['auto'] / g['auto-1px']:>10.3f}"
              + (f" {g['gsplat'] / g['lpt-1px']:>9.2f} {g['gsplat'] / g['lpt-2px']:>9.2f} "
                 f"{g['lpt-2px'] / g['lpt-1px']:>7.3f}" if lpt else ""))


if __name__ == "__main__":
    main()
