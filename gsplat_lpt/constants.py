"""Every number that Python and the CUDA kernels must agree on, in one place.

The kernels never spell these numbers: `cuda_header()` turns this module into `#define LPT_...` lines
that the runtime puts in front of every kernel source it compiles (kernels/lpt_core.cuh refuses to
compile without them). Struct layouts are checked the same way: see `gsplat_lpt.layouts`.
"""

from __future__ import annotations

from typing import Dict, Tuple

# gsplat 1.5.3's blending constants (Common.h and the forward kernels): a Gaussian is skipped where its
# alpha is below 1/255; a pixel stops (exclusive) once T (1 - alpha) would fall to 1e-4 or below.
# (C expression, Python value): the C side keeps gsplat's spelling so it rounds exactly as gsplat's does.
ALPHA_THRESHOLD: Tuple[str, float] = ("(1.f / 255.f)", 1.0 / 255.0)
TRANSMITTANCE_THRESHOLD: Tuple[str, float] = ("1e-4f", 1e-4)
MAX_ALPHA: Tuple[str, float] = ("0.999f", 0.999)

# Words of the int32 `schedule` array of a workspace (the plan writes h and k; the blending kernels
# take work from the queue counters; the last CTA out of each kernel resets its counters, so a plan
# can run again and a frame can be replayed from a CUDA graph).
SCHEDULE_WORDS = (
    "lpt_counter",  # next LPT queue position (minus the first K, taken by blockIdx)
    "lpt_exited",  # CTAs of the persistent kernel that have left its loop
    "chunk_counter",  # next chunk unit (minus the first grid, taken by blockIdx)
    "chunk_exited",  # CTAs of the chunk kernel that have left its loop
    "chunked_tiles",  # h: the first h items of the LPT order are chunked
    "chunk_count",  # k: depth chunks per chunked item
    "nonempty_items",  # work items with at least one intersection (masked items count as empty)
    "head_count",  # leading items of the LPT order that are exactly sorted
    "wanted_chunk_units",  # h k the policy would have chosen without the partial-buffer capacity
    "error",  # ERROR_* bits of this frame (written whole by the plan, then or-ed by the blending kernels)
    "plan_error",  # scratch: error bits the plan's CTAs find, moved to "error" by the last one
    "plan_arrivals",  # CTAs of a plan kernel that have finished (the last one completes the step)
    "max_cost",  # largest predicted item cost (N_1 without saturation feedback)
    "max_cost_scratch",  # scratch of the plan's CTAs, moved to "max_cost" by the last one
    "finished_kernels",  # blending kernels of the frame that have finished (the last writes the status)
    "plan_mode",  # PLAN_MODES value the frame was planned in
    "pixels_per_thread",  # pixels per thread of the persistent kernel that runs this frame (1 or 2)
    "pixels_wanted",  # what the plan's rule asks of the next frames (1 or 2; the host reads it back)
    "persistent_rows",  # 1: the frame is latency-bound (ROWS_MIN_IMBALANCE): rows where FrameArgs.warp_blocks bit 4 says
)
SCHEDULE = {name: index for index, name in enumerate(SCHEDULE_WORDS)}
SCHEDULE_SIZE = 20  # words allocated (>= len(SCHEDULE_WORDS))

# Words the persistent kernel copies to mapped host memory when a frame ends, read by the next call
# without waiting for the GPU: capacity growth and deferred input errors.
# last_chunking_frame: the frame index of the last auto frame that chunked or wanted to (0: none yet); frames
# that neither chunk nor want to leave it as it is, so the host sees it whichever frame finished last.
STATUS_WORDS = ("frame_index", "error", "wanted_chunk_units", "chunked_tiles", "chunk_count", "plan_mode",
                "last_chunking_frame")
STATUS = {name: index for index, name in enumerate(STATUS_WORDS)}
# After those words, a ring of the last STATUS_RING frames' answers to "how many pixels per thread should later
# frames of this view take": frame f writes word STATUS_WORDS + f % STATUS_RING as
# (f & STATUS_RING_FRAME_MASK) << 2 | pixels, one word so that the host never reads half of it. Cameras taken in turn
# on one stream and read back a cycle at a time (a loop that waits after each round of a rig's views) finish several
# frames between two reads; the ring keeps each one's answer, where one word kept only the last frame's, and a view
# that never finished last never saw its own (tests/device/camera_cycle.py).
STATUS_RING = 16  # a power of two
STATUS_RING_FRAME_MASK = (1 << 29) - 1
STATUS_SIZE = len(STATUS_WORDS) + STATUS_RING
# "auto" leaves out the chunk kernel (and its stream fork and join) once no frame of the last this many that finished
# chunked or wanted to. Cameras taken in turn on one stream (a driving rig whose front view is heavy, the side views
# balanced) keep it while any one of them needs it: the host sees the last chunking frame's index whichever camera
# finished last, so a heavy view is not rendered unchunked because a balanced one happened to finish before it.
CHUNKING_MEMORY_FRAMES = 32

