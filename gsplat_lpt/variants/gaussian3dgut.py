"""3DGUT: gsplat's `rasterize_to_pixels_eval3d` (kernels/blend_3dgut.cu), with gsplat's signature plus `config=`.

What `gsplat.rasterization(..., with_ut=True, with_eval3d=True)` blends: each pixel casts a ray through the
camera model (pinhole, with radial / tangential / thin-prism distortion or without, fisheye, FTheta; rolling
shutter between `viewmats` and `viewmats_rs`) and each listed Gaussian is evaluated in 3D along it. The
kernel calls gsplat's own camera models and helpers (its CUDA headers), so it is compiled with nvcc and
gsplat's include folders and flags (`compile_options`); lpt mode computes gsplat's floats.

Autograd: the forward saves exactly what gsplat's forward saves (the same render_alphas and last_ids), so
gsplat's own backward op computes the gradients; frames that need gradients are never chunked. gsplat returns
colours and alphas only, so a call that needs no gradients allocates no last_ids and runs the persistent kernel's
build that keeps none (Variant.no_last_ids_kernel).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import importlib.util
import math
import os
from pathlib import Path
from typing import Any, Optional, Tuple

import torch
from torch import Tensor

from .. import frontend
from ..config import LPTConfig
from ..errors import LPTInputError, LPTRuntimeError
from ..frontend import require_shape, require_tensor
from ..layouts import Pointer
from ..runtime import FramePlan, kernel_dir
from . import OutputSpec, Variant, register

# gsplat::CameraModelType (Common.h) of the camera models gsplat's eval3d kernel evaluates. It has no
# ORTHO branch: its forward kernel asserts there (a device-side assert), so "ortho" is refused here.
CAMERA_MODELS = {"pinhole": 0, "fisheye": 2, "ftheta": 3}
# Radial coefficients gsplat's kernel reads per camera (its stride into radial_coeffs): k1..k6 for the
# OpenCV pinhole model, k1..k4 for the OpenCV fisheye model; FTheta ignores them.
RADIAL_COEFFS = {"pinhole": 6, "fisheye": 4}
# gsplat's NO_FAST_MATH switch (gsplat/cuda/_backend.py): without it gsplat compiles with -use_fast_math,
# and so do we, so that both kernels round the same way.
ENV_NO_FAST_MATH = "NO_FAST_MATH"


class FThetaParams(ctypes.Structure):
    """gsplat's FThetaCameraDistortionParameters (Cameras.h), by value inside Params3DGUT."""

    _fields_ = [
        ("reference_poly", ctypes.c_int32),  # PolynomialType: 0 PIXELDIST_TO_ANGLE, 1 ANGLE_TO_PIXELDIST
        ("pixeldist_to_angle_poly", ctypes.c_float * 6),
        ("angle_to_pixeldist_poly", ctypes.c_float * 6),
        ("max_angle", ctypes.c_float),
        ("linear_cde", ctypes.c_float * 3),
    ]


class Params3DGUT(ctypes.Structure):
    """Gaussian3DGUT::Params"""

    _fields_ = [
        ("means", Pointer), ("quats", Pointer), ("scales", Pointer), ("colors", Pointer), ("opacities", Pointer),
        ("backgrounds", Pointer), ("viewmats0", Pointer), ("viewmats1", Pointer), ("Ks", Pointer),
        ("radial_coeffs", Pointer), ("tangential_coeffs", Pointer), ("thin_prism_coeffs", Pointer),
        ("ftheta_coeffs", FThetaParams),
        ("camera_model", ctypes.c_int32),  # gsplat::CameraModelType
        ("shutter_type", ctypes.c_int32),  # ShutterType: gsplat's RollingShutterType values
        ("B", ctypes.c_uint32), ("C", ctypes.c_uint32), ("N", ctypes.c_uint32),
        ("image_width", ctypes.c_uint32), ("image_height", ctypes.c_uint32),
    ]


class Outputs3DGUT(ctypes.Structure):
    """Gaussian3DGUT::Outputs"""

    _fields_ = [("render_colors", Pointer), ("render_alphas", Pointer), ("last_ids", Pointer)]


# ------------------------------------------------------------------------------------------------------
# Compiling against gsplat's headers


