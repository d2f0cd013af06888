// The scheduling core shared by every Gaussian variant (3DGS, 2DGS, 3DGUT).
//
// A variant is a traits struct V; everything else lives here, once:
//   - blend_range:          gsplat's per-pixel front-to-back blending over a range of one tile's list, with
//                           per-warp culling at batch load where the variant gives a conservative bound,
//   - lpt_persistent_blend: K resident CTAs drain a queue of (image, tile) items in LPT order (Sec. 4.1),
//   - depth_chunk_blend:    persistent CTAs blend depth chunks of the h heaviest items with saturation
//                           signalling (Sec. 4.2); the last chunk of an item to finish composites all of its
//                           chunks in depth order, Eq. (5).
//
// Variant concept (see blend_3dgs.cu for the smallest one):
//   struct V {
//     struct Params;                      // Gaussian arrays, colours, backgrounds, cameras: one struct by value
//     struct Outputs;                     // output pointers (colours, alphas, last_ids, and any extras)
//     struct alignas(16) Staged;          // per-Gaussian data kept in shared memory for one batch
//     struct Pixel;                       // what the evaluation needs of one pixel (centre, or a camera ray)
//     static Pixel pixel(const Params&, int image, float px, float py, bool& valid);
//     static void stage(const Params&, int gaussian, Staged&);
//     static void stage_inert(Staged&);                    // a Gaussian that contributes nothing
//     static bool evaluate(const Staged&, const Pixel&, float& alpha);   // false where gsplat skips it
//     static constexpr bool kHasCullBound;
//     static bool may_contribute(const Staged&, const PixelBox&);       // conservative: false only if
//                                                                       // alpha < 1/255 at every pixel centre
//     template <unsigned CDIM> struct Accumulator;          // the concept below
//     static constexpr bool kScaledEvaluation;              // optional (absent: false); with it
//     static bool scalable(const Staged&);                  // whether scale() leaves evaluate_scaled gsplat's alpha
//     static void scale(Staged&);                           // at every pixel, bit for bit
//     static void unscale(Staged&);                         // scale() undone exactly, on a scalable Staged
//     static bool evaluate_scaled(const Staged&, const Pixel&, float& alpha);  // on a scaled Staged
//     static bool may_contribute_scaled(const Staged&, const PixelBox&);      // the same bound on a scaled Staged
//   };
// A variant with kScaledEvaluation has, in every kernel, each scalable Gaussian staged scaled, and each batch whose
// Gaussians are all scalable walked with evaluate_scaled (3DGS: the conic's diagonal halved, so that gsplat's
// 0.5 (a dx^2 + c dy^2) needs no multiply); any other batch is unscaled again and walked as staged (blend_range).
// Accumulator concept (ColorAccumulator below is the common one):
//   static constexpr unsigned kPartialFloats;               // floats a depth chunk leaves per pixel (besides T)
//   void reset();
//   void add(const Params&, const Staged&, const float4& color, int gaussian, float vis, float T,
//            unsigned list_index);                          // color: the Gaussian's staged colour row, below
//   void store_partial(float* slot, unsigned stride) const; // kPartialFloats values at slot[i * stride]
//   void combine_partial(const float* slot, unsigned stride, float T_before);  // add a later chunk
//   template <bool WritesIds = true>                        // false: the persistent kernel's build that keeps no
//   void write(const Params&, const Outputs&, const PixelSlot&, float T, int last_index) const;
//                                                           // last_ids (last_index -1): no index only gsplat's
//                                                           // backward reads is written (2DGS's median_ids); every
//                                                           // build leaves such an index (and last_ids) alone where
//                                                           // its pointer is null (a call that takes none)
//   void poison();                                          // NaN: the frame's input was invalid
//   static constexpr bool kRewalk;                          // optional (absent: false); see below
//   static constexpr bool kStagedColor;                     // optional (absent: false); with it
//   static void stage_color(const Params&, int gaussian, float4& color);
// An accumulator with kStagedColor has the core stage each Gaussian's colour row (up to 4 floats) in shared
// memory with the batch, once per batch, and add() reads it there rather than each pixel reading it from
// global memory; without it, `color` is not read.
// combine_partial may read the chunk's own final T (stored negated when the pixel saturated inside the
// chunk) at slot[kPartialFloats * stride]. An accumulator with an output that depends on the sequential
// transmittance itself rather than on per-chunk sums (2DGS's median depth: the last Gaussian blended while
// T > 0.5) sets kRewalk and provides
//   void rewalk(const Params&, const Staged&, const float4& color, int gaussian, float T, unsigned list_index);
//   bool rewalk_settled(float T) const;                     // no Gaussian blended from T on changes it
// The compositing CTA then walks the item's Gaussians after chunk 0 once more, in order, from chunk 0's
// final T (chunk 0 blends from T = 1, so that T is bitwise the unchunked kernel's at chunk 1's start),
// with the same per-Gaussian rule (RewalkPixel below), calling rewalk() with the exact sequential T until
// rewalk_settled() or the pixel saturates: such outputs are then those of the unchunked kernel, bit for bit.

#pragma once

#ifndef LPT_SCHEDULE_SIZE
#error "lpt_core.cuh needs the #define block of gsplat_lpt/constants.py, which the runtime puts first"
#endif

namespace lpt {

constexpr float kAlphaThreshold = LPT_ALPHA_THRESHOLD;
constexpr float kTransmittanceThreshold = LPT_TRANSMITTANCE_THRESHOLD;
constexpr float kMaxAlpha = LPT_MAX_ALPHA;
constexpr unsigned kMaxBatch = LPT_MAX_BATCH;
constexpr int kNoDepth = 0x7fffffff;

// One comparison ANDed with a predicate q in a single setp (SASS: FSETP ... .AND with q as its last operand), where
// ptxas would otherwise compare, then AND the two predicates in a PLOP3 of their own. The same truth value as the C++
// expression named beside each; .ftz as every kernel is built (-ftz=true), and no threshold here is a denormal.
// (3DGS: the culled two-pixel walk 68.5 -> 64.5 instructions per Gaussian, the one-pixel walk's pair 118 -> 114.)
#define LPT_SETP_AND(NAME, CMP)                                                                          \
    __device__ __forceinline__ bool NAME(float a, float b, bool q) {                                     \
        unsigned r;                                                                                      \
        asm("{\n\t.reg .pred q, p;\n\tsetp.ne.u32 q, %2, 0;\n\tsetp." CMP ".and.ftz.f32 p, %1, %3, q;\n\t" \
            "selp.u32 %0, 1, 0, p;\n\t}"                                                               \
            : "=r"(r)                                                                                    \
            : "f"(a), "r"((unsigned)q), "f"(b));                                                         \
        return r != 0u;                                                                                  \
    }
LPT_SETP_AND(geu_and, "geu")  // !(a < b) && q
LPT_SETP_AND(gtu_and, "gtu")  // !(a <= b) && q
LPT_SETP_AND(gt_and, "gt")    // a > b && q
#undef LPT_SETP_AND

// NAME<T>::value: the constexpr bool T::MEMBER where T declares it, else FALLBACK (the optional flags of the
// variant and accumulator concepts).
#define LPT_OPTIONAL_FLAG(NAME, MEMBER, FALLBACK)                 \
    template <class T, class = void>                              \
    struct NAME {                                                 \
        static constexpr bool value = FALLBACK;                   \
    };                                                            \
    template <class T>                                            \
    struct NAME<T, decltype((void)T::MEMBER)> {                   \
        static constexpr bool value = T::MEMBER;                  \
    };

// Host twin: gsplat_lpt.layouts.FrameArgs (sizes and offsets checked at compile time).
struct FrameArgs {
    int* schedule;
    const int* lpt_order;
    const int* sorted_costs;
    int* saturation_flags;
    int* chunk_arrivals;
    float* partials;
    int* item_depth;
    int* status;
    const int* tile_offsets;
    const int* flatten_ids;
    const unsigned char* masks;
    int* chunk_depth;
    float* chunk_transmittance;
    int n_isects;
    int num_items;
    int num_gaussians;
    int frame_index;
    int chunk_unit_capacity;
    int cull;
    int finishing_kernels;
    int warp_blocks;  // 8 x 4 blocks of pixel groups per warp (else rows): bit P - 1 in the persistent kernel of P
                      // pixels per thread, bit 2 in the chunk kernel, bit 3 in the persistent kernel of a chunked
                      // frame; bit 4: rows in the persistent kernel of a latency-bound unchunked frame, whatever
                      // bits 0-1 say (the plan's persistent_rows word)
    unsigned image_width, image_height, tile_size, tile_width, tile_height;
    int latency_companion;  // 1: the frame's persistent kernel was launched beside its latency-bound build (below)
};

// Where thread `thread_rank` of a CTA working on item (image * tiles_per_image + tile) sits.
struct PixelSlot {
    int image;
    int tile;
    unsigned row, col;
    unsigned tile_x0, tile_y0;  // first pixel column / row of the tile
    bool inside;
    float px, py;       // pixel centre
    long long pixel;    // index into [images, height, width]

