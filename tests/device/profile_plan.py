"""One plan of a synthetic 1080p frame (tests/device/bench_plan.py's frames), between cudaProfilerStart and Stop, for
Nsight Compute's source view of the plan kernel:

    ncu --clock-control none --profile-from-start off --set full --import-source yes -o plan \\
        python3 tests/device/profile_plan.py [--mode auto] [--balanced]
    ncu --import plan.ncu-rep --page source --print-source sass --csv > plan_sass.csv
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_plan import Frame  # noqa: E402
from gsplat_lpt import LPTConfig, runtime  # noqa: E402
from gsplat_lpt.variants import VARIANTS  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="auto", choices=("auto", "lpt"))
    parser.add_argument("--balanced", action="store_true")
    parser.add_argument("--images", type=int, default=1)
    args = parser.parse_args()
    frame = Frame(args.images, not args.balanced)
    rasterizer = runtime.rasterizer_for(VARIANTS["rasterize_to_pixels"], 3, 16, torch.device("cuda"))
    config = LPTConfig(mode=args.mode)
    for _ in range(5):  # compiled, buffers grown
        rasterizer.plan(frame.inter, config)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    plan = rasterizer.plan(frame.inter, config)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    report = plan.report()
    print(f"{frame.name}, {args.mode}: h = {report['chunked_tiles']}, k = {report['chunk_count']}")


if __name__ == "__main__":
    main()
