"""tools/frame.py on the CPU: which gsplat function each variant's blend inputs, projection and render call
reach, with recording stand-ins (gsplat's PyTorch implementation where it has one, `torch_projection` in
tests/conftest.py; never its CUDA build)."""

from __future__ import annotations

import pytest
import torch

import gsplat

from gsplat_lpt import LPTConfig, hook
from gsplat_lpt.tools.frame import (
    VARIANT_NAMES,
    VARIANT_SPECS,
    Blend2DGS,
    Blend3DGUT,
    BlendInputs,
    blend_inputs_from_meta,
    check_variant,
    colors_alphas_meta,
    project_variant_frame,
    render_frame,
)
from helpers import cameras, random_gaussians

WIDTH, HEIGHT = 48, 32


def test_every_variant_names_gsplat_functions_that_exist_and_our_dispatch():
    import gsplat.rendering as rendering

    from gsplat_lpt.variants import VARIANTS

    assert tuple(VARIANT_SPECS) == VARIANT_NAMES == ("3dgs", "2dgs", "3dgut")
    for spec in VARIANT_SPECS.values():
        assert callable(hook.original(spec.blend_function)) and hasattr(rendering, spec.blend_function)
        assert callable(getattr(gsplat, spec.render_function))
        # backend="lpt" routes this function to our variant record (gsplat_lpt/hook.py)
        assert spec.blend_function in hook._DISPATCHED and VARIANTS[spec.blend_function].gsplat_function == \
            spec.blend_function
    assert dict(VARIANT_SPECS["3dgut"].render_options) == {"with_ut": True, "with_eval3d": True}
    assert VARIANT_SPECS["3dgut"].render_call == "gsplat.rasterization(..., with_ut=True, with_eval3d=True)"
    assert VARIANT_SPECS["2dgs"].render_call == "gsplat.rasterization_2dgs(...)"


def test_depth_channel_is_left_out_of_the_compared_image():
    outputs = (torch.arange(8.0).reshape(1, 2, 1, 4), torch.zeros(1, 2, 1, 1))
    assert VARIANT_SPECS["2dgs"].image(outputs).shape[-1] == 3
    assert VARIANT_SPECS["3dgs"].image(outputs).shape[-1] == 4 and VARIANT_SPECS["3dgut"].image(outputs) is outputs[0]


@pytest.mark.parametrize(
    "variant,camera_model,camera,message",
    [
        ("4dgs", "pinhole", None, "unknown variant '4dgs'; choose one of 3dgs, 2dgs, 3dgut"),
        ("3dgs", "ortho", None, "unknown camera model 'ortho'"),
        ("2dgs", "fisheye", None, "not available for 2dgs: gsplat's 2DGS projection (rasterization_2dgs) has only "
                                  "pinhole cameras; 3dgs and 3dgut have fisheye"),
        ("3dgs", "pinhole", {"viewmats_rs": None}, "viewmats_rs: distortion and rolling shutter need the 3dgut"),
        ("2dgs", "pinhole", {"radial_coeffs": None}, "need the 3dgut variant"),
    ],
)
def test_unsupported_combinations_say_what_to_use(variant, camera_model, camera, message):
    with pytest.raises(ValueError) as error:
        check_variant(variant, camera_model, camera)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_supported_combinations():
    for variant in VARIANT_NAMES:
        assert check_variant(variant).name == variant
    assert check_variant("3dgs", "fisheye").title == "3DGS"
    assert check_variant("3dgut", "fisheye", {"radial_coeffs": None}).title == "3DGUT"


# ------------------------------------------------------------------------------------------ blend dispatch


def record(calls, name, outputs):
    def stand_in(*args, **kwargs):
        calls.append((name, args, kwargs))
        return outputs
    return stand_in


def blend_inputs(variant: str):
    t = torch.zeros
    common = dict(width=WIDTH, height=HEIGHT, tile_size=16, isect_offsets=t(1, 2, 3, dtype=torch.int32),
                  flatten_ids=t(0, dtype=torch.int32))
    if variant == "2dgs":
        return Blend2DGS(t(1, 5, 2), t(1, 5, 3, 3), t(1, 5, 4), t(1, 5), t(1, 5, 3), t(1, 5, 2), **common)
    if variant == "3dgut":
        return Blend3DGUT(t(5, 3), t(5, 4), t(5, 3), t(1, 5, 3), t(1, 5), t(1, 4, 4), t(1, 3, 3), **common,
                          camera={"camera_model": "fisheye"})
    return BlendInputs(t(1, 5, 2), t(1, 5, 3), t(1, 5, 3), t(1, 5), **common)


