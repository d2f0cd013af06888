"""Tile workload analysis on the CPU: exact per-tile counts, imbalance and simulated schedules.

No GPU and no intersection list are needed. Gaussians are projected with gsplat's pure-PyTorch
helpers (`gsplat.cuda._torch_impl`), with the opacity-aware radius that gsplat 1.5.3's CUDA
projection computes when `rasterization` passes `opacities` (the torch twin lacks it). Each Gaussian
then covers a rectangle of tiles, exactly as `isect_tiles` (csrc/IntersectTile.cu) enumerates it:

    tile_min = clamp(floor(mean / ts - radius / ts), 0, tiles)     (inclusive, float32 math)
    tile_max = clamp(ceil(mean / ts + radius / ts), 0, tiles)      (exclusive)

so the per-tile counts come from a 2-D difference array in O(N + tiles) instead of O(intersections).
The counts equal the tile ranges of `isect_offset_encode` (`plan.tile_workloads`), from which the
frame statistics, the policy's (h, k) (`plan.choose_chunking`, Eq. 6) and simulated makespans of
the vanilla, LPT and chunked schedules follow.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from .. import constants
from ..config import LPTConfig
from ..plan import choose_chunking, lpt_order, tile_workloads

# K of the 3DGS persistent kernel on an NVIDIA H200: SMs x resident CTAs per SM from the occupancy API
# there, 132 x 6 (40 registers x 256 threads). Other GPUs: meta["lpt"]["concurrent_ctas"] of one
# rendered frame gives theirs (README, "K on your GPU"); pass it as `analyze --concurrent-ctas`.
H200_CONCURRENT_CTAS = 132 * 6
# Fixed cost of one work item (loading the tile, writing pixels) in Gaussian-equivalent units.
DEFAULT_TILE_OVERHEAD = 16.0
# gsplat's ALPHA_THRESHOLD (csrc/Common.h): Gaussians fainter than this are culled by the projection.
ALPHA_THRESHOLD = 1.0 / 255.0


# ----------------------------------------------------------------------------------------------
# Projection (CPU, gsplat's torch helpers)
# ----------------------------------------------------------------------------------------------


@dataclass
class ScreenGaussians:
    """What `isect_tiles` reads: projected centres, integer radii and depths of one batch of images."""

    means2d: Tensor  # [I, N, 2] float32
    radii: Tensor  # [I, N, 2] int32, 0 where culled
    depths: Tensor  # [I, N] float32
    conics: Optional[Tensor] = None  # [I, N, 3] float32 (inverse of the blurred 2D covariance), when asked for


@torch.no_grad()
def project_gaussians(
    means: Tensor,  # [N, 3]
    quats: Tensor,  # [N, 4] wxyz
    scales: Tensor,  # [N, 3] linear
    opacities: Optional[Tensor],  # [N] in (0, 1); None: plain 3.33-sigma radii
    viewmats: Tensor,  # [I, 4, 4] world-to-camera
    Ks: Tensor,  # [I, 3, 3]
    width: int,
    height: int,
    near_plane: float = 0.01,
    far_plane: float = 1e10,
    eps2d: float = 0.3,
    batch_size: int = 1 << 20,
    covars: Optional[Tensor] = None,  # [N, 3, 3] world covariances, when already computed (see world_covariances)
    with_conics: bool = False,
) -> ScreenGaussians:
    """Pinhole projection as gsplat 1.5.3's `fully_fused_projection(..., opacities=...)` computes it (with the
    conics the blending reads when `with_conics`)."""
    from gsplat.cuda._torch_impl import _persp_proj, _world_to_cam

    means = means.float().cpu()
    if covars is None:
        covars = world_covariances(quats, scales)
    viewmats = viewmats.float().cpu()
    Ks = Ks.float().cpu()
    num_images, num_gaussians = viewmats.shape[0], means.shape[0]
    means2d = torch.zeros(num_images, num_gaussians, 2)
    radii = torch.zeros(num_images, num_gaussians, 2, dtype=torch.int32)
    depths = torch.zeros(num_images, num_gaussians)
    conics = torch.zeros(num_images, num_gaussians, 3) if with_conics else None
    # Batches over N bound the [I, B, 3, 3] temporaries for multi-million-Gaussian scenes.
    for start in range(0, num_gaussians, batch_size):
        stop = min(start + batch_size, num_gaussians)
        means_c, covars_c = _world_to_cam(means[start:stop], covars[start:stop], viewmats)  # [I, B, 3], [I, B, 3, 3]
        batch_means2d, covars2d = _persp_proj(means_c, covars_c, Ks, width, height)  # [I, B, 2], [I, B, 2, 2]
        var_x = covars2d[..., 0, 0] + eps2d  # [I, B]
        var_y = covars2d[..., 1, 1] + eps2d
        det_blur = var_x * var_y - covars2d[..., 0, 1] * covars2d[..., 1, 0]
        batch_depths = means_c[..., 2]
        valid = (batch_depths >= near_plane) & (batch_depths <= far_plane) & (det_blur > 0)
        extend = torch.full_like(var_x, 3.33)
        if opacities is not None:
            opacity = opacities[start:stop].float().cpu()[None].expand_as(var_x)
            valid &= opacity >= ALPHA_THRESHOLD
            # Opacity-aware bound (gsplat's projection, arXiv 2402.00525 B.2): where alpha falls below 1/255.
            tight = torch.sqrt(2.0 * torch.log(torch.clamp_min(opacity, ALPHA_THRESHOLD) / ALPHA_THRESHOLD))
            extend = torch.minimum(extend, tight)
        radius_x = torch.ceil(extend * torch.sqrt(torch.clamp_min(var_x, 0.0)))
        radius_y = torch.ceil(extend * torch.sqrt(torch.clamp_min(var_y, 0.0)))
        inside = (
            (batch_means2d[..., 0] + radius_x > 0)
            & (batch_means2d[..., 0] - radius_x < width)
            & (batch_means2d[..., 1] + radius_y > 0)
            & (batch_means2d[..., 1] - radius_y < height)
        )
        keep = valid & inside & ((radius_x > 0) | (radius_y > 0))
        batch_radii = torch.stack([radius_x, radius_y], dim=-1)
        batch_radii[~keep] = 0.0
        means2d[:, start:stop] = batch_means2d
        radii[:, start:stop] = batch_radii.int()
        depths[:, start:stop] = batch_depths
        if conics is not None:
            conics[:, start:stop] = torch.stack([var_y, -covars2d[..., 0, 1], var_x], dim=-1) / det_blur[..., None]
    return ScreenGaussians(means2d, radii, depths, conics)


@torch.no_grad()
def world_covariances(quats: Tensor, scales: Tensor, batch_size: int = 1 << 20) -> Tensor:
    """R S S^T R^T of every Gaussian (gsplat's torch helper), computed once per scene. [N, 3, 3]"""
    from gsplat.cuda._torch_impl import _quat_scale_to_covar_preci

    quats, scales = quats.float().cpu(), scales.float().cpu()
    parts = []
    for start in range(0, quats.shape[0], batch_size):
        covars, _ = _quat_scale_to_covar_preci(quats[start:start + batch_size], scales[start:start + batch_size],
                                               compute_preci=False)
        parts.append(covars)
    return torch.cat(parts) if parts else torch.zeros(0, 3, 3)


# ----------------------------------------------------------------------------------------------
# Exact per-tile counts
# ----------------------------------------------------------------------------------------------


def tile_grid(width: int, height: int, tile_size: int = 16) -> Tuple[int, int]:
    """(tile_width, tile_height) as gsplat computes them."""
    return math.ceil(width / tile_size), math.ceil(height / tile_size)


def tile_rectangles(
    means2d: Tensor,  # [..., N, 2]
    radii: Tensor,  # [..., N, 2]
    tile_size: int,
    tile_width: int,
    tile_height: int,
) -> Tuple[Tensor, Tensor]:
    """Each Gaussian's tile rectangle [tile_min, tile_max) as `isect_tiles` enumerates it. 2 x [..., N, 2] int64.

    Culled Gaussians (radius_x <= 0 or radius_y <= 0) get an empty rectangle."""
    tile_means = means2d.float() / float(tile_size)  # float32 like the kernel
    tile_radii = radii.float() / float(tile_size)
    limits = torch.tensor([tile_width, tile_height], dtype=torch.float32)
    # CUDA's float -> uint32 conversion saturates negatives to 0; then min(., tiles) clamps above.
    tile_min = torch.minimum(torch.clamp_min(torch.floor(tile_means - tile_radii), 0.0), limits)
    tile_max = torch.minimum(torch.clamp_min(torch.ceil(tile_means + tile_radii), 0.0), limits)
    tile_min = torch.nan_to_num(tile_min, nan=0.0).long()
    tile_max = torch.nan_to_num(tile_max, nan=0.0).long()
    culled = (radii <= 0).any(dim=-1, keepdim=True)  # [..., N, 1]
    tile_max = torch.where(culled, tile_min, tile_max)
    tile_max = torch.maximum(tile_max, tile_min)
    return tile_min, tile_max


def count_tile_intersections(
    means2d: Tensor,  # [..., N, 2]
    radii: Tensor,  # [..., N, 2]
    tile_size: int,
    tile_width: int,
    tile_height: int,
) -> Tensor:
    """Number of Gaussians per tile for every image, via a 2-D difference array. [..., tile_height, tile_width] int64.

    Equal to the range lengths of gsplat's `isect_tiles` + `isect_offset_encode` on the same inputs."""
    image_dims = means2d.shape[:-2]
    num_images = math.prod(image_dims)
    tile_min, tile_max = tile_rectangles(means2d.reshape(num_images, -1, 2), radii.reshape(num_images, -1, 2),
                                         tile_size, tile_width, tile_height)  # [I, N, 2]
    # Empty rectangles (x0 == x1 or y0 == y1, culled Gaussians) cancel out in the difference array.
    x0, y0 = tile_min.unbind(-1)  # [I, N]
    x1, y1 = tile_max.unbind(-1)
    stride = tile_width + 1  # one spare column/row so that x1 == tile_width has a slot
    plane = (tile_height + 1) * stride
    base = torch.arange(num_images)[:, None] * plane  # [I, 1]
    corners = torch.cat([(base + y0 * stride + x0).reshape(-1), (base + y0 * stride + x1).reshape(-1),
                         (base + y1 * stride + x0).reshape(-1), (base + y1 * stride + x1).reshape(-1)])
    count = x0.numel()
    signs = torch.ones(4 * count, dtype=torch.float64)
    signs[count : 3 * count] = -1.0
    diff = torch.bincount(corners, weights=signs, minlength=num_images * plane)  # exact in float64 below 2**53
    diff = diff.round().long().reshape(num_images, tile_height + 1, tile_width + 1)
    counts = diff.cumsum(dim=1).cumsum(dim=2)[:, :tile_height, :tile_width]
    return counts.reshape(*image_dims, tile_height, tile_width)


def brute_force_tile_counts(
    means2d: Tensor, radii: Tensor, tile_size: int, tile_width: int, tile_height: int
) -> Tensor:
    """O(intersections) reference for tests: add 1 to every tile of every rectangle. [..., th, tw] int64."""
    image_dims = means2d.shape[:-2]
    num_images = math.prod(image_dims)
    tile_min, tile_max = tile_rectangles(means2d.reshape(num_images, -1, 2), radii.reshape(num_images, -1, 2),
                                         tile_size, tile_width, tile_height)
    counts = torch.zeros(num_images, tile_height, tile_width, dtype=torch.int64)
    for image in range(num_images):
        for (x0, y0), (x1, y1) in zip(tile_min[image].tolist(), tile_max[image].tolist()):
            counts[image, y0:y1, x0:x1] += 1
    return counts.reshape(*image_dims, tile_height, tile_width)


def offsets_from_counts(counts: Tensor) -> Tuple[Tensor, int]:
    """`isect_offset_encode`'s output (start of every tile's range) and n_isects, from per-tile counts."""
    flat = counts.reshape(-1).long()
    offsets = (torch.cumsum(flat, dim=0) - flat).reshape(counts.shape).int()
    return offsets, int(flat.sum())


@torch.no_grad()
def frame_tile_counts(
    means: Tensor,
    quats: Tensor,
    scales: Tensor,
    opacities: Tensor,
    viewmats: Tensor,  # [I, 4, 4]
    Ks: Tensor,  # [I, 3, 3]
    width: int,
    height: int,
    tile_size: int = 16,
    near_plane: float = 0.01,
    far_plane: float = 1e10,
    covars: Optional[Tensor] = None,  # [N, 3, 3] precomputed world covariances
) -> Tensor:
    """Per-tile Gaussian counts of one frame (a batch of I images). [I, tile_height, tile_width] int64."""
    screen = project_gaussians(means, quats, scales, opacities, viewmats, Ks, width, height, near_plane, far_plane,
                               covars=covars)
    tile_width, tile_height = tile_grid(width, height, tile_size)
    return count_tile_intersections(screen.means2d, screen.radii, tile_size, tile_width, tile_height)


# ----------------------------------------------------------------------------------------------
# Simulated schedules
# ----------------------------------------------------------------------------------------------


def list_schedule_makespan(costs: Sequence[float], workers: int) -> float:
    """Makespan of greedy list scheduling: items in the given order, each to the first worker free.

    This is what both the hardware block scheduler (vanilla, tile order) and the persistent kernel's
    atomic queue (LPT order) do."""
    if len(costs) == 0:
        return 0.0
    if len(costs) <= workers:
        return float(max(costs))
    finish_times = [float(c) for c in costs[:workers]]
    heapq.heapify(finish_times)
    for cost in costs[workers:]:
        heapq.heappushpop(finish_times, finish_times[0] + float(cost))
    return max(finish_times)


def vanilla_makespan(workloads: Tensor, workers: int, tile_overhead: float = DEFAULT_TILE_OVERHEAD) -> float:
    """One CTA per tile dispatched in tile order (gsplat's grid launch); empty tiles still cost the overhead."""
    costs = (workloads.reshape(-1).double() + tile_overhead).tolist()
    return list_schedule_makespan(costs, workers)


def lpt_makespan(workloads: Tensor, workers: int, tile_overhead: float = DEFAULT_TILE_OVERHEAD) -> float:
    """The persistent kernel: tiles heaviest first onto `workers` CTAs."""
    sorted_workloads, _ = lpt_order(workloads.reshape(-1))
    costs = (sorted_workloads.double() + tile_overhead).tolist()
    return list_schedule_makespan(costs, workers)


def chunked_makespan(
    workloads: Tensor,
    workers: int,
    chunked_tiles: int,
    chunk_count: int,
    overhead_lambda: float,
    tile_overhead: float = DEFAULT_TILE_OVERHEAD,
) -> float:
    """The h heaviest tiles cut into k depth chunks of ceil(N_t / k) (+ lambda each), the rest in LPT order.

    Chunks and whole tiles share the same K CTAs (the two kernels co-execute: the LPT kernel starts as the chunk
    kernel's CTAs are resident)."""
    sorted_workloads, _ = lpt_order(workloads.reshape(-1))
    sorted_workloads = sorted_workloads.double()
    if chunked_tiles <= 0 or chunk_count <= 1:
        return list_schedule_makespan((sorted_workloads + tile_overhead).tolist(), workers)
    heavy = sorted_workloads[:chunked_tiles]
    chunk_cost = torch.ceil(heavy / chunk_count) + overhead_lambda + tile_overhead  # [h]
    chunk_costs = chunk_cost.repeat_interleave(chunk_count)
    rest = sorted_workloads[chunked_tiles:] + tile_overhead
    costs, _ = torch.sort(torch.cat([chunk_costs, rest]), descending=True)
    return list_schedule_makespan(costs.tolist(), workers)


# ----------------------------------------------------------------------------------------------
# Frame statistics
# ----------------------------------------------------------------------------------------------


@dataclass
class FrameStats:
    """Tile workload facts of one frame (one rasterize call over its images). Workload = Gaussians in a tile."""

    scene: str  # the scene's name (built-in name or file stem)
    frame: int
    images: int
    num_tiles: int  # work items: images x tile_height x tile_width
    nonempty_tiles: int
    total_workload: int  # N_total (= n_isects)
    max_workload: int  # N_1, the heaviest tile
    mean_workload: float  # over all tiles, empty ones included
    mean_nonempty_workload: float  # over non-empty tiles
    max_over_mean: float  # N_1 / mean of the non-empty tiles: how far the heaviest tile stands out
    p99_over_median: float  # 99th percentile / median of the non-empty tiles: how heavy the tail is
    imbalance: float  # N_1 / (N_total / K): the heaviest tile against one CTA's fair share
    concurrent_ctas: int  # K
    chunked_tiles: int  # h chosen by the policy (Eq. 6)
    chunk_count: int  # k chosen by the policy
    makespan_vanilla: float  # simulated, Gaussian-equivalent units
    makespan_lpt: float
    makespan_chunked: float  # at the policy's (h, k); equals makespan_lpt when it does not chunk
    histogram_edges: List[float] = field(default_factory=list)  # log2 bins of non-empty tile workloads
    histogram_counts: List[int] = field(default_factory=list)

    @property
    def speedup_lpt(self) -> float:
        return self.makespan_vanilla / self.makespan_lpt if self.makespan_lpt > 0 else 1.0

    @property
    def speedup_chunked(self) -> float:
        return self.makespan_vanilla / self.makespan_chunked if self.makespan_chunked > 0 else 1.0

    def row(self) -> Dict[str, Any]:
        """Flat record for CSV/JSON (histogram kept as lists)."""
        record = asdict(self)
        record["speedup_lpt"] = self.speedup_lpt
        record["speedup_chunked"] = self.speedup_chunked
        return record


def imbalance_of(workloads: Tensor, concurrent_ctas: int = H200_CONCURRENT_CTAS) -> float:
    """Heaviest tile over the per-CTA share N_total / K."""
    total = float(workloads.sum())
    return float(workloads.max()) * concurrent_ctas / total if total > 0 else 0.0


def workload_histogram(workloads: Tensor) -> Tuple[List[float], List[int]]:
    """Counts of non-empty tiles in power-of-two bins [1, 2), [2, 4), ..."""
    nonempty = workloads[workloads > 0].double()
    if nonempty.numel() == 0:
        return [], []
    top = int(math.floor(math.log2(float(nonempty.max())))) + 1
    edges = [float(2**e) for e in range(top + 1)]
    bins = torch.floor(torch.log2(nonempty)).long().clamp(0, top - 1)
    counts = torch.bincount(bins, minlength=top).tolist()
    return edges, counts


def frame_stats(
    counts: Tensor,  # [I, tile_height, tile_width] (or [tile_height, tile_width])
    concurrent_ctas: int = H200_CONCURRENT_CTAS,
    config: Optional[LPTConfig] = None,
    frame: int = 0,
    tile_overhead: float = DEFAULT_TILE_OVERHEAD,
    scene: str = "",
) -> FrameStats:
    """Statistics, policy choice and simulated makespans of one frame's tile counts."""
    config = config or LPTConfig()
    images = counts.shape[0] if counts.dim() == 3 else 1
    offsets, n_isects = offsets_from_counts(counts)
    workloads = tile_workloads(offsets, n_isects).long()  # [num_items], the core's own definition
    sorted_workloads, _ = lpt_order(workloads)
    # (3DGS colours: a candidate below the floor stays where it lets the LPT kernel run two pixels per thread)
    choice = choose_chunking(sorted_workloads, float(n_isects), concurrent_ctas, config,
                             two_pixel_chunked_max=constants.TWO_PIXEL_CHUNKED_MAX)
    nonempty = workloads[workloads > 0].double()
    max_workload = int(workloads.max()) if workloads.numel() else 0
    mean_nonempty = float(nonempty.mean()) if nonempty.numel() else 0.0
    median, p99 = (torch.quantile(nonempty, torch.tensor([0.5, 0.99], dtype=torch.float64)).tolist()
                   if nonempty.numel() else (0.0, 0.0))
    edges, histogram = workload_histogram(workloads)
    vanilla = vanilla_makespan(workloads, concurrent_ctas, tile_overhead)
    lpt = lpt_makespan(workloads, concurrent_ctas, tile_overhead)
    chunked = lpt
    if choice.chunked_tiles > 0:
        chunked = chunked_makespan(workloads, concurrent_ctas, choice.chunked_tiles, choice.chunk_count,
                                   config.overhead_lambda, tile_overhead)
    return FrameStats(
        scene=scene,
        frame=frame,
        images=images,
        num_tiles=workloads.numel(),
        nonempty_tiles=int(nonempty.numel()),
        total_workload=n_isects,
        max_workload=max_workload,
        mean_workload=n_isects / max(workloads.numel(), 1),
        mean_nonempty_workload=mean_nonempty,
        max_over_mean=max_workload / mean_nonempty if mean_nonempty > 0 else 0.0,
        p99_over_median=p99 / median if median > 0 else 0.0,
        imbalance=imbalance_of(workloads, concurrent_ctas),
        concurrent_ctas=concurrent_ctas,
        chunked_tiles=choice.chunked_tiles,
        chunk_count=choice.chunk_count,
        makespan_vanilla=vanilla,
        makespan_lpt=lpt,
        makespan_chunked=chunked,
        histogram_edges=edges,
        histogram_counts=histogram,
    )


# ----------------------------------------------------------------------------------------------
# Whole scenes
# ----------------------------------------------------------------------------------------------


@dataclass
class TileDepths:
    """One tile's depth-sorted list and where each of its pixels stops blending (reference.stop_positions)."""

    image: int
    tile_x: int
    tile_y: int
    length: int  # Gaussians in the tile's list
    stops: Tensor  # [tile_size^2] stop position per pixel, `length` where the pixel never saturates

    @property
    def saturated(self) -> int:
        return int((self.stops < self.length).sum())

    def stop_fraction(self, quantile: float) -> float:
        """A quantile of the pixels' stop positions over the list length (1.0: never saturates)."""
        return float(torch.quantile(self.stops.double() / max(self.length, 1), quantile))


@torch.no_grad()
def heaviest_tile_lists(scene, frame: int = 0, tiles: int = 1, tile_size: int = 16, eps2d: float = 0.3):
    """The `tiles` longest tile lists of one scene frame (over its cameras), as `isect_tiles` orders them: the
    frame's projection, then per tile (image, tile_x, tile_y, ids sorted by depth, then index, and the tile's
    pixel centres px, py)."""
    viewmats, Ks = scene.frame_cameras(frame)
    screen = project_gaussians(scene.means, scene.quats, scene.scales, scene.opacities, viewmats, Ks, scene.width,
                               scene.height, eps2d=eps2d, with_conics=True)
    tile_width, tile_height = tile_grid(scene.width, scene.height, tile_size)
    counts = count_tile_intersections(screen.means2d, screen.radii, tile_size, tile_width, tile_height)
    lists = []
    for flat in torch.argsort(counts.reshape(-1), descending=True, stable=True)[:tiles].tolist():
        image, tile = divmod(flat, tile_width * tile_height)
        tile_y, tile_x = divmod(tile, tile_width)
        tile_min, tile_max = tile_rectangles(screen.means2d[image], screen.radii[image], tile_size, tile_width, tile_height)
        listed = ((tile_min[:, 0] <= tile_x) & (tile_max[:, 0] > tile_x) & (tile_min[:, 1] <= tile_y)
                  & (tile_max[:, 1] > tile_y))
        ids = torch.nonzero(listed).squeeze(1)
        ids = ids[torch.argsort(screen.depths[image, ids], stable=True)]  # isect_tiles' order: depth, then index
        local = torch.arange(tile_size * tile_size)
        px = (tile_x * tile_size + local % tile_size).float() + 0.5
        py = (tile_y * tile_size + local // tile_size).float() + 0.5
        lists.append((image, tile_x, tile_y, ids, px, py))
    return screen, lists


@torch.no_grad()
def heaviest_tile_depths(scene, frame: int = 0, tiles: int = 1, tile_size: int = 16, eps2d: float = 0.3) -> List[TileDepths]:
    """The `tiles` longest tile lists of one scene frame (over its cameras) and every pixel's stop depth there,
    with gsplat's per-pixel blending math on the CPU: how much of a heavy tile's list the blending kernel
    really walks (list length overstates that where the pixels saturate early)."""
    from ..reference import stop_positions

    screen, lists = heaviest_tile_lists(scene, frame, tiles, tile_size, eps2d)
    results = []
    for image, tile_x, tile_y, ids, px, py in lists:
        positions = torch.arange(ids.numel())
        stops = stop_positions(screen.means2d[image, ids], screen.conics[image, ids], scene.opacities[ids].float().cpu(),
                               positions, px, py)
        results.append(TileDepths(image, tile_x, tile_y, ids.numel(), stops))
    return results


def analyze_scene(
    scene,  # scenes.Scene
    concurrent_ctas: int = H200_CONCURRENT_CTAS,
    config: Optional[LPTConfig] = None,
    tile_size: int = 16,
    frames: Optional[Iterable[int]] = None,
    progress: bool = False,
    keep_counts: bool = False,
) -> Tuple[List[FrameStats], List[Tensor]]:
    """`FrameStats` of every frame of a scene (and its [I, th, tw] counts when `keep_counts`)."""
    if concurrent_ctas < 1:
        raise ValueError(f"concurrent_ctas (K) must be >= 1, got {concurrent_ctas}")
    frame_ids = list(range(scene.num_frames)) if frames is None else list(frames)
    results: List[FrameStats] = []
    kept: List[Tensor] = []
    covars = world_covariances(scene.quats, scene.scales)  # frame-independent: once per scene
    for frame in _progress(frame_ids, f"analyze {scene.name}", progress):
        viewmats, Ks = scene.frame_cameras(frame)
        counts = frame_tile_counts(scene.means, scene.quats, scene.scales, scene.opacities, viewmats, Ks,
                                   scene.width, scene.height, tile_size, covars=covars)
        results.append(frame_stats(counts, concurrent_ctas, config, frame=frame, scene=scene.name))
        if keep_counts:
            kept.append(counts)
    return results, kept


def _progress(items: Sequence[int], description: str, enabled: bool):
    if not enabled or len(items) <= 1:
        return items
    from rich.progress import track

    return track(items, description=description, transient=True)


# analyze.csv, one row per frame (README: "What analyze reports" explains each column).
ANALYZE_COLUMNS = (
    "scene", "frame", "images", "num_tiles", "nonempty_tiles", "total_workload", "max_workload",
    "mean_nonempty_workload", "max_over_mean", "p99_over_median", "imbalance", "concurrent_ctas", "chunked_tiles",
    "chunk_count", "makespan_vanilla", "makespan_lpt", "makespan_chunked", "speedup_lpt", "speedup_chunked",
)


def _compact(value: float) -> str:
    """12345678 -> 12.3M: keeps the table inside 80 columns."""
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            return f"{value / limit:.3g}{suffix}"
    return f"{value:.0f}"


def stats_table(stats: Sequence[FrameStats], title: str = "tile workloads"):
    """A rich Table of per-frame statistics (simulated speedups are makespan ratios, not timings)."""
    from rich import box
    from rich.table import Table

    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    for header in ("frame", "img", "N_total", "max", "max/mean", "p99/med", "imbalance", "h", "k", "sim LPT",
                   "sim chunk"):
        table.add_column(header, justify="right", no_wrap=True)
    for s in stats:
        table.add_row(str(s.frame), str(s.images), _compact(s.total_workload), _compact(s.max_workload),
                      f"{s.max_over_mean:.1f}", f"{s.p99_over_median:.1f}", f"{s.imbalance:.2f}", str(s.chunked_tiles),
                      str(s.chunk_count), f"{s.speedup_lpt:.2f}x", f"{s.speedup_chunked:.2f}x")
    return table


def write_stats(stats: Sequence[FrameStats], out_dir, meta: Optional[Dict[str, Any]] = None) -> Dict[str, str]:
    """analyze.csv (one row per frame) and analyze.json (rows, histograms, run facts), each written whole."""
    from pathlib import Path

    from . import output

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = [s.row() for s in stats]
    csv_path = output.write_csv(out / "analyze.csv", rows, ANALYZE_COLUMNS)
    json_path = output.write_json(out / "analyze.json", {"meta": meta or {}, "frames": rows})
    return {"csv": csv_path, "json": json_path}