# Error bits, set on the GPU, reported by the host (gsplat_lpt.frontend.LPTInputError).
ERROR_OFFSETS = 1  # isect_offsets decreasing, negative or past the end of flatten_ids
ERROR_FLATTEN_IDS = 2  # a flatten_ids entry outside [0, number of Gaussian rows)
ERROR_LAUNCH = 4  # a blending kernel was launched with less shared memory than it needs (a bug)
ERROR_MESSAGES: Dict[int, str] = {
    ERROR_OFFSETS: "isect_offsets must be non-decreasing offsets into flatten_ids, as isect_offset_encode makes "
                   "them (the frame was rendered as NaN)",
    ERROR_FLATTEN_IDS: "flatten_ids holds an index outside the Gaussian arrays (those entries were skipped)",
    ERROR_LAUNCH: "a gsplat_lpt kernel was launched with too little shared memory (please report this)",
}

# Plan modes (kernels/plan.cu): which schedule the policy writes.
PLAN_MODES = {"lpt": 0, "auto": 1, "chunk": 2, "fixed": 3}

# The plan sorts work items by cost with a counting sort over buckets: costs within one bucket differ
# by less than 2^(1 / 2^BUCKET_SUB_BITS) (4.4%). The leading items (HEAD_CAPACITY at most) are then
# sorted exactly (cost descending, item ascending): the policy reads exact costs there, and the set of
# chunked items is deterministic.
BUCKET_SUB_BITS = 4
BUCKET_COUNT = 32 << BUCKET_SUB_BITS  # 31 exponent octaves of an int32 cost + the empty bucket
HEAD_CAPACITY = 2048
PLAN_THREADS = 1024  # threads per CTA of the plan kernels, one work item each
# On GPUs with thread-block clusters (compute capability 9.0 and later) the plan is one launch of one cluster of
# PLAN_CLUSTER CTAs (plan_cluster), for frames of up to PLAN_CLUSTER * PLAN_THREADS * PLAN_CLUSTER_ITEMS items
# (each thread keeps its items in registers); larger frames, and older GPUs, take the two launches of many CTAs
# (plan_costs, plan_order).
PLAN_CLUSTER = 8  # CTAs of the cluster (the portable maximum)
PLAN_CLUSTER_ITEMS = 4  # work items per thread of plan_cluster
MAX_CHUNK_COUNTS = 8  # candidate k values the auto policy searches

# Blending: at most this many Gaussians are staged per batch (gsplat stages one per thread of a 16 x 16 tile).
MAX_BATCH = 256
MAX_TILE_SIZE = 32  # 1024 threads per CTA

# Saturation feedback: an item's cost is predicted from the depth (list position) at which the same item
# of the previous frame stopped; chunk ranges cover the predicted depth times this margin.
DEPTH_MARGIN = 1.25

# Two pixels per thread (a variant that has them): more throughput, but each item takes longer on its own.
# The plan asks for two pixels per thread where nothing is chunked and the longest item is at most this
# fraction of the frame's mean work per CTA, N_total / K (K of the one-pixel kernel). The host reads that back
# from the last finished frame of the same view and launches the one persistent kernel it asks for. One NVIDIA H200, `lpt` with
# two pixels / with one, GPU time (tests/device/probe_two_pixels_chunked.py --lpt: ladder frames and batches of
# them, the bonsai seen from 1-6 cameras at 540p-1080p and several distances, the garden cameras), by imbalance
# N_1 / (N_total / K):
#   colours (up to 4 channels, staged): every frame up to 1.34 gained, 0.78-0.89 (balanced 0.82, bonsai orbit
#     0.78-0.83, mild x 3 at 0.62 0.84, moderate x 4 at 1.09 0.84, the bonsai at 1.34 0.89); from 1.41 to 1.70
#     it went both ways (the bonsai at 1.41 0.92, moderate x 3 at 1.44 0.84, foliage x 4 at 1.70 0.84; the
#     bonsai from two cameras at 1.43 1.02, the garden at 1.51 1.10); from 2.0 on it mostly lost (mild 1.14,
#     moderate x 2 1.03, single ladder frames 1.14-1.46; the far bonsai at 4K, 2.26, gained, 0.91). The bound
#     sits below the first frame that lost.
#   16 channels (the bonsai orbit, tests/device/bench_shapes.py --bonsai-views; x gsplat's blend, two pixels /
#     one): imbalance 0.42 1.35x / 1.15x, 0.56 1.44x / 1.43x, 0.66 1.25x / 1.51x.
TWO_PIXEL_MAX_IMBALANCE = 1.4  # up to STAGED_COLOR_CHANNELS channels
TWO_PIXEL_MAX_IMBALANCE_FEATURES = 0.5  # more channels (feature maps, up to TWO_PIXEL_MAX_CHANNELS)
STAGED_COLOR_CHANNELS = 4  # rows of at most one float4 are staged with the batch (lpt_core.cuh, kStagedColor)

