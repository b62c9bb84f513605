/* Sampling from p(x) on the GPU: one thread per sample walks the groups from the root down as
 * src/eval/query/query_sample.c does, over the same cumulative tables (root_cdf, prior_cdf,
 * x_cdf) with the same draws (gpu_query_rng.h: the CPU's stream, its draw numbers), so its
 * rows are the CPU's bit for bit. z is [G][n] here (neighbouring threads, neighbouring words).
 * A group's variables are drawn four at a time: four independent searches in flight instead
 * of one chain of dependent loads. */
#include "eval/cuda/query/gpu_query_device.cuh"
#include "eval/cuda/query/gpu_query_rng.h"

#include "base/cuda_check.cuh"

#define PRIOR_THREADS 128
#define PRIOR_WAY 4

/* Values of the `count` <= PRIOR_WAY variables vars[0 ..) given latent state z, their draws
 * numbered d0, d0 + 1, ..., into the sample's row out. */
static __device__ void draw_values(const pc_gq_args &a, const int32_t *vars, int count, int z,
                                   uint64_t stream, int d0, uint8_t *out) {
    const double *cdf[PRIOR_WAY];
    double target[PRIOR_WAY];
    int lo[PRIOR_WAY];
#pragma unroll
    for (int u = 0; u < PRIOR_WAY; u++) {
        const int v = u < count ? vars[u] : vars[0];
        cdf[u] = a.x_cdf + ((size_t)v * a.K + z) * a.C;
        target[u] = pc_gq_unit(stream, d0 + u) * cdf[u][a.C - 1];
        lo[u] = 0;
    }
    /* pc_gq_search for the four at once. */
    for (int step = a.half_c; step > 0; step >>= 1)
#pragma unroll
        for (int u = 0; u < PRIOR_WAY; u++)
            if (lo[u] + step - 1 < a.C && cdf[u][lo[u] + step - 1] <= target[u]) lo[u] += step;
#pragma unroll
    for (int u = 0; u < PRIOR_WAY; u++)
        if (u < count) out[vars[u]] = (uint8_t)(lo[u] < a.C - 1 ? lo[u] : a.C - 1);
}

static __global__ void prior_kernel(const pc_gq_args a) {
    const int64_t b = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= a.n) return;
    const int K = a.K;
    const uint64_t stream = pc_gq_stream(a.seed, a.first + a.row0 + b);
    uint8_t *out = a.out + (size_t)b * a.V;
    for (int g = a.G - 1; g >= 0; g--) {
        const pc_gpu_query_group gr = a.groups[g];
        const int32_t zp = gr.parent < 0 ? 0 : a.z[(size_t)gr.parent * a.n + b];
        const double *cdf = gr.parent < 0 ? a.root_cdf : a.prior_cdf + ((size_t)g * K + zp) * K;
        const int z = pc_gq_search(cdf, K, a.half_k, pc_gq_unit(stream, gr.draw) * cdf[K - 1]);
        a.z[(size_t)g * a.n + b] = z;
        for (int vi = gr.var_begin; vi < gr.var_end; vi += PRIOR_WAY) {
            const int count = gr.var_end - vi < PRIOR_WAY ? gr.var_end - vi : PRIOR_WAY;
            draw_values(a, a.vars + vi, count, z, stream, gr.draw + 1 + (vi - gr.var_begin), out);
        }
    }
}

pc_status pc_gq_launch_sample_prior(const pc_gq_args *a, cudaStream_t stream) {
    pc_status st = PC_OK;
    const unsigned blocks = (unsigned)((a->n + PRIOR_THREADS - 1) / PRIOR_THREADS);
    prior_kernel<<<blocks, PRIOR_THREADS, 0, stream>>>(*a);
    PC_CUDA_CHECK(cudaGetLastError());
fail:
    return st;
}
