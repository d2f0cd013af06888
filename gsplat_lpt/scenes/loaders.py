"""Scenes users bring: gsplat checkpoints, INRIA .ply, antimatter15 .splat, gsplat's test .npz, COLMAP cameras.

Every loader returns a `Scene` in gsplat's activated parametrisation (linear scales, opacities
in [0, 1], unit wxyz quaternions) with colours either RGB or SH coefficients plus `sh_degree`, which
`gsplat.rasterization(..., sh_degree=...)` evaluates. Formats:

- gsplat `simple_trainer` checkpoint `ckpt_{step}_rank{r}.pt` = {"step", "splats": {means, scales (log),
  quats, opacities (logit), sh0 [N,1,3], shN [N,K-1,3]}}; ranks of one step are concatenated along N.
  With appearance optimisation the splats hold `features` and `colors` (logit) instead of SH: the
  base colour sigmoid(colors) is used (the per-image appearance MLP needs a training image id).
- INRIA 3DGS `.ply` (f_dc, f_rest channel-major, opacity logit, scale log, rot wxyz).
- antimatter15 `.splat` (32 bytes per Gaussian: position, linear scale, RGBA u8, quaternion u8).
- gsplat's test `.npz` (means3d, colors u8, viewmats, Ks, width, height): real geometry and cameras,
  random scales/rotations/opacities drawn as gsplat's own tests do.
- Cameras: a COLMAP folder (cameras/images, .bin or .txt), optionally normalised the way gsplat's
  COLMAP parser normalises the world before training (`normalize_world_space`, on by default there).
  Without cameras, `auto_orbit` circles the scene's centre.
"""

from __future__ import annotations

import math
import re
import struct
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor

from .scene import Scene, check_resolution, orbit_path

ACCEPTED_FORMATS = (
    "a built-in scene name, a gsplat simple_trainer checkpoint (.pt/.pth, or its result folder), "
    "an INRIA 3DGS .ply, an antimatter15 .splat, or gsplat's test .npz"
)
SH_C0 = 0.28209479177387814  # degree-0 SH basis constant


class SceneLoadError(ValueError):
    """A file that cannot be loaded; the message is one line naming the file and what is accepted."""


# ----------------------------------------------------------------------------------------------
# Entry point
# ----------------------------------------------------------------------------------------------


def load_scene(
    path: str | Path,
    colmap: Optional[str | Path] = None,
    width: Optional[int] = None,
    height: Optional[int] = None,
    frames: int = 8,
    downscale: float = 1.0,
    normalize_world: Optional[bool] = None,
) -> Scene:
    """Load Gaussians from `path` and attach cameras: a COLMAP folder when given (its first `frames`
    images, sorted by name), else the file's own cameras (.npz), else an automatic orbit.

    `normalize_world=None` normalises COLMAP poses for gsplat checkpoints (simple_trainer's default)
    and not for .ply/.splat files; pass True/False to force it."""
    path = Path(path)
    if not path.exists():
        raise SceneLoadError(f"{path}: no such file or folder; expected {ACCEPTED_FORMATS}")
    kind, scene = _load_gaussians(path)
    if width is not None or height is not None:
        check_resolution(width or 0, height or 0)
    if colmap is not None:
        normalize = (kind == "checkpoint") if normalize_world is None else normalize_world
        viewmats, Ks, cam_width, cam_height = load_colmap_cameras(colmap, normalize=normalize, max_frames=frames)
        target_width = width or int(round(cam_width / downscale))
        target_height = height or int(round(cam_height / downscale))
        check_resolution(target_width, target_height)
        Ks = rescale_intrinsics(Ks, (cam_width, cam_height), (target_width, target_height))
        return scene.with_cameras(viewmats, Ks, target_width, target_height)
    if scene.viewmats.shape[0] > 0:
        if width is None and height is None:
            return scene
        target_width, target_height = width or scene.width, height or scene.height
        Ks = rescale_intrinsics(scene.Ks, (scene.width, scene.height), (target_width, target_height))
        return scene.with_cameras(scene.viewmats, Ks, target_width, target_height)
    target_width, target_height = width or 1920, height or 1080
    viewmats, Ks = auto_orbit(scene.means, frames, target_width, target_height)
    return scene.with_cameras(viewmats, Ks, target_width, target_height)


