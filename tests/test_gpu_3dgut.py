"""GPU: the 3DGUT variant (gsplat's rasterize_to_pixels_eval3d) against gsplat's own CUDA kernel, on inputs
projected by gsplat's unscented-transform projection, for every camera model gsplat's eval3d kernel has
(pinhole with and without radial / tangential / thin-prism distortion, fisheye, FTheta with either reference
polynomial) and rolling shutter.

Contract: mode "lpt" equals gsplat (max abs diff <= 1e-6, last_ids equal); a call without last_ids (inference:
the persistent kernel's build that keeps none) renders the floats of one with them; chunked modes >= 76 dB PSNR;
gradients equal gsplat's (its backward op, fed our render_alphas and last_ids); gsplat.rasterization(...,
with_ut=True, with_eval3d=True, backend="lpt") end to end; our torch reference equals gsplat's kernel.

gsplat's own eval3d entry asserts 3 colour channels (Rasterization.cpp), so gsplat is only ever called with
3 here; other channel counts are checked channel by channel against its 3-channel output.
"""

from __future__ import annotations

import math

import pytest
import torch

import gsplat_lpt
from gsplat_lpt import LPTConfig, constants
from gsplat_lpt.hook import original
from helpers import record_persistent_launches

pytestmark = pytest.mark.gpu

FUNCTION = "rasterize_to_pixels_eval3d"
CHUNKED_MODES = [
    LPTConfig(mode="chunk", chunk_count=2),
    LPTConfig(mode="chunk", chunk_count=16),
    LPTConfig(mode="fixed", heavy_ratio=0.1, chunk_count=4, co_execute=False),
    LPTConfig(mode="auto"),
    LPTConfig(mode="auto", overhead_lambda=0.0, imbalance_beta=1.0, min_gain=0.0, heavy_item_pace=1.0, chunked_cost_floor=0.0),  # eager
]


def psnr(a: torch.Tensor, b: torch.Tensor) -> float:
    mse = float(((a - b) ** 2).mean())
    return math.inf if mse == 0 else 10 * math.log10(1.0 / mse)


def _gsplat_types():
    from gsplat.cuda._wrapper import (FThetaCameraDistortionParameters, FThetaPolynomialType, RollingShutterType,
                                      UnscentedTransformParameters)

    return FThetaCameraDistortionParameters, FThetaPolynomialType, RollingShutterType, UnscentedTransformParameters


# ------------------------------------------------------------------------------------------------------
# scenes, cameras, gsplat's projection


