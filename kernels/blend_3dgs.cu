// 3DGS: the per-Gaussian evaluation of gsplat 1.5.3's rasterize_to_pixels_3dgs_fwd, as an Evaluator for
// the shared scheduling core. Arrays: a0 = means2d [I*N or nnz, 2], a1 = conics [.., 3], a2 = opacities [..].
#include "scheduling.cuh"

struct Gaussian3DGS {
    struct Arrays {
        const float2* __restrict__ means2d;
        const float3* __restrict__ conics;
        const float* __restrict__ opacities;

        __device__ Arrays(const float* a0, const float* a1, const float* a2, const float*)
            : means2d(reinterpret_cast<const float2*>(a0)),
              conics(reinterpret_cast<const float3*>(a1)),
              opacities(a2) {}
    };

    struct Staged {
        float3 xy_opacity;
        float3 conic;
    };

    static __device__ void stage(const Arrays& arrays, int g, Staged& staged) {
        const float2 xy = arrays.means2d[g];
        staged.xy_opacity = make_float3(xy.x, xy.y, arrays.opacities[g]);
        staged.conic = arrays.conics[g];
    }

    // Same expression, operand for operand, as gsplat's forward kernel: bitwise-equal alphas.
    static __device__ bool evaluate(const Staged& staged, float px, float py, float& alpha) {
        const float3 conic = staged.conic;
        const float3 xy_opac = staged.xy_opacity;
        const float opac = xy_opac.z;
        const float2 delta = {xy_opac.x - px, xy_opac.y - py};
        const float sigma =
            0.5f * (conic.x * delta.x * delta.x + conic.z * delta.y * delta.y) + conic.y * delta.x * delta.y;
        alpha = min(0.999f, opac * __expf(-sigma));
        return !(sigma < 0.f || alpha < lpt::kAlphaThreshold);
    }
};

LPT_DEFINE_VARIANT_KERNELS(3dgs, Gaussian3DGS)