def _load_gaussians(path: Path) -> Tuple[str, Scene]:
    """(kind, scene without cameras unless the file has some)."""
    if path.is_dir():
        checkpoint = find_checkpoint(path)
        if checkpoint is None:
            raise SceneLoadError(f"{path}: folder holds no ckpts/ckpt_*.pt, *.pt, *.ply or *.splat; expected {ACCEPTED_FORMATS}")
        return _load_gaussians(checkpoint)
    suffix = path.suffix.lower()
    if suffix in (".pt", ".pth", ".ckpt"):
        return "checkpoint", load_gsplat_checkpoint(path)
    if suffix == ".ply":
        return "ply", load_ply(path)
    if suffix == ".splat":
        return "splat", load_splat(path)
    if suffix == ".npz":
        return "npz", load_test_npz(path)
    raise SceneLoadError(f"{path}: unknown format {suffix or '(no suffix)'!r}; expected {ACCEPTED_FORMATS}")


def find_checkpoint(folder: Path) -> Optional[Path]:
    """The latest-step checkpoint of a simple_trainer result folder (ckpts/), else a lone .pt/.ply/.splat."""
    candidates = sorted((folder / "ckpts").glob("ckpt_*.pt")) + sorted(folder.glob("ckpt_*.pt"))
    if candidates:
        return max(candidates, key=lambda p: _checkpoint_step(p))
    for pattern in ("*.pt", "*.pth", "ply/*.ply", "*.ply", "*.splat"):
        found = sorted(folder.glob(pattern))
        if found:
            return found[-1]
    return None


def _checkpoint_step(path: Path) -> int:
    match = re.match(r"ckpt_(\d+)", path.stem)
    return int(match.group(1)) if match else -1


def _empty_cameras() -> Tuple[Tensor, Tensor]:
    return torch.zeros(0, 4, 4), torch.zeros(0, 3, 3)


def _scene(name: str, source: str, means, quats, scales, opacities, colors, sh_degree, description: str) -> Scene:
    viewmats, Ks = _empty_cameras()
    quats = quats / quats.norm(dim=-1, keepdim=True).clamp_min(1e-12)  # gsplat normalises too
    return Scene(name=name, description=description, means=means.float().contiguous(), quats=quats.float().contiguous(),
                 scales=scales.float().contiguous(), opacities=opacities.float().contiguous(),
                 colors=colors.float().contiguous(), viewmats=viewmats, Ks=Ks, width=1920, height=1080,
                 sh_degree=sh_degree, source=source)


def _sh_degree_from_coefficients(count: int, path: Path) -> int:
    degree = int(round(math.sqrt(count))) - 1
    if (degree + 1) ** 2 != count or degree > 4:
        raise SceneLoadError(f"{path}: {count} SH coefficients per channel is not (degree + 1)^2 for a degree <= 4")
    return degree


# ----------------------------------------------------------------------------------------------
# gsplat simple_trainer checkpoints
# ----------------------------------------------------------------------------------------------


def _rank_siblings(path: Path) -> List[Path]:
    """All ranks of the checkpoint's step (multi-GPU training saves one file per rank)."""
    match = re.match(r"(ckpt_\d+)_rank\d+$", path.stem)
    if not match:
        return [path]
    siblings = sorted(path.parent.glob(f"{match.group(1)}_rank*{path.suffix}"),
                      key=lambda p: int(re.search(r"rank(\d+)$", p.stem).group(1)))
    return siblings or [path]