    PixelSlot() = default;
    __device__ PixelSlot(const FrameArgs& f, int item, unsigned thread_rank) {
        const int tiles = (int)(f.tile_width * f.tile_height);
        image = item / tiles;
        tile = item - image * tiles;
        const unsigned tile_row = (unsigned)tile / f.tile_width;
        const unsigned tile_col = (unsigned)tile - tile_row * f.tile_width;
        tile_x0 = tile_col * f.tile_size;
        tile_y0 = tile_row * f.tile_size;
        row = tile_y0 + thread_rank / f.tile_size;
        col = tile_x0 + thread_rank % f.tile_size;
        inside = row < f.image_height && col < f.image_width;
        px = (float)col + 0.5f;
        py = (float)row + 0.5f;
        pixel = ((long long)image * f.image_height + row) * f.image_width + col;
    }
    // The slot `rows` pixel rows below this one, same column: a thread's other pixels (pixel_rank<P>). Copied
    // rather than computed again from its rank, so that the compiler sees one column centre px for all of them
    // and evaluates what depends on px alone (gsplat's dx, and its products with the conic) once per Gaussian.
    __device__ PixelSlot below(const FrameArgs& f, unsigned rows) const {
        PixelSlot slot = *this;
        slot.row = row + rows;
        slot.inside = slot.row < f.image_height && col < f.image_width;
        slot.py = py + (float)rows;  // (float)slot.row + 0.5f: exact, rows and centres are far below 2^23
        slot.pixel = pixel + (long long)rows * f.image_width;
        return slot;
    }
};

// Where a thread's pixels lie in its tile. With P pixels per thread, a thread holds a group of P vertically
// adjacent pixels (rows group * P + p, p < P, of one column; the runtime uses P > 1 only where the tile size
// is a multiple of P). Groups are assigned to threads either
//   - by rows (thread t: group row t / tile_size, column t % tile_size), or
//   - where bit P - 1 of f.warp_blocks is set (tile sizes that are multiples of 8), in blocks of 8 columns x
//     4 group rows per warp:
//     warp w covers block (w / (tile_size / 8), w % (tile_size / 8)), lane l its group row l / 8 and column
//     l % 8. A warp's pixels are then 8 x 4P instead of tile_size x 32P / tile_size: a smaller perimeter,
//     so the per-warp cull test (V::may_contribute on the warp's PixelBox) drops more Gaussians.
// Which pixels a thread blends changes nothing else: each pixel's walk is gsplat's, in gsplat's order (and
// all chunks of an item run in the chunk kernel, so they agree on where its pixels lie). Where bit 4 is set, the
// persistent kernel takes rows where the plan says the frame lasts as long as its longest item (persistent_rows).
template <unsigned P>
__device__ inline bool warp_blocks(const FrameArgs& f) {
    return (f.warp_blocks >> (P - 1)) & 1;
}
__device__ inline bool rows_when_latency_bound(const FrameArgs& f) {
    return (f.warp_blocks >> 4) & 1;
}
// The warps' pixels in the frame's other kernels, each with its own bit: the chunk kernel's (bit 2), and the
// persistent kernel's in a chunked frame (bit 3), whose items are then all light against the mean work per
// CTA. (The runtime sets the bits per variant, Variant.auto_warp_blocks: on the H200 blocks beat rows in both
// for 2DGS, and for 3DGS since its cull test on scaled batches costs the same for any box.)
__device__ inline bool chunk_warp_blocks(const FrameArgs& f) {
    return (f.warp_blocks >> 2) & 1;
}
__device__ inline bool chunked_frame_warp_blocks(const FrameArgs& f) {
    return (f.warp_blocks >> 3) & 1;
}

// The pixel's rank in the tile (row * tile_size + column) of pixel p of a thread.
template <unsigned P>
__device__ inline unsigned pixel_rank(const FrameArgs& f, bool blocks, unsigned thread, unsigned p) {
    unsigned group, col;
    if (blocks) {
        const unsigned warp = thread >> 5, lane = thread & 31u, blocks_per_row = f.tile_size >> 3;
        const unsigned block_row = warp / blocks_per_row;
        group = block_row * 4u + (lane >> 3);
        col = (warp - block_row * blocks_per_row) * 8u + (lane & 7u);
    } else {
        if (P == 1) return thread;
        group = thread / f.tile_size;
        col = thread - group * f.tile_size;
    }
    return (group * P + p) * f.tile_size + col;
}

// Pixel centres one warp covers in its tile (a superset when a warp spans partial rows).
struct PixelBox {
    float x0, x1, y0, y1;
};

template <unsigned P>
__device__ inline PixelBox warp_box(const FrameArgs& f, bool blocks, const PixelSlot& slot, unsigned warp,
                                   unsigned block) {
    unsigned col0 = 0, col1 = f.tile_size - 1, row0, row1;
    if (blocks) {
        const unsigned blocks_per_row = f.tile_size >> 3, block_row = warp / blocks_per_row;
        col0 = (warp - block_row * blocks_per_row) * 8u;
        col1 = col0 + 7u;
        row0 = block_row * 4u * P;
        row1 = row0 + 4u * P - 1u;
    } else {
        const unsigned first = warp * 32u, last = min(first + 31u, block - 1u);
        const unsigned group0 = first / f.tile_size, group1 = last / f.tile_size;
        if (group0 == group1) {
            col0 = first % f.tile_size;
            col1 = last % f.tile_size;
        }
        row0 = group0 * P;
        row1 = group1 * P + (P - 1);
    }
    return PixelBox{(float)(slot.tile_x0 + col0) + 0.5f, (float)(slot.tile_x0 + col1) + 0.5f,
                    (float)(slot.tile_y0 + row0) + 0.5f, (float)(slot.tile_y0 + row1) + 0.5f};
}

// Colour channels blended front to back: what 3DGS and 3DGUT accumulate.
template <unsigned CDIM>
struct ColorAccumulator {
    static constexpr unsigned kPartialFloats = CDIM;  // colours are per-chunk sums: Eq. (5) composes them
    static constexpr bool kStagedColor = CDIM <= 4;   // one 16-byte shared load per blended Gaussian
    float color[CDIM];

