"""examples/omnire/checkpoint.py on the CPU: node activation, instance poses, rigid simplifications, sky, affine, bad files."""

from __future__ import annotations

import pytest
import torch

import omnire
from helpers import YAW_90, gaussian_state, rigid_state


def test_loader_activates_parameters(small_checkpoint):
    scene = omnire.load_checkpoint(small_checkpoint)
    background, rigid = scene.nodes
    assert [node.name for node in scene.nodes] == ["Background", "RigidNodes"]
    assert scene.num_frames == 3 and scene.step == 30000 and not scene.synthetic
    assert torch.allclose(background.scales, torch.ones(2, 3))
    assert torch.allclose(background.opacities, torch.full((2,), 0.5))
    assert torch.allclose(background.quats, torch.tensor([[1.0, 0.0, 0.0, 0.0]] * 2))
    assert background.sh_degree == 3 and background.sh_coeffs.shape == (2, 16, 3)
    assert rigid.is_instance_node and rigid.num_instances == 2
    assert any("CamPose ignored" in note for note in scene.notes)


def test_rigid_pose_applied_like_a_hand_computed_transform(small_checkpoint):
    rigid = omnire.load_checkpoint(small_checkpoint).nodes[1]
    frame1 = rigid.at_frame(1)
    # Instance 0 at frame 1: R = +90 deg about z, t = (10, 0, 1); instance 1 is not visible and is dropped.
    assert frame1.count == 2
    expected = torch.tensor([[10.0, 1.0, 1.0],  # R (1, 0, 0) + t = (0, 1, 0) + t
                             [8.0, 0.0, 1.0]])  # R (0, 2, 0) + t = (-2, 0, 0) + t
    assert torch.allclose(frame1.means, expected, atol=1e-6)
    # World rotation = instance * local: identity local -> the instance's yaw; yaw-90 local -> yaw 180.
    assert torch.allclose(frame1.quats[0], torch.tensor(YAW_90), atol=1e-6)
    frame0 = rigid.at_frame(0)
    assert frame0.count == 3  # everything visible in frame 0 ...
    assert torch.allclose(frame0.means[2], torch.tensor([-4.5, 3.0, 0.5]))  # ... identity pose: local + t
    assert torch.allclose(frame0.quats[2], torch.tensor(YAW_90), atol=1e-6)
    frame2 = rigid.at_frame(2)
    yaw_180 = omnire.quat_multiply(torch.tensor(YAW_90), torch.tensor(YAW_90))
    assert torch.allclose(yaw_180.abs(), torch.tensor([0.0, 0.0, 0.0, 1.0]), atol=1e-6)
    assert torch.allclose(frame2.quats[2], torch.tensor(YAW_90), atol=1e-6)
    with pytest.raises(IndexError):
        rigid.at_frame(3)


def test_smpl_and_deformable_nodes_are_rigid_simplifications(tmp_path):
    smpl = rigid_state()
    smpl["instances_quats"] = smpl["instances_quats"][:, :, None]  # [F, I, 1, 4]: root joint only
    smpl["template.J_canonical"] = torch.zeros(2, 24, 3)
    smpl["template.J_canonical"][0, 0] = torch.tensor([1.0, 0.0, 0.0])  # pelvis of instance 0
    smpl["_features_rest"] = torch.zeros(3, 3, 3)  # drivestudio's SMPL nodes use SH degree 1
    deformable = rigid_state()
    deformable["instances_embedding"] = torch.zeros(2, 16)
    deformable["deform_network.layer.weight"] = torch.zeros(4, 4)
    path = tmp_path / "checkpoint_final.pth"
    torch.save({"models": {"Background": gaussian_state([[0.0, 0.0, 9.0]]), "SMPLNodes": smpl,
                           "DeformableNodes": deformable}, "step": 1}, path)
    scene = omnire.load_checkpoint(path)
    assert sum("SMPLNodes posed as rigid" in note for note in scene.notes) == 1
    assert sum("DeformableNodes posed as rigid" in note for note in scene.notes) == 1
    smpl_node = scene.nodes[1]
    assert smpl_node.sh_degree == 1
    # Rotation about the pelvis (1, 0, 0): the point at the pelvis stays put, (0, 2, 0) turns to (-1, -1, 0).
    frame1 = smpl_node.at_frame(1)
    assert torch.allclose(frame1.means, torch.tensor([[11.0, 0.0, 1.0], [9.0, -1.0, 1.0]]), atol=1e-6)


