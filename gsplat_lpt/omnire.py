"""OmniRe / drivestudio driving scenes for gsplat: checkpoint loader, per-frame composition, synthetic scenes.

drivestudio (github ziyc/drivestudio) saves `checkpoint_final.pth` = {"models": {node name: state_dict},
"step": int, ...}; cameras live in the processed dataset folder (`intrinsics/{cam}.txt`,
`extrinsics/{cam}.txt`, `ego_pose/{t:03d}.txt`). At render time every Gaussian node yields activated,
world-space Gaussians for the current frame, colours are evaluated per node outside the rasterizer, and
all nodes go into ONE `gsplat.rasterization` call (`RASTERIZE_KWARGS`); the sky fills `1 - alpha` and an
optional per-image affine colour transform follows. This module reproduces that path without drivestudio:

- `load_checkpoint` reads Background (static) and RigidNodes exactly (per-frame instance pose and
  visibility); DeformableNodes and SMPLNodes are posed as rigid bodies (their deformation network / joint
  rotations are not evaluated: `DrivingScene.notes` says so); Sky (EnvLight cube map or SkyModel MLP) and
  Affine (mean appearance embedding, as drivestudio does for views outside the training set) are optional.
- `load_camera_rig` reads a processed scene folder in the layouts of drivestudio's datasets.
- `write_synthetic_scene` builds a SYNTHETIC street (road, facades, a dense semi-transparent far structure
  near the vanishing point, rigid vehicles moving over the frames) and saves it in the same checkpoint and
  folder formats, so the real loader path is what renders it.

Everything here is plain torch and runs on the CPU; only `gsplat.rasterization` (in the example) needs CUDA.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

SYNTHETIC_LABEL = "SYNTHETIC"

# ---------------------------------------------------------------------------------------------------
# Datasets: camera sizes and conventions (facts from drivestudio's datasets/ and configs/datasets/)
# ---------------------------------------------------------------------------------------------------

DATASETS = ("waymo", "pandaset", "nuscenes", "argoverse", "nuplan")

# Original (H, W) of each processed camera id (drivestudio datasets/dataset_meta.py).
CAMERA_ORIGINAL_SIZES: Dict[str, Dict[int, Tuple[int, int]]] = {
    "waymo": {0: (1280, 1920), 1: (1280, 1920), 2: (1280, 1920), 3: (866, 1920), 4: (866, 1920)},
    "pandaset": {cam: (1080, 1920) for cam in range(6)},
    "nuscenes": {cam: (900, 1600) for cam in range(6)},
    "argoverse": {0: (2048, 1550), **{cam: (1550, 2048) for cam in range(1, 7)}},
    "nuplan": {cam: (1080, 1920) for cam in range(8)},
}
# drivestudio's configs load images at original size / this factor (`downscale_when_loading`).
LOAD_DOWNSCALE = {"waymo": 2, "pandaset": 2, "nuscenes": 3, "argoverse": 3, "nuplan": 3}

# Render sizes (H, W) of the front camera as drivestudio trains on them, plus a 1080p option.
RENDER_SIZES: Dict[str, Tuple[int, int]] = {
    name: (int(CAMERA_ORIGINAL_SIZES[name][0][0] / LOAD_DOWNSCALE[name]),
           int(CAMERA_ORIGINAL_SIZES[name][0][1] / LOAD_DOWNSCALE[name]))
    for name in DATASETS
}  # waymo 640x960, pandaset 540x960, nuscenes 300x533, argoverse 682x516, nuplan 360x640
RENDER_SIZES["1080p"] = (1080, 1920)

# Waymo stores camera-to-ego extrinsics in its camera axes (x front, y left, z up); drivestudio right-multiplies
# this to get OpenCV axes (x right, y down, z front). The other datasets already use OpenCV axes.
OPENCV_TO_WAYMO_CAMERA = torch.tensor(
    [[0.0, 0.0, 1.0, 0.0], [-1.0, 0.0, 0.0, 0.0], [0.0, -1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]]
)

# Where the camera poses come from, per dataset:
#   "ego":       extrinsics/{cam}.txt (camera-to-ego) and ego_pose/{t:03d}.txt (ego-to-world), world = first ego pose;
#   "pandaset":  extrinsics/{t:03d}_{cam}.txt (camera-to-world), world = ego_pose/{start:03d}.txt;
#   "nuscenes":  extrinsics/{t:03d}_{cam}.txt (camera-to-world), world = the front camera at the start.
POSE_LAYOUTS = {"waymo": "ego", "argoverse": "ego", "nuplan": "ego", "pandaset": "pandaset", "nuscenes": "nuscenes"}

# The one rasterization call drivestudio makes per image (configs/omnire.yaml `render:` + trainers/base.py).
RASTERIZE_KWARGS: Dict[str, Any] = dict(
    packed=False, absgrad=True, rasterize_mode="classic", near_plane=0.1, far_plane=1e10,
    render_mode="RGB+ED", radius_clip=0.0,
)

GAUSSIAN_KEYS = ("_means", "_scales", "_quats", "_opacities", "_features_dc")
INSTANCE_KEYS = ("points_ids", "instances_quats", "instances_trans", "instances_fv")
RIGID_SIMPLIFICATIONS = {
    "DeformableNodes": "DeformableNodes posed as rigid instances: deform_network (per-frame xyz/rotation/scale "
                       "offsets) is not evaluated",
    "SMPLNodes": "SMPLNodes posed as rigid bodies in their canonical pose (root rotation about the pelvis + "
                 "translation); the 23 joint rotations (linear blend skinning) are not applied",
}


class CheckpointFormatError(ValueError):
    """The file is not a drivestudio checkpoint this loader understands (the message says what is missing)."""


# ---------------------------------------------------------------------------------------------------
# Quaternions (w, x, y, z), as drivestudio and gsplat store them
# ---------------------------------------------------------------------------------------------------


def quat_multiply(left: Tensor, right: Tensor) -> Tensor:
    """Hamilton product left * right, broadcasting over leading dims. [..., 4]"""
    w1, x1, y1, z1 = left.unbind(-1)
    w2, x2, y2, z2 = right.unbind(-1)
    return torch.stack(
        [
            w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
            w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
            w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
            w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
        ],
        dim=-1,
    )


def quat_to_rotmat(quats: Tensor) -> Tensor:
    """Rotation matrices of (not necessarily unit) quaternions. [..., 4] -> [..., 3, 3]"""
    from gsplat.cuda._torch_impl import _quat_to_rotmat  # pure torch; never reaches gsplat's CUDA build

    return _quat_to_rotmat(quats)


def yaw_quat(yaw: Tensor) -> Tensor:
    """Rotation about +z by `yaw` radians. [...] -> [..., 4]"""
    half = 0.5 * yaw
    zeros = torch.zeros_like(yaw)
    return torch.stack([torch.cos(half), zeros, zeros, torch.sin(half)], dim=-1)


def axis_angle_quat(axis: Sequence[float], angle: Tensor) -> Tensor:
    """Rotation about a fixed unit `axis` by `angle` radians. [...] -> [..., 4]"""
    axis_t = F.normalize(torch.tensor(axis, dtype=angle.dtype, device=angle.device), dim=0)
    half = 0.5 * angle
    return torch.cat([torch.cos(half)[..., None], torch.sin(half)[..., None] * axis_t], dim=-1)


# ---------------------------------------------------------------------------------------------------
# Gaussian nodes
# ---------------------------------------------------------------------------------------------------


@dataclass
class NodeGaussians:
    """Activated world-space Gaussians of one node at one frame (what a drivestudio node's get_gaussians returns)."""

    name: str
    means: Tensor  # [N, 3]
    quats: Tensor  # [N, 4] unit, wxyz
    scales: Tensor  # [N, 3] activated (exp)
    opacities: Tensor  # [N] activated (sigmoid), visibility applied
    sh_coeffs: Tensor  # [N, K, 3]
    sh_degree: int

    @property
    def count(self) -> int:
        return int(self.means.shape[0])


@dataclass
class GaussianNode:
    """One Gaussian node of a checkpoint, activated. Instance nodes keep means in instance-local coordinates."""

    name: str
    means: Tensor  # [N, 3] world (static node) or instance-local (instance node)
    quats: Tensor  # [N, 4] unit, wxyz (local for instance nodes)
    scales: Tensor  # [N, 3] activated
    opacities: Tensor  # [N] activated
    sh_coeffs: Tensor  # [N, K, 3] = cat(features_dc, features_rest)
    sh_degree: int
    instance_ids: Optional[Tensor] = None  # [N] long: which instance each Gaussian belongs to
    instances_quats: Optional[Tensor] = None  # [F, I, 4] per-frame instance rotation (wxyz, normalised at use)
    instances_trans: Optional[Tensor] = None  # [F, I, 3] per-frame instance translation (world)
    instances_visible: Optional[Tensor] = None  # [F, I] bool: instance annotated / visible in frame f
    instances_size: Optional[Tensor] = None  # [I, 3] box size (length, width, height)
    pivots: Optional[Tensor] = None  # [I, 3] local point the rotation turns about (SMPL pelvis); None = origin
    simplification: Optional[str] = None  # set when the node is not rendered exactly as drivestudio does

    @property
    def is_instance_node(self) -> bool:
        return self.instance_ids is not None

    @property
    def num_frames(self) -> Optional[int]:
        return None if self.instances_visible is None else int(self.instances_visible.shape[0])

    @property
    def num_instances(self) -> int:
        return 0 if self.instances_visible is None else int(self.instances_visible.shape[1])

    def to(self, device: torch.device | str) -> "GaussianNode":
        moved = {
            name: (value.to(device) if isinstance(value, Tensor) else value)
            for name, value in self.__dict__.items()
        }
        return GaussianNode(**moved)

    def at_frame(self, frame: int) -> NodeGaussians:
        """World-space Gaussians at `frame`; instances not visible in that frame are dropped.

        drivestudio multiplies opacity by the visibility flag instead; a zero-opacity Gaussian never reaches a
        pixel (gsplat culls it in projection), so dropping renders the same image with less work.
        """
        if not self.is_instance_node:
            return NodeGaussians(self.name, self.means, self.quats, self.scales, self.opacities,
                                 self.sh_coeffs, self.sh_degree)
        if not 0 <= frame < self.num_frames:
            raise IndexError(f"{self.name}: frame {frame} outside the checkpoint's {self.num_frames} frames")
        point_visible = self.instances_visible[frame][self.instance_ids]  # [N] bool
        ids = self.instance_ids[point_visible]  # [M]
        instance_quats = F.normalize(self.instances_quats[frame], dim=-1)  # [I, 4]
        rotations = quat_to_rotmat(instance_quats)  # [I, 3, 3]
        local = self.means[point_visible]  # [M, 3]
        if self.pivots is not None:
            pivot = self.pivots[ids]  # [M, 3]
            local_rotated = torch.einsum("mij,mj->mi", rotations[ids], local - pivot) + pivot
        else:
            local_rotated = torch.einsum("mij,mj->mi", rotations[ids], local)
        means = local_rotated + self.instances_trans[frame][ids]  # [M, 3]
        quats = F.normalize(quat_multiply(instance_quats[ids], self.quats[point_visible]), dim=-1)  # [M, 4]
        return NodeGaussians(self.name, means, quats, self.scales[point_visible], self.opacities[point_visible],
                             self.sh_coeffs[point_visible], self.sh_degree)

    def visible_instances(self, frame: int) -> int:
        return int(self.instances_visible[frame].sum()) if self.is_instance_node else 0


def _require(state: Dict[str, Any], keys: Sequence[str], node: str) -> None:
    missing = [key for key in keys if key not in state]
    if missing:
        raise CheckpointFormatError(
            f"models[{node!r}] lacks {missing}; a drivestudio Gaussian node has {list(GAUSSIAN_KEYS)}"
            + (f" and {list(INSTANCE_KEYS)}" if any(k in INSTANCE_KEYS for k in missing) else "")
        )


def node_from_state_dict(name: str, state: Dict[str, Tensor]) -> GaussianNode:
    """Activate one node's parameters: exp(scales), sigmoid(opacities), normalised quats, SH from dc + rest."""
    _require(state, GAUSSIAN_KEYS, name)
    means = state["_means"].float()  # [N, 3]
    count = means.shape[0]
    for key in GAUSSIAN_KEYS + ("_features_rest",):
        if key in state and state[key].shape[0] != count:
            raise CheckpointFormatError(f"models[{name!r}][{key!r}] has {state[key].shape[0]} rows, _means has {count}")
    scales = torch.exp(state["_scales"].float())  # [N, 3], or [N, 1] with ball_gaussians
    if scales.shape[-1] == 1:
        scales = scales.expand(count, 3).contiguous()  # isotropic ("ball") Gaussians
    elif scales.shape[-1] == 2:
        scales = torch.cat([scales, torch.zeros_like(scales[:, :1])], dim=-1)  # 2-D Gaussians: flat in z
    quats = F.normalize(state["_quats"].float(), dim=-1)  # [N, 4]
    opacities = torch.sigmoid(state["_opacities"].float()).reshape(count)  # [N]
    features_dc = state["_features_dc"].float().reshape(count, 1, 3)  # [N, 1, 3]
    features_rest = state.get("_features_rest")
    if features_rest is None:
        features_rest = torch.zeros(count, 0, 3)
    sh_coeffs = torch.cat([features_dc, features_rest.float().reshape(count, -1, 3)], dim=1)  # [N, K, 3]
    sh_degree = math.isqrt(sh_coeffs.shape[1]) - 1
    if (sh_degree + 1) ** 2 != sh_coeffs.shape[1]:
        raise CheckpointFormatError(f"models[{name!r}]: {sh_coeffs.shape[1]} SH bases is not a square number")

    node = GaussianNode(name, means, quats, scales, opacities, sh_coeffs, sh_degree)
    if not any(key in state for key in INSTANCE_KEYS):
        return node

    _require(state, INSTANCE_KEYS, name)
    instance_ids = state["points_ids"].reshape(-1).long()  # [N]  (stored [N, 1], key spelled "points_ids")
    instances_quats = state["instances_quats"].float()  # [F, I, 4]; SMPLNodes: [F, I, 1, 4] (root joint)
    if instances_quats.dim() == 4:
        instances_quats = instances_quats[:, :, 0]
    instances_trans = state["instances_trans"].float()  # [F, I, 3]
    instances_visible = state["instances_fv"].bool()  # [F, I]
    frames, instances = instances_visible.shape
    if instances_quats.shape != (frames, instances, 4) or instances_trans.shape != (frames, instances, 3):
        raise CheckpointFormatError(
            f"models[{name!r}]: instances_quats {tuple(instances_quats.shape)} / instances_trans "
            f"{tuple(instances_trans.shape)} do not match instances_fv {tuple(instances_visible.shape)}"
        )
    if instance_ids.numel() != count or (count and (instance_ids.min() < 0 or instance_ids.max() >= instances)):
        raise CheckpointFormatError(f"models[{name!r}]: points_ids must hold {count} ids in [0, {instances})")
    pivots = None
    for key, value in state.items():  # SMPL canonical joints [I, 24, 3]: rotate about the pelvis
        if key.endswith("J_canonical") and value.dim() == 3 and value.shape[0] == instances:
            pivots = value[:, 0].float()
    return replace(
        node,
        instance_ids=instance_ids,
        instances_quats=instances_quats,
        instances_trans=instances_trans,
        instances_visible=instances_visible,
        instances_size=state.get("instances_size"),
        pivots=pivots,
        simplification=RIGID_SIMPLIFICATIONS.get(name),
    )


# ---------------------------------------------------------------------------------------------------
# Sky and affine colour transform
# ---------------------------------------------------------------------------------------------------


@dataclass
class ConstantSky:
    color: Tensor  # [3]

    def __call__(self, viewdirs: Tensor) -> Tensor:  # [..., 3] -> [..., 3]
        return self.color.to(viewdirs).expand(viewdirs.shape)

    def to(self, device) -> "ConstantSky":
        return ConstantSky(self.color.to(device))

    def describe(self) -> str:
        return "constant sky colour " + ", ".join(f"{c:.2f}" for c in self.color.tolist())


def sample_cube_map(cube: Tensor, directions: Tensor) -> Tensor:
    """Bilinear lookup of a cube map [6, R, R, 3] (faces +x, -x, +y, -y, +z, -z, OpenGL face orientation).

    Filtering does not cross face edges (nvdiffrast's does): the seams may differ by one texel's blend.
    """
    flat = directions.reshape(-1, 3)  # [P, 3]
    x, y, z = flat.unbind(-1)
    ax, ay, az = flat.abs().unbind(-1)
    major_x = (ax >= ay) & (ax >= az)
    major_y = ~major_x & (ay >= az)
    face = torch.where(major_x, torch.where(x >= 0, 0, 1),
                       torch.where(major_y, torch.where(y >= 0, 2, 3), torch.where(z >= 0, 4, 5)))  # [P]
    # (sc, tc, ma) per face, OpenGL table: s = (sc / |ma| + 1) / 2 indexes columns, t rows.
    sc = torch.stack([-z, z, x, x, x, -x], dim=0).gather(0, face[None])[0]
    tc = torch.stack([-y, -y, z, -z, -y, -y], dim=0).gather(0, face[None])[0]
    ma = torch.stack([ax, ax, ay, ay, az, az], dim=0).gather(0, face[None])[0].clamp_min(1e-12)
    grid = torch.stack([sc / ma, tc / ma], dim=-1)  # [P, 2] in [-1, 1] (grid_sample's x = column, y = row)
    out = torch.empty(flat.shape[0], cube.shape[-1], dtype=cube.dtype, device=cube.device)
    for face_index in range(6):
        selected = face == face_index
        if not selected.any():
            continue
        texture = cube[face_index].permute(2, 0, 1)[None]  # [1, 3, R, R]
        sampled = F.grid_sample(texture, grid[selected][None, None], mode="bilinear",
                                padding_mode="border", align_corners=False)  # [1, 3, 1, P_f]
        out[selected] = sampled[0, :, 0].T
    return out.reshape(*directions.shape[:-1], cube.shape[-1])


@dataclass
class CubeMapSky:
    """drivestudio's `EnvLight`: a learned cube map looked up by world view direction."""

    cube: Tensor  # [6, R, R, 3]
    # drivestudio turns world directions into the cube's (OpenGL) frame: (x, y, z) -> (x, z, -y).
    world_to_cube: Tensor = field(default_factory=lambda: torch.tensor(
        [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]]))

    def __call__(self, viewdirs: Tensor) -> Tensor:
        return sample_cube_map(self.cube, viewdirs @ self.world_to_cube.to(viewdirs).T)

    def to(self, device) -> "CubeMapSky":
        return CubeMapSky(self.cube.to(device), self.world_to_cube.to(device))

    def describe(self) -> str:
        return f"EnvLight cube map {self.cube.shape[1]}x{self.cube.shape[2]} (bilinear, no seam filtering)"


