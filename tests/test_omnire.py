"""CPU tests of the OmniRe / drivestudio loader, frame composition, SYNTHETIC scene and the example's CLI."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from gsplat_lpt import omnire

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "omnire_driving.py"
YAW_90 = [math.cos(math.pi / 4), 0.0, 0.0, math.sin(math.pi / 4)]  # wxyz, +90 degrees about z


def gaussian_state(means, sh_rest_bases: int = 15, dc=None):
    """drivestudio's raw per-Gaussian parameters for the given means (unit scale, opacity 0.5, identity rotation)."""
    means = torch.as_tensor(means, dtype=torch.float32)
    count = means.shape[0]
    return {
        "_means": means,
        "_scales": torch.zeros(count, 3),  # log 1
        "_quats": torch.tensor([[2.0, 0.0, 0.0, 0.0]]).repeat(count, 1),  # unnormalised identity
        "_opacities": torch.zeros(count, 1),  # logit 0.5
        "_features_dc": torch.zeros(count, 3) if dc is None else torch.as_tensor(dc, dtype=torch.float32),
        "_features_rest": torch.zeros(count, sh_rest_bases, 3),
    }


def rigid_state():
    """Two instances over 3 frames; instance 1 is not annotated in frame 1."""
    state = gaussian_state([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.5, 0.0, 0.0]])
    state["_quats"][2] = torch.tensor(YAW_90)  # a local rotation that composes with the instance's
    instances_quats = torch.tensor([[1.0, 0.0, 0.0, 0.0]]).repeat(3, 2, 1)  # [F, I, 4]
    instances_quats[1, 0] = 3.0 * torch.tensor(YAW_90)  # unnormalised on purpose: the loader normalises
    instances_trans = torch.zeros(3, 2, 3)
    instances_trans[1, 0] = torch.tensor([10.0, 0.0, 1.0])
    instances_trans[:, 1] = torch.tensor([-5.0, 3.0, 0.5])
    visible = torch.ones(3, 2, dtype=torch.bool)
    visible[1, 1] = False
    state.update({
        "points_ids": torch.tensor([[0], [0], [1]]),
        "instances_quats": instances_quats,
        "instances_trans": instances_trans,
        "instances_size": torch.ones(2, 3),
        "instances_fv": visible,
    })
    return state


@pytest.fixture()
def small_checkpoint(tmp_path):
    path = tmp_path / "checkpoint_final.pth"
    torch.save({"models": {"Background": gaussian_state([[0.0, 0.0, 20.0], [1.0, 0.0, 20.0]]),
                           "RigidNodes": rigid_state(),
                           "CamPose": {"embeds.weight": torch.zeros(4, 9)}},
                "step": 30000}, path)
    return path


# ----------------------------------------------------------------------------------------------- loader


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


def test_compose_concatenates_nodes_and_colours_per_camera(small_checkpoint):
    scene = omnire.load_checkpoint(small_checkpoint)
    camtoworlds = torch.eye(4).repeat(2, 1, 1)  # [C, 4, 4]
    camtoworlds[1, :3, 3] = torch.tensor([0.0, 0.0, -5.0])
    frame = scene.compose(1, camtoworlds)
    assert frame.node_counts == {"Background": 2, "RigidNodes": 2}
    assert frame.visible_instances == 1
    assert frame.means.shape == (4, 3) and frame.colors.shape == (2, 4, 3)
    assert torch.allclose(frame.colors, torch.full((2, 4, 3), 0.5))  # zero SH -> clamp(0 + 0.5)


