// The scheduling core shared by every Gaussian variant (3DGS, 2DGS, 3DGUT).
//
// A variant supplies an Evaluator: how one Gaussian is staged into shared memory and what alpha it
// gives at a pixel. Everything else lives here, once:
//   - blend_range:            gsplat's per-pixel front-to-back blending over a range of a tile's list,
//   - lpt_persistent_blend:   K resident CTAs drain a queue of (image, tile) items in LPT order (Sec. 4.1),
//   - depth_chunk_blend:      one CTA per depth chunk of the heaviest tiles, with saturation signalling
//                             (Sec. 4.2),
//   - reduce_depth_chunks:    composites the chunks in depth order, Eq. (5).
//
// Evaluator concept:
//   struct Evaluator {
//     struct Arrays { __device__ Arrays(const float* a0, const float* a1, const float* a2, const float* a3); };
//     struct Staged { ... };                          // per-Gaussian data kept in shared memory
//     static __device__ void stage(const Arrays&, int gaussian, Staged&);
//     // alpha of the staged Gaussian at pixel centre (px, py); false when gsplat would skip it
//     static __device__ bool evaluate(const Staged&, float px, float py, float& alpha);
//   };
// Kernel parameters are flat (CuPy passes scalars and pointers, not structs): four generic Gaussian
// array slots a0..a3 are interpreted by the Evaluator's Arrays constructor.

#pragma once

namespace lpt {

// gsplat 1.5.3 constants (Common.h and the forward kernel).
constexpr float kAlphaThreshold = 1.f / 255.f;
constexpr float kTransmittanceThreshold = 1e-4f;

struct TileGrid {
    unsigned image_width, image_height, tile_size, tile_width, tile_height;

    __device__ unsigned tiles_per_image() const { return tile_width * tile_height; }
};

// Where one thread's pixel lies, for work item `item` = image * tiles_per_image + tile.
struct PixelSlot {
    int image;
    int tile;
    unsigned row, col;
    bool inside;
    float px, py;
    int pixel;  // row-major index within the image

    __device__ PixelSlot(const TileGrid& grid, int item, unsigned thread_rank) {
        const unsigned tiles = grid.tiles_per_image();
        image = item / tiles;
        tile = item - image * tiles;
        const unsigned tile_row = tile / grid.tile_width;
        const unsigned tile_col = tile - tile_row * grid.tile_width;
        row = tile_row * grid.tile_size + thread_rank / grid.tile_size;
        col = tile_col * grid.tile_size + thread_rank % grid.tile_size;
        inside = row < grid.image_height && col < grid.image_width;
        px = (float)col + 0.5f;
        py = (float)row + 0.5f;
        pixel = row * grid.image_width + col;
    }
};

template <unsigned CDIM>
struct PixelAccumulator {
    float T = 1.0f;            // transmittance left
    float color[CDIM];         // sum of c * alpha * T
    unsigned last_index = 0;   // index in flatten_ids of the last Gaussian blended (gsplat's last_ids)
    bool done;                 // saturated (or outside the image): blends nothing more

