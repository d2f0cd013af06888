"""One frame's inputs to the alpha-blending stage, prepared with gsplat's own projection and tiling.

Benchmarks and examples use this to time `rasterize_to_pixels` alone (the stage we replace) next to
the end-to-end `gsplat.rasterization` call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple

import torch
from torch import Tensor

from ..config import LPTConfig


@dataclass
class BlendInputs:
    """Arguments of `rasterize_to_pixels` for one frame (a batch of C cameras)."""

    means2d: Tensor  # [C, N, 2]
    conics: Tensor  # [C, N, 3]
    colors: Tensor  # [C, N, D]
    opacities: Tensor  # [C, N]
    width: int
    height: int
    tile_size: int
    isect_offsets: Tensor  # [C, tile_height, tile_width]
    flatten_ids: Tensor  # [n_isects]
    backgrounds: Optional[Tensor] = None  # [C, D]

    def blend(self, mode: str = "auto", config: Optional[LPTConfig] = None) -> Tuple[Tensor, Tensor]:
        """Alpha blending with gsplat's kernel (mode "vanilla") or ours."""
        from .. import hook
        from ..variants.gaussian3d import rasterize_to_pixels

        args = (self.means2d, self.conics, self.colors, self.opacities, self.width, self.height,
                self.tile_size, self.isect_offsets, self.flatten_ids)
        if mode == "vanilla":
            return hook.original("rasterize_to_pixels")(*args, backgrounds=self.backgrounds)
        config = config or LPTConfig(mode=mode)
        if config.mode != mode:
            config = config.replace(mode=mode)
        return rasterize_to_pixels(*args, backgrounds=self.backgrounds, config=config)

    def blend_with_stats(self, mode: str = "auto", config: Optional[LPTConfig] = None):
        """Our kernels (a mode of LPTConfig), with the schedule report: (colors, alphas, report)."""
        from ..variants.gaussian3d import rasterize_to_pixels

        config = (config or LPTConfig(mode=mode)).replace(mode=mode)
        return rasterize_to_pixels(self.means2d, self.conics, self.colors, self.opacities, self.width,
                                   self.height, self.tile_size, self.isect_offsets, self.flatten_ids,
                                   backgrounds=self.backgrounds, config=config, return_stats=True)


@torch.no_grad()
def project_frame(
    means: Tensor,  # [N, 3]
    quats: Tensor,  # [N, 4]
    scales: Tensor,  # [N, 3] (activated)
    opacities: Tensor,  # [N] (activated)
    colors: Tensor,  # [N, D] or [N, K, 3] with sh_degree
    viewmats: Tensor,  # [C, 4, 4]
    Ks: Tensor,  # [C, 3, 3]
    width: int,
    height: int,
    tile_size: int = 16,
    sh_degree: Optional[int] = None,
    near_plane: float = 0.01,
    far_plane: float = 1e10,
    backgrounds: Optional[Tensor] = None,  # [C, D]
) -> BlendInputs:
    """gsplat's projection, SH, `isect_tiles` and `isect_offset_encode` (CUDA), unpacked, classic mode."""
    from gsplat.cuda._wrapper import (
        fully_fused_projection,
        isect_offset_encode,
        isect_tiles,
        spherical_harmonics,
    )

    C = viewmats.shape[0]
    radii, means2d, depths, conics, _ = fully_fused_projection(
        means, None, quats, scales, viewmats, Ks, width, height, packed=False,
        near_plane=near_plane, far_plane=far_plane, opacities=opacities,
    )
    opacities_c = opacities[None].expand(C, -1).contiguous()
    if sh_degree is not None:
        campos = torch.linalg.inv(viewmats)[:, :3, 3]  # [C, 3]
        dirs = means[None] - campos[:, None]  # [C, N, 3]
        coeffs = colors[None].expand(C, *colors.shape)
        colors_c = torch.clamp_min(spherical_harmonics(sh_degree, dirs, coeffs, masks=(radii > 0).all(-1)) + 0.5, 0.0)
    else:
        colors_c = colors[None].expand(C, *colors.shape).contiguous()
    tile_width = math.ceil(width / tile_size)
    tile_height = math.ceil(height / tile_size)
    _, isect_ids, flatten_ids = isect_tiles(means2d, radii, depths, tile_size, tile_width, tile_height)
    isect_offsets = isect_offset_encode(isect_ids, C, tile_width, tile_height)
    return BlendInputs(means2d.contiguous(), conics.contiguous(), colors_c.contiguous(), opacities_c,
                       width, height, tile_size, isect_offsets, flatten_ids, backgrounds)