    __device__ void reset() {
#pragma unroll
        for (unsigned k = 0; k < CDIM; ++k) color[k] = 0.f;
    }
    __device__ void add_color(const float* __restrict__ c_ptr, float vis) {
#pragma unroll
        for (unsigned k = 0; k < CDIM; ++k) color[k] += c_ptr[k] * vis;
    }
    // The same products and sums as add_color, the row read in 16-byte loads: c_ptr 16-byte aligned and the row
    // readable up to CDIM rounded up to a multiple of 4 floats (the caller's guarantee; floats past CDIM are
    // loaded and not used). All lanes of a warp blend the same Gaussian, so each load is one broadcast: about a
    // quarter as many load instructions per blended Gaussian.
    __device__ void add_color_row16(const float* __restrict__ c_ptr, float vis) {
        const float4* row = reinterpret_cast<const float4*>(c_ptr);
#pragma unroll
        for (unsigned j = 0; j < CDIM / 4; ++j) {
            const float4 c = __ldg(row + j);
            color[4 * j] += c.x * vis;
            color[4 * j + 1] += c.y * vis;
            color[4 * j + 2] += c.z * vis;
            color[4 * j + 3] += c.w * vis;
        }
        if constexpr (CDIM % 4 != 0) {  // the last, partly used 16 bytes
            const float4 c = __ldg(row + CDIM / 4);
            const float loaded[3] = {c.x, c.y, c.z};
#pragma unroll
            for (unsigned i = 0; i < CDIM % 4; ++i) color[CDIM / 4 * 4 + i] += loaded[i] * vis;
        }
    }
    // Row g of a [rows, row_floats] colour array (CDIM of its floats) into one float4 (CDIM <= 4; the rest 0),
    // once per batch.
    static __device__ void stage_color_row(const float* __restrict__ colors, int g, float4& staged,
                                           long long row_floats) {
        float c[4] = {0.f, 0.f, 0.f, 0.f};
        const float* row = colors + (long long)g * row_floats;
#pragma unroll
        for (unsigned k = 0; k < CDIM && k < 4; ++k) c[k] = row[k];
        staged = make_float4(c[0], c[1], c[2], c[3]);
    }
    // The same products and sums as add_color, the row read from its staged copy.
    __device__ void add_staged_color(const float4& staged, float vis) {
        const float* c = &staged.x;  // (CDIM scalar reads: no register for an unused fourth float)
#pragma unroll
        for (unsigned k = 0; k < CDIM && k < 4; ++k) color[k] += c[k] * vis;
    }
    __device__ void store_partial(float* slot, unsigned stride) const {
#pragma unroll
        for (unsigned k = 0; k < CDIM; ++k) slot[k * stride] = color[k];
    }
    __device__ void combine_partial(const float* slot, unsigned stride, float T_before) {
#pragma unroll
        for (unsigned k = 0; k < CDIM; ++k) color[k] += __ldcg(slot + k * stride) * T_before;
    }
    __device__ void poison() {
#pragma unroll
        for (unsigned k = 0; k < CDIM; ++k) color[k] = __int_as_float(0x7fc00000);
    }
    // gsplat's final write: alpha = 1 - T, colour plus T times the background, and last_ids where the call takes
    // them. `row_floats`: the floats per pixel of render_colors and per image of backgrounds (more than CDIM where
    // this is a slice of the channels).
    template <class Outputs>
    __device__ void write_color(const Outputs& out, const float* __restrict__ backgrounds, const PixelSlot& slot,
                                float T, int last_index, long long row_floats) const {
        out.render_alphas[slot.pixel] = 1.0f - T;
        const float* background = backgrounds == nullptr ? nullptr : backgrounds + (long long)slot.image * row_floats;
#pragma unroll
        for (unsigned k = 0; k < CDIM; ++k)
            out.render_colors[slot.pixel * row_floats + k] = background == nullptr ? color[k] : (color[k] + T * background[k]);
        if (out.last_ids != nullptr) out.last_ids[slot.pixel] = last_index;  // only the backward needs them
    }
};

// Whether a variant blends a slice of the channels of a wider feature map: its kChannelSlice, false where it
// declares none (then its Params has channel_stride).
LPT_OPTIONAL_FLAG(SlicesChannels, kChannelSlice, false)

// Floats per row of colors, backgrounds and render_colors: CDIM, or for a variant that blends a slice of a wider
// feature map (kChannelSlice) the map's channel count, Params::channel_stride (its pointers are the slice's first
// channel).
template <class V, unsigned CDIM>
__device__ inline long long color_row_floats(const typename V::Params& p) {
    if constexpr (SlicesChannels<V>::value) {
        return (long long)p.channel_stride;
    } else {
        return CDIM;
    }
}

// Whether a variant's colour rows are 16-byte aligned wherever their floats are a multiple of 4: its
// kAlignedColorRows, false where it declares none. The runtime that launches such a variant passes a 16-byte
// aligned colour array (gsplat_lpt.frontend.aligned_rows) whose rows hold a multiple of 4 floats.
LPT_OPTIONAL_FLAG(AlignedColorRows, kAlignedColorRows, false)

// Whether a variant's colour rows hold CDIM rounded up to a multiple of 4 floats (the front end's padded copy of a
// map of 5, 9, 17 or 33 channels, so that the rows are read in 16-byte loads; backgrounds and render_colors keep
// rows of CDIM): its kPaddedColorRows, false where it declares none.
LPT_OPTIONAL_FLAG(PadsColorRows, kPaddedColorRows, false)

// Floats per row of the colours the kernels read: color_row_floats, or CDIM rounded up to a multiple of 4 for a
// variant with kPaddedColorRows.
template <class V, unsigned CDIM>
__device__ inline long long color_input_row_floats(const typename V::Params& p) {
    if constexpr (PadsColorRows<V>::value) {
        return (CDIM + 3) / 4 * 4;
    } else {
        return color_row_floats<V, CDIM>(p);
    }
}

// The accumulator of a variant that blends colours only: the CDIM floats of row g of Params::colors (rows of
// color_row_floats), and gsplat's colours, alphas and last_ids written through Outputs (3DGS, 3DGUT, the colour
// slices of 2DGS). Staged: the colour rows are staged with the batch where CDIM <= 4 (false for 3DGUT: its
// per-pixel ray state already fills the registers, and the staged row pushed its colour sums into local memory
// inside the per-Gaussian loop). Rows that are not staged are read in 16-byte loads where the variant's rows are
// aligned (kAlignedColorRows) and CDIM is a multiple of 4 or the rows are padded to one (kPaddedColorRows), else
// one float at a time. (H200, 3DGS on the bonsai orbit, GPU time x gsplat's blend, scalar -> 16-byte loads: 8
// channels 1.28 -> 1.40, 16: 1.12 -> 1.29, 32: 1.02 either way, 64: 1.33 -> 1.37, 128 in slices of 64: 1.70 ->
// 1.75; the same floats.)
template <class V, unsigned CDIM, bool Staged = true>
struct PlainColorAccumulator : ColorAccumulator<CDIM> {
    static constexpr bool kStagedColor = ColorAccumulator<CDIM>::kStagedColor && Staged;
    static constexpr bool kRow16 =
        !kStagedColor && (CDIM % 4 == 0 || PadsColorRows<V>::value) && AlignedColorRows<V>::value;
    static __device__ void stage_color(const typename V::Params& p, int g, float4& staged) {
        ColorAccumulator<CDIM>::stage_color_row(p.colors, g, staged, color_input_row_floats<V, CDIM>(p));
    }
    __device__ void add(const typename V::Params& p, const typename V::Staged&, const float4& staged_color, int g,
                        float vis, float, unsigned) {
        if constexpr (kStagedColor) {
            this->add_staged_color(staged_color, vis);
        } else if constexpr (kRow16) {
            this->add_color_row16(p.colors + (long long)g * color_input_row_floats<V, CDIM>(p), vis);
        } else {
            this->add_color(p.colors + (long long)g * color_input_row_floats<V, CDIM>(p), vis);
        }
    }
    // (WritesIds false: last_index is -1, and the null test below leaves last_ids alone: the same code either way)
    template <bool WritesIds = true>
    __device__ void write(const typename V::Params& p, const typename V::Outputs& out, const PixelSlot& slot, float T,
                          int last_index) const {
        this->write_color(out, p.backgrounds, slot, T, last_index, color_row_floats<V, CDIM>(p));
    }
};

// One pixel's front-to-back state: the transmittance, gsplat's last_ids, and the variant's accumulator.
// A pixel that is done (saturated, outside the image, or without a valid camera ray) blends nothing more. With
// SignedT (kSignedTransmittance below: the two-pixel persistent kernels of up to 4 channels) that is marked by the
// sign bit of T rather than by a flag: T holds -|T| from then on, so that |T| is still gsplat's final
// transmittance, and every later Gaussian finds T (1 - alpha) <= 0 (alpha <= kMaxAlpha < 1), at or below the
// threshold, so that it blends nothing without a flag being tested. A live T is above the threshold, never 0 or
// negative. (3DGS, culled walk of the two-pixel kernel: 73 -> 71 instructions per Gaussian.) Without SignedT, a
// flag, and the callers test it.
template <class V, unsigned CDIM, bool SignedT>
struct PixelBlend {
    using Accumulator = typename V::template Accumulator<CDIM>;
    static constexpr bool kSignedT = SignedT;  // blend() itself leaves a done pixel as it is (else the caller tests)
    Accumulator acc;
    float T;
    unsigned last_index;
    int done_flag;  // without SignedT (an int: a bool kept in a register was masked to its low byte at every test)

    PixelBlend() = default;
    __device__ explicit PixelBlend(bool active)
        : T(SignedT && !active ? -1.0f : 1.0f), last_index(0), done_flag(!active) {
        acc.reset();
    }

    __device__ bool done() const {
        if constexpr (SignedT) return T < 0.f;
        return done_flag != 0;
    }
    __device__ float transmittance() const { return SignedT ? fabsf(T) : T; }  // gsplat's T (also once done)
    __device__ float signed_transmittance() const { return done() ? -transmittance() : T; }  // negative: done
    __device__ void close() {
        if constexpr (SignedT) {
            T = __int_as_float(__float_as_int(T) | (int)0x80000000);
        } else {
            done_flag = 1;
        }
    }

    // gsplat's loop body for one Gaussian after its alpha (blend_range evaluates it), where `take`: the Gaussian's
    // alpha passed gsplat's test (at a pixel done or not with SignedT, at a pixel not done without). Written with
    // gsplat's transmittance test as a predicate rather than an early return, so that the compiler can predicate a
    // short accumulation (3DGS colours) instead of branching around it (3DGS, culled walk of the two-pixel kernel:
    // 79 -> 72 instructions per Gaussian, no reconvergence barrier); with SignedT, T's new value is selected once
    // (gsplat's next T, or T marked done). The same operations on the same values; nothing is committed where
    // `take` is false or the pixel is done.
    __device__ void blend(bool take, const typename V::Params& params, const typename V::Staged& staged,
                          const float4& color, int gaussian, float alpha, unsigned list_index) {
        if constexpr (SignedT) {
            const float T_before = T;
            const float vis = alpha * T_before;
            const float next_T = T_before * (1.0f - alpha);
            const bool commit = gt_and(next_T, kTransmittanceThreshold, take);  // gsplat: done where next_T <= 1e-4
            const float closed = __int_as_float(__float_as_int(T_before) | (int)0x80000000);
            T = commit ? next_T : (take ? closed : T_before);
            if (commit) {
                acc.add(params, staged, color, gaussian, vis, T_before, list_index);
                last_index = list_index;
            }
        } else {  // (the caller has tested the flag: take is false at a pixel done)
            const float next_T = T * (1.0f - alpha);
            const bool commit = gtu_and(next_T, kTransmittanceThreshold, take);  // gsplat: done where next_T <= 1e-4
            if (take && !commit) done_flag = 1;
            if (commit) {
                acc.add(params, staged, color, gaussian, alpha * T, T, list_index);
                last_index = list_index;
                T = next_T;
            }
        }
    }
};

// Where the persistent kernel marks a done pixel by T's sign (PixelBlend's SignedT): with two or more pixels per
// thread and up to 4 channels. (H200, GPU time x gsplat's blend, one process, the same images: the one-pixel kernel
// with it lost about 3% on every chunked ladder frame in auto, and the two-pixel kernel of 8 channels 4% on the
// bonsai orbit, 1.57x -> 1.51x, where those of 3 and 4 channels gained, 3DGS 1.84x -> 1.92x, 2DGS balanced room
// 7.44x -> 7.58x, and 16 channels neither. The chunk kernel keeps the flag too.)
template <unsigned P, unsigned CDIM>
constexpr bool kSignedTransmittance = P > 1 && CDIM <= 4;

// Whether an accumulator asks for the composite's re-walk: its kRewalk, false where it declares none.
LPT_OPTIONAL_FLAG(Rewalks, kRewalk, false)

// Whether an accumulator has the core stage colour rows: its kStagedColor, false where it declares none.
LPT_OPTIONAL_FLAG(StagesColor, kStagedColor, false)

// The re-walk of a kRewalk accumulator (see the concept above): gsplat's rule for one Gaussian, from the
// exact sequential T, handing the accumulator each Gaussian blended until it is settled.
template <class V, unsigned CDIM>
struct RewalkPixel {
    using Accumulator = typename V::template Accumulator<CDIM>;
    static constexpr bool kSignedT = false;  // its callers test done()
    Accumulator* acc;
    float T;
    bool settled;  // settled, saturated, or nothing to walk

    __device__ bool done() const { return settled; }

