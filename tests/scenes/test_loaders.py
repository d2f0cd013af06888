"""gsplat_lpt/scenes/loaders.py on small files the tests write (checkpoint, .ply, .splat, COLMAP txt/bin) and on the real bonsai."""

import math
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

from gsplat_lpt.scenes.loaders import (
    SPLAT_RECORD,
    SceneLoadError,
    auto_orbit,
    load_colmap_cameras,
    load_gsplat_checkpoint,
    load_ply,
    load_scene,
    load_splat,
    world_normalization,
)
from helpers import data_dir, random_splats


def test_gsplat_checkpoint_activations(tmp_path):
    splats = random_splats(50)
    path = tmp_path / "ckpt_6999_rank0.pt"
    torch.save({"step": 6999, "splats": splats}, path)
    scene = load_gsplat_checkpoint(path)
    assert scene.num_gaussians == 50 and scene.sh_degree == 3
    assert torch.allclose(scene.scales, torch.exp(splats["scales"]))
    assert torch.allclose(scene.opacities, torch.sigmoid(splats["opacities"]))
    assert torch.allclose(scene.quats, splats["quats"] / splats["quats"].norm(dim=-1, keepdim=True))
    assert scene.colors.shape == (50, 16, 3)
    assert torch.equal(scene.colors[:, 0], splats["sh0"][:, 0]) and torch.equal(scene.colors[:, 1:], splats["shN"])


def test_gsplat_checkpoint_ranks_are_concatenated(tmp_path):
    (tmp_path / "ckpts").mkdir()
    for rank in range(2):
        torch.save({"step": 99, "splats": random_splats(10 + rank, sh_degree=1, seed=rank)},
                   tmp_path / "ckpts" / f"ckpt_99_rank{rank}.pt")
    torch.save({"step": 9, "splats": random_splats(3, sh_degree=1)}, tmp_path / "ckpts" / "ckpt_9_rank0.pt")
    scene = load_scene(tmp_path, frames=2, width=64, height=48)  # a result folder: the latest step, all ranks
    assert scene.num_gaussians == 21 and scene.sh_degree == 1
    assert scene.num_frames == 2 and scene.width == 64


def test_appearance_checkpoint_uses_base_colours(tmp_path):
    splats = random_splats(8)
    del splats["sh0"], splats["shN"]
    splats["features"] = torch.randn(8, 32)
    splats["colors"] = torch.randn(8, 3)
    torch.save({"step": 1, "splats": splats}, tmp_path / "ckpt_1_rank0.pt")
    scene = load_gsplat_checkpoint(tmp_path / "ckpt_1_rank0.pt")
    assert scene.sh_degree is None and torch.allclose(scene.colors, torch.sigmoid(splats["colors"]))


def test_wrong_checkpoints_give_one_clear_line(tmp_path):
    torch.save({"models": {"Background": {}}, "step": 3}, tmp_path / "checkpoint_final.pth")
    with pytest.raises(SceneLoadError, match="not a gsplat simple_trainer checkpoint.*OmniRe"):
        load_scene(tmp_path / "checkpoint_final.pth")
    (tmp_path / "garbage.pt").write_bytes(b"not a torch file")
    with pytest.raises(SceneLoadError, match="garbage.pt: not a readable torch checkpoint") as error:
        load_scene(tmp_path / "garbage.pt")
    assert "\n" not in str(error.value)
    with pytest.raises(SceneLoadError, match="no such file"):
        load_scene(tmp_path / "missing.ply")
    (tmp_path / "scene.obj").write_text("v 0 0 0")
    with pytest.raises(SceneLoadError, match="unknown format '.obj'.*splat"):
        load_scene(tmp_path / "scene.obj")
    (tmp_path / "bad.splat").write_bytes(b"\x00" * 33)
    with pytest.raises(SceneLoadError, match="multiple of 32"):
        load_scene(tmp_path / "bad.splat")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SceneLoadError, match="folder holds no"):
        load_scene(tmp_path / "empty")