@functools.lru_cache(maxsize=None)
def gsplat_cuda_dir() -> Path:
    """gsplat/cuda of the installed gsplat (its headers: include/, csrc/third_party/glm)."""
    spec = importlib.util.find_spec("gsplat")
    if spec is None or spec.origin is None:
        raise LPTRuntimeError("gsplat is not installed: the 3DGUT kernels compile against its CUDA headers")
    return Path(spec.origin).resolve().parent / "cuda"


def gsplat_include_dirs() -> Tuple[Path, Path]:
    """gsplat's include folder and its bundled GLM, as gsplat's own build passes them to nvcc."""
    cuda = gsplat_cuda_dir()
    include, glm = cuda / "include", cuda / "csrc" / "third_party" / "glm"
    for needed in (include / "Cameras.cuh", include / "Utils.cuh", include / "Common.h", glm / "glm" / "glm.hpp"):
        if not needed.is_file():
            raise LPTRuntimeError(f"gsplat's CUDA header {needed} is missing: the 3DGUT kernels include gsplat's "
                                  "camera models (reinstall gsplat from its source distribution)")
    return include, glm


@functools.lru_cache(maxsize=None)
def _headers_digest(include: Path) -> str:
    """A digest of the headers the 3DGUT source includes (gsplat's and lpt_core.cuh). CuPy caches compiled
    modules by source text and options only, so it goes into the options: a changed header recompiles."""
    digest = hashlib.sha256()
    for path in sorted([*include.glob("*.h"), *include.glob("*.cuh")]) + [kernel_dir() / "lpt_core.cuh"]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _require_nvcc() -> None:
    try:
        from cupy.cuda import get_nvcc_path
    except ImportError:  # the runtime reports a missing CuPy with its own message
        return
    if get_nvcc_path() is None:
        raise LPTRuntimeError("the 3DGUT kernels are compiled with nvcc (gsplat's camera-model headers need the "
                              "C++ standard library, which NVRTC lacks) and nvcc was not found: install the CUDA "
                              "toolkit gsplat builds with, or point CuPy at it (NVCC or CUDA_PATH)")


def compile_options() -> Tuple[str, ...]:
    """nvcc options besides the runtime's (-std=c++17, -I kernels/): gsplat's include folders and the flags
    its own build compiles these headers with (torch's --expt-relaxed-constexpr; -use_fast_math unless
    NO_FAST_MATH=1), and the digest of the included headers (CuPy's cache key)."""
    _require_nvcc()
    include, glm = gsplat_include_dirs()
    options = [f"-I{include}", f"-I{glm}", "--expt-relaxed-constexpr", f"-DLPT_HEADERS_DIGEST={_headers_digest(include)}"]
    if os.environ.get(ENV_NO_FAST_MATH, "0") != "1":
        options.append("-use_fast_math")
    return tuple(options)


# ------------------------------------------------------------------------------------------------------
# Validation and packing


@functools.cache  # (an import statement costs about 2 us of every call)
def _gsplat_types():
    from gsplat.cuda._wrapper import RollingShutterType, UnscentedTransformParameters

    return RollingShutterType, UnscentedTransformParameters


def _given(ut_params: Any, rolling_shutter: Any) -> Tuple[Any, Any]:
    """ut_params and rolling_shutter with gsplat's defaults where None: UnscentedTransformParameters(), GLOBAL."""
    if ut_params is None or rolling_shutter is None:
        RollingShutterType, UnscentedTransformParameters = _gsplat_types()
        ut_params = UnscentedTransformParameters() if ut_params is None else ut_params
        rolling_shutter = RollingShutterType.GLOBAL if rolling_shutter is None else rolling_shutter
    return ut_params, rolling_shutter


