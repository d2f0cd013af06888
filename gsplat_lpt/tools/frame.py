"""One frame's inputs to the alpha-blending stage of each Gaussian variant, prepared with gsplat's own
projection and tiling, and the whole gsplat render call of each variant.

| variant | blending stage (gsplat's, and ours with `config=`) | whole render call |
| --- | --- | --- |
| 3dgs | `rasterize_to_pixels` | `gsplat.rasterization` |
| 2dgs | `rasterize_to_pixels_2dgs` | `gsplat.rasterization_2dgs` |
| 3dgut | `rasterize_to_pixels_eval3d` | `gsplat.rasterization(..., with_ut=True, with_eval3d=True)` |

Benchmarks and examples use this to time the blending stage alone (the stage we replace) next to the
end-to-end call: `project_variant_frame` gives a frame's blend inputs (`blend("vanilla")` is gsplat's
kernel, `blend(mode, config)` ours), `render_frame` the render call with backend "cuda" or "lpt", and
`blend_inputs_from_meta` the blend inputs of a render call that already ran (from its `meta`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

import torch
from torch import Tensor

from ..config import LPTConfig

VARIANT_NAMES: Tuple[str, ...] = ("3dgs", "2dgs", "3dgut")
CAMERA_MODELS: Tuple[str, ...] = ("pinhole", "fisheye")  # fisheye: OpenCV fisheye, no distortion (equidistant)
DEPTH_RENDER_MODES = ("RGB+D", "RGB+ED")


@dataclass(frozen=True)
class VariantSpec:
    """What a benchmark needs to know of one variant: gsplat's functions and the cameras it can take."""

    name: str  # "3dgs", "2dgs", "3dgut"
    title: str  # "3DGS", ...
    blend_function: str  # the gsplat.rendering global our backend replaces
    render_function: str  # gsplat's end-to-end call (an attribute of `gsplat`)
    render_options: Tuple[Tuple[str, Any], ...]  # keyword arguments that make that call this variant
    camera_models: Tuple[str, ...]
    depth_channel: bool  # its blend inputs carry depth as the last colour channel (the kernel reads it)

    @property
    def render_call(self) -> str:
        options = "".join(f", {key}={value!r}" for key, value in self.render_options)
        return f"gsplat.{self.render_function}(...{options})"

    def image(self, outputs) -> Tensor:
        """The colour channels of a blend call's outputs that PSNR compares (depth, in metres, left out)."""
        colors = outputs[0]
        return colors[..., :-1] if self.depth_channel else colors


VARIANT_SPECS: Dict[str, VariantSpec] = {
    "3dgs": VariantSpec("3dgs", "3DGS", "rasterize_to_pixels", "rasterization", (), CAMERA_MODELS, False),
    "2dgs": VariantSpec("2dgs", "2DGS", "rasterize_to_pixels_2dgs", "rasterization_2dgs", (), ("pinhole",), True),
    "3dgut": VariantSpec("3dgut", "3DGUT", "rasterize_to_pixels_eval3d", "rasterization",
                         (("with_ut", True), ("with_eval3d", True)), CAMERA_MODELS, False),
}


def check_variant(variant: str, camera_model: str = "pinhole", camera: Optional[Mapping[str, Any]] = None
                  ) -> VariantSpec:
    """The variant's record; ValueError (one line, what to use instead) for a combination it cannot render."""
    spec = VARIANT_SPECS.get(variant)
    if spec is None:
        raise ValueError(f"unknown variant {variant!r}; choose one of {', '.join(VARIANT_NAMES)}")
    if camera_model not in CAMERA_MODELS:
        raise ValueError(f"unknown camera model {camera_model!r}; choose one of {', '.join(CAMERA_MODELS)}")
    if camera_model not in spec.camera_models:
        others = [name for name, other in VARIANT_SPECS.items() if camera_model in other.camera_models]
        raise ValueError(f"the {camera_model} camera model is not available for {variant}: gsplat's {spec.title} "
                         f"projection ({spec.render_function}) has only {' and '.join(spec.camera_models)} cameras; "
                         f"{' and '.join(others)} have {camera_model}")
    if camera and variant != "3dgut":
        raise ValueError(f"{', '.join(sorted(camera))}: distortion and rolling shutter need the 3dgut variant "
                         f"(gsplat renders them only with with_ut=True)")
    return spec