def _torch_load(path: Path) -> Dict:
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # pickles that are not plain tensors, or not torch files at all
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise SceneLoadError(f"{path}: not a readable torch checkpoint ({first_line[:120]}); expected {ACCEPTED_FORMATS}") from None


def load_gsplat_checkpoint(path: str | Path) -> Scene:
    """A simple_trainer checkpoint (all ranks of its step concatenated along N)."""
    path = Path(path)
    states = [_torch_load(p) for p in _rank_siblings(path)]
    for state, file in zip(states, _rank_siblings(path)):
        if not isinstance(state, dict) or "splats" not in state:
            hint = " (a drivestudio/OmniRe checkpoint: see gsplat_lpt.omnire)" if isinstance(state, dict) and "models" in state else ""
            raise SceneLoadError(f"{file}: no 'splats' entry, so not a gsplat simple_trainer checkpoint{hint}; expected {ACCEPTED_FORMATS}")
    splats = {key: torch.cat([s["splats"][key] for s in states]) for key in states[0]["splats"]}
    for key in ("means", "scales", "quats", "opacities"):
        if key not in splats:
            raise SceneLoadError(f"{path}: splats lack '{key}'; expected gsplat simple_trainer keys means/scales/quats/opacities + sh0/shN or colors")
    means = splats["means"]  # [N, 3]
    n = means.shape[0]
    scales = torch.exp(splats["scales"])  # [N, 3] stored as log
    opacities = torch.sigmoid(splats["opacities"].reshape(n))  # [N] stored as logit
    if "sh0" in splats:
        sh0 = splats["sh0"].reshape(n, 1, 3)
        shN = splats.get("shN", sh0.new_zeros(n, 0, 3)).reshape(n, -1, 3)
        colors = torch.cat([sh0, shN], dim=1)  # [N, K, 3]
        sh_degree = _sh_degree_from_coefficients(colors.shape[1], path)
        description = f"gsplat checkpoint, step {states[0].get('step', '?')}, SH degree {sh_degree}"
    elif "colors" in splats:
        colors = torch.sigmoid(splats["colors"].reshape(n, 3))  # appearance variant: base colour only
        sh_degree = None
        description = f"gsplat checkpoint (appearance variant, base colours), step {states[0].get('step', '?')}"
    else:
        raise SceneLoadError(f"{path}: splats have neither sh0/shN nor colors; not a gsplat simple_trainer checkpoint")
    return _scene(path.stem, str(path), means, splats["quats"], scales, opacities, colors, sh_degree, description)


# ----------------------------------------------------------------------------------------------
# INRIA .ply, antimatter15 .splat, gsplat test .npz
# ----------------------------------------------------------------------------------------------


