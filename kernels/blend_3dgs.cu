// 3DGS: the per-Gaussian evaluation of gsplat 1.5.3's rasterize_to_pixels_3dgs_fwd as a variant of the
// shared scheduling core (lpt_core.cuh), with the conservative per-warp cull bound.
#include "lpt_core.cuh"

struct Gaussian3DGS {
    // Host twin: gsplat_lpt.variants.gaussian3d.Params3DGS
    struct Params {
        const float2* means2d;      // [I * N or nnz]
        const float3* conics;       // [I * N or nnz]
        const float* opacities;     // [I * N or nnz]
        const float* colors;        // [I * N or nnz, CDIM]
        const float* backgrounds;   // [I, CDIM] or null
    };
    // Host twin: gsplat_lpt.variants.gaussian3d.Outputs3DGS
    struct Outputs {
        float* render_colors;  // [I, H, W, CDIM]
        float* render_alphas;  // [I, H, W]
        int* last_ids;         // [I, H, W]
    };
    struct alignas(16) Staged {
        float4 xy_opacity_limit;  // mean x, y, opacity, the cull test's bound on sigma (see cull_bound)
        float4 conic_extent;      // a, b, c of sigma = a dx^2 / 2 + b dx dy + c dy^2 / 2, half height of the
                                  // band of rows where alpha can reach 1/255
    };
    struct Pixel {
        float px, py;
    };

    static __device__ Pixel pixel(const Params&, int, float px, float py, bool& valid) {
        valid = true;
        return Pixel{px, py};
    }

    // The cull bound, computed once per staged Gaussian. gsplat blends a Gaussian at a pixel only if
    // opac * __expf(-sigma) >= 1/255, i.e. sigma <= L = ln(255 opac) up to rounding: __expf, logf and 1/255
    // in float are each within 1e-6 of exact, so the exact quadratic form q(d) = (a dx^2 + c dy^2) / 2 +
    // b dx dy at gsplat's float offset d is <= L' = (L + 1e-5 (1 + |L|)) (1 + 3e-3) at every pixel it blends,
    // the factor covering gsplat's float sigma: its rounding is a few ulps of the term magnitude M =
    // (a dx^2 + c dy^2) / 2 + |b dx dy|, and M <= 2 q / (1 - |rho|) <= 2000 q where rho = b / sqrt(ac) is kept
    // within 0.999. Returned: .x = L' (1 + 2e-3), the bound may_contribute compares its own float minimum
    // of q against (that minimum is within 5e-4 relative of exact, by the same argument); .y = the half
    // height sqrt(2 L' a / det) of the ellipse q <= L' (det = ac - b^2), widened by 1e-3 relative and
    // 0.01 px, outside which no row can be reached. Conics that are not positive definite, nearly
    // degenerate, huge or not finite, and a NaN opacity (gsplat blends it: min(0.999f, NaN) is 0.999), give
    // an infinite bound (never culled); L' < 0 (opacity below 1/255) gives -1 (always culled).
    static __device__ float2 cull_bound(float a, float b, float c, float opacity) {
        const float limit = logf(opacity * 255.0f);
        const float padded = (limit + 1e-5f * (1.f + fminf(fabsf(limit), 1e30f))) * 1.003f;  // ln 0 = -inf stays
        const float det = a * c - b * b;
        const float infinite = __int_as_float(0x7f800000);
        if (!(a > 0.f && c > 0.f && a < 1e20f && c < 1e20f && b * b <= 0.998f * (a * c) && det > 0.f) ||
            padded != padded)
            return make_float2(infinite, infinite);
        if (padded < 0.f) return make_float2(-1.f, -1.f);
        return make_float2(padded * 1.002f, sqrtf(2.f * padded * a / det) * 1.001f + 0.01f);
    }

    static __device__ void stage(const Params& p, int g, Staged& s) {
        const float2 xy = p.means2d[g];
        const float opacity = p.opacities[g];
        const float3 conic = p.conics[g];
        float2 bound = cull_bound(conic.x, conic.y, conic.z, opacity);
        if (!(fabsf(xy.x) < 1e7f && fabsf(xy.y) < 1e7f)) bound = make_float2(1e30f, 1e30f);  // never culled
        s.xy_opacity_limit = make_float4(xy.x, xy.y, opacity, bound.x);
        s.conic_extent = make_float4(conic.x, conic.y, conic.z, bound.y);
    }

    static __device__ void stage_inert(Staged& s) {  // opacity 0, never reaches a pixel
        s.xy_opacity_limit = make_float4(0.f, 0.f, 0.f, -1.f);
        s.conic_extent = make_float4(1.f, 0.f, 1.f, -1.f);
    }

