"""Probe scenes: frames built unlike the driving ladder, to check a schedule on loads the ladder does not have.

The ladder's heavy tiles are stacks of tiny Gaussians at a road's vanishing point. A probe puts the load elsewhere
and makes it saturate at other depths; each is placed by where its Gaussians land on the image of a camera at the
origin looking down +z (OpenCV axes), at a 67-degree horizontal field of view:

- `trained-like`: Gaussians through the view frustum with a trained scene's statistics (screen sizes log-normal
  over two decades, opacities piled near 0 and near 1, anisotropic); `trained-like-4k` at 3840 x 2160;
- `floaters`: the same with a few hundred large, faint Gaussians just in front of the camera, over many tiles each
  (the per-warp cull can drop none of them);
- `closeup`: few, large, mostly opaque Gaussians: long lists on every tile, saturated after a few layers;
- `cluster-o<OPACITY>`: a cluster of small Gaussians off the image centre, stacked in depth in front of a
  trained-like scene, at that opacity: 0.004 never saturates, 0.01-0.03 saturate late in the list, 0.1-0.6 early
  (the list length overstates the tile's cost); `dense-o<OPACITY>`: three times the Gaussians on a smaller patch;
- `band`: a horizontal band of faint Gaussians across the image (hundreds of heavy tiles, mild imbalance);
- `two-clusters`: an early- and a late-saturating cluster in one frame;
- `rig-720p`: six 720p cameras round a trained-like scene, a late-saturating cluster seen by the first one.

Later frames of a probe move the camera forward by `PROBE_STEP` world units a frame. Counts scale with `scale`.
"""

from __future__ import annotations

import math
from typing import List, Optional, Tuple

import torch
from torch import Tensor

from .scene import Scene, check_resolution

FOCAL_PER_WIDTH = 0.75  # focal length / image width: a 67-degree horizontal field of view
BEHIND = (12.0, 80.0)  # depths of the scene behind the clusters and bands, which lie at 3-10
PROBE_STEP = 0.05  # world units the camera moves forward per frame
CLUSTER_OPACITIES = ("0.004", "0.01", "0.03", "0.1", "0.6")
DENSE_OPACITIES = ("0.005", "0.02", "0.1")
RIG_CAMERAS = 6


_DESCRIPTIONS = {
    "trained-like": "Gaussians with a trained scene's statistics through the view (balanced)",
    "trained-like-4k": "the trained-like probe at 3840 x 2160 (balanced)",
    "floaters": "trained-like, with a few hundred large faint Gaussians just in front of the camera",
    "closeup": "few, large, mostly opaque Gaussians: long lists on every tile, saturated after a few layers",
    "cluster": "a cluster of small Gaussians stacked in depth off the image centre, at one opacity",
    "dense": "three times a cluster's Gaussians on a smaller patch (a heavier tail)",
    "band": "a band of faint Gaussians across the image: many heavy tiles, mild imbalance",
    "two-clusters": "an early- and a late-saturating cluster in one frame",
    "rig-720p": "six 720p cameras round a trained-like scene, a late-saturating cluster in the first view",
}


def probe_names() -> List[str]:
    """The probe scenes, balanced ones first."""
    return (["trained-like", "trained-like-4k", "floaters", "closeup"]
            + [f"cluster-o{o}" for o in CLUSTER_OPACITIES] + [f"dense-o{o}" for o in DENSE_OPACITIES]
            + ["band", "two-clusters", "rig-720p"])