def test_sh_colours_follow_drivestudio(small_checkpoint):
    dc = torch.tensor([[1.0, -3.0, 0.2]])
    node = omnire.node_from_state_dict("Background", gaussian_state([[0.0, 0.0, 5.0]], dc=dc))
    colors = omnire.evaluate_node_colors(node.at_frame(0), torch.zeros(1, 3))
    expected = torch.clamp(omnire.SH_C0 * dc + 0.5, 0.0, 1.0)  # degree-0 term only: view-independent
    assert torch.allclose(colors[0], expected, atol=1e-6)
    flat = omnire.node_from_state_dict("Background", gaussian_state([[0.0, 0.0, 5.0]], sh_rest_bases=0, dc=dc))
    assert flat.sh_degree == 0  # drivestudio uses sigmoid(dc) for degree-0 nodes
    assert torch.allclose(omnire.evaluate_node_colors(flat.at_frame(0), torch.zeros(1, 3))[0], torch.sigmoid(dc))


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


# ------------------------------------------------------------------------------------ sky, affine, image


def test_cube_map_lookup_picks_the_face_of_the_major_axis():
    face_colors = torch.arange(18, dtype=torch.float32).reshape(6, 1, 1, 3)
    cube = face_colors.expand(6, 4, 4, 3)  # each face one colour
    axes = torch.tensor([[2.0, 0.1, 0.0], [-2.0, 0.0, 0.1], [0.1, 2.0, 0.0], [0.0, -2.0, 0.1],
                         [0.1, 0.0, 2.0], [0.0, 0.1, -2.0]])
    assert torch.allclose(omnire.sample_cube_map(cube, axes), face_colors.reshape(6, 3))
    sky = omnire.CubeMapSky(cube)
    world_up = torch.tensor([[0.0, 0.0, 1.0]])
    assert torch.allclose(sky(world_up), face_colors[2].reshape(1, 3))  # world +z is the cube's +y face


def test_synthetic_sky_is_bluer_overhead_than_at_the_horizon():
    sky = omnire.CubeMapSky(omnire._sky_cube(16))
    zenith, horizon = sky(torch.tensor([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]))
    assert zenith[2] > zenith[0] + 0.3 and horizon[0] > zenith[0] + 0.3


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


def test_composite_image_fills_sky_and_applies_affine():
    render_colors = torch.tensor([[[[1.4, 0.2, 0.0, 7.0]]]])  # [C, H, W, 4]: RGB + expected depth
    render_alphas = torch.tensor([[[[0.75]]]])  # [C, H, W, 1]
    sky_rgb = torch.tensor([[[[0.0, 0.4, 0.8]]]])
    affine = torch.cat([torch.eye(3), torch.tensor([[0.0], [0.1], [0.0]])], dim=1)
    image = omnire.composite_image(render_colors, render_alphas, sky_rgb, affine)
    assert torch.allclose(image, torch.tensor([[[[1.0, 0.2 + 0.1 + 0.1, 0.2]]]]))  # clamp, sky * 0.25, +0.1


def test_psnr():
    image = torch.zeros(2, 4, 4, 3)
    assert omnire.psnr(image, image) == math.inf
    assert omnire.psnr(image + 0.1, image) == pytest.approx(20.0)


# ---------------------------------------------------------------------------------------------- cameras


def test_intrinsics_scaling_keeps_aspect_and_centre():
    same = omnire.scale_intrinsics(2000.0, 2000.0, 960.0, 640.0, (1280, 1920), (640, 960))
    assert torch.allclose(same, torch.tensor([[1000.0, 0, 480], [0, 1000.0, 320], [0, 0, 1]]))
    wider = omnire.scale_intrinsics(2000.0, 2000.0, 960.0, 640.0, (1280, 1920), (1080, 1920))  # 1080p
    assert torch.allclose(wider, torch.tensor([[2000.0, 0, 960], [0, 2000.0, 540], [0, 0, 1]]))
    assert omnire.RENDER_SIZES["waymo"] == (640, 960) and omnire.RENDER_SIZES["pandaset"] == (540, 960)
    assert omnire.RENDER_SIZES["nuscenes"] == (300, 533) and omnire.RENDER_SIZES["argoverse"] == (682, 516)
    assert omnire.RENDER_SIZES["nuplan"] == (360, 640) and omnire.RENDER_SIZES["1080p"] == (1080, 1920)


