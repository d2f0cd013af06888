"""3DGUT (gsplat's rasterize_to_pixels_eval3d) without a GPU: the record, validation, the hook's routing,
the nvcc compile against gsplat's installed headers, and our torch reference of the per-pixel evaluation
against a direct float64 computation."""

from __future__ import annotations

import ctypes
import dataclasses
import importlib.util
import inspect
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import gsplat_lpt
from gsplat_lpt import LPTConfig, constants, frontend, layouts, runtime
from gsplat_lpt.errors import LPTInputError
from gsplat_lpt.reference_3dgut import blend_eval3d_sequential, eval3d_alphas, iscl_rot, pinhole_rays
from gsplat_lpt.variants import VARIANTS
from gsplat_lpt.variants import gaussian3dgut

FUNCTION = "rasterize_to_pixels_eval3d"


# ------------------------------------------------------------------------------------------------------
# record and signature


def test_record_is_registered_and_complete():
    variant = VARIANTS[FUNCTION]
    assert variant is gaussian3dgut.VARIANT
    assert variant.name == "3dgut" and variant.traits == "Gaussian3DGUT"
    assert (runtime.kernel_dir() / variant.kernel_source).is_file()
    assert variant.compile_backend == "nvcc"
    assert variant.staged_bytes == 64 and variant.partial_floats(3) == 3
    assert variant.chunks_compose  # colours and alphas compose; last_ids are for the backward only
    assert [o.name for o in variant.outputs if o.backward_only] == ["last_ids"]
    assert variant.no_last_ids_kernel  # inference calls (no last_ids) run the persistent kernel's build without them
    assert variant.rasterize is gaussian3dgut.rasterize_with_plan
    names = [name for name, _ in variant.kernel_structs()]
    assert names == ["lpt::FrameArgs", "Gaussian3DGUT::Params", "Gaussian3DGUT::Outputs"]


def test_signature_is_gsplats_plus_config():
    """gsplat.rendering calls it with gsplat's positional and keyword names: same parameters, same order."""
    from gsplat.cuda._wrapper import rasterize_to_pixels_eval3d

    ours = list(inspect.signature(gaussian3dgut.rasterize_with_plan).parameters)
    theirs = list(inspect.signature(rasterize_to_pixels_eval3d).parameters)
    assert ours == theirs + ["config"]


def test_compile_options_name_gsplats_headers_and_flags(monkeypatch):
    monkeypatch.setattr(gaussian3dgut, "_require_nvcc", lambda: None)  # the options, whether or not nvcc is here
    options = gaussian3dgut.compile_options()
    include, glm = gaussian3dgut.gsplat_include_dirs()
    assert f"-I{include}" in options and f"-I{glm}" in options
    assert (include / "Cameras.cuh").is_file() and (glm / "glm" / "glm.hpp").is_file()
    assert "--expt-relaxed-constexpr" in options and "-use_fast_math" in options
    assert any(o.startswith("-DLPT_HEADERS_DIGEST=") for o in options)  # in CuPy's cache key
    monkeypatch.setenv("NO_FAST_MATH", "1")  # gsplat's own switch: then neither side uses fast math
    assert "-use_fast_math" not in gaussian3dgut.compile_options()


@pytest.mark.skipif(importlib.util.find_spec("cupy") is None, reason="CuPy (which finds nvcc) is not installed")
def test_missing_nvcc_is_a_clear_error(monkeypatch):
    import cupy.cuda

    monkeypatch.setattr(cupy.cuda, "get_nvcc_path", lambda: None)
    with pytest.raises(gsplat_lpt.LPTRuntimeError, match="compiled with nvcc.*nvcc was not found"):
        gaussian3dgut.compile_options()


def test_params_twin_nests_gsplats_ftheta_struct():
    offsets = dict(layouts.expected_offsets((("P", gaussian3dgut.Params3DGUT),)))
    base = gaussian3dgut.Params3DGUT.ftheta_coeffs.offset
    assert offsets["P::ftheta_coeffs.max_angle"] == base + 13 * 4  # enum, 6 + 6 floats
    assert offsets["P::ftheta_coeffs.linear_cde"] == base + 14 * 4
    assert ctypes.sizeof(gaussian3dgut.FThetaParams) == 68


# ------------------------------------------------------------------------------------------------------
# validation (before any GPU work: CPU tensors reach it on this machine)


