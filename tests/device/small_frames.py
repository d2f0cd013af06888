"""Which frames gsplat's own kernel should render (LPTConfig.gsplat_kernel_below): per frame, its intersections, the
GPU time of one blend call (host hidden behind a sleep kernel) and the wall time per call of calls enqueued back to
back (each call costs the larger of its host and GPU time: a render loop of small frames), for gsplat's kernel,
ours in lpt and auto with the hand-off off (gsplat_kernel_below=0), the hand-off itself (gsplat's kernel through
our front end), and the default (auto, small frames handed off below Variant.small_frame_intersections). Every
variant (3DGS, 2DGS, 3DGUT), random Gaussians from 160 x 120 to 1280 x 720 and the trained bonsai. Prints, per
variant, the largest frame on which ours (without the hand-off) took longer back to back.

    python3 tests/device/small_frames.py [--variants 3dgs 2dgs 3dgut] [--rounds 9] [--calls 30] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import bonsai_gaussians, time_interleaved  # noqa: E402
from host_pieces import rounds_us  # noqa: E402
from test_gpu_parity import cameras, random_gaussians  # noqa: E402

from gsplat_lpt import LPTConfig  # noqa: E402
from gsplat_lpt.tools.frame import project_variant_frame  # noqa: E402

# (label, width, height, Gaussians; 0: the trained bonsai, one view)
FRAMES = [("160x120 1k", 160, 120, 1000), ("320x240 2k", 320, 240, 2000), ("320x240 5k", 320, 240, 5000),
          ("320x240 20k", 320, 240, 20000), ("480x360 10k", 480, 360, 10000), ("640x480 5k", 640, 480, 5000),
          ("640x480 20k", 640, 480, 20000), ("640x480 50k", 640, 480, 50000), ("960x540 20k", 960, 540, 20000),
          ("960x540 100k", 960, 540, 100000), ("1280x720 100k", 1280, 720, 100000),
          ("bonsai 320x240", 320, 240, 0), ("bonsai 640x360", 640, 360, 0), ("bonsai 960x540", 960, 540, 0)]
HUGE = 1 << 40  # a gsplat_kernel_below that hands every frame off


def frame_inputs(variant, width, height, gaussians):
    if gaussians:
        means, quats, scales, opacities = random_gaussians(gaussians, seed=1)
        colors = torch.rand(means.shape[0], 3, generator=torch.Generator().manual_seed(2)).cuda()
        viewmats, Ks = cameras(1, width, height)
    else:
        means, quats, scales, opacities, colors, viewmats, Ks, width, height = bonsai_gaussians(1, width, height)
    return project_variant_frame(variant, means, quats, scales, opacities, colors, viewmats, Ks, width, height)


def measure(inputs, rounds, calls):
    from gsplat_lpt import hook

    args, kwargs = inputs.call_arguments()
    ours, gsplat_call = inputs.ours(), hook.original(inputs.gsplat_function)
    kinds = {"gsplat": lambda: gsplat_call(*args, **kwargs)}
    for label, mode, below in (("lpt", "lpt", 0), ("auto", "auto", 0), ("hand-off", "lpt", HUGE),
                               ("default", "auto", None)):
        config = LPTConfig(mode=mode, gsplat_kernel_below=below)
        kinds[label] = lambda c=config: ours(*args, **kwargs, config=c)
    back_to_back = rounds_us(kinds, calls, rounds, busy=False)
    gpu_ms = time_interleaved(kinds, repeats=2 * rounds + 1, busy=True)
    row = {"intersections": int(inputs.flatten_ids.numel())}
    for name, samples in back_to_back.items():
        row[f"{name} b2b us"] = statistics.median(samples)
        row[f"{name} b2b x gsplat"] = statistics.median(a / b for a, b in zip(samples, back_to_back["gsplat"]))
        row[f"{name} gpu us"] = 1e3 * gpu_ms[name]
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variants", nargs="+", default=["3dgs", "2dgs", "3dgut"])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    results = {}
    for variant in args.variants:
        rows = []
        print(f"== {variant}: back to back, us per call (x gsplat's, median over rounds of the ratio); GPU us per call")
        print(f"{'frame':>16} {'isects':>9} | {'gsplat':>7} {'lpt':>13} {'auto':>13} {'hand-off':>13} "
              f"{'default':>13} | {'gsplat':>7} {'lpt':>7} {'auto':>7} {'hand-off':>8} {'default':>7}")
        for label, width, height, gaussians in FRAMES:
            row = {"frame": label, **measure(frame_inputs(variant, width, height, gaussians), args.rounds, args.calls)}
            rows.append(row)
            b2b = lambda k: f"{row[k + ' b2b us']:6.1f} ({row[k + ' b2b x gsplat']:.2f})"  # noqa: E731
            print(f"{label:>16} {row['intersections']:9d} | {row['gsplat b2b us']:7.1f} {b2b('lpt'):>13} "
                  f"{b2b('auto'):>13} {b2b('hand-off'):>13} {b2b('default'):>13} | {row['gsplat gpu us']:7.1f} "
                  f"{row['lpt gpu us']:7.1f} {row['auto gpu us']:7.1f} {row['hand-off gpu us']:8.1f} "
                  f"{row['default gpu us']:7.1f}", flush=True)
        ordered = sorted(rows, key=lambda r: r["intersections"])
        slower = [r["intersections"] for r in ordered
                  if max(r["lpt b2b x gsplat"], r["auto b2b x gsplat"]) > 1.0]
        print(f"{variant}: ours slower back to back up to {max(slower, default=0)} intersections; "
              f"faster on every frame above it", flush=True)
        results[variant] = rows
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        with open(Path(args.out) / "small_frames.json", "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
