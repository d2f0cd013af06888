"""Per-unit timeline of our blending kernels on a GPU, for diagnosis (not part of the suite).

The kernel sources are copied to a temporary folder and instrumented there (the committed kernels are not
touched): thread 0 of every CTA records, per work unit, %smid and %globaltimer at its start, at the end of
its blending and at its end, with the unit's range and where it stopped; and per CTA its first and last
moment. Each call of a frame is traced on its own, so that slow and fast calls of the same plan can be laid
side by side.

    python3 tests/device/trace_units.py --out DIR [--frames moderate mild] [--calls 40]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

TRACE_HEADER = r"""
__device__ unsigned long long* lpt_trace_buffer;
__device__ int* lpt_trace_count;
__device__ int lpt_trace_capacity;
extern "C" __global__ void lpt_trace_set(unsigned long long* buffer, int* count, int capacity) {
    lpt_trace_buffer = buffer; lpt_trace_count = count; lpt_trace_capacity = capacity;
}
__device__ inline unsigned long long lpt_now() {
    unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t;
}
__device__ inline unsigned lpt_smid() { unsigned s; asm volatile("mov.u32 %0, %%smid;" : "=r"(s)); return s; }
__device__ inline void lpt_trace(unsigned kind, long long a, long long b, unsigned long long t0, unsigned long long t1,
                                 unsigned long long t2, long long x, long long y) {
    if (lpt_trace_buffer == nullptr) return;
    const int i = atomicAdd(lpt_trace_count, 1);
    if (i >= lpt_trace_capacity) return;
    unsigned long long* r = lpt_trace_buffer + 8ll * i;
    r[0] = kind | ((unsigned long long)lpt_smid() << 8) | ((unsigned long long)blockIdx.x << 24);
    r[1] = a; r[2] = b; r[3] = t0; r[4] = t1; r[5] = t2; r[6] = x; r[7] = y;
}
"""

# (anchor, text inserted after it): each anchor occurs exactly once in lpt_core.cuh
PATCHES = [
    # persistent kernel: CTA start, unit start, unit end, CTA end
    ("    const int queue_length = f.num_items - chunked_tiles;\n",
     "    const unsigned long long cta_t0 = lpt_now();\n"),
    ("        const int item = f.lpt_order[chunked_tiles + position];\n",
     "        const unsigned long long unit_t0 = lpt_now();\n"),
    ("        if (f.item_depth != nullptr && threadIdx.x == 0) f.item_depth[item] = stop_position - range_start;\n",
     "        if (threadIdx.x == 0) lpt_trace(1, position, item, unit_t0, lpt_now(), 0, range_end - range_start,"
     " stop_position - range_start);\n"),
    ("    leave_queue(f, LPT_WORD_LPT_COUNTER, LPT_WORD_LPT_EXITED);\n",
     "    if (threadIdx.x == 0) lpt_trace(3, blockIdx.x, 0, cta_t0, lpt_now(), 0, 0, 0);\n"),
    # chunk kernel
    ("    PersistentQueue queue(f.schedule + LPT_WORD_CHUNK_COUNTER);\n",
     "    const unsigned long long cta_t0 = lpt_now();\n"),
    ("        const int item = f.lpt_order[tile_slot];\n",
     "        const unsigned long long unit_t0 = lpt_now();\n"),
    ("        // the last chunk of the item to arrive composites all of them\n",
     "        const unsigned long long unit_t1 = lpt_now();\n"),
    ("        __syncthreads();  // the staged batch and the broadcast words are reused by the next unit\n",
     "        if (threadIdx.x == 0) lpt_trace(2, unit, item, unit_t0, unit_t1, lpt_now(),"
     " (long long)(chunk_start - range_start) | ((long long)(chunk_end - range_start) << 32),"
     " (long long)(stop_position - chunk_start) | ((long long)stopped << 32) | ((long long)last_arrival << 33)"
     " | ((long long)length << 40));\n"),
    ("    leave_queue(f, LPT_WORD_CHUNK_COUNTER, LPT_WORD_CHUNK_EXITED);\n",
     "    if (threadIdx.x == 0) lpt_trace(4, blockIdx.x, 0, cta_t0, lpt_now(), 0, 0, 0);\n"),
]

CAPACITY = 1 << 17


def instrumented_kernels(source: Path, target: Path) -> None:
    for path in source.iterdir():
        if path.is_file():
            shutil.copy(path, target / path.name)
    core = (target / "lpt_core.cuh").read_text()
    for anchor, added in PATCHES:
        if core.count(anchor) != 1:
            raise SystemExit(f"trace anchor not found once: {anchor!r}")
        core = core.replace(anchor, anchor + added)
    core = core.replace("namespace lpt {", TRACE_HEADER + "\nnamespace lpt {", 1)
    (target / "lpt_core.cuh").write_text(core)


def install_tracing(target: Path):
    """Point the compiler at the instrumented sources and export lpt_trace_set from every blending module."""
    from gsplat_lpt import compiler, runtime

    compiler.kernel_dir = lambda: target
    compiler.headers_digest.cache_clear()
    original = compiler.compile_kernels
    setters = []

    def compile_with_trace(source_name, names, structs, extra_checks, device_index, backend="nvrtc", options=()):
        kernels = original(source_name, tuple(names) + ("lpt_trace_set",), structs, extra_checks, device_index,
                           backend, options)
        setters.append(kernels[-1])
        return kernels[:-1]

    runtime.compile_kernels = compile_with_trace
    return setters


def decode(records: np.ndarray) -> dict:
    kind = (records[:, 0] & 0xFF).astype(int)
    sm = ((records[:, 0] >> 8) & 0xFFFF).astype(int)
    t = records[:, 3:6].astype(np.int64)
    origin = int(t[:, 0].min())
    out = {"units": [], "chunks": [], "ctas": []}
    for r, k, s, (t0, t1, t2) in zip(records, kind.tolist(), sm.tolist(), t.tolist()):
        t0, t1 = (t0 - origin) / 1e3, (t1 - origin) / 1e3
        if k == 1:
            out["units"].append(dict(pos=int(r[1]), item=int(r[2]), sm=s, t0=t0, t1=t1, length=int(r[6]),
                                     walked=int(r[7])))
        elif k == 2:
            x, y = int(r[6]), int(r[7])
            out["chunks"].append(dict(unit=int(r[1]), item=int(r[2]), sm=s, t0=t0, t1=t1, t2=(t2 - origin) / 1e3,
                                      start=x & 0xFFFFFFFF, end=x >> 32, walked=y & 0xFFFFFFFF,
                                      stopped=(y >> 32) & 1, composite=(y >> 33) & 1, length=y >> 40))
        elif k in (3, 4):
            out["ctas"].append(dict(kernel="lpt" if k == 3 else "chunk", block=int(r[1]), sm=s, t0=t0, t1=t1))
    return out


def sm_activity(ctas, span_us: float, sms: int = 132) -> float:
    """Share of SM time with at least one of our CTAs resident (from thread 0's first and last moment),
    over `span_us` on every SM: the kernels co-executing, as they do in a real call."""
    busy = 0.0
    for sm in range(sms):
        intervals = sorted((c["t0"], c["t1"]) for c in ctas if c["sm"] == sm)
        end = -1e30
        for t0, t1 in intervals:
            if t1 > end:
                busy += t1 - max(t0, end)
                end = t1
    return busy / (sms * span_us)


def sm_tails(trace: dict, sms: int = 132, heavy: int = 5000, last: int = 8) -> dict:
    """Which SMs end the frame, and why: per SM the end of its last LPT unit, the Gaussians its units walked, its
    units, and its first units (started within 2 us of the first) that walked more than `heavy` Gaussians; the
    `last` SMs to end, and each SM's pace (walked Gaussians per us of its span) against the median SM's. SMs that end
    last having walked no more than the others, at a slower pace, run the same work slower (H200, the probe band:
    SMs 124-131, `examples/results/band_trace_h200.txt`)."""
    units = trace["units"]
    if not units:
        return {}
    origin = min(u["t0"] for u in units)
    rows = {}
    for u in units:
        r = rows.setdefault(u["sm"], {"end": 0.0, "walked": 0, "units": 0, "heavy_first": 0})
        r["end"] = max(r["end"], u["t1"] - origin)
        r["walked"] += u["walked"]
        r["units"] += 1
        r["heavy_first"] += int(u["t0"] - origin < 2.0 and u["walked"] > heavy)
    paces = sorted(r["walked"] / max(r["end"], 1e-9) for r in rows.values())
    median_pace = paces[len(paces) // 2]
    ends = sorted(r["end"] for r in rows.values())
    slowest = sorted(rows, key=lambda sm: -rows[sm]["end"])[:last]
    return {"sms_seen": len(rows), "sms": sms, "end_median_us": round(ends[len(ends) // 2], 1),
            "end_max_us": round(ends[-1], 1),
            "last": [{"sm": sm, "end_us": round(rows[sm]["end"], 1), "walked": rows[sm]["walked"],
                      "units": rows[sm]["units"], "heavy_first": rows[sm]["heavy_first"],
                      "pace_x_median": round(rows[sm]["walked"] / max(rows[sm]["end"], 1e-9) / median_pace, 3)}
                     for sm in slowest]}


def summarise(trace: dict, ms: float, h: int, k: int) -> dict:
    units, chunks, ctas = trace["units"], trace["chunks"], trace["ctas"]
    lpt_ctas = [c for c in ctas if c["kernel"] == "lpt"]
    chunk_ctas = [c for c in ctas if c["kernel"] == "chunk"]
    s = {"ms": ms, "h": h, "k": k, "n_units": len(units), "n_chunks": len(chunks)}
    s["span_us"] = max(c["t1"] for c in ctas) - min(c["t0"] for c in ctas)
    s["sm_activity"] = sm_activity(ctas, s["span_us"])
    s["sm_activity_call"] = sm_activity(ctas, ms * 1e3)
    if lpt_ctas:
        s["lpt_cta_start"] = [min(c["t0"] for c in lpt_ctas), max(c["t0"] for c in lpt_ctas)]
        s["lpt_end"] = max(c["t1"] for c in lpt_ctas)
        ends = sorted(c["t1"] for c in lpt_ctas)
        s["lpt_cta_end_p10_p50"] = [ends[len(ends) // 10], ends[len(ends) // 2]]
    if chunk_ctas:
        s["chunk_cta_start"] = [min(c["t0"] for c in chunk_ctas), max(c["t0"] for c in chunk_ctas)]
        s["chunk_end"] = max(c["t1"] for c in chunk_ctas)
    if chunks:
        last = max(chunks, key=lambda c: c["t2"])
        s["last_chunk"] = {key: (round(v, 1) if isinstance(v, float) else v) for key, v in last.items()}
        blend = [c["t1"] - c["t0"] for c in chunks]
        s["chunk_blend_us"] = [round(min(blend), 1), round(statistics.median(blend), 1), round(max(blend), 1)]
        s["chunk_walked_total"] = sum(c["walked"] for c in chunks)
        s["chunks_stopped"] = sum(c["stopped"] for c in chunks)
        comp = [c["t2"] - c["t1"] for c in chunks if c["composite"]]
        s["composite_us"] = [round(min(comp), 1), round(max(comp), 1)] if comp else None
        s["chunk_start_spread"] = [round(min(c["t0"] for c in chunks), 1), round(max(c["t0"] for c in chunks), 1)]
        per_sm = np.bincount([c["sm"] for c in chunks], minlength=132)
        s["chunks_per_sm_max"] = int(per_sm.max())
    if units:
        s["units_walked_total"] = sum(u["walked"] for u in units)
        longest = max(units, key=lambda u: u["t1"] - u["t0"])
        s["longest_unit"] = {"us": round(longest["t1"] - longest["t0"], 1), "pos": longest["pos"],
                             "walked": longest["walked"], "t0": round(longest["t0"], 1)}
        busy = [c["t1"] - c["t0"] for c in lpt_ctas]
        s["lpt_cta_busy_us_mean_max"] = [round(statistics.mean(busy), 1), round(max(busy), 1)] if busy else None
        last_unit = max(units, key=lambda u: u["t1"])
        s["last_unit"] = {key: (round(v, 1) if isinstance(v, float) else v) for key, v in last_unit.items()}
        first_after_chunks = [u for u in units if chunks and u["t0"] > s.get("chunk_end", 0)]
        s["units_after_chunk_kernel"] = len(first_after_chunks)
        s["sm_tails"] = sm_tails(trace)
    return s


FIELDS = ("ms", "span_us", "sm_activity", "lpt_end", "chunk_end", "chunk_walked_total", "chunks_stopped",
          "units_walked_total", "units_after_chunk_kernel")


def compare_halves(key: str, rows) -> str:
    """Medians of the main fields over the faster and the slower half of the calls."""
    order = sorted(rows, key=lambda r: r["ms"])
    halves = (order[: len(order) // 2], order[len(order) // 2:])
    lines = [f"[halves] {key}"]
    for field in FIELDS:
        values = [[r[field] for r in half if r.get(field) is not None] for half in halves]
        if all(values):
            lines.append(f"[halves]   {field:26s} fast {statistics.median(values[0]):10.3f}   "
                         f"slow {statistics.median(values[1]):10.3f}")
    for half, label in zip(halves, ("fast", "slow")):
        if half and half[0].get("last_chunk"):
            lines.append(f"[halves]   last chunk ({label}): " + json.dumps(half[len(half) // 2]["last_chunk"]))
            lines.append(f"[halves]   chunk blend min/med/max us ({label}): {half[len(half) // 2]['chunk_blend_us']}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--frames", nargs="+", default=["moderate", "mild"], help="ladder frames, or garden")
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--configs", nargs="+", default=["auto", "fixed:0.02:4"], help="auto, lpt, auto-2px or fixed:RHO:K")
    parser.add_argument("--busy", action="store_true",
                        help="a sleep kernel ahead of each call: the call is enqueued before the GPU reaches it, "
                             "as when the host runs ahead")
    parser.add_argument("--side-priority", type=int, default=None,
                        help="replace the chunk kernel's stream by one of this priority (0: the default one's)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    temp = Path(tempfile.mkdtemp(prefix="lpt_trace_"))
    from gsplat_lpt import compiler

    instrumented_kernels(compiler.kernel_dir(), temp)
    setters = install_tracing(temp)

    import gsplat_lpt
    from gsplat_lpt import LPTConfig
    from bench_core import garden_frame, ladder_frames

    buffer = torch.zeros(CAPACITY * 8, dtype=torch.int64, device="cuda")
    count = torch.zeros(1, dtype=torch.int32, device="cuda")
    results = {}
    frames = list(ladder_frames([f for f in args.frames if f != "garden"]))
    if "garden" in args.frames:
        frames.append(garden_frame())
    for name, frame in frames:
        for spec in args.configs:
            if spec in ("auto", "lpt"):
                config = LPTConfig(mode=spec)
            elif spec == "auto-2px":
                config = LPTConfig(mode="auto", pixels_per_thread=2)
            else:
                _, rho, k = spec.split(":")
                config = LPTConfig(mode="fixed", heavy_ratio=float(rho), chunk_count=int(k))
            stream = torch.cuda.Stream()
            if args.side_priority is not None:
                gsplat_lpt.rasterize_to_pixels(**frame, config=config)  # (the rasterizer exists)
                from gsplat_lpt import runtime
                for rasterizer in runtime._rasterizers.values():
                    rasterizer.side_stream = torch.cuda.Stream(priority=args.side_priority)
                    rasterizer._side = rasterizer.side_stream.cuda_stream
            rows, traces = [], []
            with torch.cuda.stream(stream):
                for call in range(args.calls + 3):
                    if setters:
                        for setter in setters:
                            setter((1,), (1,), (np.uint64(buffer.data_ptr()), np.uint64(count.data_ptr()),
                                                np.int32(CAPACITY)))
                    count.zero_()
                    if args.busy:
                        torch.cuda._sleep(2_000_000)
                    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    _, _, stats = gsplat_lpt.rasterize_to_pixels(**frame, config=config, return_stats=True)
                    stop.record()
                    stop.synchronize()
                    if call < 3:
                        continue
                    n = min(int(count.item()), CAPACITY)
                    records = buffer[: n * 8].view(n, 8).cpu().numpy().astype(np.uint64)
                    trace = decode(records)
                    summary = summarise(trace, start.elapsed_time(stop), stats["chunked_tiles"], stats["chunk_count"])
                    rows.append(summary)
                    traces.append(trace)
            key = (f"{name}|{spec}{'|busy' if args.busy else ''}"
                   f"{'' if args.side_priority is None else f'|side{args.side_priority}'}")
            results[key] = rows
            (args.out / f"trace_{name.split(':')[-1].split()[0]}_{spec.replace(':', '_')}.json").write_text(
                json.dumps(traces[:12] + [traces[i] for i in np.argsort([r['ms'] for r in rows])[-4:]]))
            times = sorted(r["ms"] for r in rows)
            print(f"{key}: ms p10 {times[len(times) // 10]:.3f} p50 {statistics.median(times):.3f} "
                  f"p90 {times[9 * len(times) // 10]:.3f}", flush=True)
            for r in rows:
                print("  ", json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()}),
                      flush=True)
            print(compare_halves(key, rows), flush=True)
    (args.out / "trace_summary.json").write_text(json.dumps(results, indent=1))
    print_spans(results)


def print_spans(results: dict) -> None:
    print("\n[spans] frame|config: blending kernels' span per call (us) median / slowest; calls whose chunk "
          "CTAs started after the LPT kernel's; SM activity median (our CTAs resident, kernels co-executing)")
    for key, rows in results.items():
        spans = [r["span_us"] for r in rows]
        late = sum(1 for r in rows if "chunk_cta_start" in r and r["chunk_cta_start"][0] > r["lpt_cta_start"][0])
        activity = statistics.median(r["sm_activity"] for r in rows)
        print(f"[spans] {key:<40} {statistics.median(spans):7.1f} / {max(spans):7.1f}   late {late:2d} of "
              f"{len(rows):2d}   SM {activity:6.1%}")


if __name__ == "__main__":
    main()