class ScreenPlacer:
    """World-space Gaussians for a camera at the origin looking down +z, placed by their image position (x, y) in
    pixels, depth z, screen standard deviation in pixels, anisotropy and opacity."""

    def __init__(self, width: int, height: int, seed: int, scale: float):
        self.width, self.height, self.scale = width, height, scale
        self.focal = FOCAL_PER_WIDTH * width
        self.gen = torch.Generator().manual_seed(seed)
        self.parts: List[Tuple[Tensor, ...]] = []

    def count(self, n: int) -> int:
        return max(1, int(round(n * self.scale)))

    def rand(self, *shape: int) -> Tensor:
        return torch.rand(*shape, generator=self.gen)

    def randn(self, *shape: int) -> Tensor:
        return torch.randn(*shape, generator=self.gen)

    def add(self, x: Tensor, y: Tensor, z: Tensor, sigma_px: Tensor, opacity: Tensor,
            anisotropy: Optional[Tensor] = None) -> None:
        n = x.numel()
        means = torch.stack([(x - self.width / 2) * z / self.focal, (y - self.height / 2) * z / self.focal, z], -1)
        anisotropy = torch.ones(n) if anisotropy is None else anisotropy
        base = (sigma_px * z / self.focal)[:, None]
        scales = base * torch.stack([anisotropy.sqrt(), 1 / anisotropy.sqrt(), 0.5 + self.rand(n)], -1)
        quats = torch.nn.functional.normalize(self.randn(n, 4), dim=-1)
        self.parts.append((means, quats, scales, opacity.clamp(0.0, 0.999), self.rand(n, 3)))

    def trained_like(self, n: int, depth: Tuple[float, float] = (1.5, 60.0),
                     log_sigma: Tuple[float, float] = (0.6, 1.1)) -> None:
        """Image positions uniform (a margin beyond the frame), depths log-uniform, screen sigma log-normal (median
        e^0.6, about 1.8 px), opacity the sigmoid of a wide normal (most near 0 or 1)."""
        n = self.count(n)
        x = self.rand(n) * self.width * 1.2 - 0.1 * self.width
        y = self.rand(n) * self.height * 1.2 - 0.1 * self.height
        z = torch.exp(math.log(depth[0]) + self.rand(n) * math.log(depth[1] / depth[0]))
        sigma = torch.exp(log_sigma[0] + log_sigma[1] * self.randn(n)).clamp(0.3, 200.0)
        opacity = torch.sigmoid(2.5 * self.randn(n) - 0.5)
        self.add(x, y, z, sigma, opacity, anisotropy=torch.exp(1.2 * self.randn(n)).clamp(0.05, 20.0))

    def cluster(self, n: int, centre: Tuple[float, float], radius_px: float, opacity: float,
                sigma_px: Tuple[float, float] = (1.0, 4.0), depth: Tuple[float, float] = (3.0, 10.0)) -> None:
        """n small Gaussians within about `radius_px` of `centre` (in a 1920-wide frame's pixels; scaled with the
        width), stacked in depth."""
        n, unit = self.count(n), self.width / 1920
        x = unit * centre[0] + unit * radius_px * self.randn(n) * 0.5
        y = unit * centre[1] + unit * radius_px * self.randn(n) * 0.5
        z = depth[0] + self.rand(n) * (depth[1] - depth[0])
        sigma = unit * (sigma_px[0] + self.rand(n) * (sigma_px[1] - sigma_px[0]))
        self.add(x, y, z, sigma, torch.full((n,), opacity) * (0.8 + 0.4 * self.rand(n)))

    def tensors(self) -> Tuple[Tensor, ...]:
        return tuple(torch.cat(part).contiguous() for part in zip(*self.parts))


def _place(name: str, width: int, height: int, seed: int, scale: float) -> Tuple[ScreenPlacer, int]:
    """The probe's Gaussians and its cameras per frame."""
    g = ScreenPlacer(width, height, seed, scale)
    unit = width / 1920
    if name in ("trained-like", "trained-like-4k"):
        g.trained_like(600_000)
    elif name == "floaters":
        g.trained_like(500_000)
        n = g.count(300)
        g.add(g.rand(n) * width, g.rand(n) * height, 0.5 + g.rand(n), unit * (30 + 150 * g.rand(n)),
              0.02 + 0.2 * g.rand(n), anisotropy=torch.exp(g.randn(n)).clamp(0.2, 5.0))
    elif name == "closeup":
        g.trained_like(60_000, depth=(0.5, 3.0), log_sigma=(3.0 + math.log(unit), 0.7))
    elif name.startswith(("cluster-o", "dense-o")):
        g.trained_like(300_000, depth=BEHIND)
        count, radius = (300_000, 60.0) if name.startswith("cluster") else (900_000, 36.0)
        g.cluster(count, (1350.0, 380.0), radius, float(name.split("-o")[1]))
    elif name == "band":
        g.trained_like(300_000, depth=BEHIND)
        n = g.count(1_200_000)
        g.add(g.rand(n) * width, height * 600 / 1080 + unit * 16 * g.randn(n), 3.0 + 7.0 * g.rand(n),
              unit * (1.0 + 3.0 * g.rand(n)), 0.01 + 0.03 * g.rand(n))
    elif name == "two-clusters":
        g.trained_like(300_000, depth=BEHIND)
        g.cluster(150_000, (500.0, 450.0), 50.0, 0.4)  # early: opaque stacks
        g.cluster(150_000, (1400.0, 520.0), 50.0, 0.015)  # late: a faint veil
    elif name == "rig-720p":
        g.trained_like(250_000, depth=BEHIND)
        scene_part = g.tensors()
        g.cluster(200_000, (1350.0, 450.0), 60.0, 0.02)  # seen by the first camera only
        parts = [g.tensors()]
        for camera in range(1, RIG_CAMERAS):  # a copy of the scene for each of the other cameras to see
            parts.append((_yawed(scene_part[0], camera),) + scene_part[1:])
        g.parts = parts
        return g, RIG_CAMERAS
    else:
        raise ValueError(f"unknown probe scene {name!r}; probe scenes are: {', '.join(probe_names())}")
    return g, 1


