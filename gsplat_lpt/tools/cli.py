"""The `gsplat-lpt` command line (also `python -m gsplat_lpt`): bench, analyze, render, calibrate.

    gsplat-lpt bench                                  # built-in driving scene, all modes, GPU
    gsplat-lpt bench --scene ladder --fixed-grid --out results/
    gsplat-lpt bench --scene probes --fixed-grid       # frames built unlike the ladder (gsplat_lpt.scenes.probes)
    gsplat-lpt bench --variant 2dgs                   # 2DGS: rasterize_to_pixels_2dgs, rasterization_2dgs
    gsplat-lpt bench --variant 3dgut --camera-model fisheye   # 3DGUT: eval3d blend, rasterization(with_ut=...)
    gsplat-lpt analyze --scene street extreme         # CPU: tile statistics and simulated schedules
    gsplat-lpt analyze --scene path/to/ckpt_29999_rank0.pt --colmap path/to/dataset
    gsplat-lpt render --scene bonsai.splat --path orbit --frames 60 --video orbit.mp4
    gsplat-lpt calibrate --scene ladder                # fit lambda, beta of Eq. (6) on this GPU

    torchrun --standalone --nproc-per-node 2 -m gsplat_lpt render ...   # frames spread over two GPUs

Scenes are built-in names (`gsplat_lpt.scenes.scene_names()`, or `ladder` for all of them), probe scenes
(`gsplat_lpt.scenes.probe_names()`, or `probes` for all of them) or files
(`gsplat_lpt.scenes.loaders`). The output folder is checked before any work; analyze writes only with
--out. Exit status: 0 done, 1 bad input or an unusable output place (one line says what; nothing is
written), 2 a GPU is needed and this machine has none.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Literal, Optional, Sequence, Tuple

from ..config import LPTConfig
from ..constants import MAX_TILE_SIZE  # tile_size^2 threads per CTA, gsplat's kernels and ours: at most 1024
from .distributed import DistributedError, Workers
from .output import OutputError, check_output_file, prepare_output

EXIT_BAD_INPUT = 1
EXIT_NEEDS_GPU = 2
LADDER_ALIASES = ("ladder", "all")
PROBE_ALIASES = ("probes",)
# What each command writes into its --out folder (checked before any work; analyze adds one histogram per scene).
BENCH_FILES = ("bench.csv", "bench.json", "speedup_vs_imbalance.png", "frame_times.png")
ANALYZE_FILES = ("analyze.csv", "analyze.json", "simulated_speedups.png")
_CONFIG_DEFAULTS = LPTConfig()


@dataclass
class SceneOptions:
    scene: Tuple[str, ...] = ("street",)
    """Built-in scene names (balanced mild moderate street severe extreme rig foliage mixed veil fog; `ladder` = all
    of them), probe scenes built unlike the ladder (trained-like floaters closeup cluster-o0.01 band rig-720p ...;
    `probes` = all of them) or files: gsplat checkpoint (.pt or its result folder), INRIA .ply, antimatter15 .splat,
    gsplat test .npz."""
    width: Optional[int] = None
    """Image width; unset: 1920 for built-in and cameraless scenes (a probe's own size: rig-720p 1280,
    trained-like-4k 3840), the COLMAP/.npz camera size otherwise."""
    height: Optional[int] = None
    """Image height (see width)."""
    frames: Optional[int] = None
    """Frames per scene; unset: 3 per built-in scene, 2 for the rig and the probes, 8 views for loaded scenes."""
    seed: int = 0
    """Seed of the built-in scenes."""
    scale: float = 1.0
    """Multiplier of the built-in scenes' Gaussian counts."""
    colmap: Optional[Path] = None
    """COLMAP dataset folder (sparse/0 with cameras/images .bin or .txt) giving the cameras of a loaded scene."""
    downscale: float = 1.0
    """Divide the COLMAP image size by this (simple_trainer's data_factor)."""
    normalize_world: Optional[bool] = None
    """Normalise COLMAP poses as gsplat's trainer does; unset: yes for checkpoints, no for .ply/.splat."""
    tile_size: int = 16
    """Tile size in pixels (gsplat's tile_size), 1 to 32: render, bench and calibrate render with it, analyze
    counts tiles of it."""


