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
        float4 xy_opacity_extent;  // mean x, y, opacity, half width of the box where alpha can reach 1/255
        float4 conic_extent;       // a, b, c of sigma = a dx^2 / 2 + b dx dy + c dy^2 / 2, half height of that box
    };
    struct Pixel {
        float px, py;
    };

    static __device__ Pixel pixel(const Params&, int, float px, float py, bool& valid) {
        valid = true;
        return Pixel{px, py};
    }

    // The cull bound, computed once per staged Gaussian: the axis-aligned box around the mean outside which
    // gsplat's alpha stays below 1/255. gsplat blends a Gaussian at a pixel only if opac * __expf(-sigma) >=
    // 1/255, i.e. sigma <= L = ln(255 opac) up to rounding: __expf, logf and 1/255 in float are each within
    // 1e-6 of exact, so sigma <= L' = (L + 1e-5 (1 + |L|)) (1 + 3e-3) holds for every pixel it blends, the
    // factor covering gsplat's float sigma: its rounding is a few ulps of the term magnitude M = (a dx^2 +
    // c dy^2) / 2 + |b dx dy|, and M <= 2 sigma / (1 - |rho|) <= 2000 sigma where rho = b / sqrt(ac) is kept
    // within 0.999. The ellipse sigma <= L' lies in the box |dx| <= sqrt(2 L' c / det), |dy| <= sqrt(2 L' a /
    // det), det = ac - b^2 (the diagonal of the inverse conic); computed in float, the box is widened by
    // 1e-3 relative and 0.01 px (a pixel centre's float offset from the mean is within 1e-3 px of exact
    // below 8192 px). Conics that are not positive definite, nearly degenerate, or not finite get an
    // infinite box (never culled), and so does a NaN opacity (gsplat blends it: min(0.999f, NaN) is 0.999);
    // L' < 0 (opacity below 1/255) gets an empty one (always culled).
    static __device__ float2 cull_extent(float a, float b, float c, float opacity) {
        const float limit = logf(opacity * 255.0f);
        const float padded = (limit + 1e-5f * (1.f + fminf(fabsf(limit), 1e30f))) * 1.003f;  // ln 0 = -inf stays
        const float det = a * c - b * b;
        const float infinite = __int_as_float(0x7f800000);
        // NaN opacity: gsplat's min(0.999f, NaN) is 0.999, so such a Gaussian is blended: never culled
        if (!(a > 0.f && c > 0.f && b * b <= 0.998f * (a * c) && det > 0.f) || padded != padded)
            return make_float2(infinite, infinite);
        if (padded < 0.f) return make_float2(-1.f, -1.f);
        const float x = sqrtf(2.f * padded * c / det), y = sqrtf(2.f * padded * a / det);
        return make_float2(x * 1.001f + 0.01f, y * 1.001f + 0.01f);
    }

    static __device__ void stage(const Params& p, int g, Staged& s) {
        const float2 xy = p.means2d[g];
        const float opacity = p.opacities[g];
        const float3 conic = p.conics[g];
        const float2 extent = cull_extent(conic.x, conic.y, conic.z, opacity);
        s.xy_opacity_extent = make_float4(xy.x, xy.y, opacity, extent.x);
        s.conic_extent = make_float4(conic.x, conic.y, conic.z, extent.y);
    }

    static __device__ void stage_inert(Staged& s) {  // opacity 0 and an empty box
        s.xy_opacity_extent = make_float4(0.f, 0.f, 0.f, -1.f);
        s.conic_extent = make_float4(1.f, 0.f, 1.f, -1.f);
    }

    // Same expression, operand for operand, as gsplat's forward kernel: bitwise-equal alphas.
    static __device__ bool evaluate(const Staged& s, const Pixel& pixel, float& alpha) {
        const float4 conic = s.conic_extent;
        const float4 xy_opac = s.xy_opacity_extent;
        const float opac = xy_opac.z;
        const float2 delta = {xy_opac.x - pixel.px, xy_opac.y - pixel.py};
        const float sigma =
            0.5f * (conic.x * delta.x * delta.x + conic.z * delta.y * delta.y) + conic.y * delta.x * delta.y;
        alpha = min(lpt::kMaxAlpha, opac * __expf(-sigma));
        return !(sigma < 0.f || alpha < lpt::kAlphaThreshold);
    }

    // Whether the box around the mean overlaps the box of pixel centres (NaN extents: kept).
    static __device__ bool may_contribute(const Staged& s, const lpt::PixelBox& box) {
        const float x = s.xy_opacity_extent.x, y = s.xy_opacity_extent.y;
        const float dx = x - fminf(fmaxf(x, box.x0), box.x1);
        const float dy = y - fminf(fmaxf(y, box.y0), box.y1);
        return !(fabsf(dx) > s.xy_opacity_extent.w || fabsf(dy) > s.conic_extent.w);
    }
    static constexpr bool kHasCullBound = true;

    template <unsigned CDIM>
    struct Accumulator : lpt::ColorAccumulator<CDIM> {
        __device__ void add(const Params& p, const Staged&, int g, float vis, float, unsigned) {
            this->add_color(p.colors + (long long)g * CDIM, vis);
        }
        __device__ void write(const Params& p, const Outputs& out, const lpt::PixelSlot& slot, float T,
                              int last_index) const {
            this->write_color(out, p.backgrounds, slot, T, last_index);
        }
    };
};

static_assert(sizeof(Gaussian3DGS::Staged) == 32, "Gaussian3DGS::Staged: 32 bytes, two 16-byte loads");
// The runtime appends LPT_EXPORT_KERNELS(3dgs, Gaussian3DGS, <channels>, <CTA size>) for what it launches.

