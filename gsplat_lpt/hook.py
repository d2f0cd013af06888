"""Where gsplat is hooked: the `backend=` flag, a context manager and an environment variable.

gsplat 1.5.x's `rendering.py` looks up `rasterize_to_pixels`, `rasterize_to_pixels_2dgs` and
`rasterize_to_pixels_eval3d` as module globals at call time. We replace those three globals with
dispatchers that read a `contextvars` backend, and wrap `rasterization` / `rasterization_2dgs` so
that they accept `backend=` and `lpt_config=` and report the schedule in `meta["lpt"]`. No gsplat
code is copied; with the backend unset (or "cuda") every call goes to gsplat's original function.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional

import torch
from torch import Tensor

from .config import MODES, LPTConfig
from .frontend import ScheduleReport, empty_report
from .variants import VARIANTS  # (a from-import inside the per-call dispatcher cost about 1.5 us of each call)

BACKENDS = ("cuda", "lpt")
ENV_BACKEND = "GSPLAT_LPT_BACKEND"  # "cuda" or "lpt": default backend for scripts that cannot be edited
ENV_MODE = "GSPLAT_LPT_MODE"  # optional mode for the environment default ("auto", "lpt", ...)


@dataclass(frozen=True)
class BackendChoice:
    name: str  # one of BACKENDS
    config: LPTConfig


_active_backend: contextvars.ContextVar[Optional[BackendChoice]] = contextvars.ContextVar(
    "gsplat_lpt_backend", default=None
)
# Schedule facts of each rasterize call inside one `rasterization(...)` call (channel chunks give several).
_schedule_reports: contextvars.ContextVar[Optional[List[Dict[str, Any]]]] = contextvars.ContextVar(
    "gsplat_lpt_reports", default=None
)

_originals: Dict[str, Callable] = {}
_fallback_warned: set = set()


_DEFAULT_CONFIG = LPTConfig()  # frozen: one instance serves every call that gives none


def _check_backend_name(backend: str) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"unknown gsplat backend {backend!r}; choose one of {BACKENDS}")
    return backend


def resolve_backend(backend: Optional[str], config: Optional[LPTConfig]) -> BackendChoice:
    """The backend for one call: explicit argument, else the enclosing context, else the environment."""
    if config is not None and not isinstance(config, LPTConfig):
        raise TypeError(f"lpt_config must be a gsplat_lpt.LPTConfig, got {type(config).__name__}")
    if backend is not None:
        return BackendChoice(_check_backend_name(backend), config or _DEFAULT_CONFIG)
    enclosing = _active_backend.get()
    if enclosing is not None:  # (as it is where no config is given: building a frozen record costs about 1 us)
        return enclosing if config is None else BackendChoice(enclosing.name, config)
    return environment_backend(config)


def environment_backend(config: Optional[LPTConfig] = None) -> BackendChoice:
    name = os.environ.get(ENV_BACKEND, "").strip().lower() or "cuda"
    if name not in BACKENDS:
        raise ValueError(f"environment variable {ENV_BACKEND}={name!r}; choose one of {BACKENDS}")
    if config is None:
        mode = os.environ.get(ENV_MODE, "").strip().lower() or "auto"
        if mode not in MODES:
            raise ValueError(f"environment variable {ENV_MODE}={mode!r}; choose one of {MODES}")
        config = LPTConfig(mode=mode)
    return BackendChoice(name, config)


@contextlib.contextmanager
def use_backend(backend: str = "lpt", config: Optional[LPTConfig] = None) -> Iterator[BackendChoice]:
    """Render every gsplat call inside the block with `backend` (also calls made by code you cannot edit)."""
    choice = BackendChoice(_check_backend_name(backend), config or _DEFAULT_CONFIG)
    token = _active_backend.set(choice)
    try:
        yield choice
    finally:
        _active_backend.reset(token)


def wants_report() -> bool:
    """True inside a hooked `rasterization` call: its meta collects the schedule facts."""
    return _schedule_reports.get() is not None


def record_schedule(report: Mapping) -> None:
    """Called by our rasterizers: adds one call's schedule facts to the enclosing `rasterization` meta."""
    reports = _schedule_reports.get()
    if reports is not None:
        reports.append(report)