def random_gaussians(n, seed, batch=(), spread=0.6, cluster=0, device="cuda"):
    """Gaussians in a cone in front of cameras looking down +z (spread: tangent of its half angle, wide
    for fisheye and FTheta), one set per batch element; `cluster` extra tiny faint ones stacked in depth
    behind one spot make a heavy tile that does not saturate. [*batch, n + cluster, ...] each."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    sets = []
    for _ in range(max(1, math.prod(batch))):
        depth = torch.rand(n, generator=g) * 6.0 + 2.0
        lateral = (torch.rand(n, 2, generator=g) * 2 - 1) * spread * depth[:, None]
        means = torch.cat([lateral, depth[:, None]], -1)
        scales = torch.rand(n, 3, generator=g) * 0.12 + 0.01
        opacities = torch.rand(n, generator=g) * 0.9 + 0.05
        if cluster:
            stack = torch.stack([torch.zeros(cluster), torch.zeros(cluster), torch.linspace(3.0, 9.0, cluster)], -1)
            spot = torch.tensor([0.25, -0.15, 0.0]) + stack + torch.randn(cluster, 3, generator=g) * 0.004
            means = torch.cat([means, spot])
            scales = torch.cat([scales, torch.full((cluster, 3), 0.004)])
            opacities = torch.cat([opacities, torch.full((cluster,), 0.08)])
        quats = torch.randn(means.shape[0], 4, generator=g)
        sets.append((means, quats / quats.norm(dim=-1, keepdim=True), scales, opacities))
    count = n + cluster
    return [torch.stack([s[i] for s in sets]).reshape(*batch, count, *sets[0][i].shape[1:]).to(device)
            for i in range(4)]


def _rotation_z(angle):
    c, s = math.cos(angle), math.sin(angle)
    return torch.tensor([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


# OpenCV fisheye radial coefficients (k1, k2, k3, k4) per distortion variant, each scaled per image by
# 1 + 0.1 U(0, 1). gsplat's fisheye constructor bounds the model at max_angle, where the forward polynomial
# theta + k1 theta^3 + k2 theta^5 + k3 theta^7 + k4 theta^9 stops increasing, clamped to the image radius
# over the focal length (about 1.41 here): by Newton's iteration when k4 != 0, in closed form
# (compute_opencv_fisheye_max_angle) when k4 == 0, from a cubic's real root when k3 != 0 and a quadratic's
# root when k3 == 0. The two k4 == 0 variants peak inside that clamp (theta 1.23-1.31 rad in the cases
# below), so the closed form sets max_angle, at a normalized radius of 1.44-1.65, beyond the image corners'
# 1.40: no fold inside the image. gsplat starts each pixel's Newton iteration at max_angle times the pixel's
# radius over the half width's, past the peak outside the circle of that radius; there (and in a thin ring
# inside it) the iteration ends past max_angle or unconverged, and the pixel has no ray in either kernel:
# about 12% of each image, its corners, in a float64 model (which also puts the mean alpha near 0.2).
FISHEYE_DISTORTIONS = {
    True: (0.03, -0.008, 0.001, -0.0002),
    "k4=0": (0.2, 0.21, -0.15, 0.0),
    "k3=k4=0": (0.6, -0.3, 0.0, 0.0),
}


def make_camera(model, batch, C, width, height, seed=0, distortion=False, rolling=None, device="cuda"):
    """viewmats, Ks and the camera-model arguments of gsplat's eval3d for `C` cameras (and batch dims).
    distortion: False, True or (fisheye) a key of FISHEYE_DISTORTIONS."""
    (FThetaCameraDistortionParameters, FThetaPolynomialType, RollingShutterType,
     UnscentedTransformParameters) = _gsplat_types()
    g = torch.Generator(device="cpu").manual_seed(seed + 100)
    images = max(1, math.prod(batch)) * C
    viewmats = torch.eye(4).repeat(images, 1, 1)
    viewmats[:, 0, 3] = torch.linspace(-0.3, 0.3, images)
    viewmats[:, :3, :3] = torch.stack([_rotation_z(0.05 * i) for i in range(images)])
    if model == "pinhole":
        focal = 0.9 * max(width, height)
    else:  # equidistant-like wide angle: the image diagonal near 80 degrees off axis
        focal = 0.5 * math.hypot(width, height) / 1.4
    K = torch.tensor([[focal, 0.0, width / 2 + 0.3], [0.0, focal * 1.01, height / 2 - 0.2], [0.0, 0.0, 1.0]])
    Ks = K.repeat(images, 1, 1)
    camera = dict(camera_model=model, ut_params=UnscentedTransformParameters())
    if model == "pinhole" and distortion:
        camera["radial_coeffs"] = (torch.tensor([0.08, -0.03, 0.005, 0.02, -0.004, 0.001])
                                   * (1 + 0.1 * torch.rand(images, 6, generator=g)))
        camera["tangential_coeffs"] = torch.tensor([0.0015, -0.001]) * (1 + 0.1 * torch.rand(images, 2, generator=g))
        camera["thin_prism_coeffs"] = (torch.tensor([0.001, -0.0005, 0.0008, 0.0002])
                                       * (1 + 0.1 * torch.rand(images, 4, generator=g)))
    elif model == "fisheye" and distortion:
        camera["radial_coeffs"] = (torch.tensor(FISHEYE_DISTORTIONS[distortion])
                                   * (1 + 0.1 * torch.rand(images, 4, generator=g)))
    elif model in ("ftheta", "ftheta-forward"):
        camera["camera_model"] = "ftheta"
        if model == "ftheta":  # pixel distance to angle is the reference: evaluated directly
            camera["ftheta_coeffs"] = FThetaCameraDistortionParameters(
                reference_poly=FThetaPolynomialType.PIXELDIST_TO_ANGLE,
                pixeldist_to_angle_poly=(0.0, 1.0 / focal, 0.0, -2e-3 / focal**3, 0.0, 0.0),
                angle_to_pixeldist_poly=(0.0, focal, 0.0, 2e-3 * focal, 0.0, 0.0),
                max_angle=1.35, linear_cde=(1.0, 0.002, -0.001))
        else:  # angle to pixel distance is the reference: inverted by Newton iterations
            camera["ftheta_coeffs"] = FThetaCameraDistortionParameters(
                reference_poly=FThetaPolynomialType.ANGLE_TO_PIXELDIST,
                pixeldist_to_angle_poly=(0.0, 1.0 / focal, 0.0, 0.0, 0.0, 0.0),
                angle_to_pixeldist_poly=(0.0, focal, 0.0, -0.03 * focal, 0.0, 0.0),
                max_angle=1.2, linear_cde=(1.0, 0.0, 0.0))
    if rolling is not None:
        camera["rolling_shutter"] = getattr(RollingShutterType, rolling)
        end = viewmats.clone()
        end[:, :3, 3] += torch.tensor([0.06, -0.02, 0.08])
        end[:, :3, :3] = torch.stack([_rotation_z(0.03) @ m for m in end[:, :3, :3]])
        camera["viewmats_rs"] = end
    shaped = {}
    for key, value in camera.items():
        if isinstance(value, torch.Tensor):
            value = value.reshape(*batch, C, *value.shape[1:]).contiguous().to(device)
        shaped[key] = value
    return (viewmats.reshape(*batch, C, 4, 4).contiguous().to(device), Ks.reshape(*batch, C, 3, 3).contiguous().to(device),
            shaped)


def project(gaussians, viewmats, Ks, camera, width, height, tile_size=16, channels=3, seed=0):
    """gsplat's unscented projection and tiling: the arguments of rasterize_to_pixels_eval3d, as a dict."""
    from gsplat.cuda._wrapper import fully_fused_projection_with_ut, isect_offset_encode, isect_tiles

    means, quats, scales, opacities = gaussians
    batch, N, C = tuple(means.shape[:-2]), means.shape[-2], viewmats.shape[-3]
    projection = {k: v for k, v in camera.items() if k != "ut_params"}
    radii, means2d, depths, conics, _ = fully_fused_projection_with_ut(
        means, quats, scales, opacities, viewmats, Ks, width, height, ut_params=camera["ut_params"], **projection)
    g = torch.Generator(device="cpu").manual_seed(seed + 1)
    colors = torch.rand(*batch, C, N, channels, generator=g).cuda()
    tile_width, tile_height = math.ceil(width / tile_size), math.ceil(height / tile_size)
    _, isect_ids, flatten_ids = isect_tiles(means2d, radii, depths, tile_size, tile_width, tile_height)
    isect_offsets = isect_offset_encode(isect_ids, math.prod(batch) * C, tile_width, tile_height)
    isect_offsets = isect_offsets.reshape(*batch, C, tile_height, tile_width)
    opacities_c = opacities[..., None, :].expand(*batch, C, N).contiguous()
    return dict(means=means, quats=quats, scales=scales, colors=colors, opacities=opacities_c, viewmats=viewmats,
                Ks=Ks, image_width=width, image_height=height, tile_size=tile_size, isect_offsets=isect_offsets,
                flatten_ids=flatten_ids, **camera)


