"""Per-item work profile of benchmark frames (CUDA, PyTorch only; no kernel of ours runs).

For the heaviest items of each frame and a sample of the others, in float32 PyTorch: each pixel's stop depth
under gsplat's rule, each warp's (8 x 4 pixel blocks, one pixel per thread) stop depth and the Gaussians it
evaluates after the cull, and what depth chunking would evaluate (each chunk from T = 1 over its share of the
item's depth times the margin, its warps stopping where their own pixels saturate). It shows what the plan's
cost (an item's stop depth) leaves out: how unevenly the warps of an item stop, and how much work chunking
adds where they do.

    python3 tests/device/item_profile.py --out DIR [--frames mild mixed garden] [--top 48]
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
from bench_core import bonsai_frame, garden_frame, ladder_frames  # noqa: E402

from gsplat_lpt import constants  # noqa: E402
from gsplat_lpt.reference import (TRANSMITTANCE_THRESHOLD, _alphas, _tile_pixels, chunk_bounds,  # noqa: E402
                                  may_contribute)

LOG_THRESHOLD = math.log(TRANSMITTANCE_THRESHOLD)


def stop_depths(alpha):
    """[P] list position where each pixel of alpha [P, L] stops (gsplat: the Gaussian whose blend would take T
    to the threshold), L where it never does; in float64 logs, an estimate at the threshold's edge."""
    L = alpha.shape[1]
    log_t = torch.cumsum(torch.log1p(-alpha.double()), 1)
    below = log_t <= LOG_THRESHOLD
    first = torch.where(below.any(1), below.float().argmax(1), torch.full_like(below[:, 0], L, dtype=torch.long))
    return torch.clamp_max(first + 1, L)  # positions walked, the stopping one included


