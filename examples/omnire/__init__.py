"""OmniRe / drivestudio driving scenes for gsplat, without drivestudio: what `omnire_driving.py` renders.

One module per job:

- `checkpoint`: read `checkpoint_final.pth` (Gaussian nodes, sky, affine colour transform) into a
  `DrivingScene`;
- `rig`: read a processed scene folder (intrinsics/, extrinsics/, ego_pose/) into a `CameraRig`;
- `compose`: one frame as drivestudio renders it (all nodes in one `gsplat.rasterization` call with
  `RASTERIZE_KWARGS`, per-camera SH colours, sky in 1 - alpha, affine transform);
- `synthetic`: a SYNTHETIC street written in the same checkpoint and folder formats (3D Gaussians, or 2DGS
  surfels with `SyntheticStreetConfig(surfels=True)`).

Everything here is plain torch and runs on the CPU; only `gsplat.rasterization` (in the example) needs CUDA.
"""

from .checkpoint import (
    SH_C0,
    SYNTHETIC_LABEL,
    CheckpointFormatError,
    ConstantSky,
    CubeMapSky,
    DrivingScene,
    GaussianNode,
    MLPSky,
    NodeGaussians,
    affine_from_state_dict,
    load_checkpoint,
    node_from_state_dict,
    quat_multiply,
    sample_cube_map,
    sky_from_state_dict,
)
from .compose import (
    RASTERIZE_KWARGS,
    FrameGaussians,
    composite_image,
    compose_frame,
    evaluate_node_colors,
    pixel_viewdirs,
    rasterize_kwargs,
    sky_colors,
)
from .rig import DATASETS, RENDER_SIZES, CameraRig, load_camera_rig, scale_intrinsics
from .synthetic import (
    SyntheticStreetConfig,
    build_synthetic_checkpoint,
    surfel_parameters,
    write_camera_folder,
    write_synthetic_scene,
)

__all__ = [
    "DATASETS",
    "RASTERIZE_KWARGS",
    "RENDER_SIZES",
    "SH_C0",
    "SYNTHETIC_LABEL",
    "CameraRig",
    "CheckpointFormatError",
    "ConstantSky",
    "CubeMapSky",
    "DrivingScene",
    "FrameGaussians",
    "GaussianNode",
    "MLPSky",
    "NodeGaussians",
    "SyntheticStreetConfig",
    "affine_from_state_dict",
    "build_synthetic_checkpoint",
    "compose_frame",
    "composite_image",
    "evaluate_node_colors",
    "load_camera_rig",
    "load_checkpoint",
    "node_from_state_dict",
    "pixel_viewdirs",
    "quat_multiply",
    "rasterize_kwargs",
    "sample_cube_map",
    "scale_intrinsics",
    "sky_colors",
    "sky_from_state_dict",
    "surfel_parameters",
    "write_camera_folder",
    "write_synthetic_scene",
]