OURS = {"3dgs": ("gsplat_lpt.variants.gaussian3d", "rasterize_to_pixels"),
        "2dgs": ("gsplat_lpt.variants.surfel2d", "rasterize_to_pixels_2dgs"),
        "3dgut": ("gsplat_lpt.variants.gaussian3dgut", "rasterize_to_pixels_eval3d")}


@pytest.mark.parametrize("variant", VARIANT_NAMES)
def test_vanilla_is_gsplats_kernel_and_modes_are_ours(variant, monkeypatch):
    import importlib

    calls = []
    monkeypatch.setattr(hook, "original", lambda name: record(calls, f"gsplat.{name}", ("gsplat",)))
    module, function = OURS[variant]
    monkeypatch.setattr(importlib.import_module(module), function, record(calls, f"ours.{function}", ("ours",)))
    inputs = blend_inputs(variant)
    assert inputs.blend("vanilla") == ("gsplat",)
    assert inputs.blend("chunk", LPTConfig(chunk_count=4)) == ("ours",)
    inputs.blend_with_stats("fixed", LPTConfig(heavy_ratio=0.05))
    (gsplat_call, chunk_call, fixed_call) = calls
    assert gsplat_call[0] == f"gsplat.{VARIANT_SPECS[variant].blend_function}" and "config" not in gsplat_call[2]
    assert chunk_call[0] == fixed_call[0] == f"ours.{function}"
    assert (chunk_call[2]["config"].mode, chunk_call[2]["config"].chunk_count) == ("chunk", 4)
    assert "return_stats" not in chunk_call[2] and fixed_call[2]["return_stats"] is True
    assert (fixed_call[2]["config"].mode, fixed_call[2]["config"].heavy_ratio) == ("fixed", 0.05)
    if variant != "3dgs":  # gsplat's keyword names, so both functions read the same arguments
        assert gsplat_call[2]["image_width"] == WIDTH and gsplat_call[2]["image_height"] == HEIGHT
    if variant == "3dgut":
        assert gsplat_call[2]["camera_model"] == "fisheye" and "means" in gsplat_call[2]
    if variant == "2dgs":
        assert gsplat_call[2]["colors"].shape[-1] == 4 and "densify" in gsplat_call[2]


# --------------------------------------------------------------------------------------------- projection


def small_frame(sh_degree=None):
    means, quats, scales, opacities = random_gaussians(40, seed=3, device="cpu")
    colors = torch.rand(40, 16, 3) if sh_degree is not None else torch.rand(40, 3)
    viewmats, Ks = cameras(2, WIDTH, HEIGHT, device="cpu")
    return means, quats, scales, opacities, colors, viewmats, Ks, WIDTH, HEIGHT


@pytest.mark.parametrize("variant,projection,kind", [
    ("3dgs", "fully_fused_projection", BlendInputs), ("2dgs", "fully_fused_projection_2dgs", Blend2DGS),
    ("3dgut", "fully_fused_projection_with_ut", Blend3DGUT)])
def test_each_variant_is_projected_by_its_gsplat_projection(variant, projection, kind, torch_projection):
    inputs = project_variant_frame(variant, *small_frame())
    assert [call[0] for call in torch_projection] == [projection] and isinstance(inputs, kind)
    assert inputs.isect_offsets.shape == (2, 2, 3) and inputs.flatten_ids.numel() > 0
    assert inputs.opacities.shape == (2, 40) and inputs.opacities.is_contiguous()
    if variant == "2dgs":  # RGB + depth, as rasterization_2dgs(render_mode="RGB+D") blends it
        assert inputs.colors.shape == (2, 40, 4) and inputs.normals.shape == (2, 40, 3)
        assert inputs.ray_transforms.shape == (2, 40, 3, 3) and not inputs.densify.any()
    else:
        assert inputs.colors.shape == (2, 40, 3)
    if variant == "3dgut":
        assert inputs.camera == {"camera_model": "pinhole"} and inputs.means.shape == (40, 3)


