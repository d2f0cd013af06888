"""GPU: how exactly the 3DGUT lpt mode reproduces gsplat's eval3d forward kernel, case by case.

For every case of tests/test_gpu_3dgut.py (two seeds, with and without backgrounds) it prints the number of
pixels whose colours, alphas or last_ids differ from gsplat's at all (bitwise) and the largest difference.
Exit status 1 when any pixel differs.

    python3 tests/device/exact_3dgut.py [case name ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import test_gpu_3dgut as cases  # noqa: E402  (the GPU tests' scenes, cameras and gsplat call)

from gsplat_lpt import LPTConfig  # noqa: E402


def main(argv) -> int:
    names = set(argv)
    differing = 0
    for case in cases.CASES:
        if names and case[0] not in names:
            continue
        for seed in (0, 1):
            for with_background in (False, True):
                frame = cases.case_frame(case, seed)
                images = frame["isect_offsets"].shape[:-2]
                backgrounds = torch.rand(*images, 3, device="cuda") if with_background else None
                ref_colors, ref_alphas, ref_last = cases.gsplat_forward(frame, backgrounds)
                colors, alphas, last_ids, _ = cases.ours_forward(frame, LPTConfig(mode="lpt"), backgrounds)
                colors_ne = int((colors != ref_colors).any(-1).sum())
                alphas_ne = int((alphas != ref_alphas).sum())
                last_ne = int((last_ids != ref_last).sum())
                worst = float((colors - ref_colors).abs().max())
                differing += colors_ne + alphas_ne + last_ne
                print(f"{case[0]:28s} seed {seed} bg {int(with_background)}: pixels {alphas.numel():6d}  colours differ "
                      f"{colors_ne:5d}  alphas differ {alphas_ne:5d}  last_ids differ {last_ne:4d}  max |diff| {worst:.2e}",
                      flush=True)
    print("bitwise equal" if differing == 0 else f"{differing} differing pixel outputs")
    return 0 if differing == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
