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
// The cull bound (kHasCullBound; the whole argument is at may_contribute below) exists only where the warp's rays
// are exactly a pinhole bundle: a pinhole camera without distortion (gsplat's perfect pinhole model, or its OpenCV
// pinhole model with every coefficient of the image zero, which then computes the same ray) and a global shutter,
// so that all rays share one origin and the camera-space direction of pixel centre (x, y) is proportional to
// ((x - cx) / fx, (y - cy) / fy, 1), affine in the pixel. Every other camera (distortion, fisheye, FTheta, rolling
// shutter) keeps no cull: the 2D means and conics of gsplat's unscented projection only decide which tiles list a
// Gaussian, they do not bound the 3D response along a curved pixel-to-ray map or rays of many origins.
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
    // What gsplat's kernel keeps in shared memory per Gaussian: mean and opacity, and iscl_rot = S^-1 R^T; and in
    // the 12 bytes of padding, the cull test's per-Gaussian constants (cull_constants; evaluate never reads them).
    struct alignas(16) Staged {
        gsplat::vec4 xyz_opacity;
        gsplat::mat3 iscl_rot;
        float cull_limit;  // the bound on grayDist at any pixel gsplat blends the Gaussian at; +inf: never culled
        float cull_error;  // coefficient of the rounding slack of the whitened distance, per unit of world distance
        float cull_iso;    // (eps_Q + 2e-6) / sigma_min: the denominators' slack (see may_contribute)
    };
    // One warp's bundle of rays (cull_region): the shared origin o and |o| (-1: no bound for this warp), and the
    // unit world normals of the four faces of a pyramid containing every ray direction of the warp's pixels.
    struct alignas(16) CullRegion {
        float4 origin;     // o.x, o.y, o.z, |o| or -1
        float4 normals[3]; // n0.xyz n1.x | n1.yz n2.xy | n2.z n3.xyz
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
        cull_constants(s);
    }

    static __device__ void stage_inert(Staged& s) {  // opacity 0: alpha 0 < 1/255 at every pixel, always culled
        s.xyz_opacity = {0.f, 0.f, 0.f, 0.f};
        s.iscl_rot = gsplat::mat3(1.f);
        s.cull_limit = -1.f;
        s.cull_error = 0.f;
        s.cull_iso = 0.f;
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

    // ---- The cull bound (pinhole, global shutter) ------------------------------------------------------------
    //
    // Geometry. With a global shutter gsplat evaluates every pixel at relative frame time 0 (Cameras.cuh,
    // shutter_relative_frame_time): one pose, so one origin o and one camera-to-world matrix W (world_ray: glm's
    // R_inv, from quaternions; nearly orthonormal, checked). Without distortion the camera direction of pixel
    // centre (x, y) is proportional to (a, b, 1), a = (x - cx) / fx, b = (y - cy) / fy: the warp's directions lie
    // in the pyramid a0 <= a <= a1, b0 <= b <= b1 of its pixel-centre box, the intersection of four half-spaces
    // c_cam . d >= 0 with c_cam = (1, 0, -a0), (-1, 0, a1), (0, 1, -b0), (0, -1, b1). cull_region widens the box
    // by xi = 4e-5 (1 + A + B)^2 (A, B: the largest |a|, |b|) and takes the world normals c = W c_cam, unit length.
    // gsplat's float direction of a pixel is (a', b', 1) up to a positive factor with |a' / a - 1|, |b' / b - 1| <=
    // 20 ulp (the subtraction, the fast-math division, the normalisation's divisions), then rotated by W in float
    // (error <= 6u |d|, u = 2^-24); my a0 is within 4u of exact, my c within (eps_W + 7u) |c_cam| of W^-T c_cam
    // (eps_W = |W^T W - I| <= 1e-5, a Gershgorin bound computed in cull_region). Written out, c . d >= |d| |c_cam|
    // (xi - 31u A - 1.2e-5 (1 + A + B)(1 + A + B + xi)) > 0 for every pixel's float direction d (A + B <= 100):
    // the four half-spaces c . x >= 0 contain all of them exactly.
    // Whitened, with M = iscl_rot (the float matrix, an exact linear map) and g = M (o - mean): each pixel's line
    // {t M d} has t M d in M H_c = {y : (M^-T c) . y >= 0} for t >= 0 and in its negative for t <= 0, so with the
    // unit whitened normals n_c = M^-T c / |M^-T c| and s_c = g . n_c = c . (o - mean) / |M^-T c|, the distance
    // from g to the line is >= L = min(max_c s_c, max_c -s_c), clamped at 0 (the distance from a point to a set is
    // at least that to any half-space containing it; the two nappes of the double cone).
    // |M^-T c| is bounded above without inverting M: with M = D Q' (D = diag of its row norms rho_i), M^-T =
    // D^-1 Q'^-T and |Q'^-T - Q'| <= eps_Q / sqrt(1 - eps_Q), eps_Q = a Gershgorin bound on |I - Q' Q'^T| from the
    // rows' cosines (1e-6 for gsplat's rotations; at most 1e-4 here), so |M^-T c| <= sqrt(sum_i (m_i . c)^2 /
    // rho_i^4) + |c| eps_Q / sigma_min, sigma_min = rho_min sqrt(1 - eps_Q) <= the least singular value of M.
    // My float m_i . c is within 3u rho_i |c| of exact, so that sum is within 3u |c| sqrt(sum 1 / rho_i^2) <=
    // 5.2u |c| / rho_min of exact: an absolute error of the form of the eps_Q term, which takes it (+ 2e-6).
    //
    // gsplat's floats. Its grayDist is |cross(grd, gro)|^2 with gro = M (o - mean) and grd = M d / |M d| in float.
    // gro is within 4u rho_F |o - mean| of g (the subtraction, then 3 roundings per row; rho_F = |M|_F); the float
    // M d is within 3u rho_F |d| of M d, an angle of at most 3u kappa (kappa = rho_F / sigma_min), which moves the
    // distance to the line by at most 3.3u kappa |g|; the normalisation (rsqrt) is within 5u, the cross product's
    // cancellation within 4.1u |gro|: these errors grow with |g| <= rho_F |o - mean|, which is why they are not a
    // fixed margin. My own s_c: the numerator within 4.1u |c| |o - mean|, i.e. 4.1u rho_F |o - mean| after the
    // division (|M^-T c| >= |c| / rho_F), the rest relative (covered by the factor 1 - 3e-5). In all,
    //     sqrt(gsplat's grayDist) >= L (1 - 3e-5) - E,  E = 6.6e-8 rho_F (4 kappa + 32) (|o - mean| + |o|)
    // (|o|: slack for the origin, which is gsplat's own to the bit here). gsplat blends only where opacity *
    // __expf(-grayDist / 2) >= 1/255 (the 0.999 clamp only lowers alpha, and 0.999 > 1/255): __expf, the product
    // and 1/255 in float are within 1e-6 of exact, so grayDist <= 2 ln(255 opacity) + 2e-6 there, and the limit
    // 2 ln + 1e-4 (1 + |2 ln|) covers it with __logf's error. Culled: (L (1 - 3e-5) - E)^2 > limit, or limit < 0
    // (opacity below 1/255 by more than the slack: never blended, grayDist >= 0).
    // Ranges that keep gsplat's arithmetic free of NaN (a NaN grayDist or opacity blends alpha 0.999): M's entries
    // and row norms within [1e-15, 1e15], |mean| <= 1e14, |o| <= 1e15, eps_Q <= 1e-4, kappa <= 1e5; outside them,
    // or with a non-finite opacity, the Gaussian is never culled (cull_limit +inf or NaN); a camera outside the
    // bound's cases, or a warp whose box gives A + B > 100, has no region (never culled).

    static __device__ bool cull_enabled(const Params& p) {
        return p.camera_model == gsplat::CameraModelType::PINHOLE && p.shutter_type == ShutterType::GLOBAL;
    }

    // The per-Gaussian constants of the bound, at staging (all three read only by may_contribute).
    static __device__ void cull_constants(Staged& s) {
        s.cull_limit = __int_as_float(0x7f800000);  // never culled unless the checks below pass
        s.cull_error = 0.f;
        s.cull_iso = 0.f;
        const gsplat::mat3& M = s.iscl_rot;  // column-major: row i is (M[0][i], M[1][i], M[2][i])
        bool ok = fabsf(s.xyz_opacity[0]) <= 1e14f && fabsf(s.xyz_opacity[1]) <= 1e14f &&
                  fabsf(s.xyz_opacity[2]) <= 1e14f;
#pragma unroll
        for (int c = 0; c < 3; ++c)
#pragma unroll
            for (int r = 0; r < 3; ++r) ok = ok && fabsf(M[c][r]) <= 1e15f;  // (false for NaN)
        if (!ok) return;
        float g[3][3];  // Gram matrix of the rows
#pragma unroll
        for (int i = 0; i < 3; ++i)
#pragma unroll
            for (int j = 0; j < 3; ++j) g[i][j] = M[0][i] * M[0][j] + M[1][i] * M[1][j] + M[2][i] * M[2][j];
        const float lo = fminf(g[0][0], fminf(g[1][1], g[2][2])), hi = fmaxf(g[0][0], fmaxf(g[1][1], g[2][2]));
        if (!(lo >= 1e-30f && hi <= 1e30f)) return;
        const float r0 = rsqrtf(g[0][0]), r1 = rsqrtf(g[1][1]), r2 = rsqrtf(g[2][2]);
        const float c01 = fabsf(g[0][1]) * r0 * r1, c02 = fabsf(g[0][2]) * r0 * r2, c12 = fabsf(g[1][2]) * r1 * r2;
        const float eps_q = fmaxf(c01 + c02, fmaxf(c01 + c12, c02 + c12)) + 1e-6f;
        if (!(eps_q <= 1e-4f)) return;
        const float rho_f = sqrtf(g[0][0] + g[1][1] + g[2][2]);
        const float sigma_min = sqrtf(lo) * sqrtf(1.f - eps_q) * 0.99999f;
        const float kappa = rho_f / sigma_min;
        if (!(kappa <= 1e5f)) return;
        const float twice_log = 2.f * __logf(255.f * s.xyz_opacity[3]);  // -inf at opacity 0, NaN below
        s.cull_limit = twice_log + 1e-4f * (1.f + fminf(fabsf(twice_log), 1e30f));
        s.cull_error = 6.6e-8f * rho_f * (4.f * kappa + 32.f);
        s.cull_iso = (eps_q + 2e-6f) / sigma_min * 1.001f;
    }

    // One warp's region, once per item (lane 0): the pose, the widened pyramid's world normals.
    static __device__ CullRegion cull_region(const Params& p, int image, const lpt::PixelBox& box) {
        CullRegion region;
        region.origin = make_float4(0.f, 0.f, 0.f, -1.f);  // no bound
        region.normals[0] = region.normals[1] = region.normals[2] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (!cull_enabled(p)) return region;
        const long long iid = image;
        bool pinhole = true;  // OpenCV's model with all coefficients zero computes the perfect pinhole's ray
        if (p.radial_coeffs != nullptr)
            for (int i = 0; i < 6; ++i) pinhole = pinhole && p.radial_coeffs[iid * 6 + i] == 0.f;
        if (p.tangential_coeffs != nullptr)
            for (int i = 0; i < 2; ++i) pinhole = pinhole && p.tangential_coeffs[iid * 2 + i] == 0.f;
        if (p.thin_prism_coeffs != nullptr)
            for (int i = 0; i < 4; ++i) pinhole = pinhole && p.thin_prism_coeffs[iid * 4 + i] == 0.f;
        if (!pinhole) return region;
        const float* K = p.Ks + iid * 9;
        const float fx = K[0], fy = K[4], cx = K[2], cy = K[5];  // gsplat's focal_length and principal_point
        if (!(fabsf(fx) < 1e30f && fabsf(fy) < 1e30f && fabsf(cx) < 1e30f && fabsf(cy) < 1e30f)) return region;
        const float ax = __fdiv_rn(__fsub_rn(box.x0, cx), fx), bx = __fdiv_rn(__fsub_rn(box.x1, cx), fx);
        const float ay = __fdiv_rn(__fsub_rn(box.y0, cy), fy), by = __fdiv_rn(__fsub_rn(box.y1, cy), fy);
        const float A = fmaxf(fabsf(ax), fabsf(bx)), B = fmaxf(fabsf(ay), fabsf(by));
        if (!(A + B <= 100.f) || ax != ax || bx != bx || ay != ay || by != by) return region;
        const float xi = 4e-5f * (1.f + A + B) * (1.f + A + B);
        const float a0 = fminf(ax, bx) - xi, a1 = fmaxf(ax, bx) + xi, b0 = fminf(ay, by) - xi, b1 = fmaxf(ay, by) + xi;
        const RollingShutterParameters rs(p.viewmats0 + iid * 16, p.viewmats1 == nullptr ? nullptr : p.viewmats1 + iid * 16);
        const WorldRay e0 = world_ray<false>(0.f, rs, glm::fvec3(1.f, 0.f, 0.f));
        const WorldRay e1 = world_ray<false>(0.f, rs, glm::fvec3(0.f, 1.f, 0.f));
        const WorldRay e2 = world_ray<false>(0.f, rs, glm::fvec3(0.f, 0.f, 1.f));
        const glm::fvec3 w0 = e0.ray_dir, w1 = e1.ray_dir, w2 = e2.ray_dir, o = e0.ray_org;  // W's columns, o
        const float g00 = glm::dot(w0, w0), g11 = glm::dot(w1, w1), g22 = glm::dot(w2, w2);
        const float g01 = fabsf(glm::dot(w0, w1)), g02 = fabsf(glm::dot(w0, w2)), g12 = fabsf(glm::dot(w1, w2));
        const float eps_w = fmaxf(fabsf(g00 - 1.f) + g01 + g02, fmaxf(fabsf(g11 - 1.f) + g01 + g12,
                                                                     fabsf(g22 - 1.f) + g02 + g12));
        if (!(eps_w <= 1e-5f && fabsf(o.x) <= 1e15f && fabsf(o.y) <= 1e15f && fabsf(o.z) <= 1e15f)) return region;
        glm::fvec3 n[4];  // W (1, 0, -a0), W (-1, 0, a1), W (0, 1, -b0), W (0, -1, b1)
        n[0] = glm::fvec3(fmaf(-a0, w2.x, w0.x), fmaf(-a0, w2.y, w0.y), fmaf(-a0, w2.z, w0.z));
        n[1] = glm::fvec3(fmaf(a1, w2.x, -w0.x), fmaf(a1, w2.y, -w0.y), fmaf(a1, w2.z, -w0.z));
        n[2] = glm::fvec3(fmaf(-b0, w2.x, w1.x), fmaf(-b0, w2.y, w1.y), fmaf(-b0, w2.z, w1.z));
        n[3] = glm::fvec3(fmaf(b1, w2.x, -w1.x), fmaf(b1, w2.y, -w1.y), fmaf(b1, w2.z, -w1.z));
#pragma unroll
        for (int f = 0; f < 4; ++f) n[f] *= rsqrtf(glm::dot(n[f], n[f]));
        region.origin = make_float4(o.x, o.y, o.z, sqrtf(glm::dot(o, o)));
        region.normals[0] = make_float4(n[0].x, n[0].y, n[0].z, n[1].x);
        region.normals[1] = make_float4(n[1].y, n[1].z, n[2].x, n[2].y);
        region.normals[2] = make_float4(n[2].z, n[3].x, n[3].y, n[3].z);
        return region;
    }

    // The test (the argument above): false only where gsplat's alpha is below 1/255 at every pixel of the warp.
    static __device__ bool may_contribute(const Staged& s, const CullRegion& region) {
        const float4 origin = region.origin;
        if (!(origin.w >= 0.f)) return true;  // no bound for this warp
        const float limit = s.cull_limit;
        if (!(limit < __int_as_float(0x7f800000))) return true;  // not bounded (+inf, NaN)
        if (limit < 0.f) return false;                            // never blended
        const float4 q0 = region.normals[0], q1 = region.normals[1], q2 = region.normals[2];
        const float n[4][3] = {{q0.x, q0.y, q0.z}, {q0.w, q1.x, q1.y}, {q1.z, q1.w, q2.x}, {q2.y, q2.z, q2.w}};
        const float rx = origin.x - s.xyz_opacity[0], ry = origin.y - s.xyz_opacity[1], rz = origin.z - s.xyz_opacity[2];
        const float distance = sqrtf(rx * rx + ry * ry + rz * rz);
        const gsplat::mat3& M = s.iscl_rot;
        float inverse_rho2[3];
#pragma unroll
        for (int i = 0; i < 3; ++i) inverse_rho2[i] = 1.f / (M[0][i] * M[0][i] + M[1][i] * M[1][i] + M[2][i] * M[2][i]);
        float pos = 0.f, neg = 0.f;
#pragma unroll
        for (int f = 0; f < 4; ++f) {
            const float numerator = n[f][0] * rx + n[f][1] * ry + n[f][2] * rz;
            float sum = 0.f;
#pragma unroll
            for (int i = 0; i < 3; ++i) {
                const float q = (M[0][i] * n[f][0] + M[1][i] * n[f][1] + M[2][i] * n[f][2]) * inverse_rho2[i];
                sum += q * q;
            }
            const float t = numerator / (sqrtf(sum) * 1.00001f + s.cull_iso);
            pos = fmaxf(pos, t);
            neg = fmaxf(neg, -t);
        }
        const float lhs = fminf(pos, neg) * 0.99997f - s.cull_error * (distance + origin.w);
        return !(lhs > 0.f && lhs * lhs > limit);
    }
    static constexpr bool kHasCullBound = true;

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