def write_inria_ply(path: Path, splats, with_normals: bool = True) -> None:
    from plyfile import PlyData, PlyElement

    n = splats["means"].shape[0]
    rest = splats["shN"].transpose(1, 2).reshape(n, -1)  # channel-major on disk
    names = ["x", "y", "z"] + (["nx", "ny", "nz"] if with_normals else []) + [f"f_dc_{i}" for i in range(3)]
    names += [f"f_rest_{i}" for i in range(rest.shape[1])] + ["opacity"] + [f"scale_{i}" for i in range(3)]
    names += [f"rot_{i}" for i in range(4)]
    columns = [splats["means"]] + ([torch.zeros(n, 3)] if with_normals else []) + [splats["sh0"][:, 0], rest,
                                                                                 splats["opacities"][:, None],
                                                                                 splats["scales"], splats["quats"]]
    values = torch.cat(columns, dim=1).numpy()
    vertex = np.empty(n, dtype=[(name, "f4") for name in names])
    for i, name in enumerate(names):
        vertex[name] = values[:, i]
    PlyData([PlyElement.describe(vertex, "vertex")]).write(str(path))


def test_inria_ply(tmp_path):
    splats = random_splats(30, sh_degree=2)
    write_inria_ply(tmp_path / "point_cloud.ply", splats)
    scene = load_ply(tmp_path / "point_cloud.ply")
    assert scene.sh_degree == 2 and scene.colors.shape == (30, 9, 3)
    assert torch.allclose(scene.colors[:, 1:], splats["shN"])  # f_rest transposed back to [N, K-1, 3]
    assert torch.allclose(scene.means, splats["means"])
    assert torch.allclose(scene.opacities, torch.sigmoid(splats["opacities"]), atol=1e-6)
    assert torch.allclose(scene.scales, torch.exp(splats["scales"]), rtol=1e-5)


def test_ply_without_gaussian_properties_is_refused(tmp_path):
    from plyfile import PlyData, PlyElement

    vertex = np.zeros(4, dtype=[("x", "f4"), ("y", "f4"), ("z", "f4")])
    PlyData([PlyElement.describe(vertex, "vertex")]).write(str(tmp_path / "points.ply"))
    with pytest.raises(SceneLoadError, match="PLY lacks f_dc_0.*INRIA"):
        load_scene(tmp_path / "points.ply")


def test_splat_records(tmp_path):
    records = np.zeros(3, dtype=SPLAT_RECORD)
    records["position"] = [[1, 2, 3], [0, 0, 0], [-1, 0.5, 2]]
    records["scale"] = [[0.1, 0.2, 0.3], [1, 1, 1], [0.01, 0.01, 0.02]]
    records["rgba"] = [[255, 0, 0, 255], [0, 128, 0, 64], [10, 20, 30, 128]]
    records["rotation"] = [[255, 128, 128, 128], [128, 255, 128, 128], [200, 100, 150, 128]]
    records.tofile(tmp_path / "tiny.splat")
    scene = load_splat(tmp_path / "tiny.splat")
    assert scene.num_gaussians == 3 and scene.sh_degree is None
    assert torch.allclose(scene.means[0], torch.tensor([1.0, 2.0, 3.0]))
    assert torch.allclose(scene.colors[0], torch.tensor([1.0, 0.0, 0.0]))
    assert math.isclose(float(scene.opacities[1]), 64 / 255, rel_tol=1e-6)
    assert torch.allclose(scene.quats[0], torch.tensor([1.0, 0.0, 0.0, 0.0]), atol=1e-2)  # (255-128)/128 ~ 1
    assert torch.allclose(scene.quats.norm(dim=-1), torch.ones(3), atol=1e-6)


def test_real_bonsai_splat_loads():
    scene = load_scene(data_dir() / "bonsai-7k-mini.splat", frames=4, width=640, height=360)
    assert scene.num_gaussians == 272_956
    assert scene.means.abs().max() <= 3.0 + 1e-4  # cropped to [-3, 3]^3
    assert scene.num_frames == 4 and scene.width == 640
    # The automatic orbit looks at the scene: its centre projects inside every image.
    centre = scene.means.median(dim=0).values
    for frame in range(4):
        viewmat, K = scene.frame_cameras(frame)
        camera = viewmat[0, :3, :3] @ centre + viewmat[0, :3, 3]
        pixel = K[0] @ camera / camera[2]
        assert camera[2] > 0 and 0 <= pixel[0] <= 640 and 0 <= pixel[1] <= 360


