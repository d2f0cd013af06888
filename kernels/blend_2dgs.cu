// 2DGS: the per-pixel evaluation of gsplat 1.5.3's rasterize_to_pixels_2dgs_fwd (ray-splat intersection
// through ray_transforms, the 2D low-pass filter, normals, distortion, median depth and median_ids) as a
// variant of the shared scheduling core (lpt_core.cuh), with a conservative per-warp cull bound.
//
// gsplat builds its CUDA extension with -use_fast_math (unless NO_FAST_MATH=1): the division of the
// ray-splat intersection is then div.approx.ftz. The runtime compiles this file with the same flag
// (gsplat_lpt.variants.surfel2d.compile_options), so that the same expressions compile to the same
// instructions and the outputs are gsplat's bit for bit.
#include "lpt_core.cuh"

namespace surfel2d {

constexpr float kFilterInvSquare = 2.0f;  // gsplat's FILTER_INV_SQUARE_2DGS (Rasterization.h)

__device__ inline bool finite(float x) { return (__float_as_int(x) & 0x7f800000) != 0x7f800000; }

// Lower bound of |x| over [mid - radius, mid + radius] (0 when the interval holds 0).
__device__ inline float min_abs(float mid, float radius) { return fmaxf(fabsf(mid) - radius, 0.f); }

template <class V, unsigned CDIM>
struct Accumulator;

}  // namespace surfel2d

struct Surfel2DGS {
    // Host twin: gsplat_lpt.variants.surfel2d.Params2DGS
    struct Params {
        const float2* means2d;         // [I * N or nnz]
        const float* ray_transforms;   // [I * N or nnz, 3, 3] rows u_M, v_M, w_M
        const float* colors;           // [I * N or nnz, CDIM]; the last channel is read as depth
        const float* opacities;        // [I * N or nnz]
        const float* normals;          // [I * N or nnz, 3]
        const float* backgrounds;      // [I, CDIM] or null
    };
    // Host twin: gsplat_lpt.variants.surfel2d.Outputs2DGS
    struct Outputs {
        float* render_colors;   // [I, H, W, CDIM]
        float* render_alphas;   // [I, H, W]
        int* last_ids;          // [I, H, W]
        float* render_normals;  // [I, H, W, 3]
        float* render_distort;  // [I, H, W]
        float* render_median;   // [I, H, W]
        int* median_ids;        // [I, H, W]
    };
    struct alignas(16) Staged {
        float4 xy_opacity_limit;  // mean x, y, opacity, L' (the cull bound's sigma limit, see may_contribute)
        float4 u_M;               // rows of the ray transform (w unused)
        float4 v_M;
        float4 w_M;
    };
    struct Pixel {
        float px, py;
    };

    static __device__ Pixel pixel(const Params&, int, float px, float py, bool& valid) {
        valid = true;
        return Pixel{px, py};
    }

    // L': a pixel where gsplat's alpha reaches 1/255 has sigma <= L'. gsplat blends only where
    // opac * __expf(-sigma) >= 1/255, i.e. sigma <= L = ln(255 opac) up to rounding: __expf, __logf and
    // 1/255 in float are each within about 1e-6 (relative, or absolute in the exponent) of exact for
    // sigma <= 20, so the padding 1e-5 (1 + |L|) covers them (and a larger sigma only lowers alpha further).
    // Not finite (a NaN or infinite mean, ray transform or opacity): +inf, never culled (gsplat's
    // min(0.999f, NaN) is 0.999, so a NaN can be blended). Opacity below 1/255: negative, always culled.
    static __device__ float cull_limit(const float4& xy_opacity, const float4& u, const float4& v, const float4& w) {
        const bool inputs_finite = surfel2d::finite(xy_opacity.x) && surfel2d::finite(xy_opacity.y)
                                   && surfel2d::finite(xy_opacity.z) && surfel2d::finite(u.x) && surfel2d::finite(u.y)
                                   && surfel2d::finite(u.z) && surfel2d::finite(v.x) && surfel2d::finite(v.y)
                                   && surfel2d::finite(v.z) && surfel2d::finite(w.x) && surfel2d::finite(w.y)
                                   && surfel2d::finite(w.z);
        const float infinite = __int_as_float(0x7f800000);
        if (!inputs_finite) return infinite;
        if (!(xy_opacity.z > 0.f)) return -1.f;  // opacity <= 0: alpha <= 0 < 1/255 everywhere
        const float limit = __logf(xy_opacity.z * 255.0f);  // ln 0 (an opacity that flushes to 0) = -inf
        return limit + 1e-5f * (1.f + fminf(fabsf(limit), 1e30f));
    }

