/* The GPU circuit engine shared by the fuse, int and gemm backends (internal).
 *
 * Message format. Every sum node group g (all groups but the root) sends its parent
 *     msg_g(j) = off_g[b] + rel_g[b, j]
 * with off_g in FP64 ([slots][chunk]) and rel_g in FP32 ([slots][chunk][K]). The product layer
 * of a group splits into an FP64 part and a part near 0:
 *     P_g(b, k) = O(b) + p(b, k),  O(b) = sum_c off_c[b]                  (FP64),
 *     p(b, k)   = sum_v input[v, x_bv, k] + sum_c rel_c[b, k]   (summed in FP64, kept in FP32),
 * and the sum layer shifts by m(b) ~ max_k p(b, k), so FP32 only holds numbers near 0 and the
 * magnitudes (~ -700 nats for an MNIST image) stay in FP64:
 *     msg_g(j) = (O(b) + m(b)) + log sum_k exp(w[j, k]) exp(p(b, k) - m(b)).
 *
 * Memory reuse. A message lives in a slot only until its parent has read it. Slots are assigned
 * on the host in evaluation order; a slot given to group g after its previous occupant's parent
 * q has read it records q in `wait`, so g (per batch tile) starts only after q is done with that
 * tile. The persistent kernels honour this through counters, the tile kernel through flags in
 * shared memory per (group, slice of a block's samples); the layered (gemm) path honours it
 * because q's layer precedes g's layer.
 */
#ifndef PC_LAYERS_CUDA_CIRCUIT_CUH
#define PC_LAYERS_CUDA_CIRCUIT_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "base/fail.h"
#include "eval/backend.h"
#include "eval/cuda/gpu_log.h"
#include "eval/cuda/gpu_plan.h"
#include "pc/status.h"

/* Checks a CUDA runtime call; on failure records which call failed and jumps to `fail`
 * (the enclosing function must have `pc_status st` and a `fail:` label). */
