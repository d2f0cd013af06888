"""Built-in procedural scenes: a seeded ladder of tile-workload imbalance, plus camera paths.

Every scene is generated from a fixed recipe and a seed, so benchmarks run with no download and
give the same Gaussians on every machine. World frame: x right, y forward (along the road), z up;
cameras use gsplat's convention (world-to-camera `viewmats`, OpenCV axes: x right, y down, z forward).

The ladder (imbalance = heaviest tile / (N_total / K) at K = 1056 = 132 SMs x 8 CTAs of an H200,
1920 x 1080, seed 0, scale 1, per frame; measured on the CPU with `gsplat_lpt.tools.analyze`):

    name       N          imbalance            what
    balanced   648,000    0.24 0.22 0.24       textured room seen from its centre, a few solid objects
    mild       732,672    2.17 2.19 2.19       street (road, sidewalks, facades, trees, cars), no haze
    moderate   842,672    4.57 4.71 4.80       street + light faint haze at the vanishing point
    street     932,672    17.2 17.7 18.0       driving scene: street + dense faint haze stacked far ahead
    severe     1,052,672  38.7 39.9 40.8       denser, narrower haze behind a few tiles
    extreme    1,332,672  68.1 69.7 70.6       very dense haze behind a handful of tiles
    rig        1,400,301  8.36 8.43            two-way street, 6-camera car rig, 6 images per frame
    foliage    1,032,672  46.6 47.4 48.0       street + dense opaque far structure: long lists, early saturation
    mixed      1,082,672  29.2 29.8 30.1       street + faint haze (never saturates) + opaque far structure
    veil       932,672    20.6 21.2 21.6       street + semi-transparent haze: long lists, late saturation
    fog        1,332,672  77.3 79.0 80.0       denser semi-transparent haze: late saturation, some pixels never

(`LADDER_IMBALANCE` holds these numbers; `gsplat-lpt analyze --scene NAME` recomputes them.)
The street Gaussians thin out with distance as in a reconstruction from a drive, so the road and
facades alone give a mild tail (their vanishing-point tile is opaque and saturates). The heavy tail
comes from what driving reconstructions have near the vanishing point: many tiny, faint Gaussians
stacked in depth behind a handful of tiles. They are faint enough (opacity just above gsplat's 1/255
cut) that those tiles do not saturate (checked on the CPU with gsplat's per-pixel blending math,
`analyze.heaviest_tile_depths`: no pixel of the hottest tile of `moderate`..`extreme` reaches T < 1e-4), so
the blending kernel walks their whole list. `foliage` and `mixed` add what driving scenes also have there:
dense, fairly opaque far structure (vegetation, far blocks) stacked behind the same tiles. Those lists are
as long, but a few layers cover the tile: the hottest tile of `foliage` holds 171,595 Gaussians and all its
pixels saturate within the first 512 (same check), so list length overstates its cost several hundred times.
`veil` and `fog` make the haze semi-transparent instead (opacity 0.03-0.06 and 0.012-0.02): hundreds of
layers cover each pixel, so the pixels saturate, but late and each at its own depth. The hottest tile of
`veil` holds 53,665 Gaussians and all its pixels saturate, the median one 40% and the last 74% down the list;
that of `fog` holds 247,548, and 181 of its 256 pixels saturate, the median one 42% down the list (same check).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from .scene import (
    DEFAULT_HEIGHT,
    DEFAULT_WIDTH,
    Scene,
    check_resolution,
    flythrough_path,
    intrinsics,
    look_at,
    rig_cameras,
)

# ----------------------------------------------------------------------------------------------
# Gaussian primitives
# ----------------------------------------------------------------------------------------------


@dataclass
class _Parts:
    """Gaussians accumulated part by part (road, facades, ...) before concatenation."""

    means: List[Tensor] = field(default_factory=list)
    quats: List[Tensor] = field(default_factory=list)
    scales: List[Tensor] = field(default_factory=list)
    opacities: List[Tensor] = field(default_factory=list)
    colors: List[Tensor] = field(default_factory=list)

    def add(self, means: Tensor, quats: Tensor, scales: Tensor, opacities: Tensor, colors: Tensor) -> None:
        count = means.shape[0]
        assert quats.shape == (count, 4) and scales.shape == (count, 3), (quats.shape, scales.shape)
        assert opacities.shape == (count,) and colors.shape == (count, 3), (opacities.shape, colors.shape)
        self.means.append(means.float())
        self.quats.append(quats.float())
        self.scales.append(scales.float())
        self.opacities.append(opacities.float().clamp(1e-4, 0.999))
        self.colors.append(colors.float().clamp(0.0, 1.0))

    def cat(self) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        return (torch.cat(self.means), torch.cat(self.quats), torch.cat(self.scales),
                torch.cat(self.opacities), torch.cat(self.colors))


def _uniform(gen: torch.Generator, count: int, low: float, high: float) -> Tensor:
    return low + (high - low) * torch.rand(count, generator=gen)


def _random_quats(gen: torch.Generator, count: int) -> Tensor:
    """Uniformly random rotations (normalised Gaussian 4-vectors). [count, 4]"""
    quats = torch.randn(count, 4, generator=gen)
    return quats / quats.norm(dim=-1, keepdim=True)


def _yaw_jitter_quats(gen: torch.Generator, count: int, axis: int, max_angle: float) -> Tensor:
    """Small rotations about one world axis, so flat splats stay roughly in their plane. [count, 4]"""
    half = 0.5 * _uniform(gen, count, -max_angle, max_angle)
    quats = torch.zeros(count, 4)
    quats[:, 0] = torch.cos(half)
    quats[:, 1 + axis] = torch.sin(half)
    return quats


def _jittered_colors(gen: torch.Generator, count: int, base: Sequence[float], spread: float) -> Tensor:
    """Base colour times a per-Gaussian brightness, plus small per-channel noise. [count, 3]"""
    brightness = _uniform(gen, count, 1.0 - spread, 1.0 + spread)[:, None]
    noise = spread * 0.3 * torch.randn(count, 3, generator=gen)
    return torch.as_tensor(base, dtype=torch.float32)[None] * brightness + noise


def _plane_patch(
    parts: _Parts, gen: torch.Generator, count: int, origin: Sequence[float], axis_u: int, axis_v: int,
    extent_u: Tuple[float, float], extent_v: Tuple[float, float], normal_axis: int, color: Sequence[float],
    opacity: Tuple[float, float] = (0.6, 0.99), flatness: float = 0.15, jitter: float = 0.02,
) -> None:
    """`count` flat splats covering an axis-aligned rectangle, sized from their spacing so it looks closed."""
    if count <= 0:
        return
    area = (extent_u[1] - extent_u[0]) * (extent_v[1] - extent_v[0])
    spacing = math.sqrt(area / count)
    means = torch.as_tensor(origin, dtype=torch.float32)[None].repeat(count, 1)
    means[:, axis_u] += _uniform(gen, count, *extent_u)
    means[:, axis_v] += _uniform(gen, count, *extent_v)
    means[:, normal_axis] += jitter * torch.randn(count, generator=gen)
    size = spacing * _uniform(gen, count, 0.8, 1.6)  # sigma per in-plane axis
    scales = size[:, None].repeat(1, 3) * _uniform(gen, count, 0.7, 1.3)[:, None]
    scales[:, normal_axis] = size * flatness
    quats = _yaw_jitter_quats(gen, count, normal_axis, 0.5)
    parts.add(means, quats, scales, _uniform(gen, count, *opacity), _jittered_colors(gen, count, color, 0.15))


def _blob_cluster(
    parts: _Parts, gen: torch.Generator, count: int, centers: Tensor, radius: float, size: Tuple[float, float],
    color: Sequence[float], opacity: Tuple[float, float] = (0.3, 0.95), weights: Optional[Tensor] = None,
) -> None:
    """`count` round Gaussians spread around `centers` ([M, 3], drawn with `weights`): crowns, cars, clutter."""
    if count <= 0 or centers.shape[0] == 0:
        return
    if weights is None:
        weights = torch.ones(centers.shape[0])
    which = torch.multinomial(weights.float(), count, replacement=True, generator=gen)
    means = centers[which] + radius * torch.randn(count, 3, generator=gen)
    sigma = _uniform(gen, count, *size)
    scales = sigma[:, None] * _uniform(gen, 3 * count, 0.5, 1.5).reshape(count, 3)
    parts.add(means, _random_quats(gen, count), scales, _uniform(gen, count, *opacity),
              _jittered_colors(gen, count, color, 0.25))


def _distant_haze(
    parts: _Parts, gen: torch.Generator, count: int, eye: Sequence[float], heading: Sequence[float],
    distance: Tuple[float, float], azimuth_sigma: float, elevation_sigma: float, elevation_mean: float,
    opacity: Tuple[float, float], pixel_size: float,
) -> None:
    """Gaussians far along `heading`, within a narrow cone: the heavy tail at the vanishing point.

    Positions are spread in depth (stacked behind the same few tiles); their size is a fixed angle
    (`pixel_size` radians). With opacities just above 1/255 (haze) the stacked tiles never saturate; with
    opaque ones (far blocks) they saturate after a few layers."""
    if count <= 0:
        return
    eye_t = torch.as_tensor(eye, dtype=torch.float32)
    forward = torch.as_tensor(heading, dtype=torch.float32)
    forward = forward / forward.norm()
    up = torch.tensor([0.0, 0.0, 1.0])
    left = torch.linalg.cross(up, forward)
    depth = _uniform(gen, count, *distance)
    azimuth = azimuth_sigma * torch.randn(count, generator=gen)
    elevation = elevation_mean + elevation_sigma * torch.randn(count, generator=gen)
    means = (eye_t[None] + depth[:, None] * forward[None] + (depth * torch.tan(azimuth))[:, None] * left[None]
             + (depth * torch.tan(elevation))[:, None] * up[None])
    sigma = depth * pixel_size * _uniform(gen, count, 0.5, 1.5)
    scales = sigma[:, None] * _uniform(gen, 3 * count, 0.6, 1.4).reshape(count, 3)
    hue = torch.rand(count, 1, generator=gen)
    colors = (1 - hue) * torch.tensor([[0.55, 0.65, 0.8]]) + hue * torch.tensor([[0.35, 0.5, 0.3]])
    parts.add(means, _random_quats(gen, count), scales, _uniform(gen, count, *opacity), colors)


# ----------------------------------------------------------------------------------------------
# Recipes
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StreetRecipe:
    """Knobs of the street generator; counts are multiplied by `make_scene(scale=...)`."""

    road: int = 200_000
    sidewalks: int = 70_000
    facades: int = 350_000
    trees: int = 120_000
    cars: int = 50_000
    haze: int = 0  # tiny faint Gaussians near the vanishing point
    haze_distance: Tuple[float, float] = (250.0, 900.0)
    haze_azimuth_sigma: float = 0.02  # radians around the road axis
    haze_elevation_sigma: float = 0.01
    haze_opacity: Tuple[float, float] = (0.004, 0.0055)
    blocks: int = 0  # dense opaque far structure (vegetation, far blocks): long lists that saturate early
    blocks_distance: Tuple[float, float] = (150.0, 700.0)
    blocks_azimuth_sigma: float = 0.012
    blocks_elevation_sigma: float = 0.008
    blocks_opacity: Tuple[float, float] = (0.35, 0.9)
    street_length: float = 220.0  # metres of road ahead of the first camera
    street_width: float = 12.0  # road, kerb to kerb
    facade_setback: float = 3.0  # sidewalk width
    two_way: bool = False  # street also behind the start (for the rig's rear cameras)
    distance_falloff: float = 15.0  # metres; Gaussian density ~ 1 / (distance + falloff)^2


LADDER: Dict[str, StreetRecipe] = {
    "mild": StreetRecipe(),
    "moderate": StreetRecipe(haze=110_000, haze_azimuth_sigma=0.02, haze_elevation_sigma=0.012),
    "street": StreetRecipe(haze=200_000, haze_azimuth_sigma=0.012, haze_elevation_sigma=0.008),
    "severe": StreetRecipe(haze=320_000, haze_azimuth_sigma=0.008, haze_elevation_sigma=0.006),
    "extreme": StreetRecipe(haze=600_000, haze_azimuth_sigma=0.006, haze_elevation_sigma=0.004),
    "rig": StreetRecipe(haze=600_000, haze_azimuth_sigma=0.008, haze_elevation_sigma=0.006, two_way=True),
    # heavy tiles whose cost their list length overstates: they saturate after a small part of the list
    "foliage": StreetRecipe(blocks=300_000),
    "mixed": StreetRecipe(haze=200_000, haze_azimuth_sigma=0.012, haze_elevation_sigma=0.008, blocks=150_000,
                          blocks_azimuth_sigma=0.02, blocks_elevation_sigma=0.01),
    # heavy tiles whose pixels saturate late: semi-transparent haze, each pixel covered by hundreds of layers
    "veil": StreetRecipe(haze=200_000, haze_azimuth_sigma=0.012, haze_elevation_sigma=0.008, haze_opacity=(0.03, 0.06)),
    "fog": StreetRecipe(haze=600_000, haze_azimuth_sigma=0.006, haze_elevation_sigma=0.004, haze_opacity=(0.012, 0.02)),
}

CAMERA_HEIGHT = 1.6
BALANCED_ROOM_RADIUS = 30.0


def _distance_shares(edges: Tensor, falloff: float) -> Tensor:
    """Share of a part's Gaussians in each segment [edges[i], edges[i+1]) along the street.

    Density ~ 1 / (|y| + falloff)^2, i.e. about constant per unit of viewing angle: a reconstruction
    is densest where the cameras drove and thins out with distance (far surfaces get fewer, larger
    Gaussians instead of piling up at the vanishing point)."""
    cumulative = torch.sign(edges) * (1.0 - falloff / (edges.abs() + falloff))
    shares = (cumulative[1:] - cumulative[:-1]).clamp_min(0.0)
    return shares / shares.sum()


def _street_gaussians(recipe: StreetRecipe, gen: torch.Generator, scale: float) -> _Parts:
    parts = _Parts()
    n = lambda count: int(round(count * scale))  # noqa: E731
    back = recipe.street_length if recipe.two_way else 20.0
    along = (-back, recipe.street_length)
    half_road = recipe.street_width / 2
    kerb = half_road + recipe.facade_setback
    # Road surface and sidewalks (flat, normal z), in 5 m segments thinning out with distance.
    edges = torch.arange(along[0], along[1] + 1e-3, 5.0)
    shares = _distance_shares(edges, recipe.distance_falloff).tolist()
    for start, share in zip(edges[:-1].tolist(), shares):
        segment = (start, start + 5.0)
        _plane_patch(parts, gen, int(n(recipe.road) * share), (0.0, 0.0, 0.0), 0, 1, (-half_road, half_road), segment,
                     2, (0.32, 0.32, 0.34), opacity=(0.8, 0.99))
        for side in (-1.0, 1.0):
            _plane_patch(parts, gen, int(n(recipe.sidewalks // 2) * share),
                         (side * (half_road + recipe.facade_setback / 2), 0.0, 0.12), 0, 1,
                         (-recipe.facade_setback / 2, recipe.facade_setback / 2), segment, 2, (0.55, 0.53, 0.5))
    # Facades: buildings of random width and height on both sides (flat, normal x).
    for side in (-1.0, 1.0):
        y = along[0]
        budget = n(recipe.facades // 2)
        while y < along[1]:
            width = min(float(_uniform(gen, 1, 8.0, 25.0)), along[1] - y)
            height = float(_uniform(gen, 1, 7.0, 28.0))
            share = float(_distance_shares(torch.tensor([along[0], y, y + width, along[1]]), recipe.distance_falloff)[1])
            hue = torch.rand(3, generator=gen) * 0.4 + 0.35
            _plane_patch(parts, gen, int(budget * share * height / 17.5), (side * kerb, y, 0.0), 1, 2, (0.0, width),
                         (0.0, height), 0, hue.tolist(), opacity=(0.7, 0.99))
            y += width + float(_uniform(gen, 1, 0.0, 4.0))
    # Tree crowns and parked cars along the sidewalks, also thinning out with distance.
    for side in (-1.0, 1.0):
        tree_y = torch.arange(along[0], along[1], 9.0)
        crowns = torch.stack([torch.full_like(tree_y, side * (half_road + 1.2)), tree_y, torch.full_like(tree_y, 4.5)], -1)
        _blob_cluster(parts, gen, n(recipe.trees // 2), crowns, 1.3, (0.05, 0.18), (0.25, 0.42, 0.2),
                      opacity=(0.2, 0.9), weights=(tree_y.abs() + recipe.distance_falloff) ** -2)
        car_y = along[0] + torch.rand(int((along[1] - along[0]) / 12), generator=gen) * (along[1] - along[0])
        cars = torch.stack([torch.full_like(car_y, side * (half_road - 1.2)), car_y, torch.full_like(car_y, 0.8)], -1)
        _blob_cluster(parts, gen, n(recipe.cars // 2), cars, 0.7, (0.05, 0.2), (0.5, 0.1, 0.1), opacity=(0.6, 0.99),
                      weights=(car_y.abs() + recipe.distance_falloff) ** -2)
    # The heavy tail: faint haze stacked in depth at the vanishing point (both ends of a two-way street).
    headings = [(0.0, 1.0, 0.0), (0.0, -1.0, 0.0)] if recipe.two_way else [(0.0, 1.0, 0.0)]
    for heading in headings:
        _distant_haze(parts, gen, n(recipe.haze // len(headings)), (0.0, 0.0, CAMERA_HEIGHT), heading,
                      recipe.haze_distance, recipe.haze_azimuth_sigma, recipe.haze_elevation_sigma,
                      elevation_mean=2.0 * recipe.haze_elevation_sigma, opacity=recipe.haze_opacity,
                      pixel_size=4e-4)
        # Dense, fairly opaque structure stacked at the same place: a few layers cover a tile, so its pixels
        # saturate early although its list is long.
        _distant_haze(parts, gen, n(recipe.blocks // len(headings)), (0.0, 0.0, CAMERA_HEIGHT), heading,
                      recipe.blocks_distance, recipe.blocks_azimuth_sigma, recipe.blocks_elevation_sigma,
                      elevation_mean=2.0 * recipe.blocks_elevation_sigma, opacity=recipe.blocks_opacity,
                      pixel_size=2e-3)
    return parts


def _balanced_gaussians(gen: torch.Generator, scale: float) -> _Parts:
    """A textured sphere (a room seen from inside) with a few solid objects, viewed from its centre.

    Seen from the centre, a uniformly sampled sphere puts the same number of Gaussians behind every
    tile; the objects add a bounded excess, as a trained object scene does."""
    parts = _Parts()
    n = lambda count: int(round(count * scale))  # noqa: E731
    room = n(600_000)
    directions = torch.randn(room, 3, generator=gen)
    directions = directions / directions.norm(dim=-1, keepdim=True)
    spacing = math.sqrt(4 * math.pi * BALANCED_ROOM_RADIUS**2 / max(room, 1))
    sigma = spacing * _uniform(gen, room, 1.5, 2.5)  # thick overlap: hundreds per tile
    scales = sigma[:, None].repeat(1, 3) * _uniform(gen, 3 * room, 0.6, 1.4).reshape(room, 3)
    height = directions[:, 2:3]
    base = (1 - height) * 0.5 * torch.tensor([[0.45, 0.4, 0.3]]) + (1 + height) * 0.5 * torch.tensor([[0.55, 0.65, 0.8]])
    colors = base * _uniform(gen, room, 0.7, 1.3)[:, None] + 0.05 * torch.randn(room, 3, generator=gen)
    parts.add(BALANCED_ROOM_RADIUS * directions, _random_quats(gen, room), scales, _uniform(gen, room, 0.7, 0.99), colors)
    # Solid balls around the viewpoint near eye level.
    balls = 6
    per_ball = n(8_000)
    for ball in range(balls):
        azimuth = 2 * math.pi * (ball + 0.5) / balls
        distance = 7.0 + 3.0 * float(torch.rand(1, generator=gen))
        center = torch.tensor([distance * math.cos(azimuth), distance * math.sin(azimuth), -0.5])
        radius = 1.0 + 0.5 * float(torch.rand(1, generator=gen))
        points = torch.randn(per_ball, 3, generator=gen)
        points = points / points.norm(dim=-1, keepdim=True) * torch.rand(per_ball, 1, generator=gen) ** (1 / 3)
        sigma = radius * (4.0 / per_ball) ** (1 / 3) * _uniform(gen, per_ball, 0.15, 0.35)
        hue = torch.rand(3, generator=gen) * 0.6 + 0.2
        parts.add(center + radius * points, _random_quats(gen, per_ball), sigma[:, None].repeat(1, 3),
                  _uniform(gen, per_ball, 0.5, 0.99), _jittered_colors(gen, per_ball, hue.tolist(), 0.3))
    return parts


def _panorama_cameras(frames: int, width: int, height: int) -> Tuple[Tensor, Tensor]:
    """Turning in place at the centre of the balanced scene's room, one view per frame."""
    viewmats = []
    for frame in range(frames):
        angle = 2 * math.pi * frame / frames + 0.3
        viewmats.append(look_at((0.0, 0.0, 0.0), (math.cos(angle), math.sin(angle), -0.05)))
    K = intrinsics(width, height, 60.0)
    return torch.stack(viewmats), K[None].repeat(frames, 1, 1)


