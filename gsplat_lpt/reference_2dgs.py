"""Pure-PyTorch oracles of the 2DGS blending stage (CPU or GPU; slow, for tests).

`alphas_2dgs` is gsplat 1.5.3's per-pixel evaluation (rasterize_to_pixels_2dgs_fwd): the ray-splat
intersection through the ray transform's rows, the 2D low-pass weight, their minimum, alpha. `blend_list_2dgs`
is its loop body front to back (colours, normals, distortion, median depth, last and median ids), and
`blend_frame_2dgs` renders a whole frame, optionally cutting listed tiles into depth chunks composited the
way kernels/blend_2dgs.cu and the core do (Eq. (5) for colours and normals, the distortion composition, the
median re-walk from chunk 0's transmittance). `may_contribute_2dgs` is the float32 twin of the cull bound.
"""

from __future__ import annotations

import math
from typing import Dict, Optional, Tuple

import torch
from torch import Tensor

from .reference import ALPHA_THRESHOLD, MAX_ALPHA, TRANSMITTANCE_THRESHOLD, _tile_pixels, chunk_bounds

FILTER_INV_SQUARE_2DGS = 2.0


def alphas_2dgs(means2d: Tensor, ray_transforms: Tensor, opacities: Tensor, ids: Tensor, px: Tensor,
                py: Tensor) -> Tensor:
    """[P, M] alpha of Gaussian ids[m] at pixel centre (px[p], py[p]), 0 where gsplat skips it; in the dtype
    of the inputs, in gsplat's order of operations."""
    M = ray_transforms[ids]  # [M, 3, 3]: rows u_M, v_M, w_M
    u, v, w = M[None, :, 0], M[None, :, 1], M[None, :, 2]
    x, y = px[:, None, None], py[:, None, None]
    h_u = x * w - u  # [P, M, 3]
    h_v = y * w - v
    cross_x = h_u[..., 1] * h_v[..., 2] - h_v[..., 1] * h_u[..., 2]
    cross_y = h_u[..., 2] * h_v[..., 0] - h_v[..., 2] * h_u[..., 0]
    cross_z = h_u[..., 0] * h_v[..., 1] - h_v[..., 0] * h_u[..., 1]
    s_x, s_y = cross_x / cross_z, cross_y / cross_z
    weight_3d = s_x * s_x + s_y * s_y
    xy = means2d[ids]
    d_x = xy[None, :, 0] - px[:, None]
    d_y = xy[None, :, 1] - py[:, None]
    weight_2d = FILTER_INV_SQUARE_2DGS * (d_x * d_x + d_y * d_y)
    sigma = 0.5 * torch.fmin(weight_3d, weight_2d)  # CUDA's min(float, float) is fminf: NaN-ignoring
    alpha = torch.fmin(opacities[ids][None, :] * torch.exp(-sigma), torch.tensor(MAX_ALPHA, dtype=sigma.dtype))
    skip = (cross_z == 0) | (sigma < 0) | (alpha < ALPHA_THRESHOLD) | torch.isnan(alpha)
    return torch.where(skip, torch.zeros_like(alpha), alpha)


def blend_list_2dgs(alphas: Tensor, colors: Tensor, normals: Tensor, positions: Tensor) -> Dict[str, Tensor]:
    """gsplat's 2DGS loop over one depth-sorted list from T = 1 for P pixels.

    alphas [P, M] (0 = skipped), colors [M, D] (the last channel read as depth), normals [M, 3], positions [M]
    (list positions, gsplat's ids). Returns per pixel: color [P, D], normal [P, 3], distort [P], depth_sum [P]
    (sum of vis * depth), median [P], median_id [P] (0 if none), last_id [P] (0 if none), blended [P] (any),
    T [P], done [P] (saturated)."""
    P, count = alphas.shape
    dtype, device = alphas.dtype, alphas.device
    out = dict(color=alphas.new_zeros(P, colors.shape[-1]), normal=alphas.new_zeros(P, 3), distort=alphas.new_zeros(P),
               depth_sum=alphas.new_zeros(P), median=alphas.new_zeros(P),
               median_id=torch.zeros(P, dtype=torch.long, device=device),
               last_id=torch.zeros(P, dtype=torch.long, device=device),
               blended=torch.zeros(P, dtype=torch.bool, device=device), T=alphas.new_ones(P),
               done=torch.zeros(P, dtype=torch.bool, device=device))
    for m in range(count):
        alpha = alphas[:, m]
        active = (~out["done"]) & (alpha > 0)
        T = out["T"]
        next_T = T * (1.0 - alpha)
        saturating = active & (next_T <= TRANSMITTANCE_THRESHOLD)
        out["done"] = out["done"] | saturating
        blend = active & ~saturating
        vis = torch.where(blend, alpha * T, torch.zeros_like(T))
        depth = colors[m, -1].to(dtype)
        out["color"] = out["color"] + colors[m][None, :] * vis[:, None]
        out["normal"] = out["normal"] + normals[m][None, :] * vis[:, None]
        bi_0 = vis * depth * (1.0 - T)
        bi_1 = vis * out["depth_sum"]
        out["distort"] = out["distort"] + 2.0 * (bi_0 - bi_1)
        out["depth_sum"] = out["depth_sum"] + vis * depth
        median = blend & (T > 0.5)
        out["median"] = torch.where(median, depth.expand(P), out["median"])
        out["median_id"] = torch.where(median, positions[m].expand(P), out["median_id"])
        out["last_id"] = torch.where(blend, positions[m].expand(P), out["last_id"])
        out["blended"] = out["blended"] | blend
        out["T"] = torch.where(blend, next_T, T)
    return out


