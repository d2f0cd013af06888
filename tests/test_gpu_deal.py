"""GPU: the persistent kernel's first work units dealt by SM (kernels/lpt_core.cuh, DealtQueue).

Whatever the deal, every tile is blended exactly once: mode "lpt" stays gsplat's bit for bit, a chunked frame renders
the floats it renders with the first units taken by CTA index, and the last CTA out leaves the SM counters and the
queue counter at zero for the next frame. Besides the device's own SM count, the runtime's count is overridden to
make the kernel take the paths a real GPU rarely takes: half the SMs (the CTAs on the other half find no dealt
position and flag the queue; the dealt positions of their rounds are taken by CTAs that find the queue empty) and
more "SMs" than the device has (up to one per CTA: the CTAs beyond an SM's rounds flag the queue, and the positions
of the "SMs" that do not exist are taken that way).
"""

from __future__ import annotations

import pytest
import torch

from gsplat_lpt import LPTConfig, constants

from test_gpu_parity import cameras, gsplat_forward, ours_forward, project, random_gaussians

pytestmark = pytest.mark.gpu

DEALS = ("device", "half", "many", "off")


@pytest.fixture(scope="module")
def frame():
    # 4 x 960 tiles (more than the two-pixel kernel's K on an H200), a faint cluster making a few tiles heavy
    return project(*random_gaussians(30000, seed=5, cluster=30000), *cameras(4, 640, 384), 640, 384, 16, 3, seed=3)


def rasterizer_of(frame):
    from gsplat_lpt.runtime import rasterizer_for
    from gsplat_lpt.variants import VARIANTS

    return rasterizer_for(VARIANTS["rasterize_to_pixels"], 3, 16, frame["means2d"].device)


def render_dealt(frame, deal: str, config: LPTConfig):
    """Three frames with the runtime's SM count set by `deal`; the last one's outputs."""
    rasterizer = rasterizer_of(frame)
    sms = torch.cuda.get_device_properties(frame["means2d"].device).multi_processor_count
    two = config.pixels_per_thread == 2
    grid = rasterizer._persistent_launches[two, True][1]
    # "many": the most "SMs" that divide the grid within the workspace's counters (a CTA per "SM" where they fit)
    many = max(d for d in range(1, constants.DEALT_SM_LIMIT + 1) if grid % d == 0)
    assert many > sms
    dealt = {"device": rasterizer.dealt_sms, "half": sms // 2, "many": many, "off": 0}[deal]
    assert dealt == 0 or grid % dealt == 0, (grid, dealt)  # (else the kernel deals nothing)
    saved = rasterizer.dealt_sms
    try:
        rasterizer.dealt_sms = dealt  # (read when a new config object arrives: each call below passes the same one)
        for _ in range(3):
            outputs = ours_forward(frame, config)
    finally:
        rasterizer.dealt_sms = saved
    torch.cuda.synchronize()
    workspace = rasterizer.workspace(torch.cuda.current_stream())
    assert int(workspace.sm_taken.abs().sum()) == 0
    assert int(workspace.schedule[constants.SCHEDULE["lpt_counter"]]) == 0
    assert int(workspace.schedule[constants.SCHEDULE["lpt_exited"]]) == 0
    return outputs


def test_the_device_deals_by_sm(frame):
    """On a GPU whose SM ids are 0 .. SMs - 1 (every GPU these tests run on so far) the deal is on."""
    sms = torch.cuda.get_device_properties(frame["means2d"].device).multi_processor_count
    assert rasterizer_of(frame).dealt_sms == sms


@pytest.mark.parametrize("deal", DEALS)
@pytest.mark.parametrize("pixels_per_thread", [1, 2])
def test_lpt_is_gsplat_whatever_the_deal(frame, deal, pixels_per_thread):
    colors, alphas, last_ids, plan = render_dealt(frame, deal, LPTConfig(mode="lpt", pixels_per_thread=pixels_per_thread))
    assert plan.report()["pixels_per_thread"] == pixels_per_thread
    ref_colors, ref_alphas, ref_last_ids = gsplat_forward(frame)
    assert torch.equal(colors, ref_colors) and torch.equal(alphas, ref_alphas)
    assert torch.equal(last_ids, ref_last_ids.reshape(last_ids.shape))


@pytest.mark.parametrize("deal", DEALS[:3])
def test_a_chunked_frame_renders_the_same_floats_whatever_the_deal(frame, deal):
    # (no saturation feedback: the chunks' bounds then depend on this frame alone, not on the frames before)
    config = dict(mode="fixed", heavy_ratio=0.01, chunk_count=8, pixels_per_thread=1, saturation_feedback=False)
    colors, alphas, _, plan = render_dealt(frame, deal, LPTConfig(**config))
    assert plan.report()["chunked_tiles"] > 0
    by_index = render_dealt(frame, "off", LPTConfig(**config))
    assert torch.equal(colors, by_index[0]) and torch.equal(alphas, by_index[1])


def test_the_config_switch_turns_the_deal_off(frame):
    config = LPTConfig(mode="lpt", deal_by_sm=False)
    colors, alphas, _, _ = ours_forward(frame, config)
    workspace = rasterizer_of(frame).workspace(torch.cuda.current_stream())
    assert workspace.frame_args.dealt_sms == 0
    ref_colors, ref_alphas, _ = gsplat_forward(frame)
    assert torch.equal(colors, ref_colors) and torch.equal(alphas, ref_alphas)
