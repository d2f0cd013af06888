"""A SYNTHETIC driving street, written in drivestudio's checkpoint and processed-scene formats.

`write_synthetic_scene` builds a straight street (road, facades, trees, a dense semi-transparent far
structure near the vanishing point, rigid vehicles moving over the frames) and saves it as
`checkpoint_final.pth` plus a Waymo-layout camera folder, so that the real loaders (`checkpoint`,
`rig`) are what render it. Deterministic per seed; it is generated data, not a recording.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from .checkpoint import SH_C0, SYNTHETIC_LABEL, axis_angle_quat, quat_multiply, yaw_quat
from .rig import CAMERA_ORIGINAL_SIZES


@dataclass(frozen=True)
class SyntheticStreetConfig:
    """A straight street seen from an ego car driving down it (Waymo conventions: x forward, y left, z up).

    The far end holds a dense, semi-transparent structure (distant blocks, trees and haze) that projects onto a
    handful of tiles around the vanishing point while the sky above is empty: the long-tail tile workload of
    real driving reconstructions. `density` scales every Gaussian count (1.0 is about 1.1M Gaussians).
    """

    num_frames: int = 20
    seed: int = 0
    density: float = 1.0
    fps: float = 10.0
    ego_speed: float = 8.0  # m/s along +x in the right-hand lane
    street_length: float = 320.0  # m of road and facades ahead of the start
    far_distance: float = 330.0  # m: centre of the far structure
    num_cameras: int = 6  # front, front-left, front-right, left, right, back
    sh_degree: int = 3
    sky_resolution: int = 16
    surfels: bool = False  # 2DGS: two scales per Gaussian, each flattened along its shortest axis

    @property
    def duration(self) -> float:
        return (self.num_frames - 1) / self.fps


@dataclass
class _Cloud:
    """Gaussians being built: activated values, converted to drivestudio's raw parameters when saved."""

    means: Tensor  # [N, 3]
    scales: Tensor  # [N, 3]
    quats: Tensor  # [N, 4]
    opacities: Tensor  # [N]
    rgb: Tensor  # [N, 3]
    view_dependence: float | Tensor = 0.0  # std of the higher-order SH coefficients (scalar or [N])

    @staticmethod
    def cat(clouds: Sequence["_Cloud"]) -> "_Cloud":
        joined = _Cloud(*(torch.cat([getattr(c, name) for c in clouds]) for name in
                          ("means", "scales", "quats", "opacities", "rgb")))
        joined.view_dependence = torch.cat([torch.as_tensor(c.view_dependence, dtype=torch.float32).expand(
            c.means.shape[0]) for c in clouds])  # [N] per-Gaussian
        return joined


def _uniform(generator: torch.Generator, count: int, low, high) -> Tensor:
    low_t, high_t = torch.as_tensor(low, dtype=torch.float32), torch.as_tensor(high, dtype=torch.float32)
    shape = (count,) + tuple(torch.broadcast_shapes(low_t.shape, high_t.shape))
    return low_t + (high_t - low_t) * torch.rand(shape, generator=generator)


def _count(base: int, density: float) -> int:
    return max(1, int(round(base * density)))


def _random_quats(generator: torch.Generator, count: int) -> Tensor:
    return F.normalize(torch.randn(count, 4, generator=generator), dim=-1)


def _surface_cloud(generator, count, origin, extent, thin_axis, size, opacity, rgb, jitter=0.0) -> _Cloud:
    """Flat Gaussians spread uniformly over an axis-aligned rectangle (thin along `thin_axis`)."""
    means = torch.as_tensor(origin, dtype=torch.float32) + torch.rand(count, 3, generator=generator) * torch.as_tensor(
        extent, dtype=torch.float32)
    scales = _uniform(generator, count, size[0], size[1])[:, None].expand(count, 3).clone()
    scales *= _uniform(generator, count, [0.7, 0.7, 0.7], [1.3, 1.3, 1.3])
    scales[:, thin_axis] = 0.01
    spin_axis = [0.0, 0.0, 0.0]
    spin_axis[thin_axis] = 1.0
    quats = axis_angle_quat(spin_axis, _uniform(generator, count, 0.0, math.pi))  # in-plane orientation
    if jitter:
        means += torch.randn(count, 3, generator=generator) * jitter
    return _Cloud(means, scales, quats, _uniform(generator, count, opacity[0], opacity[1]), rgb)


