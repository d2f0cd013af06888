"""Pure-PyTorch oracle of the 3DGUT blending stage (gsplat 1.5.3's rasterize_to_pixels_eval3d; CPU or GPU;
slow, for tests).

Given each pixel's world-space ray (o, d), Gaussian i with mean mu, rotation R (from its quaternion) and
scales s is evaluated in its own whitened frame, M = S^-1 R^T (gsplat's iscl_rot): with o' = M (o - mu) and
d' = M d / |M d|, the response is exp(-|d' x o'|^2 / 2), i.e. the Gaussian's density at the point of the
ray nearest to its mean (|d' x o'| is the whitened distance from the mean to the ray). alpha =
min(0.999, opacity * response), skipped below 1/255; blending front to back as `reference.blend_list`.

Rays: `pinhole_rays` unprojects pixel centres through an undistorted pinhole camera with a global shutter
(gsplat's PerfectPinholeCameraModel); other camera models can pass their rays in.
"""

from __future__ import annotations

import math
from typing import Optional, Tuple

import torch
from torch import Tensor

from . import constants
from .reference import blend_list

ALPHA_THRESHOLD = constants.ALPHA_THRESHOLD[1]
MAX_ALPHA = constants.MAX_ALPHA[1]


def pinhole_rays(viewmats: Tensor, Ks: Tensor, width: int, height: int) -> Tuple[Tensor, Tensor]:
    """World-space rays through the pixel centres (x + 0.5, y + 0.5) of pinhole cameras.

    viewmats [..., 4, 4] world-to-camera, Ks [..., 3, 3]. Returns origins and unit directions, each
    [..., H, W, 3]: the camera centre -R^T t, and R^T of the normalised camera-space direction
    ((x - cx) / fx, (y - cy) / fy, 1)."""
    dtype, device = viewmats.dtype, viewmats.device
    px = torch.arange(width, dtype=dtype, device=device) + 0.5
    py = torch.arange(height, dtype=dtype, device=device) + 0.5
    fx, fy = Ks[..., 0, 0, None, None], Ks[..., 1, 1, None, None]
    cx, cy = Ks[..., 0, 2, None, None], Ks[..., 1, 2, None, None]
    u = (px[None, :] - cx) / fx  # [..., 1, W]
    v = (py[:, None] - cy) / fy  # [..., H, 1]
    u, v = torch.broadcast_tensors(u, v)
    camera = torch.stack([u, v, torch.ones_like(u)], dim=-1)
    camera = camera / torch.linalg.vector_norm(camera, dim=-1, keepdim=True)
    R, t = viewmats[..., :3, :3], viewmats[..., :3, 3]
    directions = torch.einsum("...ji,...hwj->...hwi", R, camera)  # R^T d
    origins = -torch.einsum("...ji,...j->...i", R, t)  # -R^T t
    return origins[..., None, None, :].expand_as(directions), directions


def quat_to_rotmat(quats: Tensor) -> Tensor:
    """[M, 4] quaternions (w, x, y, z), normalised here, to [M, 3, 3] rotation matrices."""
    w, x, y, z = (quats / torch.linalg.vector_norm(quats, dim=-1, keepdim=True)).unbind(-1)
    return torch.stack([
        torch.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        torch.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        torch.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
    ], -2)


def iscl_rot(quats: Tensor, scales: Tensor) -> Tensor:
    """[M, 3, 3] M = S^-1 R^T: world offsets to the Gaussian's whitened frame."""
    return torch.diag_embed(1.0 / scales) @ quat_to_rotmat(quats).transpose(-1, -2)


def eval3d_alphas(means: Tensor, whiten: Tensor, opacities: Tensor, ray_o: Tensor, ray_d: Tensor) -> Tensor:
    """[P, M] alpha of Gaussian m (mean [M, 3], iscl_rot [M, 3, 3], opacity [M]) along the ray of pixel p
    (origins and directions [P, 3]), 0 where gsplat skips it."""
    gro = torch.einsum("mij,pmj->pmi", whiten, ray_o[:, None, :] - means[None, :, :])
    grd = torch.einsum("mij,pj->pmi", whiten, ray_d)
    length = torch.linalg.vector_norm(grd, dim=-1, keepdim=True)
    grd = torch.where(length > 0, grd / length, grd)
    gcrod = torch.linalg.cross(grd, gro, dim=-1)
    power = -0.5 * (gcrod * gcrod).sum(-1)
    alpha = torch.clamp_max(opacities[None, :] * torch.exp(power), MAX_ALPHA)
    return torch.where(alpha < ALPHA_THRESHOLD, torch.zeros_like(alpha), alpha)


