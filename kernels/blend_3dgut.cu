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
#include "lpt_core.cuh"

// gsplat's device headers (gsplat/cuda/include), in the order its own kernel includes them. GLM's
// defaulted constructors carry __host__ __device__, which nvcc notes as ignored (20012-D); Cameras.cuh
// silences that note around its own GLM includes, Common.h includes GLM first, so silence it here too.
#pragma nv_diag_suppress esa_on_defaulted_function_ignored
#include "Common.h"
#include "Cameras.cuh"
#include "Utils.cuh"
#pragma nv_diag_default esa_on_defaulted_function_ignored

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

    // One camera model's world ray for the pixel centre (px, py): the parameters gsplat's kernel fills in,
    // then the model's own image_point_to_world_ray_shutter_pose.
    template <class Model>
    static __device__ WorldRay cast(typename Model::Parameters cm, const Params& p, float px, float py,
                                    const RollingShutterParameters& rs) {
        cm.resolution = {p.image_width, p.image_height};
        cm.shutter_type = p.shutter_type;
        const Model model(cm);
        return model.image_point_to_world_ray_shutter_pose(gsplat::vec2(px, py), rs);
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

static_assert(sizeof(Gaussian3DGUT::Staged) == 64, "Gaussian3DGUT::Staged: 52 bytes of data in four 16-byte rows");
static_assert(sizeof(FThetaCameraDistortionParameters) == 68,
              "gsplat's FThetaCameraDistortionParameters changed: update its host twin FThetaParams (gsplat_lpt)");
// The runtime appends LPT_EXPORT_KERNELS(3dgut, Gaussian3DGUT, <channels>, <CTA size>) for what it launches.