    __device__ void blend(bool take, const typename V::Params& params, const typename V::Staged& staged,
                          const float4& color, int gaussian, float alpha, unsigned list_index) {
        if (!take) return;
        const float next_T = T * (1.0f - alpha);
        if (next_T <= kTransmittanceThreshold) {
            settled = true;
            return;
        }
        acc->rewalk(params, staged, color, gaussian, T, list_index);
        T = next_T;
        settled = acc->rewalk_settled(T);
    }
};

// Whether a variant's walks take the marked Gaussians in pairs (its kPairedEvaluation; false where it declares
// none): the one-pixel kernels evaluate two before blending them, and the two-pixel kernels with T's sign step
// two per iteration. See blend_range.
LPT_OPTIONAL_FLAG(PairsEvaluations, kPairedEvaluation, false)
// Whether a variant has a second build of its one-pixel persistent kernel for latency-bound frames (its
// kLatencyBoundBuild, false where it declares none): see lpt_persistent_blend.
LPT_OPTIONAL_FLAG(HasLatencyBoundBuild, kLatencyBoundBuild, false)

// Whether a variant stages batches scaled where it can (its kScaledEvaluation; false where it declares none).
LPT_OPTIONAL_FLAG(ScalesEvaluation, kScaledEvaluation, false)

template <class V, bool Scaled>
__device__ __forceinline__ bool evaluate_alpha(const typename V::Staged& s, const typename V::Pixel& pixel,
                                               float& alpha) {
    if constexpr (Scaled) {
        return V::evaluate_scaled(s, pixel, alpha);
    } else {
        return V::evaluate(s, pixel, alpha);
    }
}

template <class V, bool Scaled>
__device__ __forceinline__ bool may_reach(const typename V::Staged& s, const PixelBox& box) {
    if constexpr (Scaled) {
        return V::may_contribute_scaled(s, box);
    } else {
        return V::may_contribute(s, box);
    }
}

// Gaussians one batch stages: one per pixel of the CTA's tile, at most kMaxBatch. A kernel of at most MaxThreads
// threads of P pixels each reserves shared memory for MaxThreads * P of them (a CTA of a tile of 8 x 8 pixels for 64,
// not kMaxBatch, which held the 3DGS kernels of that tile size to 15 CTAs per SM where their registers allow more:
// H200, GPU time x gsplat's blend at tile size 8, bonsai orbit 1.15x -> 1.49x, balanced room 1.01x -> 1.20x).
template <unsigned MaxThreads, unsigned P>
struct BatchCapacity {
    static constexpr unsigned value = MaxThreads * P < kMaxBatch ? MaxThreads * P : kMaxBatch;
};

// Dynamic shared memory of a blending CTA: one batch of staged Gaussians, each with its colour row (where the
// accumulator stages it) right after it, their Gaussian ids, and the pixel-centre box of every warp of the current
// item (for the cull test). A Gaussian's list position is the batch's first plus its index in the batch.
// The colour row beside its Gaussian rather than in an array of its own: one address per blended Gaussian for both
// (the chunk kernel's walk: 1-2 instructions less per Gaussian; the two-pixel walk keeps its count, ptxas building
// the multiple of 48 with a constant), and entries of 48 (3DGS) or 80 bytes (2DGS, 3DGUT) rather than 32 or 64, so
// that the 32 lanes of the cull test, each reading another Gaussian's 16-byte rows, hit 32 different banks in every
// group of 8 lanes (with 32 or 64 bytes, two or four lanes shared a bank). H200, GPU time x gsplat's blend, every
// output the same: 2DGS balanced room 7.57x -> 10.71x, 3DGS bonsai orbit 2.10x -> 2.14x, balanced room 1.72x ->
// 1.76x (tests/test_runtime.py checks every variant's entry size).
// Mirrored by gsplat_lpt.compiler.blend_shared_bytes; checked against %dynamic_smem_size at launch.
template <class V, unsigned Capacity>
struct SharedBatch {
    struct Entry {
        typename V::Staged staged;
        float4 color;
    };
    Entry* entries;   // [Capacity]
    int* gaussians;   // [Capacity]
    PixelBox* boxes;  // [kMaxWarps]

    static constexpr unsigned kMaxWarps = 32;
    static constexpr unsigned kGaussianBytes = (unsigned)sizeof(typename V::Staged) + 16u + 4u;
    static_assert(sizeof(Entry) == sizeof(typename V::Staged) + 16u, "a staged Gaussian and its colour row, unpadded");
    static constexpr unsigned kBytes = Capacity * kGaussianBytes + kMaxWarps * (unsigned)sizeof(PixelBox);
    __device__ explicit SharedBatch(unsigned char* shared)
        : entries(reinterpret_cast<Entry*>(shared)),
          gaussians(reinterpret_cast<int*>(shared + Capacity * sizeof(Entry))),
          boxes(reinterpret_cast<PixelBox*>(shared + Capacity * kGaussianBytes)) {}
    __device__ typename V::Staged& staged(int i) const { return entries[i].staged; }
    __device__ float4& color(int i) const { return entries[i].color; }
};

__device__ inline unsigned dynamic_shared_bytes() {
    unsigned bytes;
    asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(bytes));
    return bytes;
}

// Start and end of an item's range in flatten_ids, clamped so that invalid offsets (the plan flags
// them) can never make a CTA loop for ever or read outside flatten_ids.
__device__ inline void item_range(const FrameArgs& f, int item, int& start, int& end) {
    start = f.tile_offsets[item];
    end = (item == f.num_items - 1) ? f.n_isects : f.tile_offsets[item + 1];
    start = min(max(start, 0), f.n_isects);
    end = min(max(end, start), f.n_isects);
}

// Whether every one of a thread's pixels is done.
template <unsigned P, class State>
__device__ __forceinline__ bool all_pixels_done(const State (&pixel)[P]) {
    bool done = true;
#pragma unroll
    for (unsigned p = 0; p < P; ++p) done = done && pixel[p].done();
    return done;
}

// The walk over one staged batch (blend_range): each warp's marked Gaussians, in the batch's form (Scaled: the
// variant's scaled evaluation, kScaledEvaluation).
template <class V, unsigned P, bool Scaled, bool Paired, class State, unsigned Capacity>
__device__ __forceinline__ void walk_batch(const typename V::Params& params, const SharedBatch<V, Capacity>& batch,
                                           int batch_start, int count, const typename V::Pixel (&pixel_ctx)[P],
                                           State (&pixel)[P], bool cull, unsigned warp, unsigned lane,
                                           unsigned warp_lanes, unsigned warp_mask) {
    auto all_done = [&pixel]() { return all_pixels_done<P>(pixel); };
    // Gaussian t of the batch starting at list position `first`: its id and colour row are read only where the
    // accumulator uses them (the compiler drops the other loads).
    using Accumulator = typename State::Accumulator;
    auto step = [&](int first, int t) {
        const int g = batch.gaussians[t];
        const unsigned list_index = (unsigned)(first + t);
        if constexpr (P > 1) {
            // One copy of the Gaussian and its colour row in registers for the P pixels (each would load them
            // from shared memory), and every pixel's alpha evaluated before any is blended: P independent chains
            // of arithmetic the scheduler can interleave (within a branch per pixel, each waited on its own exp).
            // A saturated pixel's alpha is computed and ignored.
            const typename V::Staged staged = batch.staged(t);
            const float4 color = batch.color(t);
            float alpha[P] = {};
            bool passed[P];
#pragma unroll
            for (unsigned p = 0; p < P; ++p) passed[p] = evaluate_alpha<V, Scaled>(staged, pixel_ctx[p], alpha[p]);
#pragma unroll
            for (unsigned p = 0; p < P; ++p)
                pixel[p].blend(passed[p] && (State::kSignedT || !pixel[p].done()), params, staged, color, g, alpha[p],
                               list_index);
        } else if (!pixel[0].done()) {  // gsplat's loop body for one Gaussian, operand for operand
            const typename V::Staged& staged = batch.staged(t);
            float alpha;
            if (evaluate_alpha<V, Scaled>(staged, pixel_ctx[0], alpha))
                pixel[0].blend(true, params, staged, batch.color(t), g, alpha, list_index);
        }
    };
    // One pixel, two Gaussians t0 < t1 of the walk (a variant with kPairedEvaluation): both alphas first (alpha
    // does not depend on T: two independent chains of arithmetic for the scheduler), then the blends in
    // order, the second skipped if the first saturated the pixel: gsplat's sequence, each Gaussian's
    // arithmetic unchanged.
    constexpr bool kPaired = P == 1 && (PairsEvaluations<V>::value || Paired);
    // Several pixels with T's sign (a done pixel blends nothing, untested): two marked Gaussians per iteration of
    // the culled walk and one test whether the thread's pixels are all done (3DGS, two-pixel kernel: 71 -> 68.5
    // instructions per Gaussian; H200, GPU time x gsplat's blend: bonsai orbit 1.92x -> 1.94x, balanced room 1.59x
    // -> 1.61x; 2DGS's balanced room was 1.7% slower so, 7.57x -> 7.44x, and declares no kPairedEvaluation). A
    // thread whose pixels the first Gaussian saturates steps the second for nothing.
    constexpr bool kTwoPerIteration = P > 1 && State::kSignedT && PairsEvaluations<V>::value;
    auto step_pair = [&](int first, int t0, int t1) {
        const typename V::Staged staged0 = batch.staged(t0), staged1 = batch.staged(t1);
        const float4 color0 = batch.color(t0), color1 = batch.color(t1);
        float alpha0 = 0.f, alpha1 = 0.f;
        const bool passed0 = evaluate_alpha<V, Scaled>(staged0, pixel_ctx[0], alpha0);
        const bool passed1 = evaluate_alpha<V, Scaled>(staged1, pixel_ctx[0], alpha1);
        pixel[0].blend(passed0 && (State::kSignedT || !pixel[0].done()), params, staged0, color0, batch.gaussians[t0],
                       alpha0, (unsigned)(first + t0));
        pixel[0].blend(passed1 && (State::kSignedT || !pixel[0].done()), params, staged1, color1, batch.gaussians[t1],
                       alpha1, (unsigned)(first + t1));
    };

    if (cull) {  // a warp of fewer than 32 threads (the last one of some tile sizes) tests as many at once
        for (int base = 0; base < count; base += (int)warp_lanes) {
            if (__all_sync(warp_mask, all_done())) break;
            const int j = base + (int)lane;
            const bool reaches = j < count && may_reach<V, Scaled>(batch.staged(j), batch.boxes[warp]);
            unsigned marked = __ballot_sync(warp_mask, reaches);
            if constexpr (P > 1) {
                // the next marked Gaussian found before this one is blended, so that its shared-memory
                // address is ready at the top of the next iteration (H200, GPU time x gsplat's blend: bonsai
                // orbit 1.81x -> 1.84x, balanced room 1.49x -> 1.52x; the paired one-pixel walk was slower so,
                // 2.95x -> 2.86x on the mild ladder frame in auto, and keeps the order below)
                for (int next = __ffs(marked) - 1; next >= 0 && !all_done();) {
                    const int t = base + next;
                    marked &= marked - 1u;
                    next = __ffs(marked) - 1;
                    step(batch_start, t);
                    if constexpr (kTwoPerIteration) {
                        if (next < 0) break;
                        const int t2 = base + next;
                        marked &= marked - 1u;
                        next = __ffs(marked) - 1;
                        step(batch_start, t2);
                    }
                }
            } else {
                while (marked != 0u && !all_done()) {
                    const int t = base + __ffs(marked) - 1;
                    marked &= marked - 1u;
                    if (kPaired && marked != 0u) {
                        const int t1 = base + __ffs(marked) - 1;
                        marked &= marked - 1u;
                        step_pair(batch_start, t, t1);
                    } else {
                        step(batch_start, t);
                    }
                }
            }
        }
    } else if (kPaired) {
        for (int t = 0; t < count && !all_done(); t += 2) {
            if (t + 1 < count) {
                step_pair(batch_start, t, t + 1);
            } else {
                step(batch_start, t);
            }
        }
    } else {
        for (int t = 0; t < count && !all_done(); ++t) step(batch_start, t);
    }
}