def _inputs(B=(), C=2, N=5, channels=3, width=32, height=16, tile_size=16):
    g = torch.Generator().manual_seed(0)
    tiles = (height // tile_size, width // tile_size)
    return dict(
        means=torch.randn(*B, N, 3, generator=g), quats=torch.randn(*B, N, 4, generator=g),
        scales=torch.rand(*B, N, 3, generator=g) + 0.1, colors=torch.rand(*B, C, N, channels, generator=g),
        opacities=torch.rand(*B, C, N, generator=g), viewmats=torch.eye(4).repeat(*B, C, 1, 1),
        Ks=torch.tensor([[20.0, 0, 16], [0, 20.0, 8], [0, 0, 1]]).repeat(*B, C, 1, 1), image_width=width,
        image_height=height, tile_size=tile_size, isect_offsets=torch.zeros(*B, C, *tiles, dtype=torch.int32),
        flatten_ids=torch.zeros(0, dtype=torch.int32))


def _frame(**changes):
    return gaussian3dgut.Frame3DGUT(**{**_inputs(), **changes})


@pytest.mark.parametrize("changes, message", [
    (dict(quats=torch.zeros(5, 3)), r"quats has shape \(5, 3\), expected \(5, 4\)"),
    (dict(opacities=torch.zeros(2, 5, dtype=torch.float64)), "opacities must have dtype torch.float32"),
    (dict(Ks=torch.zeros(3, 3, 3)), r"Ks has shape \(3, 3, 3\), expected \(2, 3, 3\)"),
    (dict(colors=torch.zeros(2, 4, 3)), r"colors has shape \(2, 4, 3\), expected \(2, 5, 3\)"),
    (dict(colors=torch.zeros(2, 5, 0)), "colors has 0 channels"),
    (dict(backgrounds=torch.zeros(3)), r"backgrounds has shape \(3,\), expected \(2, 3\)"),
    (dict(camera_model="ortho"), "no orthographic camera"),
    (dict(camera_model="equirect"), "camera_model must be one of"),
    (dict(radial_coeffs=torch.zeros(2, 4)), r"expected \(2, 6\).*pinhole model reads 6 radial coefficients"),
    (dict(camera_model="fisheye", radial_coeffs=torch.zeros(2, 6)), "fisheye model reads 4 radial coefficients"),
    (dict(tangential_coeffs=torch.zeros(2, 3)), r"tangential_coeffs has shape \(2, 3\)"),
    (dict(thin_prism_coeffs=torch.zeros(1, 4)), r"thin_prism_coeffs has shape \(1, 4\)"),
    (dict(viewmats_rs=torch.zeros(2, 3, 4)), "viewmats_rs has shape"),
    (dict(rolling_shutter=0), "rolling_shutter must be a gsplat RollingShutterType"),
    (dict(ut_params={"alpha": 0.1}), "ut_params must be gsplat's UnscentedTransformParameters"),
    (dict(ftheta_coeffs="poly"), "ftheta_coeffs must be gsplat's FThetaCameraDistortionParameters"),
    (dict(isect_offsets=torch.zeros(3, 1, 2, dtype=torch.int32)), r"isect_offsets must be \[..., C, tile_height"),
    (dict(isect_offsets=torch.zeros(2, 1, 2)), "isect_offsets must have dtype torch.int32"),
    (dict(masks=torch.ones(2, 1, 2, dtype=torch.uint8)), "masks must have dtype torch.bool"),
    (dict(tile_size=0), "tile_size must be a positive integer"),
    (dict(image_height=40), "smaller than the 40x32 image"),
])
def test_bad_inputs_name_the_argument(changes, message):
    with pytest.raises(LPTInputError, match=message):
        _frame(**changes)


def _fast_path_cases():
    """Every change of test_bad_inputs_name_the_argument, and calls the usual-call checks must take or leave: batch
    dims, each camera model with its coefficients, rolling shutter poses, backgrounds, masks, wrong shapes."""
    RollingShutterType = gaussian3dgut._gsplat_types()[0]
    cases = [changes for changes, _ in test_bad_inputs_name_the_argument.pytestmark[0].args[1]]
    cameras = lambda *tail: torch.zeros(2, *tail)  # noqa: E731  ([C, ...] with C = 2)
    cases += [
        {}, dict(backgrounds=cameras(3)), dict(masks=torch.ones(2, 1, 2, dtype=torch.bool)),
        dict(radial_coeffs=cameras(6), tangential_coeffs=cameras(2), thin_prism_coeffs=cameras(4)),
        dict(camera_model="fisheye", radial_coeffs=cameras(4)), dict(camera_model="ftheta", radial_coeffs=cameras(4)),
        dict(camera_model="ftheta", radial_coeffs=cameras(6)), dict(camera_model="ftheta", radial_coeffs=cameras(5)),
        dict(viewmats_rs=cameras(4, 4), rolling_shutter=RollingShutterType.ROLLING_TOP_TO_BOTTOM),
        dict(radial_coeffs=cameras(6).double()), dict(viewmats_rs=cameras(4, 3)), dict(colors=torch.zeros(2, 5, 16)),
        dict(colors=torch.zeros(10, 3)), dict(means=torch.zeros(5, 2)), dict(viewmats=torch.eye(4).repeat(1, 2, 1, 1)),
        dict(flatten_ids=torch.zeros(1, 1, dtype=torch.int32)), dict(image_width=33), dict(tile_size=16.0),
        dict(backgrounds=torch.zeros(1, 3)), dict(masks=torch.ones(1, 1, 2, dtype=torch.bool)), dict(means="means"),
        dict(_inputs(B=(3,)), backgrounds=torch.zeros(3, 2, 3)), dict(_inputs(B=(3,)), backgrounds=torch.zeros(2, 3)),
    ]
    return cases


@pytest.mark.parametrize("changes", _fast_path_cases())
def test_fast_path_accepts_only_what_the_full_validation_accepts(changes, monkeypatch):
    """gaussian3dgut._usual_call (its device check lowered to take CPU tensors) accepts exactly the calls the full
    validation passes up to its device check, and finds the same dims."""
    from helpers import assert_fast_path_agrees

    monkeypatch.setattr(frontend, "FIRST_DEVICE_INDEX", -1)
    unset = ("backgrounds", "masks", "radial_coeffs", "tangential_coeffs", "thin_prism_coeffs", "ftheta_coeffs",
             "viewmats_rs", "ut_params", "rolling_shutter")
    args = {**_inputs(), **dict.fromkeys(unset), "camera_model": "pinhole", **changes}
    args["ut_params"], args["rolling_shutter"] = gaussian3dgut._given(args["ut_params"], args["rolling_shutter"])
    order = ("means", "quats", "scales", "colors", "opacities", "viewmats", "Ks", "image_width", "image_height",
             "tile_size", "isect_offsets", "flatten_ids", "backgrounds", "masks", "camera_model", "ut_params",
             "radial_coeffs", "tangential_coeffs", "thin_prism_coeffs", "rolling_shutter", "viewmats_rs")
    usual = gaussian3dgut._usual_call(*[args[k] for k in order])
    try:  # the fast path packs ftheta_coeffs next, which names them where they are wrong
        gaussian3dgut.pack_ftheta(args["ftheta_coeffs"])
    except LPTInputError:
        usual = None
    full = [args[k] for k in order[:18]] + [args["thin_prism_coeffs"], args["ftheta_coeffs"], args["rolling_shutter"],
                                           args["viewmats_rs"]]
    assert_fast_path_agrees(usual, gaussian3dgut.Frame3DGUT.__new__(gaussian3dgut.Frame3DGUT)._validate, full)
    if usual is not None:
        batch, C, N, channels, _ = usual
        assert batch + (C, N, channels) == tuple(args["colors"].shape)


def test_packed_is_refused_as_gsplat_refuses_it():
    """gsplat 1.5.3's eval3d raises NotImplementedError for packed colours; so do we (same type)."""
    with pytest.raises(NotImplementedError, match="packed"):
        _frame(colors=torch.zeros(10, 3), opacities=torch.zeros(10))


def test_ftheta_coefficients_are_packed_field_by_field():
    from gsplat.cuda._wrapper import FThetaCameraDistortionParameters, FThetaPolynomialType

    coeffs = FThetaCameraDistortionParameters(
        reference_poly=FThetaPolynomialType.ANGLE_TO_PIXELDIST, pixeldist_to_angle_poly=(0, 1, 2, 3, 4, 5),
        angle_to_pixeldist_poly=(6, 7, 8, 9, 10, 11), max_angle=1.5, linear_cde=(1.0, 0.25, 0.5))
    packed = gaussian3dgut.pack_ftheta(coeffs)
    assert packed.reference_poly == 1 and list(packed.angle_to_pixeldist_poly) == [6, 7, 8, 9, 10, 11]
    assert list(packed.pixeldist_to_angle_poly) == [0, 1, 2, 3, 4, 5] and packed.max_angle == 1.5
    assert list(packed.linear_cde) == [1.0, 0.25, 0.5]
    assert bytes(gaussian3dgut.pack_ftheta(None)) == bytes(68)  # gsplat's default: value-initialised
    with pytest.raises(LPTInputError, match="take 6 coefficients"):
        gaussian3dgut.pack_ftheta(dataclasses.replace(coeffs, linear_cde=(1.0, 0.0)))


def test_cpu_tensors_are_refused_by_name():
    with pytest.raises(LPTInputError, match="means is on cpu; the lpt backend renders CUDA tensors only"):
        _frame()


def test_batch_dims_flow_through_validation():
    frame_inputs = _inputs(B=(2,), C=3)
    with pytest.raises(LPTInputError, match="means is on cpu"):  # every shape accepted, then the device check
        gaussian3dgut.Frame3DGUT(**frame_inputs)


def test_hook_routes_eval3d_to_the_variant(monkeypatch):
    """gsplat.rendering's rasterize_to_pixels_eval3d global (what rasterization(..., with_eval3d=True) calls)
    reaches our record's rasterize under backend "lpt", with gsplat's arguments and our config."""
    import gsplat.rendering

    calls = []

    def fake_rasterize(*args, config, **kwargs):
        calls.append((args, kwargs, config))
        return "colors", "alphas", None

    monkeypatch.setitem(VARIANTS, FUNCTION, dataclasses.replace(VARIANTS[FUNCTION], rasterize=fake_rasterize))
    config = LPTConfig(mode="chunk")
    with gsplat_lpt.use_backend("lpt", config):
        result = gsplat.rendering.rasterize_to_pixels_eval3d(1, 2, backgrounds=None, camera_model="fisheye")
    assert result == ("colors", "alphas")
    assert calls == [((1, 2), {"backgrounds": None, "camera_model": "fisheye"}, config)]
    with gsplat_lpt.use_backend("lpt"):  # the real record: our validation answers (no fallback warning)
        monkeypatch.undo()
        with pytest.raises(LPTInputError, match="means is on cpu"):
            gsplat.rendering.rasterize_to_pixels_eval3d(*[v for k, v in _inputs().items()])


def test_rasterization_with_ut_and_eval3d_reaches_the_variant(monkeypatch):
    """gsplat.rasterization(..., with_ut=True, with_eval3d=True, backend="lpt") itself, on the CPU: gsplat's
    projection and tiling are stood in for (they need its CUDA extension), and the blend call that
    rendering.py makes arrives at the 3DGUT record with the camera arguments and the lpt config."""
    import gsplat
    import gsplat.rendering as rendering
    from gsplat.cuda._wrapper import RollingShutterType

    from gsplat_lpt import hook

    N, C, W, H = 4, 2, 32, 16

    def projection(means, quats, scales, opacities, viewmats, Ks, width, height, **options):
        assert options["camera_model"] == "fisheye" and options["viewmats_rs"] is not None
        return (torch.ones(C, N, 2, dtype=torch.int32), torch.zeros(C, N, 2), torch.ones(C, N), torch.ones(C, N, 3),
                None)

    monkeypatch.setattr(rendering, "fully_fused_projection_with_ut", projection)
    monkeypatch.setattr(rendering, "isect_tiles", lambda *args, **kwargs: (
        None, torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.int32)))
    monkeypatch.setattr(rendering, "isect_offset_encode",
                        lambda ids, images, tw, th: torch.zeros(images, th, tw, dtype=torch.int32))
    monkeypatch.setattr(hook, "_require_cuda_inputs", lambda *args: None)
    calls = []

    def fake_rasterize(*args, config, **kwargs):
        calls.append((args, kwargs, config))
        return torch.full((C, H, W, 3), 0.5), torch.zeros(C, H, W, 1), None

    monkeypatch.setitem(VARIANTS, FUNCTION, dataclasses.replace(VARIANTS[FUNCTION], rasterize=fake_rasterize))
    inputs = _inputs(C=C, N=N, width=W, height=H)
    radial = torch.zeros(C, 4)
    config = LPTConfig(mode="lpt")
    colors, alphas, meta = gsplat.rasterization(
        inputs["means"], inputs["quats"], inputs["scales"], torch.rand(N), torch.rand(N, 3), inputs["viewmats"],
        inputs["Ks"], W, H, packed=False, with_ut=True, with_eval3d=True, camera_model="fisheye",
        radial_coeffs=radial, rolling_shutter=RollingShutterType.ROLLING_TOP_TO_BOTTOM,
        viewmats_rs=inputs["viewmats"], backend="lpt", lpt_config=config)
    assert len(calls) == 1 and torch.all(colors == 0.5)
    args, kwargs, seen = calls[0]
    assert seen is config and args[7:10] == (W, H, 16) and tuple(args[3].shape) == (C, N, 3)
    assert kwargs["camera_model"] == "fisheye" and kwargs["radial_coeffs"] is radial
    assert kwargs["rolling_shutter"] == RollingShutterType.ROLLING_TOP_TO_BOTTOM
    assert meta["lpt"]["variant"] == "3dgut" and "fallback" not in meta["lpt"]  # no images planned: empty report


