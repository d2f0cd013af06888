// The per-frame plan on the GPU, so that no frame waits for the host. Where the GPU has thread-block clusters
// and the frame has at most LPT_PLAN_CLUSTER * LPT_PLAN_THREADS * LPT_PLAN_CLUSTER_ITEMS items, one launch
// (plan_cluster, at the end of this file); otherwise two launches of many CTAs:
//   plan_costs:  every item's predicted cost (its list length, or the depth at which the same item stopped
//                last frame when that is smaller), N_total, a histogram of cost buckets; the last CTA turns
//                the histogram into bucket cursors (a counting sort, heaviest bucket first).
//   plan_order:  every item scattered to its bucket's range of the LPT order; the last CTA sorts the leading
//                items exactly (cost descending, item ascending), then runs the policy of Sec. 4.4 / Eq. (6)
//                on their exact costs and writes h and k for the blending kernels.
// Both compute the same plan. Items within one bucket differ in cost by less than 4.4% and keep no particular
// order (the LPT queue does not need more); the chunked items always lie in the exactly sorted head, so which
// items are chunked is deterministic. gsplat_lpt/plan.py holds the same policy in PyTorch (the oracle the GPU
// is tested against).

namespace lpt {

// Host twin: gsplat_lpt.layouts.PlanArgs (sizes and offsets checked at compile time).
struct PlanArgs {
    const int* tile_offsets;
    const unsigned char* masks;
    const int* previous_depth;
    int* previous_length;  // each item's list length in the frame before; the plan leaves this frame's
    int* costs;
    int* histogram;
    int* cursors;
    int* schedule;
    unsigned long long* total;
    double* predicted;
    int* lpt_order;
    int* sorted_costs;
    int* saturation_flags;
    int* chunk_depth;
    double overhead_lambda;
    double imbalance_beta;
    double min_gain;
    double heavy_item_pace;  // sigma: the heaviest item's time per unit of cost, against the mean CTA's
    double heavy_ratio;
    double chunked_cost_floor;  // auto chunks only items above this multiple of the work per CTA they leave to LPT
    double two_pixel_max_imbalance;  // two pixels per thread where the longest item is at most this x N_total / K
    double two_pixel_chunked_max;    // ... and in a chunked frame where the longest unit left is at most this x it
    double two_pixel_many_items_max;  // ... or this in an unchunked frame of many items per CTA (below)
    int num_items;
    int n_isects;
    int mode;
    int forced_chunk_count;
    int max_chunked_tiles;
    int chunk_unit_capacity;
    int concurrent_ctas;
    int num_chunk_counts;
    int frame_index;
    int two_pixels;  // 0: the variant has no two-pixel kernel; 1 or 2: pixels per thread of this frame
    int two_pixel_many_items;  // non-empty items per CTA from which two_pixel_many_items_max applies
    int chunk_counts[LPT_MAX_CHUNK_COUNTS];
};

// Bucket of a cost: 0 for nothing to do, then 2^LPT_BUCKET_SUB_BITS buckets per octave (the exponent and the
// leading mantissa bits of the cost as a float), non-decreasing in the cost.
__device__ inline int cost_bucket(int cost) {
    if (cost <= 0) return 0;
    const unsigned bits = __float_as_uint((float)cost);
    return 1 + (int)((bits - 0x3f800000u) >> (23 - LPT_BUCKET_SUB_BITS));
}

// Whether an item's list length is close enough to its length in the frame before for that frame's stop depth to
// describe it: within a quarter (the same view, moved a little). Cameras taken in turn on one stream render frames
// of the same size whose tiles show other things: a balanced view's early stop depths, read as a heavy view's,
// would hide its heavy tiles from the policy. plan.same_item is the same in PyTorch.
__device__ inline bool same_item(int before, int now) {
    return 4ll * (long long)abs(now - before) <= (long long)now;
}

// An item's predicted cost: its list length (0 where masked out, or where its offsets are invalid: then `error`
// gets LPT_ERROR_OFFSETS), or the depth at which the same item stopped last frame when that is smaller (at
// least 1) and the item is the same one (same_item). plan.predicted_costs is the same in PyTorch. Called once per
// item and frame: it also leaves the item's list length for the next frame.
__device__ inline int predicted_cost(const PlanArgs& p, int item, int& list_length, int& error) {
    const int start = p.tile_offsets[item];
    const int end = item == p.num_items - 1 ? p.n_isects : p.tile_offsets[item + 1];
    list_length = 0;
    if (0 <= start && start <= end && end <= p.n_isects) {
        list_length = end - start;
    } else {
        error = LPT_ERROR_OFFSETS;
    }
    if (p.masks != nullptr && !p.masks[item]) list_length = 0;  // masked-out tiles do no blending work
    int cost = list_length, before = list_length;
    if (p.previous_length != nullptr) {
        before = p.previous_length[item];
        p.previous_length[item] = list_length;
    }
    if (p.previous_depth != nullptr && cost > 0 && same_item(before, list_length))
        cost = max(1, min(cost, p.previous_depth[item]));
    return cost;
}

// Warp-wide reduction of an item block's plan sums: list lengths and costs added, the largest cost, error bits
// or-ed; every lane gets the results.
__device__ inline void warp_plan_sums(unsigned long long& lengths, unsigned long long& costs, int& largest, int& error) {
    for (int offset = 16; offset > 0; offset >>= 1) {
        lengths += __shfl_xor_sync(0xffffffffu, lengths, offset);
        costs += __shfl_xor_sync(0xffffffffu, costs, offset);
        largest = max(largest, __shfl_xor_sync(0xffffffffu, largest, offset));
        error |= __shfl_xor_sync(0xffffffffu, error, offset);
    }
}

// Sort key: cost descending, then item ascending, in one 64-bit word (ascending keys).
__device__ inline unsigned long long order_key(int cost, int item) {
    return ((unsigned long long)(0x7fffffff - cost) << 32) | (unsigned)item;
}
__device__ inline int key_cost(unsigned long long key) { return 0x7fffffff - (int)(key >> 32); }

// The item's slot in its bucket (shared memory): a plain atomic per lane. The order within a bucket is any order
// (only the head is sorted exactly). One atomic per distinct bucket of the warp (__match_any_sync, then a
// shuffle) took about a tenth of the one-cluster plan's stall samples on the H200 (Nsight Compute, a synthetic
// 1080p frame), waiting on the match.
__device__ inline int bucket_slot(int* counter, int bucket) { return atomicAdd(counter + bucket, 1); }

// The usual last-CTA-finishes pattern: true in every thread of the last CTA of the grid to get here.
__device__ inline bool last_to_arrive(int* arrivals, int* flag) {
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) *flag = atomicAdd(arrivals, 1) == (int)gridDim.x - 1;
    __syncthreads();
    if (*flag) __threadfence();
    return *flag;
}

