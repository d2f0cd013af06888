"""Runtime pieces that do not need a GPU: where the kernel sources are, and the CuPy error."""

from __future__ import annotations

import importlib.util

import pytest

from gsplat_lpt import runtime


def test_kernel_sources_are_found():
    directory = runtime.kernel_dir()
    for name in ("scheduling.cuh", "frame_plan.cu", *runtime.VARIANT_SOURCES.values()):
        assert (directory / name).is_file(), name


def test_every_variant_has_its_shared_memory_size():
    assert set(runtime.VARIANT_SOURCES) == set(runtime.VARIANT_STAGED_BYTES)
    assert runtime.shared_bytes("3dgs", 256) == 256 * (4 + 24)


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="CuPy is installed here")
def test_missing_cupy_is_a_clear_error():
    with pytest.raises(RuntimeError, match=r"needs CuPy.*pip install 'gsplat-lpt\[cuda12\]'"):
        runtime.import_cupy()