def load_ply(path: str | Path) -> Scene:
    """The original 3DGS layout (also what simple_trainer exports to ply/point_cloud_{step}.ply)."""
    from plyfile import PlyData

    path = Path(path)
    try:
        vertices = PlyData.read(str(path))["vertex"]
    except Exception as error:
        raise SceneLoadError(f"{path}: not a readable PLY with a 'vertex' element ({type(error).__name__}); expected {ACCEPTED_FORMATS}") from None
    names = set(vertices.data.dtype.names or ())
    required = ["x", "y", "z", "f_dc_0", "f_dc_1", "f_dc_2", "opacity", "scale_0", "scale_1", "scale_2",
                "rot_0", "rot_1", "rot_2", "rot_3"]
    missing = [name for name in required if name not in names]
    if missing:
        raise SceneLoadError(f"{path}: PLY lacks {', '.join(missing[:4])}{'...' if len(missing) > 4 else ''}; "
                             "expected the INRIA 3DGS layout (x y z f_dc_* f_rest_* opacity scale_* rot_*)")

    def columns(keys: Sequence[str]) -> Tensor:
        return torch.from_numpy(np.stack([np.asarray(vertices[key], dtype=np.float32) for key in keys], axis=-1))

    n = len(vertices.data)
    means = columns(["x", "y", "z"])
    rest_keys = sorted((k for k in names if k.startswith("f_rest_")), key=lambda k: int(k.split("_")[-1]))
    sh0 = columns(["f_dc_0", "f_dc_1", "f_dc_2"]).reshape(n, 1, 3)
    if rest_keys:
        if len(rest_keys) % 3:
            raise SceneLoadError(f"{path}: {len(rest_keys)} f_rest_* properties is not a multiple of 3")
        rest = columns(rest_keys).reshape(n, 3, len(rest_keys) // 3).transpose(1, 2)  # channel-major on disk
        colors = torch.cat([sh0, rest], dim=1)
    else:
        colors = sh0
    sh_degree = _sh_degree_from_coefficients(colors.shape[1], path)
    opacities = torch.sigmoid(columns(["opacity"])[:, 0])
    scales = torch.exp(columns(["scale_0", "scale_1", "scale_2"]))
    quats = columns(["rot_0", "rot_1", "rot_2", "rot_3"])
    return _scene(path.stem, str(path), means, quats, scales, opacities, colors, sh_degree,
                  f"INRIA 3DGS .ply, SH degree {sh_degree}")


SPLAT_RECORD = np.dtype([("position", "<f4", (3,)), ("scale", "<f4", (3,)), ("rgba", "u1", (4,)), ("rotation", "u1", (4,))])


def load_splat(path: str | Path) -> Scene:
    """antimatter15 .splat: 32 bytes per Gaussian, no header; colours are plain RGB (degree 0 baked)."""
    path = Path(path)
    size = path.stat().st_size
    if size == 0 or size % SPLAT_RECORD.itemsize:
        raise SceneLoadError(f"{path}: {size} bytes is not a positive multiple of 32; not an antimatter15 .splat")
    records = np.fromfile(path, dtype=SPLAT_RECORD)
    means = torch.from_numpy(records["position"].copy())
    scales = torch.from_numpy(records["scale"].copy())
    rgba = torch.from_numpy(records["rgba"].astype(np.float32) / 255.0)
    quats = (torch.from_numpy(records["rotation"].astype(np.float32)) - 128.0) / 128.0
    if not torch.isfinite(means).all() or not torch.isfinite(scales).all() or (scales < 0).any():
        raise SceneLoadError(f"{path}: positions/scales are not finite and positive; not an antimatter15 .splat")
    return _scene(path.stem, str(path), means, quats, scales, rgba[:, 3], rgba[:, :3], None,
                  "antimatter15 .splat (RGB colours)")


def load_test_npz(path: str | Path, seed: int = 42) -> Scene:
    """gsplat's `assets/test_garden.npz`: real points and cameras; scales, rotations and opacities drawn
    at random as gsplat's tests draw them (seeded)."""
    path = Path(path)
    try:
        data = np.load(path)
        means = torch.from_numpy(data["means3d"]).float()
        colors = torch.from_numpy(data["colors"]).float() / 255.0
        viewmats = torch.from_numpy(data["viewmats"]).float()
        Ks = torch.from_numpy(data["Ks"]).float()
        width, height = int(data["width"]), int(data["height"])
    except Exception as error:
        raise SceneLoadError(f"{path}: not gsplat's test .npz (needs means3d, colors, viewmats, Ks, width, height; {type(error).__name__})") from None
    gen = torch.Generator().manual_seed(seed)
    n = means.shape[0]
    scales = torch.rand(n, 3, generator=gen) * 0.02  # gsplat tests: rand * 0.02 (linear)
    quats = torch.randn(n, 4, generator=gen)
    opacities = torch.rand(n, generator=gen)
    scene = _scene(path.stem, str(path), means, quats, scales.clamp_min(1e-4), opacities.clamp(1e-3, 0.999), colors, None,
                   "gsplat test points with random scales/rotations/opacities (seeded)")
    return scene.with_cameras(viewmats, Ks, width, height)


# ----------------------------------------------------------------------------------------------
# Cameras
# ----------------------------------------------------------------------------------------------


def rescale_intrinsics(Ks: Tensor, source_size: Tuple[int, int], target_size: Tuple[int, int]) -> Tensor:
    """Intrinsics for the same view rendered at another size (pixels scale per axis). [C, 3, 3]"""
    Ks = Ks.clone()
    Ks[:, 0, :] *= target_size[0] / source_size[0]
    Ks[:, 1, :] *= target_size[1] / source_size[1]
    return Ks


def auto_orbit(means: Tensor, num_views: int, width: int, height: int) -> Tuple[Tensor, Tensor]:
    """An orbit around the bulk of the Gaussians, for scenes without cameras.

    Up is the axis of least spread (the ground or table is flat), signed so that most points lie
    below the centre, the same heuristic gsplat's COLMAP normalisation uses."""
    points = means.double()
    if points.shape[0] > 200_000:  # a fixed subsample is plenty for quantiles and PCA
        points = points[torch.linspace(0, points.shape[0] - 1, 200_000).long()]
    center = points.median(dim=0).values
    offsets = points - center
    _, eigenvectors = torch.linalg.eigh(offsets.T @ offsets / points.shape[0])
    up = eigenvectors[:, 0]  # smallest eigenvalue
    heights = offsets @ up
    if heights.median() > heights.mean():  # the bulk (median) should sit below the mean: floor below
        up = -up
    extent = float(torch.quantile(offsets.norm(dim=-1), 0.6))
    radius = max(2.0 * extent, 1e-3)
    return orbit_path(center.tolist(), radius, 0.35 * radius, num_views, width, height, horizontal_fov_deg=60.0,
                      up=up.tolist())


_COLMAP_MODELS = {  # id: (name, number of params); intrinsics are the first 3 or 4 params
    0: ("SIMPLE_PINHOLE", 3), 1: ("PINHOLE", 4), 2: ("SIMPLE_RADIAL", 4), 3: ("RADIAL", 5), 4: ("OPENCV", 8),
    5: ("OPENCV_FISHEYE", 8), 6: ("FULL_OPENCV", 12), 7: ("FOV", 5), 8: ("SIMPLE_RADIAL_FISHEYE", 4),
    9: ("RADIAL_FISHEYE", 5), 10: ("THIN_PRISM_FISHEYE", 12),
}
_COLMAP_PARAM_COUNT = {name: count for name, count in _COLMAP_MODELS.values()}


def _colmap_K(model: str, params: Sequence[float]) -> Tensor:
    """Pinhole part of a COLMAP camera (distortion is ignored: gsplat renders undistorted images)."""
    if model in ("SIMPLE_PINHOLE", "SIMPLE_RADIAL", "RADIAL", "SIMPLE_RADIAL_FISHEYE", "RADIAL_FISHEYE", "FOV"):
        fx = fy = params[0]
        cx, cy = params[1], params[2]
    else:
        fx, fy, cx, cy = params[:4]
    return torch.tensor([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]], dtype=torch.float64)


