"""gsplat_lpt/tools/render.py on the CPU: camera paths and rig mosaics (rendering itself: test_cli on a GPU)."""

import numpy as np
import pytest
import torch

from gsplat_lpt.scenes import make_scene
from gsplat_lpt.tools.render import _mosaic, camera_path


def test_render_camera_paths_on_the_cpu():
    scene = make_scene("balanced", width=320, height=180, scale=0.01, frames=2)
    assert camera_path(scene, "scene", 5) is scene  # the scene's own cameras
    orbit = camera_path(scene, "orbit", 6)
    assert orbit.num_frames == 6 and orbit.Ks.shape == (6, 3, 3)
    fly = camera_path(scene, "flythrough", 4)
    centres = torch.linalg.inv(fly.viewmats)[:, :3, 3]
    steps = centres[1:] - centres[:-1]
    assert torch.allclose(steps, steps[:1].expand_as(steps), atol=1e-4) and steps[0].norm() > 0
    forward = fly.viewmats[0, 2, :3]  # moves along its viewing direction
    assert torch.nn.functional.cosine_similarity(forward, steps[0], dim=0) > 0.99
    with pytest.raises(ValueError, match="camera path"):
        camera_path(scene, "spiral", 3)
    mosaic = _mosaic(np.ones((6, 2, 3, 3), dtype=np.uint8))
    assert mosaic.shape == (4, 9, 3)
