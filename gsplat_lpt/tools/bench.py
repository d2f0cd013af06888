"""Benchmark of the alpha-blending stage per frame, for each Gaussian variant (3DGS, 2DGS, 3DGUT).

For every frame of a scene: gsplat's projection and tiling of the variant once
(`frame.project_variant_frame`), then the whole blending call of each mode (vanilla = gsplat's kernel:
`rasterize_to_pixels`, `rasterize_to_pixels_2dgs` or `rasterize_to_pixels_eval3d`; lpt, chunk, auto, and
a small grid of fixed (rho, k) when asked: ours) timed with CUDA events after warm-up, median of >= 20
runs, all modes interleaved in one process (`measure_blend`, `timing.time_interleaved`). Also per frame:
imbalance and the policy's (h, k) from the schedule report (real K of this GPU), PSNR of every mode
against vanilla, and the end-to-end render call (`gsplat.rasterization`, `rasterization_2dgs`, or
`rasterization(with_ut=True, with_eval3d=True)`) with backend="cuda" vs "lpt" (what the speedup is worth
for the whole frame).

Only `bench_scene` and `measure_blend` need a GPU; tables, CSV/JSON and the summary work on any list of
`FrameResult`.
"""

from __future__ import annotations

import contextlib
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import torch

from ..config import LPTConfig
from . import output
from .metrics import psnr

BENCH_MODES: Tuple[str, ...] = ("vanilla", "lpt", "chunk", "auto")
# Small (rho, k) grid for the "best fixed" column: fraction of non-empty tiles chunked, chunks per tile.
DEFAULT_FIXED_GRID: Tuple[Tuple[float, int], ...] = tuple(
    (rho, k) for rho in (0.001, 0.01, 0.05) for k in (4, 8, 16)
)
# Imbalance bands the summary reports (README, "Results").
BANDS: Tuple[Tuple[str, float, float], ...] = (
    ("balanced (< 1)", 0.0, 1.0),
    ("1 to 1.5", 1.0, 1.5),
    ("1.5 to 3", 1.5, 3.0),
    ("3 to 5", 3.0, 5.0),
    (">= 5", 5.0, math.inf),
)


class NeedsGPU(RuntimeError):
    """Raised by `bench_scene` on a machine without CUDA."""


def fixed_label(rho: float, k: int) -> str:
    return f"fixed:rho={rho:g},k={k}"


def parse_fixed_label(label: str) -> Tuple[float, int]:
    rho, k = label.split(":", 1)[1].split(",")
    return float(rho.split("=")[1]), int(k.split("=")[1])


