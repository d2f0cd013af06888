"""What the auto policy sees on each benchmark frame: after a few calls (the saturation feedback settled), the
plan's Eq. (6) inputs (K, N_total, the sorted predicted costs of the heaviest items) and its choice, as JSON
lines, so that the policy's constants can be studied offline (gsplat_lpt.plan's twin of the GPU search).

    python3 tests/device/policy_inputs.py [--out DIR] [--head 1024]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_core  # noqa: E402  (the benchmark's frames)
from gsplat_lpt import LPTConfig  # noqa: E402
from gsplat_lpt.variants.gaussian3d import rasterize_with_plan  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    parser.add_argument("--head", type=int, default=1024, help="how many of the heaviest predicted costs to keep")
    parser.add_argument("--mode", default="auto", help="the mode of the calls (lpt: costs fed back by LPT alone)")
    parser.add_argument("--heavy-item-pace", type=float, default=LPTConfig.heavy_item_pace)
    parser.add_argument("--ladder", nargs="*", default=["balanced", "mild", "moderate", "street", "severe", "extreme",
                                                         "rig", "foliage", "mixed"])
    parser.add_argument("--real", nargs="*", default=["bonsai", "garden"],
                        choices=["bonsai", "garden", *bench_core.BONSAI_VIEWS])
    args = parser.parse_args()
    frames = list(bench_core.ladder_frames(args.ladder))
    frames += [{"bonsai": bench_core.bonsai_frame, "garden": bench_core.garden_frame}[name]()
               if name in ("bonsai", "garden") else bench_core.bonsai_view_frame(name) for name in args.real]
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, frame in frames:
        config = LPTConfig(mode=args.mode, heavy_item_pace=args.heavy_item_pace)
        for _ in range(4):  # each finished before the next plan: it reads the status the frame left (capacity)
            rasterize_with_plan(**frame, config=config)
            torch.cuda.synchronize()
        _, _, plan = rasterize_with_plan(**frame, config=config)
        torch.cuda.synchronize()
        report = dict(plan.report())
        head = plan.workspace.sorted_costs[: min(args.head, report["num_items"])].tolist()
        row = {"frame": name, **{k: v for k, v in report.items() if isinstance(v, (int, float, str, type(None)))},
               "head": head}
        rows.append(row)
        ratio = (head[0] if head else 0) * row["concurrent_ctas"] / max(1, row["predicted_total_cost"])
        print(f"{name:<26} K {row['concurrent_ctas']} total {row['predicted_total_cost']} N1 {head[0] if head else 0} "
              f"N1 K / N_total {ratio:.3f} "
              f"(h,k) ({row['chunked_tiles']},{row['chunk_count']}) predicted {row['predicted_cost']} "
              f"lpt {row['predicted_cost_lpt']}", flush=True)
    (args.out / f"policy_inputs_{args.mode}.json").write_text(json.dumps(rows))


if __name__ == "__main__":
    main()
