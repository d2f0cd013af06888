"""Compares a run on one GPU with the same run spread over several (tests/device/multi_gpu.sh).

    python3 tests/device/compare_runs.py render ONE_GPU_DIR SEVERAL_GPUS_DIR
    python3 tests/device/compare_runs.py bench ONE_GPU_DIR SEVERAL_GPUS_DIR
    python3 tests/device/compare_runs.py omnire ONE_GPU_DIR SEVERAL_GPUS_DIR

Exit status 0 when the outputs exist and agree: the same files, identical images (LPT-only mode is
gsplat's output bit for bit), the same frames in the same order with the same tile workloads and
schedules; timings are not compared. One line per check; the failures say what differs.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Callable, List

import numpy as np

FAILURES: List[str] = []


def check(what: str, ok: bool, detail: str = "") -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {what}" + (f": {detail}" if detail and not ok else ""))
    if not ok:
        FAILURES.append(what)


def same_images(one: Path, several: Path, pattern: str) -> None:
    import imageio.v2 as imageio

    names_one = sorted(p.name for p in one.glob(pattern))
    names_several = sorted(p.name for p in several.glob(pattern))
    check(f"{pattern} files exist", bool(names_one), f"none in {one}")
    check(f"{pattern}: same files", names_one == names_several, f"{names_one} vs {names_several}")
    differing = [name for name in names_one if name in names_several
                 and not np.array_equal(imageio.imread(one / name), imageio.imread(several / name))]
    check(f"{pattern}: identical pixels", not differing, f"{differing}")


def same_rows(one: Path, several: Path, keys: List[str], label: Callable[[dict], str]) -> List[dict]:
    rows_one = list(csv.DictReader(open(one)))
    rows_several = list(csv.DictReader(open(several)))
    check(f"{one.name}: rows", bool(rows_one) and len(rows_one) == len(rows_several),
          f"{len(rows_one)} vs {len(rows_several)}")
    for a, b in zip(rows_one, rows_several):
        differing = [key for key in keys if a.get(key) != b.get(key)]
        check(f"{one.name} {label(a)}", not differing, ", ".join(f"{k}: {a.get(k)} vs {b.get(k)}" for k in differing))
    return rows_several


def main(kind: str, one: Path, several: Path) -> int:
    if kind == "render":
        same_images(one, several, "frame_*.png")
        frames_one = json.loads((one / "render.json").read_text())
        frames_several = json.loads((several / "render.json").read_text())
        check("render.json: process count", frames_several.get("processes", 1) > 1, str(frames_several.get("processes")))
        # (not "imbalance": it is the heaviest *predicted* cost, and saturation feedback predicts from the frame
        # the same process rendered before, which differs when frames are spread over processes)
        keys = ("frame", "chunked_tiles", "chunk_count", "total_workload")
        pick = lambda frames: [{k: f.get(k) for k in keys} for f in frames["frames"]]  # noqa: E731
        check("render.json: same frames and schedules", pick(frames_one) == pick(frames_several))
    elif kind == "bench":
        keys = ["scene", "frame", "images", "total_workload", "max_workload", "imbalance", "chunked_tiles",
                "chunk_count", "lpt_psnr_db"]
        same_rows(one / "bench.csv", several / "bench.csv", keys, lambda row: f"{row['scene']}:{row['frame']}")
        meta = json.loads((several / "bench.json").read_text())["meta"]
        check("bench.json: process count", meta.get("processes", 1) > 1, str(meta.get("processes")))
        for name in ("speedup_vs_imbalance.png", "frame_times.png"):
            check(f"{name} written", (several / name).is_file())
    elif kind == "omnire":
        keys = ["frame", "gaussians", "visible_instances", "intersections", "imbalance", "chunked_tiles",
                "chunk_count", "psnr_e2e_db", "psnr_blend_db"]
        rows = same_rows(one / "results.csv", several / "results.csv", keys, lambda row: f"frame {row['frame']}")
        check("results.csv: frames timed on several GPUs", len({row["rank"] for row in rows}) > 1,
              str(sorted({row["rank"] for row in rows})))
        same_images(one / "frames", several / "frames", "*.png")
    else:
        print(f"unknown kind {kind!r}; use render, bench or omnire")
        return 2
    return 1 if FAILURES else 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print(__doc__.strip())
        sys.exit(2)
    sys.exit(main(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])))
