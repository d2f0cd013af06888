// The per-frame plan on the GPU, so that no frame waits for the host: tile workloads (the key of the
// LPT sort, which torch's radix sort does between these two kernels) and the chunking policy of
// Sec. 4.4 / Eq. (6). gsplat_lpt/plan.py holds the same policy in PyTorch (the CPU oracle).
//
// schedule[] (int32) is what the blending kernels read:
//   [0] LPT queue counter   [1] h (chunked tiles)   [2] k (chunks per tile)   [3] chunk queue counter
//   [4] N_1                 [5] non-empty tiles
// costs[] (double): [0] predicted T(h, k)  [1] predicted T(0, .) (LPT only)

// N_t = length of item t's range in flatten_ids; masked-out tiles do no work.
extern "C" __global__ void tile_workloads(const int* __restrict__ tile_offsets, int num_items, int n_isects,
                                          const unsigned char* __restrict__ masks, int* __restrict__ workloads) {
    const int item = blockIdx.x * blockDim.x + threadIdx.x;
    if (item >= num_items) return;
    const int end = item == num_items - 1 ? n_isects : tile_offsets[item + 1];
    const int workload = end - tile_offsets[item];
    workloads[item] = (masks != nullptr && !masks[item]) ? 0 : workload;
}

constexpr int kMaxChunkCounts = 8;
constexpr int kPolicyThreads = 1024;

struct Candidate {
    double cost;
    int k_index;
    int h;
};

// Lexicographic (cost, k order, h): the same tie-breaking as plan.choose_chunking.
__device__ inline bool better(const Candidate& a, const Candidate& b) {
    if (a.cost != b.cost) return a.cost < b.cost;
    if (a.k_index != b.k_index) return a.k_index < b.k_index;
    return a.h < b.h;
}

// The policy, run by one CTA of kPolicyThreads. `sorted_workloads` is anything indexable (a global
// array, or the fused kernel's sorted keys in shared memory). forced_h >= 0 skips the search (modes
// "chunk" and "fixed": h and k given). Otherwise: search k in chunk_counts and h in
// [0, min(max_chunked_tiles, non-empty tiles)] with h k <= max_chunks; chunk only when the best cost
// is at least min_gain below LPT-only. Also initialises the saturation flags of the h chunked tiles to k.
template <class SortedWorkloads>
__device__ void choose_chunking_block(const SortedWorkloads& sorted_workloads, int num_items, double total,
                                      int concurrent_ctas, double overhead_lambda, double imbalance_beta,
                                      double min_gain, const int* __restrict__ chunk_counts, int num_chunk_counts,
                                      int max_chunked_tiles, int max_chunks, int forced_h, int forced_k,
                                      int* __restrict__ schedule, int* __restrict__ saturation_flags,
                                      double* __restrict__ costs) {
    __shared__ Candidate best_of_warp[kPolicyThreads / 32];
    __shared__ int nonempty_of_warp[kPolicyThreads / 32];
    __shared__ int chosen_h, chosen_k;
    const int thread = threadIdx.x;
    const int lane = thread & 31, warp = thread >> 5;
    const double n1 = num_items > 0 ? (double)sorted_workloads[0] : 0.0;

    // non-empty tiles among the candidates: sorted descending, so count the positives in the head
    const int head = min(num_items, max_chunked_tiles + 1);
    int nonempty = 0;
    for (int i = thread; i < head; i += blockDim.x) nonempty += sorted_workloads[i] > 0;
    for (int offset = 16; offset > 0; offset >>= 1) nonempty += __shfl_down_sync(0xffffffffu, nonempty, offset);
    if (lane == 0) nonempty_of_warp[warp] = nonempty;
    __syncthreads();
    if (thread == 0) {
        int sum = 0;
        for (int w = 0; w < (int)(blockDim.x >> 5); ++w) sum += nonempty_of_warp[w];
        nonempty_of_warp[0] = sum;
    }
    __syncthreads();
    const int nonempty_head = nonempty_of_warp[0];

    const double lpt_cost = fmax(total / concurrent_ctas, n1) + imbalance_beta * n1;
    if (forced_h >= 0) {
        if (thread == 0) {
            chosen_h = forced_k > 1 ? forced_h : 0;
            chosen_k = chosen_h > 0 ? forced_k : 1;
            const double next = chosen_h < num_items ? (double)sorted_workloads[chosen_h] : 0.0;
            const double longest = chosen_h == 0 ? n1 : fmax(n1 / chosen_k, next);
            const double average = (total + overhead_lambda * chosen_h * chosen_k) / concurrent_ctas;
            costs[0] = fmax(average, longest) + imbalance_beta * longest;
        }
    } else {
        const int last_h = min(max_chunked_tiles, nonempty_head);
        Candidate best{lpt_cost, 0, 0};
        for (int h = thread + 1; h <= last_h; h += blockDim.x) {
            const double next = h < num_items ? (double)sorted_workloads[h] : 0.0;  // N_{h+1}
            for (int ki = 0; ki < num_chunk_counts && ki < kMaxChunkCounts; ++ki) {
                const int k = chunk_counts[ki];
                if ((long long)h * k > max_chunks) continue;
                const double longest = fmax(n1 / k, next);
                const double average = (total + overhead_lambda * h * k) / concurrent_ctas;
                const Candidate candidate{fmax(average, longest) + imbalance_beta * longest, ki, h};
                if (better(candidate, best)) best = candidate;
            }
        }
        for (int offset = 16; offset > 0; offset >>= 1) {
            Candidate other;
            other.cost = __shfl_down_sync(0xffffffffu, best.cost, offset);
            other.k_index = __shfl_down_sync(0xffffffffu, best.k_index, offset);
            other.h = __shfl_down_sync(0xffffffffu, best.h, offset);
            if (better(other, best)) best = other;
        }
        if (lane == 0) best_of_warp[warp] = best;
        __syncthreads();
        if (thread == 0) {
            for (int w = 1; w < (int)(blockDim.x >> 5); ++w)
                if (better(best_of_warp[w], best)) best = best_of_warp[w];
            const bool worth_it = best.h > 0 && best.cost <= (1.0 - min_gain) * lpt_cost;
            chosen_h = worth_it ? best.h : 0;
            chosen_k = worth_it ? chunk_counts[best.k_index] : 1;
            costs[0] = worth_it ? best.cost : lpt_cost;
        }
    }
    __syncthreads();
    const int h = chosen_h, k = chosen_k;
    for (int i = thread; i < h; i += blockDim.x) saturation_flags[i] = k;
    if (thread == 0) {
        schedule[0] = 0;
        schedule[1] = h;
        schedule[2] = k;
        schedule[3] = 0;
        schedule[4] = (int)n1;
        schedule[5] = nonempty_head;
        costs[1] = lpt_cost;
    }
}

