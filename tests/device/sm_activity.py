"""SM activity of gsplat's blending kernel and of ours per frame, read with Nsight Compute.

    ncu --clock-control none --profile-from-start off --csv --page raw \
        --metrics sm__cycles_active.avg,sm__cycles_elapsed.avg,gpu__time_duration.sum \
        python3 tests/device/sm_activity.py > ncu.csv            # the script prints its windows to stderr
    python3 tests/device/sm_activity.py --summarize ncu.csv windows.txt

Each measured call (gsplat's `rasterize_to_pixels`, or ours in `auto` after warm-up frames) runs between
cudaProfilerStart/Stop, so only its kernels are profiled. Nsight Compute replays kernels one at a time:
the chunk kernel and the LPT kernel, which co-execute in a real frame, are measured apart, and a frame's SM
activity is their time-weighted mean (sum of active SM cycles over sum of elapsed cycles), which is what a
serial schedule of the two would show. (Range replay, `ncu --replay-mode range`, replays a call's kernels
together but counts the host's launch gaps inside the range as idle: on the H200 a 0.34 ms frame read as a
0.59 ms range. tests/device/trace_units.py measures the co-executing kernels from inside.)

With `--calls N` each window is N consecutive calls of one frame instead, for application range replay:

    ncu --replay-mode app-range --clock-control none --csv --page raw \
        --metrics sm__cycles_active.avg,sm__cycles_elapsed.avg,gpu__time_duration.sum \
        python3 tests/device/sm_activity.py --graphs --calls 40 > ncu_ranges.csv 2> windows.txt
    python3 tests/device/sm_activity.py --graphs --calls 40 --summarize ncu_ranges.csv windows.txt

Ranges are cudaProfilerStart/Stop pairs; the program runs as it is (nothing captured or replayed) and the counters
cover the whole range: one row per window, its time shown per call. What it showed on the H200 (Nsight Compute
2025.3; examples/results/JOURNAL.md, "Nsight Compute over ranges of calls"): with plain calls the host, slowed by
the profiler, falls behind a sub-millisecond frame and its gaps count as idle; with `--graphs` (one graph launch per
call) gsplat's kernel reads within a few points of kernel replay, but our chunk kernel and LPT kernel still ran one
after the other, each chunked frame taking as long as its kernels replayed alone. So no mode here measures the two
kernels co-executing; tests/device/trace_units.py does, from inside the kernels.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))


def run(frames, graphs: bool = False, modes=("vanilla", "auto", "lpt"), calls: int = 1) -> None:
    import gsplat_lpt
    from bench_core import BONSAI_VIEWS, bonsai_frame, bonsai_view_frame, garden_frame, ladder_frames
    from gsplat_lpt import LPTConfig
    from gsplat_lpt.hook import original

    gsplat_blend = original("rasterize_to_pixels")
    real = ("bonsai", "garden", *BONSAI_VIEWS)
    all_frames = list(ladder_frames([f for f in frames if f not in real]))
    if "bonsai" in frames:
        all_frames.append(bonsai_frame())
    if "garden" in frames:
        all_frames.append(garden_frame())
    all_frames += [bonsai_view_frame(f) for f in frames if f in BONSAI_VIEWS]
    for name, frame in all_frames:
        call_of_mode = {"vanilla": lambda: gsplat_blend(**frame),
                        "auto": lambda: gsplat_lpt.rasterize_to_pixels(**frame, config=LPTConfig(mode="auto")),
                        "lpt": lambda: gsplat_lpt.rasterize_to_pixels(**frame, config=LPTConfig(mode="lpt"))}
        for mode, call in call_of_mode.items():
            if mode not in modes:
                continue
            profile_once(captured(call) if graphs else call, f"{name}\t{mode}", calls=calls)


def profile_once(call, window: str, warm_ups: int = 4, calls: int = 1) -> None:
    """`call` warmed up (compiled kernels, grown buffers, saturation feedback), then run `calls` times back to
    back between cudaProfilerStart/Stop; the window's name goes to stderr."""
    for _ in range(warm_ups):
        call()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for _ in range(calls):
        call()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    print(window, file=sys.stderr, flush=True)


def captured(call):
    """`call` warmed up on a stream of its own (its workspace: grown buffers, saturation feedback) and captured
    there in a CUDA graph. Replayed without a profiler its kernels co-execute as in an eager call
    (tests/device/graph_replay.py); profiled with `ncu --graph-profiling graph` or app-range replay, they did
    not on the H200."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(4):
            call()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        call()
    return graph.replay


def summarize(csv_path: Path, windows_path: Path, graphs: bool = False, calls: int = 1) -> None:
    """One row per window. Kernel replay gives a row per kernel, grouped into windows here; a profiled graph
    (`graphs`) or an application range (`calls` > 1) is one row, whose time is shown per call."""
    whole = graphs or calls > 1
    windows = [line.split("\t") for line in windows_path.read_text().splitlines() if "\t" in line]
    rows = [row for row in csv.DictReader(line for line in csv_path.read_text().splitlines() if line.startswith('"'))
            if (whole or row.get("Kernel Name")) and row.get("sm__cycles_active.avg") not in (None, "", "cycle")]
    kernels = []
    for row in rows:
        name = row.get("Kernel Name") or ("graph" if graphs else "range")
        active = float(row["sm__cycles_active.avg"].replace(",", ""))
        elapsed = float(row["sm__cycles_elapsed.avg"].replace(",", ""))
        duration = float(row["gpu__time_duration.sum"].replace(",", ""))
        kernels.append((name, active, elapsed, duration))
    # split the kernel sequence into the windows: gsplat's call is one kernel; ours starts with the plan
    # (plan_cluster, or plan_costs where the frame takes two launches); a profiled graph is one row
    groups, current = [], []
    for kernel in kernels:
        if current and (whole or kernel[0].startswith(("plan_costs", "plan_cluster")) or "rasterize_to_pixels" in kernel[0]):
            groups.append(current)
            current = []
        current.append(kernel)
    if current:
        groups.append(current)
    print(f"{'frame':<26} {'mode':<8} {'SM activity':>11} {'us per call':>11}  kernels")
    for (frame, mode), group in zip(windows, groups):
        active = sum(k[1] for k in group)
        elapsed = sum(k[2] for k in group)
        duration = sum(k[3] for k in group) / 1000.0 / calls
        names = ", ".join(f"{k[0].split('(')[0][:24]} {k[1] / k[2]:.0%}" for k in group)
        print(f"{frame:<26} {mode:<8} {active / elapsed:>11.1%} {duration:>11.1f}  {names}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", nargs="*", default=["balanced", "moderate", "street", "extreme", "rig", "foliage",
                                                         "mixed", "veil", "fog", "bonsai"])
    parser.add_argument("--modes", nargs="*", default=["vanilla", "auto", "lpt"],
                        help="which calls to profile")
    parser.add_argument("--summarize", nargs=2, type=Path, metavar=("NCU_CSV", "WINDOWS"))
    parser.add_argument("--graphs", action="store_true",
                        help="each call captured in a CUDA graph, for ncu --graph-profiling graph or, with --calls, "
                             "app-range replay (on the H200 the profiler still ran our kernels one after the other)")
    parser.add_argument("--calls", type=int, default=1,
                        help="consecutive calls per window, for ncu --replay-mode app-range (one row per window, its "
                             "time per call)")
    args = parser.parse_args()
    if args.summarize:
        summarize(*args.summarize, graphs=args.graphs, calls=args.calls)
    else:
        run(args.frames, args.graphs, args.modes, args.calls)


if __name__ == "__main__":
    main()
