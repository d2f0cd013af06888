"""gsplat_lpt/scenes/probes.py: frames built unlike the ladder, well formed, placed where they say, on the CPU."""

import math

import pytest
import torch

from gsplat_lpt.scenes import make_probe_scene, probe_names
from gsplat_lpt.scenes.probes import BEHIND, FOCAL_PER_WIDTH, PROBE_STEP, RIG_CAMERAS, ScreenPlacer, probe_size

SMALL = dict(scale=0.01)


def camera_coords(scene, camera: int) -> torch.Tensor:
    viewmat = scene.viewmats[camera]
    return scene.means @ viewmat[:3, :3].T + viewmat[:3, 3]


@pytest.mark.parametrize("name", probe_names())
def test_probe_is_well_formed(name):
    scene = make_probe_scene(name, **SMALL)
    n = scene.num_gaussians
    assert n >= 500 and scene.name == name and scene.description
    assert scene.means.shape == (n, 3) and scene.quats.shape == (n, 4) and scene.scales.shape == (n, 3)
    assert torch.allclose(scene.quats.norm(dim=-1), torch.ones(n), atol=1e-5)
    assert (scene.scales > 0).all() and ((scene.opacities >= 0) & (scene.opacities < 1)).all()
    assert ((scene.colors >= 0) & (scene.colors <= 1)).all()
    assert (scene.width, scene.height) == probe_size(name)
    assert scene.cameras_per_frame == (RIG_CAMERAS if name == "rig-720p" else 1) and scene.num_frames == 2
    assert torch.allclose(scene.Ks[0, 0, 0], torch.tensor(FOCAL_PER_WIDTH * scene.width))
    # the first camera sees the scene: most Gaussians in front of it, and land on or near the image
    z = camera_coords(scene, 0)[:, 2]
    assert (z > 0).float().mean() > 0.5


def test_counts_follow_the_scale_and_the_seed_fixes_the_scene():
    small, large = make_probe_scene("band", scale=0.01), make_probe_scene("band", scale=0.02)
    assert abs(large.num_gaussians / small.num_gaussians - 2) < 0.01
    assert torch.equal(make_probe_scene("band", scale=0.01).means, small.means)
    assert not torch.equal(make_probe_scene("band", scale=0.01, seed=1).means, small.means)


def test_a_gaussian_lands_where_it_was_placed():
    placer = ScreenPlacer(1920, 1080, seed=0, scale=1.0)
    x, y, z = torch.tensor([100.0, 1500.0]), torch.tensor([40.0, 900.0]), torch.tensor([3.0, 50.0])
    placer.add(x, y, z, torch.tensor([2.0, 5.0]), torch.tensor([0.5, 0.5]))
    means, _, scales, *_ = placer.tensors()
    focal = FOCAL_PER_WIDTH * 1920
    assert torch.allclose(focal * means[:, 0] / means[:, 2] + 960, x, atol=1e-3)
    assert torch.allclose(focal * means[:, 1] / means[:, 2] + 540, y, atol=1e-3)
    # its screen size: sigma_px pixels at its depth (the geometric mean of the two in-plane axes)
    assert torch.allclose(focal * (scales[:, 0] * scales[:, 1]).sqrt() / means[:, 2], torch.tensor([2.0, 5.0]))


@pytest.mark.parametrize("name", ["cluster-o0.01", "dense-o0.1", "band", "two-clusters"])
def test_clusters_and_bands_lie_in_front_of_the_scene(name):
    """Nothing of the scene behind occludes the heavy tiles' Gaussians: they lie at depths 3-10, the rest at 12-80."""
    scene = make_probe_scene(name, **SMALL)
    z = scene.means[:, 2]
    front, behind = z < 11.0, z >= BEHIND[0]
    assert (front | behind).all() and front.sum() > 0.4 * z.numel()
    assert z[front].min() >= 3.0 and z[front].max() <= 10.0 and z[behind].max() <= BEHIND[1]


def test_cluster_opacity_is_the_probes():
    scene = make_probe_scene("cluster-o0.03", **SMALL)
    front = scene.means[:, 2] < 11.0
    assert scene.opacities[front].min() >= 0.8 * 0.03 - 1e-6 and scene.opacities[front].max() <= 1.2 * 0.03 + 1e-6


def test_later_frames_move_the_camera_forward():
    scene = make_probe_scene("trained-like", scale=0.01, frames=3)
    assert scene.num_frames == 3
    for frame in range(3):
        assert torch.allclose(scene.viewmats[frame, 2, 3], torch.tensor(-PROBE_STEP * frame))
        assert torch.equal(scene.viewmats[frame, :3, :3], torch.eye(3))


def test_each_rig_camera_sees_its_copy_of_the_scene():
    """Camera i of the rig sees copy i of the trained-like part where the first camera sees the original."""
    scene = make_probe_scene("rig-720p", **SMALL)
    scene_part, cluster = round(250_000 * SMALL["scale"]), round(200_000 * SMALL["scale"])
    assert scene.num_gaussians == scene_part + cluster + (RIG_CAMERAS - 1) * scene_part
    first = camera_coords(scene, 0)[:scene_part]
    for camera in range(1, RIG_CAMERAS):  # (the Gaussians: the scene, the cluster, then a copy per other camera)
        start = scene_part + cluster + (camera - 1) * scene_part
        copy = camera_coords(scene, camera)[start:start + scene_part]
        assert torch.allclose(copy, first, atol=1e-3)
    angles = [math.atan2(-scene.viewmats[c, 0, 2], scene.viewmats[c, 0, 0]) for c in range(RIG_CAMERAS)]
    assert [round(a % (2 * math.pi), 4) for a in angles] == [round(2 * math.pi * c / RIG_CAMERAS, 4) for c in range(RIG_CAMERAS)]


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="unknown probe scene 'nope'.*cluster-o0.01"):
        make_probe_scene("nope")
    with pytest.raises(ValueError, match="scale"):
        make_probe_scene("band", scale=0.0)
    with pytest.raises(ValueError, match="frames"):
        make_probe_scene("band", scale=0.01, frames=0)


def test_the_command_line_takes_probes():
    from gsplat_lpt.tools.cli import SceneOptions, check_scene_names, expand_scene_names, load

    names = expand_scene_names(["probes", "street"])
    assert names == probe_names() + ["street"]
    check_scene_names(names)
    scene = load("rig-720p", SceneOptions(scale=0.01, frames=1))
    assert scene.name == "rig-720p" and (scene.width, scene.height) == (1280, 720) and scene.num_frames == 1
    scene = load("band", SceneOptions(scale=0.01, width=960, height=540))
    assert (scene.width, scene.height) == (960, 540)


def test_the_device_benchmark_times_every_probe(monkeypatch):
    """tests/device/unseen_frames.py (GPU) builds its frames from these probes, every one by default."""
    import importlib.util
    import sys

    from helpers import ROOT

    device = ROOT / "tests" / "device"
    monkeypatch.syspath_prepend(str(device))
    spec = importlib.util.spec_from_file_location("device_unseen_frames", device / "unseen_frames.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    assert module.FRAMES == probe_names()