def gsplat_forward(frame, backgrounds=None, masks=None):
    """gsplat's eval3d forward kernel, through its C++ op: (colors, alphas, last_ids)."""
    from gsplat.cuda._wrapper import _make_lazy_cuda_func, _make_lazy_cuda_obj

    (FThetaCameraDistortionParameters, _, RollingShutterType, UnscentedTransformParameters) = _gsplat_types()
    ftheta = frame.get("ftheta_coeffs")
    contiguous = lambda t: None if t is None else t.contiguous()  # noqa: E731
    return _make_lazy_cuda_func("rasterize_to_pixels_from_world_3dgs_fwd")(
        frame["means"].contiguous(), frame["quats"].contiguous(), frame["scales"].contiguous(),
        frame["colors"].contiguous(), frame["opacities"].contiguous(), contiguous(backgrounds), contiguous(masks),
        frame["image_width"], frame["image_height"], frame["tile_size"], frame["viewmats"].contiguous(),
        contiguous(frame.get("viewmats_rs")), frame["Ks"].contiguous(),
        _make_lazy_cuda_obj(f"CameraModelType.{frame['camera_model'].upper()}"),
        frame.get("ut_params", UnscentedTransformParameters()).to_cpp(),
        frame.get("rolling_shutter", RollingShutterType.GLOBAL).to_cpp(), contiguous(frame.get("radial_coeffs")),
        contiguous(frame.get("tangential_coeffs")), contiguous(frame.get("thin_prism_coeffs")),
        ftheta.to_cpp() if ftheta is not None else FThetaCameraDistortionParameters.to_cpp_default(),
        frame["isect_offsets"].contiguous(), frame["flatten_ids"].contiguous())


def ours_forward(frame, config, backgrounds=None, masks=None, with_last_ids=True):
    """Our kernels' outputs including last_ids and the plan (the low-level entry of the 3DGUT front end). Without
    with_last_ids, as an inference call renders (no last_ids: the persistent kernel's build that keeps none),
    last_ids is None."""
    from gsplat_lpt.variants.gaussian3dgut import Frame3DGUT

    ours = Frame3DGUT(**frame, backgrounds=backgrounds, masks=masks)
    colors, alphas, last_ids, plan = ours.render(config, with_last_ids=with_last_ids)
    return colors, alphas, last_ids, plan


