// 3DGUT: the per-pixel evaluation of gsplat 1.5.3's rasterize_to_pixels_from_world_3dgs_fwd (gsplat's
// rasterize_to_pixels_eval3d, used by rasterization(..., with_ut=True, with_eval3d=True)) as a variant of
// the shared scheduling core (lpt_core.cuh).
//
// Each pixel casts a ray through gsplat's own camera models (Cameras.cuh: perfect pinhole, OpenCV pinhole
// with radial / tangential / thin-prism distortion, OpenCV fisheye, FTheta; rolling shutter through the
// start and end poses), and each Gaussian is evaluated in 3D along that ray: with M = S^-1 R^T (gsplat's
// iscl_rot), the response is exp(-|cross(normalize(M d), M (o - mean))|^2 / 2), the Gaussian's density
// at the point of the ray closest to its mean in its own whitened frame.
//
// This file is compiled by nvcc (CuPy's nvcc backend) with gsplat's include folders and its compiler
// flags (gsplat_lpt/variants/unscented.py: compile_options): the camera models, quat_to_rotmat and
// safe_normalize are gsplat's own device functions, called here, so that lpt mode computes the same
// floats as gsplat's kernel. NVRTC cannot compile gsplat's headers (they need the C++ standard library).
//
// No cull bound (kHasCullBound = false). The 2D means and conics of gsplat's unscented projection only
// decide which tiles list a Gaussian; they approximate its image footprint from a few sigma points and do
// not bound the 3D response along the rays of a distorted or rolling-shutter camera, so a box built from
// them could drop a Gaussian that some pixel would blend. A rigorous bound would need the bundle of the
// warp's rays (different origins under rolling shutter, curved pixel-to-ray maps), and testing a
// Gaussian against it conservatively in float costs about as much as evaluating it at the 32 pixels.
#include <type_traits>

#include "lpt_core.cuh"

// gsplat's device headers (gsplat/cuda/include), in the order its own kernel includes them. GLM's
// defaulted constructors carry __host__ __device__, which nvcc notes as ignored (20012-D); Cameras.cuh
// silences that note around its own GLM includes, Common.h includes GLM first, so silence it here too.
#pragma nv_diag_suppress esa_on_defaulted_function_ignored
#include "Common.h"
#include "Cameras.cuh"
#include "Utils.cuh"
#pragma nv_diag_default esa_on_defaulted_function_ignored

// gsplat's compute_opencv_fisheye_max_angle(a, b, c) (Cameras.cuh: the smallest positive root of
// 1 + a x + b x^2 + c x^3, FLT_MAX if none) line for line, except for the real-root branch's
// soln = (cube_root - t2 / cube_root - boc) / 3: gsplat's kernel rounds boc = b / c (-use_fast_math:
// b * rcp(c)) on its own and subtracts it (FADD), whereas nvcc, inlining the same code here, fused that
// subtraction with the division's multiply into an FFMA (-b * rcp(c) + ...): max_angle an ulp off for
// fisheye cameras with k4 == 0 and k3 != 0. __fsub_rn is never contracted. Everything else is left as
// gsplat writes it, divisions included (a reciprocal and a multiply under -use_fast_math, IEEE without),
// and compiles to gsplat's instructions (tests/device/sass_3dgut.py).
static __device__ float opencv_fisheye_max_angle(float a, float b, float c) {
    const float INF = std::numeric_limits<float>::max();
    if (c == 0.0f) {
        if (b == 0.0f) {
            if (a >= 0.0f) {
                return INF;
            } else {
                return -1.0f / a;
            }
        }
        float delta = a * a - 4.0f * b;
        if (delta >= 0.0f) {
            delta = std::sqrt(delta) - a;
            if (delta > 0.0f) {
                return 2.0f / delta;
            }
        }
    } else {
        float boc = b / c;
        float boc2 = boc * boc;
        float t1 = (9.0f * a * boc - 2.0f * b * boc2 - 27.0f) / c;
        float t2 = 3.0f * a / c - boc2;
        float delta = t1 * t1 + 4.0f * t2 * t2 * t2;
        if (delta >= 0.0f) {
            float d2 = std::sqrt(delta);
            float cube_root = std::cbrt((d2 + t1) / 2.0f);
            if (cube_root != 0.0f) {
                float soln = __fsub_rn(cube_root - (t2 / cube_root), boc) / 3.0f;
                if (soln > 0.0f) {
                    return soln;
                }
            }
        } else {
            float theta = std::atan2(std::sqrt(-delta), t1) / 3.0f;
            constexpr float two_third_pi = 2.0f * PI / 3.0f;
            float t3 = 2.0f * std::sqrt(-t2);
            float soln = INF;
            for (int i : {-1, 0, 1}) {
                float angle = theta + i * two_third_pi;
                float s = (t3 * std::cos(angle) - boc) / 3.0f;
                if (s > 0.0f) {
                    soln = std::min(soln, s);
                }
            }
            return soln;
        }
    }
    return INF;
}