def test_inference_calls_hand_the_kernels_no_last_ids(monkeypatch):
    """gsplat returns colours and alphas only, and only its backward reads last_ids: a call that needs no gradients
    renders without them (Frame3DGUT.render with with_last_ids=False: none allocated, a null pointer in Outputs, so
    that the runtime runs the persistent kernel's build that keeps none); the low-level entry keeps them by default.
    (CPU tensors, the frame's validation and the GPU launch stood in for.)"""
    from gsplat_lpt import frontend

    launched = []
    monkeypatch.setattr(frontend, "render", lambda variant, inter, params, outputs, *rest: launched.append(
        outputs) or "plan")
    frame = gaussian3dgut.Frame3DGUT.__new__(gaussian3dgut.Frame3DGUT)  # (what __init__ leaves, without its checks)
    frame.inter = runtime.Intersections(torch.zeros(1, 2, 3, dtype=torch.int32), torch.zeros(0, dtype=torch.int32),
                                        None, 1, 40, 30, 16, 3, 2, 5)
    frame.image_dims, frame.device, frame.channels, frame.padding = (1,), torch.device("cpu"), 3, 0
    frame.params = lambda: "params"
    colors, alphas, last_ids, plan = frame.render(LPTConfig(mode="lpt"))
    assert plan == "plan" and launched[-1].last_ids == last_ids.data_ptr() != 0
    assert tuple(last_ids.shape) == (1, 30, 40) and last_ids.dtype == torch.int32
    colors, alphas, last_ids, plan = frame.render(LPTConfig(mode="lpt"), with_last_ids=False)
    assert last_ids is None and launched[-1].last_ids == 0
    assert launched[-1].render_colors == colors.data_ptr() and launched[-1].render_alphas == alphas.data_ptr()

    # rasterize_to_pixels_eval3d without gradients asks for none
    asked = []
    frame.render = lambda config, allowed, reason, **options: asked.append(options) or (colors, alphas, None, "plan")
    for name in ("means", "quats", "scales", "colors", "opacities", "backgrounds", "viewmats"):
        setattr(frame, name, torch.zeros(1))
    monkeypatch.setattr(gaussian3dgut, "Frame3DGUT", lambda *args: frame)
    rendered = gaussian3dgut.rasterize_with_plan(*range(12))  # (gsplat's 12 positional arguments, stood in for)
    assert rendered[0] is colors and rendered[1] is alphas and rendered[2] == "plan"
    assert asked == [{"with_last_ids": False}]


