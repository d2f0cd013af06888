"""3DGUT benchmark on a GPU: gsplat's eval3d blend (`rasterize_to_pixels_eval3d`, its own kernel) against ours
in modes lpt and auto, on a balanced frame and on a driving rig seen through fisheye cameras (imbalanced: faint
structure stacked in depth at the vanishing point), with rolling shutter as a moving car has it.

The whole rasterize call is timed (CUDA events, warm-up, median of --runs, the three interleaved in one
process), on inputs projected once by gsplat's unscented-transform projection. The first call of ours is
timed separately: it compiles our kernels with nvcc (or loads them from CuPy's cache).

    python3 tests/device/bench_3dgut.py [--width 1920 --height 1080 --scale 1.0 --runs 21 --out DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import psnr, time_interleaved  # noqa: E402  (the 3DGS benchmark's, shared)
from gsplat_lpt import LPTConfig  # noqa: E402
from gsplat_lpt.hook import original  # noqa: E402
from gsplat_lpt.scenes import make_scene  # noqa: E402
from gsplat_lpt.scenes.scene import rig_cameras  # noqa: E402
from gsplat_lpt.variants.gaussian3dgut import rasterize_to_pixels_eval3d  # noqa: E402


def project(scene_means, quats, scales, opacities, colors, viewmats, Ks, width, height, camera, tile_size=16):
    """gsplat's unscented projection and tiling: the arguments of rasterize_to_pixels_eval3d for one frame."""
    from gsplat.cuda._wrapper import fully_fused_projection_with_ut, isect_offset_encode, isect_tiles

    C, N = viewmats.shape[0], scene_means.shape[0]
    radii, means2d, depths, _, _ = fully_fused_projection_with_ut(
        scene_means, quats, scales, opacities, viewmats, Ks, width, height, **camera)
    tile_width, tile_height = math.ceil(width / tile_size), math.ceil(height / tile_size)
    _, isect_ids, flatten_ids = isect_tiles(means2d, radii, depths, tile_size, tile_width, tile_height)
    isect_offsets = isect_offset_encode(isect_ids, C, tile_width, tile_height)
    return dict(means=scene_means, quats=quats, scales=scales, colors=colors[None].expand(C, N, 3).contiguous(),
                opacities=opacities[None].expand(C, N).contiguous(), viewmats=viewmats, Ks=Ks, image_width=width,
                image_height=height, tile_size=tile_size, isect_offsets=isect_offsets, flatten_ids=flatten_ids,
                **camera)


def balanced_frame(width, height, scale):
    scene = make_scene("balanced", frames=1, width=width, height=height, scale=scale).to("cuda")
    viewmats, Ks = scene.frame_cameras(0)
    return "balanced room, pinhole", project(scene.means, scene.quats, scene.scales, scene.opacities, scene.colors,
                                             viewmats, Ks, width, height, dict(camera_model="pinhole"))


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
    camera = dict(camera_model="fisheye",
                  radial_coeffs=torch.tensor([0.02, -0.004, 0.0005, 0.0]).repeat(C, 1).cuda())
    if rolling:
        moved, _ = rig_cameras((0.0, 0.3, 1.6), 0.0, width, height, yaws_deg=(0.0, 60.0, -60.0))
        camera.update(rolling_shutter=RollingShutterType.ROLLING_TOP_TO_BOTTOM, viewmats_rs=moved.cuda())
    label = f"{recipe} scene, 3-camera fisheye rig" + (", rolling shutter" if rolling else "")
    return label, project(scene.means, scene.quats, scene.scales, scene.opacities, scene.colors, viewmats.cuda(),
                          K.repeat(C, 1, 1).cuda(), width, height, camera)


def measure(label, frame, runs):
    gsplat_blend = original("rasterize_to_pixels_eval3d")
    configs = {"lpt": LPTConfig(mode="lpt"), "auto": LPTConfig(mode="auto")}
    reference, ref_alphas = gsplat_blend(**frame)
    row = {"frame": label, "images": int(frame["viewmats"].shape[0]), "gaussians": int(frame["means"].shape[0]),
           "intersections": int(frame["flatten_ids"].numel())}
    for name, config in configs.items():
        for _ in range(3):  # auto: grown partial buffers and saturation feedback from the frames before
            colors, alphas, report = rasterize_to_pixels_eval3d(**frame, config=config, return_stats=True)
        row[f"{name}_max_diff"] = float((colors - reference).abs().max())
        row[f"{name}_psnr"] = psnr(colors, reference)
        row[f"{name}_chunks"] = (report["chunked_tiles"], report["chunk_count"])
        row["imbalance"] = report["imbalance"]
    calls = {"gsplat": lambda: gsplat_blend(**frame)}
    calls.update({name: (lambda config=config: rasterize_to_pixels_eval3d(**frame, config=config))
                  for name, config in configs.items()})
    row.update({f"{name}_ms": ms for name, ms in time_interleaved(calls, runs).items()})
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--width", type=int, default=1920)
    parser.add_argument("--height", type=int, default=1080)
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies every Gaussian count of the scenes")
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--street", default="street", help="street recipe of the rig frame (mild .. extreme)")
    parser.add_argument("--out", type=Path, help="folder for bench_3dgut.json")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("bench_3dgut needs a CUDA device")

    frames = [balanced_frame(args.width, args.height, args.scale),
              fisheye_rig_frame(args.street, args.width, args.height, args.scale, rolling=False),
              fisheye_rig_frame(args.street, args.width, args.height, args.scale, rolling=True)]
    # first call: compiles the 3DGUT kernels with nvcc (CuPy caches them on disk for later processes)
    torch.cuda.synchronize()
    start = time.perf_counter()
    rasterize_to_pixels_eval3d(**frames[0][1], config=LPTConfig(mode="lpt"))
    torch.cuda.synchronize()
    first_call_s = time.perf_counter() - start

    rows = [measure(label, frame, args.runs) for label, frame in frames]
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
              f"{r['lpt_max_diff']:8.1e} {min(r['auto_psnr'], 999):7.1f}")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "bench_3dgut.json").write_text(json.dumps(
            {"device": torch.cuda.get_device_name(), "width": args.width, "height": args.height, "scale": args.scale,
             "runs": args.runs, "first_call_s": first_call_s, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
