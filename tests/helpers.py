"""Helpers shared by the tests (`import helpers`; tests/conftest.py puts this folder on sys.path).

Images: `psnr`. Inputs: `random_gaussians`, `cameras` (a small camera batch looking down +z),
`write_splat` (a tiny antimatter15 .splat), `random_splats` (gsplat checkpoint parameters), the
drivestudio node states `gaussian_state` / `rigid_state`, and `fake_bench_results` (labelled made-up
timings for the reporting code), `flatten_ids_said_on_cuda` (a CPU flatten_ids that the small-frame hand-off
takes for a CUDA one). Data: `data_dir` (the optional real-scene test data). Runtime (GPU tests):
`record_persistent_launches` (which build of the persistent kernel each frame ran).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
DATA_FILES = ("test_garden.npz", "bonsai-7k-mini.splat")


# ----------------------------------------------------------------------------------------------- data


def data_dir() -> Path:
    """The folder holding the optional test data (README: "Test data"), or skip the calling test.

    Looked for in $GSPLAT_LPT_DATA, then in .data/ at the repository root."""
    for candidate in (os.environ.get("GSPLAT_LPT_DATA"), ROOT / ".data"):
        if candidate and (Path(candidate) / DATA_FILES[0]).is_file():
            return Path(candidate)
    pytest.skip(f"test data ({', '.join(DATA_FILES)}) not found; set GSPLAT_LPT_DATA (README: Test data)")


# --------------------------------------------------------------------------------------------- images


def psnr(image: torch.Tensor, reference: torch.Tensor, peak: float = 1.0) -> float:
    """Peak signal-to-noise ratio in dB; inf when the images are identical."""
    mse = float(torch.mean((image.double() - reference.double()) ** 2))
    return math.inf if mse == 0.0 else 10.0 * math.log10(peak * peak / mse)


# ---------------------------------------------------------------------------------------------- inputs


def random_gaussians(n: int, seed: int, device: str = "cuda", cluster: int = 0) -> List[torch.Tensor]:
    """[means, quats, scales, opacities] of `n` Gaussians in front of a camera looking down +z.

    `cluster` extra Gaussians stacked in depth on one spot make one tile hold most of the work."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    means = torch.randn(n, 3, generator=g) * torch.tensor([1.5, 1.0, 1.0]) + torch.tensor([0.0, 0.0, 4.0])
    scales = torch.rand(n, 3, generator=g) * 0.08 + 0.005
    opacities = torch.rand(n, generator=g) * 0.9 + 0.05
    if cluster:
        spot = torch.tensor([0.3, -0.2, 0.0])
        depth = torch.linspace(3.0, 9.0, cluster)
        means = torch.cat([means, spot + torch.stack([torch.zeros(cluster), torch.zeros(cluster), depth], -1)
                           + torch.randn(cluster, 3, generator=g) * 0.003])
        scales = torch.cat([scales, torch.full((cluster, 3), 0.004)])
        opacities = torch.cat([opacities, torch.full((cluster,), 0.08)])  # semi-transparent: long tails
    quats = torch.randn(means.shape[0], 4, generator=g)
    return [t.to(device) for t in (means, quats / quats.norm(dim=-1, keepdim=True), scales, opacities)]


def cameras(count: int, width: int, height: int, device: str = "cuda"):
    """(viewmats [count, 4, 4], Ks [count, 3, 3]): cameras side by side along x, looking down +z."""
    viewmats = torch.eye(4).repeat(count, 1, 1)
    viewmats[:, 0, 3] = torch.linspace(-0.3, 0.3, count)
    focal = 0.9 * max(width, height)
    Ks = torch.tensor([[focal, 0, width / 2], [0, focal, height / 2], [0, 0, 1.0]]).repeat(count, 1, 1)
    return viewmats.to(device), Ks.to(device)


class _SaidOnCuda(torch.Tensor):
    @property
    def is_cuda(self) -> bool:
        return True