@dataclass
class FrameResult:
    """One frame of one scene: times (median ms), PSNR vs vanilla (dB), schedule facts."""

    scene: str
    frame: int
    images: int
    width: int
    height: int
    num_gaussians: int
    total_workload: int  # n_isects
    max_workload: int
    imbalance: float  # N_1 / (N_total / K), K of this GPU
    concurrent_ctas: int  # K
    chunked_tiles: int  # h chosen by auto
    chunk_count: int  # k chosen by auto
    blend_ms: Dict[str, float] = field(default_factory=dict)  # mode or fixed label -> median ms
    psnr_db: Dict[str, float] = field(default_factory=dict)  # mode or fixed label -> dB vs vanilla (inf: identical)
    end_to_end_ms: Dict[str, float] = field(default_factory=dict)  # "cuda" / "lpt" -> median ms of rasterization()
    repeats: int = 0
    chunking_disabled_reason: Optional[str] = None
    variant: str = "3dgs"  # frame.VARIANT_NAMES
    camera_model: str = "pinhole"
    tile_size: int = 16

    def speedup(self, mode: str) -> float:
        """Vanilla blend time over this mode's (> 1: faster than gsplat)."""
        if mode not in self.blend_ms or "vanilla" not in self.blend_ms or self.blend_ms[mode] <= 0:
            return float("nan")
        return self.blend_ms["vanilla"] / self.blend_ms[mode]

    @property
    def fixed_labels(self) -> List[str]:
        return [label for label in self.blend_ms if label.startswith("fixed:")]

    @property
    def best_fixed(self) -> Optional[str]:
        labels = self.fixed_labels
        return min(labels, key=lambda label: self.blend_ms[label]) if labels else None

    @property
    def end_to_end_speedup(self) -> float:
        if self.end_to_end_ms.get("lpt", 0) <= 0 or "cuda" not in self.end_to_end_ms:
            return float("nan")
        return self.end_to_end_ms["cuda"] / self.end_to_end_ms["lpt"]

    def row(self) -> Dict[str, Any]:
        """Flat record for CSV (one column per mode)."""
        record: Dict[str, Any] = {
            "scene": self.scene, "frame": self.frame, "images": self.images, "variant": self.variant,
            "camera_model": self.camera_model, "tile_size": self.tile_size, "width": self.width,
            "height": self.height, "num_gaussians": self.num_gaussians, "total_workload": self.total_workload,
            "max_workload": self.max_workload, "imbalance": round(self.imbalance, 4),
            "concurrent_ctas": self.concurrent_ctas, "chunked_tiles": self.chunked_tiles,
            "chunk_count": self.chunk_count,
        }
        for mode in BENCH_MODES:
            record[f"{mode}_ms"] = _round(self.blend_ms.get(mode))
        for mode in BENCH_MODES[1:]:
            record[f"{mode}_speedup"] = _round(self.speedup(mode))
            record[f"{mode}_psnr_db"] = _psnr_text(self.psnr_db.get(mode))
        best = self.best_fixed
        record["best_fixed"] = best or ""
        record["best_fixed_ms"] = _round(self.blend_ms.get(best)) if best else ""
        record["auto_vs_best_fixed"] = _round(self.blend_ms["auto"] / self.blend_ms[best]) if best and "auto" in self.blend_ms else ""
        record["rasterization_cuda_ms"] = _round(self.end_to_end_ms.get("cuda"))
        record["rasterization_lpt_ms"] = _round(self.end_to_end_ms.get("lpt"))
        record["rasterization_speedup"] = _round(self.end_to_end_speedup)
        record["repeats"] = self.repeats
        record["chunking_disabled_reason"] = self.chunking_disabled_reason or ""
        return record

    def to_json(self) -> Dict[str, Any]:
        data = asdict(self)
        data["psnr_db"] = {mode: _psnr_text(value) for mode, value in self.psnr_db.items()}
        return data

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> "FrameResult":
        data = dict(data)
        data["psnr_db"] = {mode: float(value) for mode, value in data.get("psnr_db", {}).items()}
        return cls(**data)


def _round(value: Optional[float], digits: int = 4) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return round(float(value), digits)


def _psnr_text(value: Optional[float]) -> Any:
    """PSNR for files: 'inf' for identical images (JSON has no infinity)."""
    if value is None:
        return ""
    return "inf" if math.isinf(value) else round(float(value), 2)


# ----------------------------------------------------------------------------------------------
# Measurement (GPU)
# ----------------------------------------------------------------------------------------------


def require_cuda(command: str = "bench") -> None:
    if not torch.cuda.is_available():
        raise NeedsGPU(f"gsplat-lpt {command} needs a CUDA GPU (none found); `gsplat-lpt analyze` simulates the "
                       "schedules on the CPU")


def project_scene_frame(device_scene, frame: int, variant: str = "3dgs", camera_model: str = "pinhole",
                        tile_size: int = 16):
    """One frame of a scene (already on the GPU) as the variant's blend inputs in tiles of `tile_size` px, with
    its cameras."""
    from . import frame as frames

    viewmats, Ks = device_scene.frame_cameras(frame)
    inputs = frames.project_variant_frame(variant, device_scene.means, device_scene.quats, device_scene.scales,
                                          device_scene.opacities, device_scene.colors, viewmats, Ks,
                                          device_scene.width, device_scene.height, tile_size=tile_size,
                                          sh_degree=device_scene.sh_degree, camera_model=camera_model)
    return inputs, viewmats, Ks


@dataclass
class BlendMeasurement:
    """One frame's blending stage: median ms per label (vanilla and ours), PSNR vs vanilla, schedule reports."""

    blend_ms: Dict[str, float]
    psnr_db: Dict[str, float]
    reports: Dict[str, Mapping[str, Any]]
    extras: Dict[str, Dict[str, Any]]  # label -> what `compare` returned