// gsplat's forward loop over flatten_ids[range_start, range_end) for one tile: batches of Gaussians staged
// in shared memory, each pixel front to back until it saturates. A thread walks P pixels (pixel_rank), each
// with its own state, in gsplat's order; it stops when all of them are done. With culling, each warp walks
// a batch 32 Gaussians at a time: every lane tests one of them against the warp's pixel centres
// (V::may_contribute, a conservative bound on alpha >= 1/255), a ballot gathers the results, and the warp
// blends only the marked ones, lowest first; every one of its pixels would have skipped the others, so
// colours, alphas and last_ids stay gsplat's bit for bit. A warp whose pixels have all saturated tests
// nothing more. With a saturation_flag (depth chunks) the CTA also stops once an earlier chunk of the same
// item has saturated all its pixels (checked once per batch).
// `blocks`: the warps' pixels are 8 x 4 blocks (pixel_rank), which the cull box follows.
// Returns true when stopped by that flag; stop_position is where the CTA stopped in flatten_ids.
// State is the pixel's walk: PixelBlend, or RewalkPixel for a composite's re-walk (members done() and blend()).
template <class V, unsigned P, bool Paired = false, class State, unsigned Capacity>
__device__ bool blend_range(const FrameArgs& f, const typename V::Params& params, const SharedBatch<V, Capacity>& batch,
                            int range_start, int range_end, const typename V::Pixel (&pixel_ctx)[P],
                            const PixelSlot& slot, bool blocks, State (&pixel)[P], const int* saturation_flag,
                            int chunk_index, int& stop_position) {
    const unsigned block = blockDim.x;
    const unsigned thread = threadIdx.x;
    const unsigned warp = thread >> 5, lane = thread & 31u;
    const unsigned warp_lanes = min(32u, block - (warp << 5));
    const unsigned warp_mask = warp_lanes == 32u ? 0xffffffffu : ((1u << warp_lanes) - 1u);
    const int batch_capacity = (int)min(block * P, Capacity);  // (min(block * P, kMaxBatch): Capacity is at least that)
    const bool cull = V::kHasCullBound && f.cull != 0;
    // the warp's pixel centres, read by its lanes after the first barrier below
    if (cull && lane == 0) batch.boxes[warp] = warp_box<P>(f, blocks, slot, warp, block);
    auto all_done = [&pixel]() { return all_pixels_done<P>(pixel); };
    using Accumulator = typename State::Accumulator;
    // Batches scaled where the variant allows it, in every kernel of it. H200, GPU time x gsplat's blend, every output
    // the same: first in the two-pixel kernels of up to 4 channels, with a scaling pass and a barrier after staging,
    // 0-3% faster (bonsai orbit 2.04x -> 2.07x, 4 x 720p 2.16x -> 2.22x), but the 8-channel kernel 1% slower and the
    // one-pixel kernels 2-3% (street, lpt: 3.50x -> 3.39x: a lone heavy tile walks its batches one after another,
    // and each took the pass and the barrier). Staged scaled (no pass, no barrier more), in every kernel, against
    // the former: bonsai orbit 2.07x -> 2.10x, mild / mixed in auto 3.04x -> 3.10x / 3.00x -> 3.05x, street and
    // extreme in auto 13.49x -> 13.70x and 59.92x -> 60.68x, 8-64 channels unchanged (1.54x, 1.33x -> 1.34x, 1.38x),
    // street and moderate in lpt 0.6% and 1% slower (3.52x -> 3.50x, 2.91x -> 2.88x).
    constexpr bool kScales = ScalesEvaluation<V>::value;
    for (int batch_start = range_start; batch_start < range_end; batch_start += batch_capacity) {
        // resync all threads before the next batch; end early if the entire tile is done
        if (__syncthreads_count(all_done()) >= (int)block) {
            stop_position = batch_start;
            return false;
        }
        if (saturation_flag != nullptr) {
            // one thread reads the flag so that the whole CTA takes the same branch
            const int earlier_saturated = thread == 0 && *((volatile const int*)saturation_flag) < chunk_index;
            if (__syncthreads_or(earlier_saturated)) {
                stop_position = batch_start;
                return true;
            }
        }
        const int count = min(batch_capacity, range_end - batch_start);
        bool unscalable = false;
        unsigned scaled_here = 0u;  // bit n: this thread's n-th staged Gaussian was scaled (kScales; n < P)
        for (int i = (int)thread, n = 0; i < count; i += (int)block, ++n) {
            const int position = batch_start + i;
            const int g = f.flatten_ids[position];
            typename V::Staged staged;
            if ((unsigned)g < (unsigned)f.num_gaussians) {
                V::stage(params, g, staged);
                if constexpr (StagesColor<Accumulator>::value) Accumulator::stage_color(params, g, batch.color(i));
            } else {  // never read outside the Gaussian arrays; the call reports it
                V::stage_inert(staged);
                if constexpr (StagesColor<Accumulator>::value) batch.color(i) = make_float4(0.f, 0.f, 0.f, 0.f);
                atomicOr(f.schedule + LPT_WORD_ERROR, LPT_ERROR_FLATTEN_IDS);
            }
            if constexpr (kScales) {
                if (V::scalable(staged)) {
                    V::scale(staged);
                    scaled_here |= 1u << n;
                } else {
                    unscalable = true;
                }
            }
            batch.staged(i) = staged;
            batch.gaussians[i] = g;
        }
        // Each scalable Gaussian is staged scaled, and a batch of scalable Gaussians only is walked with the
        // variant's scaled evaluation: the barrier that publishes the batch also tells every thread whether it is
        // one, so a scaled batch costs no pass and no barrier more than an unscaled one. In any other batch (rare:
        // a degenerate, huge or far-off Gaussian) each thread undoes its scaling, exactly (V::unscale), and a second
        // barrier publishes that; the batch is walked as staged.
        bool scaled = false;  // (the same in every thread)
        if constexpr (kScales) {
            scaled = !__syncthreads_or(unscalable);
            if (!scaled) {
                for (int i = (int)thread, n = 0; i < count; i += (int)block, ++n)
                    if (scaled_here & (1u << n)) V::unscale(batch.staged(i));
                __syncthreads();
            }
        } else {
            __syncthreads();
        }

        // the batch walked in its form (one form where nothing is scaled)
        if constexpr (kScales) {
            if (scaled) {
                walk_batch<V, P, true, Paired>(params, batch, batch_start, count, pixel_ctx, pixel, cull, warp, lane,
                                               warp_lanes, warp_mask);
                continue;
            }
        }
        walk_batch<V, P, false, Paired>(params, batch, batch_start, count, pixel_ctx, pixel, cull, warp, lane,
                                        warp_lanes, warp_mask);
    }
    stop_position = range_end;
    return false;
}

// Programmatic dependent launch (compute capability 9.0+; no-ops before it and in kernels launched without it):
// the runtime launches the LPT kernel behind the chunk kernel on one stream, allowed to start once every chunk
// CTA has executed allow_dependent_launch (or exited), and each LPT CTA waits for the chunk kernel to complete
// before it exits, so that work after the LPT kernel on the stream sees both kernels' outputs.
__device__ inline void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ inline void wait_for_preceding_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Persistent-queue position of this CTA's next work unit, broadcast to the whole CTA. The first unit of
// each CTA is its blockIdx (the heaviest units start at once, spread over the SMs); every further one
// costs one atomicAdd by one thread.
struct PersistentQueue {
    int* counter;
    int position;  // meaningful in thread 0 only

    __device__ explicit PersistentQueue(int* counter_) : counter(counter_), position((int)blockIdx.x) {}

    __device__ int next(int* broadcast, bool first) {
        if (threadIdx.x == 0) {
            if (!first) position = (int)gridDim.x + atomicAdd(counter, 1);
            *broadcast = position;
        }
        __syncthreads();
        return *broadcast;
    }
};

