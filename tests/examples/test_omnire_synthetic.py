"""examples/omnire/synthetic.py on the CPU: the SYNTHETIC street in drivestudio's formats, read back by the loaders."""

from __future__ import annotations

import pytest
import torch

import omnire
from omnire import synthetic


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
    assert (frames, instances) == (6, len(synthetic._VEHICLES)) and rigid["instances_fv"].dtype == torch.bool
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
    frame = omnire.compose_frame(scene, 0, rig.camtoworlds[0])
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


def test_synthetic_sky_is_bluer_overhead_than_at_the_horizon():
    sky = omnire.CubeMapSky(synthetic._sky_cube(16))
    zenith, horizon = sky(torch.tensor([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]))
    assert zenith[2] > zenith[0] + 0.3 and horizon[0] > zenith[0] + 0.3


def test_surfels_keep_each_gaussian_flattened_along_its_shortest_axis():
    from gsplat.cuda._torch_impl import _quat_to_rotmat

    generator = torch.Generator().manual_seed(0)
    scales = torch.rand(300, 3, generator=generator) + 0.1
    quats = torch.nn.functional.normalize(torch.randn(300, 4, generator=generator), dim=-1)
    surfel_scales, surfel_quats = omnire.surfel_parameters(scales, quats)
    thin = scales.argmin(-1)
    assert surfel_scales.shape == (300, 2) and set(thin.tolist()) == {0, 1, 2}  # every axis case met
    rotations, surfel_rotations = _quat_to_rotmat(quats), _quat_to_rotmat(surfel_quats)
    flat = scales.clone()
    flat[torch.arange(300), thin] = 0.0
    covariance = rotations @ torch.diag_embed(flat ** 2) @ rotations.transpose(-1, -2)
    surfel = torch.cat([surfel_scales, torch.zeros(300, 1)], -1)
    surfel_covariance = surfel_rotations @ torch.diag_embed(surfel ** 2) @ surfel_rotations.transpose(-1, -2)
    assert torch.allclose(covariance, surfel_covariance, atol=1e-5)  # the same flat Gaussian
    assert torch.allclose(surfel_rotations[..., 2], rotations[torch.arange(300), :, thin], atol=1e-5)  # normal = z


def test_surfel_street_loads_as_surfels(tmp_path):
    config = omnire.SyntheticStreetConfig(num_frames=3, density=0.005, seed=1, surfels=True)
    models = omnire.build_synthetic_checkpoint(config)["models"]
    assert models["Background"]["_scales"].shape[-1] == 2 and models["RigidNodes"]["_scales"].shape[-1] == 2
    checkpoint, _ = omnire.write_synthetic_scene(tmp_path, config)
    scene = omnire.load_checkpoint(checkpoint)
    assert scene.non_surfel_nodes() == [] and all(node.surfel for node in scene.nodes)
    assert all((node.scales[:, 2] == 0).all() for node in scene.nodes)  # 3DGS sees them flat in z
    plain = omnire.load_checkpoint(omnire.write_synthetic_scene(tmp_path / "plain", SMALL)[0])
    assert plain.non_surfel_nodes() == ["Background", "RigidNodes"]
