"""Where a whole `gsplat.rasterization` call's time goes, backend "cuda" against "lpt", calls back to back (a render
loop of small frames, where host time and waits decide): the torch profiler's CPU ops and CUDA runtime calls (their
host time, waits such as cudaStreamSynchronize among them), the GPU kernels, and which operations synchronise with
the host (torch.cuda.set_sync_debug_mode).

    python3 tests/device/whole_call_profile.py [--size 640x480] [--gaussians 20000] [--calls 40] [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from test_gpu_parity import cameras, random_gaussians  # noqa: E402

import gsplat  # noqa: E402
import gsplat_lpt  # noqa: E402,F401  (hooks gsplat)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="640x480")
    parser.add_argument("--gaussians", type=int, default=20_000)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--packed", choices=("true", "false", "both"), default="both")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    means, quats, scales, opacities = random_gaussians(args.gaussians, seed=1)
    colors = torch.rand(means.shape[0], 3, device="cuda")
    viewmats, Ks = cameras(1, width, height)
    packs = {"true": (True,), "false": (False,), "both": (True, False)}[args.packed]

    def call(backend, packed):
        return gsplat.rasterization(means, quats, scales, opacities, colors, viewmats, Ks, width, height,
                                    packed=packed, backend=backend)

    from torch.profiler import ProfilerActivity, profile

    for packed in packs:
        print(f"\n######## packed={packed}, {width}x{height}, {args.gaussians} Gaussians")
        for backend in ("cuda", "lpt"):
            for _ in range(5):
                call(backend, packed)
            torch.cuda.synchronize()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                torch.cuda.set_sync_debug_mode("warn")
                call(backend, packed)
                torch.cuda.set_sync_debug_mode(0)
            syncs = [str(w.message).splitlines()[0][:120] for w in caught]
            print(f"== backend={backend}: {len(syncs)} synchronising operation(s) in one call")
            for line in syncs:
                print(f"   {line}")
            torch.cuda.synchronize()
            per_call = []
            for _ in range(7):
                start = time.perf_counter_ns()
                for _ in range(args.calls):
                    call(backend, packed)
                torch.cuda.synchronize()
                per_call.append((time.perf_counter_ns() - start) / 1e3 / args.calls)
            print(f"== backend={backend}: {statistics.median(per_call):.1f} us per call back to back "
                  f"(median of 7 loops of {args.calls})")
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for _ in range(args.calls):
                    call(backend, packed)
                torch.cuda.synchronize()
            table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=22, max_name_column_width=60)
            print(table)
            device_us = lambda e: getattr(e, "device_time_total", 0) or getattr(e, "cuda_time_total", 0)  # noqa: E731
            kernels = sorted(((e.key, device_us(e) / args.calls) for e in prof.key_averages() if device_us(e) > 0),
                             key=lambda kv: -kv[1])
            print(f"== backend={backend}: GPU time per call by op/kernel (us)")
            for key, us in kernels[:14]:
                print(f"   {us:9.1f}  {key[:90]}")
            args.out.mkdir(parents=True, exist_ok=True)
            prof.export_chrome_trace(str(args.out / f"whole_call_{backend}_packed{int(packed)}.json"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
