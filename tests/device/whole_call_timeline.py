"""Where a host-bound loop of whole `gsplat.rasterization` calls spends its time, backend "cuda" against "lpt" and the
hook alone (backend "lpt", every frame handed to gsplat's blend): the host time of the steps gsplat's rasterization
calls (the packed projection and `isect_tiles`, which wait for the GPU inside, `isect_offset_encode`, the blend
call) and of the rest, per call, the kinds interleaved round by round; and, at the projection's entry, whether the
previous call's blend was still running on the GPU (then the projection's wait includes it: our GPU work exposed)
and the blend's GPU span (CUDA events around the blend call).

If the projection and `isect_tiles` take longer in the "lpt" loop while the previous blend has already finished
when the projection starts, the difference lies on the host (gsplat's own operations running slower beside our
code); if the blend is often still running there, our GPU work is on the loop's critical path.

    python3 tests/device/whole_call_timeline.py [--size 640x480] [--gaussians 20000] [--rounds 11] [--calls 40]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from whole_calls import whole_calls  # noqa: E402

import gsplat.rendering as rendering  # noqa: E402  (whole_calls() imports gsplat_lpt, hooking gsplat, before the
#                                                   Recorder wraps the steps' globals, the hook's dispatcher among them)

STEPS = ("fully_fused_projection", "isect_tiles", "isect_offset_encode", "rasterize_to_pixels")


class Recorder:
    """Wraps gsplat.rendering's step functions (module globals looked up at call time) to time them per call."""

    def __init__(self):
        self.host = {step: 0.0 for step in STEPS}  # this call's host us per step
        self.blend_events = None  # (start, end) CUDA events of the last blend call
        self.blend_running_at_projection = None  # bool for this call, None before the first blend
        self.originals = {step: getattr(rendering, step) for step in STEPS}

    def install(self):
        for step in STEPS:
            setattr(rendering, step, self._wrap(step, self.originals[step]))

    def uninstall(self):
        for step, function in self.originals.items():
            setattr(rendering, step, function)

    def _wrap(self, step, function):
        def timed(*args, **kwargs):
            if step == "fully_fused_projection" and self.blend_events is not None:
                self.blend_running_at_projection = not self.blend_events[1].query()
            if step == "rasterize_to_pixels":
                start_event, end_event = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start_event.record()
            start = time.perf_counter_ns()
            result = function(*args, **kwargs)
            self.host[step] += (time.perf_counter_ns() - start) / 1e3
            if step == "rasterize_to_pixels":
                end_event.record()
                self.blend_events = (start_event, end_event)
            return result

        return timed


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="640x480")
    parser.add_argument("--gaussians", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--calls", type=int, default=40)
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    kinds = whole_calls(width, height, args.gaussians)
    recorder = Recorder()
    recorder.install()
    columns = ("call", *STEPS, "rest", "blend GPU", "blend running")
    samples = {kind: {c: [] for c in columns} for kind in kinds}
    try:
        for round_index in range(args.rounds + 1):  # round 0 warms up
            for kind, call in kinds.items():
                torch.cuda.synchronize()
                recorder.blend_events, recorder.blend_running_at_projection = None, None
                pending = []
                for _ in range(args.calls):
                    recorder.host = {step: 0.0 for step in STEPS}
                    start = time.perf_counter_ns()
                    call()
                    call_us = (time.perf_counter_ns() - start) / 1e3
                    pending.append((call_us, dict(recorder.host), recorder.blend_events,
                                    recorder.blend_running_at_projection))
                torch.cuda.synchronize()
                if round_index == 0:
                    continue
                for call_us, host, events, running in pending[1:]:  # (the first call follows a sync)
                    samples[kind]["call"].append(call_us)
                    for step in STEPS:
                        samples[kind][step].append(host[step])
                    samples[kind]["rest"].append(call_us - sum(host.values()))
                    samples[kind]["blend GPU"].append(events[0].elapsed_time(events[1]) * 1e3)
                    samples[kind]["blend running"].append(1.0 if running else 0.0)
    finally:
        recorder.uninstall()
    print(f"== {width}x{height}, {args.gaussians} Gaussians: {args.rounds} rounds of {args.calls} whole calls back to "
          f"back, the kinds interleaved; medians per call in us (host time of each step; 'rest': the call's host "
          f"time outside them; 'blend GPU': CUDA events around the blend call), 'blend running': share of calls whose "
          f"previous blend was still running when the projection started")
    print(f"{'kind':<11}" + "".join(f"{c[:22]:>24}" for c in columns))
    for kind in kinds:
        row = samples[kind]
        cells = [f"{statistics.median(row[c]):24.1f}" for c in columns[:-1]]
        cells.append(f"{statistics.mean(row['blend running']):24.2f}")
        print(f"{kind:<11}" + "".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