def test_loader_rejects_bad_input_with_clear_messages(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        omnire.load_checkpoint(tmp_path / "missing.pth")
    not_drivestudio = tmp_path / "ckpt_29999_rank0.pt"
    torch.save({"step": 1, "splats": {"means": torch.zeros(1, 3)}}, not_drivestudio)
    with pytest.raises(omnire.CheckpointFormatError, match="no 'models' dict"):
        omnire.load_checkpoint(not_drivestudio)
    broken = rigid_state()
    del broken["instances_fv"]
    broken_path = tmp_path / "broken.pth"
    torch.save({"models": {"RigidNodes": broken}}, broken_path)
    with pytest.raises(omnire.CheckpointFormatError, match="instances_fv"):
        omnire.load_checkpoint(broken_path)
    short = gaussian_state([[0.0, 0.0, 1.0], [0.0, 0.0, 2.0]])
    short["_opacities"] = short["_opacities"][:1]
    torch.save({"models": {"Background": short}}, broken_path)
    with pytest.raises(omnire.CheckpointFormatError, match="'_opacities'.* 1 rows, _means has 2"):
        omnire.load_checkpoint(broken_path)
    garbage = tmp_path / "garbage.pth"
    garbage.write_bytes(b"not a torch file")
    with pytest.raises(omnire.CheckpointFormatError, match="not a readable torch checkpoint"):
        omnire.load_checkpoint(garbage)


def test_cube_map_lookup_picks_the_face_of_the_major_axis():
    face_colors = torch.arange(18, dtype=torch.float32).reshape(6, 1, 1, 3)
    cube = face_colors.expand(6, 4, 4, 3)  # each face one colour
    axes = torch.tensor([[2.0, 0.1, 0.0], [-2.0, 0.0, 0.1], [0.1, 2.0, 0.0], [0.0, -2.0, 0.1],
                         [0.1, 0.0, 2.0], [0.0, 0.1, -2.0]])
    assert torch.allclose(omnire.sample_cube_map(cube, axes), face_colors.reshape(6, 3))
    sky = omnire.CubeMapSky(cube)
    world_up = torch.tensor([[0.0, 0.0, 1.0]])
    assert torch.allclose(sky(world_up), face_colors[2].reshape(1, 3))  # world +z is the cube's +y face


def test_mlp_sky_and_affine_follow_their_definitions():
    in_dims = 3 + 2 * 3 * 7  # identity + sin/cos of 3 directions at 7 frequencies
    torch.manual_seed(0)
    state = {"direction_encoding.scales": 2.0 ** torch.arange(0, 7).float(),
             "sky_head.layers.0.weight": torch.randn(8, in_dims), "sky_head.layers.0.bias": torch.randn(8),
             "sky_head.layers.1.weight": torch.randn(8, 8 + in_dims), "sky_head.layers.1.bias": torch.randn(8),
             "sky_head.layers.2.weight": torch.randn(3, 8), "sky_head.layers.2.bias": torch.randn(3)}
    sky = omnire.sky_from_state_dict(state)
    direction = torch.tensor([[0.0, 0.6, 0.8]])
    scaled = (direction[:, None, :] * state["direction_encoding.scales"][:, None]).reshape(1, -1)
    encoded = torch.cat([direction, torch.sin(scaled), torch.cos(scaled)], dim=-1)
    hidden = torch.relu(encoded @ state["sky_head.layers.0.weight"].T + state["sky_head.layers.0.bias"])
    hidden = torch.relu(torch.cat([hidden, encoded], -1) @ state["sky_head.layers.1.weight"].T
                        + state["sky_head.layers.1.bias"])
    expected = torch.sigmoid(hidden @ state["sky_head.layers.2.weight"].T + state["sky_head.layers.2.bias"])
    assert torch.allclose(sky(direction), expected, atol=1e-5)

    affine_state = {"embedding.weight": torch.tensor([[1.0], [3.0]]), "decoder.0.weight": torch.ones(2, 1),
                    "decoder.0.bias": torch.zeros(2), "decoder.2.weight": torch.zeros(12, 2),
                    "decoder.2.bias": torch.zeros(12)}
    affine_state["decoder.2.weight"][3] = torch.tensor([0.05, 0.0])  # red offset = 0.05 * mean embedding 2
    affine = omnire.affine_from_state_dict(affine_state)
    assert torch.allclose(affine, torch.tensor([[1.0, 0, 0, 0.1], [0, 1.0, 0, 0], [0, 0, 1.0, 0]]))


def test_nodes_with_two_scales_are_surfels(tmp_path):
    surfels = gaussian_state([[0.0, 0.0, 20.0], [1.0, 0.0, 20.0]])
    surfels["_scales"] = torch.zeros(2, 2)  # 2DGS: two scales per Gaussian
    path = tmp_path / "checkpoint_final.pth"
    torch.save({"models": {"Background": surfels, "RigidNodes": rigid_state()}}, path)
    scene = omnire.load_checkpoint(path)
    assert [node.surfel for node in scene.nodes] == [True, False]
    assert scene.non_surfel_nodes() == ["RigidNodes"] and scene.nodes[0].scales.shape == (2, 3)
    moved = scene.to("cpu")
    assert moved.nodes[0].surfel and moved.non_surfel_nodes() == ["RigidNodes"]
