"""Cameras taken in turn on one stream, as a driving rig renders its views: a cycle of ladder frames (e.g. a heavy
front view and balanced side views), each call planned while the GPU may still be on the ones before. auto decides
from finished frames whether to launch the chunk kernel at all; this times the whole cycle for gsplat's blend, and for
lpt and auto of this checkout and of earlier checkouts (--baseline-module, as tests/device/ab_kernels.py takes them),
and says how many of the cycle's frames each auto chunked.

Two timings per side: the GPU's time of one cycle (interleaved with the other sides, the host hidden behind a sleep
kernel, a sync after each cycle: the first camera of a cycle is planned after the last one of the cycle before has
finished), and a free-running loop (--loop cycles enqueued back to back, no sync; wall time per cycle).

    PYTHONPATH=.baseline python3 tests/device/camera_cycle.py --cycle veil balanced balanced \
        [--baseline-module gsplat_lpt_before] [--repeats 15] [--loop 30] [--out DIR]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import ladder_frames, on_stream, time_interleaved  # noqa: E402

import gsplat_lpt  # noqa: E402
from gsplat_lpt.hook import original  # noqa: E402


def free_running_ms(fn, cycles: int, rounds: int = 3):
    """Wall ms per cycle of `cycles` cycles enqueued back to back (median of `rounds`), and the host's median ms
    per cycle call (what the thread spent enqueuing one cycle)."""
    per_cycle, host = [], []
    for _ in range(rounds):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(cycles):
            before = time.perf_counter()
            fn()
            host.append(time.perf_counter() - before)
        torch.cuda.synchronize()
        per_cycle.append((time.perf_counter() - start) * 1e3 / cycles)
    return statistics.median(per_cycle), statistics.median(host) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycle", nargs="+", default=["veil", "balanced", "balanced"],
                        help="ladder frames rendered in turn on one stream")
    parser.add_argument("--baseline-module", nargs="*", default=[])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--loop", type=int, default=30, help="cycles of the free-running loop")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("camera_cycle needs a CUDA device")
    frames = dict(ladder_frames(sorted(set(args.cycle))))
    cycle = [frames[f"ladder:{name}"] for name in args.cycle]
    packages = {"now": gsplat_lpt, **{name: importlib.import_module(name) for name in args.baseline_module}}
    gsplat_call = original("rasterize_to_pixels")
    chunked = {}  # package name -> which frames of a cycle auto chunked

    def ours_cycle(package, config):
        return lambda: [package.rasterize_to_pixels(**frame, config=config) for frame in cycle]

    def chunked_frames(package, config):
        """Which frames of one cycle auto chunked (the low-level entry, whose plan keeps a snapshot of its report)."""
        plans = []
        for f in cycle:
            ours = package.variants.gaussian3d.Frame3DGS(
                f["means2d"], f["conics"], f["colors"], f["opacities"], None, None, f["image_width"],
                f["image_height"], f["tile_size"], f["isect_offsets"], f["flatten_ids"], False)
            plans.append(ours.render(config)[-1].snapshot())
        return [plan.report()["chunked_tiles"] > 0 for plan in plans]

    sides = {"gsplat": lambda: [gsplat_call(**frame) for frame in cycle]}
    for name, package in packages.items():
        for mode in ("lpt", "auto"):
            sides[f"{mode} {name}"] = on_stream(torch.cuda.Stream(), ours_cycle(package, package.LPTConfig(mode=mode)))
    gpu = time_interleaved(sides, args.repeats, busy=True)
    loop, host = {}, {}
    for name, fn in sides.items():
        loop[name], host[name] = free_running_ms(fn, args.loop)
    # which frames each auto chunked, in a cycle enqueued after the free-running loop
    for name, package in packages.items():
        with torch.cuda.stream(sides[f"auto {name}"].stream):
            chunked[name] = chunked_frames(package, package.LPTConfig(mode="auto"))
    rows = [{"side": name, "gpu_ms_per_cycle": gpu[name], "loop_ms_per_cycle": loop[name],
             "host_ms_per_cycle": host[name],
             "x_gsplat_gpu": gpu["gsplat"] / gpu[name], "x_gsplat_loop": loop["gsplat"] / loop[name],
             "chunked": chunked.get(name.split(" ", 1)[-1]) if name.startswith("auto") else None}
            for name in sides]
    args.out.mkdir(parents=True, exist_ok=True)
    label = "-".join(args.cycle)
    (args.out / f"camera_cycle_{label}.json").write_text(json.dumps(
        {"device": torch.cuda.get_device_name(), "cycle": args.cycle, "repeats": args.repeats, "loop": args.loop,
         "rows": rows}, indent=2))
    print(f"\ncycle {' -> '.join(args.cycle)} on one stream, {torch.cuda.get_device_name()}")
    print(f"{'side':24s} {'GPU ms/cycle':>12s} {'x gsplat':>8s} {'loop ms/cycle':>13s} {'x gsplat':>8s} "
          f"{'host ms/cycle':>13s}  chunked")
    for r in rows:
        print(f"{r['side']:24s} {r['gpu_ms_per_cycle']:12.3f} {r['x_gsplat_gpu']:8.2f} {r['loop_ms_per_cycle']:13.3f} "
              f"{r['x_gsplat_loop']:8.2f} {r['host_ms_per_cycle']:13.3f}  {r['chunked'] if r['chunked'] is not None else ''}")


if __name__ == "__main__":
    main()