@dataclass
class PolicyOptions:
    chunk_count: int = _CONFIG_DEFAULTS.chunk_count
    """k: depth chunks per chunked tile in the `chunk` and `fixed` modes."""
    heavy_ratio: float = _CONFIG_DEFAULTS.heavy_ratio
    """rho of the `fixed` mode: the heaviest fraction of the non-empty tiles is chunked."""
    overhead_lambda: float = _CONFIG_DEFAULTS.overhead_lambda
    """lambda of Eq. (6), per-chunk overhead (calibrated on an H200; `gsplat-lpt calibrate` fits it to your GPU)."""
    imbalance_beta: float = _CONFIG_DEFAULTS.imbalance_beta
    """beta of Eq. (6), weight of the longest work unit (calibrated with lambda)."""
    min_gain: float = _CONFIG_DEFAULTS.min_gain
    """epsilon: chunk only if the model predicts at least this relative gain."""
    heavy_item_pace: float = _CONFIG_DEFAULTS.heavy_item_pace
    """sigma: the heaviest tile's time per unit of cost against the mean CTA's; frames whose heaviest tile at
    that pace ends within min_gain of the mean work per CTA are not chunked."""
    chunked_cost_floor: float = _CONFIG_DEFAULTS.chunked_cost_floor
    """`auto` chunks only tiles whose predicted cost is above this multiple of the mean work per CTA that the
    chunked tiles leave to LPT (default 1 / sigma, about 1.43), unless chunking that deep lets the LPT kernel run
    two pixels per thread; 0: Eq. (6) alone chooses (on an H200 the default took mild and mixed frames from 2.6-4.1%
    above the best fixed schedule to within 1.5%)."""

    def lpt_config(self, mode: str = "auto") -> LPTConfig:
        """The LPTConfig these options ask for (ValueError naming the LPTConfig field when one is out of range)."""
        return LPTConfig(mode=mode, chunk_count=self.chunk_count, heavy_ratio=self.heavy_ratio,
                         overhead_lambda=self.overhead_lambda, imbalance_beta=self.imbalance_beta,
                         min_gain=self.min_gain, heavy_item_pace=self.heavy_item_pace,
                         chunked_cost_floor=self.chunked_cost_floor)


@dataclass
class Bench(SceneOptions, PolicyOptions):
    """Time the alpha-blending stage per frame: vanilla (gsplat), lpt, chunk, auto (+ a fixed (rho, k) grid),
    CUDA events, warm-up, median of >= 20 interleaved runs; PSNR vs vanilla; the end-to-end render call.
    For 3DGS, 2DGS or 3DGUT (--variant). GPU only."""

    out: Path = Path("gsplat-lpt-bench")
    """Output folder: bench.csv, bench.json, speedup_vs_imbalance.png, frame_times.png."""
    modes: Tuple[Literal["vanilla", "lpt", "chunk", "auto"], ...] = ("vanilla", "lpt", "chunk", "auto")
    """Modes to time (vanilla is always timed: it is the reference)."""
    fixed_grid: bool = False
    """Also time fixed (rho, k) for rho in {0.001, 0.01, 0.05} x k in {4, 8, 16} (the `best fixed` column)."""
    repeats: int = 21
    """Timed runs per mode (median reported; at least 20)."""
    warmup: int = 3
    """Untimed runs per mode first."""
    end_to_end: bool = True
    """Also time the variant's whole render call (rasterization, rasterization_2dgs) with backend cuda vs lpt."""
    variant: Literal["3dgs", "2dgs", "3dgut"] = "3dgs"
    """Gaussian variant timed, gsplat's blend call vs ours (end to end: its render call). 3dgs: rasterize_to_pixels
    (rasterization); 2dgs: rasterize_to_pixels_2dgs, RGB + depth, the Gaussians as surfels (rasterization_2dgs);
    3dgut: rasterize_to_pixels_eval3d (rasterization with with_ut=True, with_eval3d=True)."""
    camera_model: Literal["pinhole", "fisheye"] = "pinhole"
    """fisheye: the scene's intrinsics read as an OpenCV fisheye camera without distortion (equidistant, wider
    view); 3dgs and 3dgut only (gsplat's 2DGS projection is pinhole only)."""