def compose_chunks_2dgs(parts) -> Dict[str, Tensor]:
    """The composite of depth chunks (kernels/blend_2dgs.cu combine_partial under the core's loop): parts are
    blend_list_2dgs results of consecutive chunks, each from T = 1. Colours and normals by Eq. (5); distortion
    by P^2 distort' + 2 P ((1 - P) D' - D0 (1 - T')); the median fields from a chunk with nothing blended
    before it (the re-walk, `rewalk_median_2dgs`, settles the rest). Stops after the chunk where a pixel
    saturated."""
    first = parts[0]
    P = first["T"].shape[0]
    acc = dict(color=torch.zeros_like(first["color"]), normal=torch.zeros_like(first["normal"]),
               distort=torch.zeros_like(first["distort"]), depth_sum=torch.zeros_like(first["depth_sum"]),
               median=torch.zeros_like(first["median"]), median_id=torch.zeros_like(first["median_id"]),
               T=torch.ones_like(first["T"]))
    stopped = torch.zeros(P, dtype=torch.bool, device=first["T"].device)
    for part in parts:
        live = ~stopped
        T = acc["T"]
        acc["color"] = torch.where(live[:, None], acc["color"] + part["color"] * T[:, None], acc["color"])
        acc["normal"] = torch.where(live[:, None], acc["normal"] + part["normal"] * T[:, None], acc["normal"])
        distort = acc["distort"] + T * T * part["distort"] + 2.0 * T * (
            (1.0 - T) * part["depth_sum"] - acc["depth_sum"] * (1.0 - part["T"]))
        acc["distort"] = torch.where(live, distort, acc["distort"])
        acc["depth_sum"] = torch.where(live, acc["depth_sum"] + T * part["depth_sum"], acc["depth_sum"])
        fresh = live & (T == 1.0)
        acc["median"] = torch.where(fresh, part["median"], acc["median"])
        acc["median_id"] = torch.where(fresh, part["median_id"], acc["median_id"])
        acc["T"] = torch.where(live, T * part["T"], T)
        stopped = stopped | part["done"]
    return acc


def rewalk_median_2dgs(alphas: Tensor, colors: Tensor, positions: Tensor, T: Tensor, walk: Tensor,
                       median: Tensor, median_id: Tensor) -> Tuple[Tensor, Tensor]:
    """The core's re-walk for the median: from the exact sequential T at the start of `alphas` [P, M] (the
    Gaussians after chunk 0), gsplat's rule, updating median and median_id while T > 0.5, for the pixels
    in `walk`; a pixel stops once settled (T <= 0.5) or saturated."""
    done = ~walk | ~(T > 0.5)
    median, median_id, T = median.clone(), median_id.clone(), T.clone()
    for m in range(alphas.shape[1]):
        alpha = alphas[:, m]
        active = (~done) & (alpha > 0)
        next_T = T * (1.0 - alpha)
        saturating = active & (next_T <= TRANSMITTANCE_THRESHOLD)
        blend = active & ~saturating
        update = blend & (T > 0.5)
        median = torch.where(update, colors[m, -1].to(median.dtype).expand_as(median), median)
        median_id = torch.where(update, positions[m].expand_as(median_id), median_id)
        T = torch.where(blend, next_T, T)
        done = done | saturating | (blend & ~(T > 0.5))
    return median, median_id


