"""Host cost of one rasterize call, measured so that the host's own drift (the machine's CPU speed moves by
20-40% between processes and over seconds) cancels out: every call kind runs in the same process, in
rounds interleaved call kind by call kind, each round `calls` calls enqueued while a sleep kernel keeps the
GPU busy (no call waits for it). Per kind: the median over rounds of the mean us per call, and the median
over rounds of its ratio to gsplat's own call in the same round.

    python3 tests/device/host_pieces.py [--baseline-module gsplat_lpt_before] [--rounds 15] [--calls 40]

With --baseline-module, an earlier checkout importable under that name (a copy of its gsplat_lpt/ renamed,
next to its kernels/) is timed in the same rounds. Then the pieces of one call are timed alone the same way.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_gpu_parity import cameras, project, random_gaussians  # noqa: E402


def rounds_us(kinds, calls, rounds, busy=True):
    """{kind: [us per call in each round]}, the kinds interleaved round by round. busy=False: no sleep kernel,
    and each round ends when the GPU has finished its calls (a render loop's throughput)."""
    times = {name: [] for name in kinds}
    for fn in kinds.values():  # warm: compiled kernels, grown buffers
        for _ in range(3):
            fn()
    for _ in range(rounds):
        for name, fn in kinds.items():
            torch.cuda.synchronize()
            if busy:
                torch.cuda._sleep(int(5e7))  # ~25 ms of GPU time ahead of the calls
            start = time.perf_counter_ns()
            for _ in range(calls):
                fn()
            if not busy:
                torch.cuda.synchronize()
            times[name].append((time.perf_counter_ns() - start) / 1e3 / calls)
    torch.cuda.synchronize()
    return times


def report(times, reference=None):
    for name, samples in times.items():
        line = f"{statistics.median(samples):8.2f} us  {name}"
        if reference is not None and name != reference:
            ratios = [a / b for a, b in zip(samples, times[reference])]
            line += f"   x{statistics.median(ratios):.3f} of {reference}"
        print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline-module", default=None)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=40)
    args = parser.parse_args()
    import gsplat_lpt
    from gsplat_lpt import LPTConfig
    from gsplat_lpt.hook import original
    from bench_core import ladder_frames

    packages = {"": gsplat_lpt}
    if args.baseline_module:
        packages[" (before)"] = importlib.import_module(args.baseline_module)
    gsplat_call = original("rasterize_to_pixels")
    frames = [("320x240 5k", project(*random_gaussians(5000, seed=1), *cameras(1, 320, 240), 320, 240)),
              ("640x480 20k", project(*random_gaussians(20000, seed=1), *cameras(1, 640, 480), 640, 480))]
    frames += list(ladder_frames(["street"]))
    for frame_name, frame in frames:
        print(f"== {frame_name}: {args.rounds} rounds of {args.calls} calls, GPU busy")
        kinds = {"gsplat": lambda f=frame: gsplat_call(**f)}
        for mode in ("lpt", "auto"):
            for suffix, package in packages.items():
                config = package.LPTConfig(mode=mode)
                kinds[f"{mode}{suffix}"] = lambda f=frame, p=package, c=config: p.rasterize_to_pixels(**f, config=c)
        report(rounds_us(kinds, args.calls, args.rounds), reference="gsplat")
        print(f"== {frame_name}: back to back (no sleep: each call costs the larger of its host and GPU time)")
        report(rounds_us(kinds, args.calls, args.rounds, busy=False), reference="gsplat")

    # 2DGS and 3DGUT: one 640 x 480 frame of 20,000 Gaussians (our kernels, hand-off off), every checkout in the same
    # rounds
    from gsplat_lpt.tools.frame import project_variant_frame

    means, quats, scales, opacities = random_gaussians(20000, seed=1)
    colors = torch.rand(means.shape[0], 3, device="cuda")
    for variant, label, module, function in (("2dgs", "2DGS", "surfel2d", "rasterize_to_pixels_2dgs"),
                                             ("3dgut", "3DGUT", "gaussian3dgut", "rasterize_to_pixels_eval3d")):
        blend = project_variant_frame(variant, means, quats, scales, opacities, colors, *cameras(1, 640, 480), 640, 480)
        call_args, call_kwargs = blend.call_arguments()
        theirs = original(function)
        kinds = {f"gsplat {label}": lambda fn=theirs, a=call_args, k=call_kwargs: fn(*a, **k)}
        for mode in ("lpt", "auto"):
            for suffix, package in packages.items():
                config = package.LPTConfig(mode=mode, gsplat_kernel_below=0)
                ours = getattr(importlib.import_module(f"{package.__name__}.variants.{module}"), function)
                kinds[f"{label} {mode}{suffix}"] = lambda fn=ours, c=config, a=call_args, k=call_kwargs: fn(
                    *a, **k, config=c)
        print(f"== {label} 640x480 20k: {args.rounds} rounds of {args.calls} calls, GPU busy")
        report(rounds_us(kinds, args.calls, args.rounds), reference=f"gsplat {label}")

    # the pieces of a call, each alone (the same rounds)
    from gsplat_lpt.runtime import current_stream_handle, rasterizer_for
    from gsplat_lpt.variants.gaussian3d import VARIANT, Frame3DGS, Outputs3DGS, Params3DGS

    frame = frames[-1][1]
    keys = ("means2d", "conics", "colors", "opacities", "backgrounds", "masks", "image_width", "image_height",
            "tile_size", "isect_offsets", "flatten_ids")
    call_args = [frame.get(k) for k in keys] + [False]
    f = Frame3DGS(*call_args)
    m, H, W = f.means2d, f.inter.image_height, f.inter.image_width
    r = rasterizer_for(VARIANT, 3, f.inter.tile_size, m.device)
    colors, alphas = m.new_empty((1, H, W, 3)), m.new_empty((1, H, W, 1))
    params = Params3DGS(f.means2d.data_ptr(), f.conics.data_ptr(), f.opacities.data_ptr(), f.colors.data_ptr(), 0)
    outputs = Outputs3DGS(colors.data_ptr(), alphas.data_ptr(), 0)
    side = torch.cuda.Stream()

    def stream_context():
        with torch.cuda.stream(side):
            pass

    pieces = {"gsplat": lambda: gsplat_call(**frame),
              "Frame3DGS (checks)": lambda: Frame3DGS(*call_args),
              "new_empty (one output)": lambda: m.new_empty((1, H, W, 3)),
              "Params3DGS (struct)": lambda: Params3DGS(m.data_ptr(), m.data_ptr(), m.data_ptr(), m.data_ptr(), 0),
              "current_stream_handle": lambda: current_stream_handle(m.device.index),
              "with torch.cuda.stream(s)": stream_context}
    for mode in ("lpt", "auto"):
        config = LPTConfig(mode=mode)
        pieces[f"plan + run ({mode})"] = lambda c=config: r.run(r.plan(f.inter, c, True, None), params, outputs)
    kept = r.plan(f.inter, LPTConfig(mode="auto"), True, None)
    pieces["FramePlan.snapshot (what a hooked call keeps for meta)"] = kept.snapshot
    for suffix, package in list(packages.items())[1:]:  # the earlier checkout's snapshot in the same rounds
        earlier_runtime = importlib.import_module(package.__name__ + ".runtime")
        earlier_3dgs = importlib.import_module(package.__name__ + ".variants.gaussian3d")
        earlier_frame = earlier_3dgs.Frame3DGS(*call_args)
        earlier = earlier_runtime.rasterizer_for(earlier_3dgs.VARIANT, 3, earlier_frame.inter.tile_size, m.device)
        earlier_kept = earlier.plan(earlier_frame.inter, package.LPTConfig(mode="auto"), True, None)
        pieces[f"FramePlan.snapshot{suffix}"] = earlier_kept.snapshot
    print(f"== pieces of a call (ladder street), {args.rounds} rounds of {args.calls} calls")
    report(rounds_us(pieces, args.calls, args.rounds), reference="gsplat")

    # whole gsplat.rasterization calls (projection, tiling, blend; 640 x 480, 20,000 Gaussians): backend "cuda", "lpt"
    # and the hook alone (whole_calls.py)
    from whole_calls import HOOK_ALONE, whole_calls

    labels = {"cuda": "rasterization, backend=cuda", "lpt": "rasterization, backend=lpt",
              HOOK_ALONE: "rasterization, backend=lpt, gsplat's blend (the hook alone)"}
    whole = {labels[name]: call for name, call in whole_calls().items()}
    print(f"== whole gsplat.rasterization calls (640 x 480, 20k), {args.rounds} rounds of {args.calls} calls, GPU busy")
    report(rounds_us(whole, args.calls, args.rounds), reference="rasterization, backend=cuda")
    print("== the same, back to back")
    report(rounds_us(whole, args.calls, args.rounds, busy=False), reference="rasterization, backend=cuda")

    # what the hooked gsplat.rasterization does itself before it calls gsplat with backend="lpt": the check that no
    # input is a CPU tensor, and whole_map_chunk (against the earlier checkout's check, where one is named)
    from gsplat_lpt import hook

    rasterization = hook.original("rasterization")
    zeros = lambda *shape: torch.zeros(*shape, device="cuda")  # noqa: E731
    wrapper_args = (zeros(100, 3), zeros(100, 4), zeros(100, 3), zeros(100), zeros(100, 3), zeros(1, 4, 4),
                    zeros(1, 3, 3), 64, 48)
    reader = hook._parameter_reader(rasterization)
    checks = {"rasterization's checks": lambda: (hook._require_cuda_inputs(reader.positions, wrapper_args, {}),
                                                 hook.whole_map_chunk(wrapper_args, {}, reader))}
    for suffix, package in packages.items():
        if suffix:
            earlier = importlib.import_module(package.__name__ + ".hook")
            if hasattr(earlier, "_parameter_reader"):  # (a checkout with the same checks as this one)
                old_reader = earlier._parameter_reader(rasterization)
                checks[f"rasterization's checks{suffix}"] = lambda h=earlier, r=old_reader: (
                    h._require_cuda_inputs(r.positions, wrapper_args, {}), h.whole_map_chunk(wrapper_args, {}, r))
            else:  # (before: the check read the signature on every call)
                checks[f"rasterization's check{suffix}"] = lambda h=earlier: h._require_cuda_inputs(
                    rasterization, wrapper_args, {})
    print(f"== the hooked rasterization's own checks, {args.rounds} rounds of {args.calls} calls")
    report(rounds_us(checks, args.calls, args.rounds), reference="rasterization's checks")


if __name__ == "__main__":
    main()