@dataclass
class Analyze(SceneOptions, PolicyOptions):
    """Tile workload statistics per frame on the CPU (exact per-tile counts as gsplat's isect_tiles gives them):
    max/min, imbalance vs K, histogram, the policy's (h, k), simulated makespans of vanilla / LPT / chunked."""

    out: Optional[Path] = None
    """Output folder for analyze.csv, analyze.json and PNG plots; unset: print the tables, write nothing."""
    concurrent_ctas: int = 132 * 6
    """K: concurrent CTAs of the persistent kernel = SMs x resident CTAs per SM (H200: 132 x 6; your GPU's K is
    meta["lpt"]["concurrent_ctas"] of any frame rendered with backend="lpt")."""
    tile_overhead: float = 16.0
    """Fixed cost of one work item in the simulation, in Gaussian-equivalent units."""


@dataclass
class Render(SceneOptions, PolicyOptions):
    """Render a scene's camera path to PNGs (and a video) with gsplat.rasterization(backend=...). GPU only."""

    out: Path = Path("gsplat-lpt-render")
    """Output folder for frame_XXXX.png and render.json."""
    backend: Literal["lpt", "cuda"] = "lpt"
    """lpt: our backend; cuda: gsplat's own."""
    mode: Literal["auto", "lpt", "chunk", "fixed", "vanilla"] = "auto"
    """Schedule of the lpt backend (LPTConfig.mode; fixed uses --heavy-ratio and --chunk-count)."""
    path: Literal["scene", "orbit", "flythrough"] = "scene"
    """Camera path: the scene's own cameras (COLMAP / built-in / .npz), an orbit, or a fly-through."""
    video: Optional[Path] = None
    """Also write a video (.mp4 needs imageio-ffmpeg; .gif always works)."""
    fps: int = 10
    """Video frame rate."""
    background: Optional[Tuple[float, float, float]] = None
    """Background colour, RGB in [0, 1]; unset: black."""


@dataclass
class Calibrate(SceneOptions):
    """Calibrate lambda and beta of the cost model (Eq. 6) on this GPU: per frame, time LPT-only and forced
    (h, k) schedules (h = 1, 2, 4, ... x k in {2, 4, 8, 16}); keep the (lambda, beta) whose policy loses least
    to the fastest measured schedule. GPU only. Prints the LPTConfig to use; writes calibration.json."""

    scene: Tuple[str, ...] = ("ladder",)
    """Scenes to calibrate on (`ladder`: the built-in ladder, balanced to extreme)."""
    out: Path = Path("gsplat-lpt-calibration")
    """Output folder for calibration.json (every measurement and the whole (lambda, beta) grid)."""
    repeats: int = 11
    """Timed runs per schedule (median)."""
    max_chunked_tiles: int = 512
    """Largest h measured."""


# ----------------------------------------------------------------------------------------------
# Scene resolution (validates before anything heavy or written)
# ----------------------------------------------------------------------------------------------


class BadInput(ValueError):
    """A one-line user error."""


def expand_scene_names(names: Sequence[str]) -> List[str]:
    from ..scenes import probe_names, scene_names

    expanded: List[str] = []
    for name in names:
        expanded += scene_names() if name in LADDER_ALIASES else probe_names() if name in PROBE_ALIASES else [name]
    return list(dict.fromkeys(expanded))