@dataclass
class MLPSky:
    """drivestudio's `SkyModel`: sinusoidal encoding of the view direction (+ mean appearance embedding) -> MLP."""

    frequencies: Tensor  # [L]: 2^min_deg .. 2^max_deg
    appearance: Optional[Tensor]  # [E] mean of the per-image embeddings (drivestudio's choice for novel views)
    weights: List[Tensor]  # per layer [out, in]
    biases: List[Tensor]  # per layer [out]

    def encode(self, directions: Tensor) -> Tensor:  # [P, 3] -> [P, 3 + 2 * 3L]
        scaled = (directions[:, None, :] * self.frequencies[:, None]).reshape(directions.shape[0], -1)
        return torch.cat([directions, torch.sin(torch.cat([scaled, scaled + 0.5 * math.pi], dim=-1))], dim=-1)

    def __call__(self, viewdirs: Tensor) -> Tensor:
        flat = viewdirs.reshape(-1, 3)
        features = self.encode(flat)
        if self.appearance is not None:
            features = torch.cat([features, self.appearance.expand(flat.shape[0], -1)], dim=-1)
        hidden = features
        for layer, (weight, bias) in enumerate(zip(self.weights, self.biases)):
            if layer > 0 and weight.shape[1] == hidden.shape[1] + features.shape[1]:
                hidden = torch.cat([hidden, features], dim=-1)  # skip connection: input re-enters here
            hidden = hidden @ weight.T + bias
            if layer < len(self.weights) - 1:
                hidden = torch.relu(hidden)
        return torch.sigmoid(hidden).reshape(*viewdirs.shape[:-1], 3)

    def to(self, device) -> "MLPSky":
        return MLPSky(self.frequencies.to(device), None if self.appearance is None else self.appearance.to(device),
                      [w.to(device) for w in self.weights], [b.to(device) for b in self.biases])

    def describe(self) -> str:
        return f"SkyModel MLP ({len(self.weights)} layers, mean appearance embedding)"