// Ascending bitonic sort of `count` (a power of two >= 64) keys in shared memory by one CTA. Stages whose
// partners are 64 or more apart exchange through shared memory (one barrier each); the stages within a
// 64-key segment run in registers, one segment per warp at a time (lane holds keys lane and lane + 32;
// partners within 32 are a shuffle away), with one barrier per sequence size.
__device__ inline void bitonic_sort(unsigned long long* keys, int count) {
    const int lane = (int)(threadIdx.x & 31), warp = (int)(threadIdx.x >> 5), warps = (int)(blockDim.x >> 5);
    for (int size = 2; size <= count; size <<= 1) {
        int stride = size >> 1;
        for (; stride >= 64; stride >>= 1) {
            for (int pair = (int)threadIdx.x; pair < (count >> 1); pair += (int)blockDim.x) {
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
        for (int segment = warp; segment < (count >> 6); segment += warps) {
            const int base = segment << 6;
            unsigned long long x0 = keys[base + lane], x1 = keys[base + lane + 32];
            for (int s = stride; s > 0; s >>= 1) {
                if (s == 32) {  // partners: lane and lane + 32, both in this thread
                    const bool ascending = ((base + lane) & size) == 0;
                    const unsigned long long low = min(x0, x1), high = max(x0, x1);
                    x0 = ascending ? low : high;
                    x1 = ascending ? high : low;
                } else {
                    const bool lower = (lane & s) == 0;
                    const unsigned long long y0 = __shfl_xor_sync(0xffffffffu, x0, s);
                    const unsigned long long y1 = __shfl_xor_sync(0xffffffffu, x1, s);
                    const bool ascending0 = ((base + lane) & size) == 0;
                    const bool ascending1 = ((base + lane + 32) & size) == 0;
                    x0 = (lower == ascending0) ? min(x0, y0) : max(x0, y0);
                    x1 = (lower == ascending1) ? min(x1, y1) : max(x1, y1);
                }
            }
            keys[base + lane] = x0;
            keys[base + lane + 32] = x1;
        }
        __syncthreads();
    }
}

// Eq. (6): T(h, k) = max((N_total + lambda h k) / K, l) + beta l,  l = max(N_1 / k, N_{h+1}), with the mean work
// per CTA as N_total / K + h (lambda k / K): the search then evaluates a candidate without a division.
// Explicitly rounded operations (no fused multiply-add), so that plan.py's float64 twin gets the same bits.
// lambda k / K: the mean work per CTA that each item chunked k ways adds
__device__ inline double overhead_step(const PlanArgs& p, int k) {
    return __ddiv_rn(__dmul_rn(p.overhead_lambda, (double)k), (double)p.concurrent_ctas);
}

__device__ inline double eq6_cost(const PlanArgs& p, double total_per_cta, double step, double longest, int h) {
    const double average = __dadd_rn(total_per_cta, __dmul_rn(step, (double)h));
    return __dadd_rn(fmax(average, longest), __dmul_rn(p.imbalance_beta, longest));
}

__device__ inline double modelled_cost(const PlanArgs& p, double total, double n1, double next, int h, int k) {
    const double longest = h == 0 ? n1 : fmax(__ddiv_rn(n1, (double)k), next);
    return eq6_cost(p, __ddiv_rn(total, (double)p.concurrent_ctas), overhead_step(p, k), longest, h);
}

// A balanced frame: its heaviest item, at its pace (sigma, LPTConfig.heavy_item_pace: it ends alone on its SM),
// takes no longer than the mean work per CTA over 1 - min_gain (sigma N_1 K (1 - min_gain) <= N_total): LPT
// alone ends within min_gain of the balance bound, and the auto policy leaves it to LPT, with neither the exact
// head nor the search (Eq. (6) with a large beta would price that last item's tail at beta N_1, far above what
// such frames measure). The same in every thread. plan.no_gain_possible is the same test in PyTorch.
__device__ inline bool no_gain_possible(const PlanArgs& p, double total, double n1) {
    const double paced = __dmul_rn(__dmul_rn(p.heavy_item_pace, n1), (double)p.concurrent_ctas);
    return __dmul_rn(paced, 1.0 - p.min_gain) <= total;
}

// The forced modes' (h, k): every non-empty item (chunk) or the heaviest ceil(rho n) (fixed), k given; h k
// bounded by the partial buffers (wanted: h k before that bound).
struct Forced {
    int h, k, wanted;
};

__device__ inline Forced forced_choice(const PlanArgs& p, int nonempty) {
    int h = p.mode == LPT_MODE_CHUNK ? nonempty : min(nonempty, (int)ceil(p.heavy_ratio * nonempty));
    int k = p.forced_chunk_count;
    if (h <= 0 || k < 2) {
        h = 0;
        k = 1;
    }
    const int wanted = h * k;
    if ((long long)h * k > p.chunk_unit_capacity) h = p.chunk_unit_capacity / k;
    return Forced{h, h > 0 ? k : 1, wanted};
}

// The schedule words of the chosen (h, k), by one thread; next: N_{h+1}, the cost of the heaviest item left unchunked.
__device__ inline void finish_schedule(const PlanArgs& p, int h, int k, int wanted, int nonempty, double total,
                                       double n1, double next, double lpt_cost) {
    // what later frames of this size should run with: two pixels per thread where the longest unit is light against
    // the frame's mean work per CTA: the heaviest item where nothing is chunked (a higher bound in a frame of many
    // items per CTA), max(N_1 / k, N_{h+1}) where auto chunks (the forced modes keep one pixel in a chunked frame)
    const double longest = h == 0 ? n1 : fmax(__ddiv_rn(n1, (double)k), next);
    const bool many_items = (long long)nonempty >= (long long)p.two_pixel_many_items * p.concurrent_ctas;
    const double unchunked_bound = many_items ? p.two_pixel_many_items_max : p.two_pixel_max_imbalance;
    const double bound = h == 0 ? unchunked_bound : p.mode == LPT_MODE_AUTO ? p.two_pixel_chunked_max : 0.0;
    const bool light = __dmul_rn(longest, (double)p.concurrent_ctas) <= __dmul_rn(bound, total);
    p.schedule[LPT_WORD_PIXELS_WANTED] = p.two_pixels != 0 && light ? 2 : 1;
    p.schedule[LPT_WORD_PIXELS_PER_THREAD] = p.two_pixels == 2 ? 2 : 1;
    // the frame lasts as long as its longest item: the persistent kernel's warps take rows of the tile
    p.schedule[LPT_WORD_PERSISTENT_ROWS] =
        h == 0 && __dmul_rn(n1, (double)p.concurrent_ctas) > __dmul_rn(LPT_ROWS_MIN_IMBALANCE, total);
    p.schedule[LPT_WORD_PLAN_MODE] = p.mode;
    p.schedule[LPT_WORD_CHUNKED_TILES] = h;
    p.schedule[LPT_WORD_CHUNK_COUNT] = k;
    p.schedule[LPT_WORD_WANTED_CHUNK_UNITS] = wanted;
    p.predicted[1] = lpt_cost;
}

static_assert(LPT_HEAD_CAPACITY < 4096, "choose_auto packs (k index, h <= LPT_HEAD_CAPACITY) as k index * 4096 + h");

// Lexicographic (cost, tie) with tie = k index * 4096 + h: plan.choose_chunking's order.
__device__ __forceinline__ void keep_better(double& cost, int& tie, double other_cost, int other_tie) {
    if (other_cost < cost || (other_cost == cost && other_tie < tie)) {
        cost = other_cost;
        tie = other_tie;
    }
}

// Block-wide inclusive prefix sum of one value per thread (every thread of the CTA calls it); `sums` holds 32
// words of shared memory; `all` gets the CTA's total.
__device__ inline long long block_inclusive_sum(long long value, long long* sums, long long& all) {
    const int lane = (int)(threadIdx.x & 31), warp = (int)(threadIdx.x >> 5), warps = (int)(blockDim.x >> 5);
    for (int offset = 1; offset < 32; offset <<= 1) {
        const long long other = __shfl_up_sync(0xffffffffu, value, offset);
        if (lane >= offset) value += other;
    }
    if (lane == 31) sums[warp] = value;
    __syncthreads();
    if (warp == 0) {
        long long sum = lane < warps ? sums[lane] : 0;
        for (int offset = 1; offset < 32; offset <<= 1) {
            const long long other = __shfl_up_sync(0xffffffffu, sum, offset);
            if (lane >= offset) sum += other;
        }
        if (lane < warps) sums[lane] = sum;
    }
    __syncthreads();
    value += warp > 0 ? sums[warp - 1] : 0;
    all = sums[warps - 1];
    __syncthreads();  // (sums is free for the next call)
    return value;
}

// The auto policy's search, for both plan paths (plan_order's last CTA, plan_cluster's CTA 0), by every thread
// of the CTA: each thread models the candidates (h, k) of its h, every k, with the same rounded operations as
// modelled_cost (N_1 / k and lambda k / K once per k: no division per candidate), then two block-wide minima
// (within the partial buffers, and unbounded).
// head_cost(i): the exact cost of sorted position i < head. chosen (h, k, wanted) and p.predicted[0] are
// written by thread 0; the caller synchronizes before reading chosen.
template <class HeadCost>
__device__ void choose_auto(const PlanArgs& p, HeadCost head_cost, int head, int nonempty, double total, double n1,
                            double lpt_cost, int* chosen) {
    __shared__ double longest_of_k[LPT_MAX_CHUNK_COUNTS];  // N_1 / k
    __shared__ double step_of_k[LPT_MAX_CHUNK_COUNTS];  // lambda k / K
    __shared__ double warp_cost[2][32];
    __shared__ int warp_tie[2][32];
    const int counts = min(p.num_chunk_counts, LPT_MAX_CHUNK_COUNTS);
    if ((int)threadIdx.x < counts) {
        longest_of_k[threadIdx.x] = __ddiv_rn(n1, (double)p.chunk_counts[threadIdx.x]);
        step_of_k[threadIdx.x] = overhead_step(p, p.chunk_counts[threadIdx.x]);
    }
    __shared__ long long scan_sums[32];
    const int last_h = min(p.max_chunked_tiles, head == nonempty ? head : head - 1);
    const double total_per_cta = __ddiv_rn(total, (double)p.concurrent_ctas);
    const bool floored = p.chunked_cost_floor > 0.0;  // (the same in every thread)
    // the two-pixel bound of a chunked frame, x N_total (-1 without a two-pixel kernel: no unit is that short)
    const double two_pixel_total = p.two_pixels != 0 ? __dmul_rn(p.two_pixel_chunked_max, total) : -1.0;
    double best = lpt_cost, unbounded = lpt_cost;  // h = 0 (LPT only) wins ties against every candidate
    int best_tie = 0, unbounded_tie = 0;
    long long chunked_before = 0;  // the costs of the items before this pass's
    __syncthreads();
    // a thread per h, every k in turn (k's index is the same across the warp: its words are broadcast); every
    // thread takes every pass (the floor's prefix sum synchronizes the CTA)
    for (int first = 1; first <= last_h; first += (int)blockDim.x) {
        const int h = first + (int)threadIdx.x;
        const int cost_h = h <= last_h ? head_cost(h - 1) : 0;  // N_h (exact: h - 1 < head)
        bool below_floor = false;
        if (floored) {
            // the lightest chunked item, N_h, must be above chunked_cost_floor times the mean work per CTA that
            // the h heaviest items leave to the LPT queue, (N_total - N_1 - ... - N_h) / K
            long long pass = 0;
            const long long chunked = chunked_before + block_inclusive_sum(cost_h, scan_sums, pass);
            chunked_before += pass;
            const double left_per_cta = __ddiv_rn(__dsub_rn(total, (double)chunked), (double)p.concurrent_ctas);
            below_floor = !((double)cost_h > __dmul_rn(p.chunked_cost_floor, left_per_cta));
        }
        if (h > last_h) continue;
        const double next = h < head ? (double)head_cost(h) : 0.0;  // N_{h+1}; zero past the non-empty items
        for (int ki = 0; ki < counts; ++ki) {
            const int k = p.chunk_counts[ki];
            const double longest = fmax(longest_of_k[ki], next);
            // below the floor, a candidate stays where its longest unit left lets the LPT kernel run two pixels per
            // thread (finish_schedule's test), a gain Eq. (6) does not price
            if (below_floor && !(__dmul_rn(longest, (double)p.concurrent_ctas) <= two_pixel_total)) continue;
            const double cost = eq6_cost(p, total_per_cta, step_of_k[ki], longest, h);
            const int tie = ki * 4096 + h;
            keep_better(unbounded, unbounded_tie, cost, tie);
            if ((long long)h * k <= p.chunk_unit_capacity) keep_better(best, best_tie, cost, tie);
        }
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        keep_better(best, best_tie, __shfl_xor_sync(0xffffffffu, best, offset),
                    __shfl_xor_sync(0xffffffffu, best_tie, offset));
        keep_better(unbounded, unbounded_tie, __shfl_xor_sync(0xffffffffu, unbounded, offset),
                    __shfl_xor_sync(0xffffffffu, unbounded_tie, offset));
    }
    const int lane = (int)(threadIdx.x & 31), warp = (int)(threadIdx.x >> 5), warps = (int)(blockDim.x >> 5);
    if (lane == 0) {
        warp_cost[0][warp] = best;
        warp_tie[0][warp] = best_tie;
        warp_cost[1][warp] = unbounded;
        warp_tie[1][warp] = unbounded_tie;
    }
    __syncthreads();
    if (warp == 0) {
        best = lane < warps ? warp_cost[0][lane] : lpt_cost;
        best_tie = lane < warps ? warp_tie[0][lane] : 0;
        unbounded = lane < warps ? warp_cost[1][lane] : lpt_cost;
        unbounded_tie = lane < warps ? warp_tie[1][lane] : 0;
        for (int offset = 16; offset > 0; offset >>= 1) {
            keep_better(best, best_tie, __shfl_xor_sync(0xffffffffu, best, offset),
                        __shfl_xor_sync(0xffffffffu, best_tie, offset));
            keep_better(unbounded, unbounded_tie, __shfl_xor_sync(0xffffffffu, unbounded, offset),
                        __shfl_xor_sync(0xffffffffu, unbounded_tie, offset));
        }
        if (lane == 0) {
            const double bar = __dmul_rn(1.0 - p.min_gain, lpt_cost);
            const int best_h = best_tie & 4095, unbounded_h = unbounded_tie & 4095;
            const bool worth_it = best_h > 0 && best <= bar;
            chosen[0] = worth_it ? best_h : 0;
            chosen[1] = worth_it ? p.chunk_counts[best_tie >> 12] : 1;
            chosen[2] = (unbounded_h > 0 && unbounded <= bar) ? unbounded_h * p.chunk_counts[unbounded_tie >> 12] : 0;
            p.predicted[0] = worth_it ? best : lpt_cost;
        }
    }
}

// The policy, run by every thread of the last CTA of plan_order. head_keys[i] is exact for i < head.
__device__ void choose_schedule(const PlanArgs& p, const unsigned long long* head_keys, int head, int nonempty,
                                double total, double n1, bool invalid) {
    __shared__ int chosen[3];  // h, k, wanted h k
    const double lpt_cost = modelled_cost(p, total, n1, 0.0, 0, 1);
    // the forced modes' N_{h+1}: exact inside the head; zero past the last non-empty item; else the
    // bucket-sorted cost
    auto next_cost = [&](int h) -> double {
        if (h < head) return (double)key_cost(head_keys[h]);
        if (h >= nonempty) return 0.0;
        return (double)__ldcg(p.sorted_costs + h);
    };

    if (p.mode == LPT_MODE_AUTO && !invalid) {  // (every thread: the search synchronizes the CTA)
        choose_auto(p, [&](int i) { return key_cost(head_keys[i]); }, head, nonempty, total, n1, lpt_cost, chosen);
    } else if ((p.mode == LPT_MODE_CHUNK || p.mode == LPT_MODE_FIXED) && !invalid) {
        if (threadIdx.x == 0) {
            const Forced forced = forced_choice(p, nonempty);
            chosen[0] = forced.h;
            chosen[1] = forced.k;
            chosen[2] = forced.wanted;
            p.predicted[0] = forced.h > 0 ? modelled_cost(p, total, n1, next_cost(forced.h), forced.h, forced.k) : lpt_cost;
        }
    } else if (threadIdx.x == 0) {  // LPT only (also every frame whose offsets are invalid)
        chosen[0] = 0;
        chosen[1] = 1;
        chosen[2] = 0;
        p.predicted[0] = lpt_cost;
    }
    __syncthreads();
    const int h = chosen[0], k = chosen[1];
    for (int i = (int)threadIdx.x; i < h; i += (int)blockDim.x) {
        p.saturation_flags[i] = k;
        p.chunk_depth[i] = 0x7fffffff;
    }
    if (threadIdx.x == 0)
        finish_schedule(p, h, k, chosen[2], nonempty, total, n1, h > 0 && p.mode == LPT_MODE_AUTO ? next_cost(h) : 0.0,
                        lpt_cost);
}

}  // namespace lpt

extern "C" __global__ void __launch_bounds__(LPT_PLAN_THREADS) plan_costs(const lpt::PlanArgs p) {
    __shared__ int histogram[LPT_BUCKET_COUNT];
    __shared__ unsigned sums[2];  // 32-bit, as plan_in_cluster's partial sums (native shared atomics; no overflow)
    __shared__ int block_error, block_max, is_last;
    for (int b = (int)threadIdx.x; b < LPT_BUCKET_COUNT; b += (int)blockDim.x) histogram[b] = 0;
    if (threadIdx.x == 0) {
        sums[0] = sums[1] = 0u;
        block_error = 0;
        block_max = 0;
    }
    __syncthreads();

    const int item = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    unsigned long long length = 0ull, cost = 0ull;
    if (item < p.num_items) {
        int list_length, error = 0;
        const int c = lpt::predicted_cost(p, item, list_length, error);
        if (error != 0) atomicOr(&block_error, error);
        p.costs[item] = c;
        lpt::bucket_slot(histogram, lpt::cost_bucket(c));
        length = (unsigned long long)list_length;
        cost = (unsigned long long)c;
    }
    int largest = (int)cost, no_error = 0;  // (errors were or-ed into block_error above)
    lpt::warp_plan_sums(length, cost, largest, no_error);
    if ((threadIdx.x & 31) == 0) {
        atomicAdd(sums + 0, (unsigned)length);
        atomicAdd(sums + 1, (unsigned)cost);
        atomicMax(&block_max, largest);
    }
    __syncthreads();
    for (int b = (int)threadIdx.x; b < LPT_BUCKET_COUNT; b += (int)blockDim.x)
        if (histogram[b] != 0) atomicAdd(p.histogram + b, histogram[b]);
    if (threadIdx.x == 0) {
        atomicAdd(p.total + 2, (unsigned long long)sums[0]);
        atomicAdd(p.total + 3, (unsigned long long)sums[1]);
        if (block_error != 0) atomicOr(p.schedule + LPT_WORD_PLAN_ERROR, block_error);
        atomicMax(p.schedule + LPT_WORD_MAX_COST_SCRATCH, block_max);
    }
    if (!lpt::last_to_arrive(p.schedule + LPT_WORD_PLAN_ARRIVALS, &is_last)) return;

    // Bucket cursors: cursors[b] = items in buckets above b (descending exclusive scan, one warp), kept
    // in shared memory too for the head search.
    __shared__ int above[LPT_BUCKET_COUNT];
    __shared__ int head_bucket;
    for (int b = (int)threadIdx.x; b < LPT_BUCKET_COUNT; b += (int)blockDim.x) {
        histogram[b] = __ldcg(p.histogram + b);
        p.histogram[b] = 0;  // zero for the next frame
    }
    if (threadIdx.x == 0) head_bucket = 1;
    __syncthreads();
    if (threadIdx.x < 32) {
        const int lane = (int)threadIdx.x;
        int carry = 0;
        for (int base = 0; base < LPT_BUCKET_COUNT; base += 32) {
            const int bucket = LPT_BUCKET_COUNT - 1 - (base + lane);
            const int count = histogram[bucket];
            int inclusive = count;
            for (int offset = 1; offset < 32; offset <<= 1) {
                const int below = __shfl_up_sync(0xffffffffu, inclusive, offset);
                if (lane >= offset) inclusive += below;
            }
            above[bucket] = carry + inclusive - count;
            p.cursors[bucket] = carry + inclusive - count;
            carry += __shfl_sync(0xffffffffu, inclusive, 31);
        }
    }
    __syncthreads();
    // The exactly sorted head: every non-empty item if they fit, else whole buckets from the top holding at
    // least max_chunked_tiles + 1 items (fewer when one bucket is too large to fit). The bucket where the
    // count from the top first reaches `need` is found by one thread each.
    const int nonempty = above[0];
    const int need = min(p.max_chunked_tiles + 1, LPT_HEAD_CAPACITY);
    for (int b = (int)threadIdx.x + 1; b < LPT_BUCKET_COUNT; b += (int)blockDim.x) {
        const int from_top = above[b] + histogram[b];
        if (from_top >= need && (b == LPT_BUCKET_COUNT - 1 || above[b] < need)) head_bucket = b;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int head = nonempty;
        if (nonempty > LPT_HEAD_CAPACITY) {
            const int from_top = above[head_bucket] + histogram[head_bucket];
            head = from_top <= LPT_HEAD_CAPACITY ? from_top : above[head_bucket];
        }
        volatile int* schedule = p.schedule;
        schedule[LPT_WORD_NONEMPTY_ITEMS] = nonempty;
        schedule[LPT_WORD_HEAD_COUNT] = head;
        schedule[LPT_WORD_ERROR] = schedule[LPT_WORD_PLAN_ERROR];  // this frame's errors start here
        schedule[LPT_WORD_PLAN_ERROR] = 0;
        schedule[LPT_WORD_MAX_COST] = schedule[LPT_WORD_MAX_COST_SCRATCH];
        schedule[LPT_WORD_MAX_COST_SCRATCH] = 0;
        schedule[LPT_WORD_PLAN_ARRIVALS] = 0;
        volatile unsigned long long* total = p.total;
        total[0] = total[2];
        total[1] = total[3];
        total[2] = 0ull;
        total[3] = 0ull;
    }
}

extern "C" __global__ void __launch_bounds__(LPT_PLAN_THREADS) plan_order(const lpt::PlanArgs p) {
    __shared__ int counts[LPT_BUCKET_COUNT];
    __shared__ int bases[LPT_BUCKET_COUNT];
    __shared__ unsigned long long keys[LPT_HEAD_CAPACITY];
    __shared__ int is_last;
    for (int b = (int)threadIdx.x; b < LPT_BUCKET_COUNT; b += (int)blockDim.x) counts[b] = 0;
    __syncthreads();
    const int item = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    int cost = 0, bucket = 0, rank = 0;
    if (item < p.num_items) {
        cost = p.costs[item];
        bucket = lpt::cost_bucket(cost);
        rank = lpt::bucket_slot(counts, bucket);
    }
    __syncthreads();
    for (int b = (int)threadIdx.x; b < LPT_BUCKET_COUNT; b += (int)blockDim.x)
        if (counts[b] != 0) bases[b] = atomicAdd(p.cursors + b, counts[b]);
    __syncthreads();
    if (item < p.num_items) {
        const int position = bases[bucket] + rank;
        p.lpt_order[position] = item;
        p.sorted_costs[position] = cost;
    }
    if (!lpt::last_to_arrive(p.schedule + LPT_WORD_PLAN_ARRIVALS, &is_last)) return;

    const int nonempty = p.schedule[LPT_WORD_NONEMPTY_ITEMS];
    const bool invalid = (p.schedule[LPT_WORD_ERROR] & LPT_ERROR_OFFSETS) != 0;
    // Eq. (6)'s N_total is the sum of the predicted costs: with saturation feedback, an item that stopped early
    // in the frame before counts its stop depth there too, as in N_1, N_{h+1} and the LPT order (and as
    // `gsplat-lpt calibrate` fits lambda and beta); without it, the sum of list lengths.
    const double total = (double)__ldcg(p.total + 1);
    const double n1 = (double)p.schedule[LPT_WORD_MAX_COST];
    // A balanced frame (no_gain_possible) needs neither the exact head nor the search in auto.
    const bool hopeless = p.mode == LPT_MODE_AUTO && lpt::no_gain_possible(p, total, n1);
    const int head = (p.mode == LPT_MODE_LPT || hopeless) ? 0 : p.schedule[LPT_WORD_HEAD_COUNT];
    if (head > 1) {  // bitonic sort of the head, padded to a power of two (at least one 64-key segment)
        int padded = 64;
        while (padded < head) padded <<= 1;
        for (int i = (int)threadIdx.x; i < padded; i += (int)blockDim.x)
            keys[i] = i < head ? lpt::order_key(__ldcg(p.sorted_costs + i), __ldcg(p.lpt_order + i)) : ~0ull;
        __syncthreads();
        lpt::bitonic_sort(keys, padded);
        for (int i = (int)threadIdx.x; i < head; i += (int)blockDim.x) {
            p.lpt_order[i] = (int)(keys[i] & 0xffffffffull);
            p.sorted_costs[i] = lpt::key_cost(keys[i]);
        }
        __syncthreads();
    } else if (head == 1 && threadIdx.x == 0) {
        keys[0] = lpt::order_key(__ldcg(p.sorted_costs), __ldcg(p.lpt_order));
    }
    __syncthreads();
    lpt::choose_schedule(p, keys, head, nonempty, total, n1, invalid || hopeless);
    if (threadIdx.x == 0) p.schedule[LPT_WORD_PLAN_ARRIVALS] = 0;
}

// ---- One launch: the whole plan on one thread-block cluster (compute capability 9.0 and later) ----------
//
// A grid of one cluster of LPT_PLAN_CLUSTER CTAs of LPT_PLAN_THREADS threads, each thread with up to R items
// (plan_cluster: LPT_PLAN_CLUSTER_ITEMS); the CTAs read and write each
// other's shared memory (DSMEM) and meet at hardware cluster barriers: no global atomics, no last CTA, no
// scratch words to reset.
//   1. every thread predicts the costs of its items (kept in registers) and ranks each in its CTA's bucket
//      histogram; each CTA reduces its sums, largest cost and error bits.                 cluster barrier 1
//   2. every CTA reads all histograms and partial sums: the counting-sort ranges of the buckets (the same in
//      every CTA), where its own items of each bucket start, the head, N_total and N_1; each head item
//      writes its key (cost descending, item ascending) into every CTA.                   cluster barrier 2
//   3. the head is whole buckets, each a contiguous range of positions: one warp per head key counts the
//      smaller keys of its bucket (a rank sort) and writes the key's cost to its exact place in CTA 0.
//                                                                                          cluster barrier 3
//   4. CTA 0: the policy of Eq. (6) over every (h, k) candidate at once, and the schedule words; every CTA:
//      its part of the order in global memory (only now: a barrier's release waits for outstanding stores).
// Each barrier is barrier.cluster.arrive.release + barrier.cluster.wait.acquire by every thread of every CTA:
// what any thread wrote to shared memory (its own CTA's or another's) before it, every thread of the cluster
// reads after it. No DSMEM access follows the last barrier, so no CTA leaves while another may still touch
// its shared memory. Barrier 3 is skipped, by every thread alike (the condition is computed from the same
// data in every CTA), when no head is sorted.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
namespace lpt {

static_assert(LPT_BUCKET_COUNT % 32 == 0 && LPT_BUCKET_COUNT + 32 <= LPT_PLAN_THREADS,
              "plan_cluster: one thread per bucket, then one warp for the partial sums");
static_assert(LPT_PLAN_CLUSTER <= 32, "plan_cluster: one lane per CTA reduces the partial sums");

__device__ __forceinline__ int cluster_rank() {
    unsigned rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    return (int)rank;
}

// Every thread of the cluster: writes before it (shared, local or remote, and global) happen before reads after it.
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// The generic address of `local` (a shared variable) in the shared memory of CTA `rank` of the cluster.
template <typename T>
__device__ __forceinline__ T* in_cta(T* local, int rank) {
    unsigned long long remote;
    asm("mapa.u64 %0, %1, %2;" : "=l"(remote) : "l"(local), "r"(rank));
    return reinterpret_cast<T*>(remote);
}

// The plan of a frame of up to R items per thread (their costs and ranks stay in registers).
template <int R>
__device__ void plan_in_cluster(const PlanArgs& p) {
    constexpr int C = LPT_PLAN_CLUSTER, T = LPT_PLAN_THREADS, B = LPT_BUCKET_COUNT;
    __shared__ int counts[B];          // this CTA's items per bucket (read by every CTA)
    __shared__ int bucket_size[B];     // the cluster's items per bucket
    __shared__ int above[B];           // the cluster's items in higher buckets: where a bucket starts in the order
    __shared__ int bases[B];           // where this CTA's items of a bucket start
    __shared__ unsigned long long keys[LPT_HEAD_CAPACITY];  // the head's keys, at their bucket-order positions
    __shared__ int head_costs[LPT_HEAD_CAPACITY];            // CTA 0: the head's costs in exact order
    __shared__ int ranked[LPT_HEAD_CAPACITY];                // exact places of the head keys this CTA ranked
    // this CTA's list lengths and predicted costs: 32-bit (native shared atomics; 64-bit ones spin on a compare and
    // swap). They cannot overflow: the valid ranges of the items follow each other within n_isects < 2^31, and
    // an invalid range counts 0.
    __shared__ unsigned partial_sums[2];
    __shared__ int partial_max, partial_error, warp_totals[B / 32];
    __shared__ unsigned long long sums[2];  // the cluster's
    __shared__ int largest_cost, errors, head_bucket, forced_next, chosen[3];
    __shared__ double lpt_cost_shared;

    const int rank = cluster_rank();
    const int tid = (int)threadIdx.x, lane = tid & 31, warp = tid >> 5;
    for (int b = tid; b < B; b += T) counts[b] = 0;
    if (tid == 0) {
        partial_sums[0] = partial_sums[1] = 0u;
        partial_max = partial_error = 0;
        head_bucket = 1;
        forced_next = 0;
    }
    __syncthreads();

    // 1. Costs: item (j C + rank) T + tid is the j-th of this thread (all loads first, then the ranks).
    int cost[R], slot[R];
    unsigned length_sum = 0u, cost_sum = 0u;
    int largest = 0, error = 0;
#pragma unroll
    for (int j = 0; j < R; ++j) {
        const int item = (j * C + rank) * T + tid;
        cost[j] = 0;
        if (item < p.num_items) {
            int list_length;
            const int c = predicted_cost(p, item, list_length, error);
            cost[j] = c;
            length_sum += (unsigned)list_length;
            cost_sum += (unsigned)c;
            largest = max(largest, c);
        }
    }
#pragma unroll
    for (int j = 0; j < R; ++j) {
        slot[j] = 0;
        if ((j * C + rank) * T + tid < p.num_items) slot[j] = bucket_slot(counts, cost_bucket(cost[j]));
    }
    length_sum = __reduce_add_sync(0xffffffffu, length_sum);  // (one instruction each, compute capability 8.0+)
    cost_sum = __reduce_add_sync(0xffffffffu, cost_sum);
    largest = __reduce_max_sync(0xffffffffu, largest);
    error = (int)__reduce_or_sync(0xffffffffu, (unsigned)error);
    if (lane == 0) {
        atomicAdd(partial_sums + 0, length_sum);
        atomicAdd(partial_sums + 1, cost_sum);
        atomicMax(&partial_max, largest);
        atomicOr(&partial_error, error);
    }
    cluster_sync();  // 1: every CTA's histogram and partial sums are complete (a CTA barrier too)

    // 2. Thread t < B owns bucket B - 1 - t (heaviest first): its size over the cluster, the share of the CTAs
    // before this one, and (a scan over the owners) the items in higher buckets. Warp B / 32 reduces the sums.
    const int owned = B - 1 - tid;
    int size = 0, before = 0, inclusive = 0;
    if (tid < B) {
#pragma unroll
        for (int r = 0; r < C; ++r) {
            const int count = *in_cta(counts + owned, r);
            size += count;
            before += r < rank ? count : 0;
        }
        inclusive = size;
        for (int offset = 1; offset < 32; offset <<= 1) {
            const int lower = __shfl_up_sync(0xffffffffu, inclusive, offset);
            if (lane >= offset) inclusive += lower;
        }
        if (lane == 31) warp_totals[warp] = inclusive;
    } else if (warp == B / 32) {
        unsigned long long lengths = 0ull, costs = 0ull;
        int most = 0, bits = 0;
        if (lane < C) {
            lengths = *in_cta(partial_sums + 0, lane);
            costs = *in_cta(partial_sums + 1, lane);
            most = *in_cta(&partial_max, lane);
            bits = *in_cta(&partial_error, lane);
        }
        warp_plan_sums(lengths, costs, most, bits);
        if (lane == 0) {
            // Eq. (6)'s N_total is the sum of the predicted costs (see plan_order); nothing can be worth
            // chunking when N_total / K alone is within min_gain of LPT only
            const double total = (double)costs, n1 = (double)most;
            const double lpt_cost = modelled_cost(p, total, n1, 0.0, 0, 1);
            sums[0] = lengths;
            sums[1] = costs;
            largest_cost = most;
            errors = bits;
            lpt_cost_shared = lpt_cost;
        }
    }
    __syncthreads();
    const int need = min(p.max_chunked_tiles + 1, LPT_HEAD_CAPACITY);
    if (tid < B) {
        int prefix = 0;
        for (int w = 0; w < warp; ++w) prefix += warp_totals[w];
        const int higher = prefix + inclusive - size;
        above[owned] = higher;
        bucket_size[owned] = size;
        bases[owned] = higher + before;
        // the head: whole buckets from the top holding at least `need` items (this bucket reaches it first)
        if (owned >= 1 && higher + size >= need && (owned == B - 1 || higher < need)) head_bucket = owned;
    }
    __syncthreads();
    const int nonempty = above[0];
    // a balanced frame: no head sort, no search (the same in every thread of the cluster)
    const bool hopeless = p.mode == LPT_MODE_AUTO && no_gain_possible(p, (double)sums[1], (double)largest_cost);
    int head = nonempty;
    if (nonempty > LPT_HEAD_CAPACITY) {
        const int from_top = above[head_bucket] + bucket_size[head_bucket];
        head = from_top <= LPT_HEAD_CAPACITY ? from_top : above[head_bucket];
    }
    const bool invalid = (errors & LPT_ERROR_OFFSETS) != 0;
    const int sorted = (p.mode == LPT_MODE_LPT || hopeless) ? 0 : head;  // the leading items sorted exactly
    const bool forced_mode = (p.mode == LPT_MODE_CHUNK || p.mode == LPT_MODE_FIXED) && !invalid;
    const Forced forced = forced_mode ? forced_choice(p, nonempty) : Forced{0, 1, 0};
    const int forced_at = forced.h > 0 ? forced.h : -1;  // the forced modes' N_{h+1}: the cost at position h
#pragma unroll
    for (int j = 0; j < R; ++j) {
        const int item = (j * C + rank) * T + tid;
        if (item < p.num_items) {
            const int position = bases[cost_bucket(cost[j])] + slot[j];
            if (position < sorted) {
                const unsigned long long key = order_key(cost[j], item);
#pragma unroll
                for (int r = 0; r < C; ++r) *in_cta(keys + position, r) = key;
            } else if (position == forced_at) {
                *in_cta(&forced_next, 0) = cost[j];
            }
        }
    }
    // (global stores wait until after the last cluster barrier, whose release would wait for them)
    cluster_sync();  // 2: every head key is in every CTA

    // 3. The exact head: one warp per key counts the smaller keys of its bucket, a contiguous range of keys.
    if (sorted > 0) {
        for (int position = warp * C + rank; position < sorted; position += C * (T / 32)) {
            const unsigned long long key = keys[position];
            const int c = key_cost(key), b = cost_bucket(c), first = above[b], members = bucket_size[b];
            int smaller = 0;
            for (int i = lane; i < members; i += 32) smaller += keys[first + i] < key ? 1 : 0;
            smaller = __reduce_add_sync(0xffffffffu, smaller);
            if (lane == 0) {
                const int exact = first + smaller;
                ranked[position] = exact;
                *in_cta(head_costs + exact, 0) = c;
                if (exact == forced_at) *in_cta(&forced_next, 0) = c;
            }
        }
        cluster_sync();  // 3: CTA 0 has the head's costs
    }
    // No CTA touches another's shared memory past the last barrier.

    // 4. The policy (CTA 0).
    if (rank == 0) {
        const double total = (double)sums[1], n1 = (double)largest_cost, lpt_cost = lpt_cost_shared;
        if (p.mode == LPT_MODE_AUTO && !invalid && !hopeless) {
            choose_auto(p, [&](int i) { return head_costs[i]; }, head, nonempty, total, n1, lpt_cost, chosen);
        } else if (tid == 0) {
            chosen[0] = forced.h;  // (0, 1, 0) unless a forced mode
            chosen[1] = forced.k;
            chosen[2] = forced.wanted;
            const double next = forced.h < nonempty ? (double)forced_next : 0.0;
            p.predicted[0] = forced.h > 0 ? modelled_cost(p, total, n1, next, forced.h, forced.k) : lpt_cost;
        }
        __syncthreads();
        const int h = chosen[0], k = chosen[1];
        if (!forced_mode)
            for (int i = tid; i < h; i += T) {
                p.saturation_flags[i] = k;
                p.chunk_depth[i] = 0x7fffffff;
            }
        if (tid == 0) {
            volatile int* schedule = p.schedule;
            schedule[LPT_WORD_NONEMPTY_ITEMS] = nonempty;
            schedule[LPT_WORD_HEAD_COUNT] = head;
            schedule[LPT_WORD_ERROR] = errors;  // this frame's errors start here
            schedule[LPT_WORD_MAX_COST] = largest_cost;
            p.total[0] = sums[0];
            p.total[1] = sums[1];
            // N_{h+1} of auto's choice: from the exact head (its h is below the head, or the head holds every
            // non-empty item); the forced modes do not use it
            const double next = h == 0 || h >= nonempty || forced_mode ? 0.0 : (double)head_costs[h];
            finish_schedule(p, h, k, chosen[2], nonempty, total, n1, next, lpt_cost);
        }
    }

    // The order in global memory, by every CTA: its items past the head at their bucket positions, the head
    // keys it ranked at their exact places; and the forced modes' chunked items.
#pragma unroll
    for (int j = 0; j < R; ++j) {
        const int item = (j * C + rank) * T + tid;
        if (item < p.num_items) {
            const int position = bases[cost_bucket(cost[j])] + slot[j];
            if (position >= sorted) {
                p.lpt_order[position] = item;
                p.sorted_costs[position] = cost[j];
            }
        }
    }
    for (int position = tid * C + rank; position < sorted; position += T * C) {
        const unsigned long long key = keys[position];
        p.lpt_order[ranked[position]] = (int)(key & 0xffffffffull);
        p.sorted_costs[ranked[position]] = key_cost(key);
    }
    for (int i = rank * T + tid; i < forced.h; i += C * T) {
        p.saturation_flags[i] = forced.k;
        p.chunk_depth[i] = 0x7fffffff;
    }
}

}  // namespace lpt

// Up to LPT_PLAN_CLUSTER_ITEMS items per thread. (A build of twice as many items per thread took 26-35 us at
// 65,280 items on the H200, the two launches 15-30 us: larger frames take those.)
extern "C" __global__ void __cluster_dims__(LPT_PLAN_CLUSTER, 1, 1) __launch_bounds__(LPT_PLAN_THREADS, 1)
    plan_cluster(const lpt::PlanArgs p) {
    lpt::plan_in_cluster<LPT_PLAN_CLUSTER_ITEMS>(p);
}
#endif