    // Same expression, operand for operand, as gsplat's forward kernel: bitwise-equal alphas.
    static __device__ bool evaluate(const Staged& s, const Pixel& pixel, float& alpha) {
        const float4 conic = s.conic_extent;
        const float4 xy_opac = s.xy_opacity_limit;
        const float opac = xy_opac.z;
        const float2 delta = {xy_opac.x - pixel.px, xy_opac.y - pixel.py};
        const float sigma =
            0.5f * (conic.x * delta.x * delta.x + conic.z * delta.y * delta.y) + conic.y * delta.x * delta.y;
        alpha = min(lpt::kMaxAlpha, opac * __expf(-sigma));
        return lpt::geu_and(alpha, lpt::kAlphaThreshold, !(sigma < 0.f));  // !(sigma < 0 || alpha < 1/255)
    }

    // The scaled form (lpt_core.cuh, kScaledEvaluation): a and c halved, so that sigma needs no multiply by 0.5.
    // gsplat's kernel computes, with every operation rounded to nearest and denormal results flushed to zero,
    //   r = fma(dx, a dx, (c dy) dy),  h = 0.5 r,  sigma = fma(dy, b dx, h);
    // evaluate_scaled computes r' = fma(dx, (a / 2) dx, ((c / 2) dy) dy) and sigma = fma(dy, b dx, r'), and r' = h
    // bit for bit wherever every product stays a normal float: halving is exact there and commutes with rounding,
    // so each product of r' is half of gsplat's, and r' = round(X / 2) = round(X) / 2 = h for the exact sum X. That
    // holds for a Gaussian with 2^-70 <= a, c <= 2^70 and a mean within 2^23 px (pixel centres are at least 0.5 and
    // below 2^23): a nonzero offset d = mean - centre then has 2^-25 <= |d| <= 2^24 (a difference of floats within a
    // factor 2 of each other is exact, a multiple of the smaller one's ulp, at least 2^-25), so every product lies
    // in [2^-120, 2^118] or is zero, and X, a sum of nonnegative terms, is zero or at least 2^-120. (b dx and the
    // last fma are gsplat's operations on gsplat's values.) Any other Gaussian keeps its batch unscaled.
    static __device__ bool scalable(const Staged& s) {
        const float a = s.conic_extent.x, c = s.conic_extent.z;
        return a >= 0x1p-70f && a <= 0x1p70f && c >= 0x1p-70f && c <= 0x1p70f &&
               fabsf(s.xy_opacity_limit.x) < 0x1p23f && fabsf(s.xy_opacity_limit.y) < 0x1p23f;
    }
    static __device__ void scale(Staged& s) {
        s.conic_extent.x *= 0.5f;
        s.conic_extent.z *= 0.5f;
    }
    static __device__ void unscale(Staged& s) {  // scale undone, exactly (a / 2 and c / 2 are normal floats)
        s.conic_extent.x *= 2.f;
        s.conic_extent.z *= 2.f;
    }
    static __device__ bool evaluate_scaled(const Staged& s, const Pixel& pixel, float& alpha) {
        const float4 conic = s.conic_extent;  // a / 2, b, c / 2, band
        const float4 xy_opac = s.xy_opacity_limit;
        const float opac = xy_opac.z;
        const float2 delta = {xy_opac.x - pixel.px, xy_opac.y - pixel.py};
        const float r = fmaf(delta.x, conic.x * delta.x, (conic.z * delta.y) * delta.y);
        const float sigma = fmaf(delta.y, conic.y * delta.x, r);
        alpha = min(lpt::kMaxAlpha, opac * __expf(-sigma));
        return lpt::geu_and(alpha, lpt::kAlphaThreshold, !(sigma < 0.f));  // !(sigma < 0 || alpha < 1/255)
    }