def sky_from_state_dict(state: Dict[str, Tensor]):
    """EnvLight (key `base`) or SkyModel (keys `sky_head.layers.*`); None when neither is recognised."""
    if "base" in state and state["base"].dim() == 4 and state["base"].shape[0] == 6:
        return CubeMapSky(state["base"].float())
    layer_count = sum(1 for key in state if key.startswith("sky_head.layers.") and key.endswith(".weight"))
    if layer_count:
        frequencies = state.get("direction_encoding.scales", 2.0 ** torch.arange(0, 7)).float()
        embedding = state.get("appearance_embedding.weight")
        return MLPSky(
            frequencies,
            None if embedding is None else embedding.float().mean(dim=0),
            [state[f"sky_head.layers.{i}.weight"].float() for i in range(layer_count)],
            [state[f"sky_head.layers.{i}.bias"].float() for i in range(layer_count)],
        )
    return None


def affine_from_state_dict(state: Dict[str, Tensor]) -> Optional[Tensor]:
    """drivestudio's AffineTransform at its mean embedding (what it uses for views outside training). [3, 4]

    None for the per-pixel variant (`pixel_affine`), which needs pixel coordinates we do not model.
    """
    embedding = state["embedding.weight"].float().mean(dim=0)  # [E]
    first_weight = state["decoder.0.weight"].float()  # [hidden, E]
    if first_weight.shape[1] != embedding.shape[0]:
        return None
    hidden = torch.relu(first_weight @ embedding + state["decoder.0.bias"].float())
    affine = (state["decoder.2.weight"].float() @ hidden + state["decoder.2.bias"].float()).reshape(3, 4)
    affine[:, :3] += torch.eye(3)  # the decoder predicts the offset from identity
    return affine