def _street_cameras(recipe_name: str, frames: int, width: int, height: int) -> Tuple[Tensor, Tensor, int]:
    """Driving forward 2 m per frame; the rig renders six cameras per frame."""
    if recipe_name == "rig":
        viewmats, Ks = [], []
        for frame in range(frames):
            rig_viewmats, rig_Ks = rig_cameras((0.0, 2.0 * frame, CAMERA_HEIGHT), 0.0, width, height)
            viewmats.append(rig_viewmats)
            Ks.append(rig_Ks)
        return torch.cat(viewmats), torch.cat(Ks), 6
    start = (0.0, 0.0, CAMERA_HEIGHT)
    end = (0.0, 2.0 * max(frames - 1, 1), CAMERA_HEIGHT)
    viewmats, Ks = flythrough_path(start, end, max(frames, 2), width, height)
    return viewmats[:frames], Ks[:frames], 1


_DESCRIPTIONS = {
    "balanced": "textured room seen from its centre with a few solid objects; evenly covered tiles",
    "mild": "street: road, sidewalks, facades, trees, cars thinning out with distance; no haze",
    "moderate": "street with light faint haze at the vanishing point",
    "street": "driving scene: road, sidewalks, facades, trees, cars, dense faint haze stacked far ahead",
    "severe": "street canyon: denser, narrower haze stacked behind a few tiles",
    "extreme": "street canyon with very dense haze behind a handful of tiles",
    "rig": "the street seen by a 6-camera car rig (front, front sides, sides, back), one batch per frame",
    "foliage": "street with dense opaque far structure (vegetation, far blocks): long lists that saturate early",
    "mixed": "street with both: faint haze that never saturates and opaque far structure that saturates early",
    "veil": "street with semi-transparent haze far ahead: long lists whose pixels saturate late (40-80% down the list)",
    "fog": "street canyon with very dense semi-transparent haze: pixels saturate late in the longest lists, some never",
}