def test_waymo_layout_poses_are_rebased_on_the_first_ego_pose(tmp_path):
    config = omnire.SyntheticStreetConfig(num_frames=3, num_cameras=2)
    omnire.write_camera_folder(tmp_path, config)
    rig = omnire.load_camera_rig(tmp_path, "waymo", (0, 1))
    assert rig.camtoworlds.shape == (3, 2, 4, 4) and (rig.height, rig.width) == (640, 960)
    front = rig.camtoworlds[:, 0]  # [F, 4, 4], OpenCV axes
    assert torch.allclose(front[0, :3, 3], torch.tensor([1.5, 0.0, 2.0]), atol=1e-4)  # mount on the first ego
    assert torch.allclose(front[0, :3, 2], torch.tensor([1.0, 0.0, 0.0]), atol=1e-5)  # looks along +x
    assert torch.allclose(front[0, :3, 1], torch.tensor([0.0, 0.0, -1.0]), atol=1e-5)  # image y points down
    step = config.ego_speed / config.fps
    assert torch.allclose(front[2, :3, 3] - front[0, :3, 3], torch.tensor([2 * step, 0.0, 0.0]), atol=1e-4)
    front_left = rig.camtoworlds[0, 1]
    assert torch.allclose(front_left[:3, 2], torch.tensor([math.sqrt(0.5), math.sqrt(0.5), 0.0]), atol=1e-5)
    focal = 0.5 * 1920 / math.tan(math.radians(25.0))
    assert rig.Ks[0, 0, 0].item() == pytest.approx(focal / 2, rel=1e-5)


def test_pandaset_layout_uses_per_frame_extrinsics(tmp_path):
    for sub in ("intrinsics", "extrinsics", "ego_pose"):
        (tmp_path / sub).mkdir()
    np.savetxt(tmp_path / "intrinsics" / "0.txt", [1900.0, 1900.0, 960.0, 540.0, 0, 0, 0, 0, 0])
    ego_start = np.eye(4)
    ego_start[:3, 3] = [100.0, 50.0, 0.0]
    for t in range(2):
        np.savetxt(tmp_path / "ego_pose" / f"{t:03d}.txt", ego_start)
        cam_to_world = np.eye(4)
        cam_to_world[:3, 3] = [100.0 + t, 50.0, 1.5]
        np.savetxt(tmp_path / "extrinsics" / f"{t:03d}_0.txt", cam_to_world)
    rig = omnire.load_camera_rig(tmp_path, "pandaset", (0,))
    assert torch.allclose(rig.camtoworlds[:, 0, :3, 3], torch.tensor([[0.0, 0.0, 1.5], [1.0, 0.0, 1.5]]))
    assert torch.allclose(rig.Ks[0], torch.tensor([[950.0, 0, 480], [0, 950.0, 270], [0, 0, 1]]))
    with pytest.raises(FileNotFoundError, match="1.txt"):
        omnire.load_camera_rig(tmp_path, "pandaset", (1,))


# ----------------------------------------------------------------------------------- SYNTHETIC scene

SMALL = omnire.SyntheticStreetConfig(num_frames=6, density=0.01, seed=3)


@pytest.fixture(scope="module")
def small_synthetic():
    return omnire.build_synthetic_checkpoint(SMALL)


def test_synthetic_checkpoint_has_drivestudio_format(small_synthetic):
    models = small_synthetic["models"]
    assert {"Background", "RigidNodes"} <= set(models) and small_synthetic["step"] == 30000
    background, rigid = models["Background"], models["RigidNodes"]
    count = background["_means"].shape[0]
    assert 5_000 < count < 20_000  # density 0.01 of about 1.1M
    assert background["_scales"].shape == (count, 3) and background["_quats"].shape == (count, 4)
    assert background["_opacities"].shape == (count, 1) and background["_features_dc"].shape == (count, 3)
    assert background["_features_rest"].shape == (count, 15, 3)
    frames, instances = rigid["instances_fv"].shape
    assert (frames, instances) == (6, len(omnire._VEHICLES)) and rigid["instances_fv"].dtype == torch.bool
    assert rigid["instances_quats"].shape == (6, instances, 4) and rigid["instances_trans"].shape == (6, instances, 3)
    assert rigid["points_ids"].shape == (rigid["_means"].shape[0], 1) and rigid["points_ids"].dtype == torch.long
    assert rigid["instances_size"].shape == (instances, 3)
    # Local means stay inside each instance's box, as drivestudio's out-of-box pruning expects.
    half_size = rigid["instances_size"][rigid["points_ids"][:, 0]] / 2
    assert (rigid["_means"].abs() <= half_size + 1e-6).all()