# ---------------------------------------------------------------------------------------------------
# The scene
# ---------------------------------------------------------------------------------------------------


@dataclass
class FrameGaussians:
    """Everything one `rasterization` call needs for one frame and a batch of C cameras."""

    means: Tensor  # [N, 3]
    quats: Tensor  # [N, 4]
    scales: Tensor  # [N, 3]
    opacities: Tensor  # [N]
    colors: Tensor  # [C, N, 3] per-view RGB (SH evaluated per camera centre)
    node_counts: Dict[str, int]
    visible_instances: int

    @property
    def count(self) -> int:
        return int(self.means.shape[0])


def evaluate_node_colors(gaussians: NodeGaussians, camera_centres: Tensor) -> Tensor:
    """drivestudio's per-node colours: clamp(SH(deg, normalise(mean - cam centre)) + 0.5, 0, 1). [C, N, 3]"""
    if gaussians.sh_degree == 0:  # drivestudio uses sigmoid(dc) for degree-0 nodes
        return torch.sigmoid(gaussians.sh_coeffs[:, 0])[None].expand(camera_centres.shape[0], -1, -1)
    if gaussians.means.is_cuda:
        from gsplat.cuda._wrapper import spherical_harmonics
    else:
        from gsplat.cuda._torch_impl import _spherical_harmonics as spherical_harmonics
    colors = []
    for centre in camera_centres:  # one camera at a time keeps memory at [N, K, 3]
        viewdirs = F.normalize(gaussians.means - centre, dim=-1)  # [N, 3]
        colors.append(spherical_harmonics(gaussians.sh_degree, viewdirs, gaussians.sh_coeffs))
    return torch.clamp(torch.stack(colors) + 0.5, 0.0, 1.0)  # [C, N, 3]