def profile_item(frame, item, tile_size=16, margin=constants.DEPTH_MARGIN, chunk_counts=(2, 4)):
    offsets = frame["isect_offsets"]
    tiles_x, tiles_y = offsets.shape[-1], offsets.shape[-2]
    flat = offsets.reshape(-1)
    n = frame["flatten_ids"].numel()
    start = int(flat[item])
    end = int(flat[item + 1]) if item + 1 < flat.numel() else n
    L = end - start
    if L == 0:
        return None
    tile = item % (tiles_x * tiles_y)
    x0, y0 = (tile % tiles_x) * tile_size, (tile // tiles_x) * tile_size
    ids = frame["flatten_ids"][start:end].long()
    all_means2d, all_conics = frame["means2d"].reshape(-1, 2), frame["conics"].reshape(-1, 3)
    all_opacities = frame["opacities"].reshape(-1)
    means2d, conics, opac = all_means2d[ids], all_conics[ids], all_opacities[ids]
    rows, cols, inside = _tile_pixels(tile, tiles_x, tile_size, frame["image_width"], frame["image_height"],
                                      ids.device)
    px, py = cols.float() + 0.5, rows.float() + 0.5
    alpha = _alphas(all_means2d, all_conics, all_opacities, ids, px, py)  # [pixels, L]
    alpha[~inside] = 0
    stops = stop_depths(alpha)
    stops[~inside] = 0
    ys, xs = rows - y0, cols - x0
    # warps: 8 x 4 pixel blocks
    warp_of = (ys // 4) * (tile_size // 8) + xs // 8
    warps = int(warp_of.max()) + 1
    position = torch.arange(L, device=ids.device)
    warp_depth, warp_evals, kept_rows = [], [], []
    for w in range(warps):
        members = warp_of == w
        d = int(stops[members].max())
        bx0, by0 = float(px[members].min()), float(py[members].min())
        box = (bx0 - x0, float(px[members].max()) - x0, by0 - y0, float(py[members].max()) - y0)
        local = means2d - torch.tensor([x0, y0], device=ids.device, dtype=means2d.dtype)
        kept = may_contribute(local, conics, opac, box)
        kept_rows.append(kept)
        warp_depth.append(d)
        warp_evals.append(int((kept & (position < d)).sum()))
    depth = max(warp_depth)
    row = {"item": item, "length": L, "depth": depth, "mean_warp_depth": sum(warp_depth) / warps,
           "evaluations": sum(warp_evals), "max_warp_evaluations": max(warp_evals), "warps": warps}
    covered = L if depth >= L else min(L, math.ceil(depth * margin))
    for k in chunk_counts:
        total, longest = 0, 0
        for s, e in chunk_bounds(0, L, k, covered):
            if e <= s:
                continue
            own = stop_depths(alpha[:, s:e])  # from T = 1
            for w in range(warps):
                members = (warp_of == w) & inside
                d = int(own[members].max()) if bool(members.any()) else 0
                ev = int(kept_rows[w][s:s + d].sum())
                total += ev
                longest = max(longest, ev)
        row[f"chunked_evaluations_k{k}"] = total
        row[f"longest_chunk_warp_k{k}"] = longest
    return row


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    parser.add_argument("--frames", nargs="*", default=["mild", "mixed", "foliage", "street", "garden"])
    parser.add_argument("--top", type=int, default=48)
    parser.add_argument("--sample", type=int, default=192)
    parser.add_argument("--K", type=int, default=792)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    ladder = [f for f in args.frames if f not in ("garden", "bonsai")]
    frames = list(ladder_frames(ladder))
    if "garden" in args.frames:
        frames.append(garden_frame())
    if "bonsai" in args.frames:
        frames.append(bonsai_frame())
    results = []
    gen = torch.Generator().manual_seed(0)
    for name, frame in frames:
        flat = frame["isect_offsets"].reshape(-1).long()
        n = frame["flatten_ids"].numel()
        lengths = torch.diff(torch.cat([flat, torch.tensor([n], device=flat.device)]))
        order = torch.argsort(lengths, descending=True).tolist()
        nonempty = [i for i in order if int(lengths[i]) > 0]
        top = nonempty[: args.top]
        rest = nonempty[args.top:]
        pick = torch.randperm(len(rest), generator=gen)[: args.sample].tolist()
        sample = [rest[i] for i in pick]
        rows_top = [profile_item(frame, i) for i in top]
        rows_sample = [profile_item(frame, i) for i in sample]
        scale = len(rest) / max(1, len(sample))
        totals = {key: sum(r[key] for r in rows_top) + scale * sum(r[key] for r in rows_sample)
                  for key in ("length", "depth", "evaluations")}
        totals["evaluations_per_warp"] = totals["evaluations"] / 8
        result = {"frame": name, "items": len(nonempty), "K": args.K, "totals": totals, "top": rows_top}
        results.append(result)
        mean_depth = totals["depth"] / args.K
        mean_work = totals["evaluations"] / args.K
        print(f"\n{name}: {len(nonempty)} items; per CTA (K={args.K}) mean depth {mean_depth:.0f}, "
              f"mean evaluations {mean_work:.0f} ({mean_work / 8:.0f} per warp)")
        print(f"  {'item':>6} {'len':>6} {'depth':>6} {'d/mean':>6} {'warp d':>6} {'evals':>7} {'e/mean':>6} "
              f"{'maxwarp':>7} {'ch2 x':>6} {'ch4 x':>6}")
        for r in rows_top[:16]:
            print(f"  {r['item']:>6} {r['length']:>6} {r['depth']:>6} {r['depth'] / mean_depth:>6.2f} "
                  f"{r['mean_warp_depth']:>6.0f} {r['evaluations']:>7} {r['evaluations'] / mean_work:>6.2f} "
                  f"{r['max_warp_evaluations']:>7} {r['chunked_evaluations_k2'] / max(1, r['evaluations']):>6.2f} "
                  f"{r['chunked_evaluations_k4'] / max(1, r['evaluations']):>6.2f}")
        sys.stdout.flush()
    (args.out / "item_profile.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
