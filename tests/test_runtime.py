"""Runtime pieces that need no GPU: kernel sources, the constants block, struct layouts, the variant
records, and (where nvcc is installed) a compile of every kernel source with the layout checks."""

from __future__ import annotations

import ctypes
import importlib.util
import shutil
import subprocess

import pytest

from gsplat_lpt import constants, layouts, runtime
from gsplat_lpt.variants import VARIANTS
from gsplat_lpt.variants import gaussian3d, surfel2d

# every kernel build the runtime compiles: the registered variants and the channel slices of wide feature maps
# (their kernels at 64 channels: colours not staged, rows of channel_stride floats)
BUILDS = {**{name: (variant, 3) for name, variant in VARIANTS.items()},
          **{f"{variant.name} channel slice": (variant, constants.CHANNEL_SLICE)
             for variant in (gaussian3d.CHANNEL_SLICE_VARIANT, gaussian3d.CHANNEL_SLICE_ROW16_VARIANT,
                             surfel2d.COLOR_SLICE_VARIANT, surfel2d.LAST_SLICE_VARIANT)},
          # colour rows padded to a multiple of 4 floats (maps of 5, 9, 17 and 33 channels)
          "3dgs padded rows": (gaussian3d.PADDED_ROWS_VARIANT, 17)}


def test_kernel_sources_are_found():
    directory = runtime.kernel_dir()
    for name in ("lpt_core.cuh", "plan.cu", *(v.kernel_source for v in VARIANTS.values())):
        assert (directory / name).is_file(), name


def test_constants_block_defines_every_shared_number():
    header = constants.cuda_header()
    for name in constants.SCHEDULE_WORDS:
        assert f"#define LPT_WORD_{name.upper()} {constants.SCHEDULE[name]}\n" in header
    assert "#define LPT_ALPHA_THRESHOLD (1.f / 255.f)" in header
    assert f"#define LPT_HEAD_CAPACITY {constants.HEAD_CAPACITY}" in header
    assert len(constants.SCHEDULE_WORDS) <= constants.SCHEDULE_SIZE
    # the kernels spell no schedule index themselves: every word they use comes from the block
    core = (runtime.kernel_dir() / "lpt_core.cuh").read_text() + (runtime.kernel_dir() / "plan.cu").read_text()
    assert "schedule[0]" not in core and "schedule[1]" not in core


def test_layout_checks_and_probe_cover_every_field():
    checks = layouts.layout_checks("lpt::FrameArgs", layouts.FrameArgs)
    assert f"sizeof(lpt::FrameArgs) == {ctypes.sizeof(layouts.FrameArgs)}" in checks
    structs = (("lpt::FrameArgs", layouts.FrameArgs), ("lpt::PlanArgs", layouts.PlanArgs))
    probe = layouts.layout_probe("probe", structs)
    expected = layouts.expected_offsets(structs)
    assert len(expected) == len(layouts.FrameArgs._fields_) + len(layouts.PlanArgs._fields_)
    for index, (name, offset) in enumerate(expected):
        field = name.split("::")[-1]
        assert f"offsets[{index}] = (long long)((const char*)&probe->{field} - (const char*)probe);" in probe
    assert dict(expected)["lpt::PlanArgs::chunk_counts"] == layouts.PlanArgs.chunk_counts.offset


def test_variant_records_are_complete():
    assert set(VARIANTS) >= {"rasterize_to_pixels"}
    for function, variant in VARIANTS.items():
        assert variant.gsplat_function == function
        assert variant.staged_bytes % 16 == 0  # staged batches are 16-byte aligned
        assert {"render_colors", "render_alphas"} <= {o.name for o in variant.outputs}
        assert [name for name, _ in variant.kernel_structs()] == [
            "lpt::FrameArgs", f"{variant.traits}::Params", f"{variant.traits}::Outputs"]
        assert f"sizeof({variant.traits}::Staged) == {variant.staged_bytes}" in variant.extra_checks()


