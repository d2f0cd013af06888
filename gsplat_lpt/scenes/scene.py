"""What every scene is: Gaussians in gsplat's activated parametrisation plus the cameras of every frame.

`Scene` is what the built-in generator (`builtin`) and the file loaders (`loaders`) return and what the
tools (bench, analyze, render) consume. World-to-camera `viewmats` use gsplat's convention (OpenCV
axes: x right, y down, z forward). The camera helpers here (look_at, orbit and fly-through paths, a car
rig) serve both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional, Sequence, Tuple

import torch
from torch import Tensor

DEFAULT_WIDTH = 1920
DEFAULT_HEIGHT = 1080
MAX_IMAGE_SIDE = 8192  # larger images are refused (gsplat's tile ids and memory would not cope)


@dataclass
class Scene:
    """Gaussians in gsplat's activated parametrisation plus the cameras of every frame.

    A frame is one rasterize call: `cameras_per_frame` consecutive cameras rendered as one batch
    (1 for a camera path, 6 for the rig)."""

    name: str
    description: str
    means: Tensor  # [N, 3]
    quats: Tensor  # [N, 4] wxyz, unit length
    scales: Tensor  # [N, 3] linear
    opacities: Tensor  # [N] in (0, 1)
    colors: Tensor  # [N, 3] RGB in [0, 1], or [N, (sh_degree + 1)^2, 3] SH coefficients
    viewmats: Tensor  # [C, 4, 4] world-to-camera, OpenCV axes
    Ks: Tensor  # [C, 3, 3]
    width: int
    height: int
    cameras_per_frame: int = 1
    sh_degree: Optional[int] = None  # None: `colors` are RGB
    source: str = "built-in"

    @property
    def num_gaussians(self) -> int:
        return int(self.means.shape[0])

    @property
    def num_frames(self) -> int:
        return int(self.viewmats.shape[0]) // self.cameras_per_frame

    def frame_cameras(self, frame: int) -> Tuple[Tensor, Tensor]:
        """(viewmats [c, 4, 4], Ks [c, 3, 3]) of one frame."""
        if not 0 <= frame < self.num_frames:
            raise IndexError(f"frame {frame} out of range [0, {self.num_frames})")
        start = frame * self.cameras_per_frame
        stop = start + self.cameras_per_frame
        return self.viewmats[start:stop], self.Ks[start:stop]

    def with_cameras(self, viewmats: Tensor, Ks: Tensor, width: int, height: int, cameras_per_frame: int = 1) -> "Scene":
        return replace(self, viewmats=viewmats, Ks=Ks, width=width, height=height, cameras_per_frame=cameras_per_frame)

    def to(self, device) -> "Scene":
        return replace(
            self,
            means=self.means.to(device),
            quats=self.quats.to(device),
            scales=self.scales.to(device),
            opacities=self.opacities.to(device),
            colors=self.colors.to(device),
            viewmats=self.viewmats.to(device),
            Ks=self.Ks.to(device),
        )

    def summary(self) -> str:
        return (f"{self.name}: {self.num_gaussians:,} Gaussians, {self.num_frames} frame(s) x "
                f"{self.cameras_per_frame} camera(s), {self.width}x{self.height}")


# ----------------------------------------------------------------------------------------------
# Cameras
# ----------------------------------------------------------------------------------------------


def look_at(eye: Sequence[float], target: Sequence[float], up: Sequence[float] = (0.0, 0.0, 1.0)) -> Tensor:
    """World-to-camera matrix (OpenCV axes) of a camera at `eye` looking at `target`. [4, 4]"""
    eye_t = torch.as_tensor(eye, dtype=torch.float64)
    forward = torch.as_tensor(target, dtype=torch.float64) - eye_t
    forward = forward / forward.norm()
    right = torch.linalg.cross(forward, torch.as_tensor(up, dtype=torch.float64))
    if float(right.norm()) < 1e-9:  # looking straight along `up`: any right vector will do
        right = torch.linalg.cross(forward, torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64))
    right = right / right.norm()
    down = torch.linalg.cross(forward, right)
    rotation = torch.stack([right, down, forward])  # rows: camera axes in world coordinates
    viewmat = torch.eye(4, dtype=torch.float64)
    viewmat[:3, :3] = rotation
    viewmat[:3, 3] = -rotation @ eye_t
    return viewmat.float()


def intrinsics(width: int, height: int, horizontal_fov_deg: float = 70.0) -> Tensor:
    """Pinhole K with square pixels and the principal point at the image centre. [3, 3]"""
    focal = 0.5 * width / math.tan(math.radians(horizontal_fov_deg) / 2)
    return torch.tensor([[focal, 0.0, width / 2], [0.0, focal, height / 2], [0.0, 0.0, 1.0]])


def orbit_path(
    center: Sequence[float], radius: float, elevation: float, num_views: int, width: int, height: int,
    horizontal_fov_deg: float = 60.0, start_angle_deg: float = 0.0, sweep_deg: float = 360.0,
    up: Sequence[float] = (0.0, 0.0, 1.0),
) -> Tuple[Tensor, Tensor]:
    """Cameras on a circle around `center` at height `elevation` above it, all looking at it. ([V,4,4], [V,3,3])"""
    up_t = torch.as_tensor(up, dtype=torch.float64)
    up_t = up_t / up_t.norm()
    # Two unit vectors spanning the orbit plane, perpendicular to `up`.
    helper = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
    if abs(float(helper @ up_t)) > 0.9:
        helper = torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64)
    axis_a = torch.linalg.cross(up_t, helper)
    axis_a = axis_a / axis_a.norm()
    axis_b = torch.linalg.cross(up_t, axis_a)
    center_t = torch.as_tensor(center, dtype=torch.float64)
    full_circle = abs(sweep_deg) >= 360.0
    viewmats = []
    for view in range(num_views):
        fraction = view / num_views if full_circle else view / max(num_views - 1, 1)
        angle = math.radians(start_angle_deg + sweep_deg * fraction)
        eye = center_t + radius * (math.cos(angle) * axis_a + math.sin(angle) * axis_b) + elevation * up_t
        viewmats.append(look_at(eye.tolist(), center_t.tolist(), up_t.tolist()))
    K = intrinsics(width, height, horizontal_fov_deg)
    return torch.stack(viewmats), K[None].repeat(num_views, 1, 1)


def flythrough_path(
    start: Sequence[float], end: Sequence[float], num_views: int, width: int, height: int,
    horizontal_fov_deg: float = 70.0, look_ahead: float = 50.0, pitch_deg: float = -2.0,
    up: Sequence[float] = (0.0, 0.0, 1.0),
) -> Tuple[Tensor, Tensor]:
    """Cameras moving on a straight line from `start` to `end`, looking along it (slightly pitched). ([V,4,4], [V,3,3])"""
    start_t = torch.as_tensor(start, dtype=torch.float64)
    end_t = torch.as_tensor(end, dtype=torch.float64)
    direction = end_t - start_t
    if float(direction.norm()) == 0.0:
        raise ValueError("flythrough_path needs start != end")
    direction = direction / direction.norm()
    up_t = torch.as_tensor(up, dtype=torch.float64)
    viewmats = []
    for view in range(num_views):
        fraction = view / max(num_views - 1, 1)
        eye = start_t + fraction * (end_t - start_t)
        target = eye + look_ahead * direction + look_ahead * math.tan(math.radians(pitch_deg)) * up_t
        viewmats.append(look_at(eye.tolist(), target.tolist(), up))
    K = intrinsics(width, height, horizontal_fov_deg)
    return torch.stack(viewmats), K[None].repeat(num_views, 1, 1)


def rig_cameras(
    eye: Sequence[float], heading_deg: float, width: int, height: int,
    yaws_deg: Sequence[float] = (0.0, 55.0, -55.0, 110.0, -110.0, 180.0), horizontal_fov_deg: float = 70.0,
    pitch_deg: float = -2.0,
) -> Tuple[Tensor, Tensor]:
    """A car-mounted rig: one camera per yaw (relative to `heading_deg`, 0 = +y), all at `eye`. ([R,4,4], [R,3,3])"""
    viewmats = []
    for yaw in yaws_deg:
        angle = math.radians(90.0 + heading_deg + yaw)  # heading 0 looks along +y; positive yaw turns left
        direction = (math.cos(angle), math.sin(angle), math.tan(math.radians(pitch_deg)))
        target = [eye[i] + 50.0 * direction[i] for i in range(3)]
        viewmats.append(look_at(eye, target))
    K = intrinsics(width, height, horizontal_fov_deg)
    return torch.stack(viewmats), K[None].repeat(len(yaws_deg), 1, 1)


def check_resolution(width: int, height: int) -> None:
    """Refuse sizes gsplat cannot render (one clear message)."""
    if not (isinstance(width, int) and isinstance(height, int)):
        raise ValueError(f"resolution must be integers, got {width!r}x{height!r}")
    if width < 1 or height < 1 or width > MAX_IMAGE_SIDE or height > MAX_IMAGE_SIDE:
        raise ValueError(f"impossible resolution {width}x{height}: width and height must be in [1, {MAX_IMAGE_SIDE}]")
