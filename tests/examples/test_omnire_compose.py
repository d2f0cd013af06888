"""examples/omnire/compose.py on the CPU: one frame from all nodes, per-camera colours, sky and affine."""

from __future__ import annotations

import math

import pytest
import torch

import omnire
from helpers import gaussian_state


def test_compose_concatenates_nodes_and_colours_per_camera(small_checkpoint):
    scene = omnire.load_checkpoint(small_checkpoint)
    camtoworlds = torch.eye(4).repeat(2, 1, 1)  # [C, 4, 4]
    camtoworlds[1, :3, 3] = torch.tensor([0.0, 0.0, -5.0])
    frame = omnire.compose_frame(scene, 1, camtoworlds)
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


def test_composite_image_fills_sky_and_applies_affine():
    render_colors = torch.tensor([[[[1.4, 0.2, 0.0, 7.0]]]])  # [C, H, W, 4]: RGB + expected depth
    render_alphas = torch.tensor([[[[0.75]]]])  # [C, H, W, 1]
    sky_rgb = torch.tensor([[[[0.0, 0.4, 0.8]]]])
    affine = torch.cat([torch.eye(3), torch.tensor([[0.0], [0.1], [0.0]])], dim=1)
    image = omnire.composite_image(render_colors, render_alphas, sky_rgb, affine)
    assert torch.allclose(image, torch.tensor([[[[1.0, 0.2 + 0.1 + 0.1, 0.2]]]]))  # clamp, sky * 0.25, +0.1


def test_fisheye_view_directions_are_equidistant():
    camtoworlds = torch.eye(4)[None]
    Ks = torch.tensor([[[10.0, 0.0, 20.0], [0.0, 10.0, 10.0], [0.0, 0.0, 1.0]]])
    pinhole = omnire.pixel_viewdirs(camtoworlds, Ks, 40, 20)
    fisheye = omnire.pixel_viewdirs(camtoworlds, Ks, 40, 20, camera_model="fisheye")
    assert pinhole.shape == fisheye.shape == (1, 20, 40, 3)
    assert torch.allclose(fisheye.norm(dim=-1), torch.ones(1, 20, 40))
    # pixel (39, 10): centre 19.5 px right of and 0.5 px below the principal point; normalised radius
    # hypot(1.95, 0.05) -> that many radians off the optical axis (pinhole: its arctangent)
    radius = torch.tensor(math.hypot(1.95, 0.05))
    assert torch.allclose(torch.acos(fisheye[0, 10, 39, 2]), radius, atol=1e-5)
    assert torch.allclose(torch.acos(pinhole[0, 10, 39, 2]), torch.atan(radius), atol=1e-5)
    assert torch.allclose(fisheye[0, 10, 20], pinhole[0, 10, 20], atol=2e-3)  # near the axis they agree
    with pytest.raises(ValueError, match="'pinhole' or 'fisheye'"):
        omnire.pixel_viewdirs(camtoworlds, Ks, 4, 2, camera_model="ortho")


def test_rasterize_kwargs_per_variant():
    assert omnire.rasterize_kwargs("3dgs") == omnire.RASTERIZE_KWARGS
    # gsplat's 3D per-pixel evaluation blends three channels only: no depth channel there
    assert omnire.rasterize_kwargs("3dgut") == {**omnire.RASTERIZE_KWARGS, "render_mode": "RGB"}
    surfels = omnire.rasterize_kwargs("2dgs")
    assert "rasterize_mode" not in surfels and surfels["render_mode"] == "RGB+ED"
    assert "rasterize_mode" in omnire.RASTERIZE_KWARGS  # a copy was changed, not drivestudio's arguments
