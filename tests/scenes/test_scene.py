"""gsplat_lpt/scenes/scene.py: the Scene record and the camera helpers."""

import math

import pytest
import torch

from gsplat_lpt.scenes import Scene, check_resolution, flythrough_path, intrinsics, look_at, orbit_path, rig_cameras


def test_look_at_puts_target_on_the_optical_axis():
    viewmat = look_at((1.0, 2.0, 3.0), (4.0, 6.0, 3.0))
    target_cam = viewmat @ torch.tensor([4.0, 6.0, 3.0, 1.0])
    assert torch.allclose(target_cam[:2], torch.zeros(2), atol=1e-5) and target_cam[2] > 0
    # World up (+z) points to image up (-y in OpenCV camera axes).
    up_cam = viewmat[:3, :3] @ torch.tensor([0.0, 0.0, 1.0])
    assert up_cam[1] < -0.99


def test_camera_paths():
    viewmats, Ks = orbit_path((0.0, 0.0, 0.0), 5.0, 1.0, 8, 320, 240)
    assert viewmats.shape == (8, 4, 4) and Ks.shape == (8, 3, 3)
    centres = torch.linalg.inv(viewmats)[:, :3, 3]
    assert torch.allclose(centres[:, :2].norm(dim=-1), torch.full((8,), 5.0), atol=1e-4)
    viewmats, _ = flythrough_path((0.0, 0.0, 1.0), (0.0, 10.0, 1.0), 5, 320, 240)
    centres = torch.linalg.inv(viewmats)[:, :3, 3]
    assert torch.allclose(centres[:, 1], torch.linspace(0, 10, 5), atol=1e-4)
    viewmats, _ = rig_cameras((0.0, 0.0, 1.6), 0.0, 320, 240)
    assert viewmats.shape == (6, 4, 4)
    K = intrinsics(1920, 1080, 90.0)
    assert math.isclose(float(K[0, 0]), 960.0, rel_tol=1e-5) and float(K[1, 2]) == 540.0


def test_scene_frames_and_devices():
    viewmats, Ks = orbit_path((0.0, 0.0, 0.0), 3.0, 1.0, 6, 64, 48)
    gaussians = torch.zeros(4, 3)
    scene = Scene("s", "test", gaussians, torch.tensor([[1.0, 0, 0, 0]]).repeat(4, 1), torch.ones(4, 3),
                  torch.full((4,), 0.5), torch.rand(4, 3), viewmats, Ks, 64, 48, cameras_per_frame=2)
    assert scene.num_frames == 3 and scene.num_gaussians == 4
    frame_viewmats, frame_Ks = scene.frame_cameras(2)
    assert torch.equal(frame_viewmats, viewmats[4:6]) and torch.equal(frame_Ks, Ks[4:6])
    with pytest.raises(IndexError, match="frame 3 out of range"):
        scene.frame_cameras(3)
    single = scene.with_cameras(viewmats[:1], Ks[:1], 32, 24)
    assert single.num_frames == 1 and (single.width, single.height) == (32, 24)
    assert "s: 4 Gaussians, 3 frame(s) x 2 camera(s), 64x48" == scene.summary()


def test_resolution_limits():
    check_resolution(1, 1)
    check_resolution(8192, 8192)
    for width, height in ((0, 10), (10, 8193), (-1, 5)):
        with pytest.raises(ValueError, match="impossible resolution"):
            check_resolution(width, height)
    with pytest.raises(ValueError, match="integers"):
        check_resolution(10.5, 10)
