"""examples/omnire_driving.py on the CPU: arguments, validation, the no-GPU path, totals."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest
import torch

from helpers import EXAMPLES

EXAMPLE = EXAMPLES / "omnire_driving.py"


def load_example():
    spec = importlib.util.spec_from_file_location("omnire_driving_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve the example's string annotations through sys.modules
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def example():
    module = load_example()
    yield module
    sys.modules.pop(module.__name__, None)


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
    assert math.isinf(totals["psnr_blend_min_db"])


def example_worker(rank: int, port: int, out: str) -> None:
    """One of two processes as torchrun would start them; per-frame GPU work replaced by a FAKE."""
    import os
    import types

    from rich.console import Console

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank),
                      WORLD_SIZE="2")
    example = load_example()

    def fake_measure_frame(args, scene, rig, frame, config, rank=0):
        strip = torch.full((4, 6, 3), 40 * frame, dtype=torch.uint8).numpy()
        return {"frame": frame, "rank": rank, "blend_vanilla_ms": 2.0, "blend_lpt_ms": 1.0, "blend_speedup": 2.0,
                "e2e_cuda_ms": 3.0, "e2e_lpt_ms": 2.0, "e2e_speedup": 1.5, "imbalance": 9.0}, strip

    example.measure_frame = fake_measure_frame
    args = example.parse_args(["--out", out, "--no-video"])
    rig = types.SimpleNamespace(num_frames=5)
    scene = types.SimpleNamespace(synthetic=True)
    with example.Workers.from_environment() as workers:
        rows = example.render_and_time(args, scene, rig, Console(quiet=True), workers)
    (Path(out) / f"rows{rank}.txt").write_text(repr([(row["frame"], row["rank"]) for row in rows]))


def test_example_spreads_frames_over_processes_and_rank_0_writes(tmp_path):
    import socket

    import imageio.v2 as imageio
    import torch.multiprocessing as mp

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    mp.spawn(example_worker, args=(port, str(tmp_path)), nprocs=2, join=True)
    assert (tmp_path / "rows0.txt").read_text() == repr([(f, f % 2) for f in range(5)])
    assert (tmp_path / "rows1.txt").read_text() == "[]"
    frames = sorted(p.name for p in (tmp_path / "frames").iterdir())
    assert frames == [f"{f:03d}.png" for f in range(5)]
    assert (imageio.imread(tmp_path / "frames" / "003.png") == 120).all()


def test_example_variant_options(example, tmp_path, capsys):
    args = example.parse_args(["--variant", "3dgut", "--camera-model", "fisheye"])
    assert (args.variant, args.camera_model) == ("3dgut", "fisheye")
    example.validate(args)
    defaults = example.parse_args([])
    assert (defaults.variant, defaults.camera_model) == ("3dgs", "pinhole")
    with pytest.raises(SystemExit, match="--variant 2dgs --camera-model fisheye: the fisheye camera model is not "
                                         "available for 2dgs"):
        example.validate(example.parse_args(["--variant", "2dgs", "--camera-model", "fisheye"]))
    with pytest.raises(SystemExit):
        example.parse_args(["--variant", "4dgs"])


def test_example_2dgs_refuses_a_checkpoint_of_3d_gaussians(example, small_checkpoint, tmp_path, capsys):
    args = example.parse_args(["--checkpoint", str(small_checkpoint), "--scene-dir", str(tmp_path),
                               "--variant", "2dgs", "--out", str(tmp_path / "out")])
    example.validate(args)  # only the checkpoint shows what its Gaussians are
    assert example.run(args, example.Workers()) == 1
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: --variant 2dgs renders surfels") and "Background, RigidNodes" in error
    assert "--variant 3dgs or 3dgut" in error and "\n" not in error


def test_example_2dgs_writes_a_synthetic_street_of_surfels(example, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert example.main(["--variant", "2dgs", "--frames", "2", "--density", "0.005", "--out", str(tmp_path),
                         "--write-synthetic"]) == 2
    assert "SYNTHETIC scene written" in capsys.readouterr().out
    models = torch.load(tmp_path / "synthetic_street" / "checkpoint_final.pth", weights_only=True)["models"]
    assert models["Background"]["_scales"].shape[-1] == 2 and models["RigidNodes"]["_scales"].shape[-1] == 2


@pytest.mark.parametrize("variant,camera_model", [("3dgs", "pinhole"), ("2dgs", "pinhole"), ("3dgut", "fisheye"),
                                                  ("3dgs", "fisheye")])
def test_example_measures_the_variants_calls(example, variant, camera_model, tmp_path, monkeypatch):
    """measure_frame on the CPU: the SYNTHETIC street loaded for real, every gsplat and gsplat-lpt call replaced by
    a stand-in that records which function ran and returns FAKE images (TEST-DATA) and 1 ms timings."""
    import importlib

    import gsplat

    import gsplat_lpt.tools.timing as timing_module
    from gsplat_lpt import LPTConfig, hook

    args = example.parse_args(["--variant", variant, "--camera-model", camera_model, "--frames", "2", "--density",
                               "0.005", "--sky", "constant", "--out", str(tmp_path), "--repeats", "1"])
    example.validate(args)
    scene, rig = example.load_scene(args)
    calls = []
    C, H, W = len(rig.camera_ids), rig.height, rig.width

    def images(count):
        return (torch.zeros(C, H, W, 4), torch.ones(C, H, W, 1)) + (torch.zeros(C, H, W, 1),) * count

    def render(name):
        def stand_in(means, quats, scales, opacities, colors, viewmats, Ks, width, height, **kwargs):
            calls.append(("render", name, kwargs))
            N = means.shape[0]
            meta = {"means2d": torch.zeros(C, N, 2), "conics": torch.zeros(C, N, 3), "depths": torch.ones(C, N),
                    "ray_transforms": torch.zeros(C, N, 3, 3), "normals": torch.zeros(C, N, 3),
                    "opacities": opacities[None].expand(C, N), "width": width, "height": height,
                    "tile_size": 16, "isect_offsets": torch.zeros(C, 40, 60, dtype=torch.int32),
                    "flatten_ids": torch.zeros(5, dtype=torch.int32)}
            return images(4 if name == "rasterization_2dgs" else 0) + (meta,)
        return stand_in

    def gsplat_blend(name):
        def stand_in(*args, **kwargs):
            calls.append(("gsplat", name, kwargs))
            return images(3 if variant == "2dgs" else 0)
        return stand_in

    def ours(*args, config=None, return_stats=False, **kwargs):
        calls.append(("ours", config.mode, kwargs))
        report = {"imbalance": 3.0, "concurrent_ctas": 792, "chunked_tiles": 1, "chunk_count": 4}
        return images(3 if variant == "2dgs" else 0) + ((report,) if return_stats else ())

    def fake_timing(variants, repeats, warmup):
        for fn in variants.values():
            fn()
        return {name: [1.0] * repeats for name in variants}

    module, function = {"3dgs": ("gsplat_lpt.variants.gaussian3d", "rasterize_to_pixels"),
                        "2dgs": ("gsplat_lpt.variants.surfel2d", "rasterize_to_pixels_2dgs"),
                        "3dgut": ("gsplat_lpt.variants.gaussian3dgut", "rasterize_to_pixels_eval3d")}[variant]
    monkeypatch.setattr(importlib.import_module(module), function, ours)
    monkeypatch.setattr(hook, "original", gsplat_blend)
    for name in ("rasterization", "rasterization_2dgs"):
        monkeypatch.setattr(gsplat, name, render(name))
    monkeypatch.setattr(timing_module, "time_interleaved", fake_timing)

    row, strip = example.measure_frame(args, scene, rig, 0, LPTConfig(mode="auto"))
    assert (row["variant"], row["camera_model"], row["blend_speedup"], row["imbalance"]) == (variant, camera_model,
                                                                                           1.0, 3.0)
    assert strip.shape == (H, W * C, 3)
    renders = [call for call in calls if call[0] == "render"]
    expected = "rasterization_2dgs" if variant == "2dgs" else "rasterization"
    assert {call[1] for call in renders} == {expected} and len(renders) == 4  # both backends, then timed once each
    for _, _, kwargs in renders:
        # gsplat's 3D per-pixel evaluation blends three channels only
        assert kwargs["render_mode"] == ("RGB" if variant == "3dgut" else "RGB+ED") and kwargs["near_plane"] == 0.1
        assert kwargs.get("with_ut", False) is kwargs.get("with_eval3d", False) is (variant == "3dgut")
        assert ("rasterize_mode" in kwargs) is (variant != "2dgs")
        assert kwargs.get("camera_model") == (None if variant == "2dgs" else camera_model)
    assert [call[2]["backend"] for call in renders] == ["cuda", "lpt", "cuda", "lpt"]
    assert renders[1][2]["lpt_config"].mode == "auto" and "lpt_config" not in renders[0][2]
    blend_function = {"3dgs": "rasterize_to_pixels", "2dgs": "rasterize_to_pixels_2dgs",
                      "3dgut": "rasterize_to_pixels_eval3d"}[variant]
    assert {call[1] for call in calls if call[0] == "gsplat"} == {blend_function}
    assert {call[1] for call in calls if call[0] == "ours"} == {"auto"}
    if variant == "3dgut":
        assert all(call[2]["camera_model"] == camera_model for call in calls if call[0] in ("gsplat", "ours"))
