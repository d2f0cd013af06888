"""Scenes: what the tools render and analyse.

- `scene`: the `Scene` record (Gaussians + cameras of every frame) and camera helpers;
- `builtin`: the seeded procedural ladder of tile-workload imbalance (`make_scene`, `scene_names`);
- `probes`: frames built unlike the ladder, to check a schedule on other loads (`make_probe_scene`, `probe_names`);
- `loaders`: files users bring (gsplat checkpoints, INRIA .ply, .splat, gsplat's test .npz, COLMAP cameras).

Nothing here imports the library core or the tools.
"""

from .builtin import LADDER_IMBALANCE, default_frames, make_scene, scene_names
from .probes import make_probe_scene, probe_names
from .loaders import (
    ACCEPTED_FORMATS,
    SceneLoadError,
    auto_orbit,
    load_colmap_cameras,
    load_gsplat_checkpoint,
    load_ply,
    load_scene,
    load_splat,
    load_test_npz,
)
from .scene import (
    DEFAULT_HEIGHT,
    DEFAULT_WIDTH,
    MAX_IMAGE_SIDE,
    Scene,
    check_resolution,
    flythrough_path,
    intrinsics,
    look_at,
    orbit_path,
    rig_cameras,
)

__all__ = [
    "ACCEPTED_FORMATS",
    "DEFAULT_HEIGHT",
    "DEFAULT_WIDTH",
    "LADDER_IMBALANCE",
    "MAX_IMAGE_SIDE",
    "Scene",
    "SceneLoadError",
    "auto_orbit",
    "check_resolution",
    "default_frames",
    "flythrough_path",
    "intrinsics",
    "load_colmap_cameras",
    "load_gsplat_checkpoint",
    "load_ply",
    "load_scene",
    "load_splat",
    "load_test_npz",
    "look_at",
    "make_probe_scene",
    "make_scene",
    "orbit_path",
    "probe_names",
    "rig_cameras",
    "scene_names",
]