def pack_ftheta(coeffs: Any) -> FThetaParams:
    """gsplat's FThetaCameraDistortionParameters (the Python dataclass) as its C struct; None is gsplat's
    default-constructed struct (all zeros)."""
    packed = FThetaParams()
    if coeffs is None:
        return packed
    try:
        reference = int(getattr(coeffs.reference_poly, "value", coeffs.reference_poly))
        backward = [float(v) for v in coeffs.pixeldist_to_angle_poly]
        forward = [float(v) for v in coeffs.angle_to_pixeldist_poly]
        max_angle = float(coeffs.max_angle)
        linear = [float(v) for v in coeffs.linear_cde]
    except (AttributeError, TypeError, ValueError) as error:
        raise LPTInputError(f"ftheta_coeffs must be gsplat's FThetaCameraDistortionParameters, got "
                            f"{type(coeffs).__name__} ({error})") from error
    if reference not in (0, 1):
        raise LPTInputError(f"ftheta_coeffs.reference_poly must be an FThetaPolynomialType, got {coeffs.reference_poly!r}")
    if len(backward) != 6 or len(forward) != 6 or len(linear) != 3:
        raise LPTInputError("ftheta_coeffs: pixeldist_to_angle_poly and angle_to_pixeldist_poly take 6 coefficients "
                            f"and linear_cde 3, got {len(backward)}, {len(forward)} and {len(linear)}")
    packed.reference_poly = reference
    packed.pixeldist_to_angle_poly[:] = backward
    packed.angle_to_pixeldist_poly[:] = forward
    packed.max_angle = max_angle
    packed.linear_cde[:] = linear
    return packed


def _optional(name: str, value: Optional[Tensor], shape: Tuple[int, ...], meaning: str) -> Optional[Tensor]:
    if value is None:
        return None
    value = require_tensor(name, value, torch.float32)
    require_shape(name, value, shape, meaning)
    return value


def validate(means, quats, scales, colors, opacities, viewmats, Ks, backgrounds, camera_model, radial_coeffs,
             tangential_coeffs, thin_prism_coeffs, rolling_shutter, viewmats_rs, ut_params
             ) -> Tuple[Tuple[int, ...], int, int, int]:
    """gsplat's shapes and dtypes for every array and camera argument; returns (batch dims, C, N, channels)."""
    means = require_tensor("means", means, torch.float32)
    if means.dim() < 2 or means.shape[-1] != 3:
        raise LPTInputError(f"means must be [..., N, 3], got {tuple(means.shape)}")
    batch, N = tuple(means.shape[:-2]), means.shape[-2]
    quats = require_tensor("quats", quats, torch.float32)
    scales = require_tensor("scales", scales, torch.float32)
    require_shape("quats", quats, batch + (N, 4), "[..., N, 4] like means")
    require_shape("scales", scales, batch + (N, 3), "[..., N, 3] like means")
    viewmats = require_tensor("viewmats", viewmats, torch.float32)
    if viewmats.dim() != len(batch) + 3 or viewmats.shape[-2:] != (4, 4):
        raise LPTInputError(f"viewmats must be [..., C, 4, 4] with the batch dims of means {batch}, "
                            f"got {tuple(viewmats.shape)}")
    C = viewmats.shape[-3]
    require_shape("viewmats", viewmats, batch + (C, 4, 4), "[..., C, 4, 4] with the batch dims of means")
    Ks = require_tensor("Ks", Ks, torch.float32)
    require_shape("Ks", Ks, batch + (C, 3, 3), "[..., C, 3, 3] like viewmats")
    colors = require_tensor("colors", colors, torch.float32)
    if colors.dim() == len(batch) + 2:
        raise NotImplementedError("packed colors [nnz, channels]: gsplat 1.5.3's rasterize_to_pixels_eval3d has no "
                                  "packed mode (packed mode is not supported yet), and neither has the lpt backend")
    channels = colors.shape[-1] if colors.dim() > 0 else 0
    frontend.check_channels(channels)
    require_shape("colors", colors, batch + (C, N, channels), "[..., C, N, channels]")
    opacities = require_tensor("opacities", opacities, torch.float32)
    require_shape("opacities", opacities, batch + (C, N), "[..., C, N] like colors")
    _optional("backgrounds", backgrounds, batch + (C, channels), "[..., C, channels]")

    if camera_model not in CAMERA_MODELS:
        reason = (" (gsplat's eval3d kernel has no orthographic camera: its forward kernel asserts on it)"
                  if camera_model == "ortho" else "")
        raise LPTInputError(f"camera_model must be one of {tuple(CAMERA_MODELS)}, got {camera_model!r}{reason}")
    if radial_coeffs is not None and camera_model in RADIAL_COEFFS:
        count = RADIAL_COEFFS[camera_model]
        _optional("radial_coeffs", radial_coeffs, batch + (C, count),
                  f"[..., C, {count}]: the {camera_model} model reads {count} radial coefficients per camera")
    elif radial_coeffs is not None:  # FTheta: unused, as in gsplat; still gsplat's shape
        radial_coeffs = require_tensor("radial_coeffs", radial_coeffs, torch.float32)
        if tuple(radial_coeffs.shape) not in (batch + (C, 6), batch + (C, 4)):
            raise LPTInputError(f"radial_coeffs has shape {tuple(radial_coeffs.shape)}, expected [..., C, 6] or [..., C, 4]")
    _optional("tangential_coeffs", tangential_coeffs, batch + (C, 2), "[..., C, 2]")
    _optional("thin_prism_coeffs", thin_prism_coeffs, batch + (C, 4), "[..., C, 4]")
    _optional("viewmats_rs", viewmats_rs, batch + (C, 4, 4), "[..., C, 4, 4] like viewmats")
    RollingShutterType, UnscentedTransformParameters = _gsplat_types()
    if not isinstance(rolling_shutter, RollingShutterType):
        raise LPTInputError(f"rolling_shutter must be a gsplat RollingShutterType, got {rolling_shutter!r}")
    if not isinstance(ut_params, UnscentedTransformParameters):
        raise LPTInputError(f"ut_params must be gsplat's UnscentedTransformParameters, got {type(ut_params).__name__}")
    return batch, C, N, channels