// After torch's sort (frames with more work items than the fused kernel sorts in shared memory).
extern "C" __global__ void __launch_bounds__(kPolicyThreads)
    choose_chunking(const int* __restrict__ sorted_workloads, int num_items, double total, int concurrent_ctas,
                    double overhead_lambda, double imbalance_beta, double min_gain, const int* __restrict__ chunk_counts,
                    int num_chunk_counts, int max_chunked_tiles, int max_chunks, int forced_h, int forced_k,
                    int* __restrict__ schedule, int* __restrict__ saturation_flags, double* __restrict__ costs) {
    choose_chunking_block(sorted_workloads, num_items, total, concurrent_ctas, overhead_lambda, imbalance_beta,
                          min_gain, chunk_counts, num_chunk_counts, max_chunked_tiles, max_chunks, forced_h, forced_k,
                          schedule, saturation_flags, costs);
}

// Sort keys: workload descending, then item ascending (deterministic ties), in one 64-bit word.
__device__ inline unsigned long long lpt_key(int workload, int item) {
    return ((unsigned long long)(0x7fffffff - workload) << 32) | (unsigned)item;
}

struct SortedKeysView {
    const unsigned long long* keys;
    __device__ int operator[](int i) const { return 0x7fffffff - (int)(keys[i] >> 32); }
};

// The whole plan of a frame in one launch (one CTA): tile workloads, LPT order (bitonic sort of the
// keys in shared memory), N_total, and the policy (or, with run_policy = 0, the LPT-only schedule).
// Dynamic shared memory: next_pow2(num_items) 64-bit keys, so at most 16384 work items
// (runtime.FUSED_PLAN_MAX_ITEMS); larger frames use tile_workloads + torch.sort + choose_chunking.