    static __device__ void stage(const Params& p, int g, Staged& s) {
        const float2 xy = p.means2d[g];
        const float opacity = p.opacities[g];
        const float* M = p.ray_transforms + (long long)g * 9;
        const float4 u = make_float4(M[0], M[1], M[2], 0.f);
        const float4 v = make_float4(M[3], M[4], M[5], 0.f);
        const float4 w = make_float4(M[6], M[7], M[8], 0.f);
        float4 xy_opacity = make_float4(xy.x, xy.y, opacity, 0.f);
        xy_opacity.w = cull_limit(xy_opacity, u, v, w);
        s.xy_opacity_limit = xy_opacity;
        s.u_M = u;
        s.v_M = v;
        s.w_M = w;
    }

    static __device__ void stage_inert(Staged& s) {  // opacity 0 (skipped everywhere) and always culled
        s.xy_opacity_limit = make_float4(0.f, 0.f, 0.f, -1.f);
        s.u_M = make_float4(1.f, 0.f, 0.f, 0.f);
        s.v_M = make_float4(0.f, 1.f, 0.f, 0.f);
        s.w_M = make_float4(0.f, 0.f, 1.f, 0.f);
    }

    // gsplat's expressions, operand for operand (glm's px * w_M - u_M, glm::cross, the division, the
    // low-pass term and min): bitwise-equal alphas.
    static __device__ bool evaluate(const Staged& s, const Pixel& pixel, float& alpha) {
        const float4 xy_opac = s.xy_opacity_limit;
        const float opac = xy_opac.z;
        const float4 u_M = s.u_M, v_M = s.v_M, w_M = s.w_M;
        const float px = pixel.px, py = pixel.py;
        // homogeneous plane parameters h_u = px * w_M - u_M, h_v = py * w_M - v_M
        const float h_u_x = px * w_M.x - u_M.x, h_u_y = px * w_M.y - u_M.y, h_u_z = px * w_M.z - u_M.z;
        const float h_v_x = py * w_M.x - v_M.x, h_v_y = py * w_M.y - v_M.y, h_v_z = py * w_M.z - v_M.z;
        // glm::cross(h_u, h_v)
        const float cross_x = h_u_y * h_v_z - h_v_y * h_u_z;
        const float cross_y = h_u_z * h_v_x - h_v_z * h_u_x;
        const float cross_z = h_u_x * h_v_y - h_v_x * h_u_y;
        if (cross_z == 0.0) return false;
        const float s_x = cross_x / cross_z, s_y = cross_y / cross_z;
        const float gauss_weight_3d = s_x * s_x + s_y * s_y;
        const float d_x = xy_opac.x - px, d_y = xy_opac.y - py;
        const float gauss_weight_2d = surfel2d::kFilterInvSquare * (d_x * d_x + d_y * d_y);
        const float gauss_weight = min(gauss_weight_3d, gauss_weight_2d);
        const float sigma = 0.5f * gauss_weight;
        alpha = min(lpt::kMaxAlpha, opac * __expf(-sigma));
        return lpt::geu_and(alpha, lpt::kAlphaThreshold, !(sigma < 0.f));  // !(sigma < 0 || alpha < 1/255)
    }

