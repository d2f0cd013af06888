"""An OmniRe / drivestudio driving scene rendered by gsplat's own kernel and by gsplat-lpt, frame by frame.

    # SYNTHETIC street (generated, saved as a drivestudio checkpoint + scene folder, loaded back), front camera:
    python examples/omnire_driving.py --frames 20 --out out/omnire
    # the same with a 3-camera rig batched into one rasterization call per frame:
    python examples/omnire_driving.py --frames 10 --cameras 0 1 2 --out out/omnire_rig
    # a trained OmniRe checkpoint with its processed scene folder (cameras are not in the checkpoint):
    python examples/omnire_driving.py --checkpoint logs/waymo/023/checkpoint_final.pth \
        --scene-dir data/waymo/processed/training/023 --dataset waymo --cameras 0 1 2
    # the same scene with 3DGUT (unscented projection, 3D evaluation), also through fisheye cameras:
    python examples/omnire_driving.py --variant 3dgut --camera-model fisheye --frames 10 --out out/omnire_3dgut
    # 2DGS: a SYNTHETIC street of surfels (a checkpoint must hold surfels: two scales per Gaussian)
    python examples/omnire_driving.py --variant 2dgs --frames 10 --out out/omnire_2dgs

Each frame is composed as drivestudio does it (every node's activated world-space Gaussians, colours from SH
per node, all nodes in ONE gsplat render call with drivestudio's arguments, sky in 1 - alpha, affine
colour transform) and rendered with backend="cuda" (gsplat unchanged) and backend="lpt". Reported per frame:
alpha-blending time (gsplat's blend function vs ours, same inputs), end-to-end render time, speedups, tile
imbalance, the chosen (h, k) and PSNR between the backends. Writes PNG frames, a video, and
`results.csv` / `results.json` under --out. Needs a CUDA GPU.

Gaussian variants (--variant): 3dgs (default) renders with `gsplat.rasterization` and times
`rasterize_to_pixels`, as drivestudio trains and renders OmniRe. 3dgut renders the same 3D Gaussians with
`rasterization(..., with_ut=True, with_eval3d=True)` and times `rasterize_to_pixels_eval3d`; it is not the
renderer the checkpoint was trained with, so its images differ from those of 3dgs, while gsplat and
gsplat-lpt are compared on identical inputs. 2dgs renders with `rasterization_2dgs` and times
`rasterize_to_pixels_2dgs`; it needs surfels, so a checkpoint is refused unless every Gaussian node stores two
scales per Gaussian (as 2DGS trains them): flattening trained 3D Gaussians into surfels would render a
different scene. Without a checkpoint, --variant 2dgs generates the SYNTHETIC street as surfels (each
Gaussian flattened along its shortest axis). --camera-model fisheye reads the cameras' intrinsics as an OpenCV
fisheye without distortion (equidistant: wider than the pinhole view; the sky follows the same model); 3dgs
and 3dgut have it, gsplat's 2DGS is pinhole only (refused).

Several GPUs of one host: `torchrun --nproc-per-node N examples/omnire_driving.py ...` gives each GPU every
N-th frame (each frame timed on its own GPU); rank 0 gathers the rows and frames, prints and writes.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, List, Literal, Mapping, Optional, Tuple

import torch
import tyro

_REPO_ROOT = Path(__file__).resolve().parents[1]
if (_REPO_ROOT / "gsplat_lpt").is_dir() and str(_REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(_REPO_ROOT))  # run from a checkout without `pip install -e .`

import omnire  # noqa: E402  (examples/omnire/, beside this script)
from gsplat_lpt.tools import frame as lpt_frame  # noqa: E402
from gsplat_lpt.tools import output  # noqa: E402
from gsplat_lpt.tools.distributed import Workers  # noqa: E402
from gsplat_lpt.tools.metrics import psnr  # noqa: E402

RESULT_FILES = ("results.csv", "results.json")

SizePreset = Literal["waymo", "pandaset", "nuscenes", "argoverse", "nuplan", "1080p"]


@dataclass
class Args:
    checkpoint: Optional[Path] = None
    """drivestudio checkpoint_final.pth; without it a SYNTHETIC street is generated, saved and loaded back."""
    scene_dir: Optional[Path] = None
    """processed drivestudio scene folder (intrinsics/, extrinsics/, ego_pose/); needed with --checkpoint."""
    dataset: Literal["waymo", "pandaset", "nuscenes", "argoverse", "nuplan"] = "waymo"
    """camera layout of --scene-dir (and the default render size)."""
    size: Optional[SizePreset] = None
    """HxW: waymo 640x960, pandaset 540x960, nuscenes 300x533, argoverse 682x516, nuplan 360x640, 1080p 1080x1920."""
    cameras: Tuple[int, ...] = (0,)
    """camera ids rendered together in one batched call (0 = front; the SYNTHETIC rig has 0..5)."""
    frames: int = 20
    """frames to render (and to generate for the SYNTHETIC scene)."""
    start_timestep: int = 0
    """first timestep of --scene-dir, as in the training config (frame f of the checkpoint = this + f)."""
    out: Path = Path("out/omnire")
    """output folder: frames/, video, results.csv, results.json (and synthetic_street/ when generated)."""
    mode: Literal["lpt", "chunk", "fixed", "auto"] = "auto"
    """gsplat-lpt schedule compared against gsplat's kernel."""
    variant: Literal["3dgs", "2dgs", "3dgut"] = "3dgs"
    """3dgs: rasterization (drivestudio's renderer); 3dgut: the same 3D Gaussians with with_ut=True,
    with_eval3d=True; 2dgs: rasterization_2dgs, only for surfels (a checkpoint of 3D Gaussians is refused; without
    --checkpoint the SYNTHETIC street is generated as surfels)."""
    camera_model: Literal["pinhole", "fisheye"] = "pinhole"
    """fisheye: the cameras' intrinsics read as an OpenCV fisheye without distortion (equidistant); 3dgs and
    3dgut only (gsplat's 2DGS is pinhole only)."""
    repeats: int = 21
    """timed runs per variant and frame (median reported; variants interleaved)."""
    warmup: int = 3
    """untimed runs per variant and frame before timing."""
    sky: Literal["checkpoint", "constant", "none"] = "checkpoint"
    """sky behind the Gaussians: the checkpoint's Sky module, a constant colour, or black."""
    save_frames: bool = True
    """write one PNG per frame (cameras side by side, gsplat-lpt render)."""
    video: bool = True
    """write an mp4 (needs imageio-ffmpeg; a GIF otherwise)."""
    density: float = 1.0
    """SYNTHETIC scene: Gaussian count multiplier (1.0 is about 1.2M Gaussians)."""
    seed: int = 0
    """SYNTHETIC scene: random seed."""
    synthetic_dir: Optional[Path] = None
    """SYNTHETIC scene: folder for its checkpoint (~280 MB at density 1) and cameras; default <out>/synthetic_street."""
    write_synthetic: bool = False
    """on a machine without CUDA, still write the SYNTHETIC checkpoint and scene folder before exiting."""