# Where a frame has many items per CTA (at least TWO_PIXEL_MANY_ITEMS_PER_CTA non-empty items per CTA of the one-pixel
# kernel: batches of images, wide frames), LPT packs the items finely and the longer time of each item at two pixels
# shows later: the bound on the heaviest item is then TWO_PIXEL_MAX_IMBALANCE_MANY_ITEMS. Same measurements, by
# imbalance (non-empty items per CTA), two pixels / one: with 29-118 items per CTA every frame from 1.43 to 1.46
# gained, 0.82-0.93 (moderate x 3 at 1.43-1.44 0.84 in two runs, veil x 12 1.43 0.93, street x 12 1.46 0.82), and
# further up rig x 5 1.66 0.84, foliage x 4 1.70 0.84, street x 10 1.74 0.92, but veil x 10 (tiles that saturate
# early) lost at 1.67, 1.05; with 4-18 items per CTA the bonsai and garden frames lost from 1.43 on (1.02-1.29).
TWO_PIXEL_MANY_ITEMS_PER_CTA = 20
TWO_PIXEL_MAX_IMBALANCE_MANY_ITEMS = 1.6  # up to STAGED_COLOR_CHANNELS channels (feature maps: the bound above)


def two_pixel_max_imbalance(channels: int) -> float:
    """The plan's bound on the longest item, as a fraction of N_total / K, for two pixels per thread."""
    return TWO_PIXEL_MAX_IMBALANCE if channels <= STAGED_COLOR_CHANNELS else TWO_PIXEL_MAX_IMBALANCE_FEATURES


def two_pixel_many_items_max(channels: int) -> float:
    """... in a frame of at least TWO_PIXEL_MANY_ITEMS_PER_CTA non-empty items per CTA."""
    return TWO_PIXEL_MAX_IMBALANCE_MANY_ITEMS if channels <= STAGED_COLOR_CHANNELS else TWO_PIXEL_MAX_IMBALANCE_FEATURES


# In a frame auto chunks, the LPT kernel (beside the chunk kernel) also runs two pixels per thread where the longest
# unit left, l = max(N_1 / k, N_{h+1}), is at most this fraction of N_total / K: an item of the two-pixel kernel
# takes up to about three times as long as at one pixel, and the unit must still end well within the mean work per
# CTA. One NVIDIA H200, batches of B images of the ladder's street scenes (tests/device/probe_two_pixels_chunked.py),
# GPU time, two pixels / one at l / mean: 6-camera rig x 2 0.13 0.84, rig 0.26 0.90, street x 4 0.27 0.95, foliage x 3
# 0.27 0.96, moderate x 2 0.30 1.01-1.02, veil x 3 0.34 1.02, extreme x 3 0.41 0.98, street x 2 0.50-0.52 1.06, mild
# 0.52 1.21, every single image of the ladder 0.52-1.09 1.19-1.36. The bound sits below the first frame that lost.
# Colours only (up to STAGED_COLOR_CHANNELS channels: feature maps were not measured so, and keep one pixel there).
TWO_PIXEL_CHUNKED_MAX = 0.28


def two_pixel_chunked_max(channels: int) -> float:
    """The plan's bound on the longest unit left after chunking, as a fraction of N_total / K, for two pixels per
    thread in a chunked frame (0: never)."""
    return TWO_PIXEL_CHUNKED_MAX if channels <= STAGED_COLOR_CHANNELS else 0.0