// Every CTA calls this once after its queue loop. The last CTA out resets the queue words (so that the
// same plan can run again, and a CUDA graph replays it), and the last CTA of the frame's blending
// kernels copies the frame's status to mapped host memory, read later by the host without waiting.
__device__ inline void leave_queue(const FrameArgs& f, int counter_word, int exited_word) {
    __syncthreads();
    if (threadIdx.x != 0) return;
    __threadfence();
    if (atomicAdd(f.schedule + exited_word, 1) != (int)gridDim.x - 1) return;
    f.schedule[counter_word] = 0;
    f.schedule[exited_word] = 0;
    if (atomicAdd(f.schedule + LPT_WORD_FINISHED_KERNELS, 1) != f.finishing_kernels - 1) return;
    f.schedule[LPT_WORD_FINISHED_KERNELS] = 0;
    if (f.status != nullptr) {
        volatile int* status = f.status;
        status[LPT_STATUS_ERROR] = *((volatile int*)f.schedule + LPT_WORD_ERROR);
        status[LPT_STATUS_WANTED_CHUNK_UNITS] = f.schedule[LPT_WORD_WANTED_CHUNK_UNITS];
        status[LPT_STATUS_CHUNKED_TILES] = f.schedule[LPT_WORD_CHUNKED_TILES];
        status[LPT_STATUS_CHUNK_COUNT] = f.schedule[LPT_WORD_CHUNK_COUNT];
        status[LPT_STATUS_PLAN_MODE] = f.schedule[LPT_WORD_PLAN_MODE];
        status[LPT_STATUS_WORDS + (f.frame_index & (LPT_STATUS_RING - 1))] =
            ((f.frame_index & LPT_STATUS_RING_FRAME_MASK) << 2) | f.schedule[LPT_WORD_PIXELS_WANTED];
        // (kept across frames: a later frame that needs no chunking leaves it for the host to see)
        if (f.schedule[LPT_WORD_PLAN_MODE] == LPT_MODE_AUTO &&
            (f.schedule[LPT_WORD_CHUNKED_TILES] > 0 || f.schedule[LPT_WORD_WANTED_CHUNK_UNITS] > 0))
            status[LPT_STATUS_LAST_CHUNKING_FRAME] = f.frame_index;
        __threadfence_system();
        status[LPT_STATUS_FRAME_INDEX] = f.frame_index;
    }
}

template <class Batch>
__device__ inline bool launched_with_enough_shared_memory(const FrameArgs& f) {
    if (dynamic_shared_bytes() >= Batch::kBytes) return true;
    if (threadIdx.x == 0) atomicOr(f.schedule + LPT_WORD_ERROR, LPT_ERROR_LAUNCH);
    return false;
}

// Mechanism 1: a persistent grid of K CTAs drains the LPT queue, every work item except the h chunked
// ones, heaviest predicted cost first. Per-pixel math identical to gsplat's forward kernel.
// WritesLastIds false: a build for calls that need no last_ids (nothing takes gsplat's backward: the runtime
// launches it only where Outputs::last_ids is null), so no pixel keeps the index of its last blended Gaussian
// (3DGS, 3 channels, ptxas sm_90: the two-pixel walk's iteration of two Gaussians 127 -> 121 instructions, the
// one-pixel walk's of two 113 -> 110), and the accumulator's write<false> writes no other index only the backward
// reads (2DGS's median_ids: nor does any pixel keep that index). Every other output is the same floats.
// LatencyBound: a variant's build for latency-bound frames (HasLatencyBoundBuild, one pixel per thread): its walk
// evaluates two Gaussians before blending them. A frame is latency-bound where nothing is chunked and its heaviest
// item outlasts the mean work per CTA ROWS_MIN_IMBALANCE times over (the plan's persistent_rows word): that item ends
// alone on its SM, with a few warps to hide each Gaussian's latency, and two independent evaluations per iteration
// hide more of it. Elsewhere, with the SMs full, the paired walk is slower (its registers). The runtime launches both
// builds of an unchunked frame (FrameArgs.latency_companion), the latency-bound one first; each returns at once on the
// other kind of frame, read from the plan's words, so the frame costs one nearly empty grid more and no host wait.
template <class V, unsigned CDIM, unsigned P, unsigned MaxThreads, bool WritesLastIds = true, bool LatencyBound = false>
__device__ void lpt_persistent_blend(const FrameArgs& f, const typename V::Params& params,
                                     const typename V::Outputs& out) {
    extern __shared__ __align__(16) unsigned char shared_bytes[];
    __shared__ int broadcast;
    using Batch = SharedBatch<V, BatchCapacity<MaxThreads, P>::value>;
    if constexpr (HasLatencyBoundBuild<V>::value && P == 1) {
        if (LatencyBound || f.latency_companion != 0) {
            const bool latency_bound = f.schedule[LPT_WORD_PERSISTENT_ROWS] != 0 && f.schedule[LPT_WORD_CHUNKED_TILES] == 0;
            if (latency_bound != LatencyBound) return;  // the other build blends this frame
        }
    }
    if (!launched_with_enough_shared_memory<Batch>(f)) return;
    const Batch batch(shared_bytes);
    const int chunked_tiles = f.schedule[LPT_WORD_CHUNKED_TILES];
    const bool invalid_frame = (f.schedule[LPT_WORD_ERROR] & LPT_ERROR_OFFSETS) != 0;
    const int queue_length = f.num_items - chunked_tiles;
    PersistentQueue queue(f.schedule + LPT_WORD_LPT_COUNTER);

    for (bool first = true;; first = false) {
        const int position = queue.next(&broadcast, first);
        if (position >= queue_length) break;
        const int item = f.lpt_order[chunked_tiles + position];
        const bool masked = f.masks != nullptr && !f.masks[item];
        // read per item rather than held in a register across the queue loop (the one-pixel build spilled)
        const bool blocks = chunked_tiles > 0 ? chunked_frame_warp_blocks(f)
                                              : warp_blocks<P>(f) && !(rows_when_latency_bound(f) &&
                                                                       f.schedule[LPT_WORD_PERSISTENT_ROWS] != 0);
        PixelSlot slots[P] = {};
        typename V::Pixel pixel_ctx[P];
        PixelBlend<V, CDIM, kSignedTransmittance<P, CDIM>> pixels[P] = {};
#pragma unroll
        for (unsigned p = 0; p < P; ++p) {
            slots[p] = p == 0 ? PixelSlot(f, item, pixel_rank<P>(f, blocks, threadIdx.x, 0)) : slots[0].below(f, p);
            bool valid_ray = true;
            pixel_ctx[p] = V::pixel(params, slots[p].image, slots[p].px, slots[p].py, valid_ray);
            pixels[p] = PixelBlend<V, CDIM, kSignedTransmittance<P, CDIM>>(slots[p].inside && valid_ray);
            if (invalid_frame) {
                pixels[p].acc.poison();
                pixels[p].T = __int_as_float(0x7fc00000);
            }
        }
        int range_start = 0, range_end = 0, stop_position = 0;
        if (!invalid_frame && !masked) {  // gsplat renders the background on masked-out tiles
            item_range(f, item, range_start, range_end);
            blend_range<V, P, LatencyBound>(f, params, batch, range_start, range_end, pixel_ctx, slots[0], blocks,
                                            pixels, nullptr, 0, stop_position);
        }
#pragma unroll
        for (unsigned p = 0; p < P; ++p)
            if (slots[p].inside)
                pixels[p].acc.template write<WritesLastIds>(params, out, slots[p], pixels[p].transmittance(),
                                                            masked || !WritesLastIds ? -1 : (int)pixels[p].last_index);
        if (f.item_depth != nullptr && threadIdx.x == 0) f.item_depth[item] = stop_position - range_start;
        __syncthreads();  // the staged batch and the broadcast word are reused by the next unit
    }
    leave_queue(f, LPT_WORD_LPT_COUNTER, LPT_WORD_LPT_EXITED);
}

// Saturation signalled across chunks (one thread, once a chunk has stored its partials): the chunk publishes
// the largest T among its pixels that did not saturate on their own (0 where all did), then walks the
// finished prefix of the item's chunks, 0, 1, ...: where the product of those values falls to the
// threshold, every pixel's product of T has too (each factor bounds that pixel's, and rounding is
// monotone), so each pixel saturated at or before that chunk, and the later chunks stop at their next
// batch (saturation_flags). Chunks blend from T = 1, so on their own they often saturate nowhere: without
// this the last chunk, which takes the list beyond the predicted depth, would walk on behind a saturated
// item. Whichever of two chunks finishing together publishes last sees both (the fence).
__device__ inline void signal_saturated_prefix(const FrameArgs& f, int* saturation_flag, int unit, int tile_slot,
                                               int chunked_tiles, int chunk_count, float open_T) {
    __stcg(f.chunk_transmittance + unit, open_T);
    __threadfence();
    float product = 1.f;
    for (int c = 0; c < chunk_count; ++c) {
        const float T = __ldcg(f.chunk_transmittance + c * chunked_tiles + tile_slot);
        if (T < 0.f) return;  // not finished (or stopped): the prefix ends here
        product *= T;
        if (product <= kTransmittanceThreshold) {
            atomicMin(saturation_flag, c);
            __threadfence();  // (seen by the composite, which reads the flag once every chunk has arrived)
            return;
        }
    }
}