# name, camera model, distortion (make_camera's), rolling shutter, batch dims, cameras, width, height, tile size,
# cluster
CASES = [
    ("pinhole", "pinhole", False, None, (), 1, 160, 96, 16, 0),
    ("pinhole-odd-size-2cams", "pinhole", False, None, (), 2, 123, 77, 16, 0),
    ("pinhole-tile8", "pinhole", False, None, (), 1, 100, 60, 8, 0),
    # (no tile size 32: gsplat's own eval3d kernel cannot launch 1024 threads, "too many resources requested")
    ("pinhole-distorted", "pinhole", True, None, (), 2, 160, 96, 16, 0),
    ("pinhole-heavy-tile", "pinhole", False, None, (), 1, 200, 120, 16, 8000),
    ("fisheye", "fisheye", False, None, (), 1, 160, 120, 16, 0),
    ("fisheye-distorted-2cams", "fisheye", True, None, (), 2, 150, 110, 16, 0),
    # max_angle in closed form (FISHEYE_DISTORTIONS): a cubic's real root (where gsplat's kernel rounds b / c
    # on its own, kernels/blend_3dgut.cu; 4 cameras, since that rounding moves max_angle by an ulp only for
    # some coefficients), a quadratic's root
    ("fisheye-k4-zero-4cams", "fisheye", "k4=0", None, (), 4, 120, 90, 16, 0),
    ("fisheye-k3-k4-zero-2cams", "fisheye", "k3=k4=0", None, (), 2, 150, 110, 16, 0),
    ("ftheta", "ftheta", False, None, (), 1, 160, 120, 16, 0),
    ("ftheta-forward-poly", "ftheta-forward", False, None, (), 2, 140, 100, 16, 0),
    ("rolling-top-to-bottom", "pinhole", False, "ROLLING_TOP_TO_BOTTOM", (), 1, 160, 96, 16, 0),
    ("rolling-left-to-right", "pinhole", True, "ROLLING_LEFT_TO_RIGHT", (), 1, 160, 96, 16, 0),
    ("rolling-bottom-to-top", "fisheye", False, "ROLLING_BOTTOM_TO_TOP", (), 2, 150, 110, 16, 0),
    ("rolling-right-to-left", "ftheta", False, "ROLLING_RIGHT_TO_LEFT", (), 1, 160, 120, 16, 0),
    ("global-with-second-pose", "pinhole", False, "GLOBAL", (), 1, 160, 96, 16, 0),
    ("batch-dims", "pinhole", False, None, (2,), 2, 96, 64, 16, 0),
    ("batch-dims-fisheye-rolling", "fisheye", True, "ROLLING_TOP_TO_BOTTOM", (2,), 3, 96, 72, 16, 0),
]


CASE = {c[0]: c for c in CASES}


def case_frame(case, seed=0, channels=3):
    name, model, distortion, rolling, batch, C, W, H, tile_size, cluster = case
    spread = 0.6 if model == "pinhole" else 1.6
    gaussians = random_gaussians(2500, seed=seed + len(name), batch=batch, spread=spread, cluster=cluster)
    viewmats, Ks, camera = make_camera(model, batch, C, W, H, seed=seed, distortion=distortion, rolling=rolling)
    return project(gaussians, viewmats, Ks, camera, W, H, tile_size, channels, seed=seed)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("with_background", [False, True])
def test_lpt_matches_gsplat_exactly(case, seed, with_background):
    frame = case_frame(case, seed)
    images = frame["isect_offsets"].shape[:-2]
    backgrounds = torch.rand(*images, 3, device="cuda") if with_background else None
    ref_colors, ref_alphas, ref_last = gsplat_forward(frame, backgrounds)
    colors, alphas, last_ids, plan = ours_forward(frame, LPTConfig(mode="lpt"), backgrounds)
    assert float(ref_alphas.mean()) > 0.05, "the cameras see the scene"
    assert plan.report()["chunked_tiles"] == 0 and plan.report()["variant"] == "3dgut"
    assert colors.shape == ref_colors.shape and alphas.shape == ref_alphas.shape
    assert (colors - ref_colors).abs().max().item() <= 1e-6
    assert (alphas - ref_alphas).abs().max().item() <= 1e-6
    assert torch.equal(last_ids, ref_last)


@pytest.mark.parametrize("with_last_ids", [True, False], ids=["last-ids", "no-last-ids"])
def test_latency_bound_frames_take_their_own_build(with_last_ids):
    """An unchunked frame whose heaviest item outlasts the mean work per CTA ROWS_MIN_IMBALANCE times over (the plan's
    persistent_rows word) is blended by the persistent kernel's build for latency-bound frames (its walk evaluates
    two Gaussians before blending them), any other by the usual build; both builds are launched, and on either kind
    of frame the outputs are gsplat's as test_lpt_matches_gsplat_exactly bounds them (last_ids bit for bit)."""
    heavy = case_frame(CASE["pinhole-heavy-tile"])
    viewmats, Ks, camera = make_camera("pinhole", (), 1, 640, 384)
    even = project(random_gaussians(100000, seed=5), viewmats, Ks, camera, 640, 384)
    kinds = []
    for frame in (heavy, even):
        ref_colors, ref_alphas, ref_last = gsplat_forward(frame)
        colors, alphas, last_ids, plan = ours_forward(frame, LPTConfig(mode="lpt"), with_last_ids=with_last_ids)
        assert plan.rasterizer._latency_bound_launches, "3DGUT has builds for latency-bound frames"
        schedule = plan.workspace.schedule.cpu()
        assert schedule[constants.SCHEDULE["chunked_tiles"]] == 0
        kinds.append(bool(schedule[constants.SCHEDULE["persistent_rows"]]))
        assert (colors - ref_colors).abs().max().item() <= 1e-6
        assert (alphas - ref_alphas).abs().max().item() <= 1e-6
        if with_last_ids:
            assert torch.equal(last_ids, ref_last)
    assert kinds == [True, False]