def test_fisheye_and_sh_reach_the_projection(torch_projection):
    project_variant_frame("3dgut", *small_frame(sh_degree=3), sh_degree=3, camera_model="fisheye",
                          camera={"radial_coeffs": torch.zeros(2, 4)})
    assert torch_projection == [("fully_fused_projection_with_ut", "fisheye", ("radial_coeffs",)),
                                ("spherical_harmonics", 3)]
    torch_projection.clear()
    inputs = project_variant_frame("3dgs", *small_frame(), camera_model="fisheye")
    assert torch_projection == [("fully_fused_projection", "fisheye")] and inputs.colors.shape == (2, 40, 3)
    with pytest.raises(ValueError, match="not available for 2dgs"):
        project_variant_frame("2dgs", *small_frame(), camera_model="fisheye")


# ------------------------------------------------------------------------------------------- render calls


@pytest.mark.parametrize("variant", VARIANT_NAMES)
@pytest.mark.parametrize("backend", ["cuda", "lpt"])
def test_render_frame_calls_the_variants_render_function(variant, backend, monkeypatch):
    calls = []
    for name in ("rasterization", "rasterization_2dgs"):
        monkeypatch.setattr(gsplat, name, record(calls, name, ("colors", "alphas", {"meta": name})))
    config = LPTConfig(mode="chunk")
    camera_model = "pinhole" if variant == "2dgs" else "fisheye"
    outputs = render_frame(variant, *small_frame(), backend=backend, config=config, camera_model=camera_model,
                           sh_degree=None, render_mode="RGB+D")
    ((name, args, kwargs),) = calls
    assert name == VARIANT_SPECS[variant].render_function and len(args) == 9
    assert kwargs["backend"] == backend and kwargs["render_mode"] == "RGB+D" and kwargs["sh_degree"] is None
    assert kwargs.get("lpt_config") is (config if backend == "lpt" else None)
    assert kwargs.get("with_ut", False) is kwargs.get("with_eval3d", False) is (variant == "3dgut")
    assert kwargs.get("camera_model") == (None if variant == "2dgs" else "fisheye")
    assert colors_alphas_meta(outputs) == ("colors", "alphas", {"meta": name})


def test_colors_alphas_meta_of_2dgs_outputs():
    outputs = ("colors", "alphas", "normals", "normals_from_depth", "distort", "median", {"meta": 1})
    assert colors_alphas_meta(outputs) == ("colors", "alphas", {"meta": 1})


# ------------------------------------------------------------------------------------ blend inputs from meta


def fake_meta(C=2, N=5):
    t = torch.rand
    return {"means2d": t(C, N, 2), "conics": t(C, N, 3), "ray_transforms": t(C, N, 3, 3), "normals": t(C, N, 3),
            "opacities": t(N)[None].expand(C, N), "depths": t(C, N), "width": WIDTH, "height": HEIGHT,
            "tile_size": 16, "isect_offsets": torch.zeros(C, 2, 3, dtype=torch.int32),
            "flatten_ids": torch.zeros(0, dtype=torch.int32)}


def test_blend_inputs_from_meta_of_each_variant():
    meta, rgb = fake_meta(), torch.rand(2, 5, 3)
    plain = blend_inputs_from_meta("3dgs", meta, rgb)
    assert isinstance(plain, BlendInputs) and torch.equal(plain.colors, rgb) and plain.opacities.is_contiguous()
    with_depth = blend_inputs_from_meta("3dgs", meta, rgb, render_mode="RGB+ED")
    assert torch.equal(with_depth.colors[..., 3], meta["depths"]) and with_depth.conics is not None
    surfels = blend_inputs_from_meta("2dgs", meta, rgb, render_mode="RGB+ED")
    assert isinstance(surfels, Blend2DGS) and surfels.colors.shape == (2, 5, 4)
    assert torch.equal(surfels.ray_transforms, meta["ray_transforms"]) and not surfels.densify.requires_grad
    gaussians = dict(means=torch.rand(5, 3), quats=torch.rand(5, 4), scales=torch.rand(5, 3),
                     viewmats=torch.eye(4).repeat(2, 1, 1), Ks=torch.eye(3).repeat(2, 1, 1))
    ut = blend_inputs_from_meta("3dgut", meta, rgb, render_mode="RGB+D", camera_model="fisheye", **gaussians)
    assert isinstance(ut, Blend3DGUT) and ut.camera == {"camera_model": "fisheye"} and ut.means is gaussians["means"]
    with pytest.raises(ValueError, match="3dgut blend inputs need means"):
        blend_inputs_from_meta("3dgut", meta, rgb)
    with pytest.raises(ValueError, match="render_mode 'D'"):
        blend_inputs_from_meta("3dgs", meta, rgb, render_mode="D")