@pytest.mark.parametrize("isects, handed_off", [(9, True), (10, False)])
@pytest.mark.parametrize("defaults", [False, True])
def test_small_frames_go_to_gsplats_own_kernel(isects, handed_off, defaults, monkeypatch):
    """A 3DGUT frame of fewer intersections than LPTConfig.gsplat_kernel_below is gsplat's own rasterize_to_pixels_eval3d call with the caller's 22 arguments; where the caller left ut_params
    and rolling_shutter None (our defaults), gsplat's defaults, which its forward needs given."""
    from helpers import flatten_ids_said_on_cuda

    from gsplat_lpt import frontend

    frame = gaussian3dgut.Frame3DGUT.__new__(gaussian3dgut.Frame3DGUT)
    frame.render = lambda *args, **options: (None, None, None, "plan")
    frame.padding = 0
    for name in ("means", "quats", "scales", "colors", "opacities", "backgrounds", "viewmats"):
        setattr(frame, name, torch.zeros(1))
    monkeypatch.setattr(gaussian3dgut, "Frame3DGUT", lambda *args: frame)
    calls = []
    monkeypatch.setattr(frontend, "gsplat_kernel", lambda variant: lambda *args: calls.append(
        (variant.gsplat_function, args)) or ("c", "a"))
    args = [object() for _ in range(22)]
    args[11] = flatten_ids_said_on_cuda(isects)
    if defaults:
        args[15] = args[20] = None
    colors, alphas, plan = gaussian3dgut.rasterize_with_plan(*args, config=LPTConfig(mode="lpt", gsplat_kernel_below=10))
    if not handed_off:
        assert calls == [] and plan == "plan"
        return
    (name, passed), = calls
    assert name == "rasterize_to_pixels_eval3d" and (colors, alphas) == ("c", "a") and len(passed) == 22
    assert all(a is b for i, (a, b) in enumerate(zip(passed, args)) if not (defaults and i in (15, 20)))
    if defaults:
        RollingShutterType, UnscentedTransformParameters = gaussian3dgut._gsplat_types()
        assert isinstance(passed[15], UnscentedTransformParameters) and passed[20] == RollingShutterType.GLOBAL
    assert plan.report()["total_workload"] == isects and plan.report()["variant"] == "3dgut"


