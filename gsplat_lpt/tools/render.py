"""Render a scene's camera path to PNG images (and optionally a video) with gsplat's or our backend.

One `gsplat.rasterization` call per frame (all cameras of a rig frame in one batch), exactly as a
user's script would call it, with `backend="lpt"` and an `LPTConfig` or `backend="cuda"`. The
schedule of every frame (`meta["lpt"]`) is written to render.json next to the images.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from ..config import LPTConfig
from .distributed import Workers
from .output import replacing, write_json

VIDEO_SUFFIXES = (".mp4", ".gif")


def check_video_path(video: Optional[Path]) -> None:
    """Refuse an unusable video path before anything is rendered or written."""
    if video is None:
        return
    suffix = Path(video).suffix.lower()
    if suffix not in VIDEO_SUFFIXES:
        raise ValueError(f"video {video}: unsupported suffix {suffix or '(none)'!r}; use .mp4 or .gif")
    if suffix == ".mp4" and importlib.util.find_spec("imageio_ffmpeg") is None:
        raise ValueError(f"video {video}: writing .mp4 needs the imageio-ffmpeg package (pip install imageio-ffmpeg); "
                         "or ask for a .gif")


def camera_path(scene, path: str, frames: int):
    """The scene with the requested camera path: its own cameras ("scene"), an orbit or a fly-through."""
    from ..scenes import auto_orbit
    from ..scenes import flythrough_path

    if path == "scene":
        if scene.viewmats.shape[0] == 0:
            path = "orbit"
        else:
            return scene
    if path == "orbit":
        viewmats, Ks = auto_orbit(scene.means, frames, scene.width, scene.height)
        return scene.with_cameras(viewmats, Ks, scene.width, scene.height)
    if path == "flythrough":
        # From the first camera of the scene (or the orbit's) along its viewing direction.
        if scene.viewmats.shape[0] == 0:
            viewmats, _ = auto_orbit(scene.means, 1, scene.width, scene.height)
        else:
            viewmats = scene.viewmats[:1]
        camtoworld = torch.linalg.inv(viewmats[0].double())
        start = camtoworld[:3, 3]
        forward = camtoworld[:3, 2]
        up = -camtoworld[:3, 1]
        extent = float(torch.quantile((scene.means.double()[:: max(1, scene.num_gaussians // 100_000)] - start).norm(dim=-1), 0.5))
        end = start + 0.5 * extent * forward
        viewmats, Ks = flythrough_path(start.tolist(), end.tolist(), frames, scene.width, scene.height,
                                       look_ahead=max(extent, 1e-3), pitch_deg=0.0, up=up.tolist())
        return scene.with_cameras(viewmats, Ks, scene.width, scene.height)
    raise ValueError(f"unknown camera path {path!r}; choose scene, orbit or flythrough")


def _mosaic(images: np.ndarray, columns: int = 3) -> np.ndarray:
    """[C, H, W, 3] -> one image, C cameras in a grid (for rig videos)."""
    count, height, width, _ = images.shape
    if count == 1:
        return images[0]
    columns = min(columns, count)
    rows = -(-count // columns)
    canvas = np.zeros((rows * height, columns * width, 3), dtype=images.dtype)
    for index, image in enumerate(images):
        row, column = divmod(index, columns)
        canvas[row * height:(row + 1) * height, column * width:(column + 1) * width] = image
    return canvas


@torch.no_grad()
def render_frame(device_scene, frame: int, backend: str, config: LPTConfig, backgrounds: Optional[torch.Tensor],
                 tile_size: int = 16) -> Tuple[np.ndarray, Dict[str, Any]]:
    """One `gsplat.rasterization` call for all cameras of `frame` in tiles of `tile_size` px: uint8 images
    [C, H, W, 3] and the schedule."""
    import gsplat

    import gsplat_lpt  # noqa: F401  (installs backend= on gsplat.rasterization)

    if not device_scene.means.is_cuda:
        raise RuntimeError("gsplat-lpt render needs a CUDA GPU (gsplat rasterizes on CUDA only)")
    viewmats, Ks = device_scene.frame_cameras(frame)
    if backgrounds is not None:
        backgrounds = backgrounds[None].repeat(viewmats.shape[0], 1)
    extra = {"lpt_config": config} if backend == "lpt" else {}
    colors, _, meta = gsplat.rasterization(
        device_scene.means, device_scene.quats, device_scene.scales, device_scene.opacities, device_scene.colors,
        viewmats, Ks, device_scene.width, device_scene.height, sh_degree=device_scene.sh_degree, packed=False,
        backgrounds=backgrounds, tile_size=tile_size, backend=backend, **extra)
    images = (colors[..., :3].clamp(0, 1) * 255).round().to(torch.uint8).cpu().numpy()  # [C, H, W, 3]
    return images, {"frame": frame, **{key: _plain(value) for key, value in (meta.get("lpt") or {}).items()}}


def render_scene(
    scene,  # scenes.Scene with cameras
    out_dir: Path,
    backend: str = "lpt",
    config: Optional[LPTConfig] = None,
    video: Optional[Path] = None,
    background: Optional[Sequence[float]] = None,
    fps: int = 10,
    progress: bool = True,
    workers: Optional[Workers] = None,
    tile_size: int = 16,
) -> Dict[str, Any]:
    """Render every frame in tiles of `tile_size` px to out_dir/frame_XXXX[_camY].png (+ `video`, render.json);
    returns the paths and the per-frame schedules.

    With `workers` spread over several GPUs (torchrun), each process renders every world_size-th frame on
    its own GPU and rank 0 receives the images round by round and alone writes; other ranks return empty lists."""
    import imageio.v2 as imageio

    workers = workers or Workers()
    check_video_path(video)
    config = config or LPTConfig()
    device_scene = scene.to(workers.device)
    backgrounds = None if background is None else torch.tensor(background, dtype=torch.float32,
                                                                 device=workers.device)
    out_dir = Path(out_dir)
    if workers.is_main:
        out_dir.mkdir(parents=True, exist_ok=True)
    frames: List[int] = list(range(scene.num_frames))
    results = workers.imap(frames, lambda frame: render_frame(device_scene, frame, backend, config, backgrounds,
                                                              tile_size))
    if workers.is_main and progress and len(frames) > 1:
        from rich.progress import track

        results = track(results, total=len(frames), description=f"render {scene.name}", transient=True)
    written: List[str] = []
    schedules: List[Dict[str, Any]] = []
    movie: List[np.ndarray] = []
    for frame, (images, schedule) in results:  # rank 0 only: the others' iterator yields nothing
        for camera, image in enumerate(images):
            name = frame_file_name(frame, camera, len(images))
            with replacing(out_dir / name) as temporary:
                imageio.imwrite(temporary, image)
            written.append(str(out_dir / name))
        if video is not None:
            movie.append(_mosaic(images))
        schedules.append(schedule)
    if not workers.is_main:
        return {"images": [], "schedules": []}
    if video is not None:
        write_video(video, movie, fps)
        written.append(str(video))
    write_json(out_dir / "render.json", {"scene": scene.summary(), "backend": backend, "mode": config.mode,
                                         "tile_size": tile_size, "processes": workers.world_size,
                                         "frames": schedules})
    return {"images": written, "schedules": schedules}


def frame_file_name(frame: int, camera: int, cameras: int) -> str:
    """frame_0007.png, or frame_0007_cam2.png when a frame has several cameras."""
    return f"frame_{frame:04d}.png" if cameras == 1 else f"frame_{frame:04d}_cam{camera}.png"


def output_names(scene) -> List[str]:
    """Every file `render_scene` writes into its folder for this scene."""
    return ["render.json"] + [frame_file_name(frame, camera, scene.cameras_per_frame)
                              for frame in range(scene.num_frames) for camera in range(scene.cameras_per_frame)]


def write_video(path: Path, frames: Sequence[np.ndarray], fps: int) -> None:
    """A GIF or an MP4 (imageio-ffmpeg) of uint8 frames, written whole."""
    import imageio.v2 as imageio

    suffix = Path(path).suffix.lower()
    with replacing(path) as temporary:
        if suffix == ".gif":
            imageio.mimsave(temporary, frames, duration=1000 / fps, loop=0)
        else:
            imageio.mimsave(temporary, frames, fps=fps)


def _plain(value):
    """JSON-friendly copy of a meta value."""
    if isinstance(value, torch.Tensor):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value
