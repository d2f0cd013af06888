"""Shared test setup: GPU tests (marked `gpu`) skip cleanly without CUDA; a CPU run never builds gsplat's
CUDA extension; `helpers` (tests/) and the examples' packages (examples/, e.g. `omnire`) are importable.
Fixtures: `our_kernels_on_small_frames` (autouse), `small_checkpoint` (a drivestudio checkpoint),
`torch_projection` (gsplat's projections on the CPU)."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
import torch

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
for folder in (TESTS, ROOT / "examples"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from helpers import data_dir, gaussian_state, rigid_state  # noqa: E402,F401  (data_dir: also as conftest.data_dir)

if not torch.cuda.is_available():
    # On a GPU machine gsplat compiles its CUDA extension on first use (minutes). Without CUDA a test must
    # never get there: where nvcc is installed the build would start and fail only after those minutes.
    _guard = types.ModuleType("gsplat.cuda._backend")

    def _refuse(name):
        raise RuntimeError(f"a CPU test reached gsplat's CUDA extension (gsplat.cuda._backend.{name})")

    _guard.__getattr__ = _refuse
    sys.modules["gsplat.cuda._backend"] = _guard


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture(autouse=True)
def our_kernels_on_small_frames(monkeypatch):
    """Tests render small frames to check our kernels: the default hand-off of small frames to gsplat's own kernel
    (Variant.small_frame_intersections) is off in them; a test of the hand-off turns it on or sets
    LPTConfig.gsplat_kernel_below."""
    from gsplat_lpt import frontend

    monkeypatch.setattr(frontend, "HAND_OFF_SMALL_FRAMES", False)


@pytest.fixture()
def small_checkpoint(tmp_path):
    """A drivestudio checkpoint_final.pth: a 2-Gaussian Background, the RigidNodes of `helpers.rigid_state`."""
    path = tmp_path / "checkpoint_final.pth"
    torch.save({"models": {"Background": gaussian_state([[0.0, 0.0, 20.0], [1.0, 0.0, 20.0]]),
                           "RigidNodes": rigid_state(),
                           "CamPose": {"embeds.weight": torch.zeros(4, 9)}},
                "step": 30000}, path)
    return path


@pytest.fixture
def torch_projection(monkeypatch):
    """gsplat's CUDA projections, spherical harmonics and tiling replaced by its PyTorch implementation (the
    3DGS one stands in for the unscented projection, which has none); the calls are recorded."""
    import gsplat.cuda._wrapper as wrapper
    from gsplat.cuda._torch_impl import (
        _fully_fused_projection,
        _isect_offset_encode,
        _isect_tiles,
        _quat_scale_to_covar_preci,
        _spherical_harmonics,
    )
    from gsplat.cuda._torch_impl_2dgs import _fully_fused_projection_2dgs

    calls = []

    def projection(means, covars, quats, scales, viewmats, Ks, width, height, packed=False, near_plane=0.01,
                   far_plane=1e10, opacities=None, camera_model="pinhole", **rest):
        calls.append(("fully_fused_projection", camera_model))
        covars, _ = _quat_scale_to_covar_preci(quats, scales, compute_preci=False)
        return _fully_fused_projection(means, covars, viewmats, Ks, width, height, near_plane=near_plane,
                                       far_plane=far_plane, camera_model=camera_model)

    def projection_2dgs(means, quats, scales, viewmats, Ks, width, height, near_plane=0.01, far_plane=1e10,
                        packed=False, **rest):
        calls.append(("fully_fused_projection_2dgs", "pinhole"))
        return _fully_fused_projection_2dgs(means, quats, scales, viewmats, Ks, width, height, near_plane, far_plane)

    def projection_ut(means, quats, scales, opacities, viewmats, Ks, width, height, near_plane=0.01,
                      far_plane=1e10, camera_model="pinhole", **camera):
        calls.append(("fully_fused_projection_with_ut", camera_model, tuple(sorted(camera))))
        covars, _ = _quat_scale_to_covar_preci(quats, scales, compute_preci=False)
        return _fully_fused_projection(means, covars, viewmats, Ks, width, height, near_plane=near_plane,
                                       far_plane=far_plane, camera_model=camera_model)

    def harmonics(degree, dirs, coeffs, masks=None):
        calls.append(("spherical_harmonics", degree))
        return _spherical_harmonics(degree, dirs, coeffs)

    monkeypatch.setattr(wrapper, "fully_fused_projection", projection)
    monkeypatch.setattr(wrapper, "fully_fused_projection_2dgs", projection_2dgs)
    monkeypatch.setattr(wrapper, "fully_fused_projection_with_ut", projection_ut)
    monkeypatch.setattr(wrapper, "spherical_harmonics", harmonics)
    monkeypatch.setattr(wrapper, "isect_tiles", lambda *args, **kwargs: _isect_tiles(*args[:6]))
    monkeypatch.setattr(wrapper, "isect_offset_encode", _isect_offset_encode)
    return calls
