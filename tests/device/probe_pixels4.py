"""A probe (examples/results/JOURNAL.md, "A done pixel marked by T's sign; four pixels per thread and walk lists tried"): a persistent
3DGS kernel of four pixels per thread (64-thread CTAs of a 16 x 16 tile) against the two-pixel kernel, in lpt mode,
GPU time with the host hidden, on real and balanced frames. The four-pixel kernel is the core's template at P = 4,
compiled from a temporary copy of kernels/ whose ResidentThreads gives P = 4 its own bound (-DLPT_P4_RESIDENT: 1024
or 768 resident threads), and launched by the cached Rasterizer in place of its two-pixel kernel (with its own K from
the occupancy API), each warp on rows (16 x 8 pixels) or blocks (8 x 16). Every image is checked against gsplat's
bit for bit. --ncu-call: one profiled lpt call of the two-pixel kernel and one of gsplat's on the bonsai orbit,
for Nsight Compute (examples/results/README.md gives the command).

    python3 tests/device/probe_pixels4.py [--resident 1024 768] [--repeats 21] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import (bonsai_gaussians, bonsai_view_frame, garden_frame, ladder_frames, on_stream,  # noqa: E402
                        project, time_interleaved)

import gsplat_lpt  # noqa: E402
from gsplat_lpt import LPTConfig, compiler, runtime  # noqa: E402
from gsplat_lpt.hook import original  # noqa: E402
from gsplat_lpt.variants.gaussian3d import VARIANT  # noqa: E402


def patched_kernel_dir() -> Path:
    target = Path(tempfile.mkdtemp()) / "kernels"
    shutil.copytree(compiler.kernel_dir(), target)
    core = target / "lpt_core.cuh"
    text = core.read_text()
    old = "static constexpr unsigned value = P == 1 ? 1536 : 1280;"
    assert old in text
    text = text.replace(old, "static constexpr unsigned value = P == 1 ? 1536 : P == 2 ? 1280 : LPT_P4_RESIDENT;")
    core.write_text(text.replace("namespace lpt {", "#ifndef LPT_P4_RESIDENT\n#define LPT_P4_RESIDENT 1024\n#endif\nnamespace lpt {", 1))
    return target


def build_p4(resident: int):
    names = VARIANT.kernel_names(3, 64, 4)
    kernels = compiler.compile_kernels(VARIANT.kernel_source, names, VARIANT.kernel_structs(),
                                       VARIANT.extra_checks() + VARIANT.export_line(3, 64, 4), 0,
                                       VARIANT.compile_backend,
                                       tuple(VARIANT.compile_options()) + (f"-DLPT_P4_RESIDENT={resident}",))
    return kernels[0]


def frames():
    yield "bonsai orbit 4x1080p", project(*bonsai_gaussians(4, 1920, 1080))
    yield "bonsai 2x1080p", project(*bonsai_gaussians(2, 1920, 1080))
    yield "bonsai 4x720p", project(*bonsai_gaussians(4, 1280, 720))
    yield "bonsai 1x1080p r3.5", project(*bonsai_gaussians(1, 1920, 1080, 3.5))
    for name in ("bonsai-far", "bonsai-close"):
        label, frame = bonsai_view_frame(name)
        yield label, frame
    label, frame = garden_frame()
    yield label, frame
    yield from ladder_frames(["balanced", "mild"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--resident", type=int, nargs="+", default=[1024, 768])
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--ncu-call", action="store_true", help="one profiled lpt call (2px) on the bonsai orbit")
    args = parser.parse_args()
    if args.ncu_call:
        frame = project(*bonsai_gaussians(4, 1920, 1080))
        config = LPTConfig(mode="lpt", pixels_per_thread=2)
        for _ in range(4):
            gsplat_lpt.rasterize_to_pixels(**frame, config=config)
            original("rasterize_to_pixels")(**frame)
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        gsplat_lpt.rasterize_to_pixels(**frame, config=config)
        original("rasterize_to_pixels")(**frame)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
        return

    # the patched copy only adds a branch for P = 4: P = 1 and 2 compile to the same kernels
    compiler.kernel_dir = lambda directory=patched_kernel_dir(): directory
    compiler.headers_digest.cache_clear()
    compiler.compile_kernels.cache_clear()
    runtime.reset_rasterizers()
    from cupy_backends.cuda.api import driver

    lpt2 = LPTConfig(mode="lpt", pixels_per_thread=2)
    rows = []
    for label, frame in frames():
        call_ref = lambda: original("rasterize_to_pixels")(**frame)  # noqa: E731
        reference = call_ref()
        ours = lambda: gsplat_lpt.rasterize_to_pixels(**frame, config=lpt2)  # noqa: E731
        ours()
        rasterizer = runtime.rasterizer_for(VARIANT, 3, frame["tile_size"], torch.device("cuda", 0))
        saved = dict(rasterizer._persistent_launches)  # (two pixels, last_ids) -> (kernel, K, threads, dependent)
        variants = {"gsplat": call_ref, "lpt-2px": on_stream(torch.cuda.Stream(), ours)}
        facts = {}
        for resident in args.resident:
            kernel = build_p4(resident)
            per_sm = driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.kernel.ptr, 64, rasterizer.shared_bytes)
            k4 = per_sm * torch.cuda.get_device_properties(0).multi_processor_count
            for shape in ("rows", "blocks"):
                stream = torch.cuda.Stream()

                def call(kernel=kernel, k4=k4, shape=shape, stream=stream):
                    for last_ids in (True, False):  # the four-pixel kernel of 64 threads where two pixels run
                        rasterizer._persistent_launches[True, last_ids] = (kernel.kernel.ptr, k4, 64, None)
                    try:
                        return gsplat_lpt.rasterize_to_pixels(**frame, config=lpt2)
                    finally:
                        rasterizer._persistent_launches.update(saved)

                def call_shaped(call=call, shape=shape, stream=stream):
                    workspace = rasterizer.workspace(stream)
                    result = call()
                    # the frame arguments are filled in once per config: the next call keeps this bit
                    bits = workspace.frame_args.warp_blocks
                    workspace.frame_args.warp_blocks = (bits | 8) if shape == "blocks" else (bits & ~8)
                    return result

                name = f"lpt-4px-{resident}-{shape}"
                wrapped = on_stream(stream, call_shaped)
                for _ in range(2):
                    result = wrapped()  # (the second call runs with the bit set)
                torch.cuda.synchronize()
                exact = all(torch.equal(a, b) for a, b in zip(result[:2], reference[:2]))
                facts[name] = {"exact": exact, "ctas_per_sm": per_sm,
                               "regs": kernel.attributes.get("num_regs") if hasattr(kernel, "attributes") else None,
                               "local_bytes": kernel.attributes.get("local_size_bytes") if hasattr(kernel, "attributes") else None}
                variants[name] = wrapped
        two = gsplat_lpt.rasterize_to_pixels(**frame, config=lpt2)
        torch.cuda.synchronize()
        facts["lpt-2px"] = {"exact": all(torch.equal(a, b) for a, b in zip(two[:2], reference[:2]))}
        times = time_interleaved(variants, args.repeats, busy=True)
        row = {"frame": label, "ms": times, "facts": facts}
        rows.append(row)
        base = times["gsplat"]
        print(f"{label}: gsplat {base:.3f} ms; " + "; ".join(
            f"{name} {base / ms:.3f}x{'' if facts.get(name, {}).get('exact', True) else ' NOT EXACT'}"
            for name, ms in times.items() if name != "gsplat"), flush=True)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "probe_pixels4.json").write_text(json.dumps(rows, indent=1))
    print("\nframe | gsplat ms | " + " | ".join(n for n in rows[0]["ms"] if n != "gsplat"))
    for row in rows:
        base = row["ms"]["gsplat"]
        print(f"{row['frame'][:28]:28s} | {base:.3f} | " + " | ".join(
            f"{base / ms:.2f}" for n, ms in row["ms"].items() if n != "gsplat"))
    for name, fact in rows[0]["facts"].items():
        print(name, fact)


if __name__ == "__main__":
    main()