def check_scene_names(names: Sequence[str]) -> None:
    """Each entry is a built-in name or an existing path."""
    from ..scenes import ACCEPTED_FORMATS
    from ..scenes import probe_names, scene_names

    if not names:
        raise BadInput(f"no scene given; expected {ACCEPTED_FORMATS}")
    for name in names:
        if name not in scene_names() and name not in probe_names() and not Path(name).exists():
            raise BadInput(f"unknown scene {name!r}: not a built-in scene ({', '.join(scene_names())}, or 'ladder'), "
                           f"not a probe scene ({', '.join(probe_names())}, or 'probes') and no such file or folder")


def check_common(options: SceneOptions) -> None:
    from ..scenes import check_resolution

    if (options.width is None) != (options.height is None):
        raise BadInput("give both --width and --height, or neither")
    if options.width is not None:
        try:
            check_resolution(options.width, options.height)
        except ValueError as error:
            raise BadInput(str(error)) from None
    if options.frames is not None and options.frames < 1:
        raise BadInput(f"--frames must be >= 1, got {options.frames}")
    if not options.scale > 0:
        raise BadInput(f"--scale must be > 0, got {options.scale}")
    if options.downscale <= 0:
        raise BadInput(f"--downscale must be > 0, got {options.downscale}")
    if options.tile_size < 1 or options.tile_size > MAX_TILE_SIZE:
        raise BadInput(f"--tile-size must be in [1, {MAX_TILE_SIZE}] (a tile is one CTA of one thread per pixel, "
                       f"at most {MAX_TILE_SIZE}x{MAX_TILE_SIZE} = {MAX_TILE_SIZE ** 2}), got {options.tile_size}")
    if options.colmap is not None and not Path(options.colmap).is_dir():
        raise BadInput(f"--colmap {options.colmap}: no such folder")


def load(name: str, options: SceneOptions):
    """A built-in scene or a file, with the requested size and frame count (errors become BadInput)."""
    from ..scenes import load_scene
    from ..scenes import DEFAULT_HEIGHT, DEFAULT_WIDTH, make_probe_scene, make_scene, probe_names, scene_names

    try:
        if name in scene_names():
            return make_scene(name, seed=options.seed, width=options.width or DEFAULT_WIDTH,
                              height=options.height or DEFAULT_HEIGHT, scale=options.scale, frames=options.frames)
        if name in probe_names():
            return make_probe_scene(name, seed=options.seed, width=options.width, height=options.height,
                                    scale=options.scale, frames=options.frames)
        return load_scene(name, colmap=options.colmap, width=options.width, height=options.height,
                          frames=options.frames or 8, downscale=options.downscale,
                          normalize_world=options.normalize_world)
    except ValueError as error:  # SceneLoadError, resolution, generator arguments
        raise BadInput(str(error)) from None


# LPTConfig fields the command line sets, and their flags (errors name the flag the user typed).
FLAG_OF_FIELD = {"chunk_count": "--chunk-count", "heavy_ratio": "--heavy-ratio", "overhead_lambda": "--overhead-lambda",
                 "imbalance_beta": "--imbalance-beta", "min_gain": "--min-gain", "mode": "--mode",
                 "heavy_item_pace": "--heavy-item-pace", "chunked_cost_floor": "--chunked-cost-floor"}


def flag_names(message: str) -> str:
    """LPTConfig's messages in the command line's words: `LPTConfig.chunk_count` -> `--chunk-count`."""
    message = re.sub(r"LPTConfig\.(\w+)", lambda match: FLAG_OF_FIELD.get(match.group(1), match.group(0)), message)
    for field_name, flag in FLAG_OF_FIELD.items():
        message = re.sub(rf"(?<![\w.-]){field_name}\b", flag, message)
    return message


def policy_config(options: PolicyOptions, mode: str = "auto"):
    try:
        return options.lpt_config(mode)
    except ValueError as error:
        raise BadInput(flag_names(str(error))) from None


# ----------------------------------------------------------------------------------------------
# Commands
# ----------------------------------------------------------------------------------------------


