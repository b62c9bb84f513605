/* The tile strategy's trace points (gpu_trace.cuh: the TT records), in a PC_TRACE build only:
 * one record per (slice, part) of block 0, id = slice x 16 + part with slice = group x
 * per_group + the group's slice, and the last forward pass's slices per group. */
#ifndef PC_GPU_TILE_TRACE_CUH
#define PC_GPU_TILE_TRACE_CUH

#include "eval/cuda/gpu_trace.cuh"

#ifdef PC_TRACE
#include <stdio.h>

#define TILE_TRACE_MAX (8192 * 16)
__device__ int g_tile_trace_per_group;
__device__ long long g_tile_trace[TILE_TRACE_MAX][6];

/* Unit u's part `part` of block 0, run by `warp`: waits from c0 to c1 (t1), ends now. */
static __device__ __forceinline__ void tile_trace_unit(int u, int part, int warp, int per_group,
                                                       long long c0, long long c1,
                                                       long long t1) {
    const int id = u * 16 + part;
    if (blockIdx.x == 0 && (threadIdx.x & 31) == 0 && id < TILE_TRACE_MAX) {
        g_tile_trace_per_group = per_group;
        g_tile_trace[id][0] = warp, g_tile_trace[id][1] = c0, g_tile_trace[id][2] = c1;
        g_tile_trace[id][3] = clock64(), g_tile_trace[id][4] = t1;
        g_tile_trace[id][5] = pc_trace_time();
    }
}

/* Writes block 0's records of the last forward pass to stderr (TT lines). */
static void tile_trace_write(const pc_gpu_state *s) {
    static long long h[TILE_TRACE_MAX][6];
    int per_group = 1;
    if (cudaMemcpyFromSymbol(&per_group, g_tile_trace_per_group, sizeof per_group) !=
            cudaSuccess ||
        per_group < 1)
        return;
    const long long want = (long long)s->G * per_group * 16;
    const int n = want < TILE_TRACE_MAX ? (int)want : TILE_TRACE_MAX;
    if (cudaMemcpyFromSymbol(h, g_tile_trace, sizeof(long long) * 6 * n) != cudaSuccess) return;
    for (int id = 0; id < n; id++) {
        if (h[id][5] == 0) continue;
        const int group = id / 16 / per_group, slice = id / 16 % per_group;
        const pc_gpu_group *g = s->h_groups + group;
        fprintf(stderr, "TT %d %d %d %d %d", group, slice, id % 16,
                g->child_end - g->child_begin, g->wait);
        for (int c = g->child_begin; c < g->child_end && c < g->child_begin + 4; c++)
            fprintf(stderr, " c%d", s->circuit->group_children[c]);
        for (int k = 0; k < 6; k++) fprintf(stderr, " %lld", h[id][k]);
        fprintf(stderr, "\n");
    }
}
#endif

#endif