def parse_args(argv: Optional[List[str]] = None) -> Args:
    return tyro.cli(Args, args=argv, description=__doc__.split("\n\n")[0])


def render_size(args: Args) -> Tuple[int, int]:
    return omnire.RENDER_SIZES[args.size or args.dataset]


def validate(args: Args) -> None:
    """Exit with one clear line for arguments that cannot work, before anything is written."""
    if args.checkpoint is not None:
        if not args.checkpoint.is_file():
            raise SystemExit(f"error: --checkpoint {args.checkpoint} does not exist")
        if args.scene_dir is None:
            raise SystemExit("error: --checkpoint needs --scene-dir (drivestudio keeps cameras in the processed "
                             "scene folder: intrinsics/, extrinsics/, ego_pose/)")
        if not args.scene_dir.is_dir():
            raise SystemExit(f"error: --scene-dir {args.scene_dir} does not exist")
    elif args.scene_dir is not None:
        raise SystemExit("error: --scene-dir is only used with --checkpoint (the SYNTHETIC scene writes its own)")
    if args.frames < 1 or args.repeats < 1 or args.warmup < 0:
        raise SystemExit("error: --frames and --repeats must be >= 1, --warmup >= 0")
    if not args.cameras or len(set(args.cameras)) != len(args.cameras):
        raise SystemExit(f"error: --cameras must list distinct camera ids, got {args.cameras}")
    if args.checkpoint is None:
        synthetic_cameras = omnire.SyntheticStreetConfig().num_cameras
        if any(cam < 0 or cam >= synthetic_cameras for cam in args.cameras):
            raise SystemExit(f"error: the SYNTHETIC rig has cameras 0..{synthetic_cameras - 1}, got {args.cameras}")
    if not args.density > 0:
        raise SystemExit("error: --density must be > 0")
    try:
        lpt_frame.check_variant(args.variant, args.camera_model)
    except ValueError as error:
        raise SystemExit(f"error: --variant {args.variant} --camera-model {args.camera_model}: {error}") from None