def _cuda_tensor(outputs) -> Optional[torch.Tensor]:
    """A call's first output where it is a CUDA tensor, else None."""
    first = outputs[0] if isinstance(outputs, (tuple, list)) else outputs
    return first if isinstance(first, torch.Tensor) and first.is_cuda else None


def _finished(outputs) -> None:
    """Waits for the GPU work of a call's outputs (nothing for CPU tensors)."""
    first = _cuda_tensor(outputs)
    if first is not None:
        torch.cuda.synchronize(first.device)


def measure_blend(
    inputs,  # frame.BlendInputs, Blend2DGS or Blend3DGUT (anything with blend / blend_with_stats)
    configs: Mapping[str, Tuple[str, LPTConfig]],  # label -> (mode, config) of ours
    repeats: int = 21,
    warmup: int = 3,
    image: Callable[[Any], torch.Tensor] = lambda outputs: outputs[0],
    settle: int = 2,
    compare: Optional[Callable[[Any, Any], Dict[str, Any]]] = None,
) -> BlendMeasurement:
    """gsplat's kernel ("vanilla") and each of our configs on one frame: outputs and schedule report of each
    config after `settle` untimed calls, each finished before the next (the first auto frames size the partial
    buffers, learn where items stop and, after frames that chunked nothing, take the chunk kernel again: what a
    finished frame tells the next call), PSNR of `image(outputs)` against gsplat's, `compare(outputs, reference)`
    when given; then all of them timed interleaved (CUDA events, `warmup` untimed rounds, median of `repeats`).
    Each config runs on a stream of its own, hence with a workspace of its own, as when a user renders in that
    mode alone: on one stream, each call would plan from the stop depths and status the config before it left."""
    from .timing import median_ms, time_interleaved

    reference = inputs.blend("vanilla")
    streams = {label: torch.cuda.Stream() for label in configs} if _cuda_tensor(reference) is not None else {}
    _finished(reference)  # (the inputs, made on the current stream, are ready for the others)
    psnrs: Dict[str, float] = {}
    reports: Dict[str, Mapping[str, Any]] = {}
    extras: Dict[str, Dict[str, Any]] = {}
    for label, (mode, config) in configs.items():
        with torch.cuda.stream(streams[label]) if streams else contextlib.nullcontext():
            for _ in range(settle):
                _finished(inputs.blend(mode, config))
            *outputs, report = inputs.blend_with_stats(mode, config)
            _finished(outputs)
        psnrs[label] = psnr(image(outputs), image(reference))
        reports[label] = report
        if compare is not None:
            extras[label] = compare(outputs, reference)
        del outputs
    del reference
    calls: Dict[str, Callable[[], Any]] = {"vanilla": lambda: inputs.blend("vanilla")}
    for label, (mode, config) in configs.items():
        calls[label] = (lambda m=mode, c=config: inputs.blend(m, c))
    times = time_interleaved(calls, repeats=repeats, warmup=warmup, streams=streams)
    return BlendMeasurement({label: median_ms(samples) for label, samples in times.items()}, psnrs, reports, extras)


