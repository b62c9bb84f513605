/* `int`: the fuse engine's scheduling and FP64 product layers, with IntLSE sum layers.
 *
 * msg_g(j) = O + m + LSE_k (w[j, k] + p(b, k) - m) where the LSE runs in Q16.16 base-2 fixed
 * point (src/lse/lse_int.h): q_k = wq[k][j] + pq[k][b], both clamped at PC_INT_FLOOR.
 * The K terms are combined as a balanced tree: a fixed 8-way tree in registers, then a binary
 * counter over the 8-term blocks (a stack of partial sums, one per level), which is the same
 * balanced tree for K a power of two and never folds small terms one by one into a large one.
 * Padding terms are -2^30: lse2 with them adds exactly 0 (table[end] = 0).
 * Zero probability follows the cpu backend (cpu_int.c): a shifted value p - m or an output at
 * or below INT_ZERO (-4096 log2 units, 2839 nats) counts as zero. Zero outputs are written as
 * -inf, so a parent sees an exact zero: its p is -inf there, and a group with no nonzero
 * state gets m = -inf and offset -inf (pc_gpu_phase_a), which reaches log p(x) = -inf. Writing
 * the clamped integer instead (~ -5678 nats) would make such a group look finite.
 * A work item is (group, tile of BM samples) and covers all K outputs (thread per (b, j), lanes
 * along j so the weight reads coalesce). The root's LSE is FP64 as in every backend. */
#include <math.h>
#include <stdlib.h>

#include "base/fail.h"
#include "eval/cuda/gpu_device.cuh"
#include "lse/lse_int.h"

#define INT_THREADS 256
#define INT_PAD (2 * PC_INT_FLOOR)
#define INT_ZERO (PC_INT_FLOOR / 2)

static size_t int_smem(int K, int bm) {
    return (size_t)K * pc_gpu_ld(bm) * 4 + 2 * (size_t)bm * 8 + PC_INT_TABLE_LEN * 4;
}

static __device__ __forceinline__ int32_t tree8(const int32_t (&v)[8], const int32_t *tab) {
    int32_t a = pc_int_lse2(pc_int_lse2(v[0], v[1], tab), pc_int_lse2(v[2], v[3], tab), tab);
    int32_t b = pc_int_lse2(pc_int_lse2(v[4], v[5], tab), pc_int_lse2(v[6], v[7], tab), tab);
    return pc_int_lse2(a, b, tab);
}

/* LSE over k of wq[k][j] + pq[k * ld] in Q16.16 base 2. */
static __device__ int32_t int_lse_column(const int32_t *wq, int K, int j, const int32_t *pq,
                                         int ld, const int32_t *tab) {
    int32_t stack[16];
    int depth = 0;
    for (int k0 = 0, blk = 0; k0 < K; k0 += 8, blk++) {
        int32_t v[8];
#pragma unroll
        for (int u = 0; u < 8; u++) {
            const int k = k0 + u;
            v[u] = k < K ? __ldg(wq + (size_t)k * K + j) + pq[k * ld] : INT_PAD;
        }
        int32_t val = tree8(v, tab);
        for (int bit = 0; (blk >> bit) & 1; bit++) val = pc_int_lse2(stack[--depth], val, tab);
        stack[depth++] = val;
    }
    int32_t val = stack[--depth];
    while (depth > 0) val = pc_int_lse2(stack[--depth], val, tab);
    return val;
}

/* Thread 0 waits until every child of g, and the previous reader of g's slot, has finished
 * tile t: an acquire each, which the block's barrier after it passes on to every thread. */
static __device__ void int_wait(const pc_gpu_args &a, const pc_gpu_group &g, int t) {
    const int one = 1;
    for (int i = g.child_begin; i < g.child_end; i++)
        pc_gpu_acquire_count<64>(a.done + (size_t)__ldg(a.children + i) * a.tiles + t, one);
    if (g.wait >= 0) pc_gpu_acquire_count<64>(a.done + (size_t)g.wait * a.tiles + t, one);
}