def _mode_config(mode: str, config: Optional[LPTConfig]) -> LPTConfig:
    config = config or LPTConfig(mode=mode)
    return config if config.mode == mode else config.replace(mode=mode)


class _Blend:
    """A frame's blending-stage call: gsplat's kernel (mode "vanilla") or ours (a mode of LPTConfig)."""

    gsplat_function = ""

    def call_arguments(self) -> Tuple[tuple, Dict[str, Any]]:
        raise NotImplementedError

    def ours(self) -> Callable:
        raise NotImplementedError

    def blend(self, mode: str = "auto", config: Optional[LPTConfig] = None):
        """gsplat's outputs, computed by gsplat's kernel (mode "vanilla") or ours."""
        from .. import hook

        args, kwargs = self.call_arguments()
        if mode == "vanilla":
            return hook.original(self.gsplat_function)(*args, **kwargs)
        return self.ours()(*args, **kwargs, config=_mode_config(mode, config))

    def blend_with_stats(self, mode: str = "auto", config: Optional[LPTConfig] = None):
        """Our kernels (a mode of LPTConfig), with the schedule report: (*gsplat's outputs, report)."""
        args, kwargs = self.call_arguments()
        return self.ours()(*args, **kwargs, config=_mode_config(mode, config), return_stats=True)


@dataclass
class BlendInputs(_Blend):
    """3DGS: the arguments of `rasterize_to_pixels` for one frame (a batch of C cameras)."""

    means2d: Tensor  # [C, N, 2]
    conics: Tensor  # [C, N, 3]
    colors: Tensor  # [C, N, D]
    opacities: Tensor  # [C, N]
    width: int
    height: int
    tile_size: int
    isect_offsets: Tensor  # [C, tile_height, tile_width]
    flatten_ids: Tensor  # [n_isects]
    backgrounds: Optional[Tensor] = None  # [C, D]

    gsplat_function = "rasterize_to_pixels"

    def call_arguments(self):
        return ((self.means2d, self.conics, self.colors, self.opacities, self.width, self.height, self.tile_size,
                 self.isect_offsets, self.flatten_ids), {"backgrounds": self.backgrounds})

    def ours(self):
        from ..variants.gaussian3d import rasterize_to_pixels

        return rasterize_to_pixels


@dataclass
class Blend2DGS(_Blend):
    """2DGS: the arguments of `rasterize_to_pixels_2dgs` (colours end with the depth channel, as RGB+D has it)."""

    means2d: Tensor  # [C, N, 2]
    ray_transforms: Tensor  # [C, N, 3, 3]
    colors: Tensor  # [C, N, D], depth last
    opacities: Tensor  # [C, N]
    normals: Tensor  # [C, N, 3]
    densify: Tensor  # [C, N, 2]
    width: int
    height: int
    tile_size: int
    isect_offsets: Tensor
    flatten_ids: Tensor
    backgrounds: Optional[Tensor] = None

    gsplat_function = "rasterize_to_pixels_2dgs"

    def call_arguments(self):
        return (), dict(means2d=self.means2d, ray_transforms=self.ray_transforms, colors=self.colors,
                        opacities=self.opacities, normals=self.normals, densify=self.densify,
                        image_width=self.width, image_height=self.height, tile_size=self.tile_size,
                        isect_offsets=self.isect_offsets, flatten_ids=self.flatten_ids, backgrounds=self.backgrounds)

    def ours(self):
        from ..variants.surfel2d import rasterize_to_pixels_2dgs

        return rasterize_to_pixels_2dgs


@dataclass
class Blend3DGUT(_Blend):
    """3DGUT: the arguments of `rasterize_to_pixels_eval3d` (world-space Gaussians and the cameras)."""

    means: Tensor  # [N, 3]
    quats: Tensor  # [N, 4]
    scales: Tensor  # [N, 3]
    colors: Tensor  # [C, N, D]
    opacities: Tensor  # [C, N]
    viewmats: Tensor  # [C, 4, 4]
    Ks: Tensor  # [C, 3, 3]
    width: int
    height: int
    tile_size: int
    isect_offsets: Tensor
    flatten_ids: Tensor
    backgrounds: Optional[Tensor] = None
    camera: Dict[str, Any] = field(default_factory=dict)  # camera_model, radial_coeffs, rolling_shutter, ...

    gsplat_function = "rasterize_to_pixels_eval3d"

    def call_arguments(self):
        return (), dict(means=self.means, quats=self.quats, scales=self.scales, colors=self.colors,
                        opacities=self.opacities, viewmats=self.viewmats, Ks=self.Ks, image_width=self.width,
                        image_height=self.height, tile_size=self.tile_size, isect_offsets=self.isect_offsets,
                        flatten_ids=self.flatten_ids, backgrounds=self.backgrounds, **self.camera)

    def ours(self):
        from ..variants.gaussian3dgut import rasterize_to_pixels_eval3d

        return rasterize_to_pixels_eval3d