def _chunked_tile(alphas: Tensor, colors: Tensor, normals: Tensor, positions: Tensor, inside: Tensor,
                  chunk_count: int) -> Dict[str, Tensor]:
    """One tile cut into depth chunks as the chunk kernel cuts it (saturation signalling included), composited
    and re-walked as the last chunk to arrive does."""
    count = alphas.shape[1]
    bounds = list(chunk_bounds(0, count, chunk_count))
    parts = []
    saturated_chunk = chunk_count
    for p, (a, b) in enumerate(bounds):
        if saturated_chunk < p:
            break
        part = blend_list_2dgs(alphas[:, a:b], colors[a:b], normals[a:b], positions[a:b])
        if bool((part["done"] | ~inside).all()):
            saturated_chunk = min(saturated_chunk, p)
        parts.append(part)
    acc = compose_chunks_2dgs(parts)
    first = parts[0]
    walk = inside & ~first["done"] & (chunk_count > 1)
    start = bounds[1][0] if chunk_count > 1 else count
    acc["median"], acc["median_id"] = rewalk_median_2dgs(alphas[:, start:], colors[start:], positions[start:],
                                                         first["T"], walk, acc["median"], acc["median_id"])
    acc["last_id"] = torch.full_like(acc["median_id"], -1)
    return acc


def blend_frame_2dgs(means2d: Tensor, ray_transforms: Tensor, colors: Tensor, opacities: Tensor, normals: Tensor,
                     image_width: int, image_height: int, tile_size: int, isect_offsets: Tensor, flatten_ids: Tensor,
                     backgrounds: Optional[Tensor] = None, masks: Optional[Tensor] = None,
                     chunked: Optional[Dict[int, int]] = None) -> Dict[str, Tensor]:
    """A whole frame as our kernels render it (gsplat's outputs where nothing is chunked): render_colors
    [..., H, W, D], render_alphas, render_normals [..., H, W, 3], render_distort, render_median [..., H, W, 1],
    last_ids, median_ids [..., H, W], and `pairs` (image, pixel, Gaussian row) of every blend in order.
    `chunked` = {work item: chunk count} renders those tiles the chunked way (last_ids -1). Masked-out tiles
    get the background, zero alphas, normals, distortion and median, last_ids -1 and median_ids 0."""
    image_dims = tuple(isect_offsets.shape[:-2])
    num_images = math.prod(image_dims)
    D = colors.shape[-1]
    means2d = means2d.reshape(-1, 2)
    ray_transforms = ray_transforms.reshape(-1, 3, 3)
    colors = colors.reshape(-1, D)
    opacities = opacities.reshape(-1)
    normals = normals.reshape(-1, 3)
    tile_height, tile_width = isect_offsets.shape[-2:]
    tiles = tile_height * tile_width
    offsets = isect_offsets.reshape(-1)
    flat_masks = None if masks is None else masks.reshape(-1)
    n_isects = flatten_ids.numel()
    dtype, device = colors.dtype, colors.device
    H, W = image_height, image_width
    out = dict(color=colors.new_zeros(num_images, H, W, D), T=colors.new_ones(num_images, H, W),
               normal=colors.new_zeros(num_images, H, W, 3), distort=colors.new_zeros(num_images, H, W),
               median=colors.new_zeros(num_images, H, W),
               last_id=torch.zeros(num_images, H, W, dtype=torch.int32, device=device),
               median_id=torch.zeros(num_images, H, W, dtype=torch.int32, device=device))
    pairs = []
    for image in range(num_images):
        for tile in range(tiles):
            item = image * tiles + tile
            rows, cols, inside = _tile_pixels(tile, tile_width, tile_size, W, H, device)
            r, c = rows[inside], cols[inside]
            if flat_masks is not None and not bool(flat_masks[item]):
                out["last_id"][image, r, c] = -1
                continue
            start = int(offsets[item])
            end = n_isects if item == num_images * tiles - 1 else int(offsets[item + 1])
            ids = flatten_ids[start:end].long()
            positions = torch.arange(start, end, device=device)
            px, py = cols.to(dtype) + 0.5, rows.to(dtype) + 0.5
            alphas = alphas_2dgs(means2d, ray_transforms, opacities, ids, px, py)
            chunk_count = (chunked or {}).get(item)
            if chunk_count:
                acc = _chunked_tile(alphas, colors[ids], normals[ids], positions, inside, chunk_count)
            else:
                acc = blend_list_2dgs(alphas, colors[ids], normals[ids], positions)
                pixel_ids = rows * W + cols
                for p in torch.nonzero(inside).squeeze(1).tolist():  # blends of this pixel, front to back
                    alive = _blended_positions(alphas[p])
                    pairs.extend((image, int(pixel_ids[p]), int(ids[m])) for m in alive)
            out["color"][image, r, c] = acc["color"][inside]
            out["T"][image, r, c] = acc["T"][inside]
            out["normal"][image, r, c] = acc["normal"][inside]
            out["distort"][image, r, c] = acc["distort"][inside]
            out["median"][image, r, c] = acc["median"][inside]
            out["last_id"][image, r, c] = acc["last_id"][inside].to(torch.int32)
            out["median_id"][image, r, c] = acc["median_id"][inside].to(torch.int32)
    color = out["color"]
    if backgrounds is not None:
        color = color + out["T"][..., None] * backgrounds.reshape(num_images, 1, 1, D).to(dtype)
    shape = image_dims + (H, W)
    return dict(render_colors=color.reshape(shape + (D,)), render_alphas=(1.0 - out["T"]).reshape(shape + (1,)),
                render_normals=out["normal"].reshape(shape + (3,)), render_distort=out["distort"].reshape(shape + (1,)),
                render_median=out["median"].reshape(shape + (1,)), last_ids=out["last_id"].reshape(shape),
                median_ids=out["median_id"].reshape(shape), pairs=pairs)


