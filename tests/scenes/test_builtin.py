"""gsplat_lpt/scenes/builtin.py: seeded, well-formed scenes, ordered by imbalance on the CPU analyze path."""

import pytest
import torch

from gsplat_lpt.scenes import LADDER_IMBALANCE, check_resolution, make_scene, scene_names
from gsplat_lpt.tools.analyze import frame_stats, frame_tile_counts, heaviest_tile_depths

SMALL = dict(width=480, height=270, scale=0.04)


def test_scene_names_have_documented_imbalance():
    assert set(scene_names()) == set(LADDER_IMBALANCE)


@pytest.mark.parametrize("name", scene_names())
def test_scene_is_well_formed(name):
    scene = make_scene(name, **SMALL)
    n = scene.num_gaussians
    assert n > 1000
    assert scene.means.shape == (n, 3) and scene.quats.shape == (n, 4) and scene.scales.shape == (n, 3)
    assert scene.opacities.shape == (n,) and scene.colors.shape == (n, 3)
    assert torch.allclose(scene.quats.norm(dim=-1), torch.ones(n), atol=1e-5)
    assert (scene.scales > 0).all()
    assert ((scene.opacities > 0) & (scene.opacities < 1)).all()
    assert ((scene.colors >= 0) & (scene.colors <= 1)).all()
    assert scene.viewmats.shape[0] == scene.Ks.shape[0] == scene.num_frames * scene.cameras_per_frame
    # Rotation blocks of the world-to-camera matrices are orthonormal with det +1.
    rotations = scene.viewmats[:, :3, :3]
    eye = torch.eye(3).expand_as(rotations)
    assert torch.allclose(rotations @ rotations.transpose(1, 2), eye, atol=1e-5)
    assert torch.allclose(torch.linalg.det(rotations), torch.ones(rotations.shape[0]), atol=1e-5)


def test_scene_is_seeded():
    first = make_scene("street", seed=3, **SMALL)
    again = make_scene("street", seed=3, **SMALL)
    other = make_scene("street", seed=4, **SMALL)
    assert torch.equal(first.means, again.means) and torch.equal(first.opacities, again.opacities)
    assert not torch.equal(first.means[:100], other.means[:100])


def test_scale_multiplies_gaussian_count():
    small = make_scene("moderate", width=64, height=64, scale=0.02).num_gaussians
    large = make_scene("moderate", width=64, height=64, scale=0.04).num_gaussians
    assert 1.8 < large / small < 2.2


def test_rig_renders_six_cameras_per_frame():
    scene = make_scene("rig", frames=2, **SMALL)
    assert scene.cameras_per_frame == 6 and scene.num_frames == 2
    viewmats, Ks = scene.frame_cameras(1)
    assert viewmats.shape == (6, 4, 4) and Ks.shape == (6, 3, 3)
    # The six cameras look in six different directions (third row = forward axis in world space).
    forwards = viewmats[:, 2, :3]
    cosines = forwards @ forwards.T
    assert (cosines - torch.eye(6)).max() < 0.9


def test_ladder_is_ordered_by_imbalance_on_the_cpu():
    """Imbalance ordering does not depend on K (it scales all values alike), so a small run checks it."""
    values = {}
    for name in ["balanced", "mild", "moderate", "street", "severe", "extreme"]:
        scene = make_scene(name, width=960, height=540, scale=0.15, frames=1)
        viewmats, Ks = scene.frame_cameras(0)
        counts = frame_tile_counts(scene.means, scene.quats, scene.scales, scene.opacities, viewmats, Ks,
                                   scene.width, scene.height)
        values[name] = frame_stats(counts, concurrent_ctas=1056).imbalance
    ordered = [values[name] for name in ["balanced", "mild", "moderate", "street", "severe", "extreme"]]
    assert ordered == sorted(ordered), values
    assert values["extreme"] > 10 * values["mild"], values


def test_unknown_scene_and_bad_resolution_are_refused():
    with pytest.raises(ValueError, match="unknown scene 'nope'.*balanced"):
        make_scene("nope")
    with pytest.raises(ValueError, match="impossible resolution"):
        make_scene("street", width=0, height=10)
    with pytest.raises(ValueError, match="impossible resolution"):
        check_resolution(100000, 10)
    with pytest.raises(ValueError, match="scale"):
        make_scene("street", scale=-1.0)


@pytest.mark.parametrize("name", ["balanced", "street"])
def test_documented_imbalance_at_1080p(name):
    """The ladder's documented values (K = 1056, 1920x1080, seed 0) are what the CPU analysis gives."""
    scene = make_scene(name, frames=1)
    viewmats, Ks = scene.frame_cameras(0)
    counts = frame_tile_counts(scene.means, scene.quats, scene.scales, scene.opacities, viewmats, Ks, 1920, 1080)
    assert frame_stats(counts, concurrent_ctas=1056).imbalance == pytest.approx(LADDER_IMBALANCE[name][0], rel=0.02)


@pytest.mark.parametrize("name, saturated, median, last", [
    ("extreme", 0, 1.0, 1.0),        # faint haze: no pixel of the hottest tile saturates
    ("foliage", 256, 0.001, 0.003),  # opaque far structure: all within the first few hundred of 171,595
    ("veil", 256, 0.40, 0.74),       # semi-transparent haze: all saturate, late and each at its own depth
    ("fog", 181, 0.42, 1.0),         # denser semi-transparent haze: late, and 75 pixels never
])
def test_the_hottest_tile_saturates_as_documented(name, saturated, median, last):
    """What the module docstring says of each kind of heavy tile, from gsplat's per-pixel math on the CPU:
    how many of the hottest tile's pixels saturate, and where (fractions of its list length)."""
    (tile,) = heaviest_tile_depths(make_scene(name, frames=1))
    assert tile.saturated == saturated
    assert tile.stop_fraction(0.5) == pytest.approx(median, abs=0.01)
    assert tile.stop_fraction(1.0) == pytest.approx(last, abs=0.01)
