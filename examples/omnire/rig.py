"""The camera rig of a drivestudio processed-scene folder: poses of every frame and intrinsics per camera.

drivestudio keeps cameras out of its checkpoints: `intrinsics/{cam}.txt` (fx fy cx cy k1 k2 p1 p2 k3),
`extrinsics/{cam}.txt` or `extrinsics/{t:03d}_{cam}.txt`, and `ego_pose/{t:03d}.txt`, in the layouts of
its datasets (Waymo, PandaSet, nuScenes, Argoverse, nuPlan). `load_camera_rig` reads them into
camera-to-world poses [F, C, 4, 4] (OpenCV axes) and intrinsics at one render size, so that all
cameras of a frame go into one batched rasterization call.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Dict, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor

# Camera sizes and conventions: facts from drivestudio's datasets/ and configs/datasets/.
DATASETS = ("waymo", "pandaset", "nuscenes", "argoverse", "nuplan")

# Original (H, W) of each processed camera id (drivestudio datasets/dataset_meta.py).
CAMERA_ORIGINAL_SIZES: Dict[str, Dict[int, Tuple[int, int]]] = {
    "waymo": {0: (1280, 1920), 1: (1280, 1920), 2: (1280, 1920), 3: (866, 1920), 4: (866, 1920)},
    "pandaset": {cam: (1080, 1920) for cam in range(6)},
    "nuscenes": {cam: (900, 1600) for cam in range(6)},
    "argoverse": {0: (2048, 1550), **{cam: (1550, 2048) for cam in range(1, 7)}},
    "nuplan": {cam: (1080, 1920) for cam in range(8)},
}
# drivestudio's configs load images at original size / this factor (`downscale_when_loading`).
LOAD_DOWNSCALE = {"waymo": 2, "pandaset": 2, "nuscenes": 3, "argoverse": 3, "nuplan": 3}

# Render sizes (H, W) of the front camera as drivestudio trains on them, plus a 1080p option.
RENDER_SIZES: Dict[str, Tuple[int, int]] = {
    name: (int(CAMERA_ORIGINAL_SIZES[name][0][0] / LOAD_DOWNSCALE[name]),
           int(CAMERA_ORIGINAL_SIZES[name][0][1] / LOAD_DOWNSCALE[name]))
    for name in DATASETS
}  # waymo 640x960, pandaset 540x960, nuscenes 300x533, argoverse 682x516, nuplan 360x640
RENDER_SIZES["1080p"] = (1080, 1920)

# Waymo stores camera-to-ego extrinsics in its camera axes (x front, y left, z up); drivestudio right-multiplies
# this to get OpenCV axes (x right, y down, z front). The other datasets already use OpenCV axes.
OPENCV_TO_WAYMO_CAMERA = torch.tensor(
    [[0.0, 0.0, 1.0, 0.0], [-1.0, 0.0, 0.0, 0.0], [0.0, -1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]]
)

# Where the camera poses come from, per dataset:
#   "ego":       extrinsics/{cam}.txt (camera-to-ego) and ego_pose/{t:03d}.txt (ego-to-world), world = first ego pose;
#   "pandaset":  extrinsics/{t:03d}_{cam}.txt (camera-to-world), world = ego_pose/{start:03d}.txt;
#   "nuscenes":  extrinsics/{t:03d}_{cam}.txt (camera-to-world), world = the front camera at the start.
POSE_LAYOUTS = {"waymo": "ego", "argoverse": "ego", "nuplan": "ego", "pandaset": "pandaset", "nuscenes": "nuscenes"}


@dataclass
class CameraRig:
    camtoworlds: Tensor  # [F, C, 4, 4] OpenCV axes, world = drivestudio's (first ego pose / first camera)
    Ks: Tensor  # [C, 3, 3] at the render size
    width: int
    height: int
    camera_ids: Tuple[int, ...]

    @property
    def num_frames(self) -> int:
        return int(self.camtoworlds.shape[0])

    def to(self, device) -> "CameraRig":
        return replace(self, camtoworlds=self.camtoworlds.to(device), Ks=self.Ks.to(device))


def scale_intrinsics(fx: float, fy: float, cx: float, cy: float, original_size: Tuple[int, int],
                     render_size: Tuple[int, int]) -> Tensor:
    """K at the render size. [3, 3]

    Same aspect ratio (within 1%): per-axis scaling, exactly as drivestudio resizes. Otherwise scale by the width
    ratio and re-centre vertically, which crops or extends the view instead of stretching it.
    """
    (orig_h, orig_w), (height, width) = original_size, render_size
    if abs((orig_w / orig_h) / (width / height) - 1.0) < 0.01:
        sx, sy, shift_y = width / orig_w, height / orig_h, 0.0
    else:
        sx = sy = width / orig_w
        shift_y = 0.5 * (height - orig_h * sy)
    return torch.tensor([[fx * sx, 0.0, cx * sx], [0.0, fy * sy, cy * sy + shift_y], [0.0, 0.0, 1.0]],
                        dtype=torch.float32)


def _load_matrix(path: Path) -> np.ndarray:
    if not path.is_file():
        raise FileNotFoundError(f"camera file {path} does not exist (drivestudio processed-scene layout expected)")
    return np.loadtxt(path, dtype=np.float64)


def count_scene_frames(scene_dir: Path, dataset: str) -> int:
    if POSE_LAYOUTS[dataset] == "nuscenes":
        return len(list((scene_dir / "extrinsics").glob("*_0.txt")))
    return len(list((scene_dir / "ego_pose").glob("*.txt")))


def load_camera_rig(scene_dir: Path | str, dataset: str = "waymo", camera_ids: Sequence[int] = (0,),
                    num_frames: Optional[int] = None, start_timestep: int = 0,
                    render_size: Optional[Tuple[int, int]] = None) -> CameraRig:
    """Camera-to-world poses [F, C, 4, 4] and intrinsics of a drivestudio processed scene folder.

    All cameras are rendered at one size (one batched rasterization call): the front camera's size for
    `dataset`, or `render_size`; cameras whose native size differs keep their own focal length (see
    `scale_intrinsics`). Lens distortion is ignored, as drivestudio does.
    """
    scene_dir = Path(scene_dir)
    if dataset not in DATASETS:
        raise ValueError(f"dataset must be one of {DATASETS}, got {dataset!r}")
    if not scene_dir.is_dir():
        raise FileNotFoundError(f"scene folder {scene_dir} does not exist")
    height, width = render_size or RENDER_SIZES[dataset]
    layout = POSE_LAYOUTS[dataset]
    if num_frames is None:
        num_frames = count_scene_frames(scene_dir, dataset) - start_timestep
    if num_frames <= 0:
        raise ValueError(f"{scene_dir}: no frames from timestep {start_timestep}")
    timesteps = range(start_timestep, start_timestep + num_frames)
    sizes = CAMERA_ORIGINAL_SIZES[dataset]

    Ks, poses = [], []
    for cam in camera_ids:
        intrinsic = _load_matrix(scene_dir / "intrinsics" / f"{cam}.txt").reshape(-1)  # fx fy cx cy k1 k2 p1 p2 k3
        Ks.append(scale_intrinsics(*intrinsic[:4].tolist(), original_size=sizes.get(cam, sizes[0]),
                                   render_size=(height, width)))
        if layout == "ego":
            cam_to_ego = _load_matrix(scene_dir / "extrinsics" / f"{cam}.txt")
            if dataset == "waymo":
                cam_to_ego = cam_to_ego @ OPENCV_TO_WAYMO_CAMERA.double().numpy()
            ego_start = _load_matrix(scene_dir / "ego_pose" / f"{start_timestep:03d}.txt")
            world_from_start = np.linalg.inv(ego_start)
            cam_poses = [world_from_start @ _load_matrix(scene_dir / "ego_pose" / f"{t:03d}.txt") @ cam_to_ego
                         for t in timesteps]
        else:
            if layout == "pandaset":
                reference = _load_matrix(scene_dir / "ego_pose" / f"{start_timestep:03d}.txt")
            else:  # nuscenes: the front camera at the first timestep is the world origin
                reference = _load_matrix(scene_dir / "extrinsics" / f"{start_timestep:03d}_0.txt")
            world_from_reference = np.linalg.inv(reference)
            cam_poses = [world_from_reference @ _load_matrix(scene_dir / "extrinsics" / f"{t:03d}_{cam}.txt")
                         for t in timesteps]
        poses.append(np.stack(cam_poses))  # [F, 4, 4]
    camtoworlds = torch.from_numpy(np.stack(poses, axis=1)).float()  # [F, C, 4, 4]
    return CameraRig(camtoworlds, torch.stack(Ks), width, height, tuple(camera_ids))