_F32, _I32 = torch.float32, torch.int32

def _usual_call(means, quats, scales, colors, opacities, viewmats, Ks, width, height, tile_size, isect_offsets,
                flatten_ids, backgrounds, masks, camera_model, ut_params, radial_coeffs, tangential_coeffs,
                thin_prism_coeffs, rolling_shutter, viewmats_rs):
    """The usual call (one CUDA device, gsplat's dtypes and shapes, a camera model gsplat's eval3d kernel has, each
    optional camera array absent or of its shape) checked in a few operations, as gaussian3d's is: (batch dims, C, N,
    channels, device), or None to let the full validation say what is wrong. `ut_params` and `rolling_shutter` are
    _given's. (On a development machine the full validation took 9.8 us of a call, this 3.8 us.)"""
    try:
        if not frontend.usual_sizes(width, height, tile_size) or camera_model not in CAMERA_MODELS:
            return None
        if not (means.dtype is _F32 and quats.dtype is _F32 and scales.dtype is _F32 and colors.dtype is _F32
                and opacities.dtype is _F32 and viewmats.dtype is _F32 and Ks.dtype is _F32
                and isect_offsets.dtype is _I32 and flatten_ids.dtype is _I32):
            return None
        index = means.get_device()  # (written out: a generator over the tensors cost about 2 us)
        if not (index >= frontend.FIRST_DEVICE_INDEX and quats.get_device() == index and scales.get_device() == index
                and colors.get_device() == index and opacities.get_device() == index
                and viewmats.get_device() == index and Ks.get_device() == index
                and isect_offsets.get_device() == index and flatten_ids.get_device() == index):
            return None
        shape, colors_shape, offsets_shape = tuple(means.shape), tuple(colors.shape), tuple(isect_offsets.shape)
        if len(shape) < 2 or shape[-1] != 3:
            return None
        batch, N = shape[:-2], shape[-2]
        viewmats_shape = tuple(viewmats.shape)
        if len(viewmats_shape) != len(batch) + 3:
            return None
        C, channels = viewmats_shape[-3], colors_shape[-1]
        cameras, images = batch + (C,), batch + (C, N)
        if not (tuple(quats.shape) == batch + (N, 4) and tuple(scales.shape) == batch + (N, 3)
                and viewmats_shape == cameras + (4, 4) and tuple(Ks.shape) == cameras + (3, 3)
                and colors_shape == images + (channels,) and 0 < channels <= frontend.GSPLAT_CHANNELS[-1]
                and tuple(opacities.shape) == images and len(offsets_shape) == len(cameras) + 2
                and offsets_shape[:-2] == cameras and flatten_ids.dim() == 1
                and offsets_shape[-2] * tile_size >= height and offsets_shape[-1] * tile_size >= width
                and frontend.usual_extras(backgrounds, masks, index, cameras, channels, offsets_shape)):
            return None
        if radial_coeffs is not None or tangential_coeffs is not None or thin_prism_coeffs is not None \
                or viewmats_rs is not None:
            # the shapes each optional camera array may have (FTheta ignores radial coefficients: either model's)
            radial = [cameras + (RADIAL_COEFFS[camera_model],)] if camera_model in RADIAL_COEFFS else \
                [cameras + (6,), cameras + (4,)]
            for value, shapes in ((radial_coeffs, radial), (tangential_coeffs, [cameras + (2,)]),
                                  (thin_prism_coeffs, [cameras + (4,)]), (viewmats_rs, [cameras + (4, 4)])):
                if value is not None and not (value.dtype is _F32 and value.get_device() == index
                                              and tuple(value.shape) in shapes):
                    return None
        RollingShutterType, UnscentedTransformParameters = _gsplat_types()
        if not (isinstance(rolling_shutter, RollingShutterType) and isinstance(ut_params, UnscentedTransformParameters)):
            return None
        return batch, C, N, channels, means.device
    except (AttributeError, TypeError, IndexError):  # not tensors (or 0-d ones): the full validation names them
        return None


