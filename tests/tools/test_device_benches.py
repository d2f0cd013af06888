"""The GPU benchmarks of 2DGS and 3DGUT (tests/device/bench_2dgs.py, bench_3dgut.py) measure through the
library's `measure_blend`, as `gsplat-lpt bench --variant` does: their rows on the CPU, with a stand-in frame
and FAKE timings (TEST-DATA)."""

from __future__ import annotations

import importlib.util
import math
import sys

import pytest
import torch

import gsplat_lpt.tools.timing as timing_module
from helpers import ROOT

DEVICE = ROOT / "tests" / "device"


@pytest.fixture
def device_script(monkeypatch):
    monkeypatch.syspath_prepend(str(DEVICE))
    loaded = []

    def load(name):
        spec = importlib.util.spec_from_file_location(f"device_{name}", DEVICE / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        loaded.append(spec.name)
        spec.loader.exec_module(module)
        return module

    yield load
    for name in loaded:
        sys.modules.pop(name, None)


@pytest.fixture
def fake_timing(monkeypatch):
    def time_interleaved(variants, repeats, warmup, streams=None):
        for fn in variants.values():
            fn()
        return {name: [4.0 if name == "vanilla" else 2.0] * repeats for name in variants}  # FAKE ms

    monkeypatch.setattr(timing_module, "time_interleaved", time_interleaved)


class StandInFrame:
    """blend / blend_with_stats as the library's blend inputs have them; ours differs from gsplat in depth."""

    def __init__(self, surfels: bool):
        self.surfels = surfels
        self.flatten_ids = torch.zeros(77)
        self.means, self.viewmats = torch.zeros(9, 3), torch.zeros(3, 4, 4)
        self.calls = []

    def outputs(self, ours: bool):
        colors = torch.zeros(3, 4, 4, 4)
        colors[..., -1] = 0.25 if ours else 0.0
        extra = (torch.zeros(3, 4, 4, 3), torch.zeros(3, 4, 4, 1), torch.ones(3, 4, 4, 1)) if self.surfels else ()
        return (colors, torch.zeros(3, 4, 4, 1)) + extra

    def blend(self, mode="auto", config=None):
        self.calls.append((mode, None if config is None else config.cull))
        return self.outputs(mode != "vanilla")

    def blend_with_stats(self, mode="auto", config=None):
        self.calls.append((mode, config.cull, "stats"))
        return self.outputs(True) + ({"chunked_tiles": 5 if mode == "auto" else 0, "chunk_count": 8,
                                      "imbalance": 12.5, "concurrent_ctas": 792},)


def test_bench_2dgs_rows(device_script, fake_timing, monkeypatch):
    bench_2dgs = device_script("bench_2dgs")
    monkeypatch.setattr(bench_2dgs, "culled_share", lambda frame: 0.4)  # CUDA-only analysis
    frame = StandInFrame(surfels=True)
    row = bench_2dgs.measure("ladder:street", frame, repeats=21)
    assert set(row) == {"frame", "n_isects", "vanilla_ms", "modes", "imbalance", "K", "culled_share"}
    assert (row["vanilla_ms"], row["n_isects"], row["imbalance"], row["K"]) == (4.0, 77, 12.5, 792)
    assert set(row["modes"]) == {"lpt", "lpt-nocull", "auto"}
    auto = row["modes"]["auto"]
    assert (auto["ms"], auto["h"], auto["k"], auto["median_exact"]) == (2.0, 5, 8, True)
    assert math.isinf(auto["psnr"])  # RGB only: the depth channel differs and is left out
    assert ("lpt", False, "stats") in frame.calls and ("vanilla", None) in frame.calls
    # the calibration columns: fixed schedules and auto at other lambdas, each under its own label
    row = bench_2dgs.measure("ladder:street", frame, repeats=21, fixed=[(0.005, 32)], lambdas=[1024.0])
    assert set(row["modes"]) == {"lpt", "lpt-nocull", "auto", "fixed(0.005,32)", "auto-lambda1024"}


def test_bench_3dgut_rows(device_script, fake_timing):
    bench_3dgut = device_script("bench_3dgut")
    frame = StandInFrame(surfels=False)
    row = bench_3dgut.measure("balanced room, pinhole", frame, runs=21)
    assert (row["gsplat_ms"], row["lpt_ms"], row["auto_ms"]) == (4.0, 2.0, 2.0)
    assert (row["images"], row["gaussians"], row["intersections"]) == (3, 9, 77)
    assert row["auto_chunks"] == (5, 8) and row["lpt_max_diff"] == 0.25 and row["imbalance"] == 12.5
    assert math.isfinite(row["auto_psnr"])  # every colour channel compared