def write_synthetic(args: Args) -> Tuple[Path, Path]:
    config = omnire.SyntheticStreetConfig(num_frames=args.frames, seed=args.seed, density=args.density,
                                          surfels=args.variant == "2dgs")
    return omnire.write_synthetic_scene(args.synthetic_dir or args.out / "synthetic_street", config)


def load_scene(args: Args, workers: Optional[Workers] = None) -> Tuple[omnire.DrivingScene, omnire.CameraRig]:
    """The checkpoint (given, or the SYNTHETIC one just written by rank 0) and its cameras, through the same loader."""
    workers = workers or Workers()
    if args.checkpoint is None:
        started = time.perf_counter()
        checkpoint, scene_dir = workers.on_main(lambda: write_synthetic(args))  # the others wait, then read it
        if workers.is_main:
            print(f"{omnire.SYNTHETIC_LABEL}: wrote {checkpoint} and {scene_dir}/ in "
                  f"{time.perf_counter() - started:.1f} s")
        dataset = "waymo"  # the synthetic camera folder uses the Waymo layout
    else:
        checkpoint, scene_dir, dataset = args.checkpoint, args.scene_dir, args.dataset
    scene = omnire.load_checkpoint(checkpoint, sky=args.sky)
    check_scene_variant(scene, args.variant)
    frames = min(args.frames, scene.num_frames or args.frames)
    rig = omnire.load_camera_rig(scene_dir, dataset, args.cameras, num_frames=frames,
                                 start_timestep=args.start_timestep, render_size=render_size(args))
    return scene, rig


def check_scene_variant(scene: omnire.DrivingScene, variant: str) -> None:
    """2dgs renders surfels: refuse (ValueError, one line) a checkpoint whose nodes hold 3D Gaussians."""
    flat = scene.non_surfel_nodes()
    if variant == "2dgs" and flat:
        raise ValueError(f"--variant 2dgs renders surfels (two scales per Gaussian, as 2DGS trains them), and the "
                         f"checkpoint's {', '.join(flat)} hold 3D Gaussians (three scales): as surfels they would "
                         f"render a different scene; use --variant 3dgs or 3dgut (without --checkpoint, --variant "
                         f"2dgs generates a SYNTHETIC street of surfels)")


def variant_title(variant: str) -> str:
    """"2DGS: gsplat's rasterize_to_pixels_2dgs vs gsplat-lpt"."""
    spec = lpt_frame.VARIANT_SPECS[variant]
    return f"{spec.title}: gsplat's {spec.blend_function} vs gsplat-lpt"


def to_uint8_strip(images: torch.Tensor):
    """[C, H, W, 3] in [0, 1] -> one uint8 image with the cameras side by side."""
    strip = torch.cat(list(images.clamp(0.0, 1.0)), dim=1)  # [H, C*W, 3]
    return (strip * 255.0 + 0.5).to(torch.uint8).cpu().numpy()