class Frame3DGUT:
    """One call's validated, contiguous, padded tensors; `render` plans and runs them (the low-level entry
    that tests and tools use to get last_ids and the plan too)."""

    def __init__(self, means, quats, scales, colors, opacities, viewmats, Ks, image_width, image_height, tile_size,
                 isect_offsets, flatten_ids, backgrounds=None, masks=None, camera_model="pinhole", ut_params=None,
                 radial_coeffs=None, tangential_coeffs=None, thin_prism_coeffs=None, ftheta_coeffs=None,
                 rolling_shutter=None, viewmats_rs=None):
        ut_params, rolling_shutter = _given(ut_params, rolling_shutter)
        usual = _usual_call(means, quats, scales, colors, opacities, viewmats, Ks, image_width, image_height,
                            tile_size, isect_offsets, flatten_ids, backgrounds, masks, camera_model, ut_params,
                            radial_coeffs, tangential_coeffs, thin_prism_coeffs, rolling_shutter, viewmats_rs)
        if usual is not None:
            batch, C, N, channels, self.device = usual
            self.B, self.C, self.N = math.prod(batch), C, N
            self.inter = frontend.intersections(isect_offsets, flatten_ids, masks, image_width, image_height,
                                                tile_size, self.B * C * N, checked=True)
            self.ftheta = pack_ftheta(ftheta_coeffs)
        else:
            batch, C = self._validate(means, quats, scales, colors, opacities, viewmats, Ks, image_width,
                                      image_height, tile_size, isect_offsets, flatten_ids, backgrounds, masks,
                                      camera_model, ut_params, radial_coeffs, tangential_coeffs, thin_prism_coeffs,
                                      ftheta_coeffs, rolling_shutter, viewmats_rs)
        self.image_dims = batch + (C,)
        colors, backgrounds, self.padding = frontend.pad_channels(colors, backgrounds)
        contiguous = lambda t: None if t is None else t.contiguous()  # noqa: E731
        self.means, self.quats, self.scales = means.contiguous(), quats.contiguous(), scales.contiguous()
        self.colors = frontend.aligned_rows(colors.contiguous(), colors.shape[-1])
        self.opacities, self.backgrounds = opacities.contiguous(), contiguous(backgrounds)
        self.viewmats, self.Ks, self.viewmats_rs = viewmats.contiguous(), Ks.contiguous(), contiguous(viewmats_rs)
        self.radial_coeffs, self.tangential_coeffs = contiguous(radial_coeffs), contiguous(tangential_coeffs)
        self.thin_prism_coeffs = contiguous(thin_prism_coeffs)
        self.masks = contiguous(masks)
        self.isect_offsets = isect_offsets.contiguous()
        self.camera_model, self.ut_params, self.ftheta_coeffs = camera_model, ut_params, ftheta_coeffs
        self.rolling_shutter = rolling_shutter
        self.channels = self.colors.shape[-1]

    def _validate(self, means, quats, scales, colors, opacities, viewmats, Ks, image_width, image_height, tile_size,
                  isect_offsets, flatten_ids, backgrounds, masks, camera_model, ut_params, radial_coeffs,
                  tangential_coeffs, thin_prism_coeffs, ftheta_coeffs, rolling_shutter, viewmats_rs
                  ) -> Tuple[Tuple[int, ...], int]:
        """Every check, each error naming its argument (the device check last); returns (batch dims, C)."""
        width = frontend.as_size("image_width", image_width)
        height = frontend.as_size("image_height", image_height)
        tile_size = frontend.as_size("tile_size", tile_size)
        batch, C, N, channels = validate(means, quats, scales, colors, opacities, viewmats, Ks, backgrounds,
                                         camera_model, radial_coeffs, tangential_coeffs, thin_prism_coeffs,
                                         rolling_shutter, viewmats_rs, ut_params)
        require_tensor("isect_offsets", isect_offsets, torch.int32)
        if tuple(isect_offsets.shape[:-2]) != batch + (C,) or isect_offsets.dim() < 3:
            raise LPTInputError(f"isect_offsets must be [..., C, tile_height, tile_width] with image dims "
                                f"{batch + (C,)}, got {tuple(isect_offsets.shape)}")
        self.B, self.C, self.N = math.prod(batch), C, N
        self.inter = frontend.intersections(isect_offsets, flatten_ids, masks, width, height, tile_size,
                                            self.B * C * N)
        self.ftheta = pack_ftheta(ftheta_coeffs)
        self.device = frontend.require_one_cuda_device(
            [("means", means), ("quats", quats), ("scales", scales), ("colors", colors), ("opacities", opacities),
             ("viewmats", viewmats), ("Ks", Ks), ("isect_offsets", isect_offsets), ("flatten_ids", flatten_ids),
             ("backgrounds", backgrounds), ("masks", masks), ("radial_coeffs", radial_coeffs),
             ("tangential_coeffs", tangential_coeffs), ("thin_prism_coeffs", thin_prism_coeffs),
             ("viewmats_rs", viewmats_rs)])
        return batch, C

    def params(self) -> Params3DGUT:
        address = lambda t: 0 if t is None else t.data_ptr()  # noqa: E731
        inter = self.inter
        return Params3DGUT(
            self.means.data_ptr(), self.quats.data_ptr(), self.scales.data_ptr(), self.colors.data_ptr(),
            self.opacities.data_ptr(), address(self.backgrounds), self.viewmats.data_ptr(), address(self.viewmats_rs),
            self.Ks.data_ptr(), address(self.radial_coeffs), address(self.tangential_coeffs),
            address(self.thin_prism_coeffs), self.ftheta, CAMERA_MODELS[self.camera_model],
            int(self.rolling_shutter.value), self.B, self.C, self.N, inter.image_width, inter.image_height)

    def render(self, config: LPTConfig, chunking_allowed: bool = True, reason: Optional[str] = None,
               with_last_ids: bool = True):
        """(render_colors, render_alphas, last_ids, plan) with gsplat's shapes (padded channels); last_ids is
        None without with_last_ids (inference: nothing needs them; the kernels get a null pointer)."""
        inter, dims = self.inter, self.image_dims
        H, W = inter.image_height, inter.image_width
        render_colors = torch.empty(dims + (H, W, self.channels), dtype=torch.float32, device=self.device)
        render_alphas = torch.empty(dims + (H, W, 1), dtype=torch.float32, device=self.device)
        last_ids = torch.empty(dims + (H, W), dtype=torch.int32, device=self.device) if with_last_ids else None
        if inter.num_images == 0:  # nothing to launch
            return render_colors, render_alphas, last_ids, None
        outputs = Outputs3DGUT(render_colors.data_ptr(), render_alphas.data_ptr(),
                               0 if last_ids is None else last_ids.data_ptr())
        plan = frontend.render(VARIANT, inter, self.params(), outputs, self.channels, self.device, config,
                               chunking_allowed, reason)
        return render_colors, render_alphas, last_ids, plan


