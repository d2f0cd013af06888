"""One call per (frame, mode) between cudaProfilerStart/Stop, for Nsight Compute's per-kernel sections (instruction
counts, warp stalls, occupancy) of gsplat's blending kernel and ours on the same frame:

    ncu --clock-control none --profile-from-start off --section SpeedOfLight --section WarpStateStats \
        --section InstructionStats --section Occupancy python3 tests/device/profile_frame.py \
        --frames balanced street --tile-sizes 8 16 --modes gsplat lpt lpt-nocull > ncu.txt

The calls run in the order printed on stderr (frame, tile size, mode), after warm-up calls outside the profiled range.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import project  # noqa: E402
from sm_activity import profile_once  # noqa: E402

import gsplat_lpt  # noqa: E402
from gsplat_lpt import LPTConfig  # noqa: E402
from gsplat_lpt.hook import original  # noqa: E402

CONFIGS = {"lpt": LPTConfig(mode="lpt"), "lpt-nocull": LPTConfig(mode="lpt", cull=False), "auto": LPTConfig(mode="auto"),
           "lpt-1px": LPTConfig(mode="lpt", pixels_per_thread=1)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", nargs="+", default=["balanced"], help="built-in scenes (gsplat_lpt.scenes)")
    parser.add_argument("--tile-sizes", nargs="+", type=int, default=[8, 16])
    parser.add_argument("--modes", nargs="+", default=["gsplat", "lpt", "lpt-nocull"],
                        help="gsplat, or one of " + ", ".join(CONFIGS))
    args = parser.parse_args()
    from gsplat_lpt.scenes import make_scene

    gsplat_blend = original("rasterize_to_pixels")
    for name in args.frames:
        scene = make_scene(name, frames=1).to("cuda")
        viewmats, Ks = scene.frame_cameras(0)
        for tile_size in args.tile_sizes:
            frame = project(scene.means, scene.quats, scene.scales, scene.opacities, scene.colors, viewmats, Ks,
                            scene.width, scene.height, tile_size=tile_size)
            for mode in args.modes:
                if mode == "gsplat":
                    call = lambda f=frame: gsplat_blend(**f)  # noqa: E731
                else:
                    call = lambda f=frame, c=CONFIGS[mode]: gsplat_lpt.rasterize_to_pixels(**f, config=c)  # noqa: E731
                profile_once(call, f"{name}\ttile {tile_size}\t{mode}")


if __name__ == "__main__":
    main()
