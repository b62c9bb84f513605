/* `gemm`: layer by layer, three steps per block of up to `cap` groups of one layer:
 *   1. prodexp kernel: E[gi][b][k] = exp(p(b, k) - m(b)) and mo[gi][b] = O(b) + m(b) (FP64);
 *   2. cuBLAS SGEMM, strided-batched over the groups: Y[gi] = E[gi] exp(W_g)^T;
 *   3. log kernel: rel[slot][b][j] = log Y[gi][b][j], off[slot][b] = mo[gi][b].
 * Offsets are written by the log kernel, after every group of the block has read its children
 * in the prodexp kernel, because a group may take over a slot that a group of the same layer
 * reads.
 * The root (the last group) gets the shared FP64 root kernel. A second exact path and a
 * cross-check of `fuse`. */
#include <stdlib.h>

#include "base/fail.h"
#include "eval/cuda/gemm/cublas_lazy.h"
#include "eval/cuda/gpu_device.cuh"

#define GEMM_THREADS 256
#define GEMM_BM 64
/* Bytes for E and Y together per SGEMM block of groups, and cuBLAS's workspace (its guide
 * asks for 32 MiB on Hopper when capturing graphs). */
#define GEMM_SCRATCH (512u << 20)
#define GEMM_BLAS_WS (32u << 20)

/* Grid (tiles, groups of the block); dynamic shared memory as pc_gpu_phase_a needs it. */
static __global__ void __launch_bounds__(GEMM_THREADS) gemm_prodexp(pc_gpu_args a, int g0,
                                                                    float *e_out, double *mo) {
    extern __shared__ float4 smem4[];
    const int K = a.K, ld = pc_gpu_ld(GEMM_BM);
    float *es = reinterpret_cast<float *>(smem4);
    double *m = reinterpret_cast<double *>(es + (size_t)K * ld);
    double *o = m + GEMM_BM;
    const int gi = blockIdx.y;
    const pc_gpu_group g = a.groups[g0 + gi];
    const int64_t b0 = (int64_t)blockIdx.x * GEMM_BM;
    pc_gpu_phase_a<4>(a, g, b0, GEMM_BM, ld, false, false, es, m, o);
    float *e = e_out + (size_t)gi * a.n * K;
    for (int i = threadIdx.x; i < GEMM_BM * K; i += GEMM_THREADS) {
        const int bl = i / K, k = i - bl * K;
        const int64_t b = b0 + bl;
        if (b < a.n) e[b * K + k] = es[k * ld + bl];
    }
    for (int bl = threadIdx.x; bl < GEMM_BM; bl += GEMM_THREADS) {
        const int64_t b = b0 + bl;
        if (b < a.n) mo[(size_t)gi * a.n + b] = m[bl] == -INFINITY ? -INFINITY : o[bl] + m[bl];
    }
}

/* One thread per (gi, b, j) of the block. */
static __global__ void gemm_log(pc_gpu_args a, int g0, int ng, const float *y, const double *mo) {
    const int64_t total = (int64_t)ng * a.n * a.K;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t row = i / a.K;
        const int j = (int)(i - row * a.K);
        const int gi = (int)(row / a.n);
        const int64_t b = row - (int64_t)gi * a.n;
        const int slot = a.groups[g0 + gi].slot;
        a.rel[((size_t)slot * a.chunk + b) * a.K + j] = pc_gpu_log(y[i]);
        if (j == 0) a.off[(size_t)slot * a.chunk + b] = mo[row];
    }
}

static __global__ void __launch_bounds__(GEMM_THREADS) gemm_root(pc_gpu_args a) {
    extern __shared__ float4 smem4[];
    const int ld = pc_gpu_ld(GEMM_BM);
    float *es = reinterpret_cast<float *>(smem4);
    double *m = reinterpret_cast<double *>(es + (size_t)a.K * ld);
    double *o = m + GEMM_BM;
    const pc_gpu_group g = a.groups[a.G - 1];
    const int64_t b0 = (int64_t)blockIdx.x * GEMM_BM;
    pc_gpu_phase_a<4>(a, g, b0, GEMM_BM, ld, true, false, es, m, o);
    pc_gpu_root_out(a, b0, GEMM_BM, ld, es, m, o);
}