    // The cull bound. gsplat's sigma is half the smaller of two weights, so a Gaussian reaches alpha >= 1/255
    // at a pixel when EITHER weight is <= 2 L': the contributing pixels are the union of the low-pass disc
    // |p - mean|^2 <= L' and the ray-splat region u^2 + v^2 <= 2 L' (the image of a disc of the splat's plane
    // under its homography: an ellipse, or unbounded when the disc reaches the plane's vanishing line). The
    // low-pass term alone bounds nothing (it only makes alpha larger near the mean), so both weights need a
    // lower bound over the warp's box of pixel centres; the Gaussian is dropped only when both exceed 2 L'.
    //
    // Low-pass weight: 2 |mean - p|^2 >= 2 (distance from the mean to the box)^2.
    // Ray-splat weight: h_u x h_v is affine in the pixel centre, cross(p) = px (v x w) + py (w x u) + u x v,
    // so over the box each component lies in [mid - rad, mid + rad] (mid at the box centre, rad = half widths
    // times |coefficients|), exactly. gsplat's float evaluation at a pixel differs from that exact value by
    // at most 6.01 eps (Hu_i Hv_j + Hv_i Hu_j) (eps = 2^-24, for the component made of h_i and h_j,
    // Hu_i = max|px| |w_i| + |u_i| >= |h_u,i|: two roundings per h, and a product difference with or without
    // a fused multiply-add), and computing mid and rad here adds at most 9.02 eps of the same magnitude; we
    // widen by E = 2^-19 (sum) + 2^-120 (flush-to-zero of tiny intermediates). Then at every pixel of the
    // box |s_x| = |cross_x| / |cross_z| >= min|cross_x| / max|cross_z|, likewise s_y, and gsplat's weight
    // s_x^2 + s_y^2 (division within 2 ulp: div.approx needs |cross_z| < 2^126, so we require max|cross_z| <
    // 2^124; a cross_z of 0, or one that flushes to 0, is skipped by gsplat) is at least the bound times
    // (1 - 2^-18). Intervals that hold 0 just give a zero lower bound; anything not finite keeps the Gaussian.
    static __device__ bool may_contribute(const Staged& s, const lpt::PixelBox& box) {
        const float4 xy_opac = s.xy_opacity_limit;
        const float limit = xy_opac.w;
        // Every term is computed for every lane and the answers are combined at the end: the 32 lanes of the
        // cull test, each on its own Gaussian, would otherwise part at each early answer (the same answer for
        // every input. H200, GPU time x gsplat's blend, every output the same: balanced room 10.64x -> 11.34x,
        // moderate 6.83x -> 6.95x, bonsai orbit 2.19x -> 2.21x.)
        const bool unbounded = !(limit < 1e30f);  // not finite inputs: never culled
        const bool faint = limit < 0.f;           // opacity below 1/255 (finite inputs, sigma >= 0): culled
        const float bar = 2.f * limit;      // drop when both weights exceed 2 L' at every pixel centre
        const float keep_factor = 1.f - 0x1p-18f;

        // low-pass weight 2 |mean - p|^2
        const float dx = fmaxf(fmaxf(box.x0 - xy_opac.x, xy_opac.x - box.x1), 0.f);
        const float dy = fmaxf(fmaxf(box.y0 - xy_opac.y, xy_opac.y - box.y1), 0.f);
        const bool low_pass_reaches = !(2.f * (dx * dx + dy * dy) * keep_factor > bar);

        // ray-splat weight: cross(p) = px A + py B + C, A = v x w, B = w x u, C = u x v
        const float4 u = s.u_M, v = s.v_M, w = s.w_M;
        const float cx = 0.5f * (box.x0 + box.x1), cy = 0.5f * (box.y0 + box.y1);
        const float hx = 0.5f * (box.x1 - box.x0), hy = 0.5f * (box.y1 - box.y0);
        const float ax = v.y * w.z - v.z * w.y, ay = v.z * w.x - v.x * w.z, az = v.x * w.y - v.y * w.x;
        const float bx = w.y * u.z - w.z * u.y, by = w.z * u.x - w.x * u.z, bz = w.x * u.y - w.y * u.x;
        const float qx = u.y * v.z - u.z * v.y, qy = u.z * v.x - u.x * v.z, qz = u.x * v.y - u.y * v.x;
        const float mid_x = cx * ax + cy * bx + qx, rad_x = hx * fabsf(ax) + hy * fabsf(bx);
        const float mid_y = cx * ay + cy * by + qy, rad_y = hx * fabsf(ay) + hy * fabsf(by);
        const float mid_z = cx * az + cy * bz + qz, rad_z = hx * fabsf(az) + hy * fabsf(bz);
        // magnitudes of h_u, h_v over the box (pixel centres are positive: the largest |px| is x1)
        const float tiny = 0x1p-100f;
        const float hu_x = box.x1 * fabsf(w.x) + fabsf(u.x) + tiny, hu_y = box.x1 * fabsf(w.y) + fabsf(u.y) + tiny;
        const float hu_z = box.x1 * fabsf(w.z) + fabsf(u.z) + tiny;
        const float hv_x = box.y1 * fabsf(w.x) + fabsf(v.x) + tiny, hv_y = box.y1 * fabsf(w.y) + fabsf(v.y) + tiny;
        const float hv_z = box.y1 * fabsf(w.z) + fabsf(v.z) + tiny;
        const float err_x = 0x1p-19f * (hu_y * hv_z + hv_y * hu_z) + 0x1p-120f;
        const float err_y = 0x1p-19f * (hu_z * hv_x + hv_z * hu_x) + 0x1p-120f;
        const float err_z = 0x1p-19f * (hu_x * hv_y + hv_x * hu_y) + 0x1p-120f;
        const float max_z = (fabsf(mid_z) + rad_z + err_z) * (1.f + 0x1p-20f);
        const bool unbounded_splat = !(max_z < 0x1p124f);  // also NaN / inf: keep
        const float min_x = surfel2d::min_abs(mid_x, rad_x + err_x);
        const float min_y = surfel2d::min_abs(mid_y, rad_y + err_y);
        const float sx = min_x / max_z, sy = min_y / max_z;
        const bool splat_reaches = !((sx * sx + sy * sy) * keep_factor > bar);
        return unbounded | (!faint & (low_pass_reaches | unbounded_splat | splat_reaches));
    }
    static constexpr bool kHasCullBound = true;
    // Registers: gsplat's 2DGS kernel uses 48 (5 CTAs of 256 threads per SM). Ours keeps more per-pixel state
    // around the persistent loop: capped at 40 (1536 threads) or 48 (1280) it spills 60 to 130 bytes per
    // thread with 3 or 4 channels (ptxas -v, sm_90); at 64 (1024 threads: 4 CTAs of 256) it spills nothing.
    static constexpr unsigned kResidentThreads = 1024;
    // Feature maps (lpt_core.cuh, WideResidentThreads; 2DGS pads 9-64 channels to 16, 32 or 64): built for 512
    // resident threads, at most 128 registers. Unbounded, the 64-channel kernels took 180 and 204 (one CTA of 256
    // threads per SM) and ran at 0.96x gsplat's time on the bonsai orbit; at 128 they spill nothing (ptxas -v,
    // sm_90), while at 85 (768 threads) they spill 400-1100 bytes. At 16 channels the compiler stays below 128
    // anyway; at 32 the chunk kernel goes from 140 to 128 (two CTAs per SM instead of one). Wider maps are blended
    // in slices of 64 (Surfel2DGSColorSlice and Surfel2DGSSlice, below): the front end launches no unbounded kernel.
    __host__ __device__ static constexpr unsigned wide_resident_threads(unsigned channels, unsigned) {
        return channels <= 64 ? 512 : 0;
    }