    // Whether q can be <= the bound at a pixel centre of the box. The box's centres lie on its rows (y0,
    // y0 + 1, ..., y1), at columns x0, x0 + 1, ..., x1. On a row, q is a parabola in the column with its
    // vertex at x + (b / a) dy; of a row's centres, the nearest to the vertex has the least q, and it is one of
    // the two centres around the computed vertex (clamped to the row) whenever the vertex is computed within
    // half a pixel (its float error is far below that). q is evaluated at those two centres with gsplat's own
    // float offsets (x - px, y - py) and expression, so it is gsplat's sigma up to contraction, within the
    // 2e-3 margin of the bound. A row outside the band of reachable rows is skipped; a Gaussian that no row
    // can reach is culled.
    static __device__ bool may_contribute(const Staged& s, const lpt::PixelBox& box) {
        const float x = s.xy_opacity_limit.x, y = s.xy_opacity_limit.y, limit = s.xy_opacity_limit.w;
        const float a = s.conic_extent.x, b = s.conic_extent.y, c = s.conic_extent.z, band = s.conic_extent.w;
        if (!(limit < 1e30f)) return true;  // not bounded
        if (fabsf(y - fminf(fmaxf(y, box.y0), box.y1)) > band) return false;  // also limit < 0: band < 0
        const float slope = __fdividef(b, a);
        for (float py = box.y0; py <= box.y1; py += 1.f) {
            const float dy = y - py;
            if (fabsf(dy) > band) continue;
            const float vertex = fminf(fmaxf(x + slope * dy, box.x0), box.x1);
            const float px0 = fmaxf(floorf(vertex - 0.5f) + 0.5f, box.x0), px1 = fminf(px0 + 1.f, box.x1);
            const float dx0 = x - px0, dx1 = x - px1;
            const float q0 = 0.5f * (a * dx0 * dx0 + c * dy * dy) + b * dx0 * dy;
            const float q1 = 0.5f * (a * dx1 * dx1 + c * dy * dy) + b * dx1 * dy;
            if (!(q0 > limit) || !(q1 > limit)) return true;
        }
        return false;
    }
    static constexpr bool kHasCullBound = true;
    // The same bound on a scaled Staged (a / 2, b, c / 2: what nearly every batch is walked with), over the
    // rectangle of offsets the box's centres span rather than at each row: constant work for any box, where the
    // row test above visits every row of it. gsplat's float offset at a centre, x - px (and y - py), lies between
    // those at the box's extreme columns, dx_lo = x - x1 and dx_hi = x - x0 (rounding is monotonic), so every
    // offset gsplat evaluates lies in R = [dx_lo, dx_hi] x [dy_lo, dy_hi], and a Gaussian that gsplat blends at
    // one of the box's centres has the exact q <= L' there (cull_bound): then the least q over R is <= L' too.
    // That least q is taken at one of two points: let ex, ey be the offsets nearest 0 in R's column and row
    // ranges (0 where the range holds 0). If the mean's offset 0 lies in R, both points below are (0, 0), q = 0.
    // Otherwise the least q over R is on its border, and on the line dx = ex or dy = ey: from any other point of
    // R, a small step towards the origin stays in R (each coordinate is inside its range, or at the end away
    // from 0) and lowers q (q(t d) = t^2 q(d)). On the line dy = ey, q is a parabola in dx with its vertex at
    // -(b / a) ey, and its least value over R's columns is at that vertex clamped to them; the same on dx = ex
    // with the vertex -(b / c) ex. The vertex is computed within a relative 4e-7 (__fdividef, a product), which
    // raises q at the clamped point above the line's least value q_min = e^2 det / (2a) by at most
    // (a / 2) (4e-7 b e / a)^2 <= 1.6e-13 (b^2 / det) q_min < 1e-10 q_min (|rho| <= 0.999 keeps b^2 / det below
    // 500; the same with c for the other line). q = d (a/2 d + b e) + (c/2 e) e in fmas is within 5e-4 q of the
    // exact value at its float point, as in the row test (scalable() keeps every product finite: |d| <= 2^24,
    // a, c, |b| <= 2^70), inside the 2e-3 margin of the bound. A NaN q keeps the Gaussian; an unbounded Gaussian
    // has limit +inf (kept); L' < 0 (opacity below 1/255) has limit -1 (culled, as q >= 0). The band is not used
    // here; a scaled batch holds no far-off mean (scalable: |mean| < 2^23, where stage() bounds those beyond
    // 1e7 px by 1e30). Against the row test, R also holds the points between centres: the test keeps a little
    // more, Gaussians sharper than a pixel whose reach lies between two rows or columns of centres (CPU, the
    // bonsai scene at 1080p: 49.66% of the (warp, Gaussian) pairs kept for rows of 16 x 4 pixels either way,
    // 46.72% against 46.69% for blocks of 8 x 8).
    static __device__ bool may_contribute_scaled(const Staged& s, const lpt::PixelBox& box) {
        const float x = s.xy_opacity_limit.x, y = s.xy_opacity_limit.y, limit = s.xy_opacity_limit.w;
        const float half_a = s.conic_extent.x, b = s.conic_extent.y, half_c = s.conic_extent.z;
        const float dx_lo = x - box.x1, dx_hi = x - box.x0, dy_lo = y - box.y1, dy_hi = y - box.y0;
        const float ex = fminf(fmaxf(0.f, dx_lo), dx_hi), ey = fminf(fmaxf(0.f, dy_lo), dy_hi);
        const float dx = fminf(fmaxf(-__fdividef(b, half_a + half_a) * ey, dx_lo), dx_hi);  // on the line dy = ey
        const float dy = fminf(fmaxf(-__fdividef(b, half_c + half_c) * ex, dy_lo), dy_hi);  // on the line dx = ex
        const float q_row = fmaf(dx, fmaf(half_a, dx, b * ey), (half_c * ey) * ey);
        const float q_column = fmaf(dy, fmaf(half_c, dy, b * ex), (half_a * ex) * ex);
        return !(q_row > limit) | !(q_column > limit);
    }
    static constexpr bool kScaledEvaluation = true;
    // Colour rows of 8-64 channels in 16-byte loads (lpt_core.cuh, PlainColorAccumulator): the front end passes
    // a 16-byte aligned colour array.
    static constexpr bool kAlignedColorRows = true;
    // The walks take marked Gaussians in pairs (lpt_core.cuh, blend_range): the one-pixel kernels evaluate two
    // before blending them, the two-pixel kernels of up to 4 channels step two per iteration.
    static constexpr bool kPairedEvaluation = true;
    // Feature maps (lpt_core.cuh, WideResidentThreads): up to 32 colour sums per thread, kernels built for 768
    // resident threads (at most 85 registers); 33-64 channels for 512 (128); wider maps are blended in slices of 64
    // (Gaussian3DGSChannelSlice, below): the front end launches no unbounded kernel. (The two-pixel
    // kernel exists up to 16 channels, constants.TWO_PIXEL_MAX_CHANNELS, so it always has the first bound.) One
    // NVIDIA H200, GPU time x gsplat's blend on the bonsai orbit: unbounded, 32 sums took 100 registers in the
    // one-pixel kernel (two CTAs of 256 threads per SM), 0.88-0.89x, and 1.02x at 768 threads; the two-pixel
    // kernel at 8 and 16 channels 1.28x and 1.12x instead of 1.18x and 1.06x. 64 channels: 184 registers
    // unbounded (the two-pixel kernel ran instead, 1.11x), 128 at 512 threads with no spill, 1.33x; at 85 they
    // spill (0.48x).
    __host__ __device__ static constexpr unsigned wide_resident_threads(unsigned channels, unsigned pixels) {
        return pixels * channels <= 32 ? 768 : channels <= 64 ? 512 : 0;
    }