def _quat_to_rotmat_np(qvec: Sequence[float]) -> np.ndarray:
    w, x, y, z = np.asarray(qvec, dtype=np.float64) / np.linalg.norm(qvec)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def colmap_sparse_dir(folder: str | Path) -> Path:
    """The folder holding cameras.{bin,txt} and images.{bin,txt}: given, sparse/0 or sparse."""
    folder = Path(folder)
    for candidate in (folder, folder / "sparse" / "0", folder / "sparse"):
        has_cameras = (candidate / "cameras.bin").is_file() or (candidate / "cameras.txt").is_file()
        has_images = (candidate / "images.bin").is_file() or (candidate / "images.txt").is_file()
        if has_cameras and has_images:
            return candidate
    raise SceneLoadError(f"{folder}: no COLMAP model (cameras.bin/.txt + images.bin/.txt in it, sparse/0 or sparse)")


def _read_colmap_cameras(sparse: Path) -> Dict[int, Tuple[str, int, int, List[float]]]:
    cameras: Dict[int, Tuple[str, int, int, List[float]]] = {}
    if (sparse / "cameras.bin").is_file():
        data = (sparse / "cameras.bin").read_bytes()
        (count,), offset = struct.unpack_from("<Q", data, 0), 8
        for _ in range(count):
            camera_id, model_id, width, height = struct.unpack_from("<iiQQ", data, offset)
            offset += 24
            name, num_params = _COLMAP_MODELS[model_id]
            params = list(struct.unpack_from(f"<{num_params}d", data, offset))
            offset += 8 * num_params
            cameras[camera_id] = (name, width, height, params)
        return cameras
    for line in (sparse / "cameras.txt").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split()
        name = fields[1]
        if name not in _COLMAP_PARAM_COUNT:
            raise SceneLoadError(f"{sparse / 'cameras.txt'}: unknown COLMAP camera model {name}")
        cameras[int(fields[0])] = (name, int(fields[2]), int(fields[3]), [float(v) for v in fields[4:]])
    return cameras