def test_pixels_without_a_valid_ray_blend_nothing():
    """A fisheye whose distortion folds over (k1 < 0: the forward polynomial peaks at 1.15 rad, 55 px from
    the centre) has no ray at the image corners: both kernels blend nothing there (background, alpha 0)."""
    means, quats, scales, opacities = random_gaussians(2500, seed=8, spread=1.6)
    viewmats, Ks, camera = make_camera("fisheye", (), 1, 160, 120)
    camera["radial_coeffs"] = torch.tensor([[-0.25, 0.0, 0.0, 0.0]], device="cuda")
    frame = project((means, quats, scales, opacities), viewmats, Ks, camera, 160, 120)
    backgrounds = torch.full((1, 3), 0.5, device="cuda")
    ref_colors, ref_alphas, ref_last = gsplat_forward(frame, backgrounds)
    colors, alphas, last_ids, _ = ours_forward(frame, LPTConfig(mode="lpt"), backgrounds)
    assert float(ref_alphas[0, :4, :4].max()) == 0.0 and float(ref_alphas[0, 50:70, 70:90].max()) > 0.0
    assert torch.all(colors[0, :4, :4] == 0.5) and torch.all(last_ids[0, :4, :4] == 0)
    assert (colors - ref_colors).abs().max().item() <= 1e-6
    assert torch.equal(last_ids, ref_last)


CHUNK_CASES = [c for c in CASES if c[0] in ("pinhole-heavy-tile", "fisheye-distorted-2cams", "rolling-left-to-right",
                                            "ftheta", "batch-dims-fisheye-rolling")]


@pytest.mark.parametrize("case", CHUNK_CASES, ids=[c[0] for c in CHUNK_CASES])
@pytest.mark.parametrize("config", CHUNKED_MODES, ids=lambda c: f"{c.mode}-k{c.chunk_count}-rho{c.heavy_ratio}")
def test_chunked_modes_psnr(case, config):
    frame = case_frame(case, seed=3)
    images = frame["isect_offsets"].shape[:-2]
    backgrounds = torch.rand(*images, 3, device="cuda")
    ref_colors, ref_alphas, _ = gsplat_forward(frame, backgrounds)
    for attempt in range(3):  # later frames: grown partial buffers, saturation feedback from the frame before
        colors, alphas, _, plan = ours_forward(frame, config, backgrounds)
        if config.mode in ("chunk", "fixed"):
            assert plan.report()["chunked_tiles"] > 0
        assert psnr(colors, ref_colors) >= 76.0, attempt
        assert psnr(alphas, ref_alphas) >= 76.0, attempt
        assert (colors - ref_colors).abs().max().item() <= 0.1  # one Gaussian at T <= 1e-4 (tests/test_reference.py)


@pytest.mark.parametrize("case", ["pinhole-heavy-tile", "fisheye-distorted-2cams"])
def test_a_prediction_that_falls_short_is_walked_on_by_the_composite(case):
    """Every item predicted one Gaussian deep (planted as the previous frame's depth): the chunks cover almost
    nothing and the compositing CTA walks the rest from the composed T; the image stays within the floors."""
    frame = case_frame(CASE[case], seed=3)
    ref_colors, ref_alphas, _ = gsplat_forward(frame)
    config = LPTConfig(mode="fixed", heavy_ratio=0.2, chunk_count=8)
    *_, plan = ours_forward(frame, config)  # the frame's history: the next call reads the planted depths
    plan.workspace.item_depth[: frame["isect_offsets"].numel()] = 1
    colors, alphas, _, plan = ours_forward(frame, config)
    report = plan.report()
    assert report["saturation_feedback"] and report["chunked_tiles"] > 0
    assert psnr(colors, ref_colors) >= 76.0
    assert psnr(alphas, ref_alphas) >= 76.0
    assert (colors - ref_colors).abs().max().item() <= 0.1


def test_eager_auto_policy_chunks_the_heavy_tile():
    frame = case_frame(CASE["pinhole-heavy-tile"])
    _, _, _, plan = ours_forward(frame, CHUNKED_MODES[-1])
    report = plan.report()
    assert report["chunked_tiles"] >= 1 and report["chunk_count"] >= 2


