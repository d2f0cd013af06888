"""Host images of the structs the kernels take by value, and the compile-time checks that keep both sides equal.

Every kernel takes its arguments as one or two structs (`lpt::FrameArgs`, `lpt::PlanArgs`, a variant's
`Params` and `Outputs`). The C++ structs are written in kernels/; their host twins are `ctypes.Structure`s
here (ctypes lays fields out as the C compiler does). Two checks keep both sides equal: `layout_checks`
appends a `static_assert` on each struct's size to the compiled source (a field added on one side only is
a compile error), and `layout_probe` adds a kernel that writes every field's offset (a struct nested by value,
field by field), which the runtime runs once after compiling and compares with the host twin (NVRTC has no
compile-time offsetof).
"""

from __future__ import annotations

import ctypes
from typing import Iterable, List, Sequence, Tuple, Type

from .constants import MAX_CHUNK_COUNTS

Pointer = ctypes.c_uint64  # device addresses, passed as 64-bit integers


class FrameArgs(ctypes.Structure):
    """lpt::FrameArgs (kernels/lpt_core.cuh): one frame's schedule and intersections."""

    _fields_ = [
        ("schedule", Pointer),  # int32 [SCHEDULE_SIZE]
        ("lpt_order", Pointer),  # int32 [num_items] work items, heaviest predicted cost first
        ("sorted_costs", Pointer),  # int32 [num_items] predicted cost of lpt_order[i]
        ("saturation_flags", Pointer),  # int32 [chunk tile capacity] first chunk whose pixels all saturated
        ("chunk_arrivals", Pointer),  # int32 [chunk tile capacity] chunks of the tile that have finished
        ("partials", Pointer),  # float32 [chunk units][partial floats][block]
        ("item_depth", Pointer),  # int32 [num_items] list position where each item stopped (feedback), or 0
        ("status", Pointer),  # int32 [STATUS_SIZE] mapped host memory, or 0
        ("tile_offsets", Pointer),  # int32 [num_items]
        ("flatten_ids", Pointer),  # int32 [n_isects]
        ("masks", Pointer),  # uint8 [num_items] or 0
        ("chunk_depth", Pointer),  # int32 [chunk tile capacity] earliest saturation depth among an item's chunks
        ("chunk_transmittance", Pointer),  # float32 [chunk units] a finished chunk's largest unsaturated T, else -1
        ("n_isects", ctypes.c_int32),
        ("num_items", ctypes.c_int32),
        ("num_gaussians", ctypes.c_int32),  # rows of the per-Gaussian arrays (I * N or nnz)
        ("frame_index", ctypes.c_int32),
        ("chunk_unit_capacity", ctypes.c_int32),
        ("cull", ctypes.c_int32),  # per-warp culling at batch load (variants with a bound)
        ("finishing_kernels", ctypes.c_int32),  # blending kernels launched for the frame (1 or 2)
        ("warp_blocks", ctypes.c_int32),  # blocks (else rows): bit P - 1 persistent, 2 chunk, 3 persistent if chunked
        ("image_width", ctypes.c_uint32),
        ("image_height", ctypes.c_uint32),
        ("tile_size", ctypes.c_uint32),
        ("tile_width", ctypes.c_uint32),
        ("tile_height", ctypes.c_uint32),
        ("latency_companion", ctypes.c_int32),  # 1: the persistent kernel beside its latency-bound build
    ]


