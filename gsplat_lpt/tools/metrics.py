"""Image metrics the tools report."""

from __future__ import annotations

import math

import torch


def psnr(image: torch.Tensor, reference: torch.Tensor, peak: float = 1.0) -> float:
    """Peak signal-to-noise ratio in dB (float64 mean squared error); inf when the images are identical."""
    if image.shape != reference.shape:
        raise ValueError(f"psnr: shapes differ: {tuple(image.shape)} vs {tuple(reference.shape)}")
    mse = float(torch.mean((image.double() - reference.double()) ** 2))
    return math.inf if mse == 0.0 else 10.0 * math.log10(peak * peak / mse)