@pytest.mark.parametrize("case", ["pinhole-heavy-tile", "fisheye-distorted-2cams"])
@pytest.mark.parametrize("mode", ["lpt", "fixed"])
def test_kernels_without_last_ids_render_the_same_floats(case, mode, monkeypatch):
    """A call that needs no last_ids runs the persistent kernel's build that keeps none (kept on this GPU: as many
    CTAs resident), unchunked and beside the chunk kernel, whose composite leaves the null last_ids alone: every
    colour and alpha is the one the build with last_ids renders, which in mode "lpt" is gsplat's. The public
    function without gradients (inference) runs that build too."""
    from gsplat_lpt.runtime import rasterizer_for
    from gsplat_lpt.variants.gaussian3dgut import VARIANT, rasterize_to_pixels_eval3d

    frame = case_frame(CASE[case], seed=3)
    generator = torch.Generator(device="cuda").manual_seed(5)
    backgrounds = torch.rand(*frame["isect_offsets"].shape[:-2], 3, device="cuda", generator=generator)
    config = LPTConfig(mode=mode, heavy_ratio=0.1, chunk_count=4, saturation_feedback=False)
    launched = record_persistent_launches([rasterizer_for(VARIANT, 3, frame["tile_size"], frame["means"].device)],
                                          monkeypatch)
    colors, alphas, last_ids, plan = ours_forward(frame, config, backgrounds)
    plan.snapshot()  # (its report, read after later frames)
    assert last_ids is not None and launched == [(False, True, "last_ids")]
    lean_colors, lean_alphas, no_ids, lean_plan = ours_forward(frame, config, backgrounds, with_last_ids=False)
    lean_plan.snapshot()
    assert no_ids is None and launched[1:] == [(False, False, "no last_ids")]
    assert torch.equal(lean_colors, colors) and torch.equal(lean_alphas, alphas)
    for report in (plan.report(), lean_plan.report()):
        assert (report["chunked_tiles"] > 0) == (mode == "fixed") and report["variant"] == "3dgut"
    public = rasterize_to_pixels_eval3d(**frame, backgrounds=backgrounds, config=config)
    assert launched[2:] == [(False, False, "no last_ids")]
    assert torch.equal(public[0], colors) and torch.equal(public[1], alphas)
    if mode == "lpt":
        ref_colors, ref_alphas, ref_last = gsplat_forward(frame, backgrounds)
        assert (lean_colors - ref_colors).abs().max().item() <= 1e-6
        assert (lean_alphas - ref_alphas).abs().max().item() <= 1e-6
        assert torch.equal(last_ids, ref_last)


def test_masks_render_background_on_masked_tiles():
    frame = case_frame(CASE["fisheye-distorted-2cams"])
    H, W = frame["image_height"], frame["image_width"]
    masks = torch.rand(frame["isect_offsets"].shape, device="cuda") > 0.3
    backgrounds = torch.rand(2, 3, device="cuda")
    ref_colors, ref_alphas, ref_last = gsplat_forward(frame, backgrounds, masks)
    pixel_mask = masks.repeat_interleave(16, -2).repeat_interleave(16, -1)[:, :H, :W]
    for config in (LPTConfig(mode="lpt"), LPTConfig(mode="chunk", chunk_count=4)):
        colors, alphas, last_ids, _ = ours_forward(frame, config, backgrounds, masks)
        assert psnr(colors, ref_colors) >= 76.0
        if config.mode == "lpt":
            assert (colors - ref_colors).abs().max().item() <= 1e-6
            assert (alphas - ref_alphas)[pixel_mask].abs().max().item() <= 1e-6  # gsplat leaves masked alphas unset
            assert torch.equal(last_ids[pixel_mask], ref_last[pixel_mask])


def test_zero_intersections():
    from gsplat_lpt.variants.gaussian3dgut import rasterize_to_pixels_eval3d

    gaussians = random_gaussians(500, seed=5)
    gaussians[0][..., 2] = -5.0  # everything behind the camera
    viewmats, Ks, camera = make_camera("pinhole", (), 2, 64, 48)
    frame = project(gaussians, viewmats, Ks, camera, 64, 48)
    assert frame["flatten_ids"].numel() == 0
    backgrounds = torch.rand(2, 3, device="cuda")
    for mode in ("lpt", "auto", "chunk"):
        colors, alphas = rasterize_to_pixels_eval3d(**frame, backgrounds=backgrounds, config=LPTConfig(mode=mode))
        assert torch.allclose(colors, backgrounds[:, None, None, :].expand_as(colors))
        assert torch.all(alphas == 0)


@pytest.mark.parametrize("channels", [1, 2, 4, 6, 32])
def test_channel_counts_channel_by_channel(channels):
    """Any channel count (padded as gsplat pads): channel j of a frame whose colour j is colour j % 3 of
    a 3-channel frame equals gsplat's channel j % 3 of that frame."""
    from gsplat_lpt.variants.gaussian3dgut import rasterize_to_pixels_eval3d

    frame = case_frame(CASE["pinhole-distorted"])  # 2 cameras
    backgrounds = torch.rand(2, 3, generator=torch.Generator().manual_seed(channels)).cuda()
    ref_colors, ref_alphas, _ = gsplat_forward(frame, backgrounds)
    pick = torch.arange(channels, device="cuda") % 3
    wide = {**frame, "colors": frame["colors"][..., pick].contiguous()}
    colors, alphas = rasterize_to_pixels_eval3d(**wide, backgrounds=backgrounds[..., pick].contiguous(),
                                                config=LPTConfig(mode="lpt"))
    assert colors.shape[-1] == channels
    assert (colors - ref_colors[..., pick]).abs().max().item() <= 1e-6
    assert (alphas - ref_alphas).abs().max().item() <= 1e-6