class PlanArgs(ctypes.Structure):
    """lpt::PlanArgs (kernels/plan.cu): inputs and workspace of the per-frame plan."""

    _fields_ = [
        ("tile_offsets", Pointer),  # int32 [num_items]
        ("masks", Pointer),  # uint8 [num_items] or 0
        ("previous_depth", Pointer),  # int32 [num_items] item_depth of the previous frame, or 0
        ("previous_length", Pointer),  # int32 [num_items] list lengths of the previous frame (this frame's after)
        ("costs", Pointer),  # int32 [num_items] scratch: predicted cost per item
        ("histogram", Pointer),  # int32 [BUCKET_COUNT], zero between plans
        ("cursors", Pointer),  # int32 [BUCKET_COUNT]
        ("schedule", Pointer),  # int32 [SCHEDULE_SIZE]
        ("total", Pointer),  # uint64 [4]: N_total (list lengths), total predicted cost, and their scratch
        ("predicted", Pointer),  # float64 [2]: T(h, k) and T(0, .) of Eq. (6)
        ("lpt_order", Pointer),  # int32 [num_items]
        ("sorted_costs", Pointer),  # int32 [num_items]
        ("saturation_flags", Pointer),  # int32 [chunk tile capacity]
        ("chunk_depth", Pointer),  # int32 [chunk tile capacity]
        ("overhead_lambda", ctypes.c_double),
        ("imbalance_beta", ctypes.c_double),
        ("min_gain", ctypes.c_double),
        ("heavy_item_pace", ctypes.c_double),  # sigma: N_1's time per unit of cost against the mean CTA's
        ("heavy_ratio", ctypes.c_double),
        ("chunked_cost_floor", ctypes.c_double),  # auto chunks items above this multiple of N_total / K
        ("two_pixel_max_imbalance", ctypes.c_double),  # constants.two_pixel_max_imbalance of the channels
        ("two_pixel_chunked_max", ctypes.c_double),  # constants.two_pixel_chunked_max of the channels
        ("two_pixel_many_items_max", ctypes.c_double),  # constants.two_pixel_many_items_max of the channels
        ("num_items", ctypes.c_int32),
        ("n_isects", ctypes.c_int32),
        ("mode", ctypes.c_int32),  # constants.PLAN_MODES
        ("forced_chunk_count", ctypes.c_int32),  # k of modes chunk / fixed
        ("max_chunked_tiles", ctypes.c_int32),
        ("chunk_unit_capacity", ctypes.c_int32),  # h k the partial buffers hold
        ("concurrent_ctas", ctypes.c_int32),  # K
        ("num_chunk_counts", ctypes.c_int32),
        ("frame_index", ctypes.c_int32),
        ("two_pixels", ctypes.c_int32),  # 0: no two-pixel kernel; 1 or 2: pixels per thread of this frame
        ("two_pixel_many_items", ctypes.c_int32),  # constants.TWO_PIXEL_MANY_ITEMS_PER_CTA
        ("chunk_counts", ctypes.c_int32 * MAX_CHUNK_COUNTS),
    ]


def _flat_fields(struct: Type[ctypes.Structure], prefix: str = "", base: int = 0) -> Iterable[Tuple[str, int]]:
    """(C++ member path, offset) of every field; the fields of a nested struct (a struct member passed by
    value, e.g. one of gsplat's parameter structs) are listed one by one as `member.field`."""
    for name, kind, *_ in struct._fields_:
        offset = base + getattr(struct, name).offset
        if isinstance(kind, type) and issubclass(kind, ctypes.Structure):
            yield from _flat_fields(kind, f"{prefix}{name}.", offset)
        else:
            yield prefix + name, offset


def layout_checks(cpp_name: str, struct: Type[ctypes.Structure]) -> str:
    """A static_assert that `cpp_name` has the size of its ctypes twin `struct`."""
    return (f'static_assert(sizeof({cpp_name}) == {ctypes.sizeof(struct)}, '
            f'"{cpp_name}: size differs from its host twin {struct.__name__} (gsplat_lpt)");\n')


def layout_probe(kernel_name: str, structs: Sequence[Tuple[str, Type[ctypes.Structure]]]) -> str:
    """Source of a kernel writing the offset of every field of `structs` (C++ name, host twin), in order."""
    lines = [f'extern "C" __global__ void {kernel_name}(long long* offsets) {{']
    index = 0
    for cpp_name, struct in structs:
        lines.append("    {")
        lines.append(f"        const {cpp_name}* probe = reinterpret_cast<const {cpp_name}*>(offsets + 1024);")
        for name, _ in _flat_fields(struct):
            lines.append(f"        offsets[{index}] = (long long)((const char*)&probe->{name} - (const char*)probe);")
            index += 1
        lines.append("    }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def expected_offsets(structs: Sequence[Tuple[str, Type[ctypes.Structure]]]) -> List[Tuple[str, int]]:
    """(C++ field name, host offset) in the order `layout_probe` writes them."""
    return [(f"{cpp_name}::{name}", offset) for cpp_name, struct in structs for name, offset in _flat_fields(struct)]


def address(struct: ctypes.Structure) -> int:
    return ctypes.addressof(struct)