class _LPTRasterizeToPixelsEval3D(torch.autograd.Function):
    """Forward: our kernels. Backward: gsplat's `_RasterizeToPixelsEval3D.backward` (its CUDA backward op), fed
    the tensors and settings gsplat's forward would have saved. The first 22 inputs are gsplat's, in its
    order, so that its backward's gradient tuple and needs_input_grad indices line up."""

    @staticmethod
    def forward(ctx, means, quats, scales, colors, opacities, backgrounds, masks, viewmats, Ks, width, height,
                tile_size, isect_offsets, flatten_ids, camera_model, ut_params, radial_coeffs, tangential_coeffs,
                thin_prism_coeffs, ftheta_coeffs, rolling_shutter, viewmats_rs, frame: Frame3DGUT,
                config: LPTConfig, holder: list):
        render_colors, render_alphas, last_ids, plan = frame.render(config, False, frontend.AUTOGRAD_NO_CHUNKING)
        holder.append(plan)
        ctx.save_for_backward(means, quats, scales, colors, opacities, backgrounds, masks, viewmats, viewmats_rs, Ks,
                              radial_coeffs, tangential_coeffs, thin_prism_coeffs, isect_offsets, flatten_ids,
                              render_alphas, last_ids)
        ctx.width, ctx.height, ctx.tile_size = width, height, tile_size
        # gsplat's C++ settings are made in backward (they need gsplat's CUDA extension)
        ctx.lpt_settings = (camera_model, ut_params, ftheta_coeffs, rolling_shutter)
        return render_colors, render_alphas

    @staticmethod
    def backward(ctx, v_render_colors, v_render_alphas):
        from gsplat.cuda._wrapper import FThetaCameraDistortionParameters, _make_lazy_cuda_obj, _RasterizeToPixelsEval3D

        camera_model, ut_params, ftheta_coeffs, rolling_shutter = ctx.lpt_settings
        ctx.ut_params = ut_params.to_cpp()
        ctx.rs_type = rolling_shutter.to_cpp()
        ctx.camera_model_type = _make_lazy_cuda_obj(f"CameraModelType.{camera_model.upper()}")
        ctx.ftheta_coeffs = (ftheta_coeffs.to_cpp() if ftheta_coeffs is not None
                             else FThetaCameraDistortionParameters.to_cpp_default())
        gradients = _RasterizeToPixelsEval3D.backward(ctx, v_render_colors, v_render_alphas)
        return (*gradients, None, None, None)