def test_two_pixels_per_thread_only_where_the_tile_rows_pair_up_and_channels_are_few():
    variant = VARIANTS["rasterize_to_pixels"]
    assert variant.pixels_per_thread == 2
    assert runtime.two_pixels_possible(variant, 16) and runtime.two_pixels_possible(variant, 8)
    assert not runtime.two_pixels_possible(variant, 15)
    assert not runtime.two_pixels_possible(VARIANTS["rasterize_to_pixels_eval3d"], 16)
    # and only for few channels (a thread keeps twice the colour sums)
    assert runtime.two_pixels_possible(variant, 16, 16) and not runtime.two_pixels_possible(variant, 16, 32)
    surfels = VARIANTS["rasterize_to_pixels_2dgs"]
    assert runtime.two_pixels_possible(surfels, 16, 4) and runtime.two_pixels_possible(surfels, 16, 8)
    assert not runtime.two_pixels_possible(surfels, 16, 16)


def test_batch_entries_read_without_bank_conflicts():
    """A batch entry in shared memory is a staged Gaussian and its 16-byte colour slot (lpt_core.cuh, SharedBatch).
    The cull test's lanes each read another entry in 16-byte loads, 8 lanes at a time: entries an odd number of
    16-byte words apart put those 8 lanes on 8 different groups of 4 banks. Every variant's entry is so."""
    sizes = {name: variant.staged_bytes + 16 for name, variant in VARIANTS.items()}
    assert all(size % 16 == 0 and (size // 16) % 2 == 1 for size in sizes.values()), sizes
    for size in sizes.values():  # the bank groups of 8 consecutive entries, as the hardware serves them
        assert len({(lane * size // 16) % 8 for lane in range(8)}) == 8


def test_the_two_pixel_bound_is_the_variants():
    """The plan asks for two pixels per thread up to the variant's bound: 3DGS up to 1.4 times the mean work per CTA
    where its colour rows are staged (up to 4 channels), half the mean for feature maps; 2DGS a quarter."""
    gaussians, surfels = VARIANTS["rasterize_to_pixels"], VARIANTS["rasterize_to_pixels_2dgs"]
    assert gaussians.two_pixel_max_imbalance(3) == gaussians.two_pixel_max_imbalance(4) == 1.4
    assert gaussians.two_pixel_max_imbalance(8) == gaussians.two_pixel_max_imbalance(16) == 0.5
    assert surfels.two_pixel_max_imbalance(4) == surfels.two_pixel_max_imbalance(8) == 0.25
    # in a frame of at least 20 non-empty items per CTA: 1.6 for 3DGS colours, the same bounds otherwise
    assert constants.TWO_PIXEL_MANY_ITEMS_PER_CTA == 20
    assert gaussians.two_pixel_many_items_max(3) == gaussians.two_pixel_many_items_max(4) == 1.6
    assert gaussians.two_pixel_many_items_max(8) == 0.5 and surfels.two_pixel_many_items_max(8) == 0.25
    # in chunked frames: 3DGS colours only
    assert gaussians.two_pixel_chunked_max(3) == gaussians.two_pixel_chunked_max(4) == 0.28
    assert gaussians.two_pixel_chunked_max(8) == surfels.two_pixel_chunked_max(4) == 0.0


def test_blend_shared_bytes_formula():
    # one batch of one staged Gaussian per thread the kernels are built for, at most MAX_BATCH, their colour rows
    # (float4) and ids (int), 32 warp boxes
    assert runtime.blend_shared_bytes(32, 256) == 256 * 32 + 256 * 16 + 256 * 4 + 32 * 16
    assert runtime.blend_shared_bytes(32, 1024) == 256 * 32 + 256 * 16 + 256 * 4 + 32 * 16
    assert runtime.blend_shared_bytes(96, 64) == 64 * 96 + 64 * 16 + 64 * 4 + 32 * 16  # tile size 8
    assert runtime.blend_shared_bytes(32, 32) == 32 * 52 + 32 * 16  # tile sizes up to 5


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="CuPy is installed here")
def test_missing_cupy_is_a_clear_error():
    with pytest.raises(RuntimeError, match=r"needs CuPy.*pip install 'gsplat-lpt\[cuda12\]'"):
        runtime.import_cupy()


def _nvcc_compile(source: str, tmp_path, options=()) -> subprocess.CompletedProcess:
    path = tmp_path / "kernel.cu"
    path.write_text(source)
    return subprocess.run(["nvcc", "-std=c++17", "-arch=sm_90", "-cubin", f"-I{runtime.kernel_dir()}", *options,
                           str(path), "-o", str(tmp_path / "kernel.cubin")], capture_output=True, text=True,
                          timeout=300)


def _offset_asserts(structs) -> str:
    """Compile-time twins of the runtime's layout probe (nvcc has offsetof; NVRTC, which the probe is for,
    does not): every field offset, nested struct members included, as its host twin has it."""
    return "".join(f'static_assert(__builtin_offsetof({name.rsplit("::", 1)[0]}, {name.rsplit("::", 1)[1]}) == {offset}, '
                   f'"{name}");\n' for name, offset in layouts.expected_offsets(structs))


def _instantiations(variant, channels=3, threads=256) -> str:
    """One instantiation per pixels-per-thread the runtime may launch the variant with."""
    return "".join(variant.export_line(channels, threads // pixels, pixels)
                   for pixels in sorted({1, variant.pixels_per_thread}))


nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")


@nvcc
@pytest.mark.parametrize("build", sorted(BUILDS))
def test_every_variant_compiles_with_its_layout_checks(build, tmp_path):
    """With the compiler options of its record (an nvcc-backend variant: gsplat's include folders and flags)."""
    variant, channels = BUILDS[build]
    source = runtime.kernel_source(variant.kernel_source, variant.kernel_structs(), variant.extra_checks()) \
        + _instantiations(variant, channels) + _offset_asserts(variant.kernel_structs())
    result = _nvcc_compile(source, tmp_path, variant.compile_options())
    assert result.returncode == 0, result.stderr[-2000:]


@nvcc
def test_plan_kernels_compile(tmp_path):
    result = _nvcc_compile(runtime.kernel_source("plan.cu", (("lpt::PlanArgs", layouts.PlanArgs),)), tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]


@nvcc
def test_a_layout_that_drifts_is_a_compile_error(tmp_path):
    class Shifted(ctypes.Structure):  # FrameArgs with one field missing on the host side
        _fields_ = layouts.FrameArgs._fields_[1:]

    variant = VARIANTS["rasterize_to_pixels"]
    source = runtime.kernel_source(variant.kernel_source, (("lpt::FrameArgs", Shifted),))
    result = _nvcc_compile(source, tmp_path)
    assert result.returncode != 0 and "differs from its host twin" in result.stderr


def _nvrtc():
    """CuPy's NVRTC bindings where the library loads (compiles without a GPU), else None."""
    try:
        from cupy_backends.cuda.libs import nvrtc

        nvrtc.getVersion()
        return nvrtc
    except Exception:
        return None


@pytest.mark.skipif(_nvrtc() is None, reason="NVRTC (CuPy with its CUDA runtime compiler) is not available")
@pytest.mark.parametrize("source", ["plan.cu", *sorted({v.kernel_source for v in VARIANTS.values()
                                                        if v.compile_backend == "nvrtc"})])
def test_sources_compile_with_nvrtc_as_the_runtime_does(source):
    """NVRTC has no standard headers: what nvcc accepts it may not (INFINITY, offsetof, <cmath>, ...)."""
    nvrtc = _nvrtc()
    options: tuple = ()
    if source == "plan.cu":
        text = runtime.kernel_source(source, (("lpt::PlanArgs", layouts.PlanArgs),))
    else:
        builds = [variant for variant, _ in BUILDS.values() if variant.kernel_source == source]
        exports = "".join(variant.export_line(c, t // p, p) for variant in builds
                          for c, t in ((3, 256), (1, 64), (32, 1024), (64, 256))
                          for p in sorted({1, variant.pixels_per_thread}))
        structs = tuple(dict(s for variant in builds for s in variant.kernel_structs()).items())
        text = runtime.kernel_source(source, structs, builds[0].extra_checks() + exports)
        options = builds[0].compile_options()
    program = nvrtc.createProgram(text, source, [], [])
    try:
        nvrtc.compileProgram(program, ["-std=c++17", f"-I{runtime.kernel_dir()}", "-arch=compute_90", *options])
    except Exception:
        pytest.fail(nvrtc.getProgramLog(program)[:3000])


@pytest.mark.skipif(_nvrtc() is None, reason="NVRTC (CuPy with its CUDA runtime compiler) is not available")
@pytest.mark.parametrize("arch, clusters", [("compute_80", False), ("compute_90", True)])
def test_the_one_launch_plan_is_built_for_gpus_with_clusters_only(arch, clusters):
    """plan_cluster (a grid of one 8-CTA cluster, fixed at compile time) exists from
    compute capability 9.0 on; plan_costs and plan_order everywhere (compiler.plan_kernels asks for what exists)."""
    from gsplat_lpt.compiler import PLAN_CLUSTER_KERNELS, PLAN_GRID_KERNELS

    nvrtc = _nvrtc()
    program = nvrtc.createProgram(runtime.kernel_source("plan.cu", (("lpt::PlanArgs", layouts.PlanArgs),)), "plan.cu",
                                  [], [])
    nvrtc.compileProgram(program, ["-std=c++17", f"-I{runtime.kernel_dir()}", f"-arch={arch}"])
    ptx = nvrtc.getPTX(program)
    ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
    entries = {line.split(".entry")[1].split("(")[0].strip() for line in ptx.splitlines() if ".entry" in line}
    assert entries >= set(PLAN_GRID_KERNELS)
    assert (entries >= set(PLAN_CLUSTER_KERNELS)) == clusters and bool(entries & set(PLAN_CLUSTER_KERNELS)) == clusters
    if clusters:
        assert ptx.count(f".reqnctapercluster {constants.PLAN_CLUSTER}, 1, 1") == len(PLAN_CLUSTER_KERNELS)


def test_dependent_launch_structs_have_the_driver_layout():
    """CUlaunchConfig and CUlaunchAttribute as cuda.h (CUDA 12 and later) lays them out on 64-bit hosts."""
    import ctypes

    from gsplat_lpt.dependent_launch import LaunchAttribute, LaunchConfig

    assert ctypes.sizeof(LaunchAttribute) == 72 and LaunchAttribute.value.offset == 8
    assert ctypes.sizeof(LaunchConfig) == 56
    assert (LaunchConfig.sharedMemBytes.offset, LaunchConfig.hStream.offset, LaunchConfig.attrs.offset,
            LaunchConfig.numAttrs.offset) == (24, 32, 40, 48)


def test_dependent_launch_needs_compute_capability_9_and_can_be_switched_off(monkeypatch):
    from gsplat_lpt.dependent_launch import ENV_NO_DEPENDENT_LAUNCH, dependent_launch_available

    monkeypatch.delenv(ENV_NO_DEPENDENT_LAUNCH, raising=False)
    assert dependent_launch_available(9) and dependent_launch_available(10)
    assert not dependent_launch_available(8)
    monkeypatch.setenv(ENV_NO_DEPENDENT_LAUNCH, "1")
    assert not dependent_launch_available(9)
    monkeypatch.setenv(ENV_NO_DEPENDENT_LAUNCH, "0")
    assert dependent_launch_available(9)