def flatten_ids_said_on_cuda(count: int) -> torch.Tensor:
    """int32 zeros on the CPU whose is_cuda says True: what frontend.gsplat_takes asks of a call's flatten_ids."""
    return torch.zeros(count, dtype=torch.int32).as_subclass(_SaidOnCuda)


def assert_fast_path_agrees(usual, validate, args: Sequence) -> None:
    """A variant's usual-call checks (`usual`: their result on `args`, CPU tensors) against its full validation
    (`validate(*args)`): the fast path accepts exactly the calls the full validation passes up to its device check,
    the one check CPU tensors fail."""
    from gsplat_lpt.errors import LPTInputError

    try:
        validate(*args)
        full_error = None
    except (LPTInputError, ValueError, TypeError, NotImplementedError) as error:
        full_error = str(error)
    full_accepts = full_error is not None and "CUDA tensors only" in full_error
    assert (usual is not None) == full_accepts, (usual, full_error)


def write_splat(path: Path, count: int = 500, seed: int = 0) -> Path:
    """A tiny antimatter15 .splat file: `count` Gaussians around the origin."""
    from gsplat_lpt.scenes.loaders import SPLAT_RECORD

    records = np.zeros(count, dtype=SPLAT_RECORD)
    records["position"] = np.random.default_rng(seed).normal(size=(count, 3))
    records["scale"] = 0.05
    records["rgba"] = 200
    records["rotation"] = [255, 128, 128, 128]
    records.tofile(path)
    return Path(path)


def random_splats(n: int, sh_degree: int = 3, seed: int = 0) -> Dict[str, torch.Tensor]:
    """gsplat simple_trainer's raw `splats` (log scales, logit opacities, unnormalised quats, SH)."""
    gen = torch.Generator().manual_seed(seed)
    return {
        "means": torch.randn(n, 3, generator=gen),
        "scales": torch.randn(n, 3, generator=gen) * 0.3 - 3.0,  # log
        "quats": torch.randn(n, 4, generator=gen) * 2.0,  # unnormalised
        "opacities": torch.randn(n, generator=gen),  # logit
        "sh0": torch.randn(n, 1, 3, generator=gen),
        "shN": torch.randn(n, (sh_degree + 1) ** 2 - 1, 3, generator=gen),
    }


# ------------------------------------------------------------------------------ drivestudio checkpoints

YAW_90 = [math.cos(math.pi / 4), 0.0, 0.0, math.sin(math.pi / 4)]  # wxyz, +90 degrees about z


def gaussian_state(means: Sequence, sh_rest_bases: int = 15, dc: Optional[torch.Tensor] = None):
    """drivestudio's raw per-Gaussian parameters for the given means (unit scale, opacity 0.5, identity rotation)."""
    means = torch.as_tensor(means, dtype=torch.float32)
    count = means.shape[0]
    return {
        "_means": means,
        "_scales": torch.zeros(count, 3),  # log 1
        "_quats": torch.tensor([[2.0, 0.0, 0.0, 0.0]]).repeat(count, 1),  # unnormalised identity
        "_opacities": torch.zeros(count, 1),  # logit 0.5
        "_features_dc": torch.zeros(count, 3) if dc is None else torch.as_tensor(dc, dtype=torch.float32),
        "_features_rest": torch.zeros(count, sh_rest_bases, 3),
    }