    __device__ explicit PixelAccumulator(bool inside) : done(!inside) {
#pragma unroll
        for (unsigned k = 0; k < CDIM; ++k) color[k] = 0.f;
    }
};

// Start and end of an item's range in flatten_ids.
__device__ inline void tile_range(const int* tile_offsets, int item, int num_items, int n_isects, int& start,
                                  int& end) {
    start = tile_offsets[item];
    end = (item == num_items - 1) ? n_isects : tile_offsets[item + 1];
}

// gsplat's forward loop over flatten_ids[range_start, range_end) for one tile: batches of block_size
// Gaussians staged in shared memory, each pixel front to back until saturation. With a
// saturation_flag (depth chunks), the CTA also stops once an earlier chunk of the same tile has
// saturated all its pixels (checked once per batch). Returns true when stopped by that flag.
template <unsigned CDIM, class Evaluator>
__device__ bool blend_range(const typename Evaluator::Arrays& arrays, const float* __restrict__ colors,
                            const int* __restrict__ flatten_ids, int range_start, int range_end, float px,
                            float py, PixelAccumulator<CDIM>& pixel, int* staged_ids,
                            typename Evaluator::Staged* staged, const int* saturation_flag, int chunk_index) {
    const unsigned block_size = blockDim.x;
    const unsigned thread_rank = threadIdx.x;
    const unsigned num_batches = (range_end - range_start + block_size - 1) / block_size;
    for (unsigned b = 0; b < num_batches; ++b) {
        // resync all threads before the next batch; end early if the entire tile is done
        if (__syncthreads_count(pixel.done) >= (int)block_size) return false;
        if (saturation_flag != nullptr) {
            // one thread reads the flag so the whole CTA takes the same branch
            const int earlier_saturated =
                thread_rank == 0 && *((volatile const int*)saturation_flag) < chunk_index;
            if (__syncthreads_or(earlier_saturated)) return true;
        }
        const unsigned batch_start = range_start + block_size * b;
        const unsigned idx = batch_start + thread_rank;
        if (idx < (unsigned)range_end) {
            const int g = flatten_ids[idx];
            staged_ids[thread_rank] = g;
            Evaluator::stage(arrays, g, staged[thread_rank]);
        }
        __syncthreads();

        const unsigned batch_size = min(block_size, range_end - batch_start);
        for (unsigned t = 0; (t < batch_size) && !pixel.done; ++t) {
            float alpha;
            if (!Evaluator::evaluate(staged[t], px, py, alpha)) continue;
            const float next_T = pixel.T * (1.0f - alpha);
            if (next_T <= kTransmittanceThreshold) {  // this pixel is done: exclusive
                pixel.done = true;
                break;
            }
            const int g = staged_ids[t];
            const float vis = alpha * pixel.T;
            const float* c_ptr = colors + g * CDIM;
#pragma unroll
            for (unsigned k = 0; k < CDIM; ++k) pixel.color[k] += c_ptr[k] * vis;
            pixel.last_index = batch_start + t;
            pixel.T = next_T;
        }
    }
    return false;
}

// Final write of one pixel, as gsplat's forward kernel does it.
template <unsigned CDIM>
__device__ inline void write_pixel(const PixelSlot& slot, const TileGrid& grid, const float* color, float T,
                                   int last_index, const float* __restrict__ backgrounds,
                                   float* __restrict__ render_colors, float* __restrict__ render_alphas,
                                   int* __restrict__ last_ids) {
    const long long pixel = (long long)slot.image * grid.image_height * grid.image_width + slot.pixel;
    render_alphas[pixel] = 1.0f - T;
    const float* background = backgrounds == nullptr ? nullptr : backgrounds + slot.image * CDIM;
#pragma unroll
    for (unsigned k = 0; k < CDIM; ++k) {
        render_colors[pixel * CDIM + k] = background == nullptr ? color[k] : (color[k] + T * background[k]);
    }
    last_ids[pixel] = last_index;
}

template <class Evaluator>
struct SharedBatch {
    int* ids;                          // [block_size]
    typename Evaluator::Staged* data;  // [block_size]

    __device__ SharedBatch(unsigned char* shared, unsigned block_size)
        : ids(reinterpret_cast<int*>(shared)),
          data(reinterpret_cast<typename Evaluator::Staged*>(shared + block_size * sizeof(int))) {}
};

// Indices of the schedule[] words written by the plan (kernels/frame_plan.cu).
enum ScheduleWord { kLptCounter = 0, kChunkedTiles = 1, kChunkCount = 2, kChunkCounter = 3 };

// Persistent-queue position of this CTA's next work unit, broadcast to the whole CTA. The first unit
// of each CTA is its blockIdx (so the heaviest units start at once, spread over the SMs); every
// further one costs one atomicAdd by one thread.
struct PersistentQueue {
    int* counter;
    int position;  // meaningful in thread 0 only

    __device__ PersistentQueue(int* counter_) : counter(counter_), position(blockIdx.x) {}