@dataclass
class DrivingScene:
    nodes: List[GaussianNode]
    num_frames: Optional[int]  # frames of the instance tracks (None: static scene)
    step: Optional[int] = None
    sky: Any = None  # ConstantSky | CubeMapSky | MLPSky | None
    affine: Optional[Tensor] = None  # [3, 4]
    notes: List[str] = field(default_factory=list)  # simplifications and ignored modules, for the report
    source: str = ""
    synthetic: bool = False

    @property
    def label(self) -> str:
        return f"{SYNTHETIC_LABEL} street scene ({self.source})" if self.synthetic else self.source

    def to(self, device) -> "DrivingScene":
        return replace(self, nodes=[node.to(device) for node in self.nodes],
                       sky=None if self.sky is None else self.sky.to(device),
                       affine=None if self.affine is None else self.affine.to(device))

    def total_gaussians(self) -> int:
        return sum(int(node.means.shape[0]) for node in self.nodes)

    @torch.no_grad()
    def compose(self, frame: int, camtoworlds: Tensor) -> FrameGaussians:
        """All nodes at `frame`, concatenated in checkpoint order, coloured for each camera. camtoworlds [C, 4, 4]"""
        camera_centres = camtoworlds[:, :3, 3]  # [C, 3]
        parts = [node.at_frame(frame) for node in self.nodes]
        colors = [evaluate_node_colors(part, camera_centres) for part in parts]
        return FrameGaussians(
            means=torch.cat([p.means for p in parts]),
            quats=torch.cat([p.quats for p in parts]),
            scales=torch.cat([p.scales for p in parts]),
            opacities=torch.cat([p.opacities for p in parts]),
            colors=torch.cat(colors, dim=1),
            node_counts={p.name: p.count for p in parts},
            visible_instances=sum(node.visible_instances(frame) for node in self.nodes),
        )