def run_bench(args: Bench, console, workers: Workers) -> int:
    from . import bench

    names = expand_scene_names(args.scene)
    check_scene_names(names)
    check_common(args)
    if args.repeats < 20:
        raise BadInput(f"--repeats must be >= 20 (median of at least 20 runs), got {args.repeats}")
    if args.warmup < 0:
        raise BadInput(f"--warmup must be >= 0, got {args.warmup}")
    check_variant_options(args.variant, args.camera_model)
    config = policy_config(args, "auto")
    bench.require_cuda()
    place = workers.on_main(lambda: prepare_output(args.out, BENCH_FILES), errors=(OutputError,))
    with place.cleanup_on_error() if workers.is_main else contextlib.nullcontext():
        return _bench(args, names, config, console, workers)


def check_variant_options(variant: str, camera_model: str) -> None:
    """--variant and --camera-model together (one line naming both when the variant lacks that camera)."""
    from .frame import check_variant

    try:
        check_variant(variant, camera_model)
    except ValueError as error:
        raise BadInput(f"--variant {variant} --camera-model {camera_model}: {error}") from None


def variant_title(variant: str, camera_model: str = "pinhole") -> str:
    """"3DGS: gsplat's rasterize_to_pixels vs ours" (and the camera model when it is not pinhole)."""
    from .frame import VARIANT_SPECS

    spec = VARIANT_SPECS[variant]
    return (f"{spec.title}: gsplat's {spec.blend_function} vs ours"
            + (f", {camera_model} cameras" if camera_model != "pinhole" else ""))


def _bench(args: Bench, names: Sequence[str], config, console, workers: Workers) -> int:
    from . import bench, plots
    from .frame import VARIANT_SPECS

    scenes = [load(name, args) for name in names]
    title = variant_title(args.variant, args.camera_model)
    results = []
    for scene in scenes:
        console.print(f"[bold]{scene.summary()}[/bold], {title}"
                      + (f" on {workers.world_size} GPUs" if workers.is_distributed else ""))
        mine = bench.bench_scene(scene, modes=args.modes, repeats=args.repeats, warmup=args.warmup, config=config,
                                 fixed_grid=bench.DEFAULT_FIXED_GRID if args.fixed_grid else None,
                                 end_to_end=args.end_to_end, frames=workers.shard(range(scene.num_frames)),
                                 progress=workers.is_main, variant=args.variant, camera_model=args.camera_model,
                                 tile_size=args.tile_size)
        results += workers.gather(mine) or []  # rank 0: every frame, in order
    if not workers.is_main:
        return 0
    console.print(bench.results_table(results, title=f"alpha blending per frame (median ms), {title}"))
    spec = VARIANT_SPECS[args.variant]
    meta = {"command": " ".join(sys.argv), "scenes": [s.summary() for s in scenes], "config": repr(config),
            "tile_size": args.tile_size, "repeats": args.repeats, "warmup": args.warmup,
            "processes": workers.world_size, "variant": args.variant, "camera_model": args.camera_model,
            "blend_function": spec.blend_function, "render_call": spec.render_call, **bench.environment_facts()}
    paths = bench.write_results(results, args.out, meta)
    note = ", ".join(part for part in (meta.get("gpu"), title) if part)
    paths["speedup_plot"] = plots.plot_speedup_vs_imbalance(results, Path(args.out) / "speedup_vs_imbalance.png",
                                                            note=note)
    paths["times_plot"] = plots.plot_frame_times(results, Path(args.out) / "frame_times.png", note=note)
    for summary in bench.summarize(results):
        console.print(f"  {summary['band']:>15}: {summary['frames']} frame(s), auto "
                      f"{summary.get('auto_mean_speedup', float('nan')):.2f}x mean, "
                      f"{summary.get('auto_min_speedup', float('nan')):.2f}x worst")
    console.print("wrote " + ", ".join(paths.values()))
    return 0


def run_analyze(args: Analyze, console) -> int:
    names = expand_scene_names(args.scene)
    check_scene_names(names)
    check_common(args)
    if args.concurrent_ctas < 1:
        raise BadInput(f"--concurrent-ctas must be >= 1, got {args.concurrent_ctas}")
    config = policy_config(args, "auto")
    if args.out is None:
        return _analyze(args, names, config, console, None)
    place = prepare_output(args.out, ANALYZE_FILES)
    with place.cleanup_on_error():
        return _analyze(args, names, config, console, place)