@torch.no_grad()
def measure_frame(args: Args, scene: omnire.DrivingScene, rig: omnire.CameraRig, frame: int, config,
                  rank: int = 0) -> Tuple[Dict[str, Any], Any]:
    """One frame on this process's GPU: both backends rendered and timed. Returns (row, uint8 strip of the cameras)."""
    from gsplat_lpt.tools.timing import median_ms, time_interleaved

    camtoworlds = rig.camtoworlds[frame]  # [C, 4, 4]
    gaussians = omnire.compose_frame(scene, frame, camtoworlds)
    viewmats = torch.linalg.inv(camtoworlds)  # [C, 4, 4]
    options = omnire.rasterize_kwargs(args.variant)  # drivestudio's arguments (render_mode "RGB+ED")

    def rasterize(backend: str, lpt_config=None):  # the variant's render call: (colors, alphas, meta)
        return lpt_frame.colors_alphas_meta(lpt_frame.render_frame(
            args.variant, gaussians.means, gaussians.quats, gaussians.scales, gaussians.opacities, gaussians.colors,
            viewmats, rig.Ks, rig.width, rig.height, backend=backend, config=lpt_config,
            camera_model=args.camera_model, **options))

    colors_cuda, alphas_cuda, meta_cuda = rasterize("cuda")  # [C, H, W, 4], [C, H, W, 1]
    colors_lpt, alphas_lpt, meta_lpt = rasterize("lpt", config)
    blend = lpt_frame.blend_inputs_from_meta(
        args.variant, meta_cuda, gaussians.colors, render_mode=options["render_mode"], means=gaussians.means,
        quats=gaussians.quats, scales=gaussians.scales, viewmats=viewmats, Ks=rig.Ks, camera_model=args.camera_model)
    blend_vanilla = blend.blend("vanilla")
    *blend_lpt, report = blend.blend_with_stats(args.mode, config)
    stats = report if isinstance(report, Mapping) else meta_lpt.get("lpt", {})
    times = time_interleaved(
        {
            "blend_vanilla": lambda: blend.blend("vanilla"),
            "blend_lpt": lambda: blend.blend(args.mode, config),
            "e2e_cuda": lambda: rasterize("cuda"),
            "e2e_lpt": lambda: rasterize("lpt", config),
        },
        repeats=args.repeats, warmup=args.warmup,
    )
    ms = {name: median_ms(samples) for name, samples in times.items()}
    sky_rgb = omnire.sky_colors(scene, camtoworlds, rig.Ks, rig.width, rig.height,
                                args.camera_model)  # [C, H, W, 3] or None
    image_lpt = omnire.composite_image(colors_lpt, alphas_lpt, sky_rgb, scene.affine)  # [C, H, W, 3]
    row = {
        "scene": omnire.SYNTHETIC_LABEL if scene.synthetic else "checkpoint",
        "frame": frame,
        "variant": args.variant,
        "camera_model": args.camera_model,
        "timestep": args.start_timestep + frame,
        "cameras": len(rig.camera_ids),
        "gaussians": gaussians.count,
        "visible_instances": gaussians.visible_instances,
        "intersections": int(meta_cuda["flatten_ids"].numel()),
        "imbalance": float(stats.get("imbalance", float("nan"))),
        "concurrent_ctas": stats.get("concurrent_ctas"),
        "chunked_tiles": stats.get("chunked_tiles"),
        "chunk_count": stats.get("chunk_count"),
        "blend_vanilla_ms": ms["blend_vanilla"],
        "blend_lpt_ms": ms["blend_lpt"],
        "blend_speedup": ms["blend_vanilla"] / ms["blend_lpt"],
        "e2e_cuda_ms": ms["e2e_cuda"],
        "e2e_lpt_ms": ms["e2e_lpt"],
        "e2e_speedup": ms["e2e_cuda"] / ms["e2e_lpt"],
        # RGB channels only: the depth channel (metres) would swamp a peak-1 PSNR.
        "psnr_e2e_db": psnr(colors_lpt[..., :3], colors_cuda[..., :3]),
        "psnr_blend_db": psnr(blend_lpt[0][..., :3], blend_vanilla[0][..., :3]),
        "max_abs_diff_alpha": float((alphas_lpt - alphas_cuda).abs().max()),
        "rank": rank,  # the process (GPU) that rendered and timed the frame
    }
    return row, to_uint8_strip(image_lpt)


def render_and_time(args: Args, scene: omnire.DrivingScene, rig: omnire.CameraRig, console,
                    workers: Optional[Workers] = None) -> List[Dict[str, Any]]:
    """Every frame, dealt over the processes' GPUs; rank 0 writes frames and video and returns the rows in order."""
    import imageio.v2 as imageio

    from gsplat_lpt import LPTConfig

    workers = workers or Workers()
    config = LPTConfig(mode=args.mode)
    frames_dir = args.out / "frames"
    if args.save_frames and workers.is_main:
        frames_dir.mkdir(parents=True, exist_ok=True)
    rows: List[Dict[str, Any]] = []
    video_frames = []
    work = lambda frame: measure_frame(args, scene, rig, frame, config, workers.rank)  # noqa: E731
    for frame, (row, strip) in workers.imap(range(rig.num_frames), work):  # rank 0 only
        if args.save_frames:
            with output.replacing(frames_dir / f"{frame:03d}.png") as temporary:
                imageio.imwrite(temporary, strip)
        if args.video:
            video_frames.append(strip)
        rows.append(row)
        console.print(
            f"frame {frame + 1}/{rig.num_frames}: blend {row['blend_vanilla_ms']:.2f} -> {row['blend_lpt_ms']:.2f} ms "
            f"({row['blend_speedup']:.2f}x), end-to-end {row['e2e_cuda_ms']:.2f} -> {row['e2e_lpt_ms']:.2f} ms "
            f"({row['e2e_speedup']:.2f}x), imbalance {row['imbalance']:.1f}"
            + (f", GPU {row['rank']}" if workers.is_distributed else ""))
    if args.video and video_frames:
        write_video(args, video_frames, console, synthetic=scene.synthetic)
    return rows


