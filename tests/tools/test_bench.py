"""bench's reporting on the CPU with FAKE numbers (labelled TEST-DATA), and the real thing on a GPU."""

import json
import math

import pytest
import torch

from gsplat_lpt.tools.bench import (
    DEFAULT_FIXED_GRID,
    FrameResult,
    NeedsGPU,
    band_of,
    bench_scene,
    fixed_label,
    parse_fixed_label,
    read_results,
    results_table,
    summarize,
    write_results,
)
from gsplat_lpt.scenes import make_scene
from helpers import FAKE, fake_bench_results


def test_speedups_and_best_fixed():
    heavy, balanced = fake_bench_results()
    assert heavy.speedup("auto") == 5.0 and heavy.speedup("lpt") == pytest.approx(10 / 9.5)
    assert heavy.best_fixed == fixed_label(0.05, 16)
    assert parse_fixed_label(heavy.best_fixed) == (0.05, 16)
    assert heavy.end_to_end_speedup == pytest.approx(14 / 6)
    assert balanced.best_fixed is None and math.isnan(balanced.end_to_end_speedup)
    row = heavy.row()
    assert row["auto_speedup"] == 5.0 and row["best_fixed_ms"] == 1.9
    assert row["auto_vs_best_fixed"] == pytest.approx(2.0 / 1.9, abs=1e-4)
    assert row["lpt_psnr_db"] == "inf" and row["chunk_psnr_db"] == 80.5


def test_grid_and_bands():
    assert len(DEFAULT_FIXED_GRID) == 9 and (0.01, 8) in DEFAULT_FIXED_GRID
    assert band_of(0.2) == "balanced (< 1)" and band_of(2.0) == "1.5 to 3" and band_of(69.0) == ">= 5"
    summary = summarize(fake_bench_results())
    by_band = {entry["band"]: entry for entry in summary}
    assert by_band[">= 5"]["auto_mean_speedup"] == 5.0 and by_band[">= 5"]["frames"] == 1
    assert by_band["balanced (< 1)"]["auto_min_speedup"] == pytest.approx(1.5 / 1.505, abs=1e-3)


def test_csv_json_roundtrip(tmp_path):
    results = fake_bench_results()
    paths = write_results(results, tmp_path, meta={"note": FAKE})
    lines = open(paths["csv"]).read().splitlines()
    assert len(lines) == 3 and lines[0].startswith("scene,frame,images")
    assert FAKE in lines[1]
    data = json.load(open(paths["json"]))  # strict JSON: no Infinity
    assert data["meta"]["note"] == FAKE and data["frames"][0]["psnr_db"]["lpt"] == "inf"
    again, meta = read_results(paths["json"])
    assert again[0].blend_ms == results[0].blend_ms and math.isinf(again[0].psnr_db["lpt"])
    assert again[0].best_fixed == results[0].best_fixed and meta["note"] == FAKE


def test_table_renders():
    from rich.console import Console

    console = Console(record=True, width=200)
    console.print(results_table(fake_bench_results()))
    text = console.export_text()
    assert "5.00x" in text and "1.900 (0.05,16)" in text and "exact" in text and "80.5 dB" in text
    assert "14.000/6.000" in text