def rigid_state():
    """A RigidNodes state: two instances over 3 frames; instance 1 is not annotated in frame 1."""
    state = gaussian_state([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.5, 0.0, 0.0]])
    state["_quats"][2] = torch.tensor(YAW_90)  # a local rotation that composes with the instance's
    instances_quats = torch.tensor([[1.0, 0.0, 0.0, 0.0]]).repeat(3, 2, 1)  # [F, I, 4]
    instances_quats[1, 0] = 3.0 * torch.tensor(YAW_90)  # unnormalised on purpose: the loader normalises
    instances_trans = torch.zeros(3, 2, 3)
    instances_trans[1, 0] = torch.tensor([10.0, 0.0, 1.0])
    instances_trans[:, 1] = torch.tensor([-5.0, 3.0, 0.5])
    visible = torch.ones(3, 2, dtype=torch.bool)
    visible[1, 1] = False
    state.update({
        "points_ids": torch.tensor([[0], [0], [1]]),
        "instances_quats": instances_quats,
        "instances_trans": instances_trans,
        "instances_size": torch.ones(2, 3),
        "instances_fv": visible,
    })
    return state


# ------------------------------------------------------------------------------------------ bench results

FAKE = "TEST-DATA (fake numbers)"


def fake_bench_results():
    """Made-up timings (labelled TEST-DATA), NOT measurements: for the reporting code only."""
    from gsplat_lpt.tools.bench import FrameResult, fixed_label

    heavy = FrameResult(
        scene=FAKE, frame=0, images=1, width=1920, height=1080, num_gaussians=1000, total_workload=100_000,
        max_workload=5_000, imbalance=52.8, concurrent_ctas=1056, chunked_tiles=12, chunk_count=16,
        blend_ms={"vanilla": 10.0, "lpt": 9.5, "chunk": 4.0, "auto": 2.0, fixed_label(0.01, 8): 2.5,
                  fixed_label(0.05, 16): 1.9},
        psnr_db={"lpt": math.inf, "chunk": 80.5, "auto": 90.25, fixed_label(0.01, 8): 85.0, fixed_label(0.05, 16): 84.0},
        end_to_end_ms={"cuda": 14.0, "lpt": 6.0}, repeats=21)
    balanced = FrameResult(
        scene=FAKE, frame=1, images=1, width=1920, height=1080, num_gaussians=1000, total_workload=100_000,
        max_workload=20, imbalance=0.21, concurrent_ctas=1056, chunked_tiles=0, chunk_count=1,
        blend_ms={"vanilla": 1.5, "lpt": 1.49, "chunk": 2.0, "auto": 1.505}, psnr_db={"lpt": math.inf, "auto": math.inf},
        repeats=21)
    return [heavy, balanced]


# --------------------------------------------------------------------------------------------- runtime


class _RecordedLaunches(dict):
    """A Rasterizer's table of persistent kernels (runtime.Rasterizer._persistent_launches: (two pixels per thread,
    the outputs take last_ids) -> (kernel, K, threads, dependent launch)) that logs the entry each frame reads as
    (two pixels, outputs take last_ids, build): "last_ids" where it launches the Rasterizer's build with them,
    "no last_ids" where the build that keeps none (the plain launch and the one behind the chunk kernel alike)."""

    def __init__(self, table, rasterizer, log):
        super().__init__(table)
        self.rasterizer, self.log = rasterizer, log

    def __getitem__(self, key):
        entry = super().__getitem__(key)
        two, r = key[0], self.rasterizer
        full = r._persistent_two if two else r._persistent
        lean = r.persistent_two_no_last_ids if two else r.persistent_no_last_ids
        kernels = {entry[0], getattr(entry[3], "function", entry[0])}
        build = ("last_ids" if kernels == {full} else
                 "no last_ids" if lean is not None and kernels == {lean.kernel.ptr} else "unknown")
        self.log.append((*key, build))
        return entry


def record_persistent_launches(rasterizers, monkeypatch) -> List[tuple]:
    """The persistent kernels the frames on these Rasterizers launch from now on (for the test's duration): a list
    that fills with (two pixels per thread, outputs take last_ids, "last_ids" / "no last_ids": the build), one
    per frame run."""
    log: List[tuple] = []
    for rasterizer in rasterizers:
        monkeypatch.setattr(rasterizer, "_persistent_launches",
                            _RecordedLaunches(rasterizer._persistent_launches, rasterizer, log))
    return log
