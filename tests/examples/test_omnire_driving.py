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