def _make_dispatcher(function_name: str, original: Callable) -> Callable:
    @functools.wraps(original)
    def dispatch(*args, **kwargs):
        choice = resolve_backend(None, None)
        if choice.name == "cuda":
            return original(*args, **kwargs)
        variant = VARIANTS.get(function_name)
        if variant is None:
            if function_name not in _fallback_warned:
                _fallback_warned.add(function_name)
                warnings.warn(
                    f"gsplat_lpt: {function_name} has no LPT kernel yet; gsplat's own kernel renders it "
                    "(meta['lpt']['fallback'] says so)",
                    stacklevel=3,
                )
            record_schedule({"function": function_name, "fallback": "gsplat kernel (variant not implemented)"})
            return original(*args, **kwargs)
        *outputs, plan = variant.rasterize(*args, config=choice.config, **kwargs)
        if wants_report():
            record_schedule(ScheduleReport(plan.snapshot()) if plan is not None  # still right after later frames
                            else empty_report(variant, choice.config, "no images"))
        return tuple(outputs)

    dispatch.__gsplat_lpt_dispatcher__ = function_name
    return dispatch


def _merge_reports(reports: List[Mapping], mode: str) -> Mapping:
    """The first call's facts; with channel chunks (several calls), all of them under "channel_chunks".
    Lazy reports stay lazy: nothing is read back from the GPU here."""
    if not reports:
        return {"mode": mode}
    first = reports[0]
    if len(reports) == 1:
        return first
    if hasattr(first, "with_extra"):
        return first.with_extra(channel_chunks=reports)
    return {**first, "channel_chunks": reports}


def _require_cuda_inputs(names, args, kwargs) -> None:
    """backend="lpt" renders CUDA tensors: say so before gsplat's projection fails on a CPU tensor. `names`: the
    wrapped function's parameter names in order (for positional arguments). (Every call runs this: the values are
    looked at first, and the names only where one is not on a CUDA device.)"""
    for value in args:
        if isinstance(value, Tensor) and not value.is_cuda:  # (is_cuda: a fifth of device.type's time)
            break
    else:
        for value in kwargs.values():
            if isinstance(value, Tensor) and not value.is_cuda:
                break
        else:
            return
    for name, value in [*zip(names, args), *kwargs.items()]:
        if isinstance(value, Tensor) and not value.is_cuda:
            from .errors import LPTInputError

            available = "" if torch.cuda.is_available() else " (and no CUDA device is available on this machine)"
            raise LPTInputError(f"{name} is on {value.device}; backend='lpt' renders CUDA tensors only{available}")


# Feature maps that `gsplat.rasterization` hands to backend="lpt" whole where the caller leaves `channel_chunk` at its
# default (gsplat's calls of 32 channels): the widths the backend blends in 64-channel kernels without padding.
# H200, bonsai orbit 4 x 1080p, GPU time of the whole `rasterization` call against gsplat's, in calls of 32 channels
# -> whole (tests/device/bench_channel_chunk.py, the same images bit for bit): 64 channels 1.02x -> 1.19x, 128
# 1.02x -> 1.19x, 256 1.02x -> 1.21x. Other widths keep gsplat's chunks: whole, a 48-channel map (padded to 64)
# took 0.94x against 1.08x in chunks, a 96-channel one (padded to 128) 0.90x against 1.02x.
WHOLE_MAP_CHANNELS = (64, 128, 256, 512)


def _parameter_reader(function: Callable) -> Callable:
    """value(args, kwargs, name, default): an argument of `function` by name, given by keyword or by position."""
    import inspect

    try:
        positions = {name: i for i, name in enumerate(inspect.signature(function).parameters)}
    except (TypeError, ValueError):
        positions = {}

    def value(args, kwargs, name, default=None):
        if name in kwargs:
            return kwargs[name]
        position = positions.get(name)
        return args[position] if position is not None and position < len(args) else default

    value.positions = positions
    return value


