"""The gsplat-lpt command line: parsing, exit codes, one-line errors, nothing written on bad input."""

import json
import os
import subprocess
import sys

import pytest
import torch

from gsplat_lpt.tools.cli import EXIT_BAD_INPUT, EXIT_NEEDS_GPU, Analyze, Bench, expand_scene_names, main
from gsplat_lpt.scenes import scene_names
from helpers import ROOT, write_splat

SMALL = ["--width", "320", "--height", "180", "--scale", "0.02", "--frames", "1"]


def test_analyze_writes_tables_and_plots(tmp_path, capsys):
    out = tmp_path / "analysis"
    assert main(["analyze", "--scene", "balanced", "extreme", *SMALL, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "balanced" in printed and "extreme" in printed and "imbalance" in printed
    names = {p.name for p in out.iterdir()}
    assert {"analyze.csv", "analyze.json", "balanced_histogram.png", "extreme_histogram.png",
            "simulated_speedups.png"} <= names
    data = json.load(open(out / "analyze.json"))
    assert len(data["frames"]) == 2 and data["meta"]["concurrent_ctas"] == 792
    assert [frame["scene"] for frame in data["frames"]] == ["balanced", "extreme"]  # frame 0 of each
    assert data["frames"][1]["imbalance"] > data["frames"][0]["imbalance"]
    rows = (out / "analyze.csv").read_text().splitlines()
    assert rows[0].startswith("scene,frame,") and rows[1].startswith("balanced,0,") and rows[2].startswith("extreme,0,")


def test_analyze_options_reach_the_policy(tmp_path):
    out = tmp_path / "k"
    assert main(["analyze", "--scene", "severe", *SMALL, "--concurrent-ctas", "64", "--overhead-lambda", "10",
                 "--out", str(out)]) == 0
    data = json.load(open(out / "analyze.json"))
    assert data["frames"][0]["concurrent_ctas"] == 64 and "overhead_lambda=10.0" in data["meta"]["config"]
    assert data["meta"]["tile_size"] == 16
    assert main(["analyze", "--scene", "severe", *SMALL, "--tile-size", "8", "--out", str(tmp_path / "k8")]) == 0
    tiled = json.load(open(tmp_path / "k8" / "analyze.json"))
    assert tiled["meta"]["tile_size"] == 8
    assert (tiled["frames"][0]["num_tiles"], data["frames"][0]["num_tiles"]) == (40 * 23, 20 * 12)  # 320 x 180


def test_analyze_a_file(tmp_path, capsys):
    write_splat(tmp_path / "tiny.splat")
    assert main(["analyze", "--scene", str(tmp_path / "tiny.splat"), "--frames", "2", "--width", "256",
                 "--height", "192"]) == 0
    assert "tiny" in capsys.readouterr().out


@pytest.mark.parametrize(
    "arguments,message",
    [
        (["analyze", "--scene", "nope"], "unknown scene 'nope'"),
        (["analyze", "--scene", "missing.ckpt"], "unknown scene 'missing.ckpt'"),
        (["analyze", "--width", "0", "--height", "100"], "impossible resolution 0x100"),
        (["analyze", "--width", "100000", "--height", "100"], "impossible resolution"),
        (["analyze", "--width", "640"], "give both --width and --height"),
        (["analyze", "--frames", "0"], "--frames must be >= 1"),
        (["analyze", "--chunk-count", "100"], "--chunk-count must be"),
        (["analyze", "--chunk-count", "0"], "--chunk-count must be"),
        (["render", "--mode", "fixed", "--heavy-ratio", "2"], "--heavy-ratio must be"),
        (["bench", "--overhead-lambda", "-1"], "--overhead-lambda"),
        (["bench", "--repeats", "5"], "--repeats must be >= 20"),
        (["render", "--video", "out.avi"], "use .mp4 or .gif"),
        (["bench", "--variant", "2dgs", "--camera-model", "fisheye"],
         "--variant 2dgs --camera-model fisheye: the fisheye camera model is not available for 2dgs"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys, monkeypatch, arguments, message):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "never"
    assert main([*arguments, "--out", str(out)]) == EXIT_BAD_INPUT
    captured = capsys.readouterr()
    assert captured.err.startswith("error: ") and message in captured.err and "LPTConfig" not in captured.err
    assert captured.err.strip().count("\n") == 0
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_wrong_file_format_is_refused(tmp_path, capsys):
    (tmp_path / "scene.obj").write_text("v 0 0 0\n")
    assert main(["analyze", "--scene", str(tmp_path / "scene.obj"), "--out", str(tmp_path / "o")]) == EXIT_BAD_INPUT
    error = capsys.readouterr().err
    assert "unknown format '.obj'" in error and ".splat" in error and not (tmp_path / "o").exists()
    torch.save({"weights": torch.zeros(3)}, tmp_path / "other.pt")
    assert main(["analyze", "--scene", str(tmp_path / "other.pt")]) == EXIT_BAD_INPUT
    assert "not a gsplat simple_trainer checkpoint" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message of a machine without CUDA")
def test_bench_and_render_without_gpu(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["bench"]) == EXIT_NEEDS_GPU
    error = capsys.readouterr().err
    assert "needs a CUDA GPU" in error and "gsplat-lpt analyze" in error and error.strip().count("\n") == 0
    assert main(["render", "--scene", "street"]) == EXIT_NEEDS_GPU
    assert list(tmp_path.iterdir()) == []


def test_parsing_defaults_and_aliases():
    import tyro

    bench = tyro.cli(Bench, args=[])
    assert bench.scene == ("street",) and bench.repeats >= 20 and bench.modes == ("vanilla", "lpt", "chunk", "auto")
    assert not bench.fixed_grid and bench.end_to_end
    analyze = tyro.cli(Analyze, args=["--scene", "ladder", "--concurrent-ctas", "528"])
    assert analyze.concurrent_ctas == 528
    assert expand_scene_names(analyze.scene) == scene_names()
    assert expand_scene_names(["street", "all", "street"]) == ["street"] + [n for n in scene_names() if n != "street"]
    config = tyro.cli(Bench, args=["--chunk-count", "4", "--imbalance-beta", "0.5"]).lpt_config("chunk")
    assert config.mode == "chunk" and config.chunk_count == 4 and config.imbalance_beta == 0.5


@pytest.mark.parametrize("command", ["bench", "analyze", "render", "calibrate"])
def test_help_prints_each_default_once(command, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")  # one line per option
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert text.count("(default:") >= 10
    for line in text.splitlines():
        assert line.count("default") <= 1, line


def test_render_modes_include_fixed():
    import tyro

    from gsplat_lpt.tools.cli import Render

    config = tyro.cli(Render, args=["--mode", "fixed", "--heavy-ratio", "0.05", "--chunk-count", "4"]).lpt_config("fixed")
    assert (config.mode, config.heavy_ratio, config.chunk_count) == ("fixed", 0.05, 4)
    for mode in ("auto", "lpt", "chunk", "fixed", "vanilla"):
        assert tyro.cli(Render, args=["--mode", mode]).mode == mode


def test_parse_errors_exit_2():
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "--repeats", "many"])
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit) as exit_info:
        main(["frobnicate"])
    assert exit_info.value.code == 2


def test_module_entry_point_help():
    environment = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run([sys.executable, "-m", "gsplat_lpt", "--help"], capture_output=True, text=True,
                            env=environment, cwd=ROOT, timeout=120)
    assert result.returncode == 0
    assert "bench" in result.stdout and "analyze" in result.stdout and "render" in result.stdout


@pytest.mark.gpu
def test_bench_command_on_gpu(tmp_path):
    out = tmp_path / "bench"
    assert main(["bench", "--scene", "moderate", "--width", "640", "--height", "360", "--scale", "0.2",
                 "--frames", "1", "--fixed-grid", "--out", str(out)]) == 0
    names = {p.name for p in out.iterdir()}
    assert {"bench.csv", "bench.json", "speedup_vs_imbalance.png", "frame_times.png"} <= names
    frame = json.load(open(out / "bench.json"))["frames"][0]
    assert set(frame["blend_ms"]) >= {"vanilla", "lpt", "chunk", "auto"}
    assert sum(label.startswith("fixed:") for label in frame["blend_ms"]) == 9


@pytest.mark.gpu
def test_render_command_on_gpu(tmp_path):
    out = tmp_path / "render"
    assert main(["render", "--scene", "rig", "--width", "320", "--height", "180", "--scale", "0.05",
                 "--frames", "1", "--video", str(tmp_path / "rig.gif"), "--out", str(out)]) == 0
    assert len(list(out.glob("frame_0000_cam*.png"))) == 6 and (tmp_path / "rig.gif").is_file()
    schedule = json.load(open(out / "render.json"))["frames"][0]
    assert schedule["mode"] == "auto" and schedule["concurrent_ctas"] > 0


@pytest.mark.parametrize("command", ["analyze", "calibrate"])
def test_single_process_commands_refuse_torchrun(command, capsys, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert main([command, "--scene", "balanced"]) == EXIT_BAD_INPUT
    error = capsys.readouterr().err
    assert "runs in one process" in error and "torchrun" in error and error.strip().count("\n") == 0


def test_bench_variant_options_parse():
    import tyro

    from gsplat_lpt.tools.frame import CAMERA_MODELS, VARIANT_NAMES

    default = tyro.cli(Bench, args=[])
    assert (default.variant, default.camera_model) == ("3dgs", "pinhole")
    for variant in VARIANT_NAMES:
        assert tyro.cli(Bench, args=["--variant", variant]).variant == variant
    assert tyro.cli(Bench, args=["--variant", "3dgut", "--camera-model", "fisheye"]).camera_model == "fisheye"
    assert Bench.__annotations__["variant"] == f"Literal[{', '.join(repr(v) for v in VARIANT_NAMES)}]"
    assert Bench.__annotations__["camera_model"] == f"Literal[{', '.join(repr(c) for c in CAMERA_MODELS)}]"
    for wrong in (["--variant", "4dgs"], ["--camera-model", "ortho"]):
        with pytest.raises(SystemExit) as exit_info:
            main(["bench", *wrong])
        assert exit_info.value.code == 2


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message of a machine without CUDA")
@pytest.mark.parametrize("variant", ["2dgs", "3dgut"])
def test_bench_variants_without_gpu(variant, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "--variant", variant]) == EXIT_NEEDS_GPU
    assert "needs a CUDA GPU" in capsys.readouterr().err and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("variant,camera_model", [("2dgs", "pinhole"), ("3dgut", "fisheye"), ("3dgs", "pinhole")])
def test_bench_command_passes_the_variant_on(variant, camera_model, tmp_path, capsys, monkeypatch):
    """The command with bench_scene replaced by a stand-in returning FAKE results (TEST-DATA): what reaches it,
    and the variant in the table, bench.json and bench.csv."""
    from gsplat_lpt.tools import bench
    from helpers import fake_bench_results

    received = []

    def fake_bench_scene(scene, **kwargs):
        received.append(kwargs)
        results = fake_bench_results()
        for result in results:
            result.variant, result.camera_model = kwargs["variant"], kwargs["camera_model"]
        return results

    monkeypatch.setattr(bench, "require_cuda", lambda command="bench": None)
    monkeypatch.setattr(bench, "bench_scene", fake_bench_scene)
    out = tmp_path / "bench"
    assert main(["bench", "--scene", "balanced", *SMALL, "--variant", variant, "--camera-model", camera_model,
                 "--out", str(out)]) == 0
    (kwargs,) = received
    assert (kwargs["variant"], kwargs["camera_model"]) == (variant, camera_model)
    blend_function = {"3dgs": "rasterize_to_pixels", "2dgs": "rasterize_to_pixels_2dgs",
                      "3dgut": "rasterize_to_pixels_eval3d"}[variant]
    printed = capsys.readouterr().out
    assert f"gsplat's {blend_function} vs ours" in printed
    meta = json.load(open(out / "bench.json"))["meta"]
    assert (meta["variant"], meta["camera_model"], meta["blend_function"]) == (variant, camera_model, blend_function)
    assert ("with_ut=True" in meta["render_call"]) == (variant == "3dgut")
    header, first = (out / "bench.csv").read_text().splitlines()[:2]
    assert header.startswith("scene,frame,images,variant,camera_model,") and f",{variant},{camera_model}," in first


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message of a machine without CUDA")
@pytest.mark.parametrize("tile_size", ["8", "32"])
def test_bench_takes_any_tile_size_in_range(tile_size, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "--tile-size", tile_size]) == EXIT_NEEDS_GPU  # only the missing GPU stops it
    assert "needs a CUDA GPU" in capsys.readouterr().err and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["bench", "analyze", "render", "calibrate"])
