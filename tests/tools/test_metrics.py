"""gsplat_lpt/tools/metrics.py."""

import math

import pytest
import torch

from gsplat_lpt.tools.metrics import psnr


def test_psnr():
    image = torch.rand(2, 8, 8, 3)
    assert math.isinf(psnr(image, image))
    assert psnr(image + 0.01, image) == pytest.approx(40.0, abs=1e-4)
    assert psnr(torch.zeros(4, 4, 3) + 0.1, torch.zeros(4, 4, 3)) == pytest.approx(20.0)
    assert psnr(image * 2 + 0.02, image * 2, peak=2.0) == pytest.approx(40.0, abs=1e-4)
    with pytest.raises(ValueError, match="shapes differ"):
        psnr(image, image[:1])