    // Colours, normals, distortion, median depth and id (surfel2d::Accumulator, below).
    template <unsigned CDIM>
    using Accumulator = surfel2d::Accumulator<Surfel2DGS, CDIM>;
};

namespace surfel2d {

// The 2DGS accumulator of traits V: colours (the last channel is depth, as gsplat reads it), normals,
// distortion, median depth and id.
//
// Depth chunks. Colours and normals compose by Eq. (5). Distortion: gsplat accumulates, per Gaussian i
// with vis_i = alpha_i T_i and depth d_i, 2 vis_i (d_i A_i - D_i), where A_i = 1 - T_i and D_i is the
// sum of vis_j d_j before i. A chunk blended from T = 1 has local T'_i, A'_i = 1 - T'_i, D'_i; after a
// prefix with transmittance P (accumulated weight 1 - P) and depth sum D0, T_i = P T'_i, vis_i = P vis'_i,
// A_i = (1 - P) + P A'_i and D_i = D0 + P D'_i, so the chunk adds
//   sum_i 2 P vis'_i (d_i ((1 - P) + P A'_i) - D0 - P D'_i)
//     = P^2 distort' + 2 P ((1 - P) D' - D0 (1 - T'))
// with distort', D' = sum vis'_i d_i and T' the chunk's own sums; D0 then grows by P D'. Median depth
// and median_ids (the last Gaussian blended while T > 0.5) come from chunk 0 (blended from T = 1, so
// exactly the sequential state) and the core's re-walk of the later chunks from chunk 0's final T
// (kRewalk): exact, bit for bit.
template <class V, unsigned CDIM>
struct Accumulator : lpt::ColorAccumulator<CDIM> {
    using Params = typename V::Params;
    using Staged = typename V::Staged;
    using Outputs = typename V::Outputs;
    static constexpr unsigned kPartialFloats = CDIM + 7;  // colours, normals[3], distort, D, median, id
    static constexpr bool kRewalk = true;
    float normal[3];
    float distort;
    float accum_vis_depth;
    float median_depth;
    unsigned median_idx;

