/* Device code shared by the GPU query kernels (internal): teams and their reductions, the
 * walks over the layers (a team or a thread per item), the gather of input terms by ranges of
 * variables, the children's messages and the block's exclusive scan. A block holds the samples
 * [b0, b0 + nb) of the chunk for every pass (gpu_query_plan.h: teams, rows) and their latent
 * states; node values are [n][G][K] doubles. */
#ifndef PC_GPU_QUERY_DEVICE_CUH
#define PC_GPU_QUERY_DEVICE_CUH

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "eval/cuda/query/gpu_query.cuh"

/* The tree kernels' launch bounds (gpu_query_plan.h). */
#define PC_GQ_TREE_BOUNDS __launch_bounds__(PC_GPU_QUERY_THREADS, PC_GPU_QUERY_BLOCKS_PER_SM)

/* A sum of K terms w e (w, e <= 1) is exact enough from here up; below it the sum is
 * recomputed as an exact LSE (ref's rule, query_sp_f64.h). */
#define PC_GQ_SAFE 0x1p-960

/* The lanes of one item: lane k holds the states k, k + size, ... of the item's K-vectors. */
struct gq_team {
    int lane, size;  /* 0 .. size - 1; 4, 8, 16 or 32 */
    int id, count;   /* the team's number in the block, teams in the block */
    int base;        /* its first lane in its warp */
    unsigned mask;   /* its lanes */
};

static __device__ __forceinline__ gq_team gq_team_of(int size) {
    gq_team t;
    t.size = size, t.lane = threadIdx.x % size;
    t.id = threadIdx.x / size, t.count = blockDim.x / size;
    t.base = (threadIdx.x % 32) / size * size;
    t.mask = size == 32 ? 0xffffffffu : ((1u << size) - 1u) << t.base;
    return t;
}

/* Reductions over the team: every lane gets the same value (the butterfly's pairs add and
 * compare the same two numbers). */
static __device__ __forceinline__ double gq_team_max(const gq_team &t, double v) {
    for (int o = t.size / 2; o > 0; o /= 2) v = fmax(v, __shfl_xor_sync(t.mask, v, o, t.size));
    return v;
}

static __device__ __forceinline__ double gq_team_sum(const gq_team &t, double v) {
    for (int o = t.size / 2; o > 0; o /= 2) v += __shfl_xor_sync(t.mask, v, o, t.size);
    return v;
}

/* The largest v over the team and the lowest index attaining it. */
static __device__ __forceinline__ void gq_team_argmax(const gq_team &t, double &v, int &i) {
    for (int o = t.size / 2; o > 0; o /= 2) {
        const double ov = __shfl_xor_sync(t.mask, v, o, t.size);
        const int oi = __shfl_xor_sync(t.mask, i, o, t.size);
        if (ov > v || (ov == v && oi < i)) v = ov, i = oi;
    }
}

/* The team's shared memory: two K-vectors, sh[0 .. K) and sh[K .. 2K). */
static __device__ __forceinline__ double *gq_team_smem(const gq_team &t, int K) {
    extern __shared__ double gq_smem[];
    return gq_smem + (size_t)t.id * 2 * K;
}

/* Calls f(g, b) for every item of groups [g0, g1) x samples [b0, b0 + nb), the team's share
 * (samples fastest, so that neighbouring teams read one group's weights). */
template <class F>
static __device__ __forceinline__ void gq_for_items(const gq_team &t, int g0, int g1, int64_t b0,
                                                    int nb, F f) {
    const int items = (g1 - g0) * nb;
    for (int it = t.id; it < items; it += t.count) f(g0 + it / nb, b0 + it % nb);
}

/* What a thread of a kernel's block works with: its team, the team's shared memory, the
 * block's samples [b0, b0 + nb) of the chunk (blockIdx.x's `rows`) and their latent states
 * z [nb][G] (shared memory after the teams' vectors where a.z_shared, else a.z from row b0). */
struct gq_block {
    gq_team t;
    double *sh;
    int64_t b0;
    int nb;
    int32_t *z;
};

/* teams: whether the kernel's shared memory starts with the teams' vectors. */
static __device__ __forceinline__ gq_block gq_block_of(const pc_gq_args &a, bool teams) {
    extern __shared__ double gq_smem[];
    gq_block k;
    k.t = gq_team_of(a.team);
    k.sh = gq_team_smem(k.t, a.K);
    k.b0 = (int64_t)blockIdx.x * a.rows;
    k.nb = a.n - k.b0 < a.rows ? (int)(a.n - k.b0) : a.rows;
    const size_t after = teams ? (size_t)k.t.count * 2 * a.K : 0; /* the teams' vectors */
    k.z = a.z_shared ? reinterpret_cast<int32_t *>(gq_smem + after) : a.z + (size_t)k.b0 * a.G;
    return k;
}

/* f(g, b) over the block's items of every layer, children first (up) or the root first
 * (down), a team per item, with a barrier after each layer: a layer reads what the one before
 * wrote. */
template <class F>
static __device__ __forceinline__ void gq_for_layers(const pc_gq_args &a, const gq_block &k,
                                                     bool down, F f) {
    for (int i = 0; i < a.L; i++) {
        const int l = down ? a.L - 1 - i : i;
        gq_for_items(k.t, a.layer_start[l], a.layer_start[l + 1], k.b0, k.nb, f);
        __syncthreads();
    }
}

