"""Input validation at the boundary (CPU): every bad argument is named in the error."""

from __future__ import annotations

import pytest
import torch

import gsplat_lpt
from gsplat_lpt import LPTConfig
from gsplat_lpt.rasterize import LPTInputError, _pad_channels, validate_inputs


def frame(C=1, N=5, D=3, tiles=(2, 3), width=40, height=30, tile_size=16):
    return dict(
        means2d=torch.zeros(C, N, 2), conics=torch.zeros(C, N, 3), colors=torch.zeros(C, N, D),
        opacities=torch.zeros(C, N), image_width=width, image_height=height, tile_size=tile_size,
        isect_offsets=torch.zeros(C, *tiles, dtype=torch.int32), flatten_ids=torch.zeros(0, dtype=torch.int32),
    )


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(conics=torch.zeros(1, 5, 2)), r"conics has shape \(1, 5, 2\), expected \(1, 5, 3\)"),
        (dict(opacities=torch.zeros(1, 4)), "opacities has shape"),
        (dict(colors=torch.zeros(1, 5, 3, dtype=torch.float64)), "colors must have dtype torch.float32"),
        (dict(colors=torch.zeros(1, 5, 0)), "0 channels"),
        (dict(colors=torch.zeros(1, 5, 600)), "600 channels"),
        (dict(isect_offsets=torch.zeros(1, 2, 3)), "isect_offsets must have dtype torch.int32"),
        (dict(isect_offsets=torch.zeros(2, 2, 3, dtype=torch.int32)), "isect_offsets has image dims"),
        (dict(flatten_ids=torch.zeros(2, 2, dtype=torch.int32)), "flatten_ids must be 1-D"),
        (dict(image_width=100), "smaller than the 30x100 image"),
        (dict(image_height=0), "image_height must be a positive int"),
        (dict(tile_size=64, isect_offsets=torch.zeros(1, 1, 1, dtype=torch.int32)), "at most 32"),
        (dict(means2d=[[0.0, 0.0]]), "means2d must be a torch.Tensor, got list"),
    ],
)
def test_bad_input_is_named(change, message):
    with pytest.raises(LPTInputError, match=message):
        validate_inputs(**{**frame(), **change})


def test_bad_backgrounds_and_masks():
    with pytest.raises(LPTInputError, match="backgrounds has shape"):
        validate_inputs(**frame(), backgrounds=torch.zeros(2, 3))
    with pytest.raises(LPTInputError, match="masks must have dtype torch.bool"):
        validate_inputs(**frame(), masks=torch.ones(1, 2, 3))
    with pytest.raises(LPTInputError, match="masks has shape"):
        validate_inputs(**frame(), masks=torch.ones(1, 3, 3, dtype=torch.bool))


def test_cpu_tensors_are_refused_with_the_reason():
    message = "means2d is on cpu; the lpt backend renders CUDA tensors only"
    if not torch.cuda.is_available():
        message += r" \(and no CUDA device is available on this machine\)"
    with pytest.raises(LPTInputError, match=message):
        gsplat_lpt.rasterize_to_pixels(**frame(), config=LPTConfig(mode="lpt"))


def test_valid_shapes_pass_until_the_device_check():
    with pytest.raises(LPTInputError, match="on cpu"):
        validate_inputs(**frame(C=2, tiles=(2, 3)), backgrounds=torch.zeros(2, 3),
                        masks=torch.ones(2, 2, 3, dtype=torch.bool))


def test_packed_shapes():
    packed = dict(frame(), means2d=torch.zeros(7, 2), conics=torch.zeros(7, 3), colors=torch.zeros(7, 3),
                  opacities=torch.zeros(7))
    with pytest.raises(LPTInputError, match="on cpu"):
        validate_inputs(**packed, packed=True)
    with pytest.raises(LPTInputError, match=r"opacities has shape \(6,\)"):
        validate_inputs(**{**packed, "opacities": torch.zeros(6)}, packed=True)


def test_config_type_is_checked():
    with pytest.raises(TypeError, match="LPTConfig"):
        gsplat_lpt.rasterize_to_pixels(**frame(), config="auto")


def test_channel_padding_like_gsplat():
    colors, backgrounds, padding = _pad_channels(torch.ones(2, 5, 6), torch.ones(2, 6))
    assert padding == 2 and colors.shape == (2, 5, 8) and backgrounds.shape == (2, 8)
    assert torch.all(colors[..., 6:] == 0)
    colors, backgrounds, padding = _pad_channels(torch.ones(2, 5, 3), None)
    assert padding == 0 and colors.shape == (2, 5, 3) and backgrounds is None


@pytest.mark.parametrize("bad", [dict(mode="fastest"), dict(chunk_count=0), dict(heavy_ratio=1.5),
                                 dict(chunk_counts=(1, 2)), dict(min_gain=1.0), dict(overhead_lambda=-1.0)])
def test_config_validation(bad):
    with pytest.raises(ValueError, match="LPTConfig"):
        LPTConfig(**bad)