def test_synthetic_scene_is_seeded(small_synthetic):
    again = omnire.build_synthetic_checkpoint(SMALL)
    for node in ("Background", "RigidNodes"):
        for key, value in small_synthetic["models"][node].items():
            assert torch.equal(value, again["models"][node][key]), (node, key)
    other = omnire.build_synthetic_checkpoint(omnire.SyntheticStreetConfig(num_frames=6, density=0.01, seed=4))
    assert not torch.equal(other["models"]["Background"]["_means"], small_synthetic["models"]["Background"]["_means"])


def test_synthetic_vehicles_move_and_leave(small_synthetic):
    rigid = small_synthetic["models"]["RigidNodes"]
    trans, visible = rigid["instances_trans"], rigid["instances_fv"]
    always_visible = visible.all(dim=0)  # [I]
    moved = (trans[-1] - trans[0]).norm(dim=-1)  # [I]
    assert (moved[always_visible] > 1.0).sum() >= 2  # lead car, truck, ... drive along the road
    assert (moved[always_visible] < 1e-6).sum() == 1  # the parked car stays
    assert (~visible).any()  # one vehicle appears late: its frames before are dropped
    node = omnire.node_from_state_dict("RigidNodes", rigid)
    counts = [node.at_frame(frame).count for frame in range(SMALL.num_frames)]
    assert len(set(counts)) > 1 and max(counts) <= rigid["_means"].shape[0]


def test_synthetic_round_trip_through_the_loaders(tmp_path):
    config = omnire.SyntheticStreetConfig(num_frames=4, density=0.01)
    checkpoint, scene_dir = omnire.write_synthetic_scene(tmp_path, config)
    assert checkpoint.name == "checkpoint_final.pth" and (scene_dir / "SYNTHETIC.txt").is_file()
    assert sorted(p.name for p in (scene_dir / "ego_pose").iterdir()) == ["000.txt", "001.txt", "002.txt", "003.txt"]
    scene = omnire.load_checkpoint(checkpoint)
    assert scene.synthetic and scene.label.startswith("SYNTHETIC") and scene.num_frames == 4
    assert isinstance(scene.sky, omnire.CubeMapSky) and scene.affine is not None
    assert torch.allclose(scene.affine, torch.cat([torch.eye(3), torch.zeros(3, 1)], 1))  # zero-init = identity
    rig = omnire.load_camera_rig(scene_dir, "waymo", (0, 1, 2, 3, 4, 5), num_frames=scene.num_frames)
    frame = scene.compose(0, rig.camtoworlds[0])
    assert frame.colors.shape == (6, frame.count, 3)
    assert ((frame.colors >= 0) & (frame.colors <= 1)).all()


def test_synthetic_far_structure_crowds_the_vanishing_point():
    """A large share of all Gaussians projects into a few percent of the front image: the long-tail tiles."""
    config = omnire.SyntheticStreetConfig(num_frames=2, density=0.02)
    scene_state = omnire.build_synthetic_checkpoint(config)
    means = scene_state["models"]["Background"]["_means"]  # [N, 3] world: x forward, y left, z up
    camera = torch.tensor([1.5, 0.0, 2.0])
    forward, right, down = means[:, 0] - camera[0], -(means[:, 1] - camera[1]), -(means[:, 2] - camera[2])
    focal, width, height = 1029.0, 960, 640  # the Waymo front camera at 640x960
    in_front = forward > 0.1
    u = focal * right[in_front] / forward[in_front] + width / 2
    v = focal * down[in_front] / forward[in_front] + height / 2
    window = ((u - width / 2).abs() < 0.1 * width) & ((v - height / 2).abs() < 0.1 * height)  # 4% of the area
    assert window.float().sum() / means.shape[0] > 0.5


