"""examples/omnire/rig.py on the CPU: processed-scene camera folders in drivestudio's layouts."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import omnire


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