    template <unsigned CDIM>
    using Accumulator = lpt::PlainColorAccumulator<Gaussian3DGS, CDIM>;
};

// Maps of 5, 9, 17 or 33 channels (gsplat's own odd counts: a feature map plus one): the front end hands the kernels
// a copy of the colours with rows of CDIM rounded up to a multiple of 4 floats (zeros after CDIM), read in 16-byte
// loads; the same sums, backgrounds and render_colors in rows of CDIM.
struct Gaussian3DGSPaddedRows : Gaussian3DGS {
    static constexpr bool kPaddedColorRows = true;

    template <unsigned CDIM>
    using Accumulator = lpt::PlainColorAccumulator<Gaussian3DGSPaddedRows, CDIM>;
};

// A slice of the channels of a wide feature map: the same evaluation, colours read and written CDIM at a time
// from rows of channel_stride floats (the pointers in Params are the slice's first channel). The runtime blends a
// map of more than constants.CHANNEL_SLICE channels one slice after the other with one plan (alphas and last_ids
// are written by every slice, the same values): the per-pixel sums stay in registers, where the unsliced
// kernels of 128-512 channels keep them in local memory. Each channel's sum is gsplat's sequence of products
// and additions on gsplat's T, so the slices add up to gsplat's image bit for bit.
struct Gaussian3DGSChannelSlice : Gaussian3DGS {
    // Host twin: gsplat_lpt.variants.gaussian3d.Params3DGSChannelSlice
    struct Params : Gaussian3DGS::Params {
        unsigned channel_stride;  // channels of the whole map: floats per row of colors, backgrounds, render_colors
    };
    static constexpr bool kChannelSlice = true;
    static constexpr bool kAlignedColorRows = false;  // rows of any width: the maps of 65, 129, 257 and 513 channels

    template <unsigned CDIM>
    using Accumulator = lpt::PlainColorAccumulator<Gaussian3DGSChannelSlice, CDIM>;
};

// The slices of a map whose channel count is a multiple of 4 (128, 256, 512, and those padded to them): every row
// of every slice starts on a 16-byte boundary (the array does, and a slice starts a multiple of 64 channels in), read
// in 16-byte loads.
struct Gaussian3DGSChannelSliceRow16 : Gaussian3DGSChannelSlice {
    static constexpr bool kAlignedColorRows = true;

    template <unsigned CDIM>
    using Accumulator = lpt::PlainColorAccumulator<Gaussian3DGSChannelSliceRow16, CDIM>;
};

static_assert(sizeof(Gaussian3DGS::Staged) == 32, "Gaussian3DGS::Staged: 32 bytes, two 16-byte loads");
// The runtime appends LPT_EXPORT_KERNELS(3dgs, Gaussian3DGS, <channels>, <CTA size>) for what it launches.

