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


# ------------------------------------------------------------------------------------------------------
# The per-warp cull bound of kernels/blend_3dgut.cu (pinhole cameras without distortion, global shutter), in
# float32 with the kernel's constants and order of operations (the kernel's fast-math square roots and divisions,
# and its FMAs, round within the margins the bound carries; see the argument in blend_3dgut.cu).

_INF = float("inf")


def cull_constants_3dgut(means: Tensor, whiten: Tensor, opacities: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    """Gaussian3DGUT::cull_constants: (cull_limit, cull_error, cull_iso), each [M] float32, from means [M, 3],
    iscl_rot [M, 3, 3] (row i of M is whiten[:, i, :]) and opacities [M]. cull_limit +inf (or NaN): never culled."""
    f32 = torch.float32
    means, whiten, opacities = means.to(f32), whiten.to(f32), opacities.to(f32)
    ok = (means.abs() <= 1e14).all(-1) & (whiten.abs() <= 1e15).flatten(1).all(-1)
    g = torch.einsum("mik,mjk->mij", whiten, whiten)  # Gram matrix of the rows
    diag = torch.diagonal(g, dim1=-2, dim2=-1)
    lo, hi = diag.min(-1).values, diag.max(-1).values
    ok &= (lo >= 1e-30) & (hi <= 1e30)
    r = torch.rsqrt(diag)
    c01 = g[:, 0, 1].abs() * r[:, 0] * r[:, 1]
    c02 = g[:, 0, 2].abs() * r[:, 0] * r[:, 2]
    c12 = g[:, 1, 2].abs() * r[:, 1] * r[:, 2]
    eps_q = torch.maximum(c01 + c02, torch.maximum(c01 + c12, c02 + c12)) + 1e-6
    ok &= eps_q <= 1e-4
    rho_f = torch.sqrt(diag.sum(-1))
    sigma_min = torch.sqrt(lo) * torch.sqrt(1 - eps_q) * 0.99999
    kappa = rho_f / sigma_min
    ok &= kappa <= 1e5
    twice_log = 2 * torch.log(opacities * 255)
    limit = twice_log + 1e-4 * (1 + torch.clamp_max(twice_log.abs(), 1e30))
    inf = torch.full_like(limit, _INF)
    zero = torch.zeros_like(limit)
    return (torch.where(ok, limit, inf), torch.where(ok, 6.6e-8 * rho_f * (4 * kappa + 32), zero),
            torch.where(ok, (eps_q + 2e-6) / sigma_min * 1.001, zero))


def cull_region_3dgut(W: Tensor, origin: Tensor, K: Tensor, box) -> Optional[Tuple[Tensor, Tensor]]:
    """Gaussian3DGUT::cull_region for a pinhole camera without distortion and a global shutter: W [3, 3] (its
    columns: the world directions of the camera axes, gsplat's R_inv), origin [3], K [3, 3], box = (x0, x1, y0, y1)
    pixel centres. Returns (origin and |o| [4], unit face normals [4, 3]) float32, or None: no bound."""
    f32 = torch.float32
    W, origin, K = W.to(f32), origin.to(f32), K.to(f32)
    fx, fy, cx, cy = K[0, 0], K[1, 1], K[0, 2], K[1, 2]
    if not all(float(v.abs()) < 1e30 for v in (fx, fy, cx, cy)):
        return None
    x0, x1, y0, y1 = (torch.tensor(v, dtype=f32) for v in box)
    ax, bx = (x0 - cx) / fx, (x1 - cx) / fx
    ay, by = (y0 - cy) / fy, (y1 - cy) / fy
    A, B = torch.maximum(ax.abs(), bx.abs()), torch.maximum(ay.abs(), by.abs())
    if not float(A + B) <= 100 or any(bool(v.isnan()) for v in (ax, bx, ay, by)):
        return None
    xi = 4e-5 * (1 + A + B) * (1 + A + B)
    a0, a1 = torch.minimum(ax, bx) - xi, torch.maximum(ax, bx) + xi
    b0, b1 = torch.minimum(ay, by) - xi, torch.maximum(ay, by) + xi
    w0, w1, w2 = W[:, 0], W[:, 1], W[:, 2]
    G = W.T @ W
    eps_w = ((G - torch.eye(3, dtype=f32)).abs().sum(-1)).max()
    if not (float(eps_w) <= 1e-5 and bool((origin.abs() <= 1e15).all())):
        return None
    normals = torch.stack([w0 - a0 * w2, a1 * w2 - w0, w1 - b0 * w2, b1 * w2 - w1])
    normals = normals * torch.rsqrt((normals * normals).sum(-1, keepdim=True))
    return torch.cat([origin, torch.linalg.vector_norm(origin)[None]]), normals


def may_contribute_3dgut(means: Tensor, whiten: Tensor, opacities: Tensor,
                         region: Optional[Tuple[Tensor, Tensor]]) -> Tensor:
    """Gaussian3DGUT::may_contribute for Gaussians [M] against one warp's region: False only where the Gaussian
    cannot reach alpha >= 1/255 at any pixel of the warp. [M] bool"""
    if region is None:
        return torch.ones(means.shape[0], dtype=torch.bool, device=means.device)
    f32 = torch.float32
    means, whiten = means.to(f32), whiten.to(f32)
    limit, error, iso = cull_constants_3dgut(means, whiten, opacities)
    origin, normals = region
    r = origin[:3] - means  # [M, 3]
    distance = torch.sqrt((r * r).sum(-1))
    inverse_rho2 = 1 / (whiten * whiten).sum(-1)  # [M, 3]
    numerators = r @ normals.T  # [M, 4]
    q = torch.einsum("mik,fk->mfi", whiten, normals) * inverse_rho2[:, None, :]  # [M, 4, 3]
    t = numerators / (torch.sqrt((q * q).sum(-1)) * 1.00001 + iso[:, None])
    pos = torch.clamp_min(t.max(-1).values, 0)
    neg = torch.clamp_min((-t).max(-1).values, 0)
    lhs = torch.minimum(pos, neg) * 0.99997 - error * (distance + origin[3])
    culled = (lhs > 0) & (lhs * lhs > limit)
    culled = torch.where(limit < _INF, torch.where(limit < 0, torch.ones_like(culled), culled),
                         torch.zeros_like(culled))
    return ~culled