def _street_background(config: SyntheticStreetConfig, generator: torch.Generator) -> _Cloud:
    density, length = config.density, config.street_length
    clouds: List[_Cloud] = []

    # Road: 4 lanes of 3.5 m (y in [-7, 7]) with dashed lane lines, a double centre line and solid edges.
    road_count = _count(220_000, density)
    road = _surface_cloud(generator, road_count, (-20.0, -7.0, 0.0), (length + 20.0, 14.0, 0.0), 2,
                          (0.06, 0.14), (0.85, 0.99), None)
    shade = 0.26 + 0.06 * torch.rand(road_count, 1, generator=generator)
    road.rgb = shade.expand(road_count, 3).clone()
    x, y = road.means[:, 0], road.means[:, 1]
    dashed = ((y - 3.5).abs() < 0.08) | ((y + 3.5).abs() < 0.08)
    dashed &= torch.remainder(x, 9.0) < 3.0
    edges = (y.abs() - 6.8).abs() < 0.1
    centre = ((y.abs() - 0.15).abs() < 0.07)
    road.rgb[dashed | edges] = torch.tensor([0.88, 0.88, 0.85])
    road.rgb[centre] = torch.tensor([0.85, 0.70, 0.15])
    clouds.append(road)

    # Sidewalks, raised 15 cm, both sides.
    for side in (-1.0, 1.0):
        walk = _surface_cloud(generator, _count(40_000, density), (-20.0, 7.0 if side > 0 else -10.0, 0.15),
                              (length + 20.0, 3.0, 0.0), 2, (0.08, 0.16), (0.9, 0.99), None)
        walk.rgb = (0.55 + 0.08 * torch.rand(walk.means.shape[0], 1, generator=generator)).expand(-1, 3).clone()
        clouds.append(walk)

    # Facades: blocks of 8-25 m along x, 6-30 m high, each with its own colour and a grid of windows.
    palette = torch.tensor([[0.72, 0.62, 0.50], [0.60, 0.35, 0.28], [0.55, 0.56, 0.58], [0.80, 0.76, 0.66],
                            [0.45, 0.47, 0.52], [0.66, 0.52, 0.40]])
    facade_budget = _count(330_000, density)
    for side in (-1.0, 1.0):
        start = -20.0
        blocks = []
        while start < length:
            block_length = float(_uniform(generator, 1, 8.0, 25.0))
            block_height = float(_uniform(generator, 1, 6.0, 30.0))
            blocks.append((start, min(block_length, length - start), block_height))
            start += block_length
        total_area = sum(length_ * height for _, length_, height in blocks)
        for block_start, block_length, block_height in blocks:
            count = max(16, int(facade_budget / 2 * block_length * block_height / total_area))
            wall_y = side * float(_uniform(generator, 1, 10.0, 11.5))
            wall = _surface_cloud(generator, count, (block_start, wall_y, 0.0), (block_length, 0.0, block_height),
                                  1, (0.10, 0.22), (0.8, 0.99), None)
            base = palette[int(torch.randint(len(palette), (1,), generator=generator))]
            wall.rgb = (base * (0.9 + 0.2 * torch.rand(count, 1, generator=generator))).clamp(0, 1)
            window = (torch.remainder(wall.means[:, 0] - block_start, 3.0) < 1.6) & (
                torch.remainder(wall.means[:, 2], 3.2) > 1.2) & (wall.means[:, 2] > 2.5)
            wall.rgb[window] = torch.tensor([0.20, 0.26, 0.34]) + 0.1 * torch.rand(
                int(window.sum()), 1, generator=generator)
            wall.view_dependence = 0.02  # glass and paint catch some light
            clouds.append(wall)

    # Street trees every ~12 m on both sidewalks: trunk + semi-transparent crown.
    tree_positions = torch.arange(-10.0, length, 12.0)
    crown_count = _count(60_000, density) // max(1, 2 * len(tree_positions))
    for side in (-1.0, 1.0):
        for tree_x in tree_positions.tolist():
            centre_xyz = torch.tensor([tree_x + float(_uniform(generator, 1, -2, 2)), side * 8.8, 5.0])
            crown_means = centre_xyz + torch.randn(crown_count, 3, generator=generator) * torch.tensor([1.4, 1.4, 1.2])
            crown = _Cloud(crown_means, _uniform(generator, crown_count, [0.08] * 3, [0.3] * 3),
                           _random_quats(generator, crown_count), _uniform(generator, crown_count, 0.3, 0.8),
                           torch.tensor([0.18, 0.38, 0.15]) + 0.12 * torch.rand(crown_count, 3, generator=generator))
            trunk_count = max(4, crown_count // 10)
            trunk_means = torch.tensor([centre_xyz[0], centre_xyz[1], 0.0]) + _uniform(
                generator, trunk_count, [-0.1, -0.1, 0.0], [0.1, 0.1, 4.0])
            trunk = _Cloud(trunk_means, _uniform(generator, trunk_count, [0.05, 0.05, 0.2], [0.1, 0.1, 0.4]),
                           torch.tensor([[1.0, 0.0, 0.0, 0.0]]).expand(trunk_count, 4).clone(),
                           torch.full((trunk_count,), 0.95), torch.tensor([0.30, 0.22, 0.15]).expand(trunk_count, 3))
            clouds += [crown, trunk]

    # The far structure: distant blocks, trees and haze where the street meets the horizon. It spans only a few
    # degrees of view, so hundreds of thousands of small, faint Gaussians pile onto a few tiles.
    far = config.far_distance
    haze_count = _count(300_000, density)
    haze_means = torch.tensor([far, 0.0, 5.0]) + torch.randn(haze_count, 3, generator=generator) * torch.tensor(
        [45.0, 7.0, 4.5])
    haze_means[:, 2] = haze_means[:, 2].abs()  # nothing below the road
    haze = _Cloud(haze_means, _uniform(generator, haze_count, [0.05] * 3, [0.45] * 3),
                  _random_quats(generator, haze_count), _uniform(generator, haze_count, 0.005, 0.03),
                  torch.tensor([0.58, 0.62, 0.68]) + 0.12 * torch.randn(haze_count, 3, generator=generator).clamp(-2, 2))
    core_count = _count(90_000, density)  # the densest knot: distant traffic and signs right at the vanishing point
    core_means = torch.tensor([far + 60.0, -1.0, 2.5]) + torch.randn(core_count, 3, generator=generator) * torch.tensor(
        [20.0, 2.2, 1.6])
    core_means[:, 2] = core_means[:, 2].abs()
    core = _Cloud(core_means, _uniform(generator, core_count, [0.04] * 3, [0.25] * 3),
                  _random_quats(generator, core_count), _uniform(generator, core_count, 0.006, 0.04),
                  torch.rand(core_count, 3, generator=generator) * 0.6 + 0.2)
    skyline = _surface_cloud(generator, _count(40_000, density), (far + 120.0, -60.0, 0.0), (0.0, 120.0, 35.0), 0,
                             (0.3, 0.8), (0.5, 0.95), None)
    skyline.rgb = torch.tensor([0.50, 0.52, 0.58]) + 0.1 * torch.rand(skyline.means.shape[0], 3, generator=generator)
    clouds += [haze, core, skyline]
    for cloud in clouds:
        cloud.rgb = cloud.rgb.clamp(0.02, 0.98)
    return _Cloud.cat(clouds)


def _vehicle_cloud(generator: torch.Generator, count: int, size: Tuple[float, float, float], paint: Tensor) -> _Cloud:
    """Gaussians on a car-like shape in its box frame (x forward, y left, z up; origin at the box centre)."""
    length, width, height = size
    body_top = -height / 2 + 0.62 * height
    boxes = [  # (centre, extent, colour, opacity range, share of the Gaussians)
        ((0.0, 0.0, (-height / 2 + 0.25 + body_top) / 2), (length, width, body_top + height / 2 - 0.25), paint,
         (0.85, 0.99), 0.55),
        ((-0.08 * length, 0.0, (body_top + height / 2) / 2), (0.55 * length, 0.92 * width, height / 2 - body_top),
         torch.tensor([0.12, 0.15, 0.2]), (0.55, 0.85), 0.30),
    ]
    clouds = []
    for centre, extent, colour, opacity, share in boxes:
        box_count = max(8, int(count * share))
        # Points on the box surface: pick a face with probability proportional to its area.
        ex, ey, ez = extent
        areas = torch.tensor([ey * ez, ey * ez, ex * ez, ex * ez, ex * ey, ex * ey])
        faces = torch.multinomial(areas, box_count, replacement=True, generator=generator)
        local = torch.rand(box_count, 3, generator=generator) - 0.5
        axis = faces // 2
        local[torch.arange(box_count), axis] = torch.where(faces % 2 == 0, 0.5, -0.5)
        means = torch.tensor(centre) + local * torch.tensor(extent)
        scales = _uniform(generator, box_count, [0.03] * 3, [0.09] * 3)
        scales[torch.arange(box_count), axis] = 0.01  # flat along the face normal
        quats = torch.tensor([[1.0, 0.0, 0.0, 0.0]]).expand(box_count, 4).clone()
        rgb = (colour * (0.85 + 0.3 * torch.rand(box_count, 1, generator=generator))).clamp(0.02, 0.98)
        cloud = _Cloud(means, scales, quats, _uniform(generator, box_count, *opacity), rgb, view_dependence=0.03)
        clouds.append(cloud)
    wheel_count = max(4, int(count * 0.15)) // 4 * 4
    wheel_centres = torch.tensor([[sx * 0.33 * length, sy * 0.5 * width, -height / 2 + 0.33]
                                  for sx in (-1, 1) for sy in (-1, 1)]).repeat_interleave(wheel_count // 4, 0)
    wheels = _Cloud(wheel_centres + torch.randn(wheel_count, 3, generator=generator) * torch.tensor([0.15, 0.05, 0.15]),
                    _uniform(generator, wheel_count, [0.03] * 3, [0.07] * 3), _random_quats(generator, wheel_count),
                    _uniform(generator, wheel_count, 0.8, 0.99), torch.full((wheel_count, 3), 0.05))
    clouds.append(wheels)
    vehicle = _Cloud.cat(clouds)
    half_size = torch.tensor(size) / 2
    vehicle.means = torch.maximum(torch.minimum(vehicle.means, half_size), -half_size)  # inside the instance box
    return vehicle


@dataclass(frozen=True)
class _VehiclePlan:
    size: Tuple[float, float, float]  # length, width, height (m)
    start_x: float
    lane_y: float
    speed: float  # m/s along +x (negative: oncoming)
    appears_at: float = 0.0  # fraction of the sequence before which it is not annotated
    merge_to_y: Optional[float] = None  # drifts to this lane over the sequence (exercises yaw changes)


# Street coordinates centre the road on y = 0; the ego car drives in the inner right-hand lane. drivestudio's
# world is the first ego pose, so everything saved is shifted by the ego's lateral offset.
_EGO_LANE_Y = -1.75
_STREET_TO_WORLD = torch.tensor([0.0, -_EGO_LANE_Y, 0.0])

_VEHICLES = (
    _VehiclePlan((4.6, 1.9, 1.5), start_x=18.0, lane_y=-1.75, speed=7.0),  # lead car in the ego lane
    _VehiclePlan((8.5, 2.5, 3.2), start_x=34.0, lane_y=-5.25, speed=6.0),  # truck, right lane
    _VehiclePlan((4.4, 1.8, 1.4), start_x=30.0, lane_y=1.75, speed=-11.0),  # oncoming: passes, then dropped
    _VehiclePlan((4.8, 2.0, 1.7), start_x=70.0, lane_y=5.25, speed=-9.0),  # oncoming, far lane
    _VehiclePlan((4.3, 1.8, 1.5), start_x=24.0, lane_y=-6.2, speed=0.0),  # parked at the kerb
    _VehiclePlan((4.5, 1.9, 1.5), start_x=48.0, lane_y=-5.25, speed=8.5, appears_at=0.25, merge_to_y=-1.75),
)


def _vehicle_tracks(config: SyntheticStreetConfig, ego_x: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    """instances_quats [F, I, 4], instances_trans [F, I, 3], instances_fv [F, I] in the first-ego world frame."""
    times = torch.arange(config.num_frames, dtype=torch.float32) / config.fps  # [F]
    progress = times / max(config.duration, 1e-6)  # [F] in [0, 1]
    quats, trans, visible = [], [], []
    for plan in _VEHICLES:
        x = plan.start_x + plan.speed * times
        if plan.merge_to_y is None:
            y = torch.full_like(x, plan.lane_y)
            yaw = torch.full_like(x, 0.0 if plan.speed >= 0 else math.pi)
        else:  # smooth lane change: y follows a cosine ramp, heading follows the path's slope
            ramp = 0.5 - 0.5 * torch.cos(math.pi * progress)
            y = plan.lane_y + (plan.merge_to_y - plan.lane_y) * ramp
            dy_dt = (plan.merge_to_y - plan.lane_y) * 0.5 * math.pi * torch.sin(math.pi * progress) / max(
                config.duration, 1e-6)
            yaw = torch.atan2(dy_dt, torch.full_like(dy_dt, max(plan.speed, 0.1)))
        z = torch.full_like(x, plan.size[2] / 2)  # box centre above the road
        seen = (x > ego_x - 12.0) & (progress >= plan.appears_at)  # gone once behind the ego car
        track_quats = yaw_quat(yaw)
        track_trans = torch.stack([x, y, z], dim=-1) + _STREET_TO_WORLD
        # drivestudio stores identity / zero poses for frames where an instance is not annotated.
        track_quats[~seen] = torch.tensor([1.0, 0.0, 0.0, 0.0])
        track_trans[~seen] = 0.0
        quats.append(track_quats)
        trans.append(track_trans)
        visible.append(seen)
    return torch.stack(quats, 1), torch.stack(trans, 1), torch.stack(visible, 1)


# Quaternions (w, x, y, z) of the rotations that take local z to local x (index 0) and to local y (index 1):
# 120 degrees about (1, 1, 1) (x -> y -> z -> x) and its inverse.
_THIN_AXIS_TO_Z = {0: (0.5, 0.5, 0.5, 0.5), 1: (0.5, -0.5, -0.5, -0.5)}
_SCALE_ORDER = {0: (1, 2, 0), 1: (2, 0, 1), 2: (0, 1, 2)}  # old axes that become new local x, y, z


def surfel_parameters(scales: Tensor, quats: Tensor) -> Tuple[Tensor, Tensor]:
    """2DGS surfels from 3D Gaussians: each flattened along its shortest axis, rotated so that this axis is its
    local z (the surfel normal). [N, 3] activated scales, [N, 4] quats -> ([N, 2] scales, [N, 4] quats)."""
    thin = scales.argmin(dim=-1)  # [N]
    new_quats, new_scales = quats.clone(), scales.clone()
    for axis, order in _SCALE_ORDER.items():
        chosen = thin == axis
        new_scales[chosen] = scales[chosen][:, list(order)]
        if axis in _THIN_AXIS_TO_Z:
            turn = torch.tensor(_THIN_AXIS_TO_Z[axis], dtype=quats.dtype).expand(int(chosen.sum()), 4)
            new_quats[chosen] = quat_multiply(quats[chosen], turn)
    return new_scales[:, :2].contiguous(), F.normalize(new_quats, dim=-1)


def _sh_parameters(cloud: _Cloud, sh_degree: int, generator: torch.Generator, surfels: bool = False
                   ) -> Dict[str, Tensor]:
    """drivestudio's raw parameters: log scales (two per surfel), logit opacities [N, 1], SH dc [N, 3] and rest
    [N, K-1, 3]."""
    count = cloud.means.shape[0]
    rest_bases = (sh_degree + 1) ** 2 - 1
    features_rest = torch.randn(count, rest_bases, 3, generator=generator) * torch.as_tensor(
        cloud.view_dependence, dtype=torch.float32).reshape(-1, 1, 1)
    scales, quats = surfel_parameters(cloud.scales, cloud.quats) if surfels else (cloud.scales, cloud.quats)
    return {
        "_means": cloud.means.float().contiguous(),
        "_scales": torch.log(scales.clamp_min(1e-4)).float().contiguous(),
        "_quats": quats.float().contiguous(),
        "_opacities": torch.logit(cloud.opacities.clamp(1e-4, 1 - 1e-4)).float().reshape(count, 1).contiguous(),
        "_features_dc": ((cloud.rgb - 0.5) / SH_C0).float().contiguous(),
        "_features_rest": features_rest.float().contiguous(),
    }


def _sky_cube(resolution: int) -> Tensor:
    """A daylight gradient on a cube map, built through the same lookup the renderer uses."""
    coords = (torch.arange(resolution, dtype=torch.float32) + 0.5) / resolution * 2 - 1
    rows, cols = torch.meshgrid(coords, coords, indexing="ij")
    ones = torch.ones_like(rows)
    # OpenGL face directions for (s, t) = (cols, rows): inverse of the table in sample_cube_map.
    faces = [torch.stack(v, -1) for v in (
        (ones, -rows, -cols), (-ones, -rows, cols), (cols, ones, rows),
        (cols, -ones, -rows), (cols, -rows, ones), (-cols, -rows, -ones))]
    cube_dirs = F.normalize(torch.stack(faces), dim=-1)  # [6, R, R, 3] in the cube (OpenGL) frame
    world_up = cube_dirs[..., 1:2]  # cube y = world z (up)
    horizon = torch.tensor([0.80, 0.86, 0.93])
    zenith = torch.tensor([0.33, 0.52, 0.85])
    blend = world_up.clamp(0, 1) ** 0.6
    return (horizon * (1 - blend) + zenith * blend).contiguous()


def build_synthetic_checkpoint(config: SyntheticStreetConfig) -> Dict[str, Any]:
    """drivestudio checkpoint dict {"models": {...}, "step": ...} of the SYNTHETIC street (deterministic per seed)."""
    generator = torch.Generator().manual_seed(config.seed)
    background = _street_background(config, generator)
    background.means += _STREET_TO_WORLD
    ego_x = config.ego_speed * torch.arange(config.num_frames, dtype=torch.float32) / config.fps  # [F]
    instances_quats, instances_trans, instances_fv = _vehicle_tracks(config, ego_x)
    palette = torch.tensor([[0.75, 0.08, 0.08], [0.9, 0.9, 0.92], [0.1, 0.2, 0.55], [0.15, 0.15, 0.15],
                            [0.85, 0.65, 0.1], [0.3, 0.5, 0.35]])
    vehicle_clouds, point_ids = [], []
    for instance, plan in enumerate(_VEHICLES):
        cloud = _vehicle_cloud(generator, _count(7_000, config.density), plan.size, palette[instance % len(palette)])
        vehicle_clouds.append(cloud)
        point_ids.append(torch.full((cloud.means.shape[0], 1), instance, dtype=torch.long))
    vehicles = _Cloud.cat(vehicle_clouds)
    rigid_state = _sh_parameters(vehicles, config.sh_degree, generator, config.surfels)
    rigid_state.update({
        "instances_quats": instances_quats.contiguous(),  # [F, I, 4]
        "instances_trans": instances_trans.contiguous(),  # [F, I, 3]
        "points_ids": torch.cat(point_ids).contiguous(),  # [N, 1]
        "instances_size": torch.tensor([plan.size for plan in _VEHICLES], dtype=torch.float32),  # [I, 3]
        "instances_fv": instances_fv.contiguous(),  # [F, I]
    })
    images = config.num_frames * config.num_cameras
    affine_state = {  # drivestudio's zero-initialised AffineTransform (identity): exercises the loader path
        "embedding.weight": torch.zeros(images, 4),
        "decoder.0.weight": torch.zeros(64, 4), "decoder.0.bias": torch.zeros(64),
        "decoder.2.weight": torch.zeros(12, 64), "decoder.2.bias": torch.zeros(12),
    }
    return {
        "models": {
            "Background": _sh_parameters(background, config.sh_degree, generator, config.surfels),
            "RigidNodes": rigid_state,
            "Sky": {"base": _sky_cube(config.sky_resolution)},
            "Affine": affine_state,
        },
        "step": 30000,
        "synthetic": {"generator": "examples/omnire/synthetic.py", "label": SYNTHETIC_LABEL,
                      "config": {k: getattr(config, k) for k in config.__dataclass_fields__}},
    }


# Camera mounts (Waymo ego frame: x forward, y left, z up): yaw (rad) and position on the car.
_RIG_YAWS = (0.0, math.radians(45), math.radians(-45), math.radians(90), math.radians(-90), math.pi)
_RIG_POSITIONS = ((1.5, 0.0, 2.0), (1.4, 0.5, 2.0), (1.4, -0.5, 2.0), (1.0, 0.9, 2.0), (1.0, -0.9, 2.0),
                  (-1.0, 0.0, 2.0))
_HORIZONTAL_FOV = math.radians(50.0)  # Waymo's front camera is about 50 degrees wide


def write_camera_folder(scene_dir: Path, config: SyntheticStreetConfig) -> None:
    """intrinsics/{cam}.txt, extrinsics/{cam}.txt, ego_pose/{t:03d}.txt as drivestudio's Waymo layout has them."""
    for sub in ("intrinsics", "extrinsics", "ego_pose"):
        (scene_dir / sub).mkdir(parents=True, exist_ok=True)
    for cam in range(config.num_cameras):
        height, width = CAMERA_ORIGINAL_SIZES["waymo"].get(cam, CAMERA_ORIGINAL_SIZES["waymo"][0])
        focal = 0.5 * width / math.tan(0.5 * _HORIZONTAL_FOV)
        np.savetxt(scene_dir / "intrinsics" / f"{cam}.txt",
                   np.array([focal, focal, width / 2, height / 2, 0, 0, 0, 0, 0], dtype=np.float64))
        yaw = _RIG_YAWS[cam % len(_RIG_YAWS)]
        cam_to_ego = np.eye(4)  # in Waymo camera axes (x forward, y left, z up): a yaw about z
        cam_to_ego[:3, :3] = [[math.cos(yaw), -math.sin(yaw), 0], [math.sin(yaw), math.cos(yaw), 0], [0, 0, 1]]
        cam_to_ego[:3, 3] = _RIG_POSITIONS[cam % len(_RIG_POSITIONS)]
        np.savetxt(scene_dir / "extrinsics" / f"{cam}.txt", cam_to_ego)
    # Ego poses in an arbitrary global frame (as real logs are): the loader must re-base them on the first one.
    global_yaw = 0.7
    global_from_log = np.eye(4)
    global_from_log[:3, :3] = [[math.cos(global_yaw), -math.sin(global_yaw), 0],
                               [math.sin(global_yaw), math.cos(global_yaw), 0], [0, 0, 1]]
    global_from_log[:3, 3] = [1532.25, -871.5, 12.0]
    for frame in range(config.num_frames):
        ego = np.eye(4)
        ego[:3, 3] = [config.ego_speed * frame / config.fps, _EGO_LANE_Y, 0.0]  # street coordinates
        np.savetxt(scene_dir / "ego_pose" / f"{frame:03d}.txt", global_from_log @ ego)
    (scene_dir / f"{SYNTHETIC_LABEL}.txt").write_text(
        "SYNTHETIC scene written by examples/omnire/synthetic.py (not recorded data). Layout: drivestudio's Waymo processed "
        "scene (intrinsics: fx fy cx cy k1 k2 p1 p2 k3 at 1920 px wide; extrinsics: camera-to-ego in Waymo "
        "camera axes; ego_pose: ego-to-world, world re-based on frame 0 by the loader).\n"
    )


def write_synthetic_scene(out_dir: Path | str, config: SyntheticStreetConfig = SyntheticStreetConfig()
                          ) -> Tuple[Path, Path]:
    """Save `out_dir/checkpoint_final.pth` and `out_dir/scene/` (camera folder). Returns (checkpoint, scene_dir)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    checkpoint_path = out_dir / "checkpoint_final.pth"
    torch.save(build_synthetic_checkpoint(config), checkpoint_path)
    scene_dir = out_dir / "scene"
    write_camera_folder(scene_dir, config)
    return checkpoint_path, scene_dir
