/* The persistent strategy's host side (persistent.cuh): its kernel configurations by K and
 * batch, the split between wide and narrow items per pass, and the launch. */
#include <math.h>
#include <stdlib.h>

#include "base/fail.h"
#include "eval/cuda/fuse_persistent/persistent_kernel.cuh"
#include "eval/cuda/gpu_choice.h"

/* A kernel configuration: the kernel, its wide (A) and narrow (B) item shapes, its dynamic
 * shared memory, and the two numbers of the split (pc_gpu_split_layers): gain, how much faster
 * a wide item does its work than narrow items do the same (it gathers each sample once for all
 * outputs and loads fewer shared-memory words per FMA); min_fill, the share of the resident
 * blocks the first (widest) layer's wide items must occupy for wide items to be used at all
 * (at K <= 64 a wide item is mostly gather latency: with less than one wave of them even at the
 * leaves, each wide layer waits on that latency where narrow items of several layers overlap).
 * Both from the tuning table (tuning.md#persistent-gain, tuning.md#persistent-min-fill). */
typedef void (*fuse_fn)(pc_gpu_args, fuse_split);
typedef struct fuse_config {
    fuse_fn fn;
    int bm_a, bn_a, bn_b;
    size_t smem;
    double gain, min_fill;
} fuse_config;

struct pc_persistent {
    fuse_config config[2]; /* below and from t->persistent_large_n samples */
    int32_t grid[2];       /* their resident blocks */
    float *d_wexp;
};

template <class A, class B, int BLOCKS>
static fuse_config fuse_make(int K, double gain, double min_fill) {
    const size_t sa = A::smem(K), sb = B::smem(K);
    return fuse_config{fuse_kernel<A, B, BLOCKS>, A::BM, A::BN, B::BN, sa > sb ? sa : sb, gain,
                       min_fill};
}

/* The configuration for K below (large = false) or from t->persistent_large_n samples
 * (tuning.md#persistent-shapes). Wide items take BN >= K outputs up to K = 256, so the gather
 * runs once per sample tile; narrow items take 16 samples and <= 64 outputs. Small batches
 * take shorter wide items (a shorter critical path), with the FP64 tensor-core product at
 * 64 < K <= 128. Blocks per SM: more warps cover more of the gather's and the waits' latency,
 * fewer registers spill more: three (80 registers) up to K = 64 and four (64 registers) at
 * large batches, where the bottom layers' many items keep every block busy; two for the mma
 * items and the tiles of K = 256 (128 registers). */
static fuse_config fuse_pick(const pc_gpu_tuning *t, int K, bool large) {
    typedef fuse_shape<128, 16, 4, 2, 16> w16;
    typedef fuse_shape<16, 16, 1, 1, 64> n16;
    typedef fuse_shape<128, 32, 4, 4, 16> w32;
    typedef fuse_shape<16, 32, 2, 1, 64> n32;
    typedef fuse_shape<128, 64, 8, 4, 16> w64;
    typedef fuse_shape<16, 64, 2, 2, 64> n64;
    typedef fuse_shape<64, 128, 4, 8, 16> w128;
    typedef fuse_mma_shape<32, 128, 2, 4, 16> w128s;
    typedef fuse_shape<64, 256, 8, 8, 16> w256;
    typedef fuse_shape<32, 256, 4, 8, 16> w256s;
    const double gain = K <= 128 ? t->persistent_gain_k128 : t->persistent_gain_wide;
    const double fill = K <= 64 ? t->persistent_min_fill_k64 : t->persistent_min_fill_wide;
    if (K <= 16)
        return large ? fuse_make<w16, n16, 4>(K, gain, fill)
                     : fuse_make<w16, n16, 3>(K, gain, fill);
    if (K <= 32)
        return large ? fuse_make<w32, n32, 4>(K, gain, fill)
                     : fuse_make<w32, n32, 3>(K, gain, fill);
    if (K <= 64)
        return large ? fuse_make<w64, n64, 4>(K, gain, fill)
                     : fuse_make<w64, n64, 3>(K, gain, fill);
    if (K <= 128)
        return large ? fuse_make<w128, n64, 4>(K, gain, fill)
                     : fuse_make<w128s, n64, 2>(K, gain, fill);
    return large ? fuse_make<w256, n64, 2>(K, gain, fill) : fuse_make<w256s, n64, 2>(K, gain, fill);
}

pc_status pc_persistent_configure(const pc_gpu_state *s, pc_persistent **out) {
    pc_status st = PC_OK;
    pc_persistent *p = (pc_persistent *)calloc(1, sizeof(*p));
    *out = p;
    if (!p) return pc_fail(PC_ERR_NOMEM, "fuse persistent strategy: out of host memory");
    for (int large = 0; large < 2; large++) {
        p->config[large] = fuse_pick(s->tuning, s->K, large);
        if ((st = pc_gpu_kernel_grid(s, (const void *)p->config[large].fn, FUSE_THREADS,
                                     p->config[large].smem, PC_GPU_STATIC_SMEM,
                                     "backend 'fuse'", &p->grid[large])))
            return st;
    }
    return PC_OK;
}

