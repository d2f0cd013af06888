"""Pure-PyTorch oracles of the blending stage (CPU or GPU; slow, for tests).

`blend_sequential` follows gsplat 1.5.3's forward kernel pixel for pixel: front-to-back over the
tile's range of flatten_ids, alpha = min(0.999, o exp(-sigma)), skip sigma < 0 or alpha < 1/255, stop
(exclusive) when T (1 - alpha) <= 1e-4. `blend_chunked` cuts each listed tile into depth chunks,
blends every chunk from T = 1 with the same rule, applies saturation signalling, and reduces with
Eq. (5) the way our reduction kernel does. Tests check that the two agree.
"""

from __future__ import annotations

import math
from typing import Dict, Iterable, Optional, Tuple

import torch
from torch import Tensor

from . import constants

ALPHA_THRESHOLD = constants.ALPHA_THRESHOLD[1]
TRANSMITTANCE_THRESHOLD = constants.TRANSMITTANCE_THRESHOLD[1]
MAX_ALPHA = constants.MAX_ALPHA[1]


def _tile_pixels(tile: int, tile_width: int, tile_size: int, width: int, height: int, device) -> Tuple[Tensor, Tensor, Tensor]:
    """Pixel centres of one tile (row-major inside the tile) and which of them lie inside the image."""
    ty, tx = divmod(tile, tile_width)
    local = torch.arange(tile_size * tile_size, device=device)
    rows = ty * tile_size + local // tile_size
    cols = tx * tile_size + local % tile_size
    inside = (rows < height) & (cols < width)
    return rows, cols, inside


def _alphas(means2d, conics, opacities, ids: Tensor, px: Tensor, py: Tensor) -> Tensor:
    """[P, M] alpha of Gaussian ids[m] at pixel p, 0 where gsplat skips it."""
    xy = means2d[ids]  # [M, 2]
    conic = conics[ids]  # [M, 3]
    dx = xy[None, :, 0] - px[:, None]
    dy = xy[None, :, 1] - py[:, None]
    sigma = 0.5 * (conic[None, :, 0] * dx * dx + conic[None, :, 2] * dy * dy) + conic[None, :, 1] * dx * dy
    alpha = torch.clamp_max(opacities[ids][None, :] * torch.exp(-sigma), MAX_ALPHA)
    return torch.where((sigma < 0) | (alpha < ALPHA_THRESHOLD), torch.zeros_like(alpha), alpha)


def blend_list(alphas: Tensor, colors: Tensor, T: Optional[Tensor] = None,
               done: Optional[Tensor] = None) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """Front-to-back blending of one depth-sorted list for P pixels, from T = 1 (or from `T`, the pixels
    `done` blending nothing: a walk that goes on where another stopped; the color returned is then what
    this walk adds).

    alphas [P, M] (0 = skipped), colors [M, D]. Returns color [P, D], T [P], saturated [P] bool and
    the position (in the list) of the last Gaussian blended [P] (-1 if none)."""
    P, M = alphas.shape
    color = alphas.new_zeros(P, colors.shape[-1])
    T = alphas.new_ones(P) if T is None else T.clone()
    done = torch.zeros(P, dtype=torch.bool, device=alphas.device) if done is None else done.clone()
    last = torch.full((P,), -1, dtype=torch.long, device=alphas.device)
    for m in range(M):
        alpha = alphas[:, m]
        active = (~done) & (alpha > 0)
        next_T = T * (1.0 - alpha)
        saturating = active & (next_T <= TRANSMITTANCE_THRESHOLD)
        done = done | saturating
        blend = active & ~saturating
        color = torch.where(blend[:, None], color + colors[m][None, :] * (alpha * T)[:, None], color)
        last = torch.where(blend, torch.full_like(last, m), last)
        T = torch.where(blend, next_T, T)
    return color, T, done, last


def stop_positions(means2d, conics, opacities, ids: Tensor, px: Tensor, py: Tensor, batch: int = 4096) -> Tensor:
    """[P] where each pixel's front-to-back walk over the depth-sorted list `ids` stops: the position of the
    Gaussian that would take its T to the threshold (gsplat's loop ends there, exclusive), or len(ids) where
    the pixel never saturates. T is a running product per batch (equal to the sequential one up to float
    rounding); the walk ends early once every pixel has stopped. For analysis of long lists (blend_list is
    the exact oracle)."""
    P, M = px.numel(), ids.numel()
    T = torch.ones(P, dtype=torch.float32, device=px.device)
    stop = torch.full((P,), M, dtype=torch.long, device=px.device)
    for first in range(0, M, batch):
        open_ = stop == M
        if not bool(open_.any()):
            break
        transmittance = T[:, None] * torch.cumprod(1.0 - _alphas(means2d, conics, opacities, ids[first:first + batch], px, py), dim=1)
        saturated = (transmittance <= TRANSMITTANCE_THRESHOLD) & open_[:, None]
        hit = saturated.any(dim=1)
        stop = torch.where(hit, first + saturated.int().argmax(dim=1), stop)
        T = transmittance[:, -1]
    return stop