def _analyze(args: Analyze, names: Sequence[str], config, console, place) -> int:
    from . import analyze, plots

    scenes = [load(name, args) for name in names]
    if place is not None:
        place.check_names([f"{scene.name}_histogram.png" for scene in scenes])
    all_stats = []
    for scene in scenes:
        stats, _ = analyze.analyze_scene(scene, args.concurrent_ctas, config, tile_size=args.tile_size, progress=True)
        console.print(analyze.stats_table(stats, title=f"{scene.summary()}, K = {args.concurrent_ctas}"))
        all_stats.append((scene, stats))
    if args.out is not None:
        out = Path(args.out)
        flat = []
        for scene, stats in all_stats:
            for s in stats:
                flat.append(s)
        meta = {"command": " ".join(sys.argv), "scenes": [scene.summary() for scene, _ in all_stats],
                "concurrent_ctas": args.concurrent_ctas, "tile_size": args.tile_size, "config": repr(config),
                "frames_per_scene": [len(stats) for _, stats in all_stats]}
        paths = analyze.write_stats(flat, out, meta)
        for scene, stats in all_stats:
            paths[f"{scene.name}_histogram"] = plots.plot_workload_histogram(
                stats, out / f"{scene.name}_histogram.png", title=f"Tile workloads: {scene.summary()}")
        paths["simulated"] = plots.plot_simulated_speedups(flat, out / "simulated_speedups.png",
                                                           note=f"K = {args.concurrent_ctas}")
        console.print("wrote " + ", ".join(paths.values()))
    return 0


def run_render(args: Render, console, workers: Workers) -> int:
    import torch

    from .render import camera_path, check_video_path, output_names

    names = expand_scene_names(args.scene)
    if len(names) != 1:
        raise BadInput(f"render takes one scene, got {len(names)}")
    check_scene_names(names)
    check_common(args)
    try:
        check_video_path(args.video)
    except ValueError as error:
        raise BadInput(str(error)) from None
    if args.background is not None and not all(0.0 <= c <= 1.0 for c in args.background):
        raise BadInput(f"--background values must be in [0, 1], got {args.background}")
    config = policy_config(args, args.mode)
    if not torch.cuda.is_available():
        from .bench import NeedsGPU

        raise NeedsGPU("gsplat-lpt render needs a CUDA GPU (none found); `gsplat-lpt analyze` runs on the CPU")
    with contextlib.ExitStack() as cleanups:
        place = workers.on_main(lambda: prepare_output(args.out), errors=(OutputError,))
        if workers.is_main:
            cleanups.enter_context(place.cleanup_on_error())
        if args.video is not None:
            video_place = workers.on_main(lambda: check_output_file(args.video, "--video"), errors=(OutputError,))
            if workers.is_main:
                cleanups.enter_context(video_place.cleanup_on_error())
        scene = camera_path(load(names[0], args), args.path, args.frames or 8)  # every process needs the scene
        workers.on_main(lambda: place.check_names(output_names(scene)), errors=(OutputError,))
        return _render(args, scene, config, console, workers)


def _render(args: Render, scene, config, console, workers: Workers) -> int:
    from .render import render_scene

    result = render_scene(scene, args.out, backend=args.backend, config=config, video=args.video,
                          background=args.background, fps=args.fps, progress=workers.is_main, workers=workers,
                          tile_size=args.tile_size)
    console.print(f"wrote {len(result['images'])} file(s) to {args.out}" + (f" and {args.video}" if args.video else "")
                  + (f"; {workers.world_size} GPUs rendered" if workers.is_distributed else ""))
    return 0


def run_calibrate(args: Calibrate, console) -> int:
    from . import bench

    names = expand_scene_names(args.scene)
    check_scene_names(names)
    check_common(args)
    if args.repeats < 5:
        raise BadInput(f"--repeats must be >= 5, got {args.repeats}")
    bench.require_cuda("calibrate")
    place = prepare_output(args.out, ["calibration.json"])
    with place.cleanup_on_error():
        return _calibrate(args, names, console)