# ------------------------------------------------------------------------------------------------------
# nvcc compile against gsplat's installed headers

nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")


def _compile(tmp_path, source: str) -> subprocess.CompletedProcess:
    path = tmp_path / "blend_3dgut.cu"
    path.write_text(source)
    command = ["nvcc", "-std=c++17", "-arch=sm_90", "-cubin", f"-I{runtime.kernel_dir()}",
               *gaussian3dgut.compile_options(), "-ftz=true", str(path), "-o", str(tmp_path / "blend_3dgut.cubin")]
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


@nvcc
def test_source_compiles_with_nvcc_against_gsplats_headers(tmp_path):
    """As the runtime compiles it (CuPy's nvcc backend): constants, layout checks and probe, several
    channel counts and CTA sizes in one module, each with its persistent kernel that keeps no last_ids and its two
    builds for latency-bound frames."""
    variant = VARIANTS[FUNCTION]
    exports = "".join(variant.export_line(c, t) for c, t in ((3, 256), (1, 64), (4, 1024), (32, 256)))
    source = runtime.kernel_source(variant.kernel_source, variant.kernel_structs(), variant.extra_checks() + exports)
    result = _compile(tmp_path, source)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "warning" not in result.stderr.lower(), result.stderr[-3000:]
    cubin = (tmp_path / "blend_3dgut.cubin").read_bytes()
    for name in variant.kernel_names(32, 256) + variant.kernel_names(1, 64) + ("lpt_layout_probe",):
        assert name.encode() in cubin
    for channels, threads in ((32, 256), (1, 64)):
        assert variant.no_last_ids_kernel_name(channels, threads).encode() in cubin
        for name in variant.latency_bound_kernel_names(channels, threads):
            assert name.encode() in cubin