# Measured on the CPU (gsplat_lpt.tools.analyze, K = 1056, 1920x1080, seed 0, scale 1): imbalance per frame.
LADDER_IMBALANCE: Dict[str, Tuple[float, ...]] = {
    "balanced": (0.24, 0.22, 0.24),
    "mild": (2.17, 2.19, 2.19),
    "moderate": (4.57, 4.71, 4.80),
    "street": (17.19, 17.68, 17.99),
    "severe": (38.65, 39.89, 40.75),
    "extreme": (68.12, 69.67, 70.64),
    "rig": (8.36, 8.43),
    "foliage": (46.56, 47.42, 47.95),
    "mixed": (29.2, 29.78, 30.1),
    "veil": (20.62, 21.21, 21.60),
    "fog": (77.28, 78.96, 80.01),
}


def scene_names() -> List[str]:
    """Built-in scenes, from balanced to most imbalanced, then the multi-camera rig."""
    return ["balanced", "mild", "moderate", "street", "severe", "extreme", "rig", "foliage", "mixed", "veil", "fog"]


def default_frames(name: str) -> int:
    return 2 if name == "rig" else 3


def make_scene(
    name: str = "street",
    seed: int = 0,
    width: int = DEFAULT_WIDTH,
    height: int = DEFAULT_HEIGHT,
    scale: float = 1.0,
    frames: Optional[int] = None,
) -> Scene:
    """A built-in scene by name (see `scene_names()`), seeded; `scale` multiplies every Gaussian count.

    The camera field of view is fixed, so the scene looks the same at any resolution; the imbalance
    values in the module docstring are for 1920x1080 (fewer tiles at lower resolutions raise them)."""
    if name not in scene_names():
        raise ValueError(f"unknown scene {name!r}; built-in scenes are: {', '.join(scene_names())}")
    check_resolution(width, height)
    if not (scale > 0 and math.isfinite(scale)):
        raise ValueError(f"scene scale must be a positive number, got {scale}")
    frames = default_frames(name) if frames is None else frames
    if frames < 1:
        raise ValueError(f"frames must be >= 1, got {frames}")
    gen = torch.Generator().manual_seed(seed)
    if name == "balanced":
        parts = _balanced_gaussians(gen, scale)
        viewmats, Ks = _panorama_cameras(frames, width, height)
        cameras_per_frame = 1
    else:
        parts = _street_gaussians(LADDER[name], gen, scale)
        viewmats, Ks, cameras_per_frame = _street_cameras(name, frames, width, height)
    means, quats, scales, opacities, colors = parts.cat()
    return Scene(name=name, description=_DESCRIPTIONS[name], means=means, quats=quats, scales=scales,
                 opacities=opacities, colors=colors, viewmats=viewmats, Ks=Ks, width=width, height=height,
                 cameras_per_frame=cameras_per_frame, source=f"built-in:{name}:seed={seed}:scale={scale:g}")