    __device__ void reset() {
        lpt::ColorAccumulator<CDIM>::reset();
        normal[0] = normal[1] = normal[2] = 0.f;
        distort = 0.f;
        accum_vis_depth = 0.f;
        median_depth = 0.f;
        median_idx = 0;
    }

    // Colours read from global memory per blended Gaussian, not staged with the batch: most of a 2DGS
    // batch is culled (98% of the (Gaussian, warp) pairs on the ladder), and staging every row cost more
    // than it saved (H200: 6.28 -> 6.85 ms on the balanced ladder frame).
    static constexpr bool kStagedColor = false;

    // gsplat's loop body after vis = alpha * T, in its order.
    __device__ void add(const Params& p, const Staged&, const float4&, int g, float vis, float T,
                        unsigned list_index) {
        const float* c_ptr = p.colors + (long long)g * lpt::color_row_floats<V, CDIM>(p);
        this->add_color(c_ptr, vis);
        const float depth = c_ptr[CDIM - 1];
        const float* n_ptr = p.normals + (long long)g * 3;
#pragma unroll
        for (unsigned k = 0; k < 3; ++k) normal[k] += n_ptr[k] * vis;
        const float distort_bi_0 = vis * depth * (1.0f - T);
        const float distort_bi_1 = vis * accum_vis_depth;
        distort += 2.0f * (distort_bi_0 - distort_bi_1);
        accum_vis_depth += vis * depth;
        if (T > 0.5) {
            median_depth = depth;
            median_idx = list_index;
        }
    }

    __device__ void rewalk(const Params& p, const Staged&, const float4&, int g, float T, unsigned list_index) {
        if (T > 0.5) {
            median_depth = p.colors[(long long)g * lpt::color_row_floats<V, CDIM>(p) + (CDIM - 1)];
            median_idx = list_index;
        }
    }
    __device__ bool rewalk_settled(float T) const { return !(T > 0.5); }

    __device__ void store_partial(float* slot, unsigned stride) const {
        lpt::ColorAccumulator<CDIM>::store_partial(slot, stride);
#pragma unroll
        for (unsigned k = 0; k < 3; ++k) slot[(CDIM + k) * stride] = normal[k];
        slot[(CDIM + 3) * stride] = distort;
        slot[(CDIM + 4) * stride] = accum_vis_depth;
        slot[(CDIM + 5) * stride] = median_depth;
        slot[(CDIM + 6) * stride] = __int_as_float((int)median_idx);
    }