# ------------------------------------------------------------------------------------------ the example


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("omnire_driving_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve the example's string annotations through sys.modules
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def test_example_parses_arguments(example):
    args = example.parse_args(["--frames", "3", "--cameras", "0", "1", "2", "--size", "1080p", "--mode", "lpt",
                               "--no-video", "--out", "somewhere"])
    assert args.frames == 3 and args.cameras == (0, 1, 2) and args.mode == "lpt" and not args.video
    assert example.render_size(args) == (1080, 1920) and args.out == Path("somewhere")
    defaults = example.parse_args([])
    assert defaults.checkpoint is None and defaults.cameras == (0,) and defaults.mode == "auto"
    assert example.render_size(defaults) == (640, 960)
    assert example.render_size(example.parse_args(["--dataset", "nuscenes"])) == (300, 533)
    with pytest.raises(SystemExit):
        example.parse_args(["--size", "4k"])


def test_example_rejects_impossible_arguments(example, tmp_path):
    checkpoint = tmp_path / "checkpoint_final.pth"
    checkpoint.write_bytes(b"")
    with pytest.raises(SystemExit, match="--scene-dir"):
        example.validate(example.parse_args(["--checkpoint", str(checkpoint)]))
    with pytest.raises(SystemExit, match="does not exist"):
        example.validate(example.parse_args(["--checkpoint", str(tmp_path / "nope.pth")]))
    with pytest.raises(SystemExit, match="cameras 0..5"):
        example.validate(example.parse_args(["--cameras", "0", "7"]))
    with pytest.raises(SystemExit, match="distinct"):
        example.validate(example.parse_args(["--cameras", "1", "1"]))


def test_example_without_gpu_says_so_in_one_line(example, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert example.main(["--frames", "2", "--out", str(tmp_path / "plain")]) == 2
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1 and "needs a CUDA GPU" in lines[0]
    assert not (tmp_path / "plain").exists()
    assert example.main(["--frames", "2", "--density", "0.01", "--out", str(tmp_path), "--write-synthetic"]) == 2
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1 and "SYNTHETIC scene written" in lines[0]
    assert (tmp_path / "synthetic_street" / "checkpoint_final.pth").is_file()
    assert (tmp_path / "synthetic_street" / "scene" / "ego_pose" / "001.txt").is_file()
    elsewhere = tmp_path / "elsewhere"
    example.main(["--frames", "2", "--density", "0.01", "--out", str(tmp_path / "o"), "--write-synthetic",
                  "--synthetic-dir", str(elsewhere)])
    assert (elsewhere / "checkpoint_final.pth").is_file() and not (tmp_path / "o").exists()


def test_example_totals_are_ratios_of_sums(example):
    rows = [dict(blend_vanilla_ms=9.0, blend_lpt_ms=3.0, blend_speedup=3.0, e2e_cuda_ms=12.0, e2e_lpt_ms=6.0,
                 imbalance=20.0, psnr_e2e_db=math.inf, psnr_blend_db=math.inf),
            dict(blend_vanilla_ms=1.0, blend_lpt_ms=1.0, blend_speedup=1.0, e2e_cuda_ms=4.0, e2e_lpt_ms=4.0,
                 imbalance=2.0, psnr_e2e_db=90.0, psnr_blend_db=math.inf)]
    totals = example.summarise(rows)
    assert totals["blend_speedup"] == pytest.approx(10.0 / 4.0) and totals["e2e_speedup"] == pytest.approx(1.6)
    assert totals["imbalance_max"] == 20.0 and totals["psnr_e2e_min_db"] == 90.0
    assert example.finite_or_text(totals["psnr_blend_min_db"]) == "inf"
