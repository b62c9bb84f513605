/* Device code shared by the GPU query kernels (internal): teams and their reductions, the walk
 * over a layer's items, the gather of input terms, the children's messages and the block's
 * exclusive scan. A block holds the samples [b0, b0 + nb) of the chunk for every pass
 * (gpu_query_plan.h: teams, rows); node values are [n][G][K] doubles. */
#ifndef PC_GPU_QUERY_DEVICE_CUH
#define PC_GPU_QUERY_DEVICE_CUH

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "eval/cuda/query/gpu_query.cuh"

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

/* What a thread of a tree kernel's block works with: its team, the team's shared memory and
 * the block's samples [b0, b0 + nb) of the chunk (blockIdx.x's `rows`). */
struct gq_block {
    gq_team t;
    double *sh;
    int64_t b0;
    int nb;
};

static __device__ __forceinline__ gq_block gq_block_of(const pc_gq_args &a) {
    gq_block k;
    k.t = gq_team_of(a.team);
    k.sh = gq_team_smem(k.t, a.K);
    k.b0 = (int64_t)blockIdx.x * a.rows;
    k.nb = a.n - k.b0 < a.rows ? (int)(a.n - k.b0) : a.rows;
    return k;
}

/* f(g, b) over the block's items of every layer, children first (up) or the root first
 * (down), with a barrier after each layer: a layer reads what the one before wrote. */
template <class F>
static __device__ __forceinline__ void gq_for_layers(const pc_gq_args &a, const gq_block &k,
                                                     bool down, F f) {
    for (int i = 0; i < a.L; i++) {
        const int l = down ? a.L - 1 - i : i;
        gq_for_items(k.t, a.layer_start[l], a.layer_start[l + 1], k.b0, k.nb, f);
        __syncthreads();
    }
}

/* Offset of node (b, g, state 0) in P and M. */
static __device__ __forceinline__ size_t gq_node(const pc_gq_args &a, int64_t b, int g) {
    return ((size_t)b * a.G + g) * a.K;
}

/* The row of in[] that variable v of sample b reads: its value, or C when it is missing. */
static __device__ __forceinline__ const double *gq_in_row(const pc_gq_args &a, int64_t b, int v) {
    const size_t at = (size_t)b * a.V + v;
    const int code = a.missing && a.missing[at] ? a.C : a.x[at];
    return a.in + ((size_t)v * (a.C + 1) + code) * a.K;
}

/* Gather: P_g(b, k) = sum of the input terms of g's variables, added in their order from 0
 * (the CPU's order, so MPE adds the same numbers), four rows loaded at a time. With
 * count_missing, also draw[b][g] = the number of g's missing variables. */
static __device__ void gq_gather(const pc_gq_args &a, const gq_team &t, int64_t b0, int nb,
                                 bool count_missing) {
    gq_for_items(t, 0, a.G, b0, nb, [&](int g, int64_t b) {
        const pc_gpu_query_group gr = a.groups[g];
        for (int k = t.lane; k < a.K; k += t.size) {
            double s = 0.0;
            int vi = gr.var_begin;
            for (; vi + 4 <= gr.var_end; vi += 4) {
                const int32_t *v = a.vars + vi;
                const double p0 = gq_in_row(a, b, v[0])[k], p1 = gq_in_row(a, b, v[1])[k];
                const double p2 = gq_in_row(a, b, v[2])[k], p3 = gq_in_row(a, b, v[3])[k];
                s += p0, s += p1, s += p2, s += p3;
            }
            for (; vi < gr.var_end; vi++) s += gq_in_row(a, b, a.vars[vi])[k];
            a.P[gq_node(a, b, g) + k] = s;
        }
        if (count_missing && t.lane == 0) {
            int m = 0;
            for (int vi = gr.var_begin; a.missing && vi < gr.var_end; vi++)
                m += a.missing[(size_t)b * a.V + a.vars[vi]] != 0;
            a.draw[(size_t)b * a.G + g] = m;
        }
    });
}

/* P_g(b, .) += the children's messages in child order; sh[k] = P_g(b, k) for the team. */
static __device__ __forceinline__ void gq_add_children(const pc_gq_args &a, const gq_team &t,
                                                       int g, int64_t b, double *sh) {
    const pc_gpu_query_group gr = a.groups[g];
    double *P = a.P + gq_node(a, b, g);
    for (int k = t.lane; k < a.K; k += t.size) {
        double p = P[k];
        for (int ci = gr.child_begin; ci < gr.child_end; ci++)
            p += a.M[gq_node(a, b, a.children[ci]) + k];
        P[k] = p, sh[k] = p;
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