size_t pc_persistent_bytes(const pc_gpu_state *s) { return pc_gpu_wexp_bytes(s); }

pc_status pc_persistent_upload(pc_gpu_state *s, pc_persistent *p) {
    return pc_gpu_upload_wexp(s, &p->d_wexp);
}

void pc_persistent_release(pc_gpu_state *s, pc_persistent *p) {
    if (!p) return;
    pc_gpu_release(s, p->d_wexp, pc_gpu_wexp_bytes(s));
    free(p);
}

/* The split for n samples (gpu_plan.h): a wide item does the work of (BM_A min(BN_A, K)) /
 * (BM_B min(BN_B, K)) narrow ones, c->gain times faster. Fails when the items would overflow
 * the queue's 32-bit counter. */
static pc_status fuse_split_for(const pc_gpu_state *s, const fuse_config *c, int64_t n,
                                int grid, fuse_split *out) {
    const pc_circuit *cir = s->circuit;
    fuse_split sp;
    sp.tiles_a = (int32_t)((n + c->bm_a - 1) / c->bm_a);
    sp.jtiles_a = (s->K + c->bn_a - 1) / c->bn_a;
    sp.tiles_b = (int32_t)((n + FUSE_FINE - 1) / FUSE_FINE);
    sp.jtiles_b = (s->K + c->bn_b - 1) / c->bn_b;
    const double work = (double)c->bm_a * (c->bn_a < s->K ? c->bn_a : s->K) /
                        ((double)FUSE_FINE * (c->bn_b < s->K ? c->bn_b : s->K));
    const int32_t l = pc_gpu_split_layers(cir, (int64_t)sp.tiles_a * sp.jtiles_a,
                                          (int64_t)sp.tiles_b * sp.jtiles_b, work / c->gain,
                                          (int64_t)ceil(c->min_fill * grid), grid);
    sp.groups_a = cir->layer_start[l];
    const int64_t items_a = (int64_t)sp.groups_a * sp.tiles_a * sp.jtiles_a;
    const int64_t total = items_a + (int64_t)(s->G - sp.groups_a) * sp.tiles_b * sp.jtiles_b;
    if (total > INT32_MAX)
        return pc_fail(PC_ERR_UNSUPPORTED,
                       "backend 'fuse': %d groups at K = %d make %lld work items for %lld "
                       "samples, more than the queue counts (2^31 - 1)", s->G, s->K,
                       (long long)total, (long long)n);
    sp.items_a = (int32_t)items_a, sp.total = (int32_t)total;
    *out = sp;
    return PC_OK;
}

pc_status pc_persistent_enqueue(const pc_gpu_state *s, const pc_persistent *p,
                                const pc_gpu_args *a, cudaStream_t stream) {
    pc_status st = PC_OK;
    const int large = pc_gpu_persistent_large(s->tuning, a->n);
    const fuse_config *c = &p->config[large];
    const int resident = p->grid[large];
    fuse_split sp;
    if ((st = fuse_split_for(s, c, a->n, resident, &sp))) return st;
    const int grid = sp.total < resident ? sp.total : resident;
    pc_gpu_args fa = *a;
    fa.wexp = p->d_wexp;
    if ((st = pc_gpu_reset_counters(a, stream))) return st;
    c->fn<<<grid, FUSE_THREADS, c->smem, stream>>>(fa, sp);
    PC_CUDA_CHECK(cudaGetLastError());
fail:
    return st;
}

/* ---- the strategy forced (fuse/fuse.cu) ---------------------------------------------------*/

static const char *persistent_strategy(const pc_gpu_state *s, int64_t n) {
    (void)s, (void)n;
    return "persistent";
}

static pc_status persistent_configure(pc_gpu_state *s) {
    s->bm = PC_PERSISTENT_TILE;
    return pc_persistent_configure(s, (pc_persistent **)&s->strategy);
}

static size_t persistent_bytes(const pc_gpu_state *s, int64_t chunk) {
    (void)chunk;
    return pc_persistent_bytes(s);
}

static pc_status persistent_upload(pc_gpu_state *s) {
    return pc_persistent_upload(s, (pc_persistent *)s->strategy);
}

static pc_status persistent_enqueue(pc_gpu_state *s, const pc_gpu_args *a, cudaStream_t stream) {
    return pc_persistent_enqueue(s, (const pc_persistent *)s->strategy, a, stream);
}

static void persistent_release(pc_gpu_state *s) {
    pc_persistent_release(s, (pc_persistent *)s->strategy);
    s->strategy = NULL;
}

const pc_gpu_impl pc_gpu_persistent_impl = {
    .backend = PC_BACKEND_FUSE,
    .strategy_for = persistent_strategy,
    .configure = persistent_configure,
    .plan = NULL,
    .bytes = persistent_bytes,
    .upload = persistent_upload,
    .enqueue = persistent_enqueue,
    .release = persistent_release,
};