# ----------------------------------------------------------------------------------------------
# Projection (gsplat's, CUDA)
# ----------------------------------------------------------------------------------------------


def view_colors(colors: Tensor, C: int, sh_degree: Optional[int] = None, means: Optional[Tensor] = None,
                campos: Optional[Tensor] = None, radii: Optional[Tensor] = None) -> Tensor:
    """Per-camera colours [C, N, D] as gsplat's render calls make them: given ones broadcast, or SH evaluated
    towards each camera centre `campos` [C, 3] (masked by `radii` > 0, + 0.5, clamped at 0)."""
    if sh_degree is None:
        return (colors[None].expand(C, *colors.shape) if colors.dim() == 2 else colors).contiguous()
    from gsplat.cuda._wrapper import spherical_harmonics

    dirs = means[None] - campos[:, None]  # [C, N, 3]
    coeffs = colors[None].expand(C, *colors.shape) if colors.dim() == 3 else colors
    masks = None if radii is None else (radii > 0).all(-1)
    return torch.clamp_min(spherical_harmonics(sh_degree, dirs, coeffs, masks=masks) + 0.5, 0.0).contiguous()


def camera_centres(viewmats: Tensor, viewmats_rs: Optional[Tensor] = None) -> Tensor:
    """World positions of the cameras [C, 3] (with rolling shutter: the mean of start and end, as gsplat)."""
    centres = torch.linalg.inv(viewmats)[:, :3, 3]
    if viewmats_rs is not None:
        centres = 0.5 * (centres + torch.linalg.inv(viewmats_rs)[:, :3, 3])
    return centres


def _tiles(means2d, radii, depths, C: int, width: int, height: int, tile_size: int) -> Tuple[Tensor, Tensor]:
    """gsplat's `isect_tiles` and `isect_offset_encode`: (isect_offsets [C, th, tw], flatten_ids)."""
    from gsplat.cuda._wrapper import isect_offset_encode, isect_tiles

    tile_width, tile_height = math.ceil(width / tile_size), math.ceil(height / tile_size)
    _, isect_ids, flatten_ids = isect_tiles(means2d, radii, depths, tile_size, tile_width, tile_height)
    return isect_offset_encode(isect_ids, C, tile_width, tile_height), flatten_ids


@torch.no_grad()
def project_frame(means: Tensor, quats: Tensor, scales: Tensor, opacities: Tensor, colors: Tensor, viewmats: Tensor,
                  Ks: Tensor, width: int, height: int, tile_size: int = 16, sh_degree: Optional[int] = None,
                  near_plane: float = 0.01, far_plane: float = 1e10, backgrounds: Optional[Tensor] = None,
                  camera_model: str = "pinhole") -> BlendInputs:
    """3DGS: gsplat's projection, SH, `isect_tiles` and `isect_offset_encode` (CUDA), unpacked, classic mode.

    means [N, 3], quats [N, 4], scales [N, 3] and opacities [N] activated; colors [N, D] (or [N, K, 3] with
    sh_degree); viewmats [C, 4, 4], Ks [C, 3, 3]; backgrounds [C, D]."""
    from gsplat.cuda._wrapper import fully_fused_projection

    C = viewmats.shape[0]
    radii, means2d, depths, conics, _ = fully_fused_projection(
        means, None, quats, scales, viewmats, Ks, width, height, packed=False, near_plane=near_plane,
        far_plane=far_plane, opacities=opacities, camera_model=camera_model)
    colors_c = view_colors(colors, C, sh_degree, means, camera_centres(viewmats), radii)
    isect_offsets, flatten_ids = _tiles(means2d, radii, depths, C, width, height, tile_size)
    return BlendInputs(means2d.contiguous(), conics.contiguous(), colors_c, opacities[None].expand(C, -1).contiguous(),
                       width, height, tile_size, isect_offsets, flatten_ids, backgrounds)