def bench_scene(
    scene,  # scenes.Scene
    modes: Sequence[str] = BENCH_MODES,
    fixed_grid: Optional[Sequence[Tuple[float, int]]] = None,
    repeats: int = 21,
    warmup: int = 3,
    config: Optional[LPTConfig] = None,
    end_to_end: bool = True,
    frames: Optional[Iterable[int]] = None,
    progress: bool = True,
    variant: str = "3dgs",
    camera_model: str = "pinhole",
    tile_size: int = 16,
) -> List[FrameResult]:
    """Time every mode on every frame of `scene` (on the current CUDA device), rendered as `variant` in tiles of
    `tile_size` px (the blending stage and the end-to-end call alike)."""
    from .frame import check_variant

    spec = check_variant(variant, camera_model)  # ValueError before anything needs the GPU
    require_cuda()
    if repeats < 20:
        raise ValueError(f"repeats must be >= 20 (median of at least 20 runs), got {repeats}")
    ours = [mode for mode in dict.fromkeys(modes) if mode != "vanilla"]  # vanilla: always, the reference
    config = config or LPTConfig()
    configs: Dict[str, Tuple[str, LPTConfig]] = {mode: (mode, config) for mode in ours}
    for rho, k in fixed_grid or ():
        configs[fixed_label(rho, k)] = ("fixed", config.replace(heavy_ratio=rho, chunk_count=k))
    device_scene = scene.to("cuda")
    frame_ids = list(range(scene.num_frames)) if frames is None else list(frames)
    results: List[FrameResult] = []
    for frame in _track(frame_ids, f"bench {scene.name} ({spec.title})", progress):
        inputs, viewmats, Ks = project_scene_frame(device_scene, frame, variant, camera_model, tile_size)
        measured = measure_blend(inputs, configs, repeats=repeats, warmup=warmup, image=spec.image)
        report: Mapping[str, Any] = measured.reports.get("auto") or next(iter(measured.reports.values()), {})
        end_to_end_ms: Dict[str, float] = {}
        if end_to_end:
            end_to_end_ms = _time_rasterization(device_scene, viewmats, Ks, config, repeats, warmup, variant,
                                                camera_model, tile_size)
        results.append(FrameResult(
            scene=scene.name, frame=frame, images=int(viewmats.shape[0]), width=scene.width, height=scene.height,
            num_gaussians=scene.num_gaussians, total_workload=int(report.get("total_workload", inputs.flatten_ids.numel())),
            max_workload=int(report.get("max_workload", 0)), imbalance=float(report.get("imbalance", float("nan"))),
            concurrent_ctas=int(report.get("concurrent_ctas", 0)),
            chunked_tiles=int(report.get("chunked_tiles", 0)) if "auto" in configs else 0,
            chunk_count=int(report.get("chunk_count", 1)) if "auto" in configs else 1,
            blend_ms=measured.blend_ms, psnr_db=measured.psnr_db, end_to_end_ms=end_to_end_ms, repeats=repeats,
            chunking_disabled_reason=report.get("chunking_disabled_reason"), variant=variant,
            camera_model=camera_model, tile_size=tile_size,
        ))
        del inputs
        torch.cuda.empty_cache()
    return results


@torch.no_grad()
def whole_call(scene, viewmats, Ks, backend: str, config: Optional[LPTConfig] = None, variant: str = "3dgs",
               camera_model: str = "pinhole", tile_size: int = 16):
    """One whole render call of the variant (`frame.render_frame`) on a scene's cameras, the call `bench` times end
    to end, as an evaluation frame (no autograd: `rasterization_2dgs` makes its densify tensor require grad, and
    frames that need gradients are never chunked)."""
    from .frame import VARIANT_SPECS, render_frame

    render_mode = "RGB+D" if VARIANT_SPECS[variant].depth_channel else "RGB"  # what the blend stage was given
    return render_frame(variant, scene.means, scene.quats, scene.scales, scene.opacities, scene.colors, viewmats, Ks,
                        scene.width, scene.height, backend=backend, config=config, camera_model=camera_model,
                        sh_degree=scene.sh_degree, packed=False, render_mode=render_mode, tile_size=tile_size)


def _time_rasterization(scene, viewmats, Ks, config: LPTConfig, repeats: int, warmup: int, variant: str = "3dgs",
                        camera_model: str = "pinhole", tile_size: int = 16) -> Dict[str, float]:
    """Median ms of the variant's whole render call (`whole_call`) with gsplat's backend and ours."""
    from .timing import median_ms, time_interleaved

    def render(backend: str):
        return whole_call(scene, viewmats, Ks, backend, config, variant, camera_model, tile_size)

    times = time_interleaved({"cuda": lambda: render("cuda"), "lpt": lambda: render("lpt")},
                             repeats=repeats, warmup=warmup)
    return {backend: median_ms(samples) for backend, samples in times.items()}


def _track(items: Sequence[int], description: str, enabled: bool):
    if not enabled or len(items) <= 1:
        return items
    from rich.progress import track

    return track(items, description=description, transient=True)


# ----------------------------------------------------------------------------------------------
# Reporting (any machine)
# ----------------------------------------------------------------------------------------------


def band_of(imbalance: float) -> str:
    for name, low, high in BANDS:
        if low <= imbalance < high:
            return name
    return BANDS[-1][0]