/* The strategy's own: cuBLAS and its handle, exp(w), the scratch of one block of groups. */
typedef struct gemm_state {
    const pc_cublas *blas;
    cublasHandle_t handle;
    int32_t cap; /* groups per batched SGEMM */
    size_t smem;
    float *d_wexp, *d_e, *d_y;
    double *d_mo;
    void *d_ws;
} gemm_state;

static gemm_state *gemm_of(const pc_gpu_state *s) { return (gemm_state *)s->strategy; }

static const char *gemm_strategy(const pc_gpu_state *s, int64_t n) {
    (void)s, (void)n;
    return "layered";
}

static int32_t gemm_cap_for(const pc_gpu_state *s, int64_t chunk) {
    const pc_circuit *c = s->circuit;
    int32_t widest = 1;
    for (int32_t l = 0; l < c->num_layers; l++) {
        const int32_t w = c->layer_start[l + 1] - c->layer_start[l];
        widest = w > widest ? w : widest;
    }
    int64_t cap = (int64_t)(GEMM_SCRATCH / ((size_t)chunk * s->K * 8));
    cap = cap < 1 ? 1 : cap;
    return (int32_t)(cap < widest ? cap : widest);
}

/* Loads cuBLAS (PC_ERR_UNSUPPORTED without it) and sets the kernels' shared memory. */
static pc_status gemm_configure(pc_gpu_state *s) {
    pc_status st = PC_OK;
    int32_t grid = 0;
    gemm_state *p = (gemm_state *)calloc(1, sizeof(gemm_state));
    s->strategy = p;
    if (!p) return pc_fail(PC_ERR_NOMEM, "backend 'gemm': out of host memory");
    if ((st = pc_cublas_load(&p->blas))) return st;
    s->bm = GEMM_BM;
    p->smem = (size_t)s->K * pc_gpu_ld(GEMM_BM) * 4 + 2 * GEMM_BM * 8;
    if ((st = pc_gpu_kernel_grid(s, (const void *)gemm_prodexp, GEMM_THREADS, p->smem,
                                 PC_GPU_STATIC_SMEM, "backend 'gemm'", &grid)))
        return st;
    return pc_gpu_kernel_grid(s, (const void *)gemm_root, GEMM_THREADS, p->smem,
                              PC_GPU_STATIC_SMEM, "backend 'gemm'", &grid);
}

static size_t gemm_bytes(const pc_gpu_state *s, int64_t chunk) {
    const size_t cap = (size_t)gemm_cap_for(s, chunk);
    return pc_gpu_wexp_bytes(s) + cap * (size_t)chunk * ((size_t)s->K * 8 + 8) + GEMM_BLAS_WS;
}

/* exp(w), the scratch for s->chunk samples, and the cuBLAS handle with its workspace. */
static pc_status gemm_upload(pc_gpu_state *s) {
    pc_status st = PC_OK;
    gemm_state *p = gemm_of(s);
    const size_t cap = (size_t)(p->cap = gemm_cap_for(s, s->chunk));
    const size_t rows = cap * (size_t)s->chunk;
    if ((st = pc_gpu_upload_wexp(s, &p->d_wexp)) ||
        (st = pc_gpu_alloc(s, (void **)&p->d_e, rows * s->K * 4, "E scratch")) ||
        (st = pc_gpu_alloc(s, (void **)&p->d_mo, rows * 8, "offset scratch")) ||
        (st = pc_gpu_alloc(s, (void **)&p->d_y, rows * s->K * 4, "SGEMM output")) ||
        (st = pc_gpu_alloc(s, &p->d_ws, GEMM_BLAS_WS, "cuBLAS workspace")))
        return st;
    PC_CUBLAS_CHECK(p->blas->create(&p->handle));
    PC_CUBLAS_CHECK(p->blas->set_math_mode(p->handle, CUBLAS_DEFAULT_MATH));
    PC_CUBLAS_CHECK(p->blas->set_workspace(p->handle, p->d_ws, GEMM_BLAS_WS));
fail:
    return st;
}