// The tail of gsplat's OpenCVFisheyeCameraModel constructor: max_angle (k4 == 0: the closed form above;
// otherwise Newton's iteration, as the constructor calls it) clamped to the image radius, and the
// approx_backward_poly derived from it, written into an already constructed model. All of it is
// recomputed, so that the constructor's own values are dead and nvcc drops them (overwriting them only
// where k4 == 0 kept both copies and a merge of the two in the kernel), and into model.max_angle itself
// as the constructor does (through a local variable nvcc turned Newton's convergence test into a select).
template <size_t N_NEWTON_ITERATIONS>
static __device__ void opencv_fisheye_max_angle(OpenCVFisheyeCameraModel<N_NEWTON_ITERATIONS>& model) {
    const auto& parameters = model.parameters;
    const auto& [k1, k2, k3, k4] = parameters.radial_coeffs;
    const auto max_diag_x =
        max(parameters.resolution[0] - parameters.principal_point[0], parameters.principal_point[0]);
    const auto max_diag_y =
        max(parameters.resolution[1] - parameters.principal_point[1], parameters.principal_point[1]);
    const auto max_radius_pixels = std::sqrt(max_diag_x * max_diag_x + max_diag_y * max_diag_y);
    auto& max_angle = model.max_angle;
    if (k4 == 0) {
        max_angle = std::sqrt(opencv_fisheye_max_angle(3.f * k1, 5.f * k2, 7.f * k3));
    } else {
        std::array<float, 4> ddforward_poly_odd = {6 * k1, 20 * k2, 42 * k3, 72 * k4};
        std::array<float, 1> approx = {1.57f};
        bool converged = false;
        max_angle = eval_poly_inverse_horner_newton<N_NEWTON_ITERATIONS>(
            PolynomialProxy<PolynomialType::EVEN, 5>{model.dforward_poly_even},
            PolynomialProxy<PolynomialType::ODD, 4>{ddforward_poly_odd},
            PolynomialProxy<PolynomialType::EVEN, 1>{approx}, 0.f, converged);
        if (!converged || max_angle <= 0.f) {
            max_angle = std::numeric_limits<float>::max();
        }
    }
    max_angle = min(max_angle, max(max_radius_pixels / parameters.focal_length[0],
                                   max_radius_pixels / parameters.focal_length[1]));
    auto const max_normalized_dist = std::max(parameters.resolution[0] / 2.f / parameters.focal_length[0],
                                              parameters.resolution[1] / 2.f / parameters.focal_length[1]);
    model.approx_backward_poly = {0.f, max_angle / max_normalized_dist};
}