@nvcc
def test_a_drifted_ftheta_twin_is_a_compile_error(tmp_path):
    """The size check catches a host twin of gsplat's FTheta struct that lost a field."""

    class Shorter(ctypes.Structure):
        _fields_ = gaussian3dgut.FThetaParams._fields_[:-1]

    class Drifted(ctypes.Structure):
        _fields_ = [(n, Shorter if n == "ftheta_coeffs" else t) for n, t in gaussian3dgut.Params3DGUT._fields_]

    variant = VARIANTS[FUNCTION]
    source = runtime.kernel_source(variant.kernel_source, (("Gaussian3DGUT::Params", Drifted),))
    result = _compile(tmp_path, source)
    assert result.returncode != 0 and "differs from its host twin" in result.stderr


@nvcc
def test_lpt_kernel_computes_alphas_with_gsplats_float_dataflow(tmp_path):
    """The persistent (lpt) kernel and gsplat's own forward kernel, each compiled as it is built (gsplat's whole
    RasterizeToPixelsFromWorld3DGSFwd.cu with its JIT flags; ours as CuPy's nvcc backend builds it), compute
    every alpha with the same float operations on the same operands, compared in SASS (between control-flow
    merges; tests/device/sass_3dgut.py, which needs cuobjdump and CuPy: skipped without). nvcc's contraction of
    multiply-adds depends on the code around an expression, so this is what keeps lpt mode bit for bit."""
    sys.path.insert(0, str(Path(__file__).resolve().parent / "device"))
    import sass_3dgut
    try:
        sass_3dgut.tool("cuobjdump")
    except SystemExit:
        pytest.skip("cuobjdump not found (PATH or next to nvcc)")
    pytest.importorskip("cupy", reason="our kernel is built with CuPy's nvcc options")
    assert sass_3dgut.main(["--keep", str(tmp_path)]) == 0


# ------------------------------------------------------------------------------------------------------
# the torch reference against a direct float64 computation


def _random_scene(seed, B=(), C=2, N=14):
    g = torch.Generator().manual_seed(seed)
    means = torch.randn(*B, N, 3, generator=g, dtype=torch.float64) * torch.tensor([0.8, 0.5, 0.6], dtype=torch.float64)
    means[..., 2] += 3.0
    quats = torch.randn(*B, N, 4, generator=g, dtype=torch.float64)
    scales = torch.rand(*B, N, 3, generator=g, dtype=torch.float64) * 0.35 + 0.05
    opacities = torch.rand(*B, C, N, generator=g, dtype=torch.float64) * 0.98 + 0.01
    colors = torch.rand(*B, C, N, 3, generator=g, dtype=torch.float64)
    # three wide, nearly opaque Gaussians in front of the view: pixels behind them saturate (T <= 1e-4)
    means[..., :3, :] = torch.tensor([[0.0, 0.0, 2.0], [0.1, 0.05, 2.2], [-0.1, 0.0, 2.4]], dtype=torch.float64)
    scales[..., :3, :] = 0.9
    opacities[..., :3] = 1.0
    angles = torch.rand(*B, C, 3, generator=g, dtype=torch.float64) * 0.3 - 0.15
    viewmats = torch.eye(4, dtype=torch.float64).repeat(*B, C, 1, 1)
    viewmats[..., :3, :3] = _rotation(angles)
    viewmats[..., :3, 3] = torch.rand(*B, C, 3, generator=g, dtype=torch.float64) * 0.4 - 0.2
    Ks = torch.tensor([[30.0, 0, 13.0], [0, 28.0, 9.5], [0, 0, 1]], dtype=torch.float64).repeat(*B, C, 1, 1)
    return means, quats, scales, colors, opacities, viewmats, Ks


def _rotation(angles):
    a, b, c = angles.unbind(-1)
    one, zero = torch.ones_like(a), torch.zeros_like(a)
    rx = torch.stack([one, zero, zero, zero, a.cos(), -a.sin(), zero, a.sin(), a.cos()], -1).reshape(*a.shape, 3, 3)
    ry = torch.stack([b.cos(), zero, b.sin(), zero, one, zero, -b.sin(), zero, b.cos()], -1).reshape(*a.shape, 3, 3)
    rz = torch.stack([c.cos(), -c.sin(), zero, c.sin(), c.cos(), zero, zero, zero, one], -1).reshape(*a.shape, 3, 3)
    return rz @ ry @ rx