static void gemm_release(pc_gpu_state *s) {
    gemm_state *p = gemm_of(s);
    if (!p) return;
    if (p->handle) p->blas->destroy(p->handle);
    const size_t rows = (size_t)p->cap * (size_t)s->chunk;
    pc_gpu_release(s, p->d_wexp, pc_gpu_wexp_bytes(s));
    pc_gpu_release(s, p->d_e, rows * s->K * 4);
    pc_gpu_release(s, p->d_mo, rows * 8);
    pc_gpu_release(s, p->d_y, rows * s->K * 4);
    pc_gpu_release(s, p->d_ws, GEMM_BLAS_WS);
    free(p);
    s->strategy = NULL;
}

/* One block of ng groups from g0 of one layer: prodexp, the batched SGEMM, the logs. */
static pc_status gemm_block(const pc_gpu_state *s, const gemm_state *p, const pc_gpu_args *a,
                            int32_t g0, int ng, cudaStream_t stream) {
    pc_status st = PC_OK;
    const int K = a->K;
    const float one = 1.0f, zero = 0.0f;
    gemm_prodexp<<<dim3((unsigned)a->tiles, (unsigned)ng), GEMM_THREADS, p->smem, stream>>>(
        *a, g0, p->d_e, p->d_mo);
    PC_CUDA_CHECK(cudaGetLastError());
    PC_CUBLAS_CHECK(p->blas->sgemm_strided_batched(
        p->handle, CUBLAS_OP_N, CUBLAS_OP_N, K, a->n, K, &one, p->d_wexp + (size_t)g0 * K * K, K,
        (long long)K * K, p->d_e, K, (long long)a->n * K, &zero, p->d_y, K, (long long)a->n * K,
        ng));
    {
        const int64_t total = (int64_t)ng * a->n * K;
        const int64_t want = (total + GEMM_THREADS - 1) / GEMM_THREADS;
        const unsigned grid = (unsigned)(want < 65535 ? want : 65535);
        gemm_log<<<grid, GEMM_THREADS, 0, stream>>>(*a, g0, ng, p->d_y, p->d_mo);
        PC_CUDA_CHECK(cudaGetLastError());
    }
    (void)s;
fail:
    return st;
}

static pc_status gemm_enqueue(pc_gpu_state *s, const pc_gpu_args *a, cudaStream_t stream) {
    pc_status st = PC_OK;
    const gemm_state *p = gemm_of(s);
    const pc_circuit *c = s->circuit;
    const int last = a->G - 1;
    PC_CUBLAS_CHECK(p->blas->set_stream(p->handle, stream));
    for (int32_t l = 0; l < c->num_layers; l++) {
        const int32_t lb = c->layer_start[l];
        const int32_t le = c->layer_start[l + 1] < last ? c->layer_start[l + 1] : last;
        for (int32_t g0 = lb; g0 < le; g0 += p->cap)
            if ((st = gemm_block(s, p, a, g0, le - g0 < p->cap ? le - g0 : p->cap, stream)))
                return st;
    }
    gemm_root<<<(unsigned)a->tiles, GEMM_THREADS, p->smem, stream>>>(*a);
    PC_CUDA_CHECK(cudaGetLastError());
fail:
    return st;
}

static const pc_gpu_impl gemm_impl = {
    .backend = PC_BACKEND_GEMM,
    .strategy_for = gemm_strategy,
    .configure = gemm_configure,
    .plan = NULL,
    .bytes = gemm_bytes,
    .upload = gemm_upload,
    .enqueue = gemm_enqueue,
    .release = gemm_release,
};

static pc_status gemm_create(const pc_circuit *c, const pc_eval_opts *o, void **state) {
    return pc_gpu_create(&gemm_impl, c, o, state);
}

extern "C" const pc_backend_ops pc_backend_gemm_ops = PC_GPU_OPS(gemm_create);