extern "C" __global__ void __launch_bounds__(kPolicyThreads)
    plan_frame_fused(const int* __restrict__ tile_offsets, int num_items, int n_isects,
                     const unsigned char* __restrict__ masks, int run_policy, int concurrent_ctas,
                     double overhead_lambda, double imbalance_beta, double min_gain,
                     const int* __restrict__ chunk_counts, int num_chunk_counts, int max_chunked_tiles, int max_chunks,
                     long long* __restrict__ lpt_order, int* __restrict__ sorted_workloads, int* __restrict__ schedule,
                     int* __restrict__ saturation_flags, double* __restrict__ costs) {
    extern __shared__ unsigned long long keys[];
    __shared__ long long total_of_warp[kPolicyThreads / 32];
    const int thread = threadIdx.x;
    int padded = 64;  // a power of two, at least one 64-key warp segment
    while (padded < num_items) padded <<= 1;

    long long total = 0;
    for (int i = thread; i < padded; i += blockDim.x) {
        if (i < num_items) {
            const int end = i == num_items - 1 ? n_isects : tile_offsets[i + 1];
            const int workload = (masks != nullptr && !masks[i]) ? 0 : end - tile_offsets[i];
            keys[i] = lpt_key(workload, i);
            total += workload;
        } else {
            keys[i] = ~0ull;  // padding sorts last
        }
    }
    for (int offset = 16; offset > 0; offset >>= 1) total += __shfl_down_sync(0xffffffffu, total, offset);
    if ((thread & 31) == 0) total_of_warp[thread >> 5] = total;
    __syncthreads();

    // Bitonic sort, ascending keys = descending workloads. Stages of stride > 32 run on shared memory
    // (each thread compare-exchanges whole pairs: pair p has lower index 2p - p % stride); the stages of
    // stride <= 32 of each size run in registers, one 64-key segment per warp at a time (lane holds
    // keys lane and lane + 32 of the segment; partners within 32 are a shuffle away).
    const int pairs = padded >> 1;
    const int lane = thread & 31, warp = thread >> 5, warps = blockDim.x >> 5;
    for (int size = 2; size <= padded; size <<= 1) {
        int stride = size >> 1;
        for (; stride > 32; stride >>= 1) {
            for (int pair = thread; pair < pairs; pair += blockDim.x) {
                const int low = 2 * pair - (pair & (stride - 1));
                const int high = low + stride;
                const unsigned long long a = keys[low], b = keys[high];
                if ((a > b) == ((low & size) == 0)) {
                    keys[low] = b;
                    keys[high] = a;
                }
            }
            __syncthreads();
        }
        for (int segment = warp; segment < (padded >> 6); segment += warps) {
            const int base = segment << 6;
            unsigned long long x0 = keys[base + lane], x1 = keys[base + lane + 32];
            for (int s = stride; s > 0; s >>= 1) {
                if (s == 32) {
                    const bool ascending = ((base + lane) & size) == 0;
                    const unsigned long long low = min(x0, x1), high = max(x0, x1);
                    x0 = ascending ? low : high;
                    x1 = ascending ? high : low;
                } else {
                    const bool lower = (lane & s) == 0;
                    const unsigned long long y0 = __shfl_xor_sync(0xffffffffu, x0, s);
                    const unsigned long long y1 = __shfl_xor_sync(0xffffffffu, x1, s);
                    const bool ascending0 = (((base + lane) & ~s) & size) == 0;
                    const bool ascending1 = (((base + 32 + lane) & ~s) & size) == 0;
                    x0 = (lower == ascending0) ? min(x0, y0) : max(x0, y0);
                    x1 = (lower == ascending1) ? min(x1, y1) : max(x1, y1);
                }
            }
            keys[base + lane] = x0;
            keys[base + lane + 32] = x1;
        }
        __syncthreads();
    }
    for (int i = thread; i < num_items; i += blockDim.x) {
        lpt_order[i] = (long long)(keys[i] & 0xffffffffull);
        sorted_workloads[i] = 0x7fffffff - (int)(keys[i] >> 32);
    }
    double frame_total = 0.0;
    for (int w = 0; w < (int)(blockDim.x >> 5); ++w) frame_total += (double)total_of_warp[w];

    const SortedKeysView sorted{keys};
    if (run_policy) {
        choose_chunking_block(sorted, num_items, frame_total, concurrent_ctas, overhead_lambda, imbalance_beta,
                              min_gain, chunk_counts, num_chunk_counts, max_chunked_tiles, max_chunks, -1, 0, schedule,
                              saturation_flags, costs);
    } else if (thread == 0) {
        const double n1 = num_items > 0 ? (double)sorted[0] : 0.0;
        schedule[0] = 0;
        schedule[1] = 0;
        schedule[2] = 1;
        schedule[3] = 0;
        schedule[4] = (int)n1;
        schedule[5] = 0;
        costs[0] = costs[1] = fmax(frame_total / concurrent_ctas, n1) + imbalance_beta * n1;
    }
}