@torch.no_grad()
def project_frame_2dgs(means: Tensor, quats: Tensor, scales: Tensor, opacities: Tensor, colors: Tensor,
                       viewmats: Tensor, Ks: Tensor, width: int, height: int, tile_size: int = 16,
                       sh_degree: Optional[int] = None, near_plane: float = 0.01, far_plane: float = 1e10
                       ) -> Blend2DGS:
    """2DGS: gsplat's surfel projection and tiling, colours RGB plus depth (what `rasterization_2dgs` blends with
    render_mode="RGB+D"). Only the first two scales of each Gaussian count (a surfel)."""
    from gsplat.cuda._wrapper import fully_fused_projection_2dgs

    C = viewmats.shape[0]
    radii, means2d, depths, ray_transforms, normals = fully_fused_projection_2dgs(
        means, quats, scales, viewmats, Ks, width, height, near_plane=near_plane, far_plane=far_plane, packed=False)
    colors_c = view_colors(colors, C, sh_degree, means, camera_centres(viewmats), radii)
    isect_offsets, flatten_ids = _tiles(means2d, radii, depths, C, width, height, tile_size)
    return Blend2DGS(means2d.contiguous(), ray_transforms.contiguous(),
                     torch.cat([colors_c, depths[..., None]], -1).contiguous(),
                     opacities[None].expand(C, -1).contiguous(), normals.contiguous(), torch.zeros_like(means2d),
                     width, height, tile_size, isect_offsets, flatten_ids)


@torch.no_grad()
def project_frame_3dgut(means: Tensor, quats: Tensor, scales: Tensor, opacities: Tensor, colors: Tensor,
                        viewmats: Tensor, Ks: Tensor, width: int, height: int, tile_size: int = 16,
                        sh_degree: Optional[int] = None, near_plane: float = 0.01, far_plane: float = 1e10,
                        camera_model: str = "pinhole", camera: Optional[Mapping[str, Any]] = None) -> Blend3DGUT:
    """3DGUT: gsplat's unscented-transform projection and tiling. `camera`: gsplat's further camera arguments
    (radial_coeffs, tangential_coeffs, thin_prism_coeffs, ftheta_coeffs, rolling_shutter, viewmats_rs)."""
    from gsplat.cuda._wrapper import fully_fused_projection_with_ut

    C = viewmats.shape[0]
    camera = {"camera_model": camera_model, **(camera or {})}
    radii, means2d, depths, _, _ = fully_fused_projection_with_ut(
        means, quats, scales, opacities, viewmats, Ks, width, height, near_plane=near_plane, far_plane=far_plane,
        **camera)
    colors_c = view_colors(colors, C, sh_degree, means, camera_centres(viewmats, camera.get("viewmats_rs")), radii)
    isect_offsets, flatten_ids = _tiles(means2d, radii, depths, C, width, height, tile_size)
    return Blend3DGUT(means, quats, scales, colors_c, opacities[None].expand(C, -1).contiguous(), viewmats, Ks,
                      width, height, tile_size, isect_offsets, flatten_ids, camera=camera)


def project_variant_frame(variant: str, means: Tensor, quats: Tensor, scales: Tensor, opacities: Tensor,
                          colors: Tensor, viewmats: Tensor, Ks: Tensor, width: int, height: int, tile_size: int = 16,
                          sh_degree: Optional[int] = None, camera_model: str = "pinhole",
                          camera: Optional[Mapping[str, Any]] = None, **planes) -> _Blend:
    """One frame's blend inputs of `variant` (VARIANT_NAMES), projected by gsplat (CUDA)."""
    check_variant(variant, camera_model, camera)
    common = (means, quats, scales, opacities, colors, viewmats, Ks, width, height, tile_size)
    if variant == "2dgs":
        return project_frame_2dgs(*common, sh_degree=sh_degree, **planes)
    if variant == "3dgut":
        return project_frame_3dgut(*common, sh_degree=sh_degree, camera_model=camera_model, camera=camera, **planes)
    return project_frame(*common, sh_degree=sh_degree, camera_model=camera_model, **planes)


# ----------------------------------------------------------------------------------------------
# The whole render call, and blend inputs from its meta
# ----------------------------------------------------------------------------------------------


