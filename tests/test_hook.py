"""The gsplat hook: backend flag, context manager, environment variable, meta reporting."""

from __future__ import annotations

import gsplat
import gsplat.rendering
import pytest
import torch

import gsplat_lpt
from gsplat_lpt import LPTConfig, hook
from gsplat_lpt.errors import LPTInputError


def test_import_installs_dispatchers_and_wrappers():
    for name in ("rasterize_to_pixels", "rasterize_to_pixels_2dgs", "rasterize_to_pixels_eval3d"):
        assert getattr(getattr(gsplat.rendering, name), "__gsplat_lpt_dispatcher__") == name
    assert gsplat.rasterization is gsplat.rendering.rasterization
    assert gsplat.rasterization.__gsplat_lpt_wrapper__
    assert gsplat.rasterization_2dgs.__gsplat_lpt_wrapper__


def test_install_is_idempotent_and_uninstall_restores():
    dispatcher = gsplat.rendering.rasterize_to_pixels
    gsplat_lpt.install()
    assert gsplat.rendering.rasterize_to_pixels is dispatcher
    original = hook.original("rasterize_to_pixels")
    gsplat_lpt.uninstall()
    try:
        assert gsplat.rendering.rasterize_to_pixels is original
        assert not hasattr(gsplat.rasterization, "__gsplat_lpt_wrapper__")
    finally:
        gsplat_lpt.install()
    assert gsplat.rendering.rasterize_to_pixels.__gsplat_lpt_dispatcher__ == "rasterize_to_pixels"


def recording_dispatcher(function="rasterize_to_pixels"):
    calls = []

    def gsplat_original(*args, **kwargs):
        calls.append(("gsplat", args, kwargs))
        return "gsplat-result"

    return hook._make_dispatcher(function, gsplat_original), calls


def test_default_backend_is_gsplat(monkeypatch):
    monkeypatch.delenv(hook.ENV_BACKEND, raising=False)
    dispatch, calls = recording_dispatcher()
    assert dispatch(1, 2, x=3) == "gsplat-result"
    assert calls == [("gsplat", (1, 2), {"x": 3})]


def test_context_manager_routes_to_lpt_and_restores():
    dispatch, calls = recording_dispatcher()
    cpu_inputs = (torch.zeros(1, 4, 2), torch.zeros(1, 4, 3), torch.zeros(1, 4, 3), torch.zeros(1, 4), 16, 16, 16,
                  torch.zeros(1, 1, 1, dtype=torch.int32), torch.zeros(0, dtype=torch.int32))
    with gsplat_lpt.use_backend("lpt"):
        with pytest.raises(LPTInputError, match="means2d is on cpu"):
            dispatch(*cpu_inputs)  # reached our rasterizer, which refuses CPU tensors by name
        with gsplat_lpt.use_backend("cuda"):
            assert dispatch(0) == "gsplat-result"
    assert dispatch(0) == "gsplat-result"
    assert len(calls) == 2


def test_environment_variable_selects_backend(monkeypatch):
    dispatch, calls = recording_dispatcher()
    monkeypatch.setenv(hook.ENV_BACKEND, "lpt")
    monkeypatch.setenv(hook.ENV_MODE, "chunk")
    choice = hook.resolve_backend(None, None)
    assert choice.name == "lpt" and choice.config.mode == "chunk"
    with pytest.raises(LPTInputError):
        dispatch(torch.zeros(1, 4, 2), torch.zeros(1, 4, 3), torch.zeros(1, 4, 3), torch.zeros(1, 4), 16, 16, 16,
                 torch.zeros(1, 1, 1, dtype=torch.int32), torch.zeros(0, dtype=torch.int32))
    monkeypatch.setenv(hook.ENV_BACKEND, "warp")
    with pytest.raises(ValueError, match="GSPLAT_LPT_BACKEND"):
        hook.resolve_backend(None, None)
    monkeypatch.setenv(hook.ENV_BACKEND, "lpt")
    monkeypatch.setenv(hook.ENV_MODE, "fastest")
    with pytest.raises(ValueError, match="GSPLAT_LPT_MODE"):
        hook.resolve_backend(None, None)


def test_unknown_backend_lists_choices():
    with pytest.raises(ValueError, match=r"unknown gsplat backend 'triton'.*'cuda', 'lpt'"):
        gsplat.rasterization(None, None, None, None, None, None, None, 1, 1, backend="triton")
    with pytest.raises(ValueError, match="unknown gsplat backend"):
        with gsplat_lpt.use_backend("fast"):
            pass


def test_bad_config_type_is_rejected():
    with pytest.raises(TypeError, match="LPTConfig"):
        gsplat.rasterization(None, None, None, None, None, None, None, 1, 1, backend="lpt", lpt_config={"mode": "lpt"})


def test_rasterization_wrapper_reports_schedule_in_meta():
    """The wrapper sets the backend for gsplat's inner calls and merges what they report into meta."""
    seen = []

    def fake_rasterization(*args, **kwargs):
        choice = hook.resolve_backend(None, None)
        seen.append(choice)
        hook.record_schedule({"mode": choice.config.mode, "imbalance": 3.5})
        return "colors", "alphas", {"width": 8}

    wrapped = hook._make_rasterization_wrapper(fake_rasterization)
    colors, alphas, meta = wrapped(backend="lpt", lpt_config=LPTConfig(mode="lpt"))
    assert seen[-1].name == "lpt" and seen[-1].config.mode == "lpt"
    assert meta == {"width": 8, "lpt": {"mode": "lpt", "imbalance": 3.5}}
    _, _, meta = wrapped(backend="cuda")
    assert "lpt" not in meta and seen[-1].name == "cuda"
    assert hook._active_backend.get() is None  # restored after the call