    // Returns the next position for every thread of the CTA (callers bound it by their queue length).
    __device__ int next(int* broadcast, bool first) {
        if (threadIdx.x == 0) {
            if (!first) position = (int)gridDim.x + atomicAdd(counter, 1);
            *broadcast = position;
        }
        __syncthreads();
        return *broadcast;
    }
};

// Mechanism 1: a persistent grid of K CTAs drains the LPT queue: every work item except the h chunked
// ones, heaviest first. Per-pixel math identical to gsplat's forward kernel.
template <unsigned CDIM, class Evaluator>
__device__ void lpt_persistent_blend(const long long* __restrict__ lpt_order, int* schedule,
                                     const int* __restrict__ tile_offsets, const int* __restrict__ flatten_ids,
                                     int n_isects, int num_items, TileGrid grid, const typename Evaluator::Arrays& arrays,
                                     const float* __restrict__ colors, const float* __restrict__ backgrounds,
                                     const unsigned char* __restrict__ masks, float* __restrict__ render_colors,
                                     float* __restrict__ render_alphas, int* __restrict__ last_ids) {
    extern __shared__ __align__(16) unsigned char shared_bytes[];
    __shared__ int broadcast;
    SharedBatch<Evaluator> batch(shared_bytes, blockDim.x);
    const int chunked_tiles = schedule[kChunkedTiles];
    const int queue_length = num_items - chunked_tiles;
    PersistentQueue queue(schedule + kLptCounter);

    for (bool first = true;; first = false) {
        const int position = queue.next(&broadcast, first);
        if (position >= queue_length) break;
        const int item = (int)lpt_order[chunked_tiles + position];

        const PixelSlot slot(grid, item, threadIdx.x);
        if (masks != nullptr && !masks[item]) {
            // gsplat renders the background on masked-out tiles
            if (slot.inside) {
                PixelAccumulator<CDIM> empty(true);
                write_pixel<CDIM>(slot, grid, empty.color, 1.0f, -1, backgrounds, render_colors, render_alphas,
                                  last_ids);
            }
        } else {
            int range_start, range_end;
            tile_range(tile_offsets, item, num_items, n_isects, range_start, range_end);
            PixelAccumulator<CDIM> pixel(slot.inside);
            blend_range<CDIM, Evaluator>(arrays, colors, flatten_ids, range_start, range_end, slot.px, slot.py, pixel,
                                         batch.ids, batch.data, nullptr, 0);
            if (slot.inside) {
                write_pixel<CDIM>(slot, grid, pixel.color, pixel.T, (int)pixel.last_index, backgrounds,
                                  render_colors, render_alphas, last_ids);
            }
        }
        __syncthreads();  // the staged batch and the broadcast word are reused by the next unit
    }
}

// Mechanism 2: the h heaviest tiles cut into k contiguous depth chunks; chunk unit c blends depth
// chunk (c % k) of chunked tile (c / k) from T = 1 and writes per-pixel partial colour and
// transmittance. The transmittance is stored negated when the pixel saturated inside this chunk: the
// reduction stops there, as the sequential renderer would have stopped at or before it.
// saturation_flags[tile] (initialised to k by the plan) is lowered with atomicMin to the first chunk
// whose pixels all saturated; later chunks check it once per batch and stop.
// Launched as a persistent grid too, so the plan's h and k never travel to the host.
template <unsigned CDIM, class Evaluator>
__device__ void depth_chunk_blend(const long long* __restrict__ lpt_order, int* schedule, int* saturation_flags,
                                  const int* __restrict__ tile_offsets, const int* __restrict__ flatten_ids,
                                  int n_isects, int num_items, TileGrid grid, const typename Evaluator::Arrays& arrays,
                                  const float* __restrict__ colors, float* __restrict__ partial_colors,
                                  float* __restrict__ partial_transmittance) {
    extern __shared__ __align__(16) unsigned char shared_bytes[];
    __shared__ int broadcast;
    SharedBatch<Evaluator> batch(shared_bytes, blockDim.x);
    const int chunk_count = schedule[kChunkCount];
    const int chunk_units = schedule[kChunkedTiles] * chunk_count;
    PersistentQueue queue(schedule + kChunkCounter);

    for (bool first = true;; first = false) {
        const int chunk_unit = queue.next(&broadcast, first);
        if (chunk_unit >= chunk_units) break;
        const int tile_slot = chunk_unit / chunk_count;
        const int chunk_index = chunk_unit - tile_slot * chunk_count;
        const int item = (int)lpt_order[tile_slot];
        const PixelSlot slot(grid, item, threadIdx.x);

        int range_start, range_end;
        tile_range(tile_offsets, item, num_items, n_isects, range_start, range_end);
        const int chunk_length = (range_end - range_start + chunk_count - 1) / chunk_count;
        const int chunk_start = min(range_end, range_start + chunk_index * chunk_length);
        const int chunk_end = min(range_end, chunk_start + chunk_length);

        int* saturation_flag = saturation_flags + tile_slot;
        PixelAccumulator<CDIM> pixel(slot.inside);
        const bool stopped = blend_range<CDIM, Evaluator>(arrays, colors, flatten_ids, chunk_start, chunk_end,
                                                          slot.px, slot.py, pixel, batch.ids, batch.data,
                                                          saturation_flag, chunk_index);
        // every pixel of this tile saturated here: chunks after this one cannot contribute
        if (__syncthreads_count(pixel.done) >= (int)blockDim.x && threadIdx.x == 0)
            atomicMin(saturation_flag, chunk_index);
        if (!stopped) {  // when stopped, an earlier chunk saturated the tile: the reduction never reads this one
            const long long partial = (long long)chunk_unit * blockDim.x + threadIdx.x;
            partial_transmittance[partial] = pixel.done ? -pixel.T : pixel.T;
#pragma unroll
            for (unsigned k = 0; k < CDIM; ++k) partial_colors[partial * CDIM + k] = pixel.color[k];
        }
        __syncthreads();  // the staged batch and the broadcast word are reused by the next unit
    }
}

// Eq. (5): C = sum_p C_p prod_{q<p} T_q; alpha = 1 - prod T; background with the final T.
// Grid-stride over the h chunked tiles, one thread per pixel. last_ids are not exact for chunked
// tiles (-1): the plan never chunks a frame whose backward needs them.
template <unsigned CDIM>
__device__ void reduce_depth_chunks(const long long* __restrict__ lpt_order, const int* __restrict__ schedule,
                                    TileGrid grid, const float* __restrict__ partial_colors,
                                    const float* __restrict__ partial_transmittance,
                                    const float* __restrict__ backgrounds, float* __restrict__ render_colors,
                                    float* __restrict__ render_alphas, int* __restrict__ last_ids) {
    const int chunked_tiles = schedule[kChunkedTiles];
    const int chunk_count = schedule[kChunkCount];
    for (int tile_slot = blockIdx.x; tile_slot < chunked_tiles; tile_slot += gridDim.x) {
        const PixelSlot slot(grid, (int)lpt_order[tile_slot], threadIdx.x);
        if (!slot.inside) continue;
        float color[CDIM];
#pragma unroll
        for (unsigned k = 0; k < CDIM; ++k) color[k] = 0.f;
        float T = 1.0f;
        for (int chunk = 0; chunk < chunk_count; ++chunk) {
            const long long partial = ((long long)tile_slot * chunk_count + chunk) * blockDim.x + threadIdx.x;
            const float signed_T = partial_transmittance[partial];
#pragma unroll
            for (unsigned k = 0; k < CDIM; ++k) color[k] += partial_colors[partial * CDIM + k] * T;
            T *= fabsf(signed_T);
            if (signed_T < 0.f) break;  // saturated inside this chunk
        }
        write_pixel<CDIM>(slot, grid, color, T, -1, backgrounds, render_colors, render_alphas, last_ids);
    }
}

}  // namespace lpt