def load_checkpoint(path: Path | str, sky: str = "checkpoint",
                    sky_color: Tuple[float, float, float] = (0.62, 0.74, 0.90)) -> DrivingScene:
    """Read a drivestudio `checkpoint_final.pth` (or `checkpoint_{step:05d}.pth`) on the CPU.

    sky: "checkpoint" uses the checkpoint's Sky module (constant `sky_color` when it has none or it is not
    recognised), "constant" always uses `sky_color`, "none" leaves the background black.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)  # tensors and ints only
    except Exception as error:  # pickle of another kind, or not a torch file at all
        raise CheckpointFormatError(f"{path} is not a readable torch checkpoint ({error})") from error
    if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get("models"), dict):
        raise CheckpointFormatError(
            f"{path} has no 'models' dict; drivestudio checkpoints hold "
            "{'models': {'Background': ..., 'RigidNodes': ...}, 'step': ...}"
        )
    nodes: List[GaussianNode] = []
    notes: List[str] = []
    sky_model = None
    affine = None
    for name, state in checkpoint["models"].items():
        if "_means" in state:
            node = node_from_state_dict(name, state)
            nodes.append(node)
            if node.simplification:
                notes.append(node.simplification)
        elif name == "Sky":
            sky_model = sky_from_state_dict(state)
            if sky_model is None:
                notes.append("Sky module not recognised (neither EnvLight nor SkyModel): constant sky used")
        elif name == "Affine":
            affine = affine_from_state_dict(state)
            notes.append("Affine colour transform applied at the mean image embedding (drivestudio's novel-view "
                         "choice)" if affine is not None else "per-pixel Affine transform not supported: ignored")
        else:
            notes.append(f"{name} ignored (not needed to render: cameras come from the scene folder)")
    if not nodes:
        raise CheckpointFormatError(f"{path}: no Gaussian node (a models entry with '_means') found")
    frame_counts = {node.num_frames for node in nodes if node.is_instance_node}
    if len(frame_counts) > 1:
        raise CheckpointFormatError(f"{path}: instance nodes disagree on the frame count: {sorted(frame_counts)}")

    if sky == "none":
        sky_model = None
    elif sky == "constant" or sky_model is None:
        sky_model = ConstantSky(torch.tensor(sky_color, dtype=torch.float32))
    elif sky != "checkpoint":
        raise ValueError(f"sky must be 'checkpoint', 'constant' or 'none', got {sky!r}")
    if sky_model is not None:
        notes.append("sky: " + sky_model.describe())
    synthetic = isinstance(checkpoint.get("synthetic"), dict)  # written by write_synthetic_scene
    return DrivingScene(nodes=nodes, num_frames=frame_counts.pop() if frame_counts else None,
                        step=checkpoint.get("step"), sky=sky_model, affine=affine, notes=notes, source=str(path),
                        synthetic=synthetic)


# ---------------------------------------------------------------------------------------------------
# Cameras
# ---------------------------------------------------------------------------------------------------


@dataclass
class CameraRig:
    camtoworlds: Tensor  # [F, C, 4, 4] OpenCV axes, world = drivestudio's (first ego pose / first camera)
    Ks: Tensor  # [C, 3, 3] at the render size
    width: int
    height: int
    camera_ids: Tuple[int, ...]

    @property
    def num_frames(self) -> int:
        return int(self.camtoworlds.shape[0])

    def to(self, device) -> "CameraRig":
        return replace(self, camtoworlds=self.camtoworlds.to(device), Ks=self.Ks.to(device))


def scale_intrinsics(fx: float, fy: float, cx: float, cy: float, original_size: Tuple[int, int],
                     render_size: Tuple[int, int]) -> Tensor:
    """K at the render size. [3, 3]

    Same aspect ratio (within 1%): per-axis scaling, exactly as drivestudio resizes. Otherwise scale by the width
    ratio and re-centre vertically, which crops or extends the view instead of stretching it.
    """
    (orig_h, orig_w), (height, width) = original_size, render_size
    if abs((orig_w / orig_h) / (width / height) - 1.0) < 0.01:
        sx, sy, shift_y = width / orig_w, height / orig_h, 0.0
    else:
        sx = sy = width / orig_w
        shift_y = 0.5 * (height - orig_h * sy)
    return torch.tensor([[fx * sx, 0.0, cx * sx], [0.0, fy * sy, cy * sy + shift_y], [0.0, 0.0, 1.0]],
                        dtype=torch.float32)


def _load_matrix(path: Path) -> np.ndarray:
    if not path.is_file():
        raise FileNotFoundError(f"camera file {path} does not exist (drivestudio processed-scene layout expected)")
    return np.loadtxt(path, dtype=np.float64)


def count_scene_frames(scene_dir: Path, dataset: str) -> int:
    if POSE_LAYOUTS[dataset] == "nuscenes":
        return len(list((scene_dir / "extrinsics").glob("*_0.txt")))
    return len(list((scene_dir / "ego_pose").glob("*.txt")))


def load_camera_rig(scene_dir: Path | str, dataset: str = "waymo", camera_ids: Sequence[int] = (0,),
                    num_frames: Optional[int] = None, start_timestep: int = 0,
                    render_size: Optional[Tuple[int, int]] = None) -> CameraRig:
    """Camera-to-world poses [F, C, 4, 4] and intrinsics of a drivestudio processed scene folder.

    All cameras are rendered at one size (one batched rasterization call): the front camera's size for
    `dataset`, or `render_size`; cameras whose native size differs keep their own focal length (see
    `scale_intrinsics`). Lens distortion is ignored, as drivestudio does.
    """
    scene_dir = Path(scene_dir)
    if dataset not in DATASETS:
        raise ValueError(f"dataset must be one of {DATASETS}, got {dataset!r}")
    if not scene_dir.is_dir():
        raise FileNotFoundError(f"scene folder {scene_dir} does not exist")
    height, width = render_size or RENDER_SIZES[dataset]
    layout = POSE_LAYOUTS[dataset]
    if num_frames is None:
        num_frames = count_scene_frames(scene_dir, dataset) - start_timestep
    if num_frames <= 0:
        raise ValueError(f"{scene_dir}: no frames from timestep {start_timestep}")
    timesteps = range(start_timestep, start_timestep + num_frames)
    sizes = CAMERA_ORIGINAL_SIZES[dataset]

    Ks, poses = [], []
    for cam in camera_ids:
        intrinsic = _load_matrix(scene_dir / "intrinsics" / f"{cam}.txt").reshape(-1)  # fx fy cx cy k1 k2 p1 p2 k3
        Ks.append(scale_intrinsics(*intrinsic[:4].tolist(), original_size=sizes.get(cam, sizes[0]),
                                   render_size=(height, width)))
        if layout == "ego":
            cam_to_ego = _load_matrix(scene_dir / "extrinsics" / f"{cam}.txt")
            if dataset == "waymo":
                cam_to_ego = cam_to_ego @ OPENCV_TO_WAYMO_CAMERA.double().numpy()
            ego_start = _load_matrix(scene_dir / "ego_pose" / f"{start_timestep:03d}.txt")
            world_from_start = np.linalg.inv(ego_start)
            cam_poses = [world_from_start @ _load_matrix(scene_dir / "ego_pose" / f"{t:03d}.txt") @ cam_to_ego
                         for t in timesteps]
        else:
            if layout == "pandaset":
                reference = _load_matrix(scene_dir / "ego_pose" / f"{start_timestep:03d}.txt")
            else:  # nuscenes: the front camera at the first timestep is the world origin
                reference = _load_matrix(scene_dir / "extrinsics" / f"{start_timestep:03d}_0.txt")
            world_from_reference = np.linalg.inv(reference)
            cam_poses = [world_from_reference @ _load_matrix(scene_dir / "extrinsics" / f"{t:03d}_{cam}.txt")
                         for t in timesteps]
        poses.append(np.stack(cam_poses))  # [F, 4, 4]
    camtoworlds = torch.from_numpy(np.stack(poses, axis=1)).float()  # [F, C, 4, 4]
    return CameraRig(camtoworlds, torch.stack(Ks), width, height, tuple(camera_ids))


def pixel_viewdirs(camtoworlds: Tensor, Ks: Tensor, width: int, height: int) -> Tensor:
    """World-space unit ray direction through each pixel centre. [C, 4, 4], [C, 3, 3] -> [C, H, W, 3]"""
    device = camtoworlds.device
    ys, xs = torch.meshgrid(torch.arange(height, device=device, dtype=torch.float32) + 0.5,
                            torch.arange(width, device=device, dtype=torch.float32) + 0.5, indexing="ij")
    fx, fy = Ks[:, 0, 0, None, None], Ks[:, 1, 1, None, None]
    cx, cy = Ks[:, 0, 2, None, None], Ks[:, 1, 2, None, None]
    camera_dirs = torch.stack([(xs - cx) / fx, (ys - cy) / fy, torch.ones_like(xs).expand_as(xs - cx)], -1)
    world_dirs = torch.einsum("cij,chwj->chwi", camtoworlds[:, :3, :3], camera_dirs)  # [C, H, W, 3]
    return F.normalize(world_dirs, dim=-1)


def composite_image(render_colors: Tensor, render_alphas: Tensor, sky_rgb: Optional[Tensor] = None,
                    affine: Optional[Tensor] = None) -> Tensor:
    """drivestudio's final colour: clamp(rgb, max=1) + sky * (1 - alpha), then the affine transform.

    render_colors [C, H, W, 4] (RGB+ED), render_alphas [C, H, W, 1], sky_rgb [C, H, W, 3] -> [C, H, W, 3]
    """
    rgb = torch.clamp(render_colors[..., :3], max=1.0)
    if sky_rgb is not None:
        rgb = rgb + sky_rgb * (1.0 - render_alphas)
    if affine is not None:
        rgb = rgb @ affine[:, :3].T + affine[:, 3]
    return rgb


def psnr(image: Tensor, reference: Tensor, peak: float = 1.0) -> float:
    """Peak signal-to-noise ratio in dB; inf when the images are identical."""
    mse = torch.mean((image.double() - reference.double()) ** 2).item()
    return math.inf if mse == 0.0 else 10.0 * math.log10(peak * peak / mse)


# ---------------------------------------------------------------------------------------------------
# SYNTHETIC street scene, written in drivestudio's formats
# ---------------------------------------------------------------------------------------------------

SH_C0 = 0.28209479177387814  # Y_0^0: rgb = SH_C0 * dc + 0.5


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


def _sh_parameters(cloud: _Cloud, sh_degree: int, generator: torch.Generator) -> Dict[str, Tensor]:
    """drivestudio's raw parameters: log scales, logit opacities [N, 1], SH dc [N, 3] and rest [N, K-1, 3]."""
    count = cloud.means.shape[0]
    rest_bases = (sh_degree + 1) ** 2 - 1
    features_rest = torch.randn(count, rest_bases, 3, generator=generator) * torch.as_tensor(
        cloud.view_dependence, dtype=torch.float32).reshape(-1, 1, 1)
    return {
        "_means": cloud.means.float().contiguous(),
        "_scales": torch.log(cloud.scales.clamp_min(1e-4)).float().contiguous(),
        "_quats": cloud.quats.float().contiguous(),
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
    rigid_state = _sh_parameters(vehicles, config.sh_degree, generator)
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
            "Background": _sh_parameters(background, config.sh_degree, generator),
            "RigidNodes": rigid_state,
            "Sky": {"base": _sky_cube(config.sky_resolution)},
            "Affine": affine_state,
        },
        "step": 30000,
        "synthetic": {"generator": "gsplat_lpt.omnire", "label": SYNTHETIC_LABEL,
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
        "SYNTHETIC scene written by gsplat_lpt.omnire (not recorded data). Layout: drivestudio's Waymo processed "
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

