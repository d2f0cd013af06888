"""Feature maps through `gsplat.rasterization`, whose `channel_chunk` (32 by default) decides how many channels each
`rasterize_to_pixels` call gets: the whole call's GPU time (projection, tile lists, blend) with gsplat's kernels,
and with `backend="lpt"` at several `channel_chunk` values (the backend blends up to 64 channels in one kernel and
wider maps in slices of 64 inside one call). Every lpt variant's image must equal the channel_chunk=32 one bit for
bit (each channel's sum is the same sequence of operations, whatever the chunk).

    python3 tests/device/bench_channel_chunk.py [--channels 32 48 64 96 128 256] [--repeats 11] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import bonsai_gaussians, time_interleaved  # noqa: E402

import gsplat  # noqa: E402
import gsplat_lpt  # noqa: E402,F401  (installs the hook: backend= and the hook's channel_chunk)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--channels", nargs="+", type=int, default=[32, 48, 64, 96, 128, 256])
    parser.add_argument("--views", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    args = parser.parse_args()
    means, quats, scales, opacities, _, viewmats, Ks, width, height = bonsai_gaussians(args.views, 1920, 1080)
    rows = []
    for channels in args.channels:
        g = torch.Generator(device="cuda").manual_seed(channels)
        features = torch.rand(means.shape[0], channels, generator=g, device="cuda")

        def render(backend, **kwargs):
            with torch.no_grad():
                colors, alphas, _ = gsplat.rasterization(means, quats, scales, opacities, features, viewmats, Ks, width,
                                                         height, backend=backend, **kwargs)
            return colors, alphas

        calls = {"gsplat": lambda: render("cuda"),
                 "lpt chunk 32": lambda: render("lpt", channel_chunk=32),
                 "lpt default": lambda: render("lpt")}
        if channels > 32:
            calls[f"lpt chunk {channels}"] = lambda c=channels: render("lpt", channel_chunk=c)
        for fn in calls.values():  # compiled kernels, grown buffers
            fn()
        torch.cuda.synchronize()
        outputs = {label: fn() for label, fn in calls.items()}
        reference = outputs["lpt chunk 32"]
        equal = {label: all(torch.equal(a, b) for a, b in zip(out, reference)) for label, out in outputs.items()
                 if label.startswith("lpt")}
        gpu = time_interleaved(calls, args.repeats, busy=True)
        row = {"channels": channels, "gpu_ms": gpu, "equal_to_chunk_32": equal}
        rows.append(row)
        print(json.dumps(row), flush=True)
        del outputs, reference
        torch.cuda.empty_cache()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_channel_chunk.json").write_text(json.dumps(rows, indent=1))
    print(f"\n{'channels':>8} {'gsplat ms':>9} {'lpt 32 x':>9} {'lpt default x':>13} {'lpt whole x':>11}  equal")
    for r in rows:
        g, c = r["gpu_ms"], r["channels"]
        whole = g.get(f"lpt chunk {c}")
        print(f"{c:>8} {g['gsplat']:>9.3f} {g['gsplat'] / g['lpt chunk 32']:>9.2f} {g['gsplat'] / g['lpt default']:>13.2f} "
              f"{(g['gsplat'] / whole if whole else float('nan')):>11.2f}  "
              + " ".join(f"{k}:{'yes' if v else 'NO'}" for k, v in r["equal_to_chunk_32"].items()))


if __name__ == "__main__":
    main()