def write_video(args: Args, frames, console, synthetic: bool) -> None:
    import imageio.v2 as imageio

    stem = args.out / (f"{omnire.SYNTHETIC_LABEL.lower()}_street_lpt" if synthetic else "render_lpt")
    try:
        with output.replacing(stem.with_suffix(".mp4")) as temporary:
            imageio.mimwrite(temporary, frames, fps=10, macro_block_size=1)
        console.print(f"video: {stem.with_suffix('.mp4')}")
    except Exception:  # no ffmpeg backend (imageio-ffmpeg not installed): a GIF needs only Pillow
        with output.replacing(stem.with_suffix(".gif")) as temporary:
            imageio.mimwrite(temporary, frames, duration=100, loop=0)
        console.print(f"video: {stem.with_suffix('.gif')} (install imageio-ffmpeg for mp4)")


def summarise(rows: List[Dict[str, Any]]) -> Dict[str, Any]:
    def total(key: str) -> float:
        return sum(row[key] for row in rows)

    imbalances = [row["imbalance"] for row in rows if not math.isnan(row["imbalance"])]
    return {
        "frames": len(rows),
        "blend_vanilla_ms": total("blend_vanilla_ms"),
        "blend_lpt_ms": total("blend_lpt_ms"),
        "blend_speedup": total("blend_vanilla_ms") / total("blend_lpt_ms"),
        "blend_speedup_max": max(row["blend_speedup"] for row in rows),
        "e2e_cuda_ms": total("e2e_cuda_ms"),
        "e2e_lpt_ms": total("e2e_lpt_ms"),
        "e2e_speedup": total("e2e_cuda_ms") / total("e2e_lpt_ms"),
        "imbalance_mean": sum(imbalances) / len(imbalances) if imbalances else float("nan"),
        "imbalance_max": max(imbalances) if imbalances else float("nan"),
        "psnr_e2e_min_db": min(row["psnr_e2e_db"] for row in rows),
        "psnr_blend_min_db": min(row["psnr_blend_db"] for row in rows),
    }


def print_table(rows: List[Dict[str, Any]], totals: Dict[str, Any], title: str, console) -> None:
    from rich.table import Table

    def db(value: float) -> str:
        return "exact" if math.isinf(value) else f"{value:.1f}"

    table = Table(title=title, title_justify="left")
    for header in ("frame", "Gaussians", "isects", "imbalance", "(h, k)", "blend gsplat ms", "blend lpt ms",
                   "blend x", "e2e cuda ms", "e2e lpt ms", "e2e x", "PSNR dB"):  # blend = alpha blending only
        table.add_column(header, justify="right")
    for row in rows:
        table.add_row(
            str(row["frame"]), f"{row['gaussians']:,}", f"{row['intersections']:,}", f"{row['imbalance']:.1f}",
            f"({row['chunked_tiles']}, {row['chunk_count']})", f"{row['blend_vanilla_ms']:.2f}",
            f"{row['blend_lpt_ms']:.2f}", f"{row['blend_speedup']:.2f}", f"{row['e2e_cuda_ms']:.2f}",
            f"{row['e2e_lpt_ms']:.2f}", f"{row['e2e_speedup']:.2f}", db(row["psnr_e2e_db"]),
        )
    table.add_section()
    table.add_row(
        "total", "", "", f"{totals['imbalance_mean']:.1f} avg", "", f"{totals['blend_vanilla_ms']:.1f}",
        f"{totals['blend_lpt_ms']:.1f}", f"{totals['blend_speedup']:.2f}", f"{totals['e2e_cuda_ms']:.1f}",
        f"{totals['e2e_lpt_ms']:.1f}", f"{totals['e2e_speedup']:.2f}", db(totals["psnr_e2e_min_db"]) + " min",
    )
    console.print(table)