struct Gaussian3DGUT {
    // Host twin: gsplat_lpt.variants.unscented.Params3DGUT. The camera arrays are per image (I = B * C),
    // row-major as gsplat takes them; the Gaussian arrays are gsplat's unpacked ones.
    struct Params {
        const gsplat::vec3* means;          // [B, N, 3]
        const gsplat::vec4* quats;          // [B, N, 4] (w, x, y, z)
        const gsplat::vec3* scales;         // [B, N, 3]
        const float* colors;                // [B, C, N, CDIM]
        const float* opacities;             // [B, C, N]
        const float* backgrounds;           // [B, C, CDIM] or null
        const float* viewmats0;             // [B, C, 4, 4] world-to-camera at the start of the exposure
        const float* viewmats1;             // [B, C, 4, 4] at its end (rolling shutter), or null
        const float* Ks;                    // [B, C, 3, 3]
        const float* radial_coeffs;         // [B, C, 6] (pinhole) or [B, C, 4] (fisheye), or null
        const float* tangential_coeffs;     // [B, C, 2] or null
        const float* thin_prism_coeffs;     // [B, C, 4] or null
        FThetaCameraDistortionParameters ftheta_coeffs;  // gsplat's struct, shared by all cameras
        gsplat::CameraModelType camera_model;            // PINHOLE, FISHEYE or FTHETA (gsplat has no ORTHO here)
        ShutterType shutter_type;
        unsigned B, C, N;                   // gsplat's batch, camera and Gaussian counts
        unsigned image_width, image_height; // the camera models' resolution
    };
    // Host twin: gsplat_lpt.variants.unscented.Outputs3DGUT
    struct Outputs {
        float* render_colors;  // [I, H, W, CDIM]
        float* render_alphas;  // [I, H, W]
        int* last_ids;         // [I, H, W]
    };
    // What gsplat's kernel keeps in shared memory per Gaussian: mean and opacity, and iscl_rot = S^-1 R^T.
    struct alignas(16) Staged {
        gsplat::vec4 xyz_opacity;
        gsplat::mat3 iscl_rot;
    };
    // The pixel's world-space ray (gsplat's WorldRay without its valid flag, which marks the pixel done).
    struct Pixel {
        gsplat::vec3 ray_o;
        gsplat::vec3 ray_d;
    };