def test_public_function_with_batch_dims_reports_the_schedule():
    from gsplat_lpt.variants.gaussian3dgut import rasterize_to_pixels_eval3d

    frame = case_frame(CASE["batch-dims"])  # batch dims (2,), 2 cameras
    ref_colors, ref_alphas = original(FUNCTION)(**frame)
    colors, alphas, stats = rasterize_to_pixels_eval3d(**frame, config=LPTConfig(mode="lpt"), return_stats=True)
    assert colors.shape == ref_colors.shape == (2, 2, 64, 96, 3)
    assert (colors - ref_colors).abs().max().item() <= 1e-6
    assert (alphas - ref_alphas).abs().max().item() <= 1e-6
    assert stats["mode"] == "lpt" and stats["variant"] == "3dgut" and stats["concurrent_ctas"] > 0


def test_packed_is_refused_like_gsplat():
    from gsplat_lpt.variants.gaussian3dgut import rasterize_to_pixels_eval3d

    frame = case_frame(CASE["pinhole"])
    packed = {**frame, "colors": frame["colors"][0], "opacities": frame["opacities"][0]}
    for function in (original(FUNCTION), rasterize_to_pixels_eval3d):
        with pytest.raises(NotImplementedError, match="packed"):
            function(**packed)


@pytest.mark.parametrize("mode", ["lpt", "auto", "chunk"])
@pytest.mark.parametrize("case", ["pinhole-heavy-tile", "fisheye-distorted-2cams", "rolling-left-to-right",
                                  "batch-dims-fisheye-rolling"])
def test_gradients_equal_gsplat(mode, case):
    """Same forward outputs and gsplat's own backward op: gradients equal up to the order of its atomic adds,
    which gsplat's backward shows against itself (run twice: on a tile of 8,000 stacked Gaussians the
    per-Gaussian sums cancel, and their last bits follow the order of the adds)."""
    from gsplat_lpt.variants.gaussian3dgut import rasterize_to_pixels_eval3d

    base = case_frame(CASE[case], seed=17)
    images = base["isect_offsets"].shape[:-2]
    grads = []
    for backend in ("cuda", "cuda", "lpt"):
        leaves = {k: base[k].detach().clone().requires_grad_(True)
                  for k in ("means", "quats", "scales", "colors", "opacities")}
        backgrounds = torch.full((*images, 3), 0.25, device="cuda", requires_grad=True)
        frame = {**base, **leaves}
        if backend == "cuda":
            colors, alphas = original(FUNCTION)(**frame, backgrounds=backgrounds)
        else:
            colors, alphas, stats = rasterize_to_pixels_eval3d(**frame, backgrounds=backgrounds,
                                                               config=LPTConfig(mode=mode), return_stats=True)
            assert stats["chunked_tiles"] == 0
            if mode != "lpt":
                assert "autograd" in stats["chunking_disabled_reason"]
        weights = torch.linspace(0.1, 1.0, colors.numel(), device="cuda").reshape(colors.shape)
        ((colors * weights).sum() + (alphas ** 2).sum()).backward()
        grads.append({**{k: v.grad for k, v in leaves.items()}, "backgrounds": backgrounds.grad})
    reference, again, ours = grads
    for key in reference:
        assert reference[key] is not None and ours[key] is not None, key
        assert float(reference[key].abs().max()) > 0, key
        spread = float((again[key] - reference[key]).abs().max())  # gsplat against itself
        difference = (ours[key] - reference[key]).abs()
        allowed = 1e-4 * reference[key].abs() + 1e-6 + 2 * spread
        assert bool((difference <= allowed).all()), (
            f"{key}: differs by up to {float(difference.max()):.3g} (gsplat against itself: {spread:.3g})")


def test_reference_matches_gsplat_kernel_on_gpu():
    """Closes the oracle loop for pinhole cameras: our torch reference (gsplat_lpt.reference_3dgut, checked
    on the CPU against a direct float64 computation) equals gsplat's CUDA kernel up to float rounding
    (exp vs __expf, fast-math division can move a Gaussian across the 1/255 cut at a few pixels)."""
    from gsplat_lpt.reference_3dgut import blend_eval3d_sequential

    case = ("reference", "pinhole", False, None, (2,), 2, 64, 48, 16, 300)
    frame = case_frame(case, seed=21)
    backgrounds = torch.rand(2, 2, 3, device="cuda")
    ref_colors, ref_alphas, ref_last = gsplat_forward(frame, backgrounds)
    colors, alphas, last_ids = blend_eval3d_sequential(
        frame["means"], frame["quats"], frame["scales"], frame["colors"], frame["opacities"], frame["viewmats"],
        frame["Ks"], 64, 48, 16, frame["isect_offsets"], frame["flatten_ids"], backgrounds=backgrounds)
    close = ((colors - ref_colors).abs().amax(-1) <= 1e-4) & ((alphas - ref_alphas).abs()[..., 0] <= 1e-4)
    assert close.float().mean().item() > 0.99
    assert (colors - ref_colors).abs().max().item() < 0.02
    assert (last_ids == ref_last).float().mean().item() > 0.99
    assert float(ref_alphas.mean()) > 0.05