// Instantiates the three scheduling kernels for one variant. The variant's .cu file defines its
// Evaluator and invokes this once; CuPy picks CDIM through name expressions.
#define LPT_DEFINE_VARIANT_KERNELS(SUFFIX, EVALUATOR)                                                           \
    template <unsigned CDIM>                                                                                    \
    __global__ void lpt_persistent_blend_##SUFFIX(                                                              \
        const long long* lpt_order, int* schedule, const int* tile_offsets, const int* flatten_ids,             \
        int n_isects, int num_items, unsigned image_width, unsigned image_height, unsigned tile_size,           \
        unsigned tile_width, unsigned tile_height, const float* a0, const float* a1, const float* a2,           \
        const float* a3, const float* colors, const float* backgrounds, const unsigned char* masks,             \
        float* render_colors, float* render_alphas, int* last_ids) {                                            \
        const lpt::TileGrid grid{image_width, image_height, tile_size, tile_width, tile_height};               \
        const EVALUATOR::Arrays arrays(a0, a1, a2, a3);                                                         \
        lpt::lpt_persistent_blend<CDIM, EVALUATOR>(lpt_order, schedule, tile_offsets, flatten_ids, n_isects,    \
                                                   num_items, grid, arrays, colors, backgrounds, masks,         \
                                                   render_colors, render_alphas, last_ids);                     \
    }                                                                                                           \
    template <unsigned CDIM>                                                                                    \
    __global__ void depth_chunk_blend_##SUFFIX(                                                                 \
        const long long* lpt_order, int* schedule, int* saturation_flags, const int* tile_offsets,              \
        const int* flatten_ids, int n_isects, int num_items, unsigned image_width, unsigned image_height,       \
        unsigned tile_size, unsigned tile_width, unsigned tile_height, const float* a0, const float* a1,        \
        const float* a2, const float* a3, const float* colors, float* partial_colors,                           \
        float* partial_transmittance) {                                                                         \
        const lpt::TileGrid grid{image_width, image_height, tile_size, tile_width, tile_height};               \
        const EVALUATOR::Arrays arrays(a0, a1, a2, a3);                                                         \
        lpt::depth_chunk_blend<CDIM, EVALUATOR>(lpt_order, schedule, saturation_flags, tile_offsets,            \
                                                flatten_ids, n_isects, num_items, grid, arrays, colors,         \
                                                partial_colors, partial_transmittance);                         \
    }                                                                                                           \
    template <unsigned CDIM>                                                                                    \
    __global__ void reduce_depth_chunks_##SUFFIX(                                                               \
        const long long* lpt_order, const int* schedule, unsigned image_width, unsigned image_height,           \
        unsigned tile_size, unsigned tile_width, unsigned tile_height, const float* partial_colors,             \
        const float* partial_transmittance, const float* backgrounds, float* render_colors,                     \
        float* render_alphas, int* last_ids) {                                                                  \
        const lpt::TileGrid grid{image_width, image_height, tile_size, tile_width, tile_height};               \
        lpt::reduce_depth_chunks<CDIM>(lpt_order, schedule, grid, partial_colors, partial_transmittance,        \
                                       backgrounds, render_colors, render_alphas, last_ids);                    \
    }