@pytest.mark.parametrize("tile_size", ["0", "33"])
def test_tile_size_out_of_range_says_why(command, tile_size, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main([command, "--tile-size", tile_size]) == EXIT_BAD_INPUT
    error = capsys.readouterr().err
    assert error.startswith("error: --tile-size must be in [1, 32]") and "32x32 = 1024" in error
    assert error.strip().count("\n") == 0 and list(tmp_path.iterdir()) == []


def test_bench_command_times_at_the_tile_size(tmp_path, monkeypatch):
    """bench --tile-size with bench_scene replaced by a stand-in returning FAKE results (TEST-DATA): the tile
    size reaches bench_scene and bench.json's meta."""
    from gsplat_lpt.tools import bench
    from helpers import fake_bench_results

    received = []
    monkeypatch.setattr(bench, "require_cuda", lambda command="bench": None)
    monkeypatch.setattr(bench, "bench_scene", lambda scene, **kwargs: received.append(kwargs) or fake_bench_results())
    out = tmp_path / "bench"
    assert main(["bench", "--scene", "balanced", *SMALL, "--tile-size", "8", "--out", str(out)]) == 0
    assert [kwargs["tile_size"] for kwargs in received] == [8]
    assert json.load(open(out / "bench.json"))["meta"]["tile_size"] == 8


def test_render_command_renders_at_the_tile_size(tmp_path, monkeypatch):
    """render --tile-size on the CPU: the scene's means say they are on a GPU and gsplat.rasterization is a
    stand-in returning black images (FAKE, TEST-DATA) that records its arguments."""
    import dataclasses
    import types

    import gsplat

    from gsplat_lpt.scenes import Scene

    calls = []

    def rasterization(means, quats, scales, opacities, colors, viewmats, Ks, width, height, **kwargs):
        calls.append(kwargs)
        cameras = viewmats.shape[0]
        return torch.zeros(cameras, height, width, 3), torch.zeros(cameras, height, width, 1), {}

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(Scene, "to", lambda self, device: dataclasses.replace(
        self, means=types.SimpleNamespace(is_cuda=True)))
    monkeypatch.setattr(gsplat, "rasterization", rasterization)
    out = tmp_path / "render"
    assert main(["render", "--scene", "balanced", *SMALL, "--tile-size", "8", "--out", str(out)]) == 0
    assert [(kwargs["tile_size"], kwargs["backend"]) for kwargs in calls] == [(8, "lpt")]
    assert json.load(open(out / "render.json"))["tile_size"] == 8 and (out / "frame_0000.png").is_file()


def test_calibrate_command_measures_at_the_tile_size(tmp_path, monkeypatch):
    """calibrate --tile-size on the CPU: projection and measurement replaced by stand-ins (the measurement
    returns FAKE times, TEST-DATA); the tile size reaches the projection and calibration.json."""
    import types

    from gsplat_lpt.scenes import Scene
    from gsplat_lpt.tools import bench, calibrate, frame

    projected = []

    def project_variant_frame(variant, *args, tile_size=16, **kwargs):
        projected.append((variant, tile_size))
        return types.SimpleNamespace(tile_size=tile_size)

    def measure_frame(name, inputs, repeats, max_height):
        assert inputs.tile_size == 8
        return calibrate.FrameMeasurements(name, [100, 50], 1000, 64, lpt_ms=1.0, schedule_ms={(1, 2): 0.9})

    monkeypatch.setattr(bench, "require_cuda", lambda command="bench": None)
    monkeypatch.setattr(Scene, "to", lambda self, device: self)
    monkeypatch.setattr(frame, "project_variant_frame", project_variant_frame)
    monkeypatch.setattr(calibrate, "measure_frame", measure_frame)
    out = tmp_path / "calibration"
    assert main(["calibrate", "--scene", "balanced", *SMALL, "--tile-size", "8", "--out", str(out)]) == 0
    assert projected == [("3dgs", 8)]
    assert json.load(open(out / "calibration.json"))["tile_size"] == 8