def rasterize_with_plan(
    means: Tensor,  # [..., N, 3]
    quats: Tensor,  # [..., N, 4]
    scales: Tensor,  # [..., N, 3]
    colors: Tensor,  # [..., C, N, channels]
    opacities: Tensor,  # [..., C, N]
    viewmats: Tensor,  # [..., C, 4, 4]
    Ks: Tensor,  # [..., C, 3, 3]
    image_width: int,
    image_height: int,
    tile_size: int,
    isect_offsets: Tensor,  # [..., C, tile_height, tile_width]
    flatten_ids: Tensor,  # [n_isects]
    backgrounds: Optional[Tensor] = None,  # [..., C, channels]
    masks: Optional[Tensor] = None,  # [..., C, tile_height, tile_width]
    camera_model: str = "pinhole",
    ut_params: Any = None,  # gsplat's UnscentedTransformParameters (the forward does not use it)
    radial_coeffs: Optional[Tensor] = None,  # [..., C, 6] (pinhole) or [..., C, 4] (fisheye)
    tangential_coeffs: Optional[Tensor] = None,  # [..., C, 2]
    thin_prism_coeffs: Optional[Tensor] = None,  # [..., C, 4]
    ftheta_coeffs: Any = None,  # gsplat's FThetaCameraDistortionParameters
    rolling_shutter: Any = None,  # gsplat's RollingShutterType (GLOBAL when None)
    viewmats_rs: Optional[Tensor] = None,  # [..., C, 4, 4]
    config: Optional[LPTConfig] = None,
) -> Tuple[Tensor, Tensor, Optional[FramePlan]]:
    """gsplat's rasterize_to_pixels_eval3d on our kernels: (render_colors, render_alphas, plan)."""
    config = config or LPTConfig()
    if not isinstance(config, LPTConfig):
        raise TypeError(f"config must be a gsplat_lpt.LPTConfig, got {type(config).__name__}")
    if frontend.gsplat_takes(VARIANT, config, flatten_ids):  # a small frame: gsplat's own call
        ut_params, rolling_shutter = _given(ut_params, rolling_shutter)  # (gsplat's forward needs them given)
        render_colors, render_alphas = frontend.gsplat_kernel(VARIANT)(
            means, quats, scales, colors, opacities, viewmats, Ks, image_width, image_height, tile_size, isect_offsets,
            flatten_ids, backgrounds, masks, camera_model, ut_params, radial_coeffs, tangential_coeffs,
            thin_prism_coeffs, ftheta_coeffs, rolling_shutter, viewmats_rs)
        return render_colors, render_alphas, frontend.GsplatKernelFrame(VARIANT, config, flatten_ids.numel())
    frame = Frame3DGUT(means, quats, scales, colors, opacities, viewmats, Ks, image_width, image_height, tile_size,
                       isect_offsets, flatten_ids, backgrounds, masks, camera_model, ut_params, radial_coeffs,
                       tangential_coeffs, thin_prism_coeffs, ftheta_coeffs, rolling_shutter, viewmats_rs)
    grad = frontend.needs_grad(frame.means, frame.quats, frame.scales, frame.colors, frame.opacities,
                               frame.backgrounds, frame.viewmats)
    if grad:
        holder: list = []
        render_colors, render_alphas = _LPTRasterizeToPixelsEval3D.apply(
            frame.means, frame.quats, frame.scales, frame.colors, frame.opacities, frame.backgrounds, frame.masks,
            frame.viewmats, frame.Ks, frame.inter.image_width, frame.inter.image_height, frame.inter.tile_size,
            frame.isect_offsets, frame.inter.flatten_ids, frame.camera_model, frame.ut_params, frame.radial_coeffs,
            frame.tangential_coeffs, frame.thin_prism_coeffs, frame.ftheta_coeffs, frame.rolling_shutter,
            frame.viewmats_rs, frame, config, holder)
        plan = holder[0]
    else:  # inference: no autograd bookkeeping on the per-frame path
        allowed, reason = frontend.chunking_rule(VARIANT, config, False)
        render_colors, render_alphas, _, plan = frame.render(config, allowed, reason, with_last_ids=False)
    if frame.padding > 0:
        render_colors = render_colors[..., : -frame.padding]
    return render_colors, render_alphas, plan


