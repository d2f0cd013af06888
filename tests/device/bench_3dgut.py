"""3DGUT benchmark on a GPU: gsplat's eval3d blend (`rasterize_to_pixels_eval3d`, its own kernel) against ours
in modes lpt and auto, on a balanced frame and on a driving rig seen through fisheye cameras (faint structure
stacked in depth at the vanishing point), with rolling shutter as a moving car has it; with --ladder, also the
imbalanced ladder scenes of bench_core.py through one pinhole camera each (their heavy tiles chunked in auto),
and with --street several recipes, each scene's fisheye rig.

Projection and timing are the library's, as `gsplat-lpt bench --variant 3dgut` runs them
(`gsplat_lpt.tools.frame.project_frame_3dgut`, gsplat's unscented-transform projection;
`gsplat_lpt.tools.bench.measure_blend`: the whole rasterize call timed with CUDA events, warm-up, median of
--runs, the three interleaved in one process); this script adds the distorted, rolling-shutter fisheye rig
and the largest difference from gsplat. The first call of ours is timed separately: it compiles our kernels
with nvcc (or loads them from CuPy's cache).

    python3 tests/device/bench_3dgut.py [--width 1920 --height 1080 --scale 1.0 --runs 21 --out DIR]
        [--ladder street severe extreme veil fog] [--street street severe] [--grad]
        [--fixed RHO,K ...] [--lambdas LAMBDA ...]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from gsplat_lpt import LPTConfig  # noqa: E402
from gsplat_lpt.scenes import make_scene  # noqa: E402
from gsplat_lpt.scenes.scene import rig_cameras  # noqa: E402
from gsplat_lpt.tools.bench import measure_blend  # noqa: E402  (the timing `gsplat-lpt bench --variant 3dgut` runs)
from gsplat_lpt.tools.frame import project_frame_3dgut  # noqa: E402


def balanced_frame(width, height, scale):
    scene = make_scene("balanced", frames=1, width=width, height=height, scale=scale).to("cuda")
    viewmats, Ks = scene.frame_cameras(0)
    return "balanced room, pinhole", project_frame_3dgut(scene.means, scene.quats, scene.scales, scene.opacities,
                                                         scene.colors, viewmats, Ks, width, height)


def ladder_frame(recipe, width, height, scale):
    """A ladder scene of bench_core.py (its camera of frame 0) through 3DGUT's pinhole projection."""
    scene = make_scene(recipe, frames=1, width=width, height=height, scale=scale).to("cuda")
    viewmats, Ks = scene.frame_cameras(0)
    return f"ladder {recipe}, pinhole", project_frame_3dgut(scene.means, scene.quats, scene.scales, scene.opacities,
                                                          scene.colors, viewmats, Ks, width, height)


def fisheye_rig_frame(recipe, width, height, scale, rolling=True):
    """Three fisheye cameras of a car on the street scene (front and front corners), ~190 degrees across the
    diagonal, mild OpenCV fisheye distortion; with rolling shutter, the car moves 0.3 m during the readout."""
    from gsplat.cuda._wrapper import RollingShutterType

    scene = make_scene(recipe, frames=1, width=width, height=height, scale=scale).to("cuda")
    eye = (0.0, 0.0, 1.6)
    viewmats, _ = rig_cameras(eye, 0.0, width, height, yaws_deg=(0.0, 60.0, -60.0))
    focal = 0.5 * math.hypot(width, height) / math.radians(95.0)
    K = torch.tensor([[focal, 0.0, width / 2], [0.0, focal, height / 2], [0.0, 0.0, 1.0]])
    C = viewmats.shape[0]
    camera = dict(radial_coeffs=torch.tensor([0.02, -0.004, 0.0005, 0.0]).repeat(C, 1).cuda())
    if rolling:
        moved, _ = rig_cameras((0.0, 0.3, 1.6), 0.0, width, height, yaws_deg=(0.0, 60.0, -60.0))
        camera.update(rolling_shutter=RollingShutterType.ROLLING_TOP_TO_BOTTOM, viewmats_rs=moved.cuda())
    label = f"{recipe} scene, 3-camera fisheye rig" + (", rolling shutter" if rolling else "")
    return label, project_frame_3dgut(scene.means, scene.quats, scene.scales, scene.opacities, scene.colors,
                                      viewmats.cuda(), K.repeat(C, 1, 1).cuda(), width, height,
                                      camera_model="fisheye", camera=camera)


def with_gradients(label, frame):
    """The frame as a training step renders it: colours and opacities require gradients, so that gsplat's call and
    ours keep what the backward reads (ours: last_ids; nothing chunked, auto as lpt)."""
    return label + ", gradients", dataclasses.replace(
        frame, colors=frame.colors.detach().clone().requires_grad_(True),
        opacities=frame.opacities.detach().clone().requires_grad_(True))


