/* `gemm`: layer by layer, three steps per block of up to `gemm_cap` groups of one layer:
 *   1. prodexp kernel: E[gi][b][k] = exp(p(b, k) - m(b)) and mo[gi][b] = O(b) + m(b) (FP64);
 *   2. cuBLAS SGEMM, strided-batched over the groups: Y[gi] = E[gi] exp(W_g)^T;
 *   3. log kernel: rel[slot][b][j] = log Y[gi][b][j], off[slot][b] = mo[gi][b].
 * Offsets are written in step 3, after every group of the block has read its children in
 * step 1, because a group may take over a slot that a group of the same layer reads.
 * The root (the last group) gets the shared FP64 root kernel. A second exact path and a
 * cross-check of `fuse`. */
#include "base/fail.h"
#include "eval/cuda/cuda_circuit.cuh"

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

static int32_t gemm_cap_for(const pc_gpu_state *s, int64_t chunk) {
    const pc_circuit *c = s->circuit;
    int32_t widest = 1;
    for (int32_t l = 0; l < c->num_layers; l++) {
        int32_t w = c->layer_start[l + 1] - c->layer_start[l];
        widest = w > widest ? w : widest;
    }
    int64_t cap = (int64_t)(GEMM_SCRATCH / ((size_t)chunk * s->K * 8));
    cap = cap < 1 ? 1 : cap;
    return (int32_t)(cap < widest ? cap : widest);
}

static pc_status gemm_configure(pc_gpu_state *s) {
    pc_status st = PC_OK;
    int max_smem = 0;
    s->bm = GEMM_BM, s->bn = s->K;
    s->smem = (size_t)s->K * pc_gpu_ld(GEMM_BM) * 4 + 2 * GEMM_BM * 8;
    PC_GPU_CHECK(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    if (s->smem + PC_GPU_STATIC_SMEM > (size_t)max_smem)
        return pc_fail(PC_ERR_UNSUPPORTED,
                       "backend 'gemm': K = %d needs %zu bytes of shared memory per block, the "
                       "GPU has %d", s->K, s->smem, max_smem);
    PC_GPU_CHECK(cudaFuncSetAttribute(gemm_prodexp, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      (int)s->smem));
    PC_GPU_CHECK(cudaFuncSetAttribute(gemm_root, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      (int)s->smem));
fail:
    return st;
}

static size_t gemm_extra_bytes(const pc_gpu_state *s, int64_t chunk) {
    const size_t cap = (size_t)gemm_cap_for(s, chunk);
    return cap * (size_t)chunk * ((size_t)s->K * 8 + 8) + GEMM_BLAS_WS;
}

static pc_status gemm_alloc_extra(pc_gpu_state *s) {
    pc_status st = PC_OK;
    const size_t cap = (size_t)(s->gemm_cap = gemm_cap_for(s, s->chunk));
    const size_t rows = cap * (size_t)s->chunk;
    if ((st = pc_gpu_alloc(s, (void **)&s->d_e, rows * s->K * 4, "E scratch"))) return st;
    if ((st = pc_gpu_alloc(s, (void **)&s->d_mo, rows * 8, "offset scratch"))) return st;
    if ((st = pc_gpu_alloc(s, (void **)&s->d_y, rows * s->K * 4, "SGEMM output"))) return st;
    if ((st = pc_gpu_alloc(s, &s->d_blas_ws, GEMM_BLAS_WS, "cuBLAS workspace"))) return st;
    PC_BLAS_CHECK(cublasCreate(&s->blas));
    PC_BLAS_CHECK(cublasSetMathMode(s->blas, CUBLAS_DEFAULT_MATH));
    PC_BLAS_CHECK(cublasSetWorkspace(s->blas, s->d_blas_ws, GEMM_BLAS_WS));
fail:
    return st;
}

static void gemm_free_extra(pc_gpu_state *s) {
    if (s->blas) cublasDestroy(s->blas);
    s->blas = NULL;
    cudaFree(s->d_e), cudaFree(s->d_y), cudaFree(s->d_mo), cudaFree(s->d_blas_ws);
    s->d_e = s->d_y = NULL, s->d_mo = NULL, s->d_blas_ws = NULL;
}

static pc_status gemm_enqueue(pc_gpu_state *s, const pc_gpu_args *a, cudaStream_t stream) {
    pc_status st = PC_OK;
    const pc_circuit *c = s->circuit;
    const int K = a->K, last = a->G - 1;
    const float one = 1.0f, zero = 0.0f;
    const dim3 block(GEMM_THREADS);
    const unsigned tiles = (unsigned)a->tiles;
    double *mo = s->d_mo;
    PC_BLAS_CHECK(cublasSetStream(s->blas, stream));
    for (int32_t l = 0; l < c->num_layers; l++) {
        const int32_t lb = c->layer_start[l];
        const int32_t le = c->layer_start[l + 1] < last ? c->layer_start[l + 1] : last;
        for (int32_t g0 = lb; g0 < le; g0 += s->gemm_cap) {
            const int ng = le - g0 < s->gemm_cap ? le - g0 : s->gemm_cap;
            gemm_prodexp<<<dim3(tiles, (unsigned)ng), block, s->smem, stream>>>(*a, g0, s->d_e, mo);
            PC_GPU_CHECK(cudaGetLastError());
            PC_BLAS_CHECK(cublasSgemmStridedBatched(
                s->blas, CUBLAS_OP_N, CUBLAS_OP_N, K, a->n, K, &one, s->d_wexp + (size_t)g0 * K * K,
                K, (long long)K * K, s->d_e, K, (long long)a->n * K, &zero, s->d_y, K,
                (long long)a->n * K, ng));
            const int64_t total = (int64_t)ng * a->n * K;
            const int64_t want = (total + GEMM_THREADS - 1) / GEMM_THREADS;
            const unsigned grid = (unsigned)(want < 65535 ? want : 65535);
            gemm_log<<<grid, block, 0, stream>>>(*a, g0, ng, s->d_y, mo);
            PC_GPU_CHECK(cudaGetLastError());
        }
    }
    gemm_root<<<tiles, block, s->smem, stream>>>(*a);
    PC_GPU_CHECK(cudaGetLastError());
fail:
    return st;
}

static const pc_gpu_impl gemm_impl = {
    PC_BACKEND_GEMM, "layered",        NULL,             gemm_configure, pc_gpu_upload_wexp,
    gemm_enqueue,    gemm_extra_bytes, gemm_alloc_extra, gemm_free_extra};

static pc_status gemm_create(const pc_circuit *c, const pc_eval_opts *o, void **state) {
    return pc_gpu_create(&gemm_impl, c, o, state);
}

extern "C" const pc_backend_ops pc_backend_gemm_ops = {gemm_create, pc_gpu_evaluate,
                                                       pc_gpu_peak_bytes, pc_gpu_destroy};