    // The pose path of gsplat's BaseCameraModel::image_point_to_world_ray_shutter_pose (Cameras.cuh) for
    // a camera ray d at relative frame time `time`: interpolate_shutter_pose (t_rs, glm::slerp of the start
    // and end rotations, glm::normalize) and ShutterPose::camera_ray_to_world_ray (glm::inverse,
    // glm::mat3_cast, {-R_inv * t_rs, R_inv * d}), written out as the float instructions gsplat's own
    // kernel computes them with. nvcc contracts glm's a * b + c * d into an FMA by heuristics that depend
    // on the code around the expression (which product it fuses, whether it fuses a product used twice),
    // so the same glm code inlined here fused other products than in gsplat's kernel (the slerp cosine,
    // the rows of R_inv * d): world rays an ulp or two off, colours 1e-6 off. __fmul_rn, __fadd_rn and
    // __fmaf_rn are never contracted or reordered; each one below is the FMUL, FADD or FFMA of gsplat's
    // kernel (nvcc 13.0, sm_90, -O3 -use_fast_math; tests/device/sass_3dgut.py compares the SASS).
    // Division, sqrt, acos and sin stay as glm writes them (fast-math MUFU sequences, not contracted).
    // kFtheta: gsplat's kernel inlines this path once per camera model, and nvcc contracted the first row of
    // both matrix products differently in the FTheta copy (m[0][0] v.x rounded alone, m[1][0] v.y fused)
    // than in the other three (m[1][0] v.y alone, m[0][0] v.x fused); rows 1 and 2 alike in all four.
    template <bool kFtheta>
    static __device__ WorldRay world_ray(float time, const RollingShutterParameters& rs, const glm::fvec3& d) {
        const float s = 1.f - time;
        // t_rs = (1 - t) * t_start + t * t_end
        const glm::fvec3 t(__fmaf_rn(time, rs.t_end.x, __fmul_rn(s, rs.t_start.x)),
                           __fmaf_rn(time, rs.t_end.y, __fmul_rn(s, rs.t_start.y)),
                           __fmaf_rn(time, rs.t_end.z, __fmul_rn(s, rs.t_start.z)));
        // glm::slerp(q_start, q_end, t): cosTheta = dot(x, y) = (w w' + x x') + (y y' + z z')
        const glm::fquat x = rs.q_start;
        glm::fquat z = rs.q_end;
        float cosTheta = __fadd_rn(__fmaf_rn(x.x, z.x, __fmul_rn(x.w, z.w)), __fmaf_rn(x.y, z.y, __fmul_rn(x.z, z.z)));
        if (cosTheta < 0.f) {
            z = -z;
            cosTheta = -cosTheta;
        }
        glm::fquat q;
        if (cosTheta > 1.f - glm::epsilon<float>()) {  // mix(x, z, t) = x * (1 - t) + z * t
            q = glm::fquat::wxyz(__fmaf_rn(x.w, s, __fmul_rn(z.w, time)), __fmaf_rn(x.x, s, __fmul_rn(z.x, time)),
                                 __fmaf_rn(x.y, s, __fmul_rn(z.y, time)), __fmaf_rn(x.z, s, __fmul_rn(z.z, time)));
        } else {  // (sin((1 - t) angle) x + sin(t angle) z) / sin(angle)
            const float angle = glm::acos(cosTheta);
            const float a = glm::sin(__fmul_rn(s, angle)), b = glm::sin(__fmul_rn(angle, time));
            q = glm::fquat::wxyz(__fmaf_rn(a, x.w, __fmul_rn(b, z.w)), __fmaf_rn(a, x.x, __fmul_rn(b, z.x)),
                                 __fmaf_rn(a, x.y, __fmul_rn(b, z.y)), __fmaf_rn(a, x.z, __fmul_rn(b, z.z))) /
                glm::sin(angle);
        }
        // glm::normalize(q): q / sqrt(dot(q, q)), (1, 0, 0, 0) where that length is not positive
        const float length = glm::sqrt(__fadd_rn(__fmaf_rn(q.w, q.w, __fmul_rn(q.x, q.x)),
                                                 __fmaf_rn(q.y, q.y, __fmul_rn(q.z, q.z))));
        if (length <= 0.f) {
            q = glm::fquat::wxyz(1.f, 0.f, 0.f, 0.f);
        } else {
            const float inverse_length = 1.f / length;
            q = glm::fquat::wxyz(__fmul_rn(q.w, inverse_length), __fmul_rn(q.x, inverse_length),
                                 __fmul_rn(q.y, inverse_length), __fmul_rn(q.z, inverse_length));
        }
        // glm::inverse(q) = conjugate(q) / dot(q, q)
        const glm::fquat i = glm::conjugate(q) / __fadd_rn(__fmaf_rn(q.w, q.w, __fmul_rn(q.x, q.x)),
                                                          __fmaf_rn(q.y, q.y, __fmul_rn(q.z, q.z)));
        // glm::mat3_cast(i): R_inv, column-major m[c][r]
        const float qyy = __fmul_rn(i.y, i.y), qzz = __fmul_rn(i.z, i.z), qyz = __fmul_rn(i.y, i.z);
        const float qwy = __fmul_rn(i.w, i.y), qwz = __fmul_rn(i.w, i.z);
        const float s00 = __fadd_rn(qyy, qzz), s11 = __fmaf_rn(i.x, i.x, qzz), s22 = __fmaf_rn(i.x, i.x, qyy);
        const float s01 = __fmaf_rn(i.x, i.y, qwz), s10 = __fmaf_rn(i.x, i.y, -qwz);
        const float s02 = __fmaf_rn(i.x, i.z, -qwy), s20 = __fmaf_rn(i.x, i.z, qwy);
        const float s12 = __fmaf_rn(i.w, i.x, qyz), s21 = __fmaf_rn(-i.w, i.x, qyz);
        const float m00 = __fsub_rn(1.f, __fadd_rn(s00, s00)), m11 = __fsub_rn(1.f, __fadd_rn(s11, s11));
        const float m22 = __fsub_rn(1.f, __fadd_rn(s22, s22));
        const float m01 = __fadd_rn(s01, s01), m10 = __fadd_rn(s10, s10), m02 = __fadd_rn(s02, s02);
        const float m20 = __fadd_rn(s20, s20), m12 = __fadd_rn(s12, s12), m21 = __fadd_rn(s21, s21);
        // R_inv * d and (-R_inv) * t_rs, glm's m[0][r] v.x + m[1][r] v.y + m[2][r] v.z per row r
        const float dx = kFtheta ? __fmaf_rn(m10, d.y, __fmul_rn(m00, d.x)) : __fmaf_rn(m00, d.x, __fmul_rn(m10, d.y));
        const glm::fvec3 direction(__fmaf_rn(m20, d.z, dx),
                                   __fmaf_rn(m21, d.z, __fmaf_rn(m01, d.x, __fmul_rn(m11, d.y))),
                                   __fmaf_rn(m22, d.z, __fmaf_rn(m02, d.x, __fmul_rn(m12, d.y))));
        const float n00 = __fsub_rn(0.f, m00), n01 = __fsub_rn(0.f, m01), n02 = __fsub_rn(0.f, m02);
        const float n10 = __fsub_rn(0.f, m10), n11 = __fsub_rn(0.f, m11), n12 = __fsub_rn(0.f, m12);
        const float n20 = __fsub_rn(0.f, m20), n21 = __fsub_rn(0.f, m21), n22 = __fsub_rn(0.f, m22);
        const float ox = kFtheta ? __fmaf_rn(n10, t.y, __fmul_rn(n00, t.x)) : __fmaf_rn(n00, t.x, __fmul_rn(n10, t.y));
        const glm::fvec3 origin(__fmaf_rn(n20, t.z, ox),
                                __fmaf_rn(n21, t.z, __fmaf_rn(n01, t.x, __fmul_rn(n11, t.y))),
                                __fmaf_rn(n22, t.z, __fmaf_rn(n02, t.x, __fmul_rn(n12, t.y))));
        return {origin, direction, true};
    }