def render_frame(variant: str, means: Tensor, quats: Tensor, scales: Tensor, opacities: Tensor, colors: Tensor,
                 viewmats: Tensor, Ks: Tensor, width: int, height: int, backend: str = "lpt",
                 config: Optional[LPTConfig] = None, camera_model: str = "pinhole",
                 camera: Optional[Mapping[str, Any]] = None, **options):
    """gsplat's render call of `variant` with `backend` ("cuda": gsplat's kernels; "lpt": ours with `config`),
    `options` passed on (sh_degree, render_mode, near_plane, ...). Returns what gsplat returns: (colors,
    alphas, meta) for 3dgs and 3dgut, (colors, alphas, normals, normals from depth, distortion, median, meta)
    for 2dgs (`colors_alphas_meta` takes the three any variant has)."""
    import gsplat  # its render calls take backend= since `import gsplat_lpt` hooked them

    spec = check_variant(variant, camera_model, camera)
    kwargs: Dict[str, Any] = {**dict(spec.render_options), **options}
    if variant != "2dgs":  # rasterization_2dgs has no camera model argument (pinhole only)
        kwargs.update(camera_model=camera_model, **(camera or {}))
    else:  # rasterization_2dgs takes one batch of Gaussians: opacities [N] (a scene may hold them as [1, N])
        opacities = opacities.reshape(means.shape[:-1])
        if kwargs.get("sh_degree") is None and colors.dim() == means.dim():
            # without SH it appends depth to colours per camera, so it wants them as [C, N, D]
            colors = colors[None].expand(viewmats.shape[-3], *colors.shape)
    if backend == "lpt" and config is not None:
        kwargs["lpt_config"] = config
    return getattr(gsplat, spec.render_function)(means, quats, scales, opacities, colors, viewmats, Ks, width,
                                                  height, backend=backend, **kwargs)


def colors_alphas_meta(outputs) -> Tuple[Tensor, Tensor, Dict[str, Any]]:
    """(render colors, render alphas, meta) of any variant's render call."""
    return outputs[0], outputs[1], outputs[-1]


def blend_inputs_from_meta(variant: str, meta: Mapping[str, Any], colors: Tensor, render_mode: str = "RGB",
                           means: Optional[Tensor] = None, quats: Optional[Tensor] = None,
                           scales: Optional[Tensor] = None, viewmats: Optional[Tensor] = None,
                           Ks: Optional[Tensor] = None, camera_model: str = "pinhole",
                           camera: Optional[Mapping[str, Any]] = None) -> _Blend:
    """The exact blending-stage arguments of an unpacked render call that ran with `render_mode`, from its meta.

    colors: the per-camera colours it blended before any depth channel ([C, N, D], SH already evaluated);
    3dgut also needs the world-space Gaussians (means, quats, scales) and cameras (viewmats, Ks, camera)."""
    check_variant(variant, camera_model, camera)
    if render_mode in DEPTH_RENDER_MODES:
        colors = torch.cat([colors, meta["depths"][..., None]], dim=-1)
    elif render_mode != "RGB":
        raise ValueError(f"render_mode {render_mode!r}: blend inputs are rebuilt for RGB, RGB+D and RGB+ED")
    colors = colors.contiguous()
    common = dict(width=meta["width"], height=meta["height"], tile_size=meta["tile_size"],
                  isect_offsets=meta["isect_offsets"], flatten_ids=meta["flatten_ids"])
    opacities = meta["opacities"].contiguous()  # [C, N], compensations applied where gsplat applied them
    if variant == "2dgs":
        return Blend2DGS(means2d=meta["means2d"].contiguous(), ray_transforms=meta["ray_transforms"].contiguous(),
                         colors=colors, opacities=opacities, normals=meta["normals"].contiguous(),
                         densify=torch.zeros_like(meta["means2d"]), **common)
    if variant == "3dgut":
        if any(value is None for value in (means, quats, scales, viewmats, Ks)):
            raise ValueError("3dgut blend inputs need means, quats, scales, viewmats and Ks")
        return Blend3DGUT(means=means, quats=quats, scales=scales, colors=colors, opacities=opacities,
                          viewmats=viewmats, Ks=Ks, camera={"camera_model": camera_model, **(camera or {})}, **common)
    return BlendInputs(means2d=meta["means2d"].contiguous(), conics=meta["conics"].contiguous(), colors=colors,
                       opacities=opacities, **common)