def test_channel_chunked_calls_are_all_reported():
    def fake_rasterization():
        hook.record_schedule({"mode": "auto", "chunk": 0})
        hook.record_schedule({"mode": "auto", "chunk": 1})
        return None, None, {}

    _, _, meta = hook._make_rasterization_wrapper(fake_rasterization)(backend="lpt")
    assert meta["lpt"]["chunk"] == 0 and len(meta["lpt"]["channel_chunks"]) == 2


def test_unimplemented_variant_falls_back_to_gsplat_and_says_so(monkeypatch):
    from gsplat_lpt import variants

    monkeypatch.delitem(variants.VARIANTS, "rasterize_to_pixels_2dgs", raising=False)
    dispatch, calls = recording_dispatcher("rasterize_to_pixels_2dgs")
    reports = []
    token = hook._schedule_reports.set(reports)
    try:
        with gsplat_lpt.use_backend("lpt"), pytest.warns(UserWarning, match="rasterize_to_pixels_2dgs"):
            hook._fallback_warned.discard("rasterize_to_pixels_2dgs")
            assert dispatch(0) == "gsplat-result"
    finally:
        hook._schedule_reports.reset(token)
    assert reports and "fallback" in reports[0]


def test_cpu_tensors_through_the_flag_are_named_before_gsplat_runs():
    """gsplat's projection would fail on CPU tensors with an ImportError about its CUDA extension."""
    means = torch.zeros(4, 3)
    quats, scales = torch.zeros(4, 4), torch.ones(4, 3)
    with pytest.raises(LPTInputError, match="means is on cpu; backend='lpt' renders CUDA tensors only"):
        gsplat.rasterization(means, quats, scales, torch.ones(4), torch.ones(4, 3), torch.eye(4)[None],
                             torch.eye(3)[None], 8, 8, backend="lpt")
    with pytest.raises(LPTInputError, match="Ks is on cpu"):  # keyword arguments are checked too
        gsplat.rasterization(None, None, None, None, None, None, Ks=torch.eye(3)[None], width=8, height=8,
                             backend="lpt")


def test_launch_runs_a_script_with_the_hook(tmp_path, monkeypatch, capsys):
    from gsplat_lpt import launch

    script = tmp_path / "user_script.py"
    script.write_text("import gsplat, sys\nprint('hooked', gsplat.rasterization.__gsplat_lpt_wrapper__, sys.argv[1:])\n")
    launch.main([str(script), "--flag"])
    assert "hooked True ['--flag']" in capsys.readouterr().out


def whole_map_chunk(*args, **kwargs):
    return hook.whole_map_chunk(args, kwargs, hook._parameter_reader(hook.original("rasterization")))


def gaussians(channels, grad=False):
    means, quats, scales, opacities = torch.zeros(5, 3), torch.zeros(5, 4), torch.zeros(5, 3), torch.zeros(5)
    means.requires_grad_(grad)
    return means, quats, scales, opacities, torch.zeros(5, channels), torch.eye(4)[None], torch.eye(3)[None], 8, 6


@pytest.mark.parametrize("channels, render_mode, expected", [
    (64, "RGB", 64), (128, "RGB", 128), (256, "RGB", 256), (512, "RGB", 512), (63, "RGB+D", 64), (127, "RGB+ED", 128),
    (64, "RGB+D", None), (32, "RGB", None), (48, "RGB", None), (96, "RGB", None), (65, "RGB", None),
    (64, "D", None), (3, "RGB", None)])
def test_whole_feature_maps_go_to_the_backend_in_one_call(channels, render_mode, expected):
    assert whole_map_chunk(*gaussians(channels), render_mode=render_mode) == expected


def test_a_given_channel_chunk_spherical_harmonics_eval3d_or_gradients_keep_gsplats_chunks():
    args = gaussians(64)
    assert whole_map_chunk(*args, channel_chunk=32) is None
    positional = list(args) + [None] * 20  # every argument up to channel_chunk and beyond, by position
    assert whole_map_chunk(*positional) is None
    assert whole_map_chunk(*args, sh_degree=0) is None
    assert whole_map_chunk(*args, with_eval3d=True, with_ut=True) is None
    assert whole_map_chunk(*gaussians(64, grad=True)) is None
    with torch.no_grad():  # inference with parameters that would take gradients
        assert whole_map_chunk(*gaussians(64, grad=True)) == 64
    assert whole_map_chunk(means=args[0], quats=args[1], scales=args[2], opacities=args[3], colors=args[4],
                           viewmats=args[5], Ks=args[6], width=8, height=6) == 64


def test_rasterization_hands_whole_maps_to_lpt_only(monkeypatch):
    import functools

    seen = []

    @functools.wraps(hook.original("rasterization"))
    def fake_rasterization(*args, **kwargs):
        seen.append(kwargs.get("channel_chunk"))
        return None, None, {}

    monkeypatch.setattr(hook, "_require_cuda_inputs", lambda *args: None)  # (CPU tensors here)
    rasterization = hook._make_rasterization_wrapper(fake_rasterization, whole_maps=True)
    rasterization(*gaussians(128), backend="lpt")
    rasterization(*gaussians(128), backend="cuda")
    rasterization(*gaussians(128), backend="lpt", channel_chunk=16)
    hook._make_rasterization_wrapper(fake_rasterization)(*gaussians(128), backend="lpt")  # (2DGS: not whole)
    assert seen == [128, None, 16, None]
