"""Loading a drivestudio (OmniRe) checkpoint: Gaussian nodes, sky and affine colour transform.

drivestudio saves `checkpoint_final.pth` = {"models": {node name: state_dict}, "step": int, ...}.
`load_checkpoint` reads Background (static) and RigidNodes exactly (per-frame instance pose and
visibility); DeformableNodes and SMPLNodes are posed as rigid bodies (their deformation network /
joint rotations are not evaluated: `DrivingScene.notes` says so); Sky (EnvLight cube map or SkyModel
MLP) and Affine (mean appearance embedding, as drivestudio does for views outside the training set)
are optional. Everything is plain torch on the CPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

SYNTHETIC_LABEL = "SYNTHETIC"
SH_C0 = 0.28209479177387814  # Y_0^0: rgb = SH_C0 * dc + 0.5

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
    surfel: bool = False  # the checkpoint stores two scales per Gaussian (2DGS surfels; the third is 0 here)

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

    node = GaussianNode(name, means, quats, scales, opacities, sh_coeffs, sh_degree,
                        surfel=state["_scales"].shape[-1] == 2)
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
class DrivingScene:
    """A loaded checkpoint: its Gaussian nodes, sky and affine transform (frame composition: `compose`)."""

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

    def non_surfel_nodes(self) -> List[str]:
        """Nodes whose Gaussians are 3D (three scales, or one for balls): what 2DGS cannot render as trained."""
        return [node.name for node in self.nodes if not node.surfel]


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