    __device__ void combine_partial(const float* slot, unsigned stride, float T_before) {
        lpt::ColorAccumulator<CDIM>::combine_partial(slot, stride, T_before);
#pragma unroll
        for (unsigned k = 0; k < 3; ++k) normal[k] += __ldcg(slot + (CDIM + k) * stride) * T_before;
        const float P = T_before;
        const float chunk_T = fabsf(__ldcg(slot + kPartialFloats * stride));
        const float chunk_distort = __ldcg(slot + (CDIM + 3) * stride);
        const float chunk_depth = __ldcg(slot + (CDIM + 4) * stride);
        distort += P * P * chunk_distort + 2.0f * P * ((1.0f - P) * chunk_depth - accum_vis_depth * (1.0f - chunk_T));
        accum_vis_depth += P * chunk_depth;
        if (T_before == 1.0f) {  // nothing blended before this chunk: its local median is the sequential one
            median_depth = __ldcg(slot + (CDIM + 5) * stride);
            median_idx = (unsigned)__float_as_int(__ldcg(slot + (CDIM + 6) * stride));
        }
    }

    __device__ void poison() {
        lpt::ColorAccumulator<CDIM>::poison();
        const float nan = __int_as_float(0x7fc00000);
        normal[0] = normal[1] = normal[2] = nan;
        distort = accum_vis_depth = median_depth = nan;
    }

    // median_ids, like last_ids, only for gsplat's backward: not where the call takes none (null: the front end
    // passes both or neither), and never in the persistent kernel's build that keeps no last_ids (WritesIds false),
    // where no pixel then keeps median_idx either (ptxas sm_90, 3 channels, per Gaussian of the culled walk: 99 -> 96
    // instructions with one pixel per thread, 174 -> 169 with two; the build with last_ids keeps both indices).
    template <bool WritesIds = true>
    __device__ void write(const Params& p, const Outputs& out, const lpt::PixelSlot& slot, float T,
                          int last_index) const {
        this->write_color(out, p.backgrounds, slot, T, last_index, lpt::color_row_floats<V, CDIM>(p));
#pragma unroll
        for (unsigned k = 0; k < 3; ++k) out.render_normals[slot.pixel * 3 + k] = normal[k];
        out.render_distort[slot.pixel] = distort;
        out.render_median[slot.pixel] = median_depth;
        if (WritesIds && out.median_ids != nullptr) out.median_ids[slot.pixel] = (int)median_idx;
    }
};

// Host twin: gsplat_lpt.variants.surfel2d.Params2DGSChannelSlice
struct SliceParams : Surfel2DGS::Params {
    unsigned channel_stride;  // channels of the whole map: floats per row of colors, backgrounds, render_colors
};

}  // namespace surfel2d

// Feature maps of more than constants.CHANNEL_SLICE channels, a slice at a time with one plan (as 3DGS,
// blend_3dgs.cu): the slices before the last blend their colours only (Surfel2DGSColorSlice); the last, which
// holds the depth channel, is blended with every output (Surfel2DGSSlice). Params point at the slice's first
// channel, in rows of channel_stride floats; every slice writes the same alphas and last_ids. Each channel's sum
// is gsplat's sequence on gsplat's T, so the image is gsplat's bit for bit.
struct Surfel2DGSColorSlice : Surfel2DGS {
    using Params = surfel2d::SliceParams;
    static constexpr bool kChannelSlice = true;
    // 16-byte colour loads (lpt_core.cuh, PlainColorAccumulator): 2DGS maps are padded to a power of two, so rows
    // of channel_stride >= 128 floats, and the front end passes a 16-byte aligned colour array.
    static constexpr bool kAlignedColorRows = true;
    template <unsigned CDIM>
    using Accumulator = lpt::PlainColorAccumulator<Surfel2DGSColorSlice, CDIM, false>;  // (not staged, as above)
};

struct Surfel2DGSSlice : Surfel2DGS {
    using Params = surfel2d::SliceParams;
    static constexpr bool kChannelSlice = true;
    template <unsigned CDIM>
    using Accumulator = surfel2d::Accumulator<Surfel2DGSSlice, CDIM>;
};

static_assert(sizeof(Surfel2DGS::Staged) == 64, "Surfel2DGS::Staged: 64 bytes, four 16-byte loads");
// The runtime appends LPT_EXPORT_KERNELS(2dgs, Surfel2DGS, <channels>, <CTA size>) for what it launches.
