"""Building the kernels: their CUDA sources (kernels/), the constants block and layout checks put around
them, compilation with CuPy (NVRTC or nvcc, cached on disk and per process), and the shared-memory sizes
the blending kernels are launched with. `gsplat_lpt.runtime` launches what this module builds.
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
from pathlib import Path
from typing import Tuple

import numpy as np
import torch

from . import constants, layouts
from .errors import LPTRuntimeError

ENV_SHARED_MEMORY_LIMIT = "GSPLAT_LPT_MAX_SHARED_MEMORY"  # bytes; to try the limits of smaller GPUs


def kernel_dir() -> Path:
    """`kernels/` in a source checkout, or `gsplat_lpt/kernels/` where a wheel installed them."""
    package = Path(__file__).resolve().parent
    for candidate in (package.parent / "kernels", package / "kernels"):
        if (candidate / "lpt_core.cuh").is_file():
            return candidate
    raise LPTRuntimeError(f"gsplat_lpt's CUDA sources (kernels/*.cu) are missing next to {package}")


def import_cupy():
    try:
        import cupy  # noqa: F401
        from cupy_backends.cuda.api import driver  # noqa: F401  (kernel launches and occupancy)
    except ImportError as error:
        raise LPTRuntimeError(
            "gsplat_lpt needs CuPy to compile and launch its CUDA kernels, and it is not installed: "
            "pip install 'gsplat-lpt[cuda12]' (cupy-cuda12x) or 'gsplat-lpt[cuda13]' (cupy-cuda13x), "
            "matching your CUDA driver"
        ) from error
    return cupy


_compile_lock = threading.Lock()


Structs = Tuple[Tuple[str, type], ...]  # (C++ name, ctypes twin) of the structs a source's kernels take


@functools.lru_cache(maxsize=None)
def headers_digest() -> str:
    """A digest of our headers (kernels/*.cuh): CuPy keys its disk cache on the source text alone, so the
    text must change when an included header does."""
    digest = hashlib.sha1()
    for header in sorted(kernel_dir().glob("*.cuh")):
        digest.update(header.read_bytes())
    return digest.hexdigest()


def kernel_source(source_name: str, structs: Structs, extra_checks: str = "") -> str:
    """A kernel file as compiled: the constants block first; the struct size checks and the layout probe
    kernel last."""
    checks = "".join(layouts.layout_checks(name, twin) for name, twin in structs)
    return (f"// headers {headers_digest()}\n" + constants.cuda_header() + (kernel_dir() / source_name).read_text()
            + "\n" + checks + extra_checks + layouts.layout_probe("lpt_layout_probe", structs))


@functools.lru_cache(maxsize=None)
def compile_kernels(source_name: str, names: Tuple[str, ...], structs: Structs, extra_checks: str, device_index: int,
                    backend: str = "nvrtc", options: Tuple[str, ...] = ()) -> Tuple[object, ...]:
    """CuPy RawKernels `names` (extern "C") of kernels/`source_name`, compiled for one device (cached on disk
    by CuPy), after checking that every struct field sits where its host twin puts it. `extra_checks` is
    appended to the source (static_asserts, kernel exports)."""
    cupy = import_cupy()
    directory = kernel_dir()
    with _compile_lock, cupy.cuda.Device(device_index):
        try:
            module = cupy.RawModule(code=kernel_source(source_name, structs, extra_checks), backend=backend,
                                    options=("-std=c++17", f"-I{directory}", *options))
            kernels = tuple(module.get_function(name) for name in names)
            for kernel in kernels:
                kernel.compile()  # now, not inside the first timed launch
            probe = module.get_function("lpt_layout_probe")
        except Exception as error:  # CuPy raises CompileException and driver errors
            raise LPTRuntimeError(f"CuPy failed to compile {source_name} ({', '.join(names)}): {error}") from error
        expected = layouts.expected_offsets(structs)
        offsets = torch.full((len(expected),), -1, dtype=torch.int64, device=torch.device("cuda", device_index))
        torch.cuda.synchronize(device_index)
        probe((1,), (1,), (np.uint64(offsets.data_ptr()),))
        cupy.cuda.runtime.deviceSynchronize()
        found = offsets.tolist()
    drifted = [f"{name} at {at} (host twin: {want})" for (name, want), at in zip(expected, found) if at != want]
    if drifted:
        raise LPTRuntimeError(f"{source_name}: struct fields differ from their host twins in gsplat_lpt.layouts: "
                              + "; ".join(drifted))
    return kernels


PLAN_GRID_KERNELS = ("plan_costs", "plan_order")  # two launches of many CTAs, any GPU, any frame size
PLAN_CLUSTER_KERNELS = ("plan_cluster",)  # one launch of one cluster (compute capability 9.0+)


def plan_kernels(device_index: int) -> Tuple[object, ...]:
    """kernels/plan.cu, compiled once per device: plan_costs, plan_order, and where the GPU has thread-block
    clusters plan_cluster (else None)."""
    clusters = torch.cuda.get_device_capability(device_index)[0] >= 9
    names = PLAN_GRID_KERNELS + (PLAN_CLUSTER_KERNELS if clusters else ())
    kernels = compile_kernels("plan.cu", names, (("lpt::PlanArgs", layouts.PlanArgs),), "", device_index)
    return kernels if clusters else kernels + (None,)


def shared_memory_limit(device_index: int) -> int:
    """Dynamic shared memory one CTA may use on this GPU (opt-in maximum), or the test override."""
    forced = os.environ.get(ENV_SHARED_MEMORY_LIMIT)
    if forced:
        return int(forced)
    cupy = import_cupy()
    return int(cupy.cuda.Device(device_index).attributes["MaxSharedMemoryPerBlockOptin"])


def blend_shared_bytes(staged_bytes: int, max_threads: int) -> int:
    """lpt::SharedBatch<V, Capacity>::kBytes of the blending kernels built for CTAs of `max_threads` one-pixel
    threads (or half as many two-pixel ones): one batch of min(max_threads, MAX_BATCH) staged Gaussians, each with its
    colour row beside it (16 bytes), their ids (4 bytes), and the pixel-centre boxes of up to 32 warps (16 bytes
    each)."""
    return min(max_threads, constants.MAX_BATCH) * (staged_bytes + 16 + 4) + 32 * 16