def _read_colmap_images(sparse: Path) -> List[Tuple[str, List[float], List[float], int]]:
    """(name, qvec wxyz, tvec, camera_id) of every registered image (world-to-camera pose)."""
    images = []
    if (sparse / "images.bin").is_file():
        data = (sparse / "images.bin").read_bytes()
        (count,), offset = struct.unpack_from("<Q", data, 0), 8
        for _ in range(count):
            values = struct.unpack_from("<i7di", data, offset)
            offset += struct.calcsize("<i7di")
            end = data.index(b"\x00", offset)
            name = data[offset:end].decode()
            offset = end + 1
            (num_points,) = struct.unpack_from("<Q", data, offset)
            offset += 8 + 24 * num_points  # (x, y, point3D_id) per 2-D point
            images.append((name, list(values[1:5]), list(values[5:8]), values[8]))
        return images
    lines = [line for line in (sparse / "images.txt").read_text().splitlines() if not line.startswith("#")]
    index = 0
    while index < len(lines):
        fields = lines[index].split()
        if fields:
            images.append((fields[9], [float(v) for v in fields[1:5]], [float(v) for v in fields[5:8]], int(fields[8])))
            index += 2  # the next line lists the image's 2-D points (possibly empty)
        else:
            index += 1
    return images


def _read_colmap_points(sparse: Path) -> Optional[np.ndarray]:
    """xyz of the sparse points ([P, 3]) or None when the model has none."""
    if (sparse / "points3D.bin").is_file():
        data = (sparse / "points3D.bin").read_bytes()
        (count,), offset = struct.unpack_from("<Q", data, 0), 8
        points = np.empty((count, 3))
        for i in range(count):
            points[i] = struct.unpack_from("<3d", data, offset + 8)
            offset += 8 + 24 + 3 + 8
            (track,) = struct.unpack_from("<Q", data, offset)
            offset += 8 + 8 * track
        return points
    if (sparse / "points3D.txt").is_file():
        rows = [line.split()[1:4] for line in (sparse / "points3D.txt").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
        return np.asarray(rows, dtype=np.float64).reshape(-1, 3)
    return None


def world_normalization(camtoworlds: np.ndarray, points: Optional[np.ndarray]) -> np.ndarray:
    """The similarity gsplat's COLMAP parser applies before training (`normalize_world_space=True`).

    1. rotate so the mean camera up (-y) becomes +z, centre on the median point the cameras look at,
       scale so the median camera distance is 1;
    2. rotate the sparse points onto their principal axes (largest spread -> x, least -> z);
    3. flip z if most points lie above their mean (the floor should be below). Returns [4, 4]."""
    positions = camtoworlds[:, :3, 3]
    ups = -camtoworlds[:, :3, 1]  # camera -y axis in world coordinates
    world_up = ups.mean(axis=0)
    world_up /= np.linalg.norm(world_up)
    target = np.array([0.0, 0.0, 1.0])
    # Rodrigues rotation taking world_up onto +z.
    axis = np.cross(world_up, target)
    cosine = float(world_up @ target)
    if cosine < -1 + 1e-9:
        align = np.diag([1.0, -1.0, -1.0])
    else:
        skew = np.array([[0.0, -axis[2], axis[1]], [axis[2], 0.0, -axis[0]], [-axis[1], axis[0], 0.0]])
        align = np.eye(3) + skew + skew @ skew / (1.0 + cosine)
    positions = positions @ align.T
    forwards = camtoworlds[:, :3, 2] @ align.T
    closest_to_origin = positions - (positions * forwards).sum(-1, keepdims=True) * forwards
    translation = -np.median(closest_to_origin, axis=0)
    scale = 1.0 / np.median(np.linalg.norm(positions + translation, axis=-1))
    first = np.eye(4)
    first[:3, :3] = align * scale
    first[:3, 3] = translation * scale
    transform = first
    if points is not None and len(points) >= 3:
        moved = points @ first[:3, :3].T + first[:3, 3]
        centroid = np.median(moved, axis=0)
        eigenvalues, eigenvectors = np.linalg.eigh(np.cov(moved - centroid, rowvar=False))
        eigenvectors = eigenvectors[:, np.argsort(eigenvalues)[::-1]]
        if np.linalg.det(eigenvectors) < 0:
            eigenvectors[:, 0] *= -1
        second = np.eye(4)
        second[:3, :3] = eigenvectors.T
        second[:3, 3] = -eigenvectors.T @ centroid
        transform = second @ transform
        moved = moved @ second[:3, :3].T + second[:3, 3]
        if np.median(moved[:, 2]) > np.mean(moved[:, 2]):
            transform = np.diag([1.0, -1.0, -1.0, 1.0]) @ transform
    return transform


def load_colmap_cameras(
    folder: str | Path, normalize: bool = False, max_frames: Optional[int] = None,
) -> Tuple[Tensor, Tensor, int, int]:
    """(viewmats [C,4,4], Ks [C,3,3], width, height) of the registered images sorted by name.

    All Ks are expressed at the first image's camera size (images of other cameras are rescaled)."""
    sparse = colmap_sparse_dir(folder)
    cameras = _read_colmap_cameras(sparse)
    images = sorted(_read_colmap_images(sparse), key=lambda image: image[0])
    if not images:
        raise SceneLoadError(f"{sparse}: COLMAP model has no registered images")
    worldtocams = np.stack([np.block([[_quat_to_rotmat_np(q), np.asarray(t)[:, None]], [np.zeros((1, 3)), np.ones((1, 1))]])
                            for _, q, t, _ in images])  # [C, 4, 4]
    if normalize:
        camtoworlds = np.linalg.inv(worldtocams)
        transform = world_normalization(camtoworlds, _read_colmap_points(sparse))
        camtoworlds = transform @ camtoworlds
        camtoworlds[:, :3, :3] /= np.linalg.norm(camtoworlds[:, :3, 0], axis=-1)[:, None, None]  # drop the scale
        worldtocams = np.linalg.inv(camtoworlds)
    first_camera = cameras[images[0][3]]
    width, height = first_camera[1], first_camera[2]
    Ks = []
    for _, _, _, camera_id in images:
        model, cam_width, cam_height, params = cameras[camera_id]
        K = _colmap_K(model, params)[None]
        Ks.append(rescale_intrinsics(K, (cam_width, cam_height), (width, height))[0])
    viewmats = torch.from_numpy(worldtocams).float()
    Ks_t = torch.stack(Ks).float()
    if max_frames is not None:
        # Evenly spaced views along the sorted sequence.
        keep = torch.linspace(0, len(images) - 1, min(max_frames, len(images))).round().long()
        viewmats, Ks_t = viewmats[keep], Ks_t[keep]
    return viewmats, Ks_t, int(width), int(height)