    // One camera model's world ray for the pixel centre (px, py): the parameters gsplat's kernel fills in,
    // then the model's image_point_to_world_ray_shutter_pose (gsplat's BaseCameraModel) with its pose path
    // written out above.
    template <class Model>
    static __device__ WorldRay cast(typename Model::Parameters cm, const Params& p, float px, float py,
                                    const RollingShutterParameters& rs) {
        cm.resolution = {p.image_width, p.image_height};
        cm.shutter_type = p.shutter_type;
        Model model(cm);
        if constexpr (std::is_same<Model, OpenCVFisheyeCameraModel<>>::value) {
            opencv_fisheye_max_angle(model);  // max_angle as gsplat's kernel computes it (see above)
        }
        const glm::fvec2 image_point(px, py);
        auto const camera_ray = model.image_point_to_camera_ray(image_point);
        if (!camera_ray.valid_flag) {
            return {glm::fvec3{}, glm::fvec3{}, false};
        }
        constexpr bool kFtheta = std::is_same<Model, FThetaCameraModel<>>::value;
        return world_ray<kFtheta>(model.shutter_relative_frame_time(image_point), rs, camera_ray.ray_dir);
    }

    static __device__ Pixel pixel(const Params& p, int image, float px, float py, bool& valid) {
        const long long iid = image;
        const RollingShutterParameters rs(p.viewmats0 + iid * 16,
                                          p.viewmats1 == nullptr ? nullptr : p.viewmats1 + iid * 16);
        const float* K = p.Ks + iid * 9;
        const std::array<float, 2> focal_length = {K[0], K[4]};
        const std::array<float, 2> principal_point = {K[2], K[5]};
        WorldRay ray{};
        ray.valid_flag = false;  // a camera model gsplat does not evaluate in 3D (checked on the host)
        if (p.camera_model == gsplat::CameraModelType::PINHOLE) {
            if (p.radial_coeffs == nullptr && p.tangential_coeffs == nullptr && p.thin_prism_coeffs == nullptr) {
                PerfectPinholeCameraModel::Parameters cm = {};
                cm.principal_point = principal_point;
                cm.focal_length = focal_length;
                ray = cast<PerfectPinholeCameraModel>(cm, p, px, py, rs);
            } else {
                OpenCVPinholeCameraModel<>::Parameters cm = {};
                cm.principal_point = principal_point;
                cm.focal_length = focal_length;
                if (p.radial_coeffs != nullptr) cm.radial_coeffs = make_array<float, 6>(p.radial_coeffs + iid * 6);
                if (p.tangential_coeffs != nullptr)
                    cm.tangential_coeffs = make_array<float, 2>(p.tangential_coeffs + iid * 2);
                if (p.thin_prism_coeffs != nullptr)
                    cm.thin_prism_coeffs = make_array<float, 4>(p.thin_prism_coeffs + iid * 4);
                ray = cast<OpenCVPinholeCameraModel<>>(cm, p, px, py, rs);
            }
        } else if (p.camera_model == gsplat::CameraModelType::FISHEYE) {
            OpenCVFisheyeCameraModel<>::Parameters cm = {};
            cm.principal_point = principal_point;
            cm.focal_length = focal_length;
            if (p.radial_coeffs != nullptr) cm.radial_coeffs = make_array<float, 4>(p.radial_coeffs + iid * 4);
            ray = cast<OpenCVFisheyeCameraModel<>>(cm, p, px, py, rs);
        } else if (p.camera_model == gsplat::CameraModelType::FTHETA) {
            FThetaCameraModel<>::Parameters cm = {};
            cm.principal_point = principal_point;
            cm.dist = p.ftheta_coeffs;
            ray = cast<FThetaCameraModel<>>(cm, p, px, py, rs);
        }
        valid = ray.valid_flag;
        return Pixel{ray.ray_org, ray.ray_dir};
    }