def test_pinhole_rays_are_the_inverse_projection():
    """Each ray starts at the camera centre and passes through the world point that K and the viewmat map
    to the pixel centre (independently: the inverted 4x4 camera-to-world matrix)."""
    means, quats, scales, colors, opacities, viewmats, Ks = _random_scene(1, C=3)
    W, H = 7, 5
    origins, directions = pinhole_rays(viewmats, Ks, W, H)
    assert origins.shape == directions.shape == (3, H, W, 3)
    c2w = torch.linalg.inv(viewmats)
    pixels = torch.stack(torch.meshgrid(torch.arange(W, dtype=torch.float64) + 0.5,
                                        torch.arange(H, dtype=torch.float64) + 0.5, indexing="xy"), -1)
    homogeneous = torch.cat([pixels, torch.ones(H, W, 1, dtype=torch.float64)], -1)
    camera = torch.einsum("cij,hwj->chwi", torch.linalg.inv(Ks), homogeneous)  # depth 1
    world = torch.einsum("cij,chwj->chwi", c2w[:, :3, :3], camera) + c2w[:, None, None, :3, 3]
    expected = world - c2w[:, None, None, :3, 3]
    expected = expected / expected.norm(dim=-1, keepdim=True)
    assert torch.allclose(origins, c2w[:, None, None, :3, 3].expand_as(origins), atol=1e-12)
    assert torch.allclose(directions, expected, atol=1e-12)
    assert torch.allclose(directions.norm(dim=-1), torch.ones(3, H, W, dtype=torch.float64), atol=1e-12)


def _max_response_along_ray(mean, quat, scale, origin, direction):
    """exp(-q/2) at the ray's nearest point in the Mahalanobis sense, from the precision matrix
    Sigma^-1 = R S^-2 R^T directly: q = (o - mu)^T P (o - mu) - (d^T P (mu - o))^2 / (d^T P d)."""
    w, x, y, z = quat / np.linalg.norm(quat)
    R = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                  [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                  [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])
    P = R @ np.diag(1.0 / scale ** 2) @ R.T
    delta = origin - mean
    q = delta @ P @ delta - (direction @ P @ -delta) ** 2 / (direction @ P @ direction)
    return math.exp(-0.5 * q)



def test_eval3d_alphas_equal_the_precision_matrix_form():
    means, quats, scales, colors, opacities, viewmats, Ks = _random_scene(2, C=1, N=40)
    origins, directions = pinhole_rays(viewmats, Ks, 26, 19)
    o, d = origins.reshape(-1, 3)[::7], directions.reshape(-1, 3)[::7]
    alphas = eval3d_alphas(means, iscl_rot(quats, scales), opacities[0], o, d)
    checked = 0
    for p in range(o.shape[0]):
        for m in range(means.shape[0]):
            response = _max_response_along_ray(means[m].numpy(), quats[m].numpy(), scales[m].numpy(), o[p].numpy(),
                                               d[p].numpy())
            alpha = min(constants.MAX_ALPHA[1], float(opacities[0, m]) * response)
            expected = 0.0 if alpha < constants.ALPHA_THRESHOLD[1] else alpha
            assert float(alphas[p, m]) == pytest.approx(expected, abs=1e-12), (p, m)
            checked += expected > 0
    assert checked > 20  # the scene is seen: many Gaussians reach some of these rays


