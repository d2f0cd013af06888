"""Shared test setup: GPU tests (marked `gpu`) skip cleanly without CUDA; data files are located."""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent

if not torch.cuda.is_available():
    # A CPU test must never reach gsplat's CUDA extension: where nvcc exists, its JIT build takes an hour.
    _guard = types.ModuleType("gsplat.cuda._backend")

    def _refuse(name):
        raise RuntimeError(f"a CPU test reached gsplat's CUDA extension (gsplat.cuda._backend.{name})")

    _guard.__getattr__ = _refuse
    sys.modules["gsplat.cuda._backend"] = _guard


def data_dir() -> Path:
    """../shared/data beside the checkout, or a copy carried to a GPU machine in .data/."""
    candidates = [os.environ.get("GSPLAT_LPT_DATA"), ROOT.parent / "shared" / "data", ROOT / ".data"]
    for candidate in candidates:
        if candidate and (Path(candidate) / "test_garden.npz").is_file():
            return Path(candidate)
    pytest.skip("test data (test_garden.npz, bonsai-7k-mini.splat) not found; set GSPLAT_LPT_DATA")


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)