def test_test_npz_keeps_its_cameras():
    scene = load_scene(data_dir() / "test_garden.npz")
    assert scene.num_gaussians == 138_766 and scene.num_frames == 3
    resized = load_scene(data_dir() / "test_garden.npz", width=scene.width // 2, height=scene.height // 2)
    assert torch.allclose(resized.Ks[:, 0, 0], scene.Ks[:, 0, 0] / 2, rtol=1e-3)


# ------------------------------------------------------------------------------------------------
# COLMAP
# ------------------------------------------------------------------------------------------------


def rotation_to_qvec(R: np.ndarray) -> np.ndarray:
    w = math.sqrt(max(1e-12, 1 + R[0, 0] + R[1, 1] + R[2, 2])) / 2
    return np.array([w, (R[2, 1] - R[1, 2]) / (4 * w), (R[0, 2] - R[2, 0]) / (4 * w), (R[1, 0] - R[0, 1]) / (4 * w)])


def colmap_views():
    """Three cameras around the origin: (name, world-to-camera [4, 4], camera id)."""
    from gsplat_lpt.scenes import look_at

    views = []
    for i, angle in enumerate([0.3, 1.2, 2.0]):
        eye = (4 * math.cos(angle), 4 * math.sin(angle), 1.0)
        views.append((f"img_{2 - i:03d}.jpg", look_at(eye, (0.0, 0.0, 0.0), (0.0, 0.0, 1.0)).double().numpy(), 1 + i % 2))
    return views


def write_colmap_text(folder: Path) -> None:
    folder.mkdir(parents=True)
    (folder / "cameras.txt").write_text(
        "# Camera list\n1 PINHOLE 800 600 700 710 400 300\n2 SIMPLE_RADIAL 400 300 350 200 150 0.01\n")
    lines = ["# Image list", "# two lines per image"]
    for image_id, (name, viewmat, camera_id) in enumerate(colmap_views(), start=1):
        q = rotation_to_qvec(viewmat[:3, :3])
        t = viewmat[:3, 3]
        lines.append(f"{image_id} {q[0]} {q[1]} {q[2]} {q[3]} {t[0]} {t[1]} {t[2]} {camera_id} {name}")
        lines.append("" if image_id == 2 else "10.0 20.0 -1")
    (folder / "images.txt").write_text("\n".join(lines) + "\n")
    points = np.random.default_rng(0).normal(size=(50, 3)) * [2.0, 1.0, 0.3]
    (folder / "points3D.txt").write_text("".join(f"{i} {p[0]} {p[1]} {p[2]} 1 2 3 0.5\n" for i, p in enumerate(points)))


def write_colmap_binary(folder: Path) -> None:
    folder.mkdir(parents=True)
    cameras = struct.pack("<Q", 2)
    cameras += struct.pack("<iiQQ4d", 1, 1, 800, 600, 700, 710, 400, 300)
    cameras += struct.pack("<iiQQ4d", 2, 2, 400, 300, 350, 200, 150, 0.01)
    (folder / "cameras.bin").write_bytes(cameras)
    views = colmap_views()
    images = struct.pack("<Q", len(views))
    for image_id, (name, viewmat, camera_id) in enumerate(views, start=1):
        images += struct.pack("<i7di", image_id, *rotation_to_qvec(viewmat[:3, :3]), *viewmat[:3, 3], camera_id)
        images += name.encode() + b"\x00" + struct.pack("<Q", 1) + struct.pack("<ddq", 1.0, 2.0, -1)
    (folder / "images.bin").write_bytes(images)
    points = np.random.default_rng(0).normal(size=(50, 3)) * [2.0, 1.0, 0.3]
    data = struct.pack("<Q", len(points))
    for i, p in enumerate(points):
        data += struct.pack("<Q3d3Bd", i, *p, 1, 2, 3, 0.5) + struct.pack("<Q", 1) + struct.pack("<ii", 1, 0)
    (folder / "points3D.bin").write_bytes(data)


@pytest.mark.parametrize("writer", [write_colmap_text, write_colmap_binary])
def test_colmap_cameras(tmp_path, writer):
    writer(tmp_path / "sparse" / "0")
    viewmats, Ks, width, height = load_colmap_cameras(tmp_path)
    assert (width, height) == (800, 600) and viewmats.shape == (3, 4, 4)
    expected = {name: viewmat for name, viewmat, _ in colmap_views()}
    for i, name in enumerate(sorted(expected)):  # sorted by image name
        assert torch.allclose(viewmats[i], torch.from_numpy(expected[name]).float(), atol=1e-5)
    # Sorted order is img_000 (camera 1), img_001 (camera 2, rescaled from 400x300), img_002 (camera 1).
    assert torch.allclose(Ks[0], torch.tensor([[700.0, 0, 400], [0, 710, 300], [0, 0, 1]]))
    assert torch.allclose(Ks[1], torch.tensor([[700.0, 0, 400], [0, 700, 300], [0, 0, 1]]))


def test_colmap_normalisation_is_a_similarity_that_centres_the_cameras(tmp_path):
    write_colmap_text(tmp_path / "model")
    raw, _, _, _ = load_colmap_cameras(tmp_path / "model")
    normalized, _, _, _ = load_colmap_cameras(tmp_path / "model", normalize=True)
    raw_centres = torch.linalg.inv(raw.double())[:, :3, 3]
    centres = torch.linalg.inv(normalized.double())[:, :3, 3]
    # A similarity: pairwise distances scale by one factor; median distance to the focus point is 1.
    ratio = torch.pdist(centres) / torch.pdist(raw_centres)
    assert torch.allclose(ratio, ratio[0].expand_as(ratio), rtol=1e-6)
    assert math.isclose(float(centres.norm(dim=-1).median()), 1.0, rel_tol=0.3)
    rotations = normalized[:, :3, :3].double()
    assert torch.allclose(rotations @ rotations.transpose(1, 2), torch.eye(3, dtype=torch.float64).expand(3, 3, 3),
                          atol=1e-5)
    transform = world_normalization(torch.linalg.inv(raw.double()).numpy(), None)
    assert np.allclose(transform[3], [0, 0, 0, 1])


def test_scene_with_colmap_folder(tmp_path):
    torch.save({"step": 5, "splats": random_splats(20, sh_degree=0)}, tmp_path / "ckpt_5_rank0.pt")
    write_colmap_text(tmp_path / "data" / "sparse" / "0")
    scene = load_scene(tmp_path / "ckpt_5_rank0.pt", colmap=tmp_path / "data", frames=2, downscale=4)
    assert scene.num_frames == 2 and (scene.width, scene.height) == (200, 150)
    assert torch.allclose(scene.Ks[0, 0, 0], torch.tensor(175.0))
    with pytest.raises(SceneLoadError, match="no COLMAP model"):
        load_scene(tmp_path / "ckpt_5_rank0.pt", colmap=tmp_path)
    with pytest.raises(ValueError, match="impossible resolution"):
        load_scene(tmp_path / "ckpt_5_rank0.pt", width=0, height=100)


def test_auto_orbit_finds_up_from_a_flat_floor():
    gen = torch.Generator().manual_seed(0)
    floor = torch.rand(5000, 3, generator=gen) * torch.tensor([10.0, 10.0, 0.1])
    thing = torch.randn(500, 3, generator=gen) * 0.5 + torch.tensor([5.0, 5.0, 1.5])
    viewmats, Ks = auto_orbit(torch.cat([floor, thing]), 4, 320, 240)
    centres = torch.linalg.inv(viewmats)[:, :3, 3]
    assert (centres[:, 2] > 1.0).all()  # cameras above the floor
    image_up = viewmats[:, 1, :3]  # camera +y (down) in world coordinates
    assert (image_up[:, 2] < 0).all()  # world +z points up in every image
