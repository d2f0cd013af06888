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


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("omnire_driving_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve the example's string annotations through sys.modules
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


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
    assert example.finite_or_text(totals["psnr_blend_min_db"]) == "inf"