def _calibrate(args: Calibrate, names: Sequence[str], console) -> int:
    from . import bench, calibrate

    scenes = [load(name, args) for name in names]
    measurements = []
    for scene in scenes:
        device_scene = scene.to("cuda")
        for frame in bench._track(list(range(scene.num_frames)), f"calibrate {scene.name}", True):
            inputs, _, _ = bench.project_scene_frame(device_scene, frame, tile_size=args.tile_size)
            measurements.append(calibrate.measure_frame(f"{scene.name}/{frame}", inputs, args.repeats,
                                                        args.max_chunked_tiles))
    result = calibrate.fit(measurements)
    calibrate.save(measurements, result, Path(args.out) / "calibration.json", tile_size=args.tile_size)
    for m in measurements:
        choice = calibrate.policy_choice(m, result["overhead_lambda"], result["imbalance_beta"])
        chosen = m.lpt_ms if choice is None else m.schedule_ms[choice]
        best = min(m.schedule_ms, key=m.schedule_ms.get)
        at_run_time = "" if m.auto_ms is None else f", auto at run time {m.auto_choice} {m.auto_ms:.3f} ms"
        console.print(f"  {m.name:>14}: lpt {m.lpt_ms:.3f} ms, best {best} {m.schedule_ms[best]:.3f} ms, "
                      f"policy {choice or '(0, 1)'} {chosen:.3f} ms{at_run_time}")
    console.print(f"LPTConfig(overhead_lambda={result['overhead_lambda']}, imbalance_beta={result['imbalance_beta']})"
                  f"  # policy within {100 * (result['mean_slowdown_vs_best'] - 1):.1f}% of the best measured schedule"
                  f" (geometric mean over {len(measurements)} frames); wrote {Path(args.out) / 'calibration.json'}")
    return 0


def parse(argv: Sequence[str]):
    """The options of one command line (a Bench, Analyze, Render or Calibrate); exits 2 on a parse error."""
    import tyro

    return tyro.extras.subcommand_cli_from_dict(
        {"bench": Bench, "analyze": Analyze, "render": Render, "calibrate": Calibrate},
        args=list(argv),
        description="gsplat-lpt: LPT tile scheduling and depth chunking for gsplat's alpha blending.",
    )


def main(argv: Optional[Sequence[str]] = None) -> int:
    from rich.console import Console

    args = parse(sys.argv[1:] if argv is None else argv)
    # Logs (stdout redirected to a file) get wide tables instead of rich's 80-column default.
    console = Console() if sys.stdout.isatty() else Console(width=160)
    error_console = Console(stderr=True)
    from .bench import NeedsGPU

    workers = None
    try:
        if isinstance(args, (Analyze, Calibrate)):
            if int(os.environ.get("WORLD_SIZE", "1")) > 1:
                raise BadInput(f"gsplat-lpt {'analyze' if isinstance(args, Analyze) else 'calibrate'} runs in one "
                               "process; start it without torchrun (torchrun spreads bench and render over GPUs)")
            return run_analyze(args, console) if isinstance(args, Analyze) else run_calibrate(args, console)
        workers = Workers.from_environment()  # torchrun: one process per GPU; otherwise just this one
        if not workers.is_main:  # rank 0 alone prints (the others stop with the same status)
            console, error_console = Console(quiet=True), Console(stderr=True, quiet=True)
        if isinstance(args, Bench):
            return run_bench(args, console, workers)
        return run_render(args, console, workers)
    except NeedsGPU as error:
        error_console.print(str(error), highlight=False, markup=False, soft_wrap=True)
        return EXIT_NEEDS_GPU
    except (BadInput, OutputError, DistributedError) as error:
        error_console.print(f"error: {error}", highlight=False, markup=False, soft_wrap=True)
        return EXIT_BAD_INPUT
    finally:
        if workers is not None:
            workers.close()


if __name__ == "__main__":
    sys.exit(main())