def _blended_positions(alphas: Tensor):
    """Indices of the list that one pixel blends (gsplat's rule on one row of alphas)."""
    T = 1.0
    kept = []
    for m, alpha in enumerate(alphas.tolist()):
        if alpha <= 0:
            continue
        next_T = T * (1.0 - alpha)
        if next_T <= TRANSMITTANCE_THRESHOLD:
            break
        kept.append(m)
        T = next_T
    return kept


def cull_limit_2dgs(opacities: Tensor) -> Tensor:
    """kernels/blend_2dgs.cu cull_limit for finite inputs: L' = ln(255 o) + 1e-5 (1 + |ln(255 o)|), negative
    (always culled) for o <= 0. float32."""
    o = opacities.to(torch.float32)
    limit = torch.log(o * 255.0)
    padded = limit + 1e-5 * (1.0 + torch.clamp_max(limit.abs(), 1e30))
    return torch.where(o > 0, padded, torch.full_like(o, -1.0))


def may_contribute_2dgs(means2d: Tensor, ray_transforms: Tensor, opacities: Tensor, box) -> Tensor:
    """The 2DGS cull bound of kernels/blend_2dgs.cu (may_contribute) in float32 PyTorch: False only where the
    Gaussian cannot reach alpha >= 1/255 at any pixel centre of the box (x0, x1, y0, y1 of pixel centres: numbers,
    or [M] tensors, one box per Gaussian). [M]"""
    f32 = torch.float32
    means2d, M = means2d.to(f32), ray_transforms.to(f32)
    finite = torch.isfinite(means2d).all(-1) & torch.isfinite(M).flatten(1).all(-1) & torch.isfinite(opacities)
    limit = torch.where(finite, cull_limit_2dgs(opacities), torch.full_like(opacities, math.inf, dtype=f32))
    x0, x1, y0, y1 = (torch.as_tensor(b, dtype=f32, device=means2d.device) for b in box)
    keep_factor = 1.0 - 2.0 ** -18
    bar = 2.0 * limit
    x, y = means2d[:, 0], means2d[:, 1]
    zero = torch.zeros_like(x)
    dx = torch.maximum(torch.maximum(x0 - x, x - x1), zero)
    dy = torch.maximum(torch.maximum(y0 - y, y - y1), zero)
    far_2d = 2.0 * (dx * dx + dy * dy) * keep_factor > bar
    u, v, w = M[:, 0], M[:, 1], M[:, 2]
    cx, cy, hx, hy = (t[..., None] for t in (0.5 * (x0 + x1), 0.5 * (y0 + y1), 0.5 * (x1 - x0), 0.5 * (y1 - y0)))
    A = torch.linalg.cross(v, w)
    B = torch.linalg.cross(w, u)
    C = torch.linalg.cross(u, v)
    mid = cx * A + cy * B + C
    rad = hx * A.abs() + hy * B.abs()
    tiny = 2.0 ** -100
    hu = x1[..., None] * w.abs() + u.abs() + tiny
    hv = y1[..., None] * w.abs() + v.abs() + tiny
    err = torch.stack([hu[:, 1] * hv[:, 2] + hv[:, 1] * hu[:, 2], hu[:, 2] * hv[:, 0] + hv[:, 2] * hu[:, 0],
                       hu[:, 0] * hv[:, 1] + hv[:, 0] * hu[:, 1]], -1) * 2.0 ** -19 + 2.0 ** -120
    max_z = (mid[:, 2].abs() + rad[:, 2] + err[:, 2]) * (1.0 + 2.0 ** -20)
    min_xy = torch.clamp_min(mid[:, :2].abs() - (rad[:, :2] + err[:, :2]), 0.0)
    s = min_xy / max_z[:, None]
    far_3d = (max_z < 2.0 ** 124) & ((s * s).sum(-1) * keep_factor > bar)
    culled = (limit < 1e30) & ((limit < 0) | (far_2d & far_3d))
    return ~culled