static __global__ void __launch_bounds__(INT_THREADS) int_kernel(pc_gpu_args a, int bm) {
    extern __shared__ float4 smem4[];
    const int K = a.K, ld = pc_gpu_ld(bm);
    float *es = reinterpret_cast<float *>(smem4);
    double *m = reinterpret_cast<double *>(es + (size_t)K * ld);
    double *o = m + bm;
    int32_t *tab = reinterpret_cast<int32_t *>(o + bm);
    __shared__ int s_item;
    for (int i = threadIdx.x; i < PC_INT_TABLE_LEN; i += INT_THREADS) tab[i] = a.table[i];
    const int total = a.G * a.tiles;
    for (;;) {
        if (threadIdx.x == 0) s_item = atomicAdd(a.queue, 1);
        __syncthreads();
        const int item = s_item;
        if (item >= total) return;
        const int t = item % a.tiles, gi = item / a.tiles;
        const pc_gpu_group g = a.groups[gi];
        const int64_t b0 = (int64_t)t * bm;
        if (threadIdx.x == 0) int_wait(a, g, t);
        __syncthreads();
        if (g.slot < 0) {
            pc_gpu_phase_a<0>(a, g, b0, bm, ld, true, false, es, m, o);
            pc_gpu_root_out(a, b0, bm, ld, es, m, o);
        } else {
            pc_gpu_phase_a<0>(a, g, b0, bm, ld, false, true, es, m, o);
            int32_t *pq = reinterpret_cast<int32_t *>(es);
            for (int i = threadIdx.x; i < K * bm; i += INT_THREADS) {
                const int k = i / bm, bl = i - k * bm;
                const int32_t q = pc_int_from_shifted(es[k * ld + bl]);
                pq[k * ld + bl] = q > INT_ZERO ? q : PC_INT_FLOOR;
            }
            __syncthreads();
            const int32_t *wq = a.wq + (size_t)gi * K * K;
            for (int i = threadIdx.x; i < K * bm; i += INT_THREADS) {
                const int bl = i / K, j = i - bl * K;
                const int64_t b = b0 + bl;
                if (b >= a.n) continue;
                const int32_t r = int_lse_column(wq, K, j, pq + bl, ld, tab);
                a.rel[((size_t)g.slot * a.chunk + b) * K + j] =
                    r > INT_ZERO ? (float)((double)r * PC_INT_UNIT_NATS) : -INFINITY;
            }
            for (int bl = threadIdx.x; bl < bm; bl += INT_THREADS) {
                const int64_t b = b0 + bl;
                if (b < a.n)
                    a.off[(size_t)g.slot * a.chunk + b] =
                        m[bl] == -INFINITY ? -INFINITY : o[bl] + m[bl];
            }
        }
        __syncthreads(); /* every thread's stores, then thread 0's release */
        if (threadIdx.x == 0 && g.slot >= 0)
            pc_gpu_release_add(a.done + (size_t)gi * a.tiles + t, 1);
    }
}

/* The strategy's own: its tile, kernel grid and shared memory, its weights and table. */
typedef struct int_state {
    int32_t bm, grid;
    size_t smem;
    int32_t *d_wq, *d_table;
} int_state;

static int_state *int_of(const pc_gpu_state *s) { return (int_state *)s->strategy; }

static const char *int_strategy(const pc_gpu_state *s, int64_t n) {
    (void)s, (void)n;
    return "persistent";
}

