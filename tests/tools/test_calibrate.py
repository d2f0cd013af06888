"""Calibration of lambda and beta (CPU: the fitting logic on hand-made measurements)."""

from __future__ import annotations

import pytest

from gsplat_lpt.tools.calibrate import FrameMeasurements, candidate_heights, fit, policy_choice, regret


def frame_with_one_heavy_tile():
    # one tile of 20,000 in a flat field of 50s; K = 256: LPT is bound by the heavy tile
    head = [20_000] + [50] * 600
    total = sum(head) + 50 * 3000
    # chunking the heavy tile k ways shortens the frame to ~20/k ms; more chunked tiles only add overhead
    times = {(h, k): 20.0 / k + 1.0 + 0.02 * h for h in (1, 2, 4) for k in (2, 4, 8, 16)}
    return FrameMeasurements("heavy", head, total, 256, lpt_ms=20.0, schedule_ms=times)


def flat_frame():
    head = [60] * 4 + [10] * 996  # four slightly heavier tiles in a flat field
    times = {(h, k): 1.2 + 0.01 * h for h in (1, 2, 4) for k in (2, 4, 8, 16)}  # chunking only costs
    return FrameMeasurements("flat", head, 60 * 4000, 256, lpt_ms=1.0, schedule_ms=times)


def test_candidate_heights_geometric():
    assert candidate_heights(0) == []
    assert candidate_heights(5) == [1, 2, 4]
    assert candidate_heights(5000, limit=64) == [1, 2, 4, 8, 16, 32, 64]


def test_policy_choice_among_measured_schedules():
    heavy, flat = frame_with_one_heavy_tile(), flat_frame()
    assert policy_choice(flat, 256.0, 0.25) is None  # flat: LPT only
    assert policy_choice(heavy, 256.0, 0.25) == (1, 16)  # chunk the heavy tile deeply


def test_regret_is_one_when_the_policy_picks_the_best():
    frames = [frame_with_one_heavy_tile(), flat_frame()]
    assert regret(frames, 256.0, 0.25) == pytest.approx(1.0)
    assert regret(frames, 0.0, 5.0) > 1.0  # chunks the flat frame: slower than LPT there
    best = fit(frames)
    assert best["mean_slowdown_vs_best"] == pytest.approx(1.0)
    assert len(best["grid"]) > 10


def test_fit_prefers_parameters_that_avoid_useless_chunking():
    # With lambda = 0 and a high beta the model chunks the flat frame too, which the measurements punish.
    frames = [frame_with_one_heavy_tile(), flat_frame()]
    assert regret(frames, 0.0, 5.0) >= regret(frames, fit(frames)["overhead_lambda"], fit(frames)["imbalance_beta"])