def rasterize_to_pixels_eval3d(*args, config: Optional[LPTConfig] = None, return_stats: bool = False, **kwargs):
    """gsplat's `rasterize_to_pixels_eval3d`, scheduled by the LPT backend (same signature, plus `config`).

    Returns (render_colors [..., C, H, W, channels], render_alphas [..., C, H, W, 1]), plus the schedule
    report (the mapping `meta["lpt"]` holds) when `return_stats` is True."""
    render_colors, render_alphas, plan = rasterize_with_plan(*args, config=config, **kwargs)
    return frontend.with_report(VARIANT, (render_colors, render_alphas), plan, config, return_stats)


VARIANT = register(Variant(
    name="3dgut",
    gsplat_function="rasterize_to_pixels_eval3d",
    kernel_source="blend_3dgut.cu",
    traits="Gaussian3DGUT",
    staged_bytes=64,
    params_struct=Params3DGUT,
    outputs_struct=Outputs3DGUT,
    partial_floats=lambda channels: channels,
    outputs=(OutputSpec("render_colors", True), OutputSpec("render_alphas", True),
             OutputSpec("last_ids", False, backward_only=True)),
    rasterize=rasterize_with_plan,
    compile_backend="nvcc",
    compile_options=compile_options,
    no_last_ids_kernel=True,  # (PlainColorAccumulator's write leaves a null last_ids alone)
    latency_bound_build=True,  # (kernels/blend_3dgut.cu, kLatencyBoundBuild)
    # gsplat's own eval3d blend took 1.75x its 3DGS blend on the ladder's veil frame (H200); with lambda / 2 auto
    # chose (21, 32) there instead of (21, 16): 7.80x gsplat's blend against 7.25x in one process
    # (examples/results/JOURNAL.md, "Cameras taken in turn on one stream; 3DGUT's chunks priced in its own evaluations")
    evaluation_cost=2.0,
    # (Variant.small_frame_intersections) our 3DGUT kernels took longer per call than gsplat's, back to back, on every
    # frame up to 88,579 intersections in both runs (1.11-1.72x; their GPU time too: 1.03-2.14x gsplat's) and less
    # from 219,006 on (0.31-0.95x)
    small_frame_intersections=130_000,
))