def _frame_views(means2d, conics, colors, opacities, isect_offsets):
    num_images = math.prod(isect_offsets.shape[:-2])
    return (means2d.reshape(-1, 2), conics.reshape(-1, 3), colors.reshape(-1, colors.shape[-1]),
            opacities.reshape(-1), isect_offsets.reshape(num_images, -1), num_images)


def blend_sequential(
    means2d, conics, colors, opacities, image_width: int, image_height: int, tile_size: int,
    isect_offsets: Tensor, flatten_ids: Tensor, backgrounds: Optional[Tensor] = None,
    chunked: Optional[Dict[int, int]] = None,
) -> Tuple[Tensor, Tensor, Tensor]:
    """Colors [..., H, W, D], alphas [..., H, W, 1], last_ids [..., H, W] (index into flatten_ids).

    With `chunked` = {work item: chunk count}, those tiles are rendered the chunked way instead
    (partial blends from T = 1, saturation signalling, Eq. (5) reduction; their last_ids are -1)."""
    means2d, conics, colors, opacities, offsets, num_images = _frame_views(means2d, conics, colors, opacities, isect_offsets)
    tile_height, tile_width = isect_offsets.shape[-2:]
    tiles = tile_height * tile_width
    D = colors.shape[-1]
    n_isects = flatten_ids.numel()
    out_colors = colors.new_zeros(num_images, image_height, image_width, D)
    out_T = colors.new_ones(num_images, image_height, image_width)
    out_last = torch.zeros(num_images, image_height, image_width, dtype=torch.int32, device=colors.device)
    flat_offsets = offsets.reshape(-1)
    for image in range(num_images):
        for tile in range(tiles):
            item = image * tiles + tile
            start = int(flat_offsets[item])
            end = n_isects if item == num_images * tiles - 1 else int(flat_offsets[item + 1])
            rows, cols, inside = _tile_pixels(tile, tile_width, tile_size, image_width, image_height, colors.device)
            px, py = cols.to(colors.dtype) + 0.5, rows.to(colors.dtype) + 0.5
            ids = flatten_ids[start:end].long()
            chunk_count = (chunked or {}).get(item)
            if chunk_count:
                color, T = _blend_chunked_tile(means2d, conics, colors, opacities, ids, px, py, inside, chunk_count)
                last = torch.full_like(rows, -1)
            else:
                color, T, _, position = blend_list(_alphas(means2d, conics, opacities, ids, px, py), colors[ids])
                last = torch.where(position >= 0, position + start, torch.zeros_like(position))  # gsplat: 0 if none
            r, c = rows[inside], cols[inside]
            out_colors[image, r, c] = color[inside]
            out_T[image, r, c] = T[inside]
            out_last[image, r, c] = last[inside].to(torch.int32)
    if backgrounds is not None:
        out_colors = out_colors + out_T[..., None] * backgrounds.reshape(num_images, 1, 1, D)
    image_dims = tuple(isect_offsets.shape[:-2])
    return (out_colors.reshape(image_dims + out_colors.shape[1:]),
            (1.0 - out_T).reshape(image_dims + (image_height, image_width, 1)),
            out_last.reshape(image_dims + out_last.shape[1:]))