# ------------------------------------------------------------------------------------------------------
# gsplat.rasterization(..., with_ut=True, with_eval3d=True, backend="lpt")


def _rasterization_inputs(model, rolling=None, seed=0, C=2, W=160, H=120):
    spread = 0.6 if model == "pinhole" else 1.6
    means, quats, scales, opacities = random_gaussians(3000, seed=seed, spread=spread)
    viewmats, Ks, camera = make_camera(model, (), C, W, H, seed=seed, distortion=True, rolling=rolling)
    colors = torch.rand(means.shape[0], 3, generator=torch.Generator().manual_seed(seed)).cuda()
    camera.pop("ut_params")
    return (means, quats, scales, opacities, colors, viewmats, Ks, W, H), camera


@pytest.mark.parametrize("model, rolling", [("pinhole", None), ("fisheye", "ROLLING_TOP_TO_BOTTOM"),
                                            ("ftheta", None), ("pinhole", "ROLLING_LEFT_TO_RIGHT")])
def test_rasterization_end_to_end(model, rolling):
    import gsplat

    args, camera = _rasterization_inputs(model, rolling)
    kwargs = dict(packed=False, with_ut=True, with_eval3d=True, backgrounds=torch.rand(2, 3, device="cuda"), **camera)
    ref_colors, ref_alphas, _ = gsplat.rasterization(*args, backend="cuda", **kwargs)
    assert float(ref_alphas.mean()) > 0.05
    colors, alphas, meta = gsplat.rasterization(*args, backend="lpt", lpt_config=LPTConfig(mode="lpt"), **kwargs)
    assert "fallback" not in meta["lpt"] and meta["lpt"]["variant"] == "3dgut" and meta["lpt"]["mode"] == "lpt"
    assert (colors - ref_colors).abs().max().item() <= 1e-6
    assert (alphas - ref_alphas).abs().max().item() <= 1e-6
    colors_auto, alphas_auto, meta = gsplat.rasterization(*args, backend="lpt", **kwargs)
    assert meta["lpt"]["variant"] == "3dgut"
    assert psnr(colors_auto, ref_colors) >= 76.0 and psnr(alphas_auto, ref_alphas) >= 76.0
    with gsplat_lpt.use_backend("lpt", LPTConfig(mode="chunk", chunk_count=8)):  # code that cannot pass the flag
        colors_chunk, _, meta = gsplat.rasterization(*args, **kwargs)
    assert meta["lpt"]["chunked_tiles"] > 0 and psnr(colors_chunk, ref_colors) >= 76.0


def test_rasterization_refuses_packed_with_ut_like_gsplat():
    import gsplat

    args, camera = _rasterization_inputs("pinhole")
    for backend in ("cuda", "lpt"):
        with pytest.raises(AssertionError, match="Packed mode is not supported with UT"):
            gsplat.rasterization(*args, packed=True, with_ut=True, with_eval3d=True, backend=backend, **camera)


@pytest.mark.parametrize("model", ["pinhole", "fisheye"])
def test_training_steps_give_gsplats_losses(model):
    """A few Adam steps of a 3DGUT fit through gsplat.rasterization: the losses with backend="lpt" are
    gsplat's (the same forward floats and gsplat's backward; atomic-add order may differ in the last bits)."""
    import gsplat

    (means, quats, scales, opacities, colors, viewmats, Ks, W, H), camera = _rasterization_inputs(model, seed=4)
    with torch.no_grad():
        target, _, _ = gsplat.rasterization(means, quats, scales, opacities, colors, viewmats, Ks, W, H, packed=False,
                                            with_ut=True, with_eval3d=True, backend="cuda", **camera)
    g = torch.Generator().manual_seed(5)
    start = {"means": means + 0.05 * torch.randn(means.shape, generator=g).cuda(), "quats": quats,
             "log_scales": torch.log(scales) + 0.1, "logit_opacities": torch.logit(opacities.clamp(0.02, 0.98)),
             "colors": torch.rand(colors.shape, generator=g).cuda()}
    losses = {}
    for backend in ("cuda", "lpt"):
        params = {k: v.detach().clone().requires_grad_(True) for k, v in start.items()}
        optimizer = torch.optim.Adam(params.values(), lr=1e-2)
        losses[backend] = []
        for _ in range(5):
            render, _, _ = gsplat.rasterization(
                params["means"], params["quats"], torch.exp(params["log_scales"]),
                torch.sigmoid(params["logit_opacities"]), params["colors"], viewmats, Ks, W, H, packed=False,
                with_ut=True, with_eval3d=True, backend=backend, **camera)
            loss = (render - target).abs().mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses[backend].append(loss.item())
    assert losses["cuda"][-1] < losses["cuda"][0]  # it trains
    for step, (ref, ours) in enumerate(zip(losses["cuda"], losses["lpt"])):
        assert ours == pytest.approx(ref, rel=1e-4, abs=1e-7), step