/* BM * K pairs (b, j) per item: about 4 K-term trees per thread, at least 4 samples. */
static pc_status int_configure(pc_gpu_state *s) {
    int_state *p = (int_state *)calloc(1, sizeof(int_state));
    s->strategy = p;
    if (!p) return pc_fail(PC_ERR_NOMEM, "backend 'int': out of host memory");
    const int K = s->K;
    int bm = 4 * INT_THREADS / K;
    bm = bm > 128 ? 128 : bm < 4 ? 4 : bm & ~3;
    p->bm = s->bm = bm, p->smem = int_smem(K, bm);
    return pc_gpu_kernel_grid(s, (const void *)int_kernel, INT_THREADS, p->smem,
                              PC_GPU_STATIC_SMEM, "backend 'int'", &p->grid);
}

static size_t int_wq_bytes(const pc_gpu_state *s) {
    return (size_t)s->G * s->K * s->K * sizeof(int32_t);
}

static size_t int_bytes(const pc_gpu_state *s, int64_t chunk) {
    (void)chunk;
    return int_wq_bytes(s) + PC_INT_TABLE_LEN * sizeof(int32_t);
}

/* wq[g][k][j] = trans_logw[t_g, j, k] in Q16.16 base 2, clamped at PC_INT_FLOOR; the table. */
static pc_status int_upload(pc_gpu_state *s) {
    pc_status st = PC_OK;
    int_state *p = int_of(s);
    const pc_circuit *c = s->circuit;
    const size_t K = (size_t)s->K, G = (size_t)s->G;
    int32_t *h = (int32_t *)calloc(G * K * K, sizeof(int32_t));
    int32_t table[PC_INT_TABLE_LEN];
    if (!h) return pc_fail(PC_ERR_NOMEM, "GPU upload: out of host memory for weights");
    for (size_t g = 0; g < G; g++) {
        const int32_t t = c->group_trans[g];
        if (t < 0) continue;
        const double *w = c->trans_logw + (size_t)t * K * K;
        for (size_t j = 0; j < K; j++)
            for (size_t k = 0; k < K; k++) {
                const double q = w[j * K + k] * PC_INT_SCALE_F;
                h[(g * K + k) * K + j] =
                    q > (double)PC_INT_FLOOR ? (int32_t)llround(q) : PC_INT_FLOOR;
            }
    }
    pc_int_table_fill(table);
    if (!(st = pc_gpu_upload(s, (void **)&p->d_wq, h, int_wq_bytes(s), "Q16.16 trans_logw")))
        st = pc_gpu_upload(s, (void **)&p->d_table, table, sizeof(table), "IntLSE table");
    free(h);
    return st;
}

static pc_status int_enqueue(pc_gpu_state *s, const pc_gpu_args *a, cudaStream_t stream) {
    pc_status st = PC_OK;
    const int_state *p = int_of(s);
    const int total = a->G * a->tiles;
    const int grid = total < p->grid ? total : p->grid;
    pc_gpu_args b = *a;
    b.wq = p->d_wq, b.table = p->d_table;
    if ((st = pc_gpu_reset_counters(a, stream))) return st;
    int_kernel<<<grid, INT_THREADS, p->smem, stream>>>(b, p->bm);
    PC_CUDA_CHECK(cudaGetLastError());
fail:
    return st;
}

static void int_release(pc_gpu_state *s) {
    int_state *p = int_of(s);
    if (!p) return;
    pc_gpu_release(s, p->d_wq, int_wq_bytes(s));
    pc_gpu_release(s, p->d_table, PC_INT_TABLE_LEN * sizeof(int32_t));
    free(p);
    s->strategy = NULL;
}

static const pc_gpu_impl int_impl = {
    .backend = PC_BACKEND_INT,
    .strategy_for = int_strategy,
    .configure = int_configure,
    .plan = NULL,
    .bytes = int_bytes,
    .upload = int_upload,
    .enqueue = int_enqueue,
    .release = int_release,
};

static pc_status int_create(const pc_circuit *c, const pc_eval_opts *o, void **state) {
    return pc_gpu_create(&int_impl, c, o, state);
}

extern "C" const pc_backend_ops pc_backend_int_ops = PC_GPU_OPS(int_create);
