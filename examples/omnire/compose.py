"""One frame of a driving scene as drivestudio renders it: every node's Gaussians, colours, sky, affine.

At render time every Gaussian node yields activated, world-space Gaussians for the current frame,
colours are evaluated per node outside the rasterizer (SH per camera centre), and all nodes go into
ONE `gsplat.rasterization` call with drivestudio's arguments (`RASTERIZE_KWARGS`); the sky fills
`1 - alpha` and an optional affine colour transform follows (`composite_image`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from .checkpoint import DrivingScene, NodeGaussians

# The one rasterization call drivestudio makes per image (configs/omnire.yaml `render:` + trainers/base.py).
RASTERIZE_KWARGS: Dict[str, Any] = dict(
    packed=False, absgrad=True, rasterize_mode="classic", near_plane=0.1, far_plane=1e10,
    render_mode="RGB+ED", radius_clip=0.0,
)


def rasterize_kwargs(variant: str = "3dgs") -> Dict[str, Any]:
    """drivestudio's arguments for the render call of a Gaussian variant (3dgs, 2dgs, 3dgut): RASTERIZE_KWARGS,
    less `rasterize_mode` for 2dgs (gsplat's `rasterization_2dgs` has no such argument). 3dgut's with_ut and
    with_eval3d are the render call's own (gsplat_lpt.tools.frame.render_frame adds them); it renders "RGB",
    since gsplat 1.5.3's per-pixel 3D evaluation blends exactly three channels (no depth channel)."""
    kwargs = dict(RASTERIZE_KWARGS)
    if variant == "2dgs":
        kwargs.pop("rasterize_mode")
    if variant == "3dgut":
        kwargs["render_mode"] = "RGB"
    return kwargs


@dataclass
class FrameGaussians:
    """Everything one `rasterization` call needs for one frame and a batch of C cameras."""

    means: Tensor  # [N, 3]
    quats: Tensor  # [N, 4]
    scales: Tensor  # [N, 3]
    opacities: Tensor  # [N]
    colors: Tensor  # [C, N, 3] per-view RGB (SH evaluated per camera centre)
    node_counts: Dict[str, int]
    visible_instances: int

    @property
    def count(self) -> int:
        return int(self.means.shape[0])


def evaluate_node_colors(gaussians: NodeGaussians, camera_centres: Tensor) -> Tensor:
    """drivestudio's per-node colours: clamp(SH(deg, normalise(mean - cam centre)) + 0.5, 0, 1). [C, N, 3]"""
    if gaussians.sh_degree == 0:  # drivestudio uses sigmoid(dc) for degree-0 nodes
        return torch.sigmoid(gaussians.sh_coeffs[:, 0])[None].expand(camera_centres.shape[0], -1, -1)
    if gaussians.means.is_cuda:
        from gsplat.cuda._wrapper import spherical_harmonics
    else:
        from gsplat.cuda._torch_impl import _spherical_harmonics as spherical_harmonics
    colors = []
    for centre in camera_centres:  # one camera at a time keeps memory at [N, K, 3]
        viewdirs = F.normalize(gaussians.means - centre, dim=-1)  # [N, 3]
        colors.append(spherical_harmonics(gaussians.sh_degree, viewdirs, gaussians.sh_coeffs))
    return torch.clamp(torch.stack(colors) + 0.5, 0.0, 1.0)  # [C, N, 3]


@torch.no_grad()
def compose_frame(scene: DrivingScene, frame: int, camtoworlds: Tensor) -> FrameGaussians:
    """All nodes of `scene` at `frame`, concatenated in checkpoint order, coloured for each camera.

    camtoworlds [C, 4, 4] (OpenCV axes); the colours are [C, N, 3], one SH evaluation per camera centre."""
    camera_centres = camtoworlds[:, :3, 3]  # [C, 3]
    parts = [node.at_frame(frame) for node in scene.nodes]
    colors = [evaluate_node_colors(part, camera_centres) for part in parts]
    return FrameGaussians(
        means=torch.cat([p.means for p in parts]),
        quats=torch.cat([p.quats for p in parts]),
        scales=torch.cat([p.scales for p in parts]),
        opacities=torch.cat([p.opacities for p in parts]),
        colors=torch.cat(colors, dim=1),
        node_counts={p.name: p.count for p in parts},
        visible_instances=sum(node.visible_instances(frame) for node in scene.nodes),
    )


def sky_colors(scene: DrivingScene, camtoworlds: Tensor, Ks: Tensor, width: int, height: int,
               camera_model: str = "pinhole") -> Optional[Tensor]:
    """The scene's sky seen through every pixel of every camera ([C, H, W, 3]); None without a sky."""
    if scene.sky is None:
        return None
    return scene.sky(pixel_viewdirs(camtoworlds, Ks, width, height, camera_model))


def pixel_viewdirs(camtoworlds: Tensor, Ks: Tensor, width: int, height: int, camera_model: str = "pinhole") -> Tensor:
    """World-space unit ray direction through each pixel centre. [C, 4, 4], [C, 3, 3] -> [C, H, W, 3]

    camera_model "pinhole", or "fisheye": gsplat's OpenCV fisheye without distortion (equidistant: a pixel at
    normalised radius r looks r radians away from the optical axis)."""
    if camera_model not in ("pinhole", "fisheye"):
        raise ValueError(f"camera_model must be 'pinhole' or 'fisheye', got {camera_model!r}")
    device = camtoworlds.device
    ys, xs = torch.meshgrid(torch.arange(height, device=device, dtype=torch.float32) + 0.5,
                            torch.arange(width, device=device, dtype=torch.float32) + 0.5, indexing="ij")
    fx, fy = Ks[:, 0, 0, None, None], Ks[:, 1, 1, None, None]
    cx, cy = Ks[:, 0, 2, None, None], Ks[:, 1, 2, None, None]
    u, v = (xs - cx) / fx, (ys - cy) / fy  # [C, H, W]
    if camera_model == "fisheye":
        theta = torch.sqrt(u * u + v * v)
        along = torch.where(theta > 1e-8, torch.sin(theta) / theta.clamp_min(1e-8), torch.ones_like(theta))
        camera_dirs = torch.stack([u * along, v * along, torch.cos(theta)], -1)
    else:
        camera_dirs = torch.stack([u, v, torch.ones_like(u)], -1)
    world_dirs = torch.einsum("cij,chwj->chwi", camtoworlds[:, :3, :3], camera_dirs)  # [C, H, W, 3]
    return F.normalize(world_dirs, dim=-1)


def composite_image(render_colors: Tensor, render_alphas: Tensor, sky_rgb: Optional[Tensor] = None,
                    affine: Optional[Tensor] = None) -> Tensor:
    """drivestudio's final colour: clamp(rgb, max=1) + sky * (1 - alpha), then the affine transform.

    render_colors [C, H, W, 4] (RGB+ED), render_alphas [C, H, W, 1], sky_rgb [C, H, W, 3] -> [C, H, W, 3]
    """
    rgb = torch.clamp(render_colors[..., :3], max=1.0)
    if sky_rgb is not None:
        rgb = rgb + sky_rgb * (1.0 - render_alphas)
    if affine is not None:
        rgb = rgb @ affine[:, :3].T + affine[:, 3]
    return rgb
