"""Shared test setup: GPU tests (marked `gpu`) skip cleanly without CUDA; a CPU run never builds gsplat's
CUDA extension; `helpers` (tests/) and the examples' packages (examples/, e.g. `omnire`) are importable."""

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


@pytest.fixture()
def small_checkpoint(tmp_path):
    """A drivestudio checkpoint_final.pth: a 2-Gaussian Background, the RigidNodes of `helpers.rigid_state`."""
    path = tmp_path / "checkpoint_final.pth"
    torch.save({"models": {"Background": gaussian_state([[0.0, 0.0, 20.0], [1.0, 0.0, 20.0]]),
                           "RigidNodes": rigid_state(),
                           "CamPose": {"embeds.weight": torch.zeros(4, 9)}},
                "step": 30000}, path)
    return path