def test_bench_without_cuda_says_so(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(NeedsGPU, match="needs a CUDA GPU.*analyze"):
        bench_scene(make_scene("balanced", width=64, height=64, scale=0.001, frames=1))


@pytest.mark.gpu
def test_bench_on_gpu_small_scene(tmp_path):
    scene = make_scene("severe", width=640, height=360, scale=0.25, frames=1)
    results = bench_scene(scene, fixed_grid=[(0.01, 8)], repeats=20, warmup=2, progress=False)
    (result,) = results
    assert result.concurrent_ctas > 0 and result.imbalance > 0
    assert set(result.blend_ms) == {"vanilla", "lpt", "chunk", "auto", fixed_label(0.01, 8)}
    assert all(ms > 0 for ms in result.blend_ms.values())
    assert result.psnr_db["lpt"] > 120 or math.isinf(result.psnr_db["lpt"])  # lpt is gsplat's math
    assert min(result.psnr_db.values()) >= 76.0
    assert result.end_to_end_ms["cuda"] > 0 and result.end_to_end_ms["lpt"] > 0
    write_results(results, tmp_path)


@pytest.mark.gpu
@pytest.mark.parametrize("variant,camera_model", [("2dgs", "pinhole"), ("3dgut", "pinhole"), ("3dgut", "fisheye"),
                                                  ("3dgs", "fisheye")])
def test_bench_variants_on_gpu_small_scene(variant, camera_model):
    scene = make_scene("severe", width=640, height=360, scale=0.25, frames=1)
    (result,) = bench_scene(scene, repeats=20, warmup=2, progress=False, variant=variant, camera_model=camera_model)
    assert (result.variant, result.camera_model) == (variant, camera_model)
    assert result.concurrent_ctas > 0 and result.imbalance > 0 and result.total_workload > 0
    assert set(result.blend_ms) == {"vanilla", "lpt", "chunk", "auto"} and all(v > 0 for v in result.blend_ms.values())
    assert min(result.psnr_db.values()) >= 60.0  # RGB against gsplat's kernel of the same variant
    assert result.psnr_db["lpt"] >= (100.0 if variant == "2dgs" else 60.0)
    assert result.end_to_end_ms["cuda"] > 0 and result.end_to_end_ms["lpt"] > 0


def test_bench_scene_plumbing_with_fake_gpu_calls(monkeypatch):
    """bench_scene's bookkeeping on the CPU: projection, blending and timing are replaced by FAKES that
    return made-up numbers (TEST-DATA); what is checked is which calls are made and what is recorded."""
    import gsplat_lpt.tools.bench as bench_module
    import gsplat_lpt.tools.frame as frame_module
    import gsplat_lpt.tools.timing as timing_module
    from gsplat_lpt.scenes import Scene

    calls = []

    class FakeInputs:
        flatten_ids = torch.zeros(1234)

        def blend(self, mode, config=None):
            calls.append(("blend", mode, None if config is None else (config.heavy_ratio, config.chunk_count)))
            return torch.zeros(1, 4, 4, 3), torch.zeros(1, 4, 4, 1)

        def blend_with_stats(self, mode, config=None):
            offset = 0.0 if mode == "lpt" else 1e-5  # fake: lpt exact, chunked modes slightly off
            report = {"mode": mode, "concurrent_ctas": 1056, "imbalance": 42.0, "total_workload": 1234,
                      "max_workload": 99, "chunked_tiles": 7 if mode == "auto" else 3, "chunk_count": 16,
                      "chunking_disabled_reason": None}
            return torch.full((1, 4, 4, 3), offset), torch.zeros(1, 4, 4, 1), report

    fake_ms = {"vanilla": 10.0, "lpt": 9.0, "chunk": 5.0, "auto": 2.0, fixed_label(0.01, 8): 2.2}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(Scene, "to", lambda self, device: self)
    monkeypatch.setattr(frame_module, "project_frame", lambda *args, **kwargs: FakeInputs())
    monkeypatch.setattr(timing_module, "time_interleaved",
                        lambda variants, repeats, warmup, streams=None: {name: [fake_ms[name]] * repeats for name in variants})
    monkeypatch.setattr(bench_module, "_time_rasterization", lambda *args: {"cuda": 12.0, "lpt": 5.0})
    scene = make_scene("street", width=64, height=64, scale=0.001, frames=2)
    results = bench_scene(scene, fixed_grid=[(0.01, 8)], repeats=20, progress=False)
    assert len(results) == 2
    first = results[0]
    assert first.blend_ms == fake_ms and first.repeats == 20
    assert (first.chunked_tiles, first.chunk_count) == (7, 16)  # auto's choice, not the last mode's
    assert first.imbalance == 42.0 and first.concurrent_ctas == 1056 and first.total_workload == 1234
    assert math.isinf(first.psnr_db["lpt"]) and first.psnr_db["auto"] == pytest.approx(100.0)
    assert first.end_to_end_ms == {"cuda": 12.0, "lpt": 5.0} and first.best_fixed == fixed_label(0.01, 8)
    assert ("blend", "vanilla", None) in calls  # the PSNR reference
    with pytest.raises(ValueError, match="repeats"):
        bench_scene(scene, repeats=5)


@pytest.mark.parametrize("variant", ["3dgs", "2dgs"])
def test_bench_scene_projects_and_renders_at_the_tile_size(variant, monkeypatch):
    """bench_scene(tile_size=8) on the CPU: the projection is a stand-in returning FAKE blend inputs and gsplat's
    render calls stand-ins returning FAKE images (TEST-DATA); both must be asked for tiles of 8 px."""
    import gsplat

    import gsplat_lpt.tools.frame as frame_module
    import gsplat_lpt.tools.timing as timing_module
    from gsplat_lpt.scenes import Scene

    projected, rendered = [], []

    class FakeInputs:
        flatten_ids = torch.zeros(10)

        def blend(self, mode, config=None):
            return torch.zeros(1, 4, 4, 4), torch.zeros(1, 4, 4, 1)

        def blend_with_stats(self, mode, config=None):
            return self.blend(mode) + ({"concurrent_ctas": 8, "imbalance": 1.0},)

    def project_variant_frame(name, *args, tile_size=16, **kwargs):
        projected.append((name, tile_size))
        return FakeInputs()

    def render(*args, **kwargs):
        rendered.append(kwargs["tile_size"])
        return torch.zeros(1, 4, 4, 3), torch.zeros(1, 4, 4, 1), {}

    def fake_timing(variants, repeats, warmup, streams=None):
        for fn in variants.values():  # each call once, 1 ms (FAKE)
            fn()
        return {name: [1.0] * repeats for name in variants}

    monkeypatch.setattr(frame_module, "project_variant_frame", project_variant_frame)
    monkeypatch.setattr(gsplat, "rasterization", render)
    monkeypatch.setattr(gsplat, "rasterization_2dgs", render)
    monkeypatch.setattr(timing_module, "time_interleaved", fake_timing)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(Scene, "to", lambda self, device: self)
    scene = make_scene("balanced", width=64, height=64, scale=0.001, frames=1)
    (result,) = bench_scene(scene, modes=("auto",), repeats=20, progress=False, variant=variant, tile_size=8)
    assert projected == [(variant, 8)] and rendered == [8, 8]  # backend cuda and lpt
    assert result.end_to_end_ms == {"cuda": 1.0, "lpt": 1.0}
    assert result.tile_size == 8 and result.row()["tile_size"] == 8  # bench.csv says what it was measured at
    assert FrameResult.from_json(result.to_json()).tile_size == 8


OUR_FUNCTIONS = {"3dgs": ("gsplat_lpt.variants.gaussian3d", "rasterize_to_pixels"),
                 "2dgs": ("gsplat_lpt.variants.surfel2d", "rasterize_to_pixels_2dgs"),
                 "3dgut": ("gsplat_lpt.variants.gaussian3dgut", "rasterize_to_pixels_eval3d")}


@pytest.mark.parametrize("variant", ["3dgs", "2dgs", "3dgut"])
def test_bench_scene_times_each_variants_functions(variant, monkeypatch, torch_projection):
    """bench_scene --variant on the CPU: gsplat's projection by its PyTorch implementation, every blend and render
    call replaced by a stand-in returning FAKE images and numbers (TEST-DATA) that records which function ran."""
    import importlib

    import gsplat

    import gsplat_lpt.tools.timing as timing_module
    from gsplat_lpt import hook
    from gsplat_lpt.scenes import Scene
    from gsplat_lpt.tools.frame import VARIANT_SPECS

    spec = VARIANT_SPECS[variant]
    calls = []

    def outputs(offset):  # colours whose last channel (depth for 2DGS) differs between gsplat and ours
        colors = torch.zeros(1, 8, 8, 4)
        colors[..., -1] = offset
        return (colors, torch.zeros(1, 8, 8, 1)) + ((torch.zeros(1, 8, 8, 3),) * 3 if variant == "2dgs" else ())

    def gsplat_blend(name):
        return lambda *args, **kwargs: calls.append(("gsplat", name)) or outputs(0.0)

    def ours(*args, config=None, return_stats=False, **kwargs):
        calls.append(("ours", config.mode, return_stats))
        report = {"concurrent_ctas": 1056, "imbalance": 7.0, "total_workload": 99, "max_workload": 9,
                  "chunked_tiles": 2, "chunk_count": 8}
        return outputs(0.5) + ((report,) if return_stats else ())

    def render(name):
        return lambda *args, **kwargs: calls.append(("render", name, kwargs)) or outputs(0.0)

    module, function = OUR_FUNCTIONS[variant]
    monkeypatch.setattr(importlib.import_module(module), function, ours)
    monkeypatch.setattr(hook, "original", gsplat_blend)
    for name in ("rasterization", "rasterization_2dgs"):
        monkeypatch.setattr(gsplat, name, render(name))
    def fake_timing(variants, repeats, warmup, streams=None):
        for fn in variants.values():  # each call once, 1 ms (FAKE)
            fn()
        return {name: [1.0] * repeats for name in variants}

    monkeypatch.setattr(timing_module, "time_interleaved", fake_timing)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(Scene, "to", lambda self, device: self)

    scene = make_scene("balanced", width=64, height=64, scale=0.001, frames=1)
    (result,) = bench_scene(scene, modes=("lpt", "auto"), repeats=20, progress=False, variant=variant)
    assert result.variant == variant and result.row()["variant"] == variant and result.row()["camera_model"] == "pinhole"
    projection = {"3dgs": "fully_fused_projection", "2dgs": "fully_fused_projection_2dgs",
                  "3dgut": "fully_fused_projection_with_ut"}[variant]
    assert [call[0] for call in torch_projection] == [projection]
    assert {call for call in calls if call[0] == "gsplat"} == {("gsplat", spec.blend_function)}
    assert {call[1] for call in calls if call[0] == "ours"} == {"lpt", "auto"}
    assert sum(call[2] for call in calls if call[0] == "ours") == 2  # one report per mode
    renders = [call for call in calls if call[0] == "render"]
    assert [call[1] for call in renders] == [spec.render_function] * 2
    assert [call[2]["backend"] for call in renders] == ["cuda", "lpt"]
    for _, _, kwargs in renders:
        assert kwargs.get("with_ut", False) is kwargs.get("with_eval3d", False) is (variant == "3dgut")
        assert kwargs["render_mode"] == ("RGB+D" if variant == "2dgs" else "RGB")
    assert set(result.blend_ms) == {"vanilla", "lpt", "auto"} and set(result.end_to_end_ms) == {"cuda", "lpt"}
    assert (result.chunked_tiles, result.chunk_count, result.imbalance) == (2, 8, 7.0)
    # 2DGS: the last channel is depth and stays out of PSNR; the others compare every colour channel
    assert math.isinf(result.psnr_db["auto"]) == (variant == "2dgs")


def test_bench_scene_refuses_a_camera_the_variant_lacks_before_needing_a_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    scene = make_scene("balanced", width=64, height=64, scale=0.001, frames=1)
    with pytest.raises(ValueError, match="fisheye camera model is not available for 2dgs"):
        bench_scene(scene, variant="2dgs", camera_model="fisheye")
    with pytest.raises(ValueError, match="unknown variant"):
        bench_scene(scene, variant="2d")
    with pytest.raises(NeedsGPU):
        bench_scene(scene, variant="3dgut", camera_model="fisheye")


def test_results_of_older_runs_read_as_3dgs(tmp_path):
    paths = write_results(fake_bench_results(), tmp_path)
    data = json.load(open(paths["json"]))
    for frame in data["frames"]:
        del frame["variant"], frame["camera_model"]  # written before bench had --variant
    with open(paths["json"], "w") as handle:
        json.dump(data, handle)
    again, _ = read_results(paths["json"])
    assert {r.variant for r in again} == {"3dgs"} and {r.camera_model for r in again} == {"pinhole"}