// Where a pixel's sequential walk stops inside chunk c, the first chunk where its product of T falls to the
// threshold (or that saturated it on its own), from the chunk's start: T_before the product of the chunks
// before (> threshold), chunk_T the chunk's own final T (blended from 1). The walk stops where the chunk's
// running T reaches threshold / T_before; with log T falling evenly across the chunk that is the fraction
// log(threshold / T_before) / log(chunk_T) of it (rounded up; the whole chunk where chunk_T says nothing).
// An estimate, not a bound: a prediction that falls short is covered by the margin, else walked on from the
// composed T (and the walk feeds back where it really stopped).
__device__ inline int estimated_stop(int c, int chunk_length, float T_before, float chunk_T) {
    float fraction = 1.f;
    if (chunk_T > 0.f && chunk_T < 1.f && T_before > kTransmittanceThreshold)
        fraction = fminf(1.f, logf(kTransmittanceThreshold / T_before) / logf(chunk_T));
    return c * chunk_length + max(1, (int)ceilf(fraction * (float)chunk_length));
}

// Mechanism 2: the h heaviest items cut into k depth chunks; chunk unit u is chunk u / h of chunked item
// u % h (chunk-major: every item's first chunk is taken before any second chunk, so deeper chunks start
// late and often find their item saturated). Each chunk blends from T = 1 and leaves per-pixel partial
// accumulators and T, stored negated when the pixel saturated inside the chunk (the composite stops
// there, as the sequential renderer would have stopped at or before it). saturation_flags[slot] (k at
// the start) is lowered with atomicMin to the first chunk whose pixels all saturated, on their own or
// across the chunks before it (signal_saturated_prefix); later chunks check it once per batch and stop,
// and the composite reads no chunk beyond it. The last chunk of an item to finish composites the item, Eq. (5):
// C = sum_p C_p prod_{q<p} T_q, alpha = 1 - prod T, background with the final T. last_ids of chunked
// items are -1: the front end never chunks a frame whose backward needs them. A kRewalk accumulator's
// composite also re-walks the item after chunk 0 (see the concept at the top).
// The chunks cover the item's predicted depth (the previous frame's saturation depth times a margin;
// the whole list without one); where the list goes on and no chunk saturated the item, the composite walks
// on from each open pixel's composed T. A chunk's partials are laid out per pixel slot of the CTA: value v
// of pixel p of thread t at [v * pixels + p * block + t].
template <class V, unsigned CDIM, unsigned P, unsigned MaxThreads>
__device__ void depth_chunk_blend(const FrameArgs& f, const typename V::Params& params,
                                  const typename V::Outputs& out) {
    allow_dependent_launch();  // the LPT kernel starts once every chunk CTA is resident (see the runtime)
    extern __shared__ __align__(16) unsigned char shared_bytes[];
    __shared__ int broadcast;
    __shared__ int last_arrival;
    __shared__ int deepest_chunk;  // the composite's depth bound: 1 + the deepest chunk a pixel of the item needs
    __shared__ int estimated_depth;  // the composite's estimate of the item's stop depth (see estimated_stop)
    __shared__ unsigned largest_open_T;  // the chunk's largest T among its pixels still blending (float bits)
    using Batch = SharedBatch<V, BatchCapacity<MaxThreads, P>::value>;
    if (!launched_with_enough_shared_memory<Batch>(f)) return;
    const Batch batch(shared_bytes);
    using Accumulator = typename V::template Accumulator<CDIM>;
    constexpr unsigned kSlotFloats = Accumulator::kPartialFloats + 1;  // + T
    const int chunked_tiles = f.schedule[LPT_WORD_CHUNKED_TILES];
    const int chunk_count = f.schedule[LPT_WORD_CHUNK_COUNT];
    const int chunk_units = chunked_tiles * chunk_count;
    const unsigned block = blockDim.x;
    const unsigned pixels_per_cta = block * P;
    const bool blocks = chunk_warp_blocks(f);
    PersistentQueue queue(f.schedule + LPT_WORD_CHUNK_COUNTER);

    for (bool first = true;; first = false) {
        const int unit = queue.next(&broadcast, first);
        if (unit >= chunk_units || unit >= f.chunk_unit_capacity) break;
        const int chunk = unit / chunked_tiles;
        const int tile_slot = unit - chunk * chunked_tiles;
        const int item = f.lpt_order[tile_slot];
        PixelSlot slots[P] = {};
        typename V::Pixel pixel_ctx[P];
        bool valid_rays[P];
        PixelBlend<V, CDIM, false> pixels[P] = {};
#pragma unroll
        for (unsigned p = 0; p < P; ++p) {
            slots[p] = p == 0 ? PixelSlot(f, item, pixel_rank<P>(f, blocks, threadIdx.x, 0)) : slots[0].below(f, p);
            valid_rays[p] = true;
            pixel_ctx[p] = V::pixel(params, slots[p].image, slots[p].px, slots[p].py, valid_rays[p]);
            pixels[p] = PixelBlend<V, CDIM, false>(slots[p].inside && valid_rays[p]);
        }

        int range_start, range_end;
        item_range(f, item, range_start, range_end);
        const int length = range_end - range_start;
        const int predicted = min(f.sorted_costs[tile_slot], length);
        const int covered = predicted >= length ? length : min(length, (int)ceilf((float)predicted * LPT_DEPTH_MARGIN));
        const int chunk_length = (covered + chunk_count - 1) / chunk_count;
        const int covered_end = range_start + covered;  // the composite walks the list beyond, where needed
        const int chunk_start = min(covered_end, range_start + chunk * chunk_length);
        const int chunk_end = min(covered_end, chunk_start + chunk_length);

        int* saturation_flag = f.saturation_flags + tile_slot;
        int stop_position = chunk_start;
        const bool stopped = blend_range<V, P>(f, params, batch, chunk_start, chunk_end, pixel_ctx, slots[0], blocks,
                                               pixels, saturation_flag, chunk, stop_position);
        bool all_done = true;
        float open_T = 0.f;
#pragma unroll
        for (unsigned p = 0; p < P; ++p) {
            all_done = all_done && pixels[p].done();
            if (!pixels[p].done()) open_T = fmaxf(open_T, pixels[p].T);
        }
        if (threadIdx.x == 0) largest_open_T = 0u;
        // every pixel of the item saturated here: chunks after this one cannot contribute
        if (__syncthreads_count(all_done) >= (int)block && threadIdx.x == 0) {
            atomicMin(saturation_flag, chunk);
            atomicMin(f.chunk_depth + tile_slot, stop_position - range_start);
        }
        if (!stopped && open_T > 0.f) atomicMax(&largest_open_T, __float_as_uint(open_T));  // (T >= 0: bits order)
        if (!stopped) {  // when stopped, an earlier chunk saturated the item: the composite never reads this one
#pragma unroll
            for (unsigned p = 0; p < P; ++p) {
                float* partial = f.partials + (long long)unit * kSlotFloats * pixels_per_cta + p * block + threadIdx.x;
                pixels[p].acc.store_partial(partial, pixels_per_cta);
                partial[(long long)Accumulator::kPartialFloats * pixels_per_cta] = pixels[p].signed_transmittance();
            }
        }

        // the last chunk of the item to arrive composites all of them
        __threadfence();
        __syncthreads();
        if (threadIdx.x == 0) {
            if (!stopped) signal_saturated_prefix(f, saturation_flag, unit, tile_slot, chunked_tiles, chunk_count,
                                                  __uint_as_float(largest_open_T));
            last_arrival = atomicAdd(f.chunk_arrivals + tile_slot, 1) == chunk_count - 1;
            deepest_chunk = 0;
            estimated_depth = 0;
        }
        __syncthreads();
        if (last_arrival) {
            __threadfence();
            PixelBlend<V, CDIM, false> composite[P] = {};
            float first_T[P];  // chunk 0's T (negative: the pixel saturated in chunk 0)
            int needed_chunks = 0;  // this thread's pixels: chunks up to the one where the product of T falls to the threshold
            int estimate = 0;  // this thread's pixels: the largest estimated stop depth (from range_start)
            // chunks after the saturation flag's never stored partials: every pixel saturated at or before it
            const int flag = *((volatile const int*)saturation_flag);  // final: every chunk has arrived
            const int last_chunk = min(chunk_count - 1, flag);
#pragma unroll
            for (unsigned p = 0; p < P; ++p) {
                composite[p] = PixelBlend<V, CDIM, false>(slots[p].inside);
                first_T[p] = -1.f;
                if (!slots[p].inside) continue;
                int needed = last_chunk + 1;  // (the whole covered range where T never falls that low)
                int pixel_estimate = needed * chunk_length;
                for (int c = 0; c <= last_chunk; ++c) {
                    const float* chunk_slot = f.partials + ((long long)c * chunked_tiles + tile_slot) * kSlotFloats * pixels_per_cta
                                              + p * block + threadIdx.x;
                    const float signed_T = __ldcg(chunk_slot + (long long)Accumulator::kPartialFloats * pixels_per_cta);
                    if (c == 0) first_T[p] = signed_T;
                    const float T_before = composite[p].T;
                    composite[p].acc.combine_partial(chunk_slot, pixels_per_cta, T_before);
                    composite[p].T *= fabsf(signed_T);
                    if (needed == last_chunk + 1 && (signed_T < 0.f || composite[p].T <= kTransmittanceThreshold)) {
                        needed = c + 1;
                        pixel_estimate = estimated_stop(c, chunk_length, T_before, fabsf(signed_T));
                    }
                    if (signed_T < 0.f) {  // saturated inside this chunk (or no valid ray: nothing blended)
                        composite[p].close();
                        break;
                    }
                }
                if (composite[p].T <= kTransmittanceThreshold) composite[p].close();
                needed_chunks = max(needed_chunks, needed);
                estimate = max(estimate, pixel_estimate);
            }
            if (needed_chunks > 0) atomicMax(&deepest_chunk, needed_chunks);
            if (estimate > 0) atomicMax(&estimated_depth, estimate);
            // The list beyond the covered range (the prediction fell short of this frame's depth): the
            // pixels still open walk on from their composed T, one CTA, gsplat's rule, until they saturate.
            // A chunk that started there from T = 1 could not stop before the end of the list: it saturates
            // on its own late or never, and the chunks before it cannot signal a saturation that happens
            // inside it. No pixel is open where the flag fell (each saturated at or before that chunk).
            int walked_end = covered_end;
            if (flag >= chunk_count && covered_end < range_end)
                blend_range<V, P>(f, params, batch, covered_end, range_end, pixel_ctx, slots[0], blocks, composite,
                                  nullptr, 0, walked_end);
            if constexpr (Rewalks<Accumulator>::value) {  // the whole CTA walks (blend_range synchronises it)
                RewalkPixel<V, CDIM> rewalk[P];
#pragma unroll
                for (unsigned p = 0; p < P; ++p) {
                    const bool walk = slots[p].inside && valid_rays[p] && chunk_count > 1 && first_T[p] > 0.f;
                    rewalk[p].acc = &composite[p].acc;
                    rewalk[p].T = first_T[p];
                    rewalk[p].settled = !walk || composite[p].acc.rewalk_settled(first_T[p]);
                }
                int walk_stop;
                __syncthreads();  // (the batch of the walk beyond the covered range)
                blend_range<V, P>(f, params, batch, min(range_end, range_start + chunk_length), range_end, pixel_ctx,
                                  slots[0], blocks, rewalk, nullptr, 0, walk_stop);
            }
#pragma unroll
            for (unsigned p = 0; p < P; ++p)
                if (slots[p].inside) composite[p].acc.write(params, out, slots[p], composite[p].transmittance(), -1);
            __syncthreads();  // (deepest_chunk, estimated_depth)
            if (threadIdx.x == 0) {  // leave the item's words as the plan set them: the plan can run again
                // the item's depth for the next frame's plan: where the walk beyond the covered range stopped,
                // else the pixels' largest estimated stop inside the chunk each needed (estimated_stop), capped
                // by the first chunk that saturated every pixel on its own. (The end of the needed chunk, an
                // upper bound, fed back a depth up to a chunk too deep: a prediction that grew with it, and
                // items that looked heavier than they are kept their frame chunked.)
                const int needed_depth = deepest_chunk == chunk_count ? walked_end - range_start
                                                                      : min(length, estimated_depth);
                if (f.item_depth != nullptr) f.item_depth[item] = min(f.chunk_depth[tile_slot], needed_depth);
                f.chunk_arrivals[tile_slot] = 0;
                f.saturation_flags[tile_slot] = chunk_count;
                f.chunk_depth[tile_slot] = kNoDepth;
            }
            for (int c = (int)threadIdx.x; c < chunk_count; c += (int)block)
                f.chunk_transmittance[c * chunked_tiles + tile_slot] = -1.f;
        }
        __syncthreads();  // the staged batch and the broadcast words are reused by the next unit
    }
    leave_queue(f, LPT_WORD_CHUNK_COUNTER, LPT_WORD_CHUNK_EXITED);
}