def chunk_bounds(start: int, end: int, chunk_count: int, covered: Optional[int] = None) -> Iterable[Tuple[int, int]]:
    """The depth chunks of a tile's range, as the chunk kernel cuts it: the first `covered` entries
    (default: the whole range; with saturation feedback, the predicted depth times a margin) in equal
    contiguous parts. The compositing CTA walks whatever lies beyond, where pixels are still open
    (`blend_chunked_list`)."""
    covered = end - start if covered is None else min(covered, end - start)
    length = -(-covered // chunk_count)
    for p in range(chunk_count):
        chunk_start = min(start + covered, start + p * length)
        yield chunk_start, min(start + covered, chunk_start + length)


def blend_chunked_list(alphas: Tensor, colors: Tensor, chunk_count: int, covered: Optional[int] = None,
                       inside: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """One tile's list the way the chunk kernel blends it, for P pixels: the chunks of `chunk_bounds` each
    from T = 1, stopping behind the first chunk that saturated every pixel on its own (pixels not `inside`
    the image count as saturated), reduced with Eq. (5); then, where no chunk saturated the tile and the
    list goes on beyond `covered`, the pixels still open walk on from their composed T.
    alphas [P, M], colors [M, D]. Returns color [P, D] and T [P]."""
    M = alphas.shape[1]
    parts, saturated_chunk = [], chunk_count
    bounds = list(chunk_bounds(0, M, chunk_count, covered))
    for p, (a, b) in enumerate(bounds):
        if saturated_chunk < p:
            break
        color, T, done, _ = blend_list(alphas[:, a:b], colors[a:b])
        if inside is not None:
            done = done | ~inside
        if bool(done.all()):
            saturated_chunk = p
        parts.append((color, T, done))
    color, T = reduce_chunks(*(torch.stack([part[i] for part in parts]) for i in range(3)))
    covered_end = bounds[-1][1]
    if saturated_chunk < chunk_count or covered_end == M:
        return color, T
    done = torch.stack([part[2] for part in parts]).any(dim=0) | (T <= TRANSMITTANCE_THRESHOLD)
    tail_color, T, _, _ = blend_list(alphas[:, covered_end:], colors[covered_end:], T, done)
    return color + tail_color, T


def _blend_chunked_tile(means2d, conics, colors, opacities, ids, px, py, inside, chunk_count):
    return blend_chunked_list(_alphas(means2d, conics, opacities, ids, px, py), colors[ids], chunk_count, inside=inside)


def reduce_chunks(partial_colors: Tensor, partial_T: Tensor, partial_done: Tensor) -> Tuple[Tensor, Tensor]:
    """Eq. (5) over chunks [k, P, D], [k, P], [k, P]: C = sum_p C_p prod_{q<p} T_q, stopping after the
    first chunk in which the pixel saturated. Returns color [P, D] and final T [P]."""
    color = torch.zeros_like(partial_colors[0])
    T = torch.ones_like(partial_T[0])
    stopped = torch.zeros_like(partial_done[0])
    for p in range(partial_colors.shape[0]):
        live = ~stopped
        color = torch.where(live[:, None], color + partial_colors[p] * T[:, None], color)
        T = torch.where(live, T * partial_T[p], T)
        stopped = stopped | partial_done[p]
    return color, T


def cull_bound(conics: Tensor, opacities: Tensor) -> Tuple[Tensor, Tensor]:
    """kernels/blend_3dgs.cu cull_bound in float32: the bound on sigma that the cull test compares against,
    and the half height of the band of rows around the mean where alpha can reach 1/255 (+inf: never
    culled; -1: always culled). [M], [M]"""
    f32 = torch.float32
    a, b, c = conics[:, 0].to(f32), conics[:, 1].to(f32), conics[:, 2].to(f32)
    limit = torch.log(opacities.to(f32) * 255.0)
    padded = (limit + 1e-5 * (1.0 + torch.clamp_max(limit.abs(), 1e30))) * 1.003  # ln 0 = -inf stays -inf
    det = a * c - b * b
    safe = ((a > 0) & (c > 0) & (a < 1e20) & (c < 1e20) & (b * b <= 0.998 * (a * c)) & (det > 0)
            & ~torch.isnan(padded))
    bound = padded * 1.002
    band = torch.sqrt(2.0 * padded * a / det) * 1.001 + 0.01
    never = torch.full_like(a, -1.0)
    bound = torch.where(padded >= 0, bound, never)
    band = torch.where(padded >= 0, band, never)
    infinite = torch.full_like(a, math.inf)
    return torch.where(safe, bound, infinite), torch.where(safe, band, infinite)


def _staged_bound(means2d: Tensor, conics: Tensor, opacities: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """What kernels/blend_3dgs.cu stage() keeps for the cull test: the mean (x, y), the bound on sigma (1e30, never
    culled, for a mean beyond 1e7 px) and the band's half height, in float32. [M] each"""
    limit, band = cull_bound(conics, opacities)
    x, y = means2d[:, 0].to(torch.float32), means2d[:, 1].to(torch.float32)
    limit = torch.where((x.abs() < 1e7) & (y.abs() < 1e7), limit, torch.full_like(limit, 1e30))
    return x, y, limit, band


def may_contribute(means2d: Tensor, conics: Tensor, opacities: Tensor, box: Tuple[float, float, float, float]) -> Tensor:
    """The 3DGS cull test of kernels/blend_3dgs.cu in float32 PyTorch: False only where the Gaussian cannot
    reach alpha >= 1/255 at any pixel centre of the box (x0, x1, y0, y1 of pixel centres): per row of
    centres, sigma at the two centres around the vertex of the row's parabola. [M] bool"""
    x, y, limit, band = _staged_bound(means2d, conics, opacities)
    f32 = torch.float32
    a, b, c = conics[:, 0].to(f32), conics[:, 1].to(f32), conics[:, 2].to(f32)
    x0, x1, y0, y1 = box
    slope = b / a
    kept = torch.zeros_like(x, dtype=torch.bool)
    py = y0
    while py <= y1:
        dy = y - py
        vertex = torch.clamp(x + slope * dy, x0, x1)
        px0 = torch.clamp(torch.floor(vertex - 0.5) + 0.5, min=x0)
        px1 = torch.clamp(px0 + 1.0, max=x1)
        dx0, dx1 = x - px0, x - px1
        q0 = 0.5 * (a * dx0 * dx0 + c * dy * dy) + b * dx0 * dy
        q1 = 0.5 * (a * dx1 * dx1 + c * dy * dy) + b * dx1 * dy
        kept |= (~(q0 > limit) | ~(q1 > limit)) & ~(dy.abs() > band)
        py += 1.0
    return kept | ~(limit < 1e30)


def _fma32(a: Tensor, b: Tensor, c: Tensor) -> Tensor:
    """fmaf in float32, through float64: a float32 product is exact in float64, the sum is rounded twice
    (float64, then float32), which can differ from one rounding in the last bit, rarely."""
    return (a.double() * b.double() + c.double()).float()


def scalable(means2d: Tensor, conics: Tensor) -> Tensor:
    """kernels/blend_3dgs.cu scalable: Gaussians whose batches are walked scaled (a / 2, c / 2). [M] bool"""
    a, c = conics[:, 0].float(), conics[:, 2].float()
    lo, hi = 2.0 ** -70, 2.0 ** 70
    near = (means2d[:, 0].float().abs() < 2.0 ** 23) & (means2d[:, 1].float().abs() < 2.0 ** 23)
    return (a >= lo) & (a <= hi) & (c >= lo) & (c <= hi) & near


def rectangle_points(dx_lo: Tensor, dx_hi: Tensor, dy_lo: Tensor, dy_hi: Tensor, b_over_a: Tensor,
                     b_over_c: Tensor) -> Tuple[Tuple[Tensor, Tensor], Tuple[Tensor, Tensor]]:
    """The two points of the rectangle of offsets [dx_lo, dx_hi] x [dy_lo, dy_hi] at one of which the quadratic
    form q = (a dx^2 + c dy^2) / 2 + b dx dy takes its least value over it (kernels/blend_3dgs.cu
    may_contribute_scaled argues why): on the row dy = ey nearest 0, the vertex -(b / a) ey clamped to the columns,
    and on the column dx = ex nearest 0, the vertex -(b / c) ex clamped to the rows. ((dx, ey), (ex, dy)), in the
    inputs' dtype."""
    zero = torch.zeros_like(dx_lo)
    ex = torch.minimum(torch.maximum(zero, dx_lo), dx_hi)
    ey = torch.minimum(torch.maximum(zero, dy_lo), dy_hi)
    dx = torch.minimum(torch.maximum(-b_over_a * ey, dx_lo), dx_hi)
    dy = torch.minimum(torch.maximum(-b_over_c * ex, dy_lo), dy_hi)
    return (dx, ey), (ex, dy)


def may_contribute_scaled(means2d: Tensor, conics: Tensor, opacities: Tensor,
                          box: Tuple[float, float, float, float]) -> Tensor:
    """kernels/blend_3dgs.cu may_contribute_scaled in float32 PyTorch, for the scalable Gaussians (the others
    are walked unscaled: may_contribute's answer): the least q over the rectangle of the box's offsets, taken
    at two points, the vertex of q on the line dy = ey (the offset of the box's rows nearest 0) and on the line
    dx = ex (of its columns), each clamped to the rectangle; q = d (h d + b e) + (h' e) e in fmas. [M] bool"""
    x, y, limit, _ = _staged_bound(means2d, conics, opacities)
    f32 = torch.float32
    half_a, b, half_c = conics[:, 0].to(f32) * 0.5, conics[:, 1].to(f32), conics[:, 2].to(f32) * 0.5
    x0, x1, y0, y1 = box
    (dx, ey), (ex, dy) = rectangle_points(x - x1, x - x0, y - y1, y - y0, b / (half_a + half_a), b / (half_c + half_c))
    q_row = _fma32(dx, _fma32(half_a, dx, b * ey), (half_c * ey) * ey)
    q_column = _fma32(dy, _fma32(half_c, dy, b * ex), (half_a * ex) * ex)
    kept = ~(q_row > limit) | ~(q_column > limit)
    return torch.where(scalable(means2d, conics), kept, may_contribute(means2d, conics, opacities, box))

