// The per-frame plan on the GPU, in two launches of many CTAs, so that no frame waits for the host:
//   plan_costs:  every item's predicted cost (its list length, or the depth at which the same item stopped
//                last frame when that is smaller), N_total, a histogram of cost buckets; the last CTA turns
//                the histogram into bucket cursors (a counting sort, heaviest bucket first).
//   plan_order:  every item scattered to its bucket's range of the LPT order; the last CTA sorts the leading
//                items exactly (cost descending, item ascending), then runs the policy of Sec. 4.4 / Eq. (6)
//                on their exact costs and writes h and k for the blending kernels.
// Items within one bucket differ in cost by less than 4.4% and keep no particular order (the LPT queue does
// not need more); the chunked items always lie in the exactly sorted head, so which items are chunked is
// deterministic. gsplat_lpt/plan.py holds the same policy in PyTorch (the oracle the GPU is tested against).

namespace lpt {

// Host twin: gsplat_lpt.layouts.PlanArgs (sizes and offsets checked at compile time).
struct PlanArgs {
    const int* tile_offsets;
    const unsigned char* masks;
    const int* previous_depth;
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
    double heavy_ratio;
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
    int chunk_counts[LPT_MAX_CHUNK_COUNTS];
};

// Bucket of a cost: 0 for nothing to do, then 2^LPT_BUCKET_SUB_BITS buckets per octave (the exponent and the
// leading mantissa bits of the cost as a float), non-decreasing in the cost.
__device__ inline int cost_bucket(int cost) {
    if (cost <= 0) return 0;
    const unsigned bits = __float_as_uint((float)cost);
    return 1 + (int)((bits - 0x3f800000u) >> (23 - LPT_BUCKET_SUB_BITS));
}

// Sort key: cost descending, then item ascending, in one 64-bit word (ascending keys).
__device__ inline unsigned long long order_key(int cost, int item) {
    return ((unsigned long long)(0x7fffffff - cost) << 32) | (unsigned)item;
}
__device__ inline int key_cost(unsigned long long key) { return 0x7fffffff - (int)(key >> 32); }

// atomicAdd(counter + bucket, 1) for every active lane, one atomic per distinct bucket of the warp; returns
// the lane's rank among all increments of its bucket (the old value plus its rank among its warp peers).
__device__ inline int aggregated_increment(int* counter, int bucket) {
    const unsigned active = __activemask();
    const unsigned peers = __match_any_sync(active, bucket);
    const int leader = __ffs(peers) - 1;
    const int lane = (int)(threadIdx.x & 31);
    int base = 0;
    if (lane == leader) base = atomicAdd(counter + bucket, __popc(peers));
    base = __shfl_sync(peers, base, leader);
    return base + __popc(peers & ((1u << lane) - 1u));
}

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

__device__ inline Candidate shuffle_down(const Candidate& c, int offset) {
    Candidate other;
    other.cost = __shfl_down_sync(0xffffffffu, c.cost, offset);
    other.k_index = __shfl_down_sync(0xffffffffu, c.k_index, offset);
    other.h = __shfl_down_sync(0xffffffffu, c.h, offset);
    return other;
}

// Block-wide minimum of one candidate per thread (the result in thread 0).
__device__ inline Candidate block_best(Candidate c, Candidate* per_warp) {
    for (int offset = 16; offset > 0; offset >>= 1) {
        const Candidate other = shuffle_down(c, offset);
        if (better(other, c)) c = other;
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) per_warp[warp] = c;
    __syncthreads();
    if (threadIdx.x == 0)
        for (int w = 1; w < (int)(blockDim.x >> 5); ++w)
            if (better(per_warp[w], c)) c = per_warp[w];
    __syncthreads();
    return c;
}

// Eq. (6): T(h, k) = max((N_total + lambda h k) / K, l) + beta l,  l = max(N_1 / k, N_{h+1}).
// Explicitly rounded operations (no fused multiply-add), so that plan.py's float64 twin gets the same bits.
__device__ inline double modelled_cost(const PlanArgs& p, double total, double n1, double next, int h, int k) {
    const double longest = h == 0 ? n1 : fmax(__ddiv_rn(n1, (double)k), next);
    const double overhead = __dmul_rn(__dmul_rn(p.overhead_lambda, (double)h), (double)k);
    const double average = __ddiv_rn(__dadd_rn(total, overhead), (double)p.concurrent_ctas);
    return __dadd_rn(fmax(average, longest), __dmul_rn(p.imbalance_beta, longest));
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

// The schedule words of the chosen (h, k), by one thread.
__device__ inline void finish_schedule(const PlanArgs& p, int h, int k, int wanted, double total, double n1,
                                       double lpt_cost) {
    // what later frames of this size should run with: two pixels per thread where nothing is chunked and
    // every item is light against the frame's mean work per CTA
    const bool light = h == 0 && __dmul_rn(n1, (double)p.concurrent_ctas) <= __dmul_rn(LPT_TWO_PIXEL_MAX_IMBALANCE, total);
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

// The policy, run by the last CTA of plan_order. head_costs(i) is exact for i < head.
__device__ void choose_schedule(const PlanArgs& p, const unsigned long long* head_keys, int head, int nonempty,
                                double total, double n1, bool invalid) {
    __shared__ Candidate per_warp[32];
    __shared__ int chosen[3];  // h, k, wanted h k
    const double lpt_cost = modelled_cost(p, total, n1, 0.0, 0, 1);
    // N_{h+1}: exact inside the head; zero past the last non-empty item; beyond the head, only the forced
    // modes look (and take the bucket-sorted cost there).
    auto next_cost = [&](int h) -> double {
        if (h < head) return (double)key_cost(head_keys[h]);
        if (h >= nonempty) return 0.0;
        return (double)__ldcg(p.sorted_costs + h);
    };

    if (p.mode == LPT_MODE_AUTO && !invalid) {
        const int last_h = min(p.max_chunked_tiles, head == nonempty ? head : head - 1);
        Candidate best{lpt_cost, 0, 0}, unbounded{lpt_cost, 0, 0};
        for (int h = (int)threadIdx.x + 1; h <= last_h; h += (int)blockDim.x) {
            const double next = next_cost(h);
            for (int ki = 0; ki < p.num_chunk_counts && ki < LPT_MAX_CHUNK_COUNTS; ++ki) {
                const int k = p.chunk_counts[ki];
                const Candidate candidate{modelled_cost(p, total, n1, next, h, k), ki, h};
                if (better(candidate, unbounded)) unbounded = candidate;
                if ((long long)h * k <= p.chunk_unit_capacity && better(candidate, best)) best = candidate;
            }
        }
        best = block_best(best, per_warp);
        unbounded = block_best(unbounded, per_warp);
        if (threadIdx.x == 0) {
            const double bar = __dmul_rn(1.0 - p.min_gain, lpt_cost);
            const bool worth_it = best.h > 0 && best.cost <= bar;
            chosen[0] = worth_it ? best.h : 0;
            chosen[1] = worth_it ? p.chunk_counts[best.k_index] : 1;
            chosen[2] = (unbounded.h > 0 && unbounded.cost <= bar) ? unbounded.h * p.chunk_counts[unbounded.k_index] : 0;
            p.predicted[0] = worth_it ? best.cost : lpt_cost;
        }
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
    if (threadIdx.x == 0) finish_schedule(p, h, k, chosen[2], total, n1, lpt_cost);
}

}  // namespace lpt

extern "C" __global__ void __launch_bounds__(LPT_PLAN_THREADS) plan_costs(const lpt::PlanArgs p) {
    __shared__ int histogram[LPT_BUCKET_COUNT];
    __shared__ unsigned long long sums[2];
    __shared__ int block_error, block_max, is_last;
    for (int b = (int)threadIdx.x; b < LPT_BUCKET_COUNT; b += (int)blockDim.x) histogram[b] = 0;
    if (threadIdx.x == 0) {
        sums[0] = sums[1] = 0ull;
        block_error = 0;
        block_max = 0;
    }
    __syncthreads();

    const int item = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    unsigned long long length = 0ull, cost = 0ull;
    if (item < p.num_items) {
        const int start = p.tile_offsets[item];
        const int end = item == p.num_items - 1 ? p.n_isects : p.tile_offsets[item + 1];
        int list_length = 0;
        if (0 <= start && start <= end && end <= p.n_isects) {
            list_length = end - start;
        } else {
            atomicOr(&block_error, LPT_ERROR_OFFSETS);
        }
        if (p.masks != nullptr && !p.masks[item]) list_length = 0;  // masked-out tiles do no blending work
        int c = list_length;
        if (p.previous_depth != nullptr && c > 0) c = max(1, min(c, p.previous_depth[item]));
        p.costs[item] = c;
        lpt::aggregated_increment(histogram, lpt::cost_bucket(c));
        length = (unsigned long long)list_length;
        cost = (unsigned long long)c;
    }
    int largest = (int)cost;
    for (int offset = 16; offset > 0; offset >>= 1) {
        length += __shfl_down_sync(0xffffffffu, length, offset);
        cost += __shfl_down_sync(0xffffffffu, cost, offset);
        largest = max(largest, __shfl_down_sync(0xffffffffu, largest, offset));
    }
    if ((threadIdx.x & 31) == 0) {
        atomicAdd(sums + 0, length);
        atomicAdd(sums + 1, cost);
        atomicMax(&block_max, largest);
    }
    __syncthreads();
    for (int b = (int)threadIdx.x; b < LPT_BUCKET_COUNT; b += (int)blockDim.x)
        if (histogram[b] != 0) atomicAdd(p.histogram + b, histogram[b]);
    if (threadIdx.x == 0) {
        atomicAdd(p.total + 2, sums[0]);
        atomicAdd(p.total + 3, sums[1]);
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
        rank = lpt::aggregated_increment(counts, bucket);
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
    // Eq. (6) never drops below N_total / K: when that alone is within min_gain of LPT-only, no (h, k) can
    // be worth it, and the auto policy needs neither the exact head nor the search (a balanced frame).
    const double lpt_cost = lpt::modelled_cost(p, total, n1, 0.0, 0, 1);
    const bool hopeless = p.mode == LPT_MODE_AUTO &&
                          __ddiv_rn(total, (double)p.concurrent_ctas) > __dmul_rn(1.0 - p.min_gain, lpt_cost);
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

