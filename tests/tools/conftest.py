"""Fixtures of the tools' tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def torch_projection(monkeypatch):
    """gsplat's CUDA projections, spherical harmonics and tiling replaced by its PyTorch implementation (the
    3DGS one stands in for the unscented projection, which has none); the calls are recorded."""
    import gsplat.cuda._wrapper as wrapper
    from gsplat.cuda._torch_impl import (
        _fully_fused_projection,
        _isect_offset_encode,
        _isect_tiles,
        _quat_scale_to_covar_preci,
        _spherical_harmonics,
    )
    from gsplat.cuda._torch_impl_2dgs import _fully_fused_projection_2dgs

    calls = []

    def projection(means, covars, quats, scales, viewmats, Ks, width, height, packed=False, near_plane=0.01,
                   far_plane=1e10, opacities=None, camera_model="pinhole", **rest):
        calls.append(("fully_fused_projection", camera_model))
        covars, _ = _quat_scale_to_covar_preci(quats, scales, compute_preci=False)
        return _fully_fused_projection(means, covars, viewmats, Ks, width, height, near_plane=near_plane,
                                       far_plane=far_plane, camera_model=camera_model)

    def projection_2dgs(means, quats, scales, viewmats, Ks, width, height, near_plane=0.01, far_plane=1e10,
                        packed=False, **rest):
        calls.append(("fully_fused_projection_2dgs", "pinhole"))
        return _fully_fused_projection_2dgs(means, quats, scales, viewmats, Ks, width, height, near_plane, far_plane)

    def projection_ut(means, quats, scales, opacities, viewmats, Ks, width, height, near_plane=0.01,
                      far_plane=1e10, camera_model="pinhole", **camera):
        calls.append(("fully_fused_projection_with_ut", camera_model, tuple(sorted(camera))))
        covars, _ = _quat_scale_to_covar_preci(quats, scales, compute_preci=False)
        return _fully_fused_projection(means, covars, viewmats, Ks, width, height, near_plane=near_plane,
                                       far_plane=far_plane, camera_model=camera_model)

    def harmonics(degree, dirs, coeffs, masks=None):
        calls.append(("spherical_harmonics", degree))
        return _spherical_harmonics(degree, dirs, coeffs)

    monkeypatch.setattr(wrapper, "fully_fused_projection", projection)
    monkeypatch.setattr(wrapper, "fully_fused_projection_2dgs", projection_2dgs)
    monkeypatch.setattr(wrapper, "fully_fused_projection_with_ut", projection_ut)
    monkeypatch.setattr(wrapper, "spherical_harmonics", harmonics)
    monkeypatch.setattr(wrapper, "isect_tiles", lambda *args, **kwargs: _isect_tiles(*args[:6]))
    monkeypatch.setattr(wrapper, "isect_offset_encode", _isect_offset_encode)
    return calls
