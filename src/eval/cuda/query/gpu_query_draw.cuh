/* Device code of both GPU samplers (internal): the values' draws, once every latent state of
 * the block's samples is known, one thread per (sample, variable), four binary searches in
 * flight per thread. Draws are numbered as the CPU numbers them (gpu_query_rng.h), so a value
 * is the CPU's for the same latent state. */
#ifndef PC_GPU_QUERY_DRAW_CUH
#define PC_GPU_QUERY_DRAW_CUH

#include "eval/cuda/query/gpu_query_device.cuh"
#include "eval/cuda/query/gpu_query_rng.h"

/* Searches of one thread in flight together. */
#define GQ_DRAW_WAY 4

/* pc_gq_search(cdf, n, half, target) for the GQ_DRAW_WAY rows at once: each lo[u] the count of
 * cdf[u][.] <= target[u] (nondecreasing rows), at most n - 1. */
static __device__ __forceinline__ void gq_search_way(const double *const (&cdf)[GQ_DRAW_WAY],
                                                     const double (&target)[GQ_DRAW_WAY], int n,
                                                     int half, int (&lo)[GQ_DRAW_WAY]) {
#pragma unroll
    for (int u = 0; u < GQ_DRAW_WAY; u++) lo[u] = 0;
    for (int step = half; step > 0; step >>= 1)
#pragma unroll
        for (int u = 0; u < GQ_DRAW_WAY; u++)
            if (lo[u] + step - 1 < n && cdf[u][lo[u] + step - 1] <= target[u]) lo[u] += step;
#pragma unroll
    for (int u = 0; u < GQ_DRAW_WAY; u++) lo[u] = lo[u] < n - 1 ? lo[u] : n - 1;
}

/* The values of the block's samples given their latent states k.z: out[b][v] for every v, the
 * missing ones (all of them for p(x): prior) drawn from x_cdf[v][z_g], the observed ones
 * copied. Draw numbers: p(x) var_draw[v]; with evidence draw[b][g] + 1 + rank[b][v] (the
 * draw numbers of Z_g by then). Rows of probability 0 (log p = -inf) are left alone. */
static __device__ void gq_draw_values(const pc_gq_args &a, const gq_block &k, bool prior) {
    const int V = a.V, C = a.C, K = a.K, per = GQ_DRAW_WAY * (int)blockDim.x;
    for (int i0 = threadIdx.x; i0 < k.nb * V; i0 += per) {
        const double *cdf[GQ_DRAW_WAY];
        double target[GQ_DRAW_WAY];
        int lo[GQ_DRAW_WAY];
        bool draw[GQ_DRAW_WAY];
#pragma unroll
        for (int u = 0; u < GQ_DRAW_WAY; u++) {
            const int i = i0 + u * (int)blockDim.x, bl = i / V, v = i % V;
            const int64_t b = k.b0 + bl;
            const size_t at = (size_t)b * V + v;
            draw[u] = i < k.nb * V &&
                      (prior || (a.logp[b] > -INFINITY && a.missing && a.missing[at]));
            cdf[u] = a.x_cdf, target[u] = -1.0; /* no draw: a search that stays at 0 */
            if (!draw[u]) continue;
            const int g = a.var_group[v], z = k.z[(size_t)bl * a.G + g];
            const int d = prior ? a.var_draw[v] : a.draw[(size_t)b * a.G + g] + 1 + a.rank[at];
            cdf[u] = a.x_cdf + ((size_t)v * K + z) * C;
            target[u] = pc_gq_unit(pc_gq_stream(a.seed, a.first + a.row0 + b), d) * cdf[u][C - 1];
        }
        gq_search_way(cdf, target, C, a.half_c, lo);
#pragma unroll
        for (int u = 0; u < GQ_DRAW_WAY; u++) {
            const int i = i0 + u * (int)blockDim.x;
            if (i >= k.nb * V) continue;
            const size_t at = (size_t)k.b0 * V + i;
            if (draw[u]) a.out[at] = (uint8_t)lo[u];
            else if (!prior && a.logp[k.b0 + i / V] > -INFINITY) a.out[at] = a.x[at];
        }
    }
}

#endif