def measure(label, frame, runs, pixels=(), fixed=(), lambdas=()):
    configs = {"lpt": ("lpt", LPTConfig(mode="lpt")), "auto": ("auto", LPTConfig(mode="auto")),
               **{f"auto-lambda{lam:g}": ("auto", LPTConfig(mode="auto", overhead_lambda=lam)) for lam in lambdas},
               **{f"lpt-{p}px": ("lpt", LPTConfig(mode="lpt", pixels_per_thread=p)) for p in pixels},
               **{f"fixed({rho},{k})": ("fixed", LPTConfig(mode="fixed", heavy_ratio=rho, chunk_count=k))
                  for rho, k in fixed}}
    measured = measure_blend(frame, configs, repeats=runs, compare=lambda outputs, reference: {
        "max_diff": float((outputs[0] - reference[0]).abs().max())})
    row = {"frame": label, "images": int(frame.viewmats.shape[0]), "gaussians": int(frame.means.shape[0]),
           "intersections": int(frame.flatten_ids.numel())}
    for name in configs:
        report = measured.reports[name]
        row[f"{name}_max_diff"] = measured.extras[name]["max_diff"]
        row[f"{name}_psnr"] = measured.psnr_db[name]
        row[f"{name}_chunks"] = (report["chunked_tiles"], report["chunk_count"])
        row["imbalance"] = report["imbalance"]
    row.update({f"{'gsplat' if name == 'vanilla' else name}_ms": ms for name, ms in measured.blend_ms.items()})
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--width", type=int, default=1920)
    parser.add_argument("--height", type=int, default=1080)
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies every Gaussian count of the scenes")
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--street", nargs="+", default=["street"],
                        help="scene recipes of the fisheye rig frames (mild .. extreme), each with and without rolling "
                             "shutter")
    parser.add_argument("--ladder", nargs="*", default=[],
                        help="ladder scenes (street, severe, extreme, veil, fog, ...) through one pinhole camera each")
    parser.add_argument("--out", type=Path, help="folder for bench_3dgut.json")
    parser.add_argument("--grad", action="store_true",
                        help="every frame as a training step renders it (inputs that require gradients: the builds "
                             "with last_ids, nothing chunked)")
    parser.add_argument("--fixed", nargs="*", default=[], metavar="RHO,K",
                        help="also mode fixed with these (heavy_ratio, chunk_count), e.g. 0.005,32")
    parser.add_argument("--pixels", nargs="*", type=int, default=[],
                        help="also lpt with this many pixels per thread forced (lpt-1px, lpt-2px)")
    parser.add_argument("--lambdas", nargs="*", type=float, default=[],
                        help="also auto with these overhead_lambda values (Eq. 6's per-chunk overhead)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("bench_3dgut needs a CUDA device")

    frames = [balanced_frame(args.width, args.height, args.scale)]
    for recipe in args.street:
        frames += [fisheye_rig_frame(recipe, args.width, args.height, args.scale, rolling=False),
                   fisheye_rig_frame(recipe, args.width, args.height, args.scale, rolling=True)]
    frames += [ladder_frame(recipe, args.width, args.height, args.scale) for recipe in args.ladder]
    if args.grad:
        frames = [with_gradients(label, frame) for label, frame in frames]
    # first call: compiles the 3DGUT kernels with nvcc (CuPy caches them on disk for later processes)
    torch.cuda.synchronize()
    start = time.perf_counter()
    frames[0][1].blend("lpt")
    torch.cuda.synchronize()
    first_call_s = time.perf_counter() - start

    fixed = [(float(rho), int(k)) for rho, k in (item.split(",") for item in args.fixed)]
    rows = [measure(label, frame, args.runs, args.pixels, fixed, args.lambdas) for label, frame in frames]
    print(f"\n3DGUT blend (rasterize_to_pixels_eval3d), {args.width}x{args.height}, median of {args.runs} runs, "
          f"{torch.cuda.get_device_name()}")
    print(f"first call of ours (nvcc compile or CuPy cache): {first_call_s:.1f} s\n")
    header = (f"{'frame':52s} {'imgs':>4s} {'isects':>10s} {'imbal':>6s} {'gsplat ms':>9s} {'lpt ms':>7s} {'x':>5s} "
              f"{'auto ms':>7s} {'x':>5s} {'(h,k)':>9s} {'lpt diff':>8s} {'auto dB':>7s}")
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['frame']:52s} {r['images']:4d} {r['intersections']:10,d} {r['imbalance']:6.1f} "
              f"{r['gsplat_ms']:9.2f} {r['lpt_ms']:7.2f} {r['gsplat_ms'] / r['lpt_ms']:5.2f} "
              f"{r['auto_ms']:7.2f} {r['gsplat_ms'] / r['auto_ms']:5.2f} {str(r['auto_chunks']):>9s} "
              f"{r['lpt_max_diff']:8.1e} {min(r['auto_psnr'], 999):7.1f}"
              + "".join(f"  {p}px {r['gsplat_ms'] / r[f'lpt-{p}px_ms']:.2f}x (diff {r[f'lpt-{p}px_max_diff']:.1e})"
                        for p in args.pixels)
              + "".join(f"  fixed({rho},{k}) {r['gsplat_ms'] / r[f'fixed({rho},{k})_ms']:.2f}x {r[f'fixed({rho},{k})_chunks']}"
                        for rho, k in fixed)
              + "".join(f"  auto-lambda{lam:g} {r['gsplat_ms'] / r[f'auto-lambda{lam:g}_ms']:.2f}x "
                        f"{r[f'auto-lambda{lam:g}_chunks']}" for lam in args.lambdas))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "bench_3dgut.json").write_text(json.dumps(
            {"device": torch.cuda.get_device_name(), "width": args.width, "height": args.height, "scale": args.scale,
             "runs": args.runs, "first_call_s": first_call_s, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