def blend_eval3d_sequential(
    means: Tensor, quats: Tensor, scales: Tensor, colors: Tensor, opacities: Tensor, viewmats: Tensor, Ks: Tensor,
    image_width: int, image_height: int, tile_size: int, isect_offsets: Tensor, flatten_ids: Tensor,
    backgrounds: Optional[Tensor] = None, rays: Optional[Tuple[Tensor, Tensor, Tensor]] = None,
) -> Tuple[Tensor, Tensor, Tensor]:
    """gsplat's rasterize_to_pixels_eval3d pixel for pixel: colors [..., C, H, W, D], alphas [..., C, H, W, 1],
    last_ids [..., C, H, W] (index into flatten_ids; 0 where nothing was blended).

    Shapes as gsplat takes them: means, quats, scales [..., N, *], colors [..., C, N, D], opacities
    [..., C, N], viewmats [..., C, 4, 4], Ks [..., C, 3, 3], isect_offsets [..., C, tile_height, tile_width];
    flatten_ids index the [B * C * N] rows (Gaussian id % N of batch id // (C * N)). `rays` = (origins,
    directions, valid) [..., C, H, W, 3], [..., C, H, W, 3], [..., C, H, W] replaces the pinhole rays (a
    pixel whose ray is not valid blends nothing, as gsplat's)."""
    batch = tuple(means.shape[:-2])
    N, C = means.shape[-2], viewmats.shape[-3]
    B, D = math.prod(batch), colors.shape[-1]
    I = B * C
    if rays is None:
        origins, directions = pinhole_rays(viewmats, Ks, image_width, image_height)
        valid = torch.ones(origins.shape[:-1], dtype=torch.bool, device=origins.device)
    else:
        origins, directions, valid = rays
    origins = origins.reshape(I, image_height, image_width, 3)
    directions = directions.reshape(I, image_height, image_width, 3)
    valid = valid.reshape(I, image_height, image_width)
    means_b, quats_b, scales_b = means.reshape(B * N, 3), quats.reshape(B * N, 4), scales.reshape(B * N, 3)
    colors_f, opacities_f = colors.reshape(I * N, D), opacities.reshape(I * N)
    offsets = isect_offsets.reshape(-1)
    tile_height, tile_width = isect_offsets.shape[-2:]
    tiles = tile_height * tile_width
    n_isects = flatten_ids.numel()
    out_colors = colors.new_zeros(I, image_height, image_width, D)
    out_T = colors.new_ones(I, image_height, image_width)
    out_last = torch.zeros(I, image_height, image_width, dtype=torch.int32, device=colors.device)
    local = torch.arange(tile_size * tile_size, device=colors.device)
    for image in range(I):
        for tile in range(tiles):
            item = image * tiles + tile
            start = int(offsets[item])
            end = n_isects if item == I * tiles - 1 else int(offsets[item + 1])
            ty, tx = divmod(tile, tile_width)
            rows, cols = ty * tile_size + local // tile_size, tx * tile_size + local % tile_size
            inside = (rows < image_height) & (cols < image_width)
            r, c = rows[inside], cols[inside]
            ids = flatten_ids[start:end].long()
            rows_b = (ids // (C * N)) * N + ids % N  # batch, Gaussian
            alphas = eval3d_alphas(means_b[rows_b], iscl_rot(quats_b[rows_b], scales_b[rows_b]), opacities_f[ids],
                                   origins[image, r, c], directions[image, r, c])
            alphas = torch.where(valid[image, r, c][:, None], alphas, torch.zeros_like(alphas))
            color, T, _, position = blend_list(alphas, colors_f[ids])
            out_colors[image, r, c] = color
            out_T[image, r, c] = T
            out_last[image, r, c] = torch.where(position >= 0, position + start, torch.zeros_like(position)).to(torch.int32)
    if backgrounds is not None:
        out_colors = out_colors + out_T[..., None] * backgrounds.reshape(I, 1, 1, D)
    dims = batch + (C,)
    return (out_colors.reshape(dims + (image_height, image_width, D)),
            (1.0 - out_T).reshape(dims + (image_height, image_width, 1)),
            out_last.reshape(dims + (image_height, image_width)))
