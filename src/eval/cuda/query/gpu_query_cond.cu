/* The conditionals on the GPU: the posteriors (gpu_query_sp.cu), then the rows
 *   p(X_v = c | e) = sum_k post_g(k) cond[v][k][c]   for a missing v in group g,
 * one-hot on x_v for an observed v, NaN for a sample of probability 0, in float or double.
 * The output ([n][V][C], 800 KB per MNIST image in float) is what costs: a block takes one
 * variable for up to OUT_ROWS samples, so the variable's table [K][C] is read once per block
 * (a column per thread, in KR registers where K <= KR = 8, 16 or 32) and every store is a run
 * of C values; the stores skip the caches that hold the tables (__stcs). */
#include "eval/cuda/query/gpu_query_device.cuh"

#include "base/cuda_check.cuh"

#define OUT_ROWS 32
#define OUT_THREADS 256

pc_status pc_gq_launch_posteriors(const pc_gq_launch *l, const pc_gq_args *a,
                                  cudaStream_t stream);

/* Samples per output block: OUT_ROWS, fewer where their posteriors [rows][K] would not fit
 * 48 KiB of shared memory. */
static int out_rows(int K, size_t real_bytes) {
    const size_t fit = 48 * 1024 / ((size_t)K * real_bytes);
    return fit < OUT_ROWS ? (int)fit : OUT_ROWS;
}

/* Block (v, tile): variable v = blockIdx.x for samples [tile * rows, + rows); threads take
 * the values c. post [rows][K] in shared memory; the table's column c in KR registers, or read
 * from memory at every use for KR = 0. */
template <typename T, int KR>
static __global__ void out_kernel(const pc_gq_args a, const T *__restrict__ cond, T *probs,
                                  int rows) {
    extern __shared__ unsigned char out_smem[];
    T *post = reinterpret_cast<T *>(out_smem);
    const int v = blockIdx.x, K = a.K, C = a.C;
    const int64_t b0 = (int64_t)blockIdx.y * rows;
    const int nb = a.n - b0 < rows ? (int)(a.n - b0) : rows, g = a.var_group[v];
    for (int i = threadIdx.x; i < nb * K; i += blockDim.x)
        post[i] = (T)a.P[gq_node(a, b0 + i / K, g) + i % K];
    __syncthreads();
    const T *cv = cond + (size_t)v * K * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        T reg[KR > 0 ? KR : 1];
#pragma unroll
        for (int k = 0; k < KR; k++) reg[k] = k < K ? cv[(size_t)k * C + c] : T(0);
        for (int bl = 0; bl < nb; bl++) {
            const int64_t b = b0 + bl;
            const size_t at = (size_t)b * a.V + v;
            T p;
            if (a.logp[b] == -INFINITY) {
                p = T(NAN); /* no conditionals */
            } else if (!(a.missing && a.missing[at])) {
                p = c == a.x[at] ? T(1) : T(0);
            } else {
                const T *pb = post + (size_t)bl * K;
                p = T(0);
                if (KR > 0) {
#pragma unroll
                    for (int k = 0; k < KR; k++)
                        if (k < K) p = fma(pb[k], reg[k], p);
                } else {
                    for (int k = 0; k < K; k++) p = fma(pb[k], cv[(size_t)k * C + c], p);
                }
            }
            __stcs(probs + at * C + c, p);
        }
    }
}

template <typename T>
static pc_status launch_out(const pc_gq_args *a, const T *cond, T *probs, cudaStream_t stream) {
    pc_status st = PC_OK;
    const int rows = out_rows(a->K, sizeof(T));
    const dim3 grid((unsigned)a->V, (unsigned)((a->n + rows - 1) / rows));
    const size_t smem = (size_t)rows * a->K * sizeof(T);
    const int K = a->K;
    void (*kernel)(pc_gq_args, const T *, T *, int) = K <= 8    ? out_kernel<T, 8>
                                                      : K <= 16 ? out_kernel<T, 16>
                                                      : K <= 32 ? out_kernel<T, 32>
                                                                : out_kernel<T, 0>;
    kernel<<<grid, OUT_THREADS, smem, stream>>>(*a, cond, probs, rows);
    PC_CUDA_CHECK(cudaGetLastError());
fail:
    return st;
}

pc_status pc_gq_launch_conditionals(const pc_gq_launch *l, const pc_gq_args *a,
                                    cudaStream_t stream, const void *cond, void *probs, int f64) {
    if (a->K > PC_GQ_OUT_MAX_K)
        return pc_fail(PC_ERR_UNSUPPORTED, "GPU conditionals: K = %d is above %d", a->K,
                       PC_GQ_OUT_MAX_K);
    const pc_status st = pc_gq_launch_posteriors(l, a, stream);
    if (st != PC_OK) return st;
    return f64 ? launch_out(a, (const double *)cond, (double *)probs, stream)
               : launch_out(a, (const float *)cond, (float *)probs, stream);
}