    // gsplat's staging: flatten index isect_id in [B * C * N]; mean, quat and scale of Gaussian
    // isect_id % N of batch isect_id / (C * N); opacity (and colour) of the row isect_id itself.
    static __device__ void stage(const Params& p, int g, Staged& s) {
        const unsigned isect_id = (unsigned)g;
        const unsigned bid = isect_id / (p.C * p.N);
        const unsigned gid = isect_id % p.N;
        const long long row = (long long)bid * p.N + gid;
        const gsplat::vec3 xyz = p.means[row];
        const float opac = p.opacities[g];
        s.xyz_opacity = {xyz.x, xyz.y, xyz.z, opac};
        const gsplat::vec3 scale = p.scales[row];
        const gsplat::mat3 R = gsplat::quat_to_rotmat(p.quats[row]);
        const gsplat::mat3 S_inv = gsplat::mat3(1.0f / scale[0], 0.f, 0.f,
                                                0.f, 1.0f / scale[1], 0.f,
                                                0.f, 0.f, 1.0f / scale[2]);
        s.iscl_rot = S_inv * glm::transpose(R);
    }

    static __device__ void stage_inert(Staged& s) {  // opacity 0: alpha 0 < 1/255 at every pixel
        s.xyz_opacity = {0.f, 0.f, 0.f, 0.f};
        s.iscl_rot = gsplat::mat3(1.f);
    }

    // gsplat's expression, operand for operand: bitwise-equal alphas where it compiles the same way.
    static __device__ bool evaluate(const Staged& s, const Pixel& pixel, float& alpha) {
        const gsplat::vec4 xyz_opac = s.xyz_opacity;
        const float opac = xyz_opac[3];
        const gsplat::vec3 xyz = {xyz_opac[0], xyz_opac[1], xyz_opac[2]};
        const gsplat::mat3 iscl_rot = s.iscl_rot;
        const gsplat::vec3 gro = iscl_rot * (pixel.ray_o - xyz);
        const gsplat::vec3 grd = gsplat::safe_normalize(iscl_rot * pixel.ray_d);
        const gsplat::vec3 gcrod = glm::cross(grd, gro);
        const float grayDist = glm::dot(gcrod, gcrod);
        const float power = -0.5f * grayDist;
        alpha = min(lpt::kMaxAlpha, opac * __expf(power));
        return !(alpha < lpt::kAlphaThreshold);
    }

    // No cull bound (see the top of this file): never called, since kHasCullBound is false.
    static __device__ bool may_contribute(const Staged&, const lpt::PixelBox&) { return true; }
    static constexpr bool kHasCullBound = false;
    // A second build of the one-pixel persistent kernel for latency-bound frames (lpt_core.cuh, lpt_persistent_blend),
    // whose walk evaluates two Gaussians before blending them (H200, lpt, x gsplat's blend: ladder veil 0.94x -> 1.13x,
    // fog 0.91x -> 1.09x; the paired walk on every frame had taken the fisheye rig with rolling shutter, imbalance
    // 0.5, from 1.47x to 1.33x).
    static constexpr bool kLatencyBoundBuild = true;

    // Colours read from global memory per blended Gaussian (lpt_core.cuh, PlainColorAccumulator), in 16-byte
    // loads where CDIM is a multiple of 4 (the front end passes a 16-byte aligned colour array).
    static constexpr bool kAlignedColorRows = true;
    template <unsigned CDIM>
    using Accumulator = lpt::PlainColorAccumulator<Gaussian3DGUT, CDIM, /*Staged=*/false>;
};

static_assert(sizeof(Gaussian3DGUT::Staged) == 64, "Gaussian3DGUT::Staged: 52 bytes of data in four 16-byte rows");
static_assert(sizeof(FThetaCameraDistortionParameters) == 68,
              "gsplat's FThetaCameraDistortionParameters changed: update its host twin FThetaParams (gsplat_lpt)");
// The runtime appends LPT_EXPORT_KERNELS(3dgut, Gaussian3DGUT, <channels>, <CTA size>) for what it launches.