def summarize(results: Sequence[FrameResult]) -> List[Dict[str, Any]]:
    """Per imbalance band: frames, mean and worst-frame speedup of each mode over vanilla."""
    summary = []
    for name, low, high in BANDS:
        members = [r for r in results if low <= r.imbalance < high]
        if not members:
            continue
        entry: Dict[str, Any] = {"band": name, "frames": len(members)}
        for mode in BENCH_MODES[1:]:
            speedups = [r.speedup(mode) for r in members if not math.isnan(r.speedup(mode))]
            if speedups:
                entry[f"{mode}_mean_speedup"] = round(sum(speedups) / len(speedups), 3)
                entry[f"{mode}_min_speedup"] = round(min(speedups), 3)
                entry[f"{mode}_max_speedup"] = round(max(speedups), 3)
        summary.append(entry)
    return summary


def results_table(results: Sequence[FrameResult], title: str = "alpha blending per frame (median ms)"):
    """A rich Table: one row per frame, the times of each mode, speedups, (h, k), PSNR, end-to-end."""
    from rich import box
    from rich.table import Table

    has_fixed = any(r.fixed_labels for r in results)
    has_e2e = any(r.end_to_end_ms for r in results)
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    for header in ("scene", "fr", "imbal.", "h,k", "vanilla", "lpt", "chunk", "auto", "auto x"):
        table.add_column(header, justify="left" if header == "scene" else "right")
    if has_fixed:
        table.add_column("best fixed", justify="right")
    table.add_column("min PSNR", justify="right")
    if has_e2e:
        table.add_column("raster. cuda/lpt", justify="right")
    for r in results:
        cells = [r.scene, str(r.frame), f"{r.imbalance:.2f}", f"{r.chunked_tiles},{r.chunk_count}"]
        cells += [_ms(r.blend_ms.get(mode)) for mode in BENCH_MODES]
        cells.append(_speedup_text(r.speedup("auto")))
        if has_fixed:
            best = r.best_fixed
            if best:
                rho, k = parse_fixed_label(best)
                cells.append(f"{r.blend_ms[best]:.3f} ({rho:g},{k})")
            else:
                cells.append("-")
        lowest = min(r.psnr_db.values()) if r.psnr_db else None
        cells.append("-" if lowest is None else ("exact" if math.isinf(lowest) else f"{lowest:.1f} dB"))
        if has_e2e:
            cells.append(f"{_ms(r.end_to_end_ms.get('cuda'))}/{_ms(r.end_to_end_ms.get('lpt'))}"
                         if r.end_to_end_ms else "-")
        table.add_row(*cells)
    return table


def _ms(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.3f}"


def _speedup_text(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.2f}x"


CSV_NAME, JSON_NAME = "bench.csv", "bench.json"


def write_results(results: Sequence[FrameResult], out_dir, meta: Optional[Dict[str, Any]] = None) -> Dict[str, str]:
    """bench.csv (one row per frame) and bench.json (full records, band summary, run facts), each written whole."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv_path = output.write_csv(out / CSV_NAME, [r.row() for r in results])
    json_path = output.write_json(out / JSON_NAME, {"meta": meta or {}, "summary": summarize(results),
                                                    "frames": [r.to_json() for r in results]})
    return {"csv": csv_path, "json": json_path}


def read_results(path) -> Tuple[List[FrameResult], Dict[str, Any]]:
    """Frames and meta of a bench.json (for re-plotting)."""
    with open(path) as handle:
        data = json.load(handle)
    return [FrameResult.from_json(frame) for frame in data["frames"]], data.get("meta", {})


def environment_facts() -> Dict[str, Any]:
    """GPU, versions: written next to the numbers."""
    import gsplat

    facts: Dict[str, Any] = {"torch": torch.__version__, "gsplat": gsplat.__version__}
    if torch.cuda.is_available():
        properties = torch.cuda.get_device_properties(torch.cuda.current_device())
        facts.update({"gpu": properties.name, "sm_count": properties.multi_processor_count,
                      "cuda": torch.version.cuda})
    try:
        import cupy

        facts["cupy"] = cupy.__version__
    except Exception:  # CuPy is optional for reporting
        pass
    return facts