#define PC_GPU_CHECK(call)                                                                  \
    do {                                                                                    \
        cudaError_t pc_e_ = (call);                                                         \
        if (pc_e_ != cudaSuccess) {                                                         \
            st = pc_fail(pc_e_ == cudaErrorMemoryAllocation ? PC_ERR_DEVICE_MEMORY            \
                                                            : PC_ERR_CUDA,                  \
                         "%s failed: %s", #call, cudaGetErrorString(pc_e_));                \
            goto fail;                                                                      \
        }                                                                                   \
    } while (0)

#define PC_BLAS_CHECK(call)                                                                 \
    do {                                                                                    \
        cublasStatus_t pc_b_ = (call);                                                      \
        if (pc_b_ != CUBLAS_STATUS_SUCCESS) {                                               \
            st = pc_fail(pc_b_ == CUBLAS_STATUS_ALLOC_FAILED ? PC_ERR_DEVICE_MEMORY          \
                                                             : PC_ERR_CUDA,                 \
                         "%s failed: %s", #call, cublasGetStatusString(pc_b_));             \
            goto fail;                                                                      \
        }                                                                                   \
    } while (0)


/* Everything a kernel reads, by value (device pointers). */
typedef struct pc_gpu_args {
    const pc_gpu_group *groups; /* [G] */
    const int32_t *vars;        /* [V] */
    const int32_t *children;    /* [G - 1] child group ids */
    const int32_t *child_slot;  /* [G - 1] their slots */
    const float *input;         /* [V][C + 1][K]; row C is the marginal (missing value) */
    const float *wexp;          /* [G][K][K] exp(trans_logw[t_g, j, k]) at [g][k][j] (fuse, gemm) */
    const float *wf;            /* [G][KP][KP] exp(trans_logw), PC_GPU_W_ROWS (fuse warp) */
    const float *wt;            /* [G][KP / 4][KP][4] exp(trans_logw), PC_GPU_W_QUADS (fuse tile) */
    const int32_t *wq;          /* [G][K][K] Q16.16 base-2 trans_logw at [g][k][j] (int) */
    const int32_t *table;       /* [PC_INT_TABLE_LEN] IntLSE correction table (int) */
    const double *root_logw;    /* [K] */
    const int32_t *chain_begin;  /* [chains + 1] (fuse warp: the pass's chain plan, gpu_plan.h) */
    const int32_t *chain_groups; /* [G] */
    const int32_t *chain_child;  /* [G - 1] chain (= slot) of each child entry */
    const int32_t *chain_vb;     /* [G + 1] chain_groups[m]'s variables: chain_vars[vb[m] ..
                                    vb[m + 1]), so a chain's are contiguous */
    const int32_t *chain_vars;   /* [V] the variables in chain order */
    const int32_t *chain_queue;  /* [chains] the chains in the order the queue hands them out */
    const float *in_lin;         /* [V][C + 1][KP] exp(input - in_max), 0 past K (fuse warp) */
    const double *in_max;        /* [V][C + 1] max_k input[v][c][k] (fuse warp) */
    const double *root_wexp;     /* [KP] exp(root_logw), 0 past K (fuse warp) */
    const uint8_t *x;           /* [n][V] */
    const uint8_t *missing;     /* [n][V] or NULL */
    double *off;                /* [slots][chunk] */
    float *rel;                 /* [slots][chunk][K] */
    double *logp;               /* [n] */
    int32_t *done;              /* [G][tiles] finished j-tiles per (group, tile) */
    int32_t *queue;             /* next work item of the persistent kernels */
    int64_t chunk;              /* samples per slot row block */
    int32_t n;                  /* samples in this forward */
    int32_t V, C, K, G;
    int32_t tiles, jtiles;      /* batch tiles of n, output tiles of K */
} pc_gpu_args;

/* What differs between the backends. */
typedef struct pc_gpu_state pc_gpu_state;

typedef struct pc_gpu_impl {
    pc_backend backend;
    /* How a forward pass is scheduled ("tile", "persistent", "layered"), or NULL when it
     * depends on the circuit: then strategy_for(s) says. */
    const char *strategy;
    const char *(*strategy_for)(const pc_gpu_state *s);
    /* Chooses tile sizes for K; returns PC_ERR_UNSUPPORTED (with a message) when K is too
     * large for its shared-memory tiles. */
    pc_status (*configure)(pc_gpu_state *s);
    /* Uploads the backend's own parameter form. */
    pc_status (*upload)(pc_gpu_state *s);
    /* Queues one forward pass of a->n samples on `stream` (it is being captured as a graph),
     * including any counter resets the pass needs. */
    pc_status (*enqueue)(pc_gpu_state *s, const pc_gpu_args *a, cudaStream_t stream);
    /* Device bytes the backend adds to the common buffers for `chunk` samples, and their
     * allocation and release; all three NULL for a backend with no buffers of its own. */
    size_t (*extra_bytes)(const pc_gpu_state *s, int64_t chunk);
    pc_status (*alloc_extra)(pc_gpu_state *s);
    void (*free_extra)(pc_gpu_state *s);
} pc_gpu_impl;

#define PC_GPU_GRAPHS 6

/* One chain plan of the warp strategy on the device (gpu_plan.h, cuda_fuse_warp.cu). */
typedef struct pc_gpu_chain_dev {
    int32_t *begin, *groups, *child; /* [chains + 1], [G], [G] */
    int32_t *vb, *vars;              /* [G + 1], [V]: each chain's variables in one range */
    int32_t *queue;                  /* [2][chains], the queue orders (plan order, by path) */
} pc_gpu_chain_dev;

typedef struct pc_gpu_graph {
    int64_t n;
    int buf, has_missing, used;
    const char *strategy; /* fuse: the strategy its enqueue chose (else NULL) */
    cudaGraphExec_t exec;
} pc_gpu_graph;

struct pc_gpu_state {
    const pc_gpu_impl *impl;
    const pc_circuit *circuit; /* the caller's, or `padded` */
    pc_circuit *padded;        /* fuse: the circuit with pc_gpu_fuse_states(K) states (owned) */
    int32_t V, C, K, G, num_slots;
    int64_t chunk;         /* samples per forward pass (internal batch) */
    int32_t bm, bn;        /* batch-tile and output-tile sizes */
    int32_t max_tiles;     /* tiles of a full chunk */
    size_t smem;           /* dynamic shared memory of the main kernel */
    int32_t grid;          /* persistent grid size (fuse: below FUSE_LARGE_N samples) */
    int32_t grid_large;    /* fuse persistent: from FUSE_LARGE_N samples */
    int32_t sms;
    int tile_ok;           /* fuse: runs the tile strategy (K <= 128 and the circuit fits) */
    int warp_ok;           /* fuse: can run the warp strategy (K <= PC_GPU_WARP_MAX_K) */
    pc_gpu_chains chains[PC_GPU_CHAIN_PLANS]; /* the warp strategy's chain plans (host), when
                                                 warp_ok (gpu_plan.h) */
    int32_t grid_warp[PC_GPU_WARP_FORMS]; /* fuse warp strategy: resident blocks per form */
    const char *last_strategy; /* fuse: the strategy of the last forward pass run */
    /* host copies of the plan */
    pc_gpu_group *h_groups;
    /* device */
    pc_gpu_group *d_groups;
    int32_t *d_vars, *d_children, *d_child_slot;
    pc_gpu_chain_dev d_chains[PC_GPU_CHAIN_PLANS]; /* fuse warp */
    float *d_in_lin;                                        /* fuse warp */
    double *d_in_max, *d_root_wexp;                         /* fuse warp */
    float *d_input, *d_wexp, *d_wf, *d_wt;
    int32_t *d_tile_sched;        /* fuse tile: its schedules, one per block size T = 4 2^i */
    size_t tile_sched_at[4];      /* where T = 4 2^i's starts in d_tile_sched (int32s), T <= 32 */
    int32_t *d_wq, *d_table;
    double *d_root_logw;
    double *d_off;
    float *d_rel;
    uint8_t *d_x[2], *d_missing[2];
    double *d_logp[2];
    int32_t *d_done; /* [G * max_tiles + 1]: the last entry is the work queue */
    /* gemm scratch */
    float *d_e, *d_y;
    double *d_mo;
    void *d_blas_ws;
    cublasHandle_t blas;
    int32_t gemm_cap; /* groups per batched SGEMM */
    /* host staging (pinned) */
    uint8_t *h_x[2], *h_missing[2];
    double *h_logp[2];
    cudaStream_t compute, copy;
    cudaEvent_t ev_in[2], ev_out[2];
    pc_gpu_graph graphs[PC_GPU_GRAPHS];
    int graph_clock;
    size_t bytes, peak_bytes;
};

#ifdef __cplusplus
extern "C" {
#endif

/* Device allocation that keeps the byte count; fails with PC_ERR_DEVICE_MEMORY naming `what`. */
pc_status pc_gpu_alloc(pc_gpu_state *s, void **ptr, size_t bytes, const char *what);
void pc_gpu_release(pc_gpu_state *s, void *ptr, size_t bytes);

/* The ops-table functions, given the backend's impl. */
pc_status pc_gpu_create(const pc_gpu_impl *impl, const pc_circuit *circuit,
                        const pc_eval_opts *opts, void **state);
pc_status pc_gpu_evaluate(void *state, const uint8_t *x, const uint8_t *missing, int64_t n,
                          double *logp);
size_t pc_gpu_peak_bytes(const void *state);
void pc_gpu_destroy(void *state);

/* Fills args for a forward pass of n samples from buffer `buf`. */
void pc_gpu_fill_args(const pc_gpu_state *s, int64_t n, int buf, int has_missing,
                      pc_gpu_args *a);

/* Uploads exp(trans_logw) transposed per group to s->d_wexp (fuse and gemm). */
pc_status pc_gpu_upload_wexp(pc_gpu_state *s);

/* exp(trans_logw) of every group as the fuse tile and warp kernels read it: FP32, padded to
 * KP = pc_gpu_kp(K, layout) (K <= 128: 16, 32, 64 or 128; in the warp kernel's rows layout
 * above 64 K rounded up to a multiple of 16), zero outside K x K (a padded j has no output, a padded k no
 * input) and for the root. PC_GPU_W_ROWS: [g][j][k] (warp: a lane reads 16-byte words of an
 * output's row); PC_GPU_W_QUADS: [g][k / 4][j][k % 4] (tile: lane j reads its row's quads, so
 * a warp's 32 lanes read 512 consecutive bytes; the rows layout made every lane read its own
 * cache line, 1.05x slower at K = 32, batch 1024). FP32 as in the persistent strategy: FP64
 * would double the bytes read from L2 (measured in the warp strategy: K = 32, batch 4096,
 * 0.664 ms with FP64 weights against 0.621). */
typedef enum { PC_GPU_W_ROWS, PC_GPU_W_QUADS } pc_gpu_w_layout;
int pc_gpu_kp(int K, pc_gpu_w_layout layout);
size_t pc_gpu_padded_w_bytes(const pc_gpu_state *s, pc_gpu_w_layout layout);
pc_status pc_gpu_upload_padded_w(pc_gpu_state *s, pc_gpu_w_layout layout, float **dst);

/* Queues the reset of the persistent kernels' counters for a forward pass described by a. */
pc_status pc_gpu_reset_counters(const pc_gpu_args *a, cudaStream_t stream);

/* The fuse strategies (cuda_fuse.cu: persistent; cuda_fuse_tile.cu: tile, for small K). */
extern const pc_gpu_impl pc_gpu_fuse_persistent_impl;
extern const pc_gpu_impl pc_gpu_fuse_tile_impl;
extern const pc_gpu_impl pc_gpu_fuse_warp_impl;
/* The warp strategy's parts (cuda_fuse_warp.cu), for fuse's choosing strategy: its grid (and
 * warp_ok, so that the slot plan adds its chains), its weights and chains (uploaded, counted
 * and released), one forward pass queued; whether it takes the circuit's input rows. Its
 * largest K is PC_GPU_WARP_MAX_K (gpu_plan.h). */
int pc_gpu_fuse_warp_takes(const pc_gpu_state *s);
pc_status pc_gpu_fuse_warp_prepare(pc_gpu_state *s);
pc_status pc_gpu_fuse_warp_upload(pc_gpu_state *s);
size_t pc_gpu_fuse_warp_bytes(const pc_gpu_state *s, int64_t chunk);
void pc_gpu_fuse_warp_release(pc_gpu_state *s);
pc_status pc_gpu_fuse_warp_enqueue(pc_gpu_state *s, const pc_gpu_args *a, cudaStream_t stream);
/* Whether the tile strategy can take the circuit (K and the shared memory its codes need). */
int pc_gpu_fuse_tile_fits(const pc_circuit *circuit);
/* The tile strategy's parts, for fuse's choosing strategy: kernel limits set once, its
 * weights (uploaded, counted and released), and one forward pass queued. */
pc_status pc_gpu_fuse_tile_prepare(pc_gpu_state *s);
pc_status pc_gpu_fuse_tile_upload(pc_gpu_state *s);
size_t pc_gpu_fuse_tile_bytes(const pc_gpu_state *s, int64_t chunk);
void pc_gpu_fuse_tile_release(pc_gpu_state *s);
pc_status pc_gpu_fuse_tile_enqueue(pc_gpu_state *s, const pc_gpu_args *a, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

/* ---- device helpers shared by the kernels --------------------------------------------------*/
#ifdef __CUDACC__

/* Elements (sample, k) each thread gathers at once in phase A: their loads are independent, so
 * issuing them together hides memory latency (one element at a time leaves every load of a
 * chain variable id -> pixel value -> input row waiting on the previous one). */
#define PC_GPU_GATHER 4
/* Largest block of the kernels that call phase A (its max reduction uses one float each), and
 * the static shared memory that takes, which the dynamic part must leave room for. */
#define PC_GPU_MAX_THREADS 256
#define PC_GPU_STATIC_SMEM (PC_GPU_MAX_THREADS * 4 + 64)

/* FP32 <-> FP64 without the flush-to-zero fix-ups that --use_fast_math puts around each
 * conversion (an FMUL, or a compare and an FMUL): an FP32 subnormal is flushed by the next FTZ
 * instruction that takes it, and kept (more exactly) by the FP64 arithmetic. */
static __device__ __forceinline__ double pc_gpu_f2d(float x) {
    double r;
    asm("cvt.f64.f32 %0, %1;" : "=d"(r) : "f"(x));
    return r;
}
static __device__ __forceinline__ float pc_gpu_d2f(double x) {
    float r;
    asm("cvt.rn.f32.f64 %0, %1;" : "=f"(r) : "d"(x));
    return r;
}

/* d += a b for one 16 x 8 x 4S FP64 tile on the tensor cores (mma.m16n8k8 for S = 2,
 * m16n8k16 for S = 4; products and sums in FP64). Lane 4 g + t gives, for its k slots
 * j = 0 .. S - 1 (k = t + 4 j), A[g][k] = a0[j], A[g + 8][k] = a1[j] and B[k][g] = b[j], and
 * holds D[g][2 t + c] in d0[c], D[g + 8][2 t + c] in d1[c]. Measured on the H200
 * (bench/gpu_dmma_rate.cu): these shapes run at the FP64 tensor cores' 66 TFLOP/s, the
 * 8 x 8 x 4 shape (mma.m8n8k4) at half that. */
template <int S>
static __device__ __forceinline__ void pc_gpu_dmma16(double (&d0)[2], double (&d1)[2],
                                                     const double *a0, const double *a1,
                                                     const double *b) {
    static_assert(S == 2 || S == 4, "k slots per lane: 2 or 4");
    if constexpr (S == 2)
        asm("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, "
            "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
            : "+d"(d0[0]), "+d"(d0[1]), "+d"(d1[0]), "+d"(d1[1])
            : "d"(a0[0]), "d"(a1[0]), "d"(a0[1]), "d"(a1[1]), "d"(b[0]), "d"(b[1]));
    else
        asm("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, "
            "{%4, %5, %6, %7, %8, %9, %10, %11}, {%12, %13, %14, %15}, {%0, %1, %2, %3};"
            : "+d"(d0[0]), "+d"(d0[1]), "+d"(d1[0]), "+d"(d1[1])
            : "d"(a0[0]), "d"(a1[0]), "d"(a0[1]), "d"(a1[1]), "d"(a0[2]), "d"(a1[2]),
              "d"(a0[3]), "d"(a1[3]), "d"(b[0]), "d"(b[1]), "d"(b[2]), "d"(b[3]));
}

/* O(b) = sum of the children's offsets. Messages are written during the persistent kernels by
 * other blocks: they are read through L2 (ld.cg), never from a possibly stale L1 line. */
static __device__ __forceinline__ double pc_gpu_offset(const pc_gpu_args &a,
                                                       const pc_gpu_group &g, int64_t b) {
    double o = 0.0;
#pragma unroll 4
    for (int i = g.child_begin; i < g.child_end; i++) {
        int slot = __ldg(a.child_slot + i);
        o += __ldcg(a.off + (size_t)slot * a.chunk + b);
    }
    return o;
}

/* Shared-memory layout of the first phase of every sum kernel, for a tile of bm samples:
 * es[k * ld + b] (float, [K][ld]) and per-sample m (double) and O (double). */
static __host__ __device__ __forceinline__ int pc_gpu_ld(int bm) { return bm + 4; }

/* Visits the elements i = start, start + step, ... of a grid of rows of `cols` (i = row * cols +
 * col) with an add and a compare per element instead of a division. */
struct pc_gpu_walk {
    int row, col, drow, dcol, cols;
    __device__ pc_gpu_walk(int start, int step, int cols_)
        : row(start / cols_), col(start % cols_), drow(step / cols_), dcol(step % cols_),
          cols(cols_) {}
    __device__ __forceinline__ void next() {
        row += drow, col += dcol;
        if (col >= cols) col -= cols, row++;
    }
};

/* Phase A's gather, any K: es[k * ld + b] = p(b, k) (+ root_logw[k] at the root; -inf for the
 * nb <= b < bm past the batch, whose loads read sample b0), PC_GPU_GATHER elements (b, k) per
 * thread at a time, k fastest so the loads of input rows and messages coalesce. */
static __device__ __forceinline__ void pc_gpu_gather1(const pc_gpu_args &a, const pc_gpu_group &g,
                                                      int64_t b0, int bm, int nb, int ld,
                                                      bool root, float *es) {
    const int K = a.K, nt = blockDim.x, count = bm * K;
    const size_t V = (size_t)a.V;
    pc_gpu_walk at(threadIdx.x, nt, K);
    for (int base = threadIdx.x; base < count; base += nt * PC_GPU_GATHER) {
        int r[PC_GPU_GATHER], bl[PC_GPU_GATHER], k[PC_GPU_GATHER];
        double p[PC_GPU_GATHER];
#pragma unroll
        for (int u = 0; u < PC_GPU_GATHER; u++) {
            r[u] = at.row, k[u] = at.col, bl[u] = at.row < nb ? at.row : 0, p[u] = 0.0;
            at.next();
        }
        for (int vi = g.var_begin; vi < g.var_end; vi++) {
            const int v = __ldg(a.vars + vi);
            const float *rows = a.input + (size_t)v * (a.C + 1) * K;
            const uint8_t *xv = a.x + (size_t)b0 * V + v;
            const uint8_t *mv = a.missing ? a.missing + (size_t)b0 * V + v : NULL;
            int code[PC_GPU_GATHER];
#pragma unroll
            for (int u = 0; u < PC_GPU_GATHER; u++)
                code[u] = (mv && __ldg(mv + bl[u] * V)) ? a.C : __ldg(xv + bl[u] * V);
#pragma unroll
            for (int u = 0; u < PC_GPU_GATHER; u++)
                p[u] += (double)__ldg(rows + code[u] * K + k[u]);
        }
        for (int ci = g.child_begin; ci < g.child_end; ci++) {
            const float *rel =
                a.rel + ((size_t)__ldg(a.child_slot + ci) * a.chunk + (size_t)b0) * K;
#pragma unroll
            for (int u = 0; u < PC_GPU_GATHER; u++) p[u] += (double)__ldcg(rel + bl[u] * K + k[u]);
        }
#pragma unroll
        for (int u = 0; u < PC_GPU_GATHER; u++) {
            if (r[u] >= bm) continue;
            if (root) p[u] += __ldg(a.root_logw + k[u]);
            es[k[u] * ld + r[u]] = r[u] < nb ? (float)p[u] : -INFINITY;
        }
    }
}

/* The same for K % 4 == 0, four adjacent k of a sample per 16-byte load: a thread has Q such
 * quads (4 Q elements) in flight at a time, so an item of bm x K elements waits on Q times
 * fewer load round trips than with pc_gpu_gather1's four elements. Quads are numbered with
 * 4 adjacent k-quads of 8 adjacent samples per 32 threads: the 4 lanes of a sample read 64
 * contiguous bytes (whole sectors), and their stores to es fall on few banks at once. */
template <int Q>
static __device__ __forceinline__ void pc_gpu_gather4(const pc_gpu_args &a, const pc_gpu_group &g,
                                                      int64_t b0, int bm, int nb, int ld,
                                                      bool root, float *es) {
    const int K = a.K, K4 = K / 4, nt = blockDim.x;
    const int K4P = (K4 + 3) & ~3, count = bm * K4P; /* quads, k-quads padded to 4 */
    const size_t V = (size_t)a.V;
    /* Quad i is sample (i / 4) % bm, k-quad 4 ((i / 4) / bm) + i % 4; i % 4 is the thread's
     * own (nt % 4 == 0), and i / 4 advances by nt / 4 per quad, walked without divisions. */
    pc_gpu_walk at(threadIdx.x >> 2, nt >> 2, bm);
    for (int base = threadIdx.x; base < count; base += nt * Q) {
        int r[Q], bl[Q], k[Q];
        bool in[Q];
        double p[Q][4];
#pragma unroll
        for (int u = 0; u < Q; u++) {
            r[u] = at.col;
            k[u] = 4 * ((at.row << 2) + (threadIdx.x & 3));
            in[u] = base + u * nt < count && k[u] < K;
            at.next();
            bl[u] = r[u] < nb ? r[u] : 0;
            if (!in[u]) k[u] = 0;
#pragma unroll
            for (int c = 0; c < 4; c++) p[u][c] = 0.0;
        }
        for (int vi = g.var_begin; vi < g.var_end; vi++) {
            const int v = __ldg(a.vars + vi);
            const float *rows = a.input + (size_t)v * (a.C + 1) * K;
            const uint8_t *xv = a.x + (size_t)b0 * V + v;
            const uint8_t *mv = a.missing ? a.missing + (size_t)b0 * V + v : NULL;
            int code[Q];
#pragma unroll
            for (int u = 0; u < Q; u++)
                code[u] = (mv && __ldg(mv + bl[u] * V)) ? a.C : __ldg(xv + bl[u] * V);
#pragma unroll
            for (int u = 0; u < Q; u++) {
                const float4 w = __ldg(reinterpret_cast<const float4 *>(rows + code[u] * K + k[u]));
                p[u][0] += (double)w.x, p[u][1] += (double)w.y;
                p[u][2] += (double)w.z, p[u][3] += (double)w.w;
            }
        }
        for (int ci = g.child_begin; ci < g.child_end; ci++) {
            const float *rel =
                a.rel + ((size_t)__ldg(a.child_slot + ci) * a.chunk + (size_t)b0) * K;
#pragma unroll
            for (int u = 0; u < Q; u++) {
                const float4 q = __ldcg(reinterpret_cast<const float4 *>(rel + bl[u] * K + k[u]));
                p[u][0] += (double)q.x, p[u][1] += (double)q.y;
                p[u][2] += (double)q.z, p[u][3] += (double)q.w;
            }
        }
#pragma unroll
        for (int u = 0; u < Q; u++) {
            if (!in[u]) continue;
#pragma unroll
            for (int c = 0; c < 4; c++) {
                double x = p[u][c];
                if (root) x += __ldg(a.root_logw + k[u] + c);
                es[(k[u] + c) * ld + r[u]] = r[u] < nb ? (float)x : -INFINITY;
            }
        }
    }
}

/* Phase A: for the bm <= 128 samples from b0, computes O(b), m(b) = max_k p(b, k) (+ root_logw[k]
 * at the root) and leaves es[k * ld + b] = exp(p(b, k) + w_root - m(b)) (0 for samples past n;
 * ld >= bm, pc_gpu_ld(bm) unless the caller's reads want another bank pattern), or
 * with `shifted` the difference p(b, k) - m(b) itself (-inf past n).
 * p (inputs plus children's relative messages, a few terms of a few nats each) is summed in
 * FP64 and kept in FP32: it is near 0, so its rounding (<= 1e-6 nats) is what FP32 costs; the
 * large part of every node value, O(b) + m(b), stays in FP64. Any m near the maximum works
 * since O + m is carried exactly. Called by all threads of a block of <= PC_GPU_MAX_THREADS
 * (a multiple of 4); ends with a barrier. */
template <int QUADS>
static __device__ void pc_gpu_phase_a(const pc_gpu_args &a, const pc_gpu_group &g, int64_t b0,
                                      int bm, int ld, bool root, bool shifted, float *es,
                                      double *m, double *o) {
    __shared__ float part[PC_GPU_MAX_THREADS];
    const int K = a.K, nt = blockDim.x;
    const int count = bm * K;
    const int nb = a.n - b0 < bm ? (int)(a.n - b0) : bm; /* samples in range, >= 1 */
    /* 0. O(b), whose loads then travel with the gather's instead of after it. */
    for (int bl = threadIdx.x; bl < bm; bl += nt)
        o[bl] = bl < nb ? pc_gpu_offset(a, g, b0 + bl) : 0.0;
    /* 1. es[k][b] = p(b, k): with QUADS > 0, 16-byte loads, QUADS per thread at a time, where
     *    K allows and a thread has more than one quad (measured on the H200, MNIST tree, fuse
     *    at batch 512: K = 128 1.48 -> 1.13 ms, K = 256 3.52 -> 2.20; at K = 64 the narrow
     *    items' single quad per thread cost 0.54 -> 0.59 ms). The int kernel does without
     *    (QUADS = 0): there the quads' registers cost more than they saved (K = 64, batch
     *    4096: 13.5 -> 16.8 ms). */
    bool quads = false;
    if constexpr (QUADS > 0) {
        quads = K % 4 == 0 && bm * K > 4 * nt;
        if (quads) pc_gpu_gather4<QUADS>(a, g, b0, bm, nb, ld, root, es);
    }
    if (!quads) pc_gpu_gather1(a, g, b0, bm, nb, ld, root, es);
    __syncthreads();
    /* 2. m(b): q = nt / bm threads per sample take every q-th k, then one thread per sample
     *    combines them. */
    const int q = nt / bm;
    if (threadIdx.x < q * bm) {
        const int bl = threadIdx.x % bm;
        float mx = -INFINITY;
        for (int kk = threadIdx.x / bm; kk < K; kk += q) mx = fmaxf(mx, es[kk * ld + bl]);
        part[threadIdx.x] = mx;
    }
    __syncthreads();
    for (int bl = threadIdx.x; bl < bm; bl += nt) {
        float mx = part[bl];
        for (int j = 1; j < q; j++) mx = fmaxf(mx, part[j * bm + bl]);
        m[bl] = (double)mx;
    }
    __syncthreads();
    /* 3. es -= m, exponentiated unless `shifted` (b fastest: conflict-free shared memory). */
    pc_gpu_walk e(threadIdx.x, nt, bm);
    for (int i = threadIdx.x; i < count; i += nt, e.next()) {
        const float mb = (float)m[e.col], v = es[e.row * ld + e.col];
        float x;
        if (mb == -INFINITY) x = shifted ? -INFINITY : 0.0f;
        else x = shifted ? v - mb : __expf(v - mb);
        es[e.row * ld + e.col] = x;
    }
    __syncthreads();
}

/* The root's output: log p(x_b) = O + m + log sum_k es[k * ld + b], summed in FP64. */
static __device__ void pc_gpu_root_out(const pc_gpu_args &a, int64_t b0, int bm, int ld,
                                       const float *es, const double *m, const double *o) {
    for (int bl = threadIdx.x; bl < bm; bl += blockDim.x) {
        int64_t b = b0 + bl;
        if (b >= a.n) continue;
        double sum = 0.0;
        for (int k = 0; k < a.K; k++) sum += (double)es[k * ld + bl];
        a.logp[b] = m[bl] == -INFINITY ? -INFINITY : o[bl] + m[bl] + log(sum);
    }
}

/* Waits until the counter at d reaches need: relaxed polls from L2, NS ns apart, then one
 * acquire load, so that what the counter's release published is visible to this thread (and,
 * after a barrier, to its block). One acquire rather than acquire polls: at GPU scope an
 * acquire invalidates the SM's whole L1 (CCTL.IVALL), every warp's cached lines with it.
 * need by reference: a kernel argument is read where it lives, as in the loop written out. */
template <unsigned NS>
static __device__ __forceinline__ void pc_gpu_acquire_count(const int32_t *d,
                                                            const int &need) {
    int seen;
    for (;;) {
        asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];" : "=r"(seen) : "l"(d) : "memory");
        if (seen >= need) break;
        __nanosleep(NS);
    }
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(seen) : "l"(d) : "memory");
}

/* Adds v to the counter at d as a release, which pc_gpu_acquire_count's acquire pairs with:
 * the stores this thread made before it, and those of the threads a barrier or __syncwarp
 * just ordered before it, are visible to whoever sees the new count. No fence by every
 * thread. */
static __device__ __forceinline__ void pc_gpu_release_add(int32_t *d, int v) {
    asm volatile("red.release.gpu.global.add.s32 [%0], %1;" ::"l"(d), "r"(v) : "memory");
}

#endif /* __CUDACC__ */

#endif
