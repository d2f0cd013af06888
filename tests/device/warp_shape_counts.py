"""CPU: how many of a heavy tile's Gaussians each warp keeps under the 3DGS cull test, with warps of rows (16 x 2
pixels) and of blocks (8 x 4), one pixel per thread at tile size 16: the heaviest tiles of built-in scenes, walked
to where their last pixel saturates. Prints, rows over blocks, the Gaussians kept in all (the work of a full SM)
and the sum over batches of the busiest warp's count (what a lone CTA, whose warps meet at every batch, waits for).

    python3 tests/device/warp_shape_counts.py extreme fog [--tiles 3]
"""

from __future__ import annotations

import argparse

import torch

from gsplat_lpt.reference import may_contribute_scaled, stop_positions
from gsplat_lpt.scenes import make_scene
from gsplat_lpt.tools.analyze import heaviest_tile_lists

BATCH = 256  # Gaussians staged per batch: one per thread


def warp_boxes(shape: str):
    """The 8 warps' pixel-centre boxes (x0, x1, y0, y1) in tile coordinates."""
    if shape == "rows":
        return [(0.5, 15.5, 2 * w + 0.5, 2 * w + 1.5) for w in range(8)]
    return [(8 * (w % 2) + 0.5, 8 * (w % 2) + 7.5, 4 * (w // 2) + 0.5, 4 * (w // 2) + 3.5) for w in range(8)]


@torch.no_grad()
def tile_counts(scene, tiles: int):
    screen, lists = heaviest_tile_lists(scene, tiles=tiles)
    opacities = scene.opacities.float()
    for image, tile_x, tile_y, ids, px, py in lists:
        length = ids.numel()
        walked = int(stop_positions(screen.means2d[image], screen.conics[image], opacities, ids, px, py).max())
        ids = ids[:min(walked + 1, ids.numel())]  # the CTA walks until its last pixel saturates
        means = screen.means2d[image, ids] - torch.tensor([tile_x * 16.0, tile_y * 16.0])
        kept = {}
        for shape in ("rows", "blocks"):
            marks = torch.stack([may_contribute_scaled(means, screen.conics[image, ids], opacities[ids], box)
                                 for box in warp_boxes(shape)])  # [8 warps, walked]
            batches = -(-marks.shape[1] // BATCH)
            padded = torch.zeros(8, batches * BATCH, dtype=torch.bool)
            padded[:, :marks.shape[1]] = marks
            per_batch = padded.view(8, batches, BATCH).sum(-1)
            kept[shape] = (int(marks.sum()), int(per_batch.max(0).values.sum()), marks.float().mean().item())
        yield image, tile_x, tile_y, length, walked, kept


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("scenes", nargs="+")
    parser.add_argument("--tiles", type=int, default=3)
    args = parser.parse_args()
    print(f"{'scene':<10} {'tile':<14} {'list':>8} {'walked':>8} {'kept rows':>9} {'kept blocks':>11} "
          f"{'all rows/blocks':>15} {'busiest rows/blocks':>19}")
    for name in args.scenes:
        for image, tx, ty, length, walked, kept in tile_counts(make_scene(name), args.tiles):
            rows, blocks = kept["rows"], kept["blocks"]
            print(f"{name:<10} {f'{image}:({tx},{ty})':<14} {length:>8} {walked:>8} {rows[2]:>9.3f} {blocks[2]:>11.3f} "
                  f"{rows[0] / blocks[0]:>15.3f} {rows[1] / blocks[1]:>19.3f}", flush=True)


if __name__ == "__main__":
    main()