// Threads per SM a variant's blending kernels are built to keep resident: with one pixel per thread 1536
// (gsplat's 3DGS occupancy) unless the traits struct declares `static constexpr unsigned kResidentThreads`
// (a variant with more per-pixel state, so that its registers are not capped into spills); with P > 1
// pixels per thread 1280 (48 registers: each thread keeps P pixels' state; the few values that spill are
// per-item ones, outside the per-Gaussian loop, and the extra warps hide the loop's latencies: on the H200
// the two-pixel 3DGS kernel took 1299 us on the bonsai orbit against 1380 us at 1024 threads and 64 registers).
template <class V, unsigned P, class = void>
struct ResidentThreads {
    static constexpr unsigned value = P == 1 ? 1536 : 1280;
};
template <class V, unsigned P>
struct ResidentThreads<V, P, decltype((void)V::kResidentThreads)> {
    static constexpr unsigned value = P == 1 ? V::kResidentThreads : 1024;
};

// More than 4 channels (feature maps; colours are then read from global memory): the threads per SM a kernel
// of CDIM channels and P pixels per thread is built for, where the traits struct declares
// `static constexpr unsigned wide_resident_threads(unsigned channels, unsigned pixels)` (0: no bound, the
// compiler takes the registers it wants), else 0. 3DGS: blend_3dgs.cu; 2DGS: blend_2dgs.cu.
template <class V, unsigned CDIM, unsigned P, class = void>
struct WideResidentThreads {
    static constexpr unsigned value = 0;
};
template <class V, unsigned CDIM, unsigned P>
struct WideResidentThreads<V, CDIM, P, decltype((void)V::wide_resident_threads(0u, 0u))> {
    static constexpr unsigned value = V::wide_resident_threads(CDIM, P);
};

// The CTAs per SM a blending kernel of CTA size MAX_THREADS is built for (__launch_bounds__' minimum): 1 where
// nothing bounds its registers.
template <class V, unsigned CDIM, unsigned P, unsigned MAX_THREADS>
struct ResidentCtas {
    static constexpr unsigned threads = CDIM <= 4 ? ResidentThreads<V, P>::value : WideResidentThreads<V, CDIM, P>::value;
    static constexpr unsigned value = threads >= MAX_THREADS ? threads / MAX_THREADS : 1;
};

}  // namespace lpt

// The two blending kernels of one variant for one channel count, CTA size and pixels per thread, as
// extern "C" symbols (lpt_persistent_blend_<SUFFIX>_<CDIM>_<MAX_THREADS>_<PIXELS>, depth_chunk_blend_...):
// the runtime appends one line LPT_EXPORT_KERNELS(...) per instantiation it needs, which works for NVRTC
// and nvcc alike. MAX_THREADS bounds the registers so that ResidentCtas CTAs fit on an SM.
#define LPT_EXPORT_KERNELS(SUFFIX, VARIANT, CDIM, MAX_THREADS, PIXELS)                                        \
    extern "C" __global__ void __launch_bounds__(                                                             \
        MAX_THREADS, (lpt::ResidentCtas<VARIANT, CDIM, PIXELS, MAX_THREADS>::value))                         \
        lpt_persistent_blend_##SUFFIX##_##CDIM##_##MAX_THREADS##_##PIXELS(                                    \
            const lpt::FrameArgs frame, const VARIANT::Params params, const VARIANT::Outputs outputs) {       \
        lpt::lpt_persistent_blend<VARIANT, CDIM, PIXELS, MAX_THREADS>(frame, params, outputs);                \
        lpt::wait_for_preceding_grids();                                                                      \
    }                                                                                                         \
    extern "C" __global__ void __launch_bounds__(                                                             \
        MAX_THREADS, (lpt::ResidentCtas<VARIANT, CDIM, PIXELS, MAX_THREADS>::value))                         \
        depth_chunk_blend_##SUFFIX##_##CDIM##_##MAX_THREADS##_##PIXELS(                                       \
            const lpt::FrameArgs frame, const VARIANT::Params params, const VARIANT::Outputs outputs) {       \
        lpt::depth_chunk_blend<VARIANT, CDIM, PIXELS, MAX_THREADS>(frame, params, outputs);                   \
    }

// ... and the persistent kernel of calls that need no last_ids (lpt_persistent_blend_no_last_ids_<SUFFIX>_...), for
// variants that have it (gsplat_lpt.variants.Variant.no_last_ids_kernel).
#define LPT_EXPORT_NO_LAST_IDS_KERNEL(SUFFIX, VARIANT, CDIM, MAX_THREADS, PIXELS)                             \
    extern "C" __global__ void __launch_bounds__(                                                             \
        MAX_THREADS, (lpt::ResidentCtas<VARIANT, CDIM, PIXELS, MAX_THREADS>::value))                         \
        lpt_persistent_blend_no_last_ids_##SUFFIX##_##CDIM##_##MAX_THREADS##_##PIXELS(                        \
            const lpt::FrameArgs frame, const VARIANT::Params params, const VARIANT::Outputs outputs) {       \
        lpt::lpt_persistent_blend<VARIANT, CDIM, PIXELS, MAX_THREADS, false>(frame, params, outputs);         \
        lpt::wait_for_preceding_grids();                                                                      \
    }

// ... and a variant's builds of its persistent kernel for latency-bound frames, with and without last_ids
// (lpt_persistent_blend_latency_<SUFFIX>_<CDIM>_<MAX_THREADS>_1, lpt_persistent_blend_latency_no_last_ids_...), for
// variants that declare kLatencyBoundBuild (gsplat_lpt.variants.Variant.latency_bound_build).
#define LPT_EXPORT_LATENCY_BOUND_KERNELS(SUFFIX, VARIANT, CDIM, MAX_THREADS)                                   \
    extern "C" __global__ void __launch_bounds__(MAX_THREADS, (lpt::ResidentCtas<VARIANT, CDIM, 1, MAX_THREADS>::value)) \
        lpt_persistent_blend_latency_##SUFFIX##_##CDIM##_##MAX_THREADS##_1(                                   \
            const lpt::FrameArgs frame, const VARIANT::Params params, const VARIANT::Outputs outputs) {       \
        lpt::lpt_persistent_blend<VARIANT, CDIM, 1, MAX_THREADS, true, true>(frame, params, outputs);         \
    }                                                                                                         \
    extern "C" __global__ void __launch_bounds__(MAX_THREADS, (lpt::ResidentCtas<VARIANT, CDIM, 1, MAX_THREADS>::value)) \
        lpt_persistent_blend_latency_no_last_ids_##SUFFIX##_##CDIM##_##MAX_THREADS##_1(                       \
            const lpt::FrameArgs frame, const VARIANT::Params params, const VARIANT::Outputs outputs) {       \
        lpt::lpt_persistent_blend<VARIANT, CDIM, 1, MAX_THREADS, false, true>(frame, params, outputs);        \
    }