def _rig_yaw(camera: int) -> float:
    return 2 * math.pi * camera / RIG_CAMERAS


def _yawed(means: Tensor, camera: int) -> Tensor:
    """Points that camera `camera` of the rig sees where the first camera sees `means`."""
    c, s = math.cos(_rig_yaw(camera)), math.sin(_rig_yaw(camera))
    rotation = torch.tensor([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])  # the inverse of the camera's yaw
    return means @ rotation.T


def _cameras(width: int, height: int, frames: int, cameras_per_frame: int) -> Tuple[Tensor, Tensor]:
    focal = FOCAL_PER_WIDTH * width
    K = torch.tensor([[focal, 0.0, width / 2], [0.0, focal, height / 2], [0.0, 0.0, 1.0]])
    viewmats = []
    for frame in range(frames):
        for camera in range(cameras_per_frame):
            c, s = math.cos(_rig_yaw(camera)), math.sin(_rig_yaw(camera))
            viewmat = torch.tensor([[c, 0.0, -s, 0.0], [0.0, 1.0, 0.0, 0.0], [s, 0.0, c, 0.0], [0.0, 0.0, 0.0, 1.0]])
            viewmat[2, 3] = -PROBE_STEP * frame  # the camera moved forward (along its own z)
            viewmats.append(viewmat)
    return torch.stack(viewmats), K.repeat(len(viewmats), 1, 1)


def probe_size(name: str) -> Tuple[int, int]:
    """The probe's own image size (the rig's 720p, the 4K probe's 2160p, 1080p otherwise)."""
    return {"trained-like-4k": (3840, 2160), "rig-720p": (1280, 720)}.get(name, (1920, 1080))


def make_probe_scene(name: str, seed: int = 0, width: Optional[int] = None, height: Optional[int] = None,
                     scale: float = 1.0, frames: Optional[int] = None) -> Scene:
    """A probe scene by name (see `probe_names()`), seeded; `scale` multiplies every Gaussian count; the image size
    is the probe's own unless given (the field of view stays)."""
    if name not in probe_names():
        raise ValueError(f"unknown probe scene {name!r}; probe scenes are: {', '.join(probe_names())}")
    default_width, default_height = probe_size(name)
    width, height = width or default_width, height or default_height
    check_resolution(width, height)
    if not (scale > 0 and math.isfinite(scale)):
        raise ValueError(f"scene scale must be a positive number, got {scale}")
    frames = 2 if frames is None else frames
    if frames < 1:
        raise ValueError(f"frames must be >= 1, got {frames}")
    placer, cameras_per_frame = _place(name, width, height, seed, scale)
    means, quats, scales, opacities, colors = placer.tensors()
    viewmats, Ks = _cameras(width, height, frames, cameras_per_frame)
    description = _DESCRIPTIONS[name.split("-o")[0] if "-o" in name else name]
    return Scene(name=name, description=description, means=means, quats=quats, scales=scales, opacities=opacities,
                 colors=colors, viewmats=viewmats, Ks=Ks, width=width, height=height,
                 cameras_per_frame=cameras_per_frame, source=f"probe:{name}:seed={seed}:scale={scale:g}")
