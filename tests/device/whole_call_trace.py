"""Where one whole render call of a real scene's frame spends its time, backend "cuda" against "lpt": each call
timed with CUDA events as `gsplat-lpt bench` times it (the GPU idle at its start, the kinds interleaved), then a
few calls of each traced with torch.profiler (CUPTI), and per call, relative to its start on the host:

- `sync`: when the host came back from the call's last wait for the GPU (gsplat's tiling reads the intersection
  count), and `blend launch`: when the host launched the call's first blending kernel (ours or gsplat's);
- `blend start` / `blend end`: the blending kernels' span on the GPU (plan kernels apart), and `gpu idle before
  blend`: how long the GPU waited between the work before the blend and the blend itself;
- `host end`: when the call returned; `gpu end`: when its last kernel or copy ended.

If `blend launch` comes later in "lpt" by more than its blend saves, the host path before the launch is what a
small frame loses on; if `host end` comes after `gpu end`, the host work after the launch is on the critical path.

    python3 tests/device/whole_call_trace.py --scene .data/test_garden.npz --frame 2 [--repeats 41] [--traced 12]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

BLEND_NAMES = ("rasterize_to_pixels", "blend")  # kernel names of the blending stage (gsplat's and ours)
PLAN_NAMES = ("plan",)
# calls that wait for the GPU (by exact name: cudaMemcpyAsync, the report's copy, does not wait)
SYNC_NAMES = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy",
              "cuStreamSynchronize", "cuCtxSynchronize")


def is_blend(name: str) -> bool:
    lowered = name.lower()
    return any(part in lowered for part in BLEND_NAMES) and not any(part in lowered for part in PLAN_NAMES)


def call_timelines(trace: dict, kind: str) -> List[Dict[str, float]]:
    """One dict of offsets (us from the call's start on the host) per traced call of `kind`."""
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    windows = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                     if e.get("cat") == "user_annotation" and e.get("name") == f"whole_call_{kind}")
    gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    runtime = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    by_correlation = {e.get("args", {}).get("correlation"): e for e in runtime}
    rows = []
    for begin, end in windows:
        calls = [e for e in runtime if begin <= e["ts"] <= end]
        ids = {e.get("args", {}).get("correlation") for e in calls}
        kernels = sorted((e for e in gpu if e.get("args", {}).get("correlation") in ids), key=lambda e: e["ts"])
        if not kernels:
            continue
        blends = [k for k in kernels if k.get("cat") == "kernel" and is_blend(k["name"])]
        syncs = [e for e in calls if e["name"] in SYNC_NAMES]
        row = {"host end": end - begin, "gpu end": max(k["ts"] + k["dur"] for k in kernels) - begin,
               "kernels": len(kernels)}
        if syncs:
            row["sync"] = max(e["ts"] + e["dur"] for e in syncs) - begin
        if blends:
            first = blends[0]
            launch = by_correlation.get(first.get("args", {}).get("correlation"))
            if launch is not None:
                row["blend launch"] = launch["ts"] - begin
            row["blend start"] = first["ts"] - begin
            row["blend end"] = max(k["ts"] + k["dur"] for k in blends) - begin
            before = [k["ts"] + k["dur"] for k in kernels if k["ts"] < first["ts"] and not is_blend(k["name"])]
            if before:
                row["gpu idle before blend"] = max(0.0, first["ts"] - max(before))
            row["blend kernels"] = " ".join(sorted({k["name"].split("(")[0][-40:] for k in blends}))
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scene", required=True)
    parser.add_argument("--frame", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=41)
    parser.add_argument("--traced", type=int, default=12)
    parser.add_argument("--out", type=Path, default=None, help="folder for the raw trace (optional)")
    args = parser.parse_args()

    import gsplat_lpt  # noqa: F401  (hooks gsplat)
    from gsplat_lpt.scenes.loaders import load_scene
    from gsplat_lpt.tools.bench import whole_call
    from gsplat_lpt.tools.timing import time_interleaved

    scene = load_scene(args.scene).to("cuda")
    viewmats, Ks = scene.frame_cameras(args.frame)

    def render(backend: str):  # (the whole call `gsplat-lpt bench` times, with the default config)
        return whole_call(scene, viewmats, Ks, backend)

    kinds = ("cuda", "lpt")
    times = time_interleaved({kind: (lambda k=kind: render(k)) for kind in kinds}, repeats=args.repeats, warmup=5)
    print(f"== {args.scene} frame {args.frame}: {scene.width}x{scene.height}, {viewmats.shape[0]} image(s); "
          f"whole calls timed with CUDA events, median of {args.repeats} (quartiles)")
    for kind in kinds:
        q = statistics.quantiles(times[kind], n=4)
        print(f"   {kind:5s} {statistics.median(times[kind]):.3f} ms ({q[0]:.3f}-{q[2]:.3f})")
    print(f"   cuda / lpt: {statistics.median(times['cuda']) / statistics.median(times['lpt']):.3f}")

    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(args.traced):
            for kind in kinds:
                torch.cuda.synchronize()
                with record_function(f"whole_call_{kind}"):
                    render(kind)
                torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as scratch:  # (the raw trace is kept only where --out names a folder)
        folder = args.out or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"whole_call_trace_frame{args.frame}.json"
        prof.export_chrome_trace(str(path))
        trace = json.loads(path.read_text())
    keys = ("sync", "blend launch", "gpu idle before blend", "blend start", "blend end", "gpu end", "host end")
    print(f"\n== traced calls (profiler on: host steps slower), medians of {args.traced}, us from the call's start")
    print(f"{'kind':6s}" + "".join(f"{key:>24s}" for key in keys))
    for kind in kinds:
        rows = call_timelines(trace, kind)[1:]  # (the first traced call warms the profiler)
        medians = [statistics.median([r[key] for r in rows if key in r]) if any(key in r for r in rows) else
                   float("nan") for key in keys]
        print(f"{kind:6s}" + "".join(f"{value:24.1f}" for value in medians))
        names = {r.get("blend kernels", "") for r in rows}
        print(f"       blend kernels: {' | '.join(sorted(names))}; kernels per call "
              f"{statistics.median([r['kernels'] for r in rows])}")


if __name__ == "__main__":
    main()