# ... and only up to this many channels: a thread then keeps twice the colour sums, and with more it spills
# (one NVIDIA H200, bonsai orbit, x gsplat's blend, two pixels / one: 128 channels 0.93x / 1.53x, 256 channels
# 0.60x / 1.00x; at 32 and 64 channels the one-pixel kernel was as fast or faster, 1.02x / 1.02x, 1.11x / 1.33x).
TWO_PIXEL_MAX_CHANNELS = 16
# 3DGS and 2DGS feature maps of more channels are blended this many channels at a time, one plan for every
# slice (kernels/blend_3dgs.cu, Gaussian3DGSChannelSlice; kernels/blend_2dgs.cu, Surfel2DGSColorSlice and
# Surfel2DGSSlice): the 64-channel kernels keep their sums in 128 registers, where the unsliced kernels of 128-512
# channels spill them. One NVIDIA H200, bonsai orbit, x gsplat's blend, unsliced / sliced: 3DGS 128 channels
# 1.53x / 1.69x, 256 1.00x / 2.38x, 512 0.98x / 3.58x (513: 3.45x); 2DGS (padded) 128 1.92x / 2.01x, 256 1.05x /
# 1.61x, 512 0.99x / 2.49x.
CHANNEL_SLICE = 64

# Warp shapes (LPTConfig.warp_shape): where nothing is chunked and the longest item exceeds this multiple of
# the frame's mean work per CTA, the frame lasts as long as that item (the plan's persistent_rows word), and the
# persistent kernel of a variant whose "auto" bits ask for it (config.WARP_BLOCK_BITS, bit 4: 2DGS, 3DGUT) gives its
# warps rows of the tile, whose cull test visits fewer rows per Gaussian (on such items, long lists of small
# Gaussians, the test is much of the work); elsewhere 8 x 4 blocks where the warp shape asks for them. 3DGS's test
# on scaled batches costs the same for any box, and its "auto" keeps blocks there too (Variant.auto_warp_blocks).
ROWS_MIN_IMBALANCE = 5.0


def cuda_header() -> str:
    """The `#define` block put in front of every kernel source."""
    lines = ["// generated from gsplat_lpt/constants.py: do not edit"]
    lines.append(f"#define LPT_ALPHA_THRESHOLD {ALPHA_THRESHOLD[0]}")
    lines.append(f"#define LPT_TRANSMITTANCE_THRESHOLD {TRANSMITTANCE_THRESHOLD[0]}")
    lines.append(f"#define LPT_MAX_ALPHA {MAX_ALPHA[0]}")
    for name, index in SCHEDULE.items():
        lines.append(f"#define LPT_WORD_{name.upper()} {index}")
    lines.append(f"#define LPT_SCHEDULE_SIZE {SCHEDULE_SIZE}")
    for name, index in STATUS.items():
        lines.append(f"#define LPT_STATUS_{name.upper()} {index}")
    lines.append(f"#define LPT_STATUS_WORDS {len(STATUS_WORDS)}")
    lines.append(f"#define LPT_STATUS_RING {STATUS_RING}")
    lines.append(f"#define LPT_STATUS_RING_FRAME_MASK {STATUS_RING_FRAME_MASK}")
    lines.append(f"#define LPT_ERROR_OFFSETS {ERROR_OFFSETS}")
    lines.append(f"#define LPT_ERROR_FLATTEN_IDS {ERROR_FLATTEN_IDS}")
    lines.append(f"#define LPT_ERROR_LAUNCH {ERROR_LAUNCH}")
    for name, value in PLAN_MODES.items():
        lines.append(f"#define LPT_MODE_{name.upper()} {value}")
    lines.append(f"#define LPT_BUCKET_SUB_BITS {BUCKET_SUB_BITS}")
    lines.append(f"#define LPT_BUCKET_COUNT {BUCKET_COUNT}")
    lines.append(f"#define LPT_HEAD_CAPACITY {HEAD_CAPACITY}")
    lines.append(f"#define LPT_PLAN_THREADS {PLAN_THREADS}")
    lines.append(f"#define LPT_PLAN_CLUSTER {PLAN_CLUSTER}")
    lines.append(f"#define LPT_PLAN_CLUSTER_ITEMS {PLAN_CLUSTER_ITEMS}")
    lines.append(f"#define LPT_MAX_CHUNK_COUNTS {MAX_CHUNK_COUNTS}")
    lines.append(f"#define LPT_MAX_BATCH {MAX_BATCH}")
    lines.append(f"#define LPT_DEPTH_MARGIN {DEPTH_MARGIN!r}f")
    lines.append(f"#define LPT_ROWS_MIN_IMBALANCE {ROWS_MIN_IMBALANCE!r}")
    assert len(SCHEDULE_WORDS) <= SCHEDULE_SIZE
    return "\n".join(lines) + "\n"
