"""Per-item time of the heaviest LPT items, per Gaussian walked, against the frame's mean (diagnosis, not part of
the suite). The kernels are instrumented as tests/device/trace_units.py instruments them; each case is one call
(the median of 7 by GPU time) of a ladder frame, in `auto` and in the fixed schedules on either side of the
policy's cliff (the fewest chunked items that reach the best time, from the dense fixed grid). `pace` 1 is the
frame's mean time per Gaussian walked over all its units: items of about the same list length differ by more
than 2x, which list lengths (and stop depths) cannot tell.

    python3 tests/device/trace_pace.py OUT_DIR
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import trace_units  # noqa: E402  (the instrumented kernels)

# frame: configs ("auto" or fixed:RHO:K; the two fixed schedules lie either side of the cliff)
CASES = {
    "mild": ["fixed:0.0005:16", "fixed:0.00075:16", "auto"],
    "mixed": ["fixed:0.0005:8", "fixed:0.00075:8", "auto"],
    "foliage": ["fixed:0.0015:16", "fixed:0.002:16", "auto"],
    "severe": ["fixed:0.0015:32", "fixed:0.002:32", "auto"],
    "extreme": ["fixed:0.0015:64", "fixed:0.002:64", "auto"],
    "moderate": ["fixed:0.002:16", "fixed:0.003:16", "auto"],
}
CALLS, WARMUP = 7, 4


def config_of(spec: str):
    from gsplat_lpt import LPTConfig

    if spec == "auto":
        return LPTConfig(mode="auto")
    _, rho, k = spec.split(":")
    return LPTConfig(mode="fixed", heavy_ratio=float(rho), chunk_count=int(k))


def median_call(frame, config, setters, buffer, count):
    """The traced call of median GPU time: (ms, decoded trace, h, k)."""
    import gsplat_lpt

    calls = []
    for call in range(WARMUP + CALLS):
        for setter in setters:
            setter((1,), (1,), (np.uint64(buffer.data_ptr()), np.uint64(count.data_ptr()),
                                np.int32(trace_units.CAPACITY)))
        count.zero_()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        _, _, stats = gsplat_lpt.rasterize_to_pixels(**frame, config=config, return_stats=True)
        stop.record()
        stop.synchronize()
        if call < WARMUP:
            continue
        n = min(int(count.item()), trace_units.CAPACITY)
        trace = trace_units.decode(buffer[: n * 8].view(n, 8).cpu().numpy().astype(np.uint64))
        calls.append((start.elapsed_time(stop), trace, stats["chunked_tiles"], stats["chunk_count"]))
    calls.sort(key=lambda c: c[0])
    return calls[len(calls) // 2]


def summary(trace) -> dict:
    units, chunks, ctas = trace["units"], trace["chunks"], trace["ctas"]
    busy = sum(u["t1"] - u["t0"] for u in units) + sum(c["t2"] - c["t0"] for c in chunks)
    walked = sum(u["walked"] for u in units) + sum(c["walked"] for c in chunks)
    us_per_walked = busy / max(1, walked)
    top = sorted(units, key=lambda u: u["pos"])[:24]  # the LPT kernel's heaviest items (its first positions)
    rows = [{"pos": u["pos"], "item": u["item"], "length": u["length"], "walked": u["walked"],
             "us": round(u["t1"] - u["t0"], 1), "t0": round(u["t0"], 1), "t1": round(u["t1"], 1),
             "pace": round((u["t1"] - u["t0"]) / max(1, u["walked"]) / us_per_walked, 3)} for u in top]
    return {"span": max(c["t1"] for c in ctas) - min(c["t0"] for c in ctas), "us_per_walked": us_per_walked,
            "lpt_end": max((c["t1"] for c in ctas if c["kernel"] == "lpt"), default=0.0),
            "chunk_end": max((c["t1"] for c in ctas if c["kernel"] == "chunk"), default=0.0),
            "top_units": rows, "n_units": len(units), "n_chunks": len(chunks)}


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    from gsplat_lpt import compiler

    instrumented = Path(tempfile.mkdtemp(prefix="lpt_pace_"))
    trace_units.instrumented_kernels(compiler.kernel_dir(), instrumented)
    setters = trace_units.install_tracing(instrumented)
    from bench_core import ladder_frames

    buffer = torch.zeros(trace_units.CAPACITY * 8, dtype=torch.int64, device="cuda")
    count = torch.zeros(1, dtype=torch.int32, device="cuda")
    result = {}
    for name, frame in ladder_frames(list(CASES)):
        short = name.split(":")[-1]
        for spec in CASES[short]:
            ms, trace, h, k = median_call(frame, config_of(spec), setters, buffer, count)
            row = {"ms": ms, "h": h, "k": k, **summary(trace)}
            result[f"{short}|{spec}"] = row
            print(f"{short:9s} {spec:18s} ms {ms:.3f} (h,k)=({h},{k}) span {row['span']:.0f} "
                  f"lpt_end {row['lpt_end']:.0f} chunk_end {row['chunk_end']:.0f} "
                  f"us/walked*1e3 {row['us_per_walked'] * 1e3:.3f}", flush=True)
            for unit in row["top_units"][:10]:
                print("     ", unit)
    (out / "trace_pace.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