/* The same from the root down with a thread per item: f(g, bl), bl the sample in the block. */
template <class F>
static __device__ __forceinline__ void gq_for_layers_down_threads(const pc_gq_args &a, int nb,
                                                                  F f) {
    for (int l = a.L - 1; l >= 0; l--) {
        const int g0 = a.layer_start[l], items = (a.layer_start[l + 1] - g0) * nb;
        for (int it = threadIdx.x; it < items; it += blockDim.x) f(g0 + it / nb, it % nb);
        __syncthreads();
    }
}

/* Offset of node (b, g, state 0) in P and M. */
static __device__ __forceinline__ size_t gq_node(const pc_gq_args &a, int64_t b, int g) {
    return ((size_t)b * a.G + g) * a.K;
}

/* Variables whose rows a gather loads at once. */
#define GQ_WINDOW 8

/* One lane's share of a gather unit: P_g(b, k) for the groups [g0, g1), walking their
 * variables in order (the groups' ranges are contiguous) in windows of GQ_WINDOW: a window's
 * variables, groups, masks and values are loaded together, then its rows together, then added
 * in order. With counts, also draw[b][g] = g's missing variables and rank[b][v] = v's place
 * among them. */
static __device__ void gq_gather_unit(const pc_gq_args &a, int g0, int g1, int64_t b, int k,
                                      bool counts) {
    const int C = a.C, K = a.K;
    const uint8_t *xb = a.x + (size_t)b * a.V;
    const uint8_t *mb = a.missing ? a.missing + (size_t)b * a.V : NULL;
    const int v0 = a.groups[g0].var_begin, v1 = a.groups[g1 - 1].var_end;
    double *P = a.P + gq_node(a, b, 0) + k;
    int32_t *draw = a.draw + (size_t)b * a.G, *rank = a.rank + (size_t)b * a.V;
    int g = g0, missing = 0;
    double s = 0.0;
    for (int w = v0; w < v1; w += GQ_WINDOW) {
        double p[GQ_WINDOW];
        int vg[GQ_WINDOW];
        bool miss[GQ_WINDOW];
#pragma unroll
        for (int i = 0; i < GQ_WINDOW; i++) {
            const int v = a.vars[w + i < v1 ? w + i : v1 - 1]; /* past the end: a harmless copy */
            const int value = xb[v]; /* loaded with the mask (unused where missing) */
            vg[i] = a.var_group[v], miss[i] = mb && mb[v];
            p[i] = a.in[((size_t)v * (C + 1) + (miss[i] ? C : value)) * K + k];
        }
#pragma unroll
        for (int i = 0; i < GQ_WINDOW; i++) {
            if (w + i >= v1) break;
            for (; g < vg[i]; g++) { /* the groups before this variable's are complete */
                P[(size_t)g * K] = s, s = 0.0;
                if (counts) draw[g] = missing, missing = 0;
            }
            s += p[i];
            if (counts && miss[i]) rank[a.vars[w + i]] = missing++;
        }
    }
    for (; g < g1; g++) {
        P[(size_t)g * K] = s, s = 0.0;
        if (counts) draw[g] = missing, missing = 0;
    }
}

/* Gather: P_g(b, k) = the sum of the input terms of g's variables, added in their order from 0
 * (the CPU's order, so MPE adds the same numbers), for every group of the block's samples. A
 * team takes one (range, sample) unit at a time (gpu_query_plan.h: the gather's ranges), lane
 * k the states k, k + size, ...; with counts (lane 0's pass) the missing counts and places. */
static __device__ void gq_gather(const pc_gq_args &a, const gq_block &k, bool counts) {
    const gq_team &t = k.t;
    for (int u = t.id; u < a.ranges * k.nb; u += t.count) {
        const int r = u / k.nb;
        for (int s = t.lane; s < a.K; s += t.size)
            gq_gather_unit(a, a.range_start[r], a.range_start[r + 1], k.b0 + u % k.nb, s,
                           counts && s == 0);
    }
}

/* P_g(b, .) += the children's messages in child order (their loads unrolled, so that they
 * travel together); sh[k] = P_g(b, k) for the team, and P_g written back where store. */
static __device__ __forceinline__ void gq_add_children(const pc_gq_args &a, const gq_team &t,
                                                       int g, int64_t b, double *sh, bool store) {
    const pc_gpu_query_group gr = a.groups[g];
    double *P = a.P + gq_node(a, b, g);
    const double *M = a.M + gq_node(a, b, 0);
    for (int k = t.lane; k < a.K; k += t.size) {
        double p = P[k];
#pragma unroll 4
        for (int ci = gr.child_begin; ci < gr.child_end; ci++)
            p += M[(size_t)a.children[ci] * a.K + k];
        if (store) P[k] = p;
        sh[k] = p;
    }
    __syncwarp(t.mask);
}

/* The exclusive prefix sum of v over the block's threads (a multiple of 32, at most 1024);
 * every thread calls it. */
static __device__ int gq_block_exclusive_scan(int v) {
    __shared__ int warp_total[32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    int x = v;
    for (int o = 1; o < 32; o *= 2) {
        const int y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    if (lane == 31) warp_total[warp] = x;
    __syncthreads();
    if (warp == 0) {
        int w = lane < warps ? warp_total[lane] : 0;
        for (int o = 1; o < 32; o *= 2) {
            const int y = __shfl_up_sync(0xffffffffu, w, o);
            if (lane >= o) w += y;
        }
        warp_total[lane] = w;
    }
    __syncthreads();
    const int before = (warp > 0 ? warp_total[warp - 1] : 0) + x - v;
    __syncthreads();
    return before;
}

#endif
