/* The warp strategy's trace points (gpu_trace.cuh: the TR, IT and CH records), in a PC_TRACE
 * build only. TR: per chain, its item of sample tile 0; IT: every item; the wait's end per
 * resident warp (the bottom's wait records it, the chain's item reads it back). */
#ifndef PC_GPU_WARP_TRACE_CUH
#define PC_GPU_WARP_TRACE_CUH

#include "eval/cuda/gpu_trace.cuh"

#ifdef PC_TRACE
#include <stdio.h>

#define WARP_TRACE_CHAINS 8192
#define WARP_TRACE_FIELDS 24
#define WARP_TRACE_ITEMS (1 << 18)
#define WARP_TRACE_WARPS 8192
__device__ long long g_warp_trace[WARP_TRACE_CHAINS][WARP_TRACE_FIELDS];
__device__ long long g_warp_items[WARP_TRACE_ITEMS][4];
__device__ long long g_warp_seen[WARP_TRACE_WARPS][2];

/* This resident warp's slot of g_warp_seen. */
static __device__ __forceinline__ unsigned warp_trace_slot() {
    return blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
}

/* The end of a bottom's wait for its children, for the item of tile 0. */
static __device__ __forceinline__ void warp_trace_seen(bool active, int t, int lane) {
    if (active && t == 0 && lane == 0 && warp_trace_slot() < WARP_TRACE_WARPS)
        g_warp_seen[warp_trace_slot()][0] = pc_trace_time(),
        g_warp_seen[warp_trace_slot()][1] = clock64();
}

/* One item's records: chain c, tile t of S samples. */
struct warp_trace {
    int c;
    bool on;      /* TR: tile 0, lane 0, an active warp */
    bool item_on; /* IT */
    long long item;
    __device__ __forceinline__ void tr(int i, long long v) const {
        if (on) g_warp_trace[c][i] = v;
    }
    template <class A>
    __device__ __forceinline__ warp_trace(const A &a, int c_, int t, int S, int lane,
                                          bool active) {
        c = c_;
        on = t == 0 && lane == 0 && active && c < WARP_TRACE_CHAINS;
        item = (long long)c * a.tiles * (16 / S) + t;
        item_on = active && lane == 0 && item < WARP_TRACE_ITEMS;
        if (item_on) {
            unsigned sm;
            asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
            g_warp_items[item][0] = pc_trace_time();
            g_warp_items[item][3] = ((long long)c << 40) | ((long long)t << 8) | sm;
        }
    }
    __device__ __forceinline__ void begin(int cb, int ce) const {
        tr(0, c), tr(1, ce - cb), tr(3, pc_trace_time()), tr(6, clock64());
    }
    __device__ __forceinline__ void staged(int gi) const { tr(7, clock64()), tr(2, gi); }
    __device__ __forceinline__ void bottom_done() const {
        if (on) tr(4, g_warp_seen[warp_trace_slot()][0]), tr(8, g_warp_seen[warp_trace_slot()][1]);
        if (item_on) g_warp_items[item][1] = pc_trace_time();
    }
    __device__ __forceinline__ void gathered(int i) const {
        if (i < 4) tr(9 + 2 * i, clock64());
    }
    __device__ __forceinline__ void produced(int i) const {
        if (i < 4) tr(10 + 2 * i, clock64());
    }
    __device__ __forceinline__ void done() const {
        tr(5, pc_trace_time());
        if (item_on) g_warp_items[item][2] = pc_trace_time();
    }
};

/* Writes the records of the last forward pass to stderr (TR, IT and CH lines), for the chain
 * plan it took. */
static void warp_trace_write(const pc_gpu_state *s, const pc_gpu_chains *ch) {
    static long long h[WARP_TRACE_CHAINS][WARP_TRACE_FIELDS];
    static long long it[WARP_TRACE_ITEMS][4];
    const pc_circuit *c = s->circuit;
    const int n = ch->num_chains < WARP_TRACE_CHAINS ? ch->num_chains : WARP_TRACE_CHAINS;
    if (n > 0 && cudaMemcpyFromSymbol(h, g_warp_trace, sizeof(long long) * WARP_TRACE_FIELDS * n) ==
                     cudaSuccess)
        for (int i = 0; i < n; i++) {
            const pc_gpu_group *gg = s->h_groups + (int)h[i][2];
            const int nch = gg->child_end - gg->child_begin;
            int kids[4] = {-1, -1, -1, -1};
            for (int k = 0; k < nch && k < 4; k++) kids[k] = ch->child_chain[gg->child_begin + k];
            fprintf(stderr, "TR %d %lld %d %d %d %d %d", i, h[i][1], nch, kids[0], kids[1],
                    kids[2], kids[3]);
            for (int k = 3; k < 17; k++) fprintf(stderr, " %lld", h[i][k]);
            fprintf(stderr, "\n");
        }
    if (cudaMemcpyFromSymbol(it, g_warp_items, sizeof it) == cudaSuccess)
        for (int i = 0; i < WARP_TRACE_ITEMS; i++)
            if (it[i][0] != 0)
                fprintf(stderr, "IT %lld %lld %lld %lld %lld %lld\n", it[i][3] >> 40,
                        (it[i][3] >> 8) & 0xffffffff, it[i][3] & 0xff, it[i][0], it[i][1],
                        it[i][2]);
    for (int32_t i = 0; i < ch->num_chains; i++) {
        fprintf(stderr, "CH %d |", i);
        for (int32_t m = ch->begin[i]; m < ch->begin[i + 1]; m++) {
            const int32_t g = ch->groups[m];
            fprintf(stderr, " %d:%d", c->child_start[g + 1] - c->child_start[g],
                    c->var_start[g + 1] - c->var_start[g]);
        }
        fprintf(stderr, " |");
        const int32_t b = ch->groups[ch->begin[i]];
        for (int32_t k = c->child_start[b]; k < c->child_start[b + 1]; k++)
            fprintf(stderr, " %d", ch->child_chain[k]);
        fprintf(stderr, "\n");
    }
}
#endif

#endif