def _depth_sorted_lists(means, viewmats, C, N, tiles):
    """Every Gaussian listed in every tile of its image, nearest first (camera depth), as gsplat's
    isect_offset_encode would lay them out: (isect_offsets [..., C, th, tw], flatten_ids)."""
    batch = tuple(means.shape[:-2])
    B = math.prod(batch)
    means_b, viewmats_i = means.reshape(B, N, 3), viewmats.reshape(B * C, 4, 4)
    ids, offsets = [], []
    for image in range(B * C):
        depth = means_b[image // C] @ viewmats_i[image, 2, :3] + viewmats_i[image, 2, 3]
        order = torch.argsort(depth)
        for _ in range(tiles[0] * tiles[1]):
            offsets.append(len(ids))
            ids.extend((image * N + order).tolist())
    return (torch.tensor(offsets, dtype=torch.int32).reshape(batch + (C,) + tiles),
            torch.tensor(ids, dtype=torch.int32))


def _direct_render(means, quats, scales, colors, opacities, viewmats, Ks, W, H, backgrounds, tile_size, tiles):
    """gsplat's per-pixel loop in plain float64 Python, every Gaussian of the image nearest first (each tile
    lists all N, so a pixel's last_ids is (its tile's item) * N + position)."""
    batch = tuple(means.shape[:-2])
    N, C = means.shape[-2], viewmats.shape[-3]
    B = math.prod(batch)
    means, quats, scales = (t.reshape(B, N, -1).numpy() for t in (means, quats, scales))
    colors, opacities = colors.reshape(B * C, N, -1).numpy(), opacities.reshape(B * C, N).numpy()
    viewmats, Ks = viewmats.reshape(B * C, 4, 4).numpy(), Ks.reshape(B * C, 3, 3).numpy()
    backgrounds = backgrounds.reshape(B * C, -1).numpy()
    out = np.zeros((B * C, H, W, colors.shape[-1]))
    alphas_out = np.zeros((B * C, H, W, 1))
    last = np.zeros((B * C, H, W), dtype=np.int64)
    stops = 0  # pixels that saturated (the exclusive T <= 1e-4 stop)
    for image in range(B * C):
        b = image // C
        c2w = np.linalg.inv(viewmats[image])
        order = np.argsort(means[b] @ viewmats[image, 2, :3] + viewmats[image, 2, 3])
        for y in range(H):
            for x in range(W):
                ray = c2w[:3, :3] @ np.linalg.solve(Ks[image], np.array([x + 0.5, y + 0.5, 1.0]))
                ray /= np.linalg.norm(ray)
                T, color = 1.0, np.zeros(colors.shape[-1])
                for position, m in enumerate(order):
                    response = _max_response_along_ray(means[b, m], quats[b, m], scales[b, m], c2w[:3, 3], ray)
                    alpha = min(constants.MAX_ALPHA[1], opacities[image, m] * response)
                    if alpha < constants.ALPHA_THRESHOLD[1]:
                        continue
                    if T * (1 - alpha) <= constants.TRANSMITTANCE_THRESHOLD[1]:
                        stops += 1
                        break
                    color += colors[image, m] * alpha * T
                    T *= 1 - alpha
                    item = image * tiles[0] * tiles[1] + (y // tile_size) * tiles[1] + x // tile_size
                    last[image, y, x] = item * N + position  # position in flatten_ids
                out[image, y, x] = color + T * backgrounds[image]
                alphas_out[image, y, x, 0] = 1 - T
    dims = batch + (C,)
    return (torch.from_numpy(out).reshape(dims + (H, W, -1)), torch.from_numpy(alphas_out).reshape(dims + (H, W, 1)),
            torch.from_numpy(last).reshape(dims + (H, W)), stops)


@pytest.mark.parametrize("batch, tile_size", [((), 8), ((2,), 4)])
def test_reference_blend_equals_direct_float64_rendering(batch, tile_size):
    """The reference's tile walk, Gaussian indexing (isect_id // (C N), isect_id % N) and evaluation against a
    direct per-pixel loop over the same depth order, with batch dims, odd image sizes and backgrounds."""
    C, N, W, H = 2, 14, 13, 10
    means, quats, scales, colors, opacities, viewmats, Ks = _random_scene(3 + len(batch), B=batch, C=C, N=N)
    tiles = (-(-H // tile_size), -(-W // tile_size))
    isect_offsets, flatten_ids = _depth_sorted_lists(means, viewmats, C, N, tiles)
    backgrounds = torch.rand(batch + (C, 3), generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    colors_ref, alphas_ref, last_ref = blend_eval3d_sequential(
        means, quats, scales, colors, opacities, viewmats, Ks, W, H, tile_size, isect_offsets, flatten_ids,
        backgrounds=backgrounds)
    colors_direct, alphas_direct, last_direct, stops = _direct_render(means, quats, scales, colors, opacities, viewmats,
                                                               Ks, W, H, backgrounds, tile_size, tiles)
    assert colors_ref.shape == batch + (C, H, W, 3) and alphas_ref.shape == batch + (C, H, W, 1)
    assert torch.allclose(colors_ref, colors_direct, atol=1e-10)
    assert torch.allclose(alphas_ref, alphas_direct, atol=1e-10)
    assert torch.equal(last_ref.long(), last_direct)
    assert stops > 10 and float(alphas_ref.min()) < 0.9  # saturated pixels and open ones


def test_reference_honours_invalid_rays():
    """A pixel whose camera ray is not valid blends nothing (gsplat: done from the start): background, alpha 0."""
    C, N, W, H = 1, 10, 26, 19
    means, quats, scales, colors, opacities, viewmats, Ks = _random_scene(5, C=C, N=N)
    isect_offsets, flatten_ids = _depth_sorted_lists(means, viewmats, C, N, (1, 1))
    origins, directions = pinhole_rays(viewmats, Ks, W, H)
    valid = torch.ones(C, H, W, dtype=torch.bool)
    backgrounds = torch.full((C, 3), 0.5, dtype=torch.float64)
    arguments = (means, quats, scales, colors, opacities, viewmats, Ks, W, H, 32, isect_offsets, flatten_ids)
    _, alphas_all, _ = blend_eval3d_sequential(*arguments, backgrounds=backgrounds)
    y, x = divmod(int(torch.argmax(alphas_all.reshape(-1))), W)  # the most covered pixel
    assert float(alphas_all[0, y, x, 0]) > 0.5
    valid[0, y, x] = False
    colors_out, alphas_out, last = blend_eval3d_sequential(*arguments, backgrounds=backgrounds,
                                                           rays=(origins, directions, valid))
    assert alphas_out[0, y, x, 0] == 0 and torch.all(colors_out[0, y, x] == 0.5) and last[0, y, x] == 0
    assert torch.equal(alphas_out[valid], alphas_all[valid])  # every other pixel as before