def whole_map_chunk(args, kwargs, value) -> Optional[int]:
    """The channel_chunk that hands a `rasterization` call's feature map to the backend in one call, or None to
    keep the caller's: no channel_chunk given, 3DGS (no eval3d), colours without spherical harmonics whose
    blended width (plus the depth channel of RGB+D / RGB+ED) is one of WHOLE_MAP_CHANNELS, and no gradients
    (a training step keeps gsplat's chunks, so gsplat's backward runs on the widths it always had). The width is
    looked at first: most calls (RGB, a few channels) are answered there."""
    if "channel_chunk" in kwargs or len(args) > value.positions.get("channel_chunk", len(args)):
        return None
    colors = value(args, kwargs, "colors")
    if not isinstance(colors, Tensor) or colors.dim() == 0 or colors.shape[-1] + 1 < WHOLE_MAP_CHANNELS[0]:
        return None
    mode = value(args, kwargs, "render_mode", "RGB")
    if mode not in ("RGB", "RGB+D", "RGB+ED"):
        return None
    width = colors.shape[-1] + (mode != "RGB")
    if width not in WHOLE_MAP_CHANNELS:
        return None
    if value(args, kwargs, "sh_degree") is not None or value(args, kwargs, "with_eval3d", False) \
            or value(args, kwargs, "with_ut", False):
        return None
    if torch.is_grad_enabled():
        for name in ("means", "quats", "scales", "opacities", "colors", "viewmats", "Ks", "covars", "backgrounds"):
            tensor = value(args, kwargs, name)
            if isinstance(tensor, torch.Tensor) and tensor.requires_grad:
                return None
    return width


def _make_rasterization_wrapper(original: Callable, whole_maps: bool = False) -> Callable:
    """`original` wrapped to take backend= and lpt_config=; whole_maps: gsplat's `rasterization` (3DGS / 3DGUT),
    whose feature maps of WHOLE_MAP_CHANNELS go to backend="lpt" in one call (whole_map_chunk)."""
    value = _parameter_reader(original)

    @functools.wraps(original)
    def rasterization(*args, backend: Optional[str] = None, lpt_config: Optional[LPTConfig] = None, **kwargs):
        choice = resolve_backend(backend, lpt_config)
        if choice.name == "lpt":
            _require_cuda_inputs(value.positions, args, kwargs)
            chunk = whole_map_chunk(args, kwargs, value) if whole_maps else None
            if chunk is not None:
                kwargs["channel_chunk"] = chunk
        backend_token = _active_backend.set(choice)
        reports: List[Dict[str, Any]] = []
        reports_token = _schedule_reports.set(reports)
        try:
            outputs = original(*args, **kwargs)
        finally:
            _schedule_reports.reset(reports_token)
            _active_backend.reset(backend_token)
        meta = outputs[-1]
        if choice.name == "lpt" and isinstance(meta, dict):
            meta["lpt"] = _merge_reports(reports, choice.config.mode)
        return outputs

    rasterization.__gsplat_lpt_wrapper__ = True
    return rasterization


_DISPATCHED = ("rasterize_to_pixels", "rasterize_to_pixels_2dgs", "rasterize_to_pixels_eval3d")
_WRAPPED = ("rasterization", "rasterization_2dgs")


def install() -> None:
    """Idempotent: hook gsplat's rendering module and package namespace."""
    import gsplat
    import gsplat.rendering as rendering

    for name in _DISPATCHED:
        current = getattr(rendering, name)
        if getattr(current, "__gsplat_lpt_dispatcher__", None):
            continue
        _originals[name] = current
        setattr(rendering, name, _make_dispatcher(name, current))
    for name in _WRAPPED:
        current = getattr(rendering, name)
        if getattr(current, "__gsplat_lpt_wrapper__", False):
            continue
        _originals[name] = current
        wrapped = _make_rasterization_wrapper(current, whole_maps=name == "rasterization")
        setattr(rendering, name, wrapped)
        setattr(gsplat, name, wrapped)


def uninstall() -> None:
    """Restore gsplat exactly as it was (used by tests)."""
    import gsplat
    import gsplat.rendering as rendering

    for name, original in _originals.items():
        setattr(rendering, name, original)
        if name in _WRAPPED:
            setattr(gsplat, name, original)
    _originals.clear()


def original(name: str) -> Callable:
    """gsplat's own function, whether or not the hook is installed."""
    if name in _originals:
        return _originals[name]
    import gsplat.rendering as rendering

    return getattr(rendering, name)
