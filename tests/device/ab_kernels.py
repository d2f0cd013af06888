"""Kernels before and after a change, in one process: gsplat's blend, this checkout's lpt and auto, and an earlier
checkout's (importable as --baseline-module, e.g. .baseline/gsplat_lpt_before next to .baseline/kernels; several may
be named), on the
same frames, timed interleaved (GPU time: the host hidden behind a sleep kernel). Per frame it also says whether
each side's outputs are gsplat's bit for bit (3DGS colours and alphas; 2DGS every output) and whether the two
checkouts' outputs are equal (each earlier one against this one), mode by mode: a change that should only make the kernels faster must leave every
float where it was.

    PYTHONPATH=.baseline python3 tests/device/ab_kernels.py --baseline-module gsplat_lpt_before [other ...] \
        [--channels 3 8 16 32 64 128] [--channels-2dgs 4 16] [--real garden 1x320x240] [--repeats 15] [--out DIR] \
        [--warp-shapes blocks rows] [--warp-bits NAME=BITS ...] [--probes NAME ...]

(With no --baseline-module, this checkout's sides alone: its warp shapes against its default.)

--warp-shapes adds this checkout once more per warp shape (LPTConfig.warp_shape), as sides "now-blocks", "now-rows";
--warp-bits NAME=BITS once more per FrameArgs.warp_blocks value (config.WARP_BLOCK_BITS: bit P - 1 the persistent
kernel of P pixels, bit 2 the chunk kernel, bit 3 the persistent kernel of a chunked frame, bit 4 rows on latency-bound
unchunked frames), registered as a warp shape of that name for the run, as side "now-NAME" (e.g. chunkrows=0b1011).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import (BONSAI_VIEWS, bonsai_gaussians, bonsai_view_frame, garden_frame, ladder_frames,  # noqa: E402
                        on_stream, project, register_warp_shapes, time_interleaved)
from bench_shapes import with_channels  # noqa: E402

import gsplat_lpt  # noqa: E402
from gsplat_lpt.hook import original  # noqa: E402


def frames_3dgs(channel_counts, ladder, real=(), probes=()):
    bonsai = project(*bonsai_gaussians(4, 1920, 1080))
    for channels in channel_counts:
        yield f"3dgs bonsai 4x1080p {channels} ch", with_channels(bonsai, channels)
    for name, frame in ladder_frames(ladder):
        yield f"3dgs {name} 3 ch", frame
    for name in real:  # real frames, small ones among them (where a few us of plan and launch weigh most)
        if name == "garden":
            label, frame = garden_frame()
            yield "3dgs " + label, frame
        elif name in BONSAI_VIEWS:
            label, frame = bonsai_view_frame(name)
            yield "3dgs " + label, frame
        else:  # "VIEWSxWIDTHxHEIGHT": the bonsai orbit at that size, e.g. 1x320x240
            views, width, height = (int(v) for v in name.split("x"))
            yield f"3dgs bonsai {name}", project(*bonsai_gaussians(views, width, height))
    if probes:
        from unseen_frames import build
        for name in probes:  # frames built unlike the ladder (gsplat_lpt.scenes.probes)
            yield f"3dgs probe:{name}", build(name)


def frames_2dgs(channel_counts, ladder):
    import bench_2dgs
    from bench_2dgs import bonsai_frame
    from bench_2dgs import ladder_frames as ladder_2dgs

    _, bonsai = bonsai_frame()
    for channels in channel_counts:
        frame = bonsai if channels == bonsai.colors.shape[-1] else bench_2dgs.with_channels(bonsai, channels)
        yield f"2dgs bonsai 4x1080p {channels} ch", frame
    for name, frame in ladder_2dgs(ladder):
        yield f"2dgs {name} {frame.colors.shape[-1]} ch", frame


def as_call(frame, function_name):
    """(gsplat's call, our call on a package) of a 3DGS frame dict or a 2DGS Blend2DGS."""
    if isinstance(frame, dict):
        return (lambda: original(function_name)(**frame)), (lambda package, config: getattr(package, function_name)(
            **frame, config=config))
    args, kwargs = frame.call_arguments()
    return (lambda: original(function_name)(*args, **kwargs)), (lambda package, config: getattr(
        package, function_name)(*args, **kwargs, config=config))


def outputs_of(result, function_name):
    """The outputs the comparison covers: colours and alphas (3DGS), every output (2DGS)."""
    return list(result[:2]) if function_name == "rasterize_to_pixels" else list(result)


def equal(a, b) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline-module", nargs="*", default=[])
    parser.add_argument("--channels", nargs="*", type=int, default=[3, 8, 16, 32, 64, 128])
    parser.add_argument("--channels-2dgs", nargs="*", type=int, default=[4, 16])
    parser.add_argument("--ladder", nargs="*", default=["balanced", "street"])
    parser.add_argument("--ladder-2dgs", nargs="*", default=["balanced"])
    parser.add_argument("--real", nargs="*", default=[],
                        help="3DGS real frames: garden, " + ", ".join(BONSAI_VIEWS) + ", or the bonsai orbit as "
                             "VIEWSxWIDTHxHEIGHT (e.g. 1x320x240)")
    parser.add_argument("--probes", nargs="*", default=[], help="probe scenes (gsplat_lpt.scenes.probe_names())")
    parser.add_argument("--warp-shapes", nargs="*", default=[], choices=["auto", "blocks", "rows"])
    parser.add_argument("--warp-bits", nargs="*", default=[], metavar="NAME=BITS")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    args = parser.parse_args()
    own_shapes = {name: int(bits, 0) for name, bits in (item.split("=") for item in args.warp_bits)}
    register_warp_shapes(own_shapes)  # this run's own warp shapes: FrameArgs.warp_blocks values by name
    shapes = list(args.warp_shapes) + list(own_shapes)
    # side -> (package, LPTConfig fields besides the mode)
    packages = {"now": (gsplat_lpt, {}), **{name: (importlib.import_module(name), {}) for name in args.baseline_module},
                **{f"now-{shape}": (gsplat_lpt, {"warp_shape": shape}) for shape in shapes}}
    others = [side for side in packages if side != "now"]
    work = [(name, frame, "rasterize_to_pixels") for name, frame in frames_3dgs(args.channels, args.ladder, args.real, args.probes)]
    work += [(name, frame, "rasterize_to_pixels_2dgs")
             for name, frame in frames_2dgs(args.channels_2dgs, args.ladder_2dgs)]
    rows = []
    for name, frame, function_name in work:
        gsplat_call, ours = as_call(frame, function_name)
        calls = {"gsplat": gsplat_call}
        for side, (package, fields) in packages.items():
            for mode in ("lpt", "auto"):
                config = package.LPTConfig(mode=mode, **fields)
                calls[f"{mode} {side}"] = on_stream(torch.cuda.Stream(), lambda p=package, c=config: ours(p, c))
        torch.cuda.synchronize()
        for fn in calls.values():  # warm: compiled kernels, grown buffers, auto's feedback
            fn()
            fn()
        torch.cuda.synchronize()
        results = {label: outputs_of(fn(), function_name) for label, fn in calls.items()}
        torch.cuda.synchronize()
        reference = results["gsplat"]
        gpu = time_interleaved(calls, args.repeats, busy=True)
        row = {"frame": name, "n_isects": (frame["flatten_ids"] if isinstance(frame, dict) else frame.flatten_ids).numel(),
               "gpu_ms": gpu,
               "exact": {label: equal(out, reference) for label, out in results.items() if label != "gsplat"},
               "max_abs_error": {label: max(float((o - r).abs().max()) if o.numel() else 0.0
                                            for o, r in zip(out, reference) if o.is_floating_point())
                                 for label, out in results.items() if label != "gsplat"},
               "now_equals": {f"{mode} {side}": equal(results[f"{mode} now"], results[f"{mode} {side}"])
                              for side in others for mode in ("lpt", "auto")}}
        rows.append(row)
        print(json.dumps(row), flush=True)
        del results, reference, calls
        torch.cuda.empty_cache()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ab_kernels.json").write_text(json.dumps(rows, indent=1))
    sides = list(packages)
    print(f"\n{'frame':<30} {'gsplat ms':>9} " + " ".join(f"{'lpt x ' + side:>{max(9, len(side) + 6)}}" for side in sides)
          + " " + " ".join(f"{'auto x ' + side:>{max(10, len(side) + 7)}}" for side in sides) + f" {'lpt exact':>9} now equals")
    for r in rows:
        g = r["gpu_ms"]
        exact = "yes" if r["exact"]["lpt now"] else f"{r['max_abs_error']['lpt now']:.1e}"
        same = " ".join(f"{key}:{'yes' if value else 'NO'}" for key, value in r["now_equals"].items())
        print(f"{r['frame']:<30} {g['gsplat']:>9.3f} "
              + " ".join(f"{g['gsplat'] / g['lpt ' + side]:>{max(9, len(side) + 6)}.2f}" for side in sides) + " "
              + " ".join(f"{g['gsplat'] / g['auto ' + side]:>{max(10, len(side) + 7)}.2f}" for side in sides)
              + f" {exact:>9} {same}")

if __name__ == "__main__":
    main()