def write_results(args: Args, scene: omnire.DrivingScene, rig: omnire.CameraRig, rows, totals,
                  processes: int = 1) -> None:
    import gsplat

    import gsplat_lpt

    args.out.mkdir(parents=True, exist_ok=True)
    output.write_csv(args.out / "results.csv", rows)
    output.write_json(args.out / "results.json", {  # strict JSON: PSNR inf is written as "inf"
        "scene": scene.label,
        "synthetic": scene.synthetic,
        "notes": scene.notes,
        "device": torch.cuda.get_device_name(),
        "processes": processes,
        "gsplat": gsplat.__version__,
        "gsplat_lpt": gsplat_lpt.__version__,
        "render_size_hw": [rig.height, rig.width],
        "camera_ids": list(rig.camera_ids),
        "args": {key: (str(value) if isinstance(value, Path) else value) for key, value in asdict(args).items()},
        "variant": args.variant,
        "blend_function": lpt_frame.VARIANT_SPECS[args.variant].blend_function,
        "render_call": lpt_frame.VARIANT_SPECS[args.variant].render_call,
        "camera_model": args.camera_model,
        "timing": "CUDA events, median of --repeats runs after --warmup, the four calls (blend and end-to-end, "
                  "each backend) interleaved",
        "totals": totals,
        "frames": rows,
    })


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    validate(args)
    if not torch.cuda.is_available():
        written = ""
        if args.write_synthetic and args.checkpoint is None:
            checkpoint, scene_dir = write_synthetic(args)
            written = f" ({omnire.SYNTHETIC_LABEL} scene written to {checkpoint} and {scene_dir}/)"
        print("omnire_driving.py needs a CUDA GPU: gsplat's projection and both alpha-blending backends run on it"
              + written)
        return 2

    with Workers.from_environment() as workers:  # torchrun: one process per GPU; otherwise just this one
        return run(args, workers)


def run(args: Args, workers: Workers) -> int:
    import shutil

    from rich.console import Console

    # Logs are usually captured (no terminal, 80 columns): keep the 12-column table on one line per frame.
    console = Console(width=max(150, shutil.get_terminal_size((150, 40)).columns), quiet=not workers.is_main)
    try:  # the output folder first, before any work; every process stops if rank 0 cannot write there
        workers.on_main(lambda: output.prepare_output(args.out, RESULT_FILES), errors=(output.OutputError,))
        scene, rig = load_scene(args, workers)
    except (FileNotFoundError, ValueError) as error:  # includes OutputError and omnire.CheckpointFormatError
        if workers.is_main:
            print(f"error: {error}", file=sys.stderr)
        return 1
    console.print(f"scene: {scene.label}; {scene.total_gaussians():,} Gaussians in "
                  f"{', '.join(node.name for node in scene.nodes)}; {rig.num_frames} frames; cameras "
                  f"{list(rig.camera_ids)} at {rig.height}x{rig.width}"
                  + (f" ({args.camera_model})" if args.camera_model != "pinhole" else "")
                  + f"; {variant_title(args.variant)}; mode {args.mode}"
                  + (f"; {workers.world_size} GPUs" if workers.is_distributed else ""))
    for note in scene.notes:
        console.print(f"  note: {note}")
    scene, rig = scene.to(workers.device), rig.to(workers.device)
    rows = render_and_time(args, scene, rig, console, workers)
    if not workers.is_main:
        return 0
    totals = summarise(rows)
    title = (f"{scene.label} | {torch.cuda.get_device_name()} | {rig.height}x{rig.width} x {len(rig.camera_ids)} "
             f"{args.camera_model} camera(s) | {variant_title(args.variant)} ({args.mode})")
    print_table(rows, totals, title, console)
    write_results(args, scene, rig, rows, totals, workers.world_size)
    console.print(f"results: {args.out / 'results.csv'}, {args.out / 'results.json'}"
                  + (f", frames in {args.out / 'frames'}/" if args.save_frames else ""))
    if scene.synthetic:
        console.print(f"[bold]{omnire.SYNTHETIC_LABEL}[/bold] scene: generated street, not recorded data.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
